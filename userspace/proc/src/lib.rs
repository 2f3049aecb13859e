//! What scx_sky reads from /proc, parsed in one place: the daemon, the
//! TUI, the shared spaces and the test loads all read a task's `stat`,
//! `schedstat`, `sched` and name, the CPUs' times and model and the
//! thread list, mount tables and descriptors' locks through here. Hand-written rather than the procfs crate:
//! these are a few small formats, read on the daemon's hot path (a
//! thread's stat per gang thread each refresh, every thread's name when
//! the BPF task iterator is missing), and the crate parses every field of
//! every file it opens.

use std::path::{Path, PathBuf};

pub mod fdinfo;
pub mod mountinfo;
pub mod schedstat;
pub use schedstat::{migrations_of_self, sched_field, SchedStat};

/// CLOCK_MONOTONIC in nanoseconds: the clock of bpf_ktime_get_ns() and of
/// the scheduler times /proc gives, one clock for every process of a
/// machine (the daemon, the test loads, both ends of a queue in one VM).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The fields of a `/proc/.../stat` text scx_sky reads. The name (field
/// 2) may hold spaces and parentheses, so the rest are counted after its
/// last ')'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Field 3: `R` runnable, `S` sleeping, ...
    pub state: char,
    /// Field 22: when the task started, in clock ticks since boot.
    pub start_time: u64,
    /// Field 39: the CPU it is on or last ran on.
    pub processor: usize,
}

impl Stat {
    /// None if the text is not a stat line (too short, no name).
    pub fn parse(text: &str) -> Option<Stat> {
        let after = text.get(text.rfind(')')? + 1..)?;
        let fields: Vec<&str> = after.split_whitespace().collect();
        Some(Stat {
            state: fields.first()?.chars().next()?,
            start_time: fields.get(19)?.parse().ok()?,
            processor: fields.get(36)?.parse().ok()?,
        })
    }

    /// Process `pid`'s, or None if there is no such process.
    pub fn of_process(pid: u32) -> Option<Stat> {
        Self::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// Thread `tid` of process `pid`, or None if it is gone.
    pub fn of_thread(pid: u32, tid: u32) -> Option<Stat> {
        Self::parse(&std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?)
    }

    pub fn runnable(&self) -> bool {
        self.state == 'R'
    }
}

/// The real uid of `pid` (`/proc/PID/status`, `Uid:`), or None if there is
/// no such process.
pub fn real_uid(pid: u32) -> Option<u32> {
    status_number(
        &std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?,
        "Uid",
    )
}

/// The process (thread group) task `tid` belongs to (`Tgid:`), or None if
/// there is no such task.
pub fn thread_group(tid: u32) -> Option<u32> {
    status_number(
        &std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?,
        "Tgid",
    )
}

/// Task `tid`'s name (`/proc/TID/comm`, which names threads as well as
/// processes), or None if there is no such task.
pub fn comm(tid: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/comm")).ok()?;
    Some(text.trim_end_matches('\n').to_string())
}

/// The CPU as /proc/cpuinfo names it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuModel {
    pub vendor: String,
    pub family: u32,
    pub model: u32,
}

impl CpuModel {
    /// This machine's (the generic model when /proc/cpuinfo is unreadable).
    pub fn of_host() -> CpuModel {
        CpuModel::parse(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default())
    }

    /// From /proc/cpuinfo text: the first CPU's vendor_id, cpu family and
    /// model (missing fields stay empty or 0: the generic table applies).
    pub fn parse(cpuinfo: &str) -> CpuModel {
        let mut cpu = CpuModel::default();
        for line in cpuinfo.lines().take_while(|l| !l.trim().is_empty()) {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            match key.trim() {
                "vendor_id" => cpu.vendor = value.to_string(),
                "cpu family" => cpu.family = value.parse().unwrap_or(0),
                "model" => cpu.model = value.parse().unwrap_or(0),
                _ => {}
            }
        }
        cpu
    }
}

/// The first number of a `/proc/.../status` text's `FIELD:` line.
pub fn status_number(text: &str, field: &str) -> Option<u32> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?;
    line.split_whitespace().next()?.parse().ok()
}

/// The cgroup path in a `/proc/<pid>/cgroup` text: the unified (v2)
/// hierarchy's `0::/path` line, else the first line's path.
pub fn cgroup_path(text: &str) -> String {
    let path = |line: &str| line.splitn(3, ':').nth(2).map(str::to_string);
    text.lines()
        .find(|l| l.starts_with("0::"))
        .and_then(path)
        .or_else(|| text.lines().next().and_then(path))
        .unwrap_or_default()
}

/// Process `pid`'s cgroup path under `proc_root` (empty if it is gone).
pub fn process_cgroup(proc_root: &Path, pid: u32) -> String {
    std::fs::read_to_string(proc_root.join(pid.to_string()).join("cgroup"))
        .map(|t| cgroup_path(&t))
        .unwrap_or_default()
}

/// Busy and total jiffies of each CPU, from a `/proc/stat` text.
pub fn cpu_times(proc_stat: &str) -> std::collections::HashMap<usize, (u64, u64)> {
    proc_stat
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("cpu")?;
            let (id, fields) = rest.split_once(' ')?;
            let id: usize = id.parse().ok()?;
            let v: Vec<u64> = fields
                .split_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect();
            // user nice system idle iowait irq softirq steal ...
            let total: u64 = v.iter().take(8).sum();
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            Some((id, (total.saturating_sub(idle), total)))
        })
        .collect()
}

/// A thread's directory under a proc root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadDir {
    pub pid: u32,
    pub tid: u32,
    /// `<proc_root>/<pid>/task/<tid>`.
    pub dir: PathBuf,
}

impl ThreadDir {
    /// One of its files (`comm`, `stat`, ...), or None once it is gone.
    pub fn read(&self, file: &str) -> Option<String> {
        std::fs::read_to_string(self.dir.join(file)).ok()
    }
}

/// The process IDs under `proc_root` (normally /proc).
pub fn processes(proc_root: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Process `pid`'s threads under `proc_root` (none if it is gone).
pub fn threads_of(proc_root: &Path, pid: u32) -> Vec<ThreadDir> {
    let task = proc_root.join(pid.to_string()).join("task");
    let Ok(entries) = std::fs::read_dir(&task) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let tid = e.file_name().to_str()?.parse().ok()?;
            Some(ThreadDir {
                pid,
                tid,
                dir: e.path(),
            })
        })
        .collect()
}

/// Every thread under `proc_root`. Best effort: tasks that exit while it
/// reads are left out.
pub fn threads(proc_root: &Path) -> Vec<ThreadDir> {
    processes(proc_root)
        .into_iter()
        .flat_map(|pid| threads_of(proc_root, pid))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_names_last_paren() {
        // Field 39 (processor) is the 37th after the name, field 22 (start
        // time) the 20th.
        let stat = "12 (a) b) c) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 3 37";
        let s = Stat::parse(stat).unwrap();
        assert_eq!((s.state, s.start_time, s.processor), ('R', 19, 3));
        assert!(s.runnable());
        assert_eq!(Stat::parse("garbage"), None);
        assert_eq!(Stat::parse("1 (x) S 1 2"), None);
        let own = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let me = Stat::parse(&own).unwrap_or_else(|| panic!("{own}"));
        assert!(me.runnable(), "{own}");
        let pid = std::process::id();
        let started = Stat::of_process(pid).unwrap().start_time;
        assert_eq!(Stat::of_process(pid).unwrap().start_time, started);
        assert_eq!(Stat::of_process(u32::MAX - 1), None);
    }

    #[test]
    fn status_numbers_are_the_first_of_their_line() {
        let status = "Name:\tx\nTgid:\t42\nUid:\t1000\t0\t0\t0\n";
        assert_eq!(status_number(status, "Uid"), Some(1000));
        assert_eq!(status_number(status, "Tgid"), Some(42));
        assert_eq!(status_number(status, "Gid"), None);
        assert_eq!(real_uid(u32::MAX - 1), None);
        let me = std::process::id();
        assert_eq!(thread_group(me), Some(me));
        assert_eq!(thread_group(u32::MAX - 1), None);
    }

    #[test]
    fn cgroup_paths_come_from_the_unified_hierarchy() {
        assert_eq!(cgroup_path("0::/user.slice/app\n"), "/user.slice/app");
        assert_eq!(
            cgroup_path("12:cpu,cpuacct:/legacy\n0::/unified\n"),
            "/unified"
        );
        assert_eq!(cgroup_path("3:memory:/only-v1\n"), "/only-v1");
        assert_eq!(cgroup_path(""), "");
    }

    #[test]
    fn cpu_times_are_busy_and_total_jiffies() {
        let stat = "cpu  9 9 9 9\ncpu0 10 0 10 70 10 0 0 0 0 0\ncpu1 50 0 0 50 0 0 0 0\nintr 5\n";
        let t = cpu_times(stat);
        assert_eq!((t[&0], t[&1], t.len()), ((20, 100), (50, 100), 2));
    }

    #[test]
    fn this_process_and_its_threads_are_listed() {
        let pid = std::process::id();
        let root = Path::new("/proc");
        assert!(processes(root).contains(&pid));
        let mine = threads_of(root, pid);
        assert!(mine.iter().any(|t| t.tid == pid), "{mine:?}");
        assert!(mine.iter().all(|t| t.read("comm").is_some()));
        assert!(threads(root).len() >= mine.len());
        assert!(threads(Path::new("/nonexistent")).is_empty());
    }
}
