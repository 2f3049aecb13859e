//! What the host took from a VM while it ran. Under TCG every vCPU is
//! run by one host thread, and the guest's clocks follow the host's: while
//! that thread waits for a host CPU (another process on it, or the
//! hypervisor's steal on a cloud machine) guest time runs on and no guest
//! CPU moves. A guest-time bound on a wait is a measurement of the
//! scheduler only if that thread had its CPU, so every VM run reports how
//! long it did not, and the VM tests print that beside a failed bound.
//! (A schedstat line is parsed here, not with sky-workloads' `SchedStat`:
//! that crate is the guest's, and xtask does not depend on it.)

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

/// The host's share of a VM run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HostLoad {
    /// How long qemu's busiest thread (the TCG thread) sat runnable on a
    /// host run queue without a CPU.
    pub vcpu_wait: Duration,
    /// The host's steal time over the run, summed over its CPUs (time its
    /// own hypervisor gave to others).
    pub steal: Duration,
    /// The run's wall time.
    pub wall: Duration,
    /// qemu's host priority (None if it could not be read).
    pub nice: Option<i32>,
}

impl HostLoad {
    /// The share of the run the guest stood still for: the TCG thread's
    /// wait plus the steal on one CPU, over the wall time.
    pub fn lost_share(&self) -> f64 {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let lost = self.vcpu_wait.as_secs_f64() + self.steal.as_secs_f64() / cpus;
        lost / self.wall.as_secs_f64().max(1e-9)
    }
}

impl fmt::Display for HostLoad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "host vcpu_wait_ms={} steal_ms={} wall_ms={} lost_share={:.3} nice=",
            self.vcpu_wait.as_millis(),
            self.steal.as_millis(),
            self.wall.as_millis(),
            self.lost_share()
        )?;
        match self.nice {
            Some(n) => write!(f, "{n}"),
            None => f.write_str("unknown"),
        }
    }
}

/// Samples a running qemu: call `sample` now and then while it runs (its
/// /proc entries go with it), `finish` when it is done.
pub struct HostLoadMeter {
    pid: u32,
    start: Instant,
    steal_start: Option<u64>,
    nice: Option<i32>,
    /// The busiest thread's wait at the last sample that read one.
    vcpu_wait_ns: u64,
}

impl HostLoadMeter {
    pub fn start(pid: u32) -> Self {
        HostLoadMeter {
            pid,
            start: Instant::now(),
            steal_start: steal_ticks(),
            nice: nice_of(pid),
            vcpu_wait_ns: 0,
        }
    }

    /// Reads the busiest thread's wait; false if qemu's threads could not
    /// be read (it has exited).
    pub fn sample(&mut self) -> bool {
        match busiest_thread_wait_ns(self.pid) {
            Some(wait) => {
                self.vcpu_wait_ns = wait;
                true
            }
            None => false,
        }
    }

    pub fn finish(self) -> HostLoad {
        let ticks = match (self.steal_start, steal_ticks()) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        HostLoad {
            vcpu_wait: Duration::from_nanos(self.vcpu_wait_ns),
            steal: Duration::from_millis(ticks * 1000 / clock_ticks_per_s()),
            wall: self.start.elapsed(),
            nice: self.nice,
        }
    }
}

/// The host priority of process `pid`.
fn nice_of(pid: u32) -> Option<i32> {
    // getpriority returns -1 for nice -1 as for an error: errno tells.
    // SAFETY: plain system calls about a process of ours.
    unsafe {
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, pid);
        (nice != -1 || *libc::__errno_location() == 0).then_some(nice)
    }
}

/// The run-queue wait (ns) of the thread of `pid` that has run longest.
fn busiest_thread_wait_ns(pid: u32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| parse_schedstat(&s))
        .max_by_key(|&(run, _)| run)
        .map(|(_, wait)| wait)
}

/// (run ns, wait ns) of a schedstat line.
fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut f = text.split_whitespace().map(|w| w.parse::<u64>().ok());
    Some((f.next()??, f.next()??))
}

/// The host's steal time in clock ticks, summed over its CPUs.
fn steal_ticks() -> Option<u64> {
    parse_steal(&std::fs::read_to_string(Path::new("/proc/stat")).ok()?)
}

/// The eighth number of /proc/stat's `cpu` line.
fn parse_steal(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

fn clock_ticks_per_s() -> u64 {
    // SAFETY: sysconf only reads a constant of the running system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_run_and_wait_of_a_schedstat_line() {
        assert_eq!(parse_schedstat("123 456 7\n"), Some((123, 456)));
        assert_eq!(parse_schedstat("123"), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
    }

    #[test]
    fn reads_steal_from_the_cpu_line() {
        let stat = "cpu  970764 189590 75890 1157251 16423 0 840 9674 0 0\n\
                    cpu0 1 2 3 4 5 6 7 8 9 10\n";
        assert_eq!(parse_steal(stat), Some(9674));
        assert_eq!(parse_steal("cpu0 1 2 3\n"), None);
    }

    #[test]
    fn this_process_is_measured_while_it_runs() {
        let mut meter = HostLoadMeter::start(std::process::id());
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        assert!(meter.sample(), "this process's threads were not read");
        let load = meter.finish();
        assert!(load.wall >= Duration::from_millis(20), "{load}");
        assert!(load.lost_share() >= 0.0 && load.lost_share().is_finite());
        assert!(load.to_string().starts_with("host vcpu_wait_ms="));
        assert_eq!(load.nice, nice_of(std::process::id()));
        assert!(load.nice.is_some(), "this process's priority was not read");
    }

    #[test]
    fn the_lost_share_adds_the_wait_to_the_steal_of_one_cpu() {
        let load = HostLoad {
            vcpu_wait: Duration::from_millis(100),
            steal: Duration::ZERO,
            wall: Duration::from_secs(1),
            nice: Some(-10),
        };
        assert!(load.to_string().ends_with(" nice=-10"), "{load}");
        assert!((load.lost_share() - 0.1).abs() < 1e-9);
    }
}
