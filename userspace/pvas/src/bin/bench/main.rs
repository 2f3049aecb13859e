//! sky-pvas-bench: ping-pong between two members of one space. First the
//! handshake: what a message costs apart from its bytes. Then bandwidth
//! from 8 B to 64 MiB of one-copy rendezvous with the sender copying alone
//! and split (both sides copying at once), eager, and a two-copy
//! shared-memory ring, against a single-thread memcpy, all in one run and
//! interleaved size by size, so a burst of load on this shared machine
//! hits every transport alike. Then a pipe, a UNIX socket and
//! process_vm_writev; then push vs pull queue throughput with the
//! receiver computing between dequeues. A benchmark, not a test: it
//! prints tables. The peer is this binary re-executed.
//!
//! `--eval [DIR]` is the evaluation's slice (`cargo xtask eval --scenario
//! pvas`): one-copy split against the ring at 64 KiB and 1 MiB, and push
//! against pull, with the members left where the scheduler puts them (not
//! pinned: that placement is what is judged), as `result` lines of mean
//! throughput.

mod report;
mod transports;

use report::*;
use sky_pvas::msg::CopyBy;
use sky_pvas::pmq::{Mode, PmQueue, QueueSpec};
use sky_pvas::EAGER_CAP;
use sky_pvas::{CreateOptions, Space};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use transports::*;

/// Sizes of the bandwidth table: 8 B, then 8 KiB to 64 MiB in powers of 2.
fn bw_sizes() -> Vec<usize> {
    std::iter::once(8)
        .chain((13..=26).map(|s| 1usize << s))
        .collect()
}

/// Sizes at which the slow transports are measured.
const OTHER_SIZES: [usize; 5] = [8, 32 << 10, 256 << 10, 2 << 20, 64 << 20];
const MAX_SIZE: usize = 64 << 20;
const HANDSHAKE_ROUNDS: usize = 20_000;
const ASLEEP_ROUNDS: usize = 400;
/// Longer than a message wait spins before it sleeps (0.5 ms + 40 us).
const ASLEEP_PAUSE: Duration = Duration::from_millis(2);
/// Each (transport, size) runs in this many interleaved blocks.
const BLOCKS: usize = 4;

/// Round trips per (transport, size): about 512 MiB each way.
fn bw_rounds(size: usize) -> usize {
    ((512usize << 20) / size.max(1)).clamp(8, 4000)
}

fn other_rounds(size: usize) -> usize {
    ((128usize << 20) / size.max(1)).clamp(5, 2000)
}

/// What a run measures: the whole benchmark, or the evaluation's slice.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Plan {
    Full,
    Eval,
}

impl Plan {
    fn name(self) -> &'static str {
        match self {
            Plan::Full => "full",
            Plan::Eval => "eval",
        }
    }

    fn parse(name: &str) -> Res<Plan> {
        [Plan::Full, Plan::Eval]
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| anyhow::anyhow!("unknown plan {name:?}"))
    }

    /// Sizes of the queue table (a subset of QUEUE_SIZES: the slots).
    fn queue_sizes(self) -> &'static [usize] {
        match self {
            Plan::Full => &QUEUE_SIZES,
            Plan::Eval => &QUEUE_SIZES[1..3],
        }
    }

    fn queue_messages(self, size: usize) -> usize {
        match self {
            Plan::Full => ((64usize << 20) / size).clamp(16, 2000),
            Plan::Eval => ((16usize << 20) / size).clamp(16, 500),
        }
    }

    /// The largest message: buffers are this big.
    fn max_size(self) -> usize {
        match self {
            Plan::Full => MAX_SIZE,
            Plan::Eval => EVAL_SIZES[1],
        }
    }
}

/// The evaluation's message sizes: one in every cache, one beyond L2.
const EVAL_SIZES: [usize; 2] = [64 << 10, 1 << 20];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let result = match args.get(1).map(String::as_str) {
        Some("--peer") => peer(&args[2..]),
        Some("--eval") => parent(Plan::Eval, &args[2..]),
        _ => parent(Plan::Full, &args[1..]),
    };
    if let Err(e) = result {
        eprintln!("sky-pvas-bench: error: {e:#}");
        std::process::exit(1);
    }
}

type Res<T> = anyhow::Result<T>;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Transport {
    /// Rendezvous, the sender copies everything.
    Sender,
    /// Rendezvous, both sides copy (CopyBy::Both).
    Split,
    /// Rendezvous, the sender copies, and the receiver calls recv only
    /// once it sees the sender's ready-to-send: the sender waits for the
    /// clear-to-send (a full round trip more).
    CtsLate,
    Eager,
    /// Eager, sent only once the receiver has gone to sleep on its futex:
    /// the cost of waking it.
    EagerAsleep,
    Ring,
    Pipe,
    Socket,
    VmWritev,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::Sender => "pvas one-copy (sender copies)",
            Transport::Split => "pvas one-copy split (both copy)",
            Transport::CtsLate => "pvas one-copy, CTS posted late",
            Transport::Eager => "pvas eager",
            Transport::EagerAsleep => "pvas eager, receiver asleep",
            Transport::Ring => "shm ring (2 copies)",
            Transport::Pipe => "pipe",
            Transport::Socket => "unix socket",
            Transport::VmWritev => "process_vm_writev",
        }
    }

    fn copy_by(self) -> CopyBy {
        if self == Transport::Split {
            CopyBy::Both
        } else {
            CopyBy::Sender
        }
    }
}

/// One block of round trips; both processes walk the same list.
#[derive(Clone, Copy)]
struct Step {
    transport: Transport,
    size: usize,
    rounds: usize,
    /// The first round of the first block is a warm-up (page faults).
    warm_up: bool,
}

fn schedule(plan: Plan) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut interleave = |transports: &[Transport], size: usize, rounds: usize| {
        for block in 0..BLOCKS {
            for &transport in transports {
                steps.push(Step {
                    transport,
                    size,
                    rounds: rounds.div_ceil(BLOCKS) + (block == 0) as usize,
                    warm_up: block == 0,
                });
            }
        }
    };
    use Transport::*;
    if plan == Plan::Eval {
        for size in EVAL_SIZES {
            interleave(
                &[Split, Ring],
                size,
                ((64usize << 20) / size).clamp(8, 1000),
            );
        }
        return steps;
    }
    interleave(&[Eager, Sender, CtsLate, Split, Ring], 8, HANDSHAKE_ROUNDS);
    interleave(&[EagerAsleep], 8, ASLEEP_ROUNDS);
    for size in bw_sizes().into_iter().skip(1) {
        let mut ts = vec![Sender, Split, Ring];
        if size <= EAGER_CAP {
            ts.push(Eager);
        }
        interleave(&ts, size, bw_rounds(size));
    }
    for size in OTHER_SIZES {
        interleave(&[Pipe, Socket, VmWritev], size, other_rounds(size));
    }
    steps
}

/// Waits until member `from` has announced (ready-to-send) the next
/// message to us, without receiving it.
fn wait_announced(space: &Space, from: u32) -> Res<()> {
    let t = Instant::now();
    let mut spins = 0u32;
    while !space.announced(from)? {
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(4096) && t.elapsed() > Duration::from_secs(10) {
            anyhow::bail!("no ready-to-send from member {from}");
        }
    }
    Ok(())
}

/// The CPUs this process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; the kernel fills it in.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: a valid set of the size given.
    if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: c is below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Runs this process on `cpu` only.
fn pin(cpu: usize) -> Res<()> {
    // SAFETY: as in allowed_cpus.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: cpu is one of ours, below CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: a valid set of the size given.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    anyhow::ensure!(
        r == 0,
        "pinning to CPU {cpu}: {}",
        std::io::Error::last_os_error()
    );
    Ok(())
}

fn set_mode(space: &Space, t: Transport) -> Res<()> {
    let eager = matches!(t, Transport::Eager | Transport::EagerAsleep);
    space.set_eager_max(if eager { EAGER_CAP } else { 0 })?;
    Ok(())
}

/// The transports' endpoints in one process.
struct Ends {
    rings: &'static [Ring; 2],
    pipe_in: std::fs::File,
    pipe_out: std::fs::File,
    sock: UnixStream,
}

/// The peer side: echoes every message of every transport, in the order
/// the parent measures them.
fn peer(args: &[String]) -> Res<()> {
    let (space_path, sock_path, ring_path) = (
        PathBuf::from(&args[0]),
        PathBuf::from(&args[1]),
        PathBuf::from(&args[2]),
    );
    if let Some(cpu) = args.get(3).and_then(|c| c.parse().ok()) {
        pin(cpu)?;
    }
    let plan = Plan::parse(args.get(4).map_or("full", String::as_str))?;
    let space = Space::attach(&space_path, 2)?;
    let mut buf = space.alloc_bytes(plan.max_size())?;
    let mut sock = UnixStream::connect(&sock_path)?;
    let rings = rings(&ring_path, false)?;
    let fifo_dir = sock_path.parent().unwrap();
    let pipe_in = std::fs::File::open(fifo_dir.join("to-peer"))?;
    let pipe_out = std::fs::OpenOptions::new()
        .write(true)
        .open(fifo_dir.join("to-parent"))?;
    // Tell the parent where process_vm_writev should write.
    sock.write_all(&(buf.as_ptr() as u64).to_le_bytes())?;
    let mut ends = Ends {
        rings,
        pipe_in,
        pipe_out,
        sock,
    };
    for step in schedule(plan) {
        set_mode(&space, step.transport)?;
        let size = step.size;
        for _ in 0..step.rounds {
            match step.transport {
                Transport::Sender
                | Transport::Split
                | Transport::Eager
                | Transport::EagerAsleep => {
                    let n = space.recv(1, &mut buf)?;
                    space.send_with(1, &buf[..n], step.transport.copy_by())?;
                }
                Transport::CtsLate => {
                    wait_announced(&space, 1)?;
                    let n = space.recv(1, &mut buf)?;
                    space.send_with(1, &buf[..n], CopyBy::Sender)?;
                }
                Transport::Ring => {
                    ends.rings[0].recv(&mut buf[..size]);
                    ends.rings[1].send(&buf[..size]);
                }
                Transport::Pipe => {
                    ends.pipe_in.read_exact(&mut buf[..size])?;
                    ends.pipe_out.write_all(&buf[..size])?;
                }
                Transport::Socket => {
                    ends.sock.read_exact(&mut buf[..size])?;
                    ends.sock.write_all(&buf[..size])?;
                }
                Transport::VmWritev => {
                    let mut b = [0u8; 8];
                    ends.sock.read_exact(&mut b)?; // the parent wrote our buffer
                    let remote = u64::from_le_bytes(b);
                    vm_write(
                        std::os::unix::process::parent_id() as i32,
                        &buf[..size],
                        remote,
                    )?;
                    ends.sock.write_all(&[1])?;
                }
            }
        }
    }
    let sock = &mut ends.sock;
    // Queue throughput: we receive and compute.
    for mode in [Mode::Push, Mode::Pull] {
        for &size in plan.queue_sizes() {
            let spec = queue_spec(mode, size);
            let q = if mode == Mode::Push {
                PmQueue::create(&space, spec)?
            } else {
                PmQueue::open(&space, spec)?
            };
            sock.write_all(&[1])?;
            let n = matrix_n(size);
            let (a, mut c) = (vec![1.0f64; n * n], vec![0.0f64; n * n]);
            for _ in 0..plan.queue_messages(size) {
                q.dequeue(&mut buf)?;
                matmul(&a, &mut c, n);
            }
            std::hint::black_box(&c);
            sock.write_all(&[1])?;
            let mut b = [0u8; 1];
            sock.read_exact(&mut b)?;
        }
    }
    Ok(())
}

const QUEUE_SIZES: [usize; 4] = [4 << 10, 64 << 10, 1 << 20, 8 << 20];

fn queue_spec(mode: Mode, size: usize) -> QueueSpec {
    QueueSpec {
        mode,
        sender: 1,
        receiver: 2,
        slot: match (mode, size) {
            (Mode::Push, s) => QUEUE_SIZES.iter().position(|&q| q == s).unwrap() as u32,
            (Mode::Pull, s) => 4 + QUEUE_SIZES.iter().position(|&q| q == s).unwrap() as u32,
        },
        entry_size: size as u32,
        entry_count: 4,
    }
}

/// The paper's receiver computes a matrix product sized ~ cube root of the
/// message size between dequeues.
fn matrix_n(size: usize) -> usize {
    ((size / 8) as f64).cbrt().round().max(2.0) as usize
}

fn matmul(a: &[f64], c: &mut [f64], n: usize) {
    for i in 0..n {
        for k in 0..n {
            let x = a[i * n + k];
            for j in 0..n {
                c[i * n + j] += x * a[k * n + j];
            }
        }
    }
}

fn parent(plan: Plan, args: &[String]) -> Res<()> {
    let dir = PathBuf::from(args.first().map_or("/dev/shm", String::as_str));
    let work = tempfile_dir(&dir)?;
    let started = Instant::now();
    // Each segment holds a max-size buffer and the queue areas.
    let segment = (((MAX_SIZE as u64 + ((4 * 8) << 20) * 2 + (16 << 20)) >> 21) << 21) + (2 << 20);
    let name = format!("bench-{}", std::process::id());
    let opts = CreateOptions {
        dir: work.clone(),
        max_members: 2,
        segment_size: segment,
        ..Default::default()
    };
    let path = Space::create(&name, &opts)?.path().to_path_buf();
    let space = Space::attach(&path, 1)?;
    let mut buf = space.alloc_bytes(plan.max_size())?;
    sky_pvas::pattern::fill(1, &mut buf);
    let sock_path = work.join("sock");
    let ring_path = work.join("ring");
    let listener = UnixListener::bind(&sock_path)?;
    for fifo in ["to-peer", "to-parent"] {
        let c = std::ffi::CString::new(work.join(fifo).as_os_str().as_encoded_bytes())?;
        // SAFETY: mkfifo with a valid NUL-terminated path.
        anyhow::ensure!(
            unsafe { libc::mkfifo(c.as_ptr(), 0o600) } == 0,
            "mkfifo failed"
        );
    }
    let rings = rings(&ring_path, true)?;
    // One CPU each, as ping-pong benchmarks pin their processes: left to
    // itself the scheduler may put both on one CPU (it moves a woken task
    // next to its waker), where a spinning transport waits out time slices.
    // The evaluation judges where the scheduler puts them: no pins there.
    let cpus = allowed_cpus();
    let pins = (cpus.len() >= 2 && plan == Plan::Full).then(|| (cpus[0], cpus[1]));
    let child: Child = Command::new(std::env::current_exe()?)
        .arg("--peer")
        .args([&path, &sock_path, &ring_path])
        .arg(pins.map_or("-".into(), |p| p.1.to_string()))
        .arg(plan.name())
        .spawn()?;
    if let Some((cpu, _)) = pins {
        pin(cpu)?;
    }
    let (mut sock, _) = listener.accept()?;
    // FIFOs: the peer opens to-peer for reading first, then to-parent.
    let pipe_out = std::fs::OpenOptions::new()
        .write(true)
        .open(work.join("to-peer"))?;
    let pipe_in = std::fs::File::open(work.join("to-parent"))?;
    let mut b8 = [0u8; 8];
    sock.read_exact(&mut b8)?;
    let peer_buf = u64::from_le_bytes(b8);
    let peer_pid = child.id() as i32;
    let persist = space.persist_mode();
    // The heading comes first: the VM scenarios read the persistence from
    // it as soon as the space is attached, not minutes later under TCG.
    if plan != Plan::Eval {
        println!(
            "Ping-pong over one space in {} (persistence: {}), {}; latency is half the round trip",
            dir.display(),
            persist.name(),
            pins.map_or("one CPU, not pinned".into(), |(a, b)| format!(
                "members pinned to CPUs {a} and {b}"
            ))
        );
        println!();
    }
    let mut ends = Ends {
        rings,
        pipe_in,
        pipe_out,
        sock,
    };

    let mut samples: HashMap<(Transport, usize), Samples> = HashMap::new();
    let mut memcpy: HashMap<usize, Vec<Duration>> = HashMap::new();
    // The memcpy ceiling is only the full table's (the evaluation's lines
    // compare transports, not copies).
    let ceiling = plan == Plan::Full;
    let copy_size = if ceiling { MAX_SIZE } else { 0 };
    let (mut src, mut dst) = (vec![1u8; copy_size], vec![0u8; copy_size]);
    for step in schedule(plan) {
        set_mode(&space, step.transport)?;
        let size = step.size;
        let s = samples.entry((step.transport, size)).or_default();
        for round in 0..step.rounds {
            if step.transport == Transport::EagerAsleep {
                std::thread::sleep(ASLEEP_PAUSE);
            }
            let t = Instant::now();
            match step.transport {
                Transport::Sender
                | Transport::Split
                | Transport::Eager
                | Transport::EagerAsleep => {
                    space.send_with(2, &buf[..size], step.transport.copy_by())?;
                    let r = space.recv_with(2, &mut buf[..size])?;
                    s.received += r.len as u64;
                    s.copied_here += r.copied_here as u64;
                }
                Transport::CtsLate => {
                    space.send_with(2, &buf[..size], CopyBy::Sender)?;
                    wait_announced(&space, 2)?;
                    space.recv(2, &mut buf[..size])?;
                }
                Transport::Ring => {
                    ends.rings[0].send(&buf[..size]);
                    ends.rings[1].recv(&mut buf[..size]);
                }
                Transport::Pipe => {
                    ends.pipe_out.write_all(&buf[..size])?;
                    ends.pipe_in.read_exact(&mut buf[..size])?;
                }
                Transport::Socket => {
                    ends.sock.write_all(&buf[..size])?;
                    ends.sock.read_exact(&mut buf[..size])?;
                }
                Transport::VmWritev => {
                    vm_write(peer_pid, &buf[..size], peer_buf)?;
                    ends.sock.write_all(&(buf.as_ptr() as u64).to_le_bytes())?;
                    let mut done = [0u8; 1];
                    ends.sock.read_exact(&mut done)?;
                }
            }
            if !(step.warm_up && round == 0) {
                s.halves.push(t.elapsed() / 2);
            }
        }
        // The memcpy ceiling, measured between the same blocks.
        if ceiling && step.transport == Transport::Ring {
            let m = memcpy.entry(size).or_default();
            m.extend(memcpy_times(
                &mut src[..size],
                &mut dst[..size],
                step.rounds,
            ));
        }
    }
    let elapsed_pingpong = started.elapsed();
    if plan == Plan::Eval {
        for size in EVAL_SIZES {
            let gbps = |t| samples.get(&(t, size)).map_or(0.0, |s| s.mean_gbps(size));
            println!(
                "result workload=pvas-msg size={size} one_copy_gbps={:.4} ring_gbps={:.4}",
                gbps(Transport::Split),
                gbps(Transport::Ring)
            );
        }
        for (mode, size, _, gbps) in queue_rates(plan, &space, &mut buf, &mut ends.sock)? {
            println!("result workload=pvas-queue mode={mode} size={size} gbps={gbps:.4}");
        }
        return finish(child, space, &path, &work);
    }
    // The liveness probe (one F_OFD_GETLK) messages no longer make.
    let probes = 20_000;
    let t = Instant::now();
    for _ in 0..probes {
        std::hint::black_box(space.alive(2));
    }
    let probe = t.elapsed() / probes;

    print_handshake(&samples, probe);
    println!();
    let memcpy: HashMap<usize, f64> = memcpy
        .into_iter()
        .map(|(size, mut v)| {
            v.sort();
            (size, size as f64 / v[v.len() / 2].as_secs_f64() / 1e9)
        })
        .collect();
    print_bandwidth(&samples, &memcpy);
    println!();
    print_others(&samples);
    println!();
    queue_table(&space, &mut buf, &mut ends.sock)?;
    finish(child, space, &path, &work)?;
    println!();
    println!(
        "ping-pong {:.1} s, total {:.1} s",
        elapsed_pingpong.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Waits for the peer (its failure is ours) and removes the space.
fn finish(mut child: Child, space: Space, path: &Path, work: &Path) -> Res<()> {
    let status = child.wait()?;
    anyhow::ensure!(status.success(), "the peer failed: {status}");
    drop(space);
    Space::open(path)?.destroy()?;
    let _ = std::fs::remove_dir_all(work);
    Ok(())
}

fn tempfile_dir(dir: &Path) -> Res<PathBuf> {
    let d = dir.join(format!("sky-pvas-bench-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

/// Times of single-thread copies of `src` into `dst` (both hot: the
/// first copy is not timed), `size` bytes each, batched for small sizes.
fn memcpy_times(src: &mut [u8], dst: &mut [u8], rounds: usize) -> Vec<Duration> {
    let batch = ((64usize << 10) / src.len().max(1)).max(1);
    dst.copy_from_slice(src);
    (0..rounds.div_ceil(batch).max(3))
        .map(|_| {
            let t = Instant::now();
            for _ in 0..batch {
                dst.copy_from_slice(std::hint::black_box(&*src));
                std::hint::black_box(&mut *dst);
            }
            t.elapsed() / batch as u32
        })
        .collect()
}

/// Queue throughput per (mode, size): the messages sent and GB/s; the
/// parent enqueues, the peer dequeues and computes.
fn queue_rates(
    plan: Plan,
    space: &Space,
    buf: &mut [u8],
    sock: &mut UnixStream,
) -> Res<Vec<(&'static str, usize, usize, f64)>> {
    let mut rates = Vec::new();
    for mode in [Mode::Push, Mode::Pull] {
        for &size in plan.queue_sizes() {
            let spec = queue_spec(mode, size);
            let q = if mode == Mode::Pull {
                PmQueue::create(space, spec)?
            } else {
                PmQueue::open(space, spec)?
            };
            let mut b = [0u8; 1];
            sock.read_exact(&mut b)?;
            let n = plan.queue_messages(size);
            let t = Instant::now();
            for _ in 0..n {
                q.enqueue(&buf[..size])?;
            }
            q.flush()?;
            let gbps = (n * size) as f64 / t.elapsed().as_secs_f64() / 1e9;
            sock.read_exact(&mut b)?;
            sock.write_all(&[1])?;
            let name = if mode == Mode::Push { "push" } else { "pull" };
            rates.push((name, size, n, gbps));
        }
    }
    Ok(rates)
}

fn queue_table(space: &Space, buf: &mut [u8], sock: &mut UnixStream) -> Res<()> {
    println!("Persistent queue, 4 entries, receiver computing a matrix product (n ~ cbrt(size/8)) per message");
    println!(
        "{:<6} {:>8} {:>10} {:>10} {:>12}",
        "mode", "size", "messages", "GB/s", "vs push"
    );
    let rates = queue_rates(Plan::Full, space, buf, sock)?;
    for &(mode, size, messages, gbps) in &rates {
        let push = rates
            .iter()
            .find(|r| r.0 == "push" && r.1 == size)
            .map_or(f64::NAN, |r| r.3);
        println!(
            "{:<6} {:>8} {:>10} {:>10.3} {:>11.2}x",
            mode,
            human(size),
            messages,
            gbps,
            gbps / push
        );
    }
    Ok(())
}
