//! How long the calling thread waited for a CPU, watched from its own
//! schedstat (`sky_proc::SchedStat`): the loads' instrument for waits
//! under any scheduler.

use anyhow::{Context, Result};
use sky_proc::SchedStat;

/// Watches the calling thread's run-queue wait (schedstat's second field)
/// and keeps the longest single increase seen between two looks. Called
/// often (every few hundred microseconds of work), an increase spans at
/// most a wait or two, so the maximum bounds the longest wait the kernel
/// saw this thread endure, whatever scheduler ran it.
pub struct WaitWatch {
    file: std::fs::File,
    last: SchedStat,
    next_look: std::time::Instant,
    pub waits: Waits,
}

/// The longest waits a `WaitWatch` saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Waits {
    /// The most wait between two looks: the longest wait, or several
    /// summed if the thread was descheduled again before it could look.
    pub max_ns: u64,
    /// The same spread over the runs between the looks: the longest wait
    /// is at least this (exact where one run came between the looks).
    pub max_single_ns: u64,
}

impl Waits {
    /// The worse of two, figure by figure.
    pub fn max(self, other: Waits) -> Waits {
        Waits {
            max_ns: self.max_ns.max(other.max_ns),
            max_single_ns: self.max_single_ns.max(other.max_single_ns),
        }
    }
}

/// How often a busy thread looks at its wait counter (`WaitWatch::tick`).
pub const WAIT_LOOK_EVERY: std::time::Duration = std::time::Duration::from_micros(200);

impl WaitWatch {
    /// Opens the calling thread's own schedstat; call from that thread.
    pub fn for_current_thread() -> Result<Self> {
        let path = "/proc/thread-self/schedstat";
        let file = std::fs::File::open(path).with_context(|| format!("opening {path}"))?;
        let mut w = WaitWatch {
            file,
            last: SchedStat::default(),
            next_look: std::time::Instant::now(),
            waits: Waits::default(),
        };
        w.last = w.read()?;
        Ok(w)
    }

    fn read(&mut self) -> Result<SchedStat> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 128];
        let n = self
            .file
            .read_at(&mut buf, 0)
            .context("reading /proc/thread-self/schedstat")?;
        SchedStat::parse(&String::from_utf8_lossy(&buf[..n]))
    }

    /// Takes a look; returns the counters read.
    pub fn check(&mut self) -> Result<SchedStat> {
        let now = self.read()?;
        let waited = now.wait_ns.saturating_sub(self.last.wait_ns);
        let runs = now.timeslices.saturating_sub(self.last.timeslices).max(1);
        self.waits = self.waits.max(Waits {
            max_ns: waited,
            max_single_ns: waited / runs,
        });
        self.last = now;
        self.next_look = std::time::Instant::now() + WAIT_LOOK_EVERY;
        Ok(now)
    }

    /// For a busy loop: takes a look if WAIT_LOOK_EVERY has passed since
    /// the last one.
    pub fn tick(&mut self) -> Result<()> {
        if std::time::Instant::now() >= self.next_look {
            self.check()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_watch_sees_a_wait_this_thread_endured() {
        // Two threads pinned to one CPU take turns, so each waits while the
        // other runs: the watch must see a wait of at least a tick or so.
        let cpu = unsafe { libc::sched_getcpu() }.max(0) as usize;
        let spin = move || {
            crate::pin_current_thread(&[cpu]).unwrap();
            let mut watch = WaitWatch::for_current_thread().unwrap();
            let t = std::time::Instant::now();
            while t.elapsed() < std::time::Duration::from_millis(300) {
                std::hint::spin_loop();
                watch.tick().unwrap();
            }
            watch.waits
        };
        let other = std::thread::spawn(spin);
        let mine = spin();
        let theirs = other.join().unwrap();
        assert!(
            mine.max_ns.max(theirs.max_ns) >= 100_000,
            "two spinners on one CPU never waited: {mine:?} / {theirs:?} ns"
        );
        for w in [mine, theirs] {
            assert!(
                w.max_single_ns > 0 && w.max_single_ns <= w.max_ns,
                "a single wait against the waits between looks: {w:?}"
            );
        }
    }
}
