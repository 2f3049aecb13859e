//! Probes of the scheduler daemon's responsiveness under what makes it
//! scan (tests/vm/scan.sh): many idle threads, a registry full of
//! entries, and from outside, how soon the daemon answers a statistics
//! request and how soon SIGTERM unloads it.

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
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

/// CPU time each thread of process `pid` ran (the kernel's schedstat,
/// kept for every scheduler class), summed by thread name; threads that
/// ended since are not counted, the process itself gone is an error.
pub fn thread_run_ns(proc_root: &Path, pid: u32) -> Result<BTreeMap<String, u64>> {
    let tasks = proc_root.join(pid.to_string()).join("task");
    let dir = std::fs::read_dir(&tasks).with_context(|| format!("reading {}", tasks.display()))?;
    let mut by_name: BTreeMap<String, u64> = BTreeMap::new();
    for thread in dir.flatten() {
        let read = |f: &str| std::fs::read_to_string(thread.path().join(f));
        let (Ok(comm), Ok(stat)) = (read("comm"), read("schedstat")) else {
            continue;
        };
        let run = sky_proc::SchedStat::parse(stat.trim())?.run_ns;
        *by_name.entry(comm.trim_end().to_string()).or_default() += run;
    }
    Ok(by_name)
}

/// The share of one CPU each thread name of process `pid` took over
/// `period`, and all of them together (under `"all"`).
pub fn daemon_cpu(pid: u32, period: Duration) -> Result<BTreeMap<String, f64>> {
    let root = Path::new("/proc");
    let before = thread_run_ns(root, pid)?;
    let t = Instant::now();
    std::thread::sleep(period);
    let after = thread_run_ns(root, pid)?;
    Ok(shares(&before, &after, t.elapsed()))
}

fn shares(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
    took: Duration,
) -> BTreeMap<String, f64> {
    let secs = took.as_secs_f64().max(1e-9);
    let mut out: BTreeMap<String, f64> = after
        .iter()
        .map(|(name, &ns)| {
            let ran = ns.saturating_sub(before.get(name).copied().unwrap_or(0));
            (name.clone(), ran as f64 / 1e9 / secs)
        })
        .collect();
    let all = out.values().sum();
    out.insert("all".into(), all);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_per_thread_name_over_the_period() {
        let before = BTreeMap::from([
            ("scx_sky".to_string(), 1_000_000_000),
            ("sky-feeds".to_string(), 0),
        ]);
        let after = BTreeMap::from([
            ("scx_sky".to_string(), 1_200_000_000),
            ("sky-feeds".to_string(), 500_000_000),
            ("new".to_string(), 100_000_000),
        ]);
        let s = shares(&before, &after, Duration::from_secs(2));
        assert!((s["scx_sky"] - 0.1).abs() < 1e-9, "{s:?}");
        assert!((s["sky-feeds"] - 0.25).abs() < 1e-9, "{s:?}");
        assert!((s["new"] - 0.05).abs() < 1e-9, "{s:?}");
        assert!((s["all"] - 0.4).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn this_process_threads_are_read() {
        let me = thread_run_ns(Path::new("/proc"), std::process::id()).unwrap();
        assert!(me.values().sum::<u64>() > 0, "{me:?}");
        assert!(thread_run_ns(Path::new("/proc"), u32::MAX).is_err());
    }
}
