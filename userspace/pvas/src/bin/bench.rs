//! sky-pvas-bench: ping-pong latency and bandwidth of one-copy rendezvous,
//! eager, a two-copy shared-memory ring, a pipe, a UNIX socket and
//! process_vm_writev, against a single-thread memcpy ceiling; then push vs
//! pull queue throughput with the receiver computing between dequeues.
//! A benchmark, not a test: it prints tables, latency ratios against the
//! pipe measured in the same run. The peer is this binary re-executed.

use sky_pvas::pmq::{Mode, PmQueue, QueueSpec};
use sky_pvas::EAGER_CAP;
use sky_pvas::{CreateOptions, Space};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const SIZES: [usize; 9] = [
    8,
    64,
    512,
    4 << 10,
    32 << 10,
    256 << 10,
    2 << 20,
    16 << 20,
    64 << 20,
];
const RING: usize = 1 << 20;

fn iters(size: usize) -> usize {
    ((256usize << 20) / size.max(1)).clamp(5, 2000)
}

/// Rounds per size: one untimed warm-up (first-touch page faults) first.
fn rounds(size: usize) -> usize {
    iters(size) + 1
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let result = if args.get(1).map(String::as_str) == Some("--peer") {
        peer(&args[2..])
    } else {
        parent(&args[1..])
    };
    if let Err(e) = result {
        eprintln!("sky-pvas-bench: error: {e:#}");
        std::process::exit(1);
    }
}

type Res<T> = anyhow::Result<T>;

struct Stats {
    p50: Duration,
    p99: Duration,
}

fn stats(mut rtts: Vec<Duration>) -> Stats {
    rtts.sort();
    let at = |p: f64| rtts[((p * rtts.len() as f64).ceil() as usize).clamp(1, rtts.len()) - 1] / 2;
    Stats {
        p50: at(0.50),
        p99: at(0.99),
    }
}

/// A two-copy single-producer/single-consumer byte ring in shared memory.
#[repr(C)]
struct Ring {
    head: AtomicU64,
    tail: AtomicU64,
    data: [u8; RING],
}

impl Ring {
    fn send(&self, mut data: &[u8]) {
        while !data.is_empty() {
            let head = self.head.load(Ordering::Relaxed);
            let free = RING - (head - self.tail.load(Ordering::Acquire)) as usize;
            if free == 0 {
                std::hint::spin_loop();
                continue;
            }
            let at = head as usize % RING;
            let n = data.len().min(free).min(RING - at);
            // SAFETY: [at, at+n) is free ring space owned by the producer.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    data.as_ptr(),
                    (self.data.as_ptr() as *mut u8).add(at),
                    n,
                )
            };
            self.head.store(head + n as u64, Ordering::Release);
            data = &data[n..];
        }
    }

    fn recv(&self, out: &mut [u8]) {
        let mut done = 0;
        while done < out.len() {
            let tail = self.tail.load(Ordering::Relaxed);
            let avail = (self.head.load(Ordering::Acquire) - tail) as usize;
            if avail == 0 {
                std::hint::spin_loop();
                continue;
            }
            let at = tail as usize % RING;
            let n = (out.len() - done).min(avail).min(RING - at);
            out[done..done + n].copy_from_slice(&self.data[at..at + n]);
            self.tail.store(tail + n as u64, Ordering::Release);
            done += n;
        }
    }
}

/// Two rings (one each way) in a shared file mapping.
fn rings(path: &Path, create: bool) -> Res<&'static [Ring; 2]> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .open(path)?;
    f.set_len(std::mem::size_of::<[Ring; 2]>() as u64)?;
    use std::os::fd::AsRawFd;
    // SAFETY: a fresh shared mapping of a file sized for two rings.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            std::mem::size_of::<[Ring; 2]>(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    anyhow::ensure!(p != libc::MAP_FAILED, "mapping the ring file failed");
    Ok(unsafe { &*(p as *const [Ring; 2]) })
}

fn vm_write(pid: i32, local: &[u8], remote: u64) -> Res<()> {
    let mut done = 0;
    while done < local.len() {
        let l = libc::iovec {
            iov_base: local[done..].as_ptr() as *mut _,
            iov_len: local.len() - done,
        };
        let r = libc::iovec {
            iov_base: (remote + done as u64) as *mut _,
            iov_len: local.len() - done,
        };
        // SAFETY: iovecs describe our buffer and the peer's posted buffer.
        let n = unsafe { libc::process_vm_writev(pid, &l, 1, &r, 1, 0) };
        anyhow::ensure!(
            n > 0,
            "process_vm_writev: {}",
            std::io::Error::last_os_error()
        );
        done += n as usize;
    }
    Ok(())
}

/// The peer side: echoes every message of every transport, in the order
/// the parent measures them.
fn peer(args: &[String]) -> Res<()> {
    let (space_path, sock_path, ring_path) = (
        PathBuf::from(&args[0]),
        PathBuf::from(&args[1]),
        PathBuf::from(&args[2]),
    );
    let space = Space::attach(&space_path, 2)?;
    let max = *SIZES.iter().max().unwrap();
    let buf = space.alloc_bytes(max)?;
    let mut sock = UnixStream::connect(&sock_path)?;
    let rings = rings(&ring_path, false)?;
    let fifo_dir = sock_path.parent().unwrap();
    let mut pipe_in = std::fs::File::open(fifo_dir.join("to-peer"))?;
    let mut pipe_out = std::fs::OpenOptions::new()
        .write(true)
        .open(fifo_dir.join("to-parent"))?;
    // Tell the parent where process_vm_writev should write.
    sock.write_all(&(buf.as_ptr() as u64).to_le_bytes())?;
    for transport in TRANSPORTS {
        for &size in SIZES.iter().filter(|&&s| transport.fits(s)) {
            for _ in 0..rounds(size) {
                match transport {
                    Transport::Rendezvous | Transport::Eager => {
                        space.set_eager_max(if transport == Transport::Eager {
                            EAGER_CAP
                        } else {
                            0
                        })?;
                        let n = space.recv(1, buf)?;
                        space.send(1, &buf[..n])?;
                    }
                    Transport::Ring => {
                        rings[0].recv(&mut buf[..size]);
                        rings[1].send(&buf[..size]);
                    }
                    Transport::Pipe => {
                        pipe_in.read_exact(&mut buf[..size])?;
                        pipe_out.write_all(&buf[..size])?;
                    }
                    Transport::Socket => {
                        sock.read_exact(&mut buf[..size])?;
                        sock.write_all(&buf[..size])?;
                    }
                    Transport::VmWritev => {
                        let mut b = [0u8; 8];
                        sock.read_exact(&mut b)?; // the parent wrote our buffer
                        let remote = u64::from_le_bytes(b);
                        vm_write(
                            std::os::unix::process::parent_id() as i32,
                            &buf[..size],
                            remote,
                        )?;
                        sock.write_all(&[1])?;
                    }
                }
            }
        }
    }
    // Queue throughput: we receive and compute.
    for mode in [Mode::Push, Mode::Pull] {
        for &size in &QUEUE_SIZES {
            let spec = queue_spec(mode, size);
            let q = if mode == Mode::Push {
                PmQueue::create(&space, spec)?
            } else {
                PmQueue::open(&space, spec)?
            };
            sock.write_all(&[1])?;
            let n = matrix_n(size);
            let (a, mut c) = (vec![1.0f64; n * n], vec![0.0f64; n * n]);
            for _ in 0..queue_messages(size) {
                q.dequeue(buf)?;
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

#[derive(Clone, Copy, PartialEq, Eq)]
enum Transport {
    Rendezvous,
    Eager,
    Ring,
    Pipe,
    Socket,
    VmWritev,
}

const TRANSPORTS: [Transport; 6] = [
    Transport::Rendezvous,
    Transport::Eager,
    Transport::Ring,
    Transport::Pipe,
    Transport::Socket,
    Transport::VmWritev,
];

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::Rendezvous => "pvas one-copy",
            Transport::Eager => "pvas eager",
            Transport::Ring => "shm ring (2 copies)",
            Transport::Pipe => "pipe",
            Transport::Socket => "unix socket",
            Transport::VmWritev => "process_vm_writev",
        }
    }

    fn fits(self, size: usize) -> bool {
        self != Transport::Eager || size <= EAGER_CAP
    }
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

fn queue_messages(size: usize) -> usize {
    ((64usize << 20) / size).clamp(16, 2000)
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

fn parent(args: &[String]) -> Res<()> {
    let dir = PathBuf::from(args.first().map_or("/dev/shm", String::as_str));
    let work = tempfile_dir(&dir)?;
    let max = *SIZES.iter().max().unwrap();
    // Each segment holds a max-size buffer and the queue areas.
    let segment = (((max as u64 + ((4 * 8) << 20) * 2 + (16 << 20)) >> 21) << 21) + (2 << 20);
    let name = format!("bench-{}", std::process::id());
    let opts = CreateOptions {
        dir: work.clone(),
        max_members: 2,
        segment_size: segment,
        ..Default::default()
    };
    let path = Space::create(&name, &opts)?.path().to_path_buf();
    let space = Space::attach(&path, 1)?;
    let buf = space.alloc_bytes(max)?;
    sky_pvas::pattern::fill(1, buf);
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
    let mut child: Child = Command::new(std::env::current_exe()?)
        .arg("--peer")
        .args([&path, &sock_path, &ring_path])
        .spawn()?;
    let (mut sock, _) = listener.accept()?;
    // FIFOs: the peer opens to-peer for reading first, then to-parent.
    let mut pipe_out = std::fs::OpenOptions::new()
        .write(true)
        .open(work.join("to-peer"))?;
    let mut pipe_in = std::fs::File::open(work.join("to-parent"))?;
    let mut b8 = [0u8; 8];
    sock.read_exact(&mut b8)?;
    let peer_buf = u64::from_le_bytes(b8);
    let peer_pid = child.id() as i32;
    let persist = space.persist_mode();

    println!(
        "Ping-pong over one space in {} (persistence: {}); latency is half the round trip",
        dir.display(),
        persist.name()
    );
    let mut table: Vec<(Transport, usize, Stats)> = Vec::new();
    for transport in TRANSPORTS {
        for &size in SIZES.iter().filter(|&&s| transport.fits(s)) {
            let mut rtts = Vec::with_capacity(rounds(size));
            for _ in 0..rounds(size) {
                let t = Instant::now();
                match transport {
                    Transport::Rendezvous | Transport::Eager => {
                        space.set_eager_max(if transport == Transport::Eager {
                            EAGER_CAP
                        } else {
                            0
                        })?;
                        space.send(2, &buf[..size])?;
                        space.recv(2, &mut buf[..size])?;
                    }
                    Transport::Ring => {
                        rings[0].send(&buf[..size]);
                        rings[1].recv(&mut buf[..size]);
                    }
                    Transport::Pipe => {
                        pipe_out.write_all(&buf[..size])?;
                        pipe_in.read_exact(&mut buf[..size])?;
                    }
                    Transport::Socket => {
                        sock.write_all(&buf[..size])?;
                        sock.read_exact(&mut buf[..size])?;
                    }
                    Transport::VmWritev => {
                        vm_write(peer_pid, &buf[..size], peer_buf)?;
                        sock.write_all(&(buf.as_ptr() as u64).to_le_bytes())?;
                        let mut done = [0u8; 1];
                        sock.read_exact(&mut done)?;
                    }
                }
                rtts.push(t.elapsed());
            }
            rtts.remove(0);
            table.push((transport, size, stats(rtts)));
        }
    }
    print_pingpong(&table);
    println!();
    queue_table(&space, buf, &mut sock)?;
    child.wait()?;
    drop(space);
    Space::open(&path)?.destroy()?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

fn tempfile_dir(dir: &Path) -> Res<PathBuf> {
    let d = dir.join(format!("sky-pvas-bench-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

fn human(size: usize) -> String {
    match size {
        s if s >= 1 << 20 => format!("{} MiB", s >> 20),
        s if s >= 1 << 10 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}

fn memcpy_gbps(size: usize) -> f64 {
    let src = vec![1u8; size];
    let mut dst = vec![0u8; size];
    let n = iters(size);
    dst.copy_from_slice(&src);
    let t = Instant::now();
    for _ in 0..n {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&dst);
    }
    (size * n) as f64 / t.elapsed().as_secs_f64() / 1e9
}

fn print_pingpong(table: &[(Transport, usize, Stats)]) {
    println!(
        "{:<20} {:>8} {:>11} {:>11} {:>10} {:>12}",
        "transport", "size", "p50 us", "p99 us", "GB/s", "vs pipe"
    );
    for &size in &SIZES {
        let pipe = table
            .iter()
            .find(|(t, s, _)| *t == Transport::Pipe && *s == size)
            .map(|r| r.2.p50);
        for (t, _, st) in table.iter().filter(|(_, s, _)| *s == size) {
            let gbps = size as f64 / st.p50.as_secs_f64() / 1e9;
            let ratio = pipe.map_or("-".into(), |s| {
                format!("{:.2}x", s.as_secs_f64() / st.p50.as_secs_f64())
            });
            println!(
                "{:<20} {:>8} {:>11.2} {:>11.2} {:>10.3} {:>12}",
                t.name(),
                human(size),
                st.p50.as_secs_f64() * 1e6,
                st.p99.as_secs_f64() * 1e6,
                gbps,
                ratio
            );
        }
        println!(
            "{:<20} {:>8} {:>11} {:>11} {:>10.3} {:>12}",
            "memcpy (ceiling)",
            human(size),
            "-",
            "-",
            memcpy_gbps(size),
            "-"
        );
    }
}

fn queue_table(space: &Space, buf: &mut [u8], sock: &mut UnixStream) -> Res<()> {
    println!("Persistent queue, 4 entries, receiver computing a matrix product (n ~ cbrt(size/8)) per message");
    println!(
        "{:<6} {:>8} {:>10} {:>10} {:>12}",
        "mode", "size", "messages", "GB/s", "vs push"
    );
    let mut push = Vec::new();
    for mode in [Mode::Push, Mode::Pull] {
        for &size in &QUEUE_SIZES {
            let spec = queue_spec(mode, size);
            let q = if mode == Mode::Pull {
                PmQueue::create(space, spec)?
            } else {
                PmQueue::open(space, spec)?
            };
            let mut b = [0u8; 1];
            sock.read_exact(&mut b)?;
            let n = queue_messages(size);
            let t = Instant::now();
            for _ in 0..n {
                q.enqueue(&buf[..size])?;
            }
            q.flush()?;
            let gbps = (n * size) as f64 / t.elapsed().as_secs_f64() / 1e9;
            sock.read_exact(&mut b)?;
            sock.write_all(&[1])?;
            if mode == Mode::Push {
                push.push(gbps);
            }
            let i = QUEUE_SIZES.iter().position(|&s| s == size).unwrap();
            println!(
                "{:<6} {:>8} {:>10} {:>10.3} {:>11.2}x",
                if mode == Mode::Push { "push" } else { "pull" },
                human(size),
                n,
                gbps,
                gbps / push[i]
            );
        }
    }
    Ok(())
}
