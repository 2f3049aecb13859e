//! sky-pvas-remote: one end of a persistent queue between machines
//! (RDMA; sky_pvas::pmq::remote). The sender sends message k (pattern k,
//! the k-th size of --sizes, cycled) for k after what the queue already
//! holds up to --messages; the receiver takes messages until --messages are
//! consumed and checks every byte. Prints `ok ...` lines and exits 0, or
//! `error: ...` and exits 1.

use clap::{Parser, ValueEnum};
use sky_pvas::pattern;
use sky_pvas::pmq::remote::{Peer, RemoteQueue, Role, Spec};
use sky_pvas::pmq::Mode;
use sky_pvas::Error;
use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Parser)]
#[command(name = "sky-pvas-remote")]
struct Cli {
    /// This end of the queue.
    #[arg(value_enum)]
    role: Side,
    /// push: the sender writes into the receiver's area; pull: the
    /// receiver reads from the sender's.
    #[arg(long, value_enum)]
    mode: ModeArg,
    /// Wait for the peer to connect at this address (its IP names the RDMA
    /// device)...
    #[arg(long, conflicts_with = "connect", required_unless_present = "connect")]
    listen: Option<SocketAddrV4>,
    /// ...or connect to it there.
    #[arg(long)]
    connect: Option<SocketAddrV4>,
    /// The owner's queue area (push receiver, pull sender) or the pull
    /// receiver's state: a file, or a Device DAX namespace (/dev/daxX.Y).
    #[arg(long, default_value = "/dev/shm/sky-pvas-remote")]
    area: PathBuf,
    #[arg(long, default_value_t = 4096)]
    entry_size: u32,
    #[arg(long, default_value_t = 64)]
    entries: u32,
    /// The owner starts a new epoch (earlier messages never count again).
    #[arg(long)]
    fresh: bool,
    /// Messages in all, from the first of the epoch.
    #[arg(long, default_value_t = 100)]
    messages: u64,
    /// Message sizes, cycled by sequence number.
    #[arg(long, value_delimiter = ',', default_value = "64")]
    sizes: Vec<usize>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Side {
    Send,
    Recv,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Push,
    Pull,
}

fn main() {
    let cli = Cli::parse();
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

fn run(cli: &Cli) -> Result<(), Error> {
    if cli.sizes.is_empty() || cli.sizes.iter().any(|&s| s > cli.entry_size as usize) {
        return Err(Error::Invalid(format!(
            "--sizes must be 1 to {} bytes each",
            cli.entry_size
        )));
    }
    let spec = Spec {
        mode: match cli.mode {
            ModeArg::Push => Mode::Push,
            ModeArg::Pull => Mode::Pull,
        },
        entry_size: cli.entry_size,
        entry_count: cli.entries,
    };
    let role = match cli.role {
        Side::Send => Role::Sender,
        Side::Recv => Role::Receiver,
    };
    let peer = match (cli.listen, cli.connect) {
        (Some(a), _) => Peer::Listen(a),
        (None, Some(a)) => Peer::Connect(a),
        (None, None) => unreachable!("clap requires one"),
    };
    let q = RemoteQueue::open(spec, role, peer, &cli.area, cli.fresh)?;
    let at = q.position();
    println!(
        "ok open epoch={} enqueued={} consumed={} durability={:?}",
        at.epoch,
        at.enqueued,
        at.consumed,
        q.durability()
    );
    let t = Instant::now();
    let mut bytes = 0u64;
    match role {
        Role::Sender => {
            let mut buf = vec![0u8; cli.entry_size as usize];
            for k in at.enqueued + 1..=cli.messages {
                let msg = &mut buf[..size_of(&cli.sizes, k)];
                pattern::fill(k, msg);
                let seq = q.enqueue(msg)?;
                if seq != k {
                    return Err(Error::Invalid(format!("message {k} went in as {seq}")));
                }
                bytes += msg.len() as u64;
            }
            q.flush()?;
        }
        Role::Receiver => {
            let mut bad = 0u64;
            let mut expected = at.consumed + 1;
            while q.position().consumed < cli.messages {
                q.dequeue_with(|seq, payload| {
                    // In order, none skipped, none twice: seq follows the
                    // consumed count this run began from.
                    if seq != expected
                        || payload.len() != size_of(&cli.sizes, seq)
                        || pattern::first_mismatch(seq, payload).is_some()
                    {
                        bad += 1;
                    }
                    expected = seq + 1;
                    bytes += payload.len() as u64;
                    Ok(())
                })?;
            }
            if bad > 0 {
                return Err(Error::Invalid(format!("{bad} messages arrived wrong")));
            }
            println!("ok took first={} last={}", at.consumed + 1, expected - 1);
        }
    }
    let secs = t.elapsed().as_secs_f64().max(1e-9);
    let end = q.position();
    println!(
        "ok done epoch={} enqueued={} consumed={} bytes={bytes} mb_per_s={:.2}",
        end.epoch,
        end.enqueued,
        end.consumed,
        bytes as f64 / secs / (1 << 20) as f64
    );
    Ok(())
}
