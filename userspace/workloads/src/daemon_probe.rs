//! Probes of the scheduler daemon's responsiveness under what makes it
//! scan (tests/vm/scan.sh): many idle threads, a registry full of
//! entries, and from outside, how soon the daemon answers a statistics
//! request and how soon SIGTERM unloads it.

use anyhow::{bail, Context, Result};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

/// `count` threads that sleep for `hold`, with small stacks (10 000 of
/// them fit a small guest). Returns when they have all ended.
pub fn idle_threads(count: usize, hold: Duration) -> Result<()> {
    if count == 0 || count > 100_000 {
        bail!("--count must be 1..=100000, got {count}");
    }
    let until = Instant::now() + hold;
    let threads: Vec<_> = (0..count)
        .map(|i| {
            std::thread::Builder::new()
                .stack_size(64 << 10)
                .spawn(move || std::thread::sleep(until.saturating_duration_since(Instant::now())))
                .with_context(|| format!("starting idle thread {i}"))
        })
        .collect::<Result<_>>()?;
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

/// `entries` registry entries of this user, each a symlink named for a
/// space file that does not exist (what spaces never destroyed leave):
/// the daemon must not list them all every loop. Returns the directory.
pub fn fill_registry(entries: usize) -> Result<std::path::PathBuf> {
    let dir = sky_pvas::hints::my_registry_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    for i in 0..entries {
        let target = std::path::PathBuf::from(format!("/dev/shm/scx_sky-pvas-gone-{i}"));
        let link = dir.join(sky_pvas::hints::entry_name(&target));
        match std::os::unix::fs::symlink(&target, &link) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("creating {}", link.display())),
        }
    }
    Ok(dir)
}

/// Round trips of `requests` statistics requests over one connection,
/// `every` apart.
pub fn stats_latency(requests: usize, every: Duration) -> Result<Vec<Duration>> {
    if requests == 0 {
        bail!("--requests must be at least 1");
    }
    let mut reader = sky_stats::Reader::connect(None)?;
    let mut times = Vec::with_capacity(requests);
    for _ in 0..requests {
        let t = Instant::now();
        reader.read("totals")?;
        times.push(t.elapsed());
        std::thread::sleep(every);
    }
    Ok(times)
}

/// How long after SIGTERM the scheduler let go (sched_ext's state left
/// `enabled`: the daemon detached), sched_ext was disabled (the kernel
/// has moved every task back), and the process was gone.
#[derive(Debug, Clone, Copy)]
pub struct TermTimes {
    pub left_enabled: Duration,
    pub disabled: Duration,
    pub gone: Duration,
}

/// Sends SIGTERM to `pid` and times it (each within `limit`).
pub fn term_latency(pid: u32, limit: Duration) -> Result<TermTimes> {
    let process = sky_pvas::Process::open(pid).with_context(|| format!("no process {pid}"))?;
    let state = || std::fs::read_to_string("/sys/kernel/sched_ext/state").unwrap_or_default();
    let t = Instant::now();
    process.signal(libc::SIGTERM).context("sending SIGTERM")?;
    let (mut left_enabled, mut disabled) = (None, None);
    while t.elapsed() < limit {
        let now = state();
        if left_enabled.is_none() && now.trim() != "enabled" {
            left_enabled = Some(t.elapsed());
        }
        if disabled.is_none() && now.trim() == "disabled" {
            disabled = Some(t.elapsed());
        }
        if process.exited() {
            let gone = t.elapsed();
            return Ok(TermTimes {
                left_enabled: left_enabled.unwrap_or(gone),
                disabled: disabled.unwrap_or(gone),
                gone,
            });
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    bail!("process {pid} still there {limit:?} after SIGTERM")
}
