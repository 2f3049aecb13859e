//! What the scheduler benchmark runs: the cells of the sweep, the scx_sky
//! variants compared with EEVDF, and the scenario command that runs them
//! all in one boot.

use crate::vm::CpuTopology;
use anyhow::{bail, Context, Result};
use std::time::Duration;

/// The scx_sky variants, each an argument string for scx_sky, compared
/// with EEVDF in every cell, in this order. This is the one place to edit
/// when a policy option lands (e.g. `-p sky1 --decay sleep`).
pub const SKY_VARIANTS: &[&str] = &["-p sky1", "-p sky1 --decay sleep"];

/// Sleep between compute bursts, µs: from shorter than a slice (the cache
/// stays warm) to longer than the derived core decay threshold.
pub const SLEEPS_US: [u32; 4] = [100, 500, 2_000, 5_000];
/// Array per task, KiB: fits L1, fits L2, only fits an LLC.
pub const ARRAYS_KB: [u32; 3] = [4, 64, 1_024];
/// Tasks per guest CPU: no contention, then queues of one and two.
pub const TASKS_PER_CPU: [u32; 3] = [1, 2, 3];
/// Compute burst, µs: the SKY-1 workload's default.
pub const BURST_US: u32 = 2_000;
/// Topologies swept when none is given: one LLC of two SMT cores, then two.
pub const DEFAULT_TOPOLOGIES: [&str; 2] = ["1x2x2", "2x2x2"];

/// One point of the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    pub sleep_us: u32,
    pub array_kb: u32,
    pub tasks_per_cpu: u32,
}

impl Cell {
    /// How the scenario and its result lines name the cell.
    pub fn id(&self) -> String {
        format!("{}:{}:{}", self.sleep_us, self.array_kb, self.tasks_per_cpu)
    }

    pub fn sleep_label(&self) -> String {
        format!("{} ms", self.sleep_us as f64 / 1000.0)
    }

    pub fn array_label(&self) -> String {
        if self.array_kb.is_multiple_of(1024) {
            format!("{} MiB", self.array_kb / 1024)
        } else {
            format!("{} KiB", self.array_kb)
        }
    }
}

/// Every combination, sleep outermost.
pub fn full_sweep() -> Vec<Cell> {
    let mut cells = Vec::new();
    for sleep_us in SLEEPS_US {
        for array_kb in ARRAYS_KB {
            for tasks_per_cpu in TASKS_PER_CPU {
                cells.push(Cell {
                    sleep_us,
                    array_kb,
                    tasks_per_cpu,
                });
            }
        }
    }
    cells
}

/// Four cells that between them take every sleep, every array size and
/// every load once or more, for a run of a few minutes.
pub fn quick_sweep() -> Vec<Cell> {
    [(100, 4, 2), (500, 64, 1), (2_000, 1_024, 3), (5_000, 4, 3)]
        .into_iter()
        .map(|(sleep_us, array_kb, tasks_per_cpu)| Cell {
            sleep_us,
            array_kb,
            tasks_per_cpu,
        })
        .collect()
}

/// Refuses a variant the scenario could not pass through the shell intact:
/// it is word-split into scx_sky's arguments, so quotes, globs and
/// separators would change its meaning.
pub fn check_variant(v: &str) -> Result<()> {
    if v.split_whitespace().next().is_none() {
        bail!("scx_sky variant {v:?} is empty");
    }
    if let Some(c) = v
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || " ._-=/".contains(*c)))
    {
        bail!(
            "scx_sky variant {v:?} has {c:?}: only letters, digits, spaces and . _ - = / are passed on"
        );
    }
    Ok(())
}

/// A variant given on the command line, checked.
pub fn parse_variant(v: &str) -> Result<String> {
    check_variant(v)?;
    Ok(v.to_string())
}

/// The topologies to boot: `given` in order, or the defaults.
pub fn topologies(given: &[CpuTopology]) -> Result<Vec<CpuTopology>> {
    if given.is_empty() {
        return DEFAULT_TOPOLOGIES.iter().map(|t| t.parse()).collect();
    }
    for (i, t) in given.iter().enumerate() {
        if given[..i].contains(t) {
            bail!("--topology {t} is given twice");
        }
    }
    Ok(given.to_vec())
}

/// Everything one boot runs.
#[derive(Debug, Clone)]
pub struct Plan {
    pub cells: Vec<Cell>,
    pub variants: Vec<String>,
    pub seconds: u32,
    /// Also run the ping-pong wakeup storm (one pair per guest CPU).
    pub storm: bool,
}

impl Plan {
    pub fn new(cells: Vec<Cell>, variants: &[&str], seconds: u32, storm: bool) -> Result<Plan> {
        for v in variants {
            check_variant(v)?;
        }
        if variants.is_empty() {
            bail!("no scx_sky variant to compare with EEVDF");
        }
        if cells.is_empty() && !storm {
            bail!("nothing to run: no cells and no storm");
        }
        if seconds == 0 {
            bail!("--seconds must be at least 1");
        }
        Ok(Plan {
            cells,
            variants: variants.iter().map(|v| v.to_string()).collect(),
            seconds,
            storm,
        })
    }

    /// The guest command: settings as environment variables, cells as
    /// arguments, to tests/vm/bench.sh.
    pub fn command(&self) -> String {
        let mut cmd = format!(
            "BENCH_SECONDS={} BENCH_BURST_US={BURST_US} BENCH_STORM={} BENCH_VARIANTS={}",
            self.seconds,
            u8::from(self.storm),
            self.variants.len()
        );
        for (i, v) in self.variants.iter().enumerate() {
            // check_variant keeps quotes out, so single quotes suffice.
            cmd.push_str(&format!(" BENCH_VARIANT_{i}='{v}'"));
        }
        cmd.push_str(" sh ./bench.sh");
        for c in &self.cells {
            cmd.push(' ');
            cmd.push_str(&c.id());
        }
        cmd
    }

    /// Workload runs in one boot: EEVDF plus each variant, per cell and
    /// for the storm.
    pub fn runs(&self) -> usize {
        (self.cells.len() + usize::from(self.storm)) * (1 + self.variants.len())
    }

    /// A bound on the boot's wall time that only a hang exceeds: each run
    /// plus generous start-up and teardown (loading scx_sky under TCG takes
    /// seconds; a failing start waits 30 s for the enabled state).
    pub fn timeout(&self) -> Duration {
        let groups = self.cells.len() + usize::from(self.storm);
        let eevdf = groups as u64 * (u64::from(self.seconds) + 10);
        let sky = (groups * self.variants.len()) as u64 * (u64::from(self.seconds) + 40);
        Duration::from_secs(300 + eevdf + sky)
    }
}

/// Reads a cell id back (`SLEEP_US:ARRAY_KB:TASKS_PER_CPU`).
pub fn parse_cell(id: &str) -> Result<Cell> {
    let parts: Vec<u32> = id
        .split(':')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("cell {id:?} is not SLEEP_US:ARRAY_KB:TASKS_PER_CPU"))?;
    let [sleep_us, array_kb, tasks_per_cpu] = parts[..] else {
        bail!("cell {id:?} is not SLEEP_US:ARRAY_KB:TASKS_PER_CPU");
    };
    Ok(Cell {
        sleep_us,
        array_kb,
        tasks_per_cpu,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_covers_every_combination_once() {
        let all = full_sweep();
        assert_eq!(all.len(), 4 * 3 * 3);
        for (i, c) in all.iter().enumerate() {
            assert!(!all[..i].contains(c), "{c:?} twice");
            assert_eq!(parse_cell(&c.id()).unwrap(), *c);
        }
        let quick = quick_sweep();
        assert_eq!(quick.len(), 4);
        for c in &quick {
            assert!(all.contains(c), "quick cell {c:?} is not in the sweep");
        }
        // Between them the quick cells take every value of every axis.
        for s in SLEEPS_US {
            assert!(quick.iter().any(|c| c.sleep_us == s), "sleep {s}");
        }
        for a in ARRAYS_KB {
            assert!(quick.iter().any(|c| c.array_kb == a), "array {a}");
        }
        for t in TASKS_PER_CPU {
            assert!(quick.iter().any(|c| c.tasks_per_cpu == t), "load {t}");
        }
    }

    #[test]
    fn labels_read_as_units() {
        let c = parse_cell("100:1024:2").unwrap();
        assert_eq!(
            (c.sleep_label(), c.array_label()),
            ("0.1 ms".into(), "1 MiB".into())
        );
        assert_eq!(parse_cell("5000:64:1").unwrap().array_label(), "64 KiB");
        for bad in ["", "1:2", "1:2:3:4", "a:2:3", "-1:2:3"] {
            assert!(parse_cell(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn variants_are_checked() {
        for v in SKY_VARIANTS {
            check_variant(v).unwrap();
        }
        check_variant("-p sky1 --decay sleep --slice-us=5000").unwrap();
        for bad in [
            "",
            "  ",
            "-p 'x'",
            "-p a;reboot",
            "-p $(x)",
            "-p *",
            "-p a,b",
        ] {
            let err = check_variant(bad).unwrap_err().to_string();
            assert!(err.contains("variant"), "{bad:?}: {err}");
        }
        assert!(Plan::new(quick_sweep(), &["-p x'"], 5, false).is_err());
        assert!(Plan::new(quick_sweep(), &[], 5, false).is_err());
        assert!(Plan::new(vec![], &["-p sky1"], 5, false).is_err());
        assert!(Plan::new(quick_sweep(), &["-p sky1"], 0, false).is_err());
    }

    #[test]
    fn the_command_carries_every_setting() {
        let plan = Plan::new(
            quick_sweep(),
            &["-p sky1", "-p sky1 --decay sleep"],
            3,
            true,
        )
        .unwrap();
        let cmd = plan.command();
        assert!(
            cmd.starts_with("BENCH_SECONDS=3 BENCH_BURST_US=2000 BENCH_STORM=1 BENCH_VARIANTS=2 ")
        );
        assert!(cmd.contains(" BENCH_VARIANT_0='-p sky1' BENCH_VARIANT_1='-p sky1 --decay sleep' "));
        assert!(
            cmd.ends_with(" sh ./bench.sh 100:4:2 500:64:1 2000:1024:3 5000:4:3"),
            "{cmd}"
        );
        assert_eq!(plan.runs(), 5 * 3);
        assert!(plan.timeout() > Duration::from_secs(15 * 3));
    }

    #[test]
    fn topologies_default_to_both_and_refuse_repeats() {
        let both = topologies(&[]).unwrap();
        assert_eq!(both.iter().map(|t| t.cpus()).collect::<Vec<_>>(), [4, 8]);
        let one: CpuTopology = "2x1x2".parse().unwrap();
        assert_eq!(topologies(&[one]).unwrap(), vec![one]);
        let err = topologies(&[one, one]).unwrap_err().to_string();
        assert!(err.contains("--topology 2x1x2"), "{err}");
    }
}
