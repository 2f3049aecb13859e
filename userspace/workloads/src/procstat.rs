//! Per-task counters the kernel keeps for every scheduler class:
//! `/proc/<pid>/schedstat` (run ns, run-queue wait ns, timeslices) and
//! `/proc/<pid>/sched` (`se.nr_migrations`).

use anyhow::{bail, Context, Result};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedStat {
    pub run_ns: u64,
    pub wait_ns: u64,
    pub timeslices: u64,
}

impl SchedStat {
    pub fn parse(text: &str) -> Result<Self> {
        let f: Vec<u64> = text
            .split_whitespace()
            .map(|w| w.parse::<u64>())
            .collect::<Result<_, _>>()
            .with_context(|| format!("schedstat {text:?} is not three numbers"))?;
        if f.len() != 3 {
            bail!("schedstat {text:?} is not three numbers");
        }
        Ok(SchedStat {
            run_ns: f[0],
            wait_ns: f[1],
            timeslices: f[2],
        })
    }

    pub fn of_self() -> Result<Self> {
        let path = "/proc/thread-self/schedstat";
        Self::parse(&std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?)
    }
}

/// Reads one numeric field (e.g. `se.nr_migrations`) of a `/proc/.../sched`
/// text.
pub fn sched_field(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        (name.trim() == field).then(|| value.trim().parse().ok())?
    })
}

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

pub fn migrations_of_self() -> Result<u64> {
    let path = "/proc/thread-self/sched";
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    sched_field(&text, "se.nr_migrations")
        .with_context(|| format!("{path} has no se.nr_migrations"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_parses() {
        let s = SchedStat::parse("123 456 7\n").unwrap();
        assert_eq!(
            s,
            SchedStat {
                run_ns: 123,
                wait_ns: 456,
                timeslices: 7
            }
        );
        assert!(SchedStat::parse("1 2").is_err());
        assert!(SchedStat::parse("1 x 3").is_err());
    }

    #[test]
    fn sched_fields_parse() {
        let text = "sky-work (42, #threads: 1)\n---------\nse.exec_start    :   12.5\nse.nr_migrations                             :                   17\nnr_switches : 3\n";
        assert_eq!(sched_field(text, "se.nr_migrations"), Some(17));
        assert_eq!(sched_field(text, "nr_switches"), Some(3));
        assert_eq!(sched_field(text, "se.exec_start"), None);
        assert_eq!(sched_field(text, "missing"), None);
    }

    #[test]
    fn own_counters_are_readable_here() {
        // Every Linux kernel with schedstats has these; so does the VM. Run
        // and sleep first: a thread's run time is only folded in when it
        // is switched out.
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(2) {
            std::hint::spin_loop();
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        let s = SchedStat::of_self().unwrap();
        assert!(s.run_ns > 0);
        assert!(migrations_of_self().is_ok());
    }

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
