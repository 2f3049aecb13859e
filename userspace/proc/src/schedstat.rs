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
}
