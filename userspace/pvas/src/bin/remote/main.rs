//! sky-pvas-remote: one end of a persistent queue between machines
//! (RDMA; sky_pvas::pmq::remote). The sender sends message k (pattern k,
//! the k-th size of --sizes, cycled) for k after what the queue already
//! holds up to --messages; the receiver takes messages until --messages are
//! consumed and checks every byte. With --retry-for, a side whose
//! connection breaks (the peer left, the link went down) opens the queue
//! again and goes on from its durable state; with --applied, the receiver
//! records each message it applies in a file, as an application that
//! applies every message exactly once does. For the benchmark: --compute
//! and --latency ([`bench`]). Prints `ok ...` lines and exits 0, or
//! `error: ...` and exits 1.

use clap::Parser;
use sky_pvas::pattern;
use sky_pvas::pmq::remote::Role;
use sky_pvas::Error;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod bench;
mod end;

#[derive(Parser)]
#[command(name = "sky-pvas-remote")]
struct Cli {
    #[command(flatten)]
    end: end::End,
    /// The owner starts a new epoch (earlier messages never count again).
    #[arg(long)]
    fresh: bool,
    /// Messages in all, from the first of the epoch.
    #[arg(long, default_value_t = 100)]
    messages: u64,
    /// Message sizes, cycled by sequence number.
    #[arg(long, value_delimiter = ',', default_value = "64")]
    sizes: Vec<usize>,
    /// Open the queue again when the connection breaks, for up to this many
    /// seconds since it last opened or moved a message (0: give up at
    /// once).
    #[arg(long, default_value_t = 0)]
    retry_for: u64,
    /// Give up waiting for the peer after this many seconds (0: wait while
    /// it is there).
    #[arg(long, default_value_t = 0)]
    timeout: u64,
    /// Receiver: append the sequence number of each message applied to
    /// this file, and skip one already there (a message taken but not yet
    /// consumed for good when the process died comes again).
    #[arg(long)]
    applied: Option<PathBuf>,
    /// Receiver: having applied message N, stop inside the dequeue, before
    /// it is consumed for good (print `ok holding N`, then wait
    /// --hold-for): the moment a crash makes a message come again.
    #[arg(long)]
    hold_in_take: Option<u64>,
    /// How long to hold (seconds; 0: until killed).
    #[arg(long, default_value_t = 0)]
    hold_for: u64,
    /// Receiver: compute a matrix product sized to each message (up to
    /// 128 x 128 doubles) between dequeues, as the paper's receiver does.
    #[arg(long)]
    compute: bool,
    /// Both ends: the sender stamps each message with the time its enqueue
    /// starts and waits for it to be consumed before the next; the
    /// receiver reports the enqueue-to-dequeue latency (both ends on one
    /// clock: one machine). Messages of at least 8 bytes.
    #[arg(long)]
    latency: bool,
    /// Sender: enqueue this many messages per call (a push sender moves
    /// up to its batch, 8 at most, in one chain).
    #[arg(long, default_value_t = 1, conflicts_with = "latency")]
    batch: usize,
}

fn main() {
    let cli = Cli::parse();
    // The queue logs the peers it refuses.
    let _ = simplelog::TermLogger::init(
        log::LevelFilter::Warn,
        simplelog::Config::default(),
        simplelog::TerminalMode::Stderr,
        simplelog::ColorChoice::Never,
    );
    match run(&cli) {
        Ok(()) => {}
        Err(e) => {
            println!("error: {e}");
            std::process::exit(1);
        }
    }
}

fn size_of(sizes: &[usize], seq: u64) -> usize {
    sizes[(seq as usize - 1) % sizes.len()]
}

/// What the receiver applied: its file, and the last sequence number in it.
struct Applied {
    file: Option<std::fs::File>,
    last: Option<u64>,
    /// Messages that came again after they were applied.
    again: u64,
}

impl Applied {
    fn open(path: Option<&Path>) -> Result<Applied, Error> {
        let Some(path) = path else {
            return Ok(Applied {
                file: None,
                last: None,
                again: 0,
            });
        };
        let io = |e| Error::io(path.display(), e);
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(io(e)),
        };
        let mut last = None;
        for line in text.lines() {
            let seq: u64 = line.parse().map_err(|_| {
                Error::Invalid(format!(
                    "{}: {line:?} is not a sequence number",
                    path.display()
                ))
            })?;
            if last.is_some_and(|l| seq != l + 1) || (last.is_none() && seq != 1) {
                return Err(Error::Invalid(format!(
                    "{}: {seq} after {last:?}: a message applied twice or lost",
                    path.display()
                )));
            }
            last = Some(seq);
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        Ok(Applied {
            file: Some(file),
            last: Some(last.unwrap_or(0)),
            again: 0,
        })
    }

    /// Applies message `seq` once: false if it was applied before.
    fn apply(&mut self, seq: u64) -> Result<bool, Error> {
        let Some(file) = &mut self.file else {
            return Ok(true);
        };
        let last = self.last.unwrap_or(0);
        if seq <= last {
            self.again += 1;
            return Ok(false);
        }
        if seq != last + 1 {
            return Err(Error::Invalid(format!(
                "message {seq} after {last}: one was lost"
            )));
        }
        writeln!(file, "{seq}").map_err(|e| Error::io("the applied file", e))?;
        self.last = Some(seq);
        Ok(true)
    }
}

fn run(cli: &Cli) -> Result<(), Error> {
    let least = if cli.latency { 8 } else { 1 };
    if cli.sizes.is_empty()
        || cli
            .sizes
            .iter()
            .any(|&s| s < least || s > cli.end.entry_size as usize)
    {
        return Err(Error::Invalid(format!(
            "--sizes must be {least} to {} bytes each",
            cli.end.entry_size
        )));
    }
    let mut applied = Applied::open(cli.applied.as_deref())?;
    let mut fresh = cli.fresh;
    let mut progress = Instant::now();
    let started = Instant::now();
    loop {
        match session(cli, fresh, &mut applied, &mut progress) {
            Ok(()) => break,
            // The connection broke: open again from the durable state.
            Err(Error::Rdma(why)) if progress.elapsed() < Duration::from_secs(cli.retry_for) => {
                println!(
                    "ok reopen at={:.1}s after: {why}",
                    started.elapsed().as_secs_f64()
                );
                std::thread::sleep(Duration::from_millis(200));
                fresh = false;
            }
            Err(e) => return Err(e),
        }
    }
    if let (Some(path), Some(last)) = (&cli.applied, applied.last) {
        println!(
            "ok applied 1..{last} each once (again={}) in {}",
            applied.again,
            path.display()
        );
    }
    Ok(())
}

/// One connection's worth: opens the queue and moves messages until done
/// or the connection breaks.
fn session(
    cli: &Cli,
    fresh: bool,
    applied: &mut Applied,
    progress: &mut Instant,
) -> Result<(), Error> {
    let role = cli.end.role();
    let q = cli.end.connect(fresh)?;
    let remote = q.remote().expect("connect opens a queue between machines");
    *progress = Instant::now();
    if cli.timeout > 0 {
        remote.set_timeout(Some(Duration::from_secs(cli.timeout)));
    }
    let at = q.position()?;
    // How entries are made durable is the sender's to choose.
    let durability = match role {
        Role::Sender => format!("{:?}", remote.durability()),
        Role::Receiver => "-".into(),
    };
    println!(
        "ok open epoch={} enqueued={} consumed={} durability={durability} medium={:?} counters={:?}",
        at.epoch,
        at.enqueued,
        at.consumed,
        remote.medium(),
        remote.placement()
    );
    let t = Instant::now();
    let mut bytes = 0u64;
    match role {
        Role::Sender => {
            let per_call = cli.batch.clamp(1, remote.batch().max(1));
            let mut bufs = vec![vec![0u8; cli.end.entry_size as usize]; per_call];
            let mut k = at.enqueued + 1;
            while k <= cli.messages {
                let n = per_call.min((cli.messages + 1 - k) as usize);
                let mut msgs: Vec<&[u8]> = Vec::with_capacity(n);
                for (i, buf) in bufs.iter_mut().take(n).enumerate() {
                    let seq = k + i as u64;
                    let msg = &mut buf[..size_of(&cli.sizes, seq)];
                    pattern::fill(seq, msg);
                    if cli.latency {
                        bench::stamp(msg);
                    }
                    bytes += msg.len() as u64;
                    msgs.push(msg);
                }
                let last = q.enqueue_many(&msgs)?;
                let want = k + n as u64 - 1;
                if last != want {
                    return Err(Error::Invalid(format!(
                        "messages {k}..={want} went in as ..={last}"
                    )));
                }
                if cli.latency {
                    q.flush()?;
                }
                *progress = Instant::now();
                k += n as u64;
            }
            q.flush()?;
        }
        Role::Receiver => {
            let mut bad = 0u64;
            let mut expected = at.consumed + 1;
            let mut latencies = Vec::new();
            let mut product = 0.0;
            let skip = if cli.latency { 8 } else { 0 };
            while q.position()?.consumed < cli.messages {
                q.dequeue_with(|seq, payload| {
                    // In order, none skipped, none twice: seq follows the
                    // consumed count this run began from.
                    if seq != expected
                        || payload.len() != size_of(&cli.sizes, seq)
                        || pattern::first_mismatch_after(seq, payload, skip).is_some()
                    {
                        bad += 1;
                    } else if cli.latency {
                        latencies.push(bench::since_stamp(payload));
                    }
                    if cli.compute {
                        product += bench::product(payload);
                    }
                    applied.apply(seq)?;
                    if cli.hold_in_take == Some(seq) {
                        println!("ok holding {seq}");
                        loop {
                            if cli.hold_for > 0 {
                                std::thread::sleep(Duration::from_secs(cli.hold_for));
                                break;
                            }
                            std::thread::sleep(Duration::from_secs(60));
                        }
                    }
                    expected = seq + 1;
                    bytes += payload.len() as u64;
                    Ok(())
                })?;
                *progress = Instant::now();
            }
            if bad > 0 {
                return Err(Error::Invalid(format!("{bad} messages arrived wrong")));
            }
            println!("ok took first={} last={}", at.consumed + 1, expected - 1);
            if cli.latency {
                let (p50, p99) = bench::quantiles_us(&mut latencies);
                println!("ok latency n={} p50_us={p50} p99_us={p99}", latencies.len());
            }
            if cli.compute {
                println!("ok computed sum={product:.3}");
            }
        }
    }
    let secs = t.elapsed().as_secs_f64().max(1e-9);
    let end = q.position()?;
    println!(
        "ok done epoch={} enqueued={} consumed={} bytes={bytes} mb_per_s={:.2}",
        end.epoch,
        end.enqueued,
        end.consumed,
        bytes as f64 / secs / (1 << 20) as f64
    );
    Ok(())
}
