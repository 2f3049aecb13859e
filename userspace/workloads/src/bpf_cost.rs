//! What a BPF scheduler's callbacks cost, from the kernel's own BPF
//! statistics (`kernel.bpf_stats_enabled`: run time and run count of every
//! program), for whichever sched_ext scheduler is loaded: its callbacks are
//! the loaded `struct_ops` programs. The same figure exists for every
//! scheduler (zero for EEVDF), so overhead is compared without trusting any
//! scheduler's own counters.
//!
//! The statistics cost two clock reads per program run, so a run measured
//! this way is slower than one that is not: measure cost and throughput in
//! separate runs.

use anyhow::{Context, Result};
use libbpf_rs::query::ProgInfoIter;
use libbpf_rs::ProgramType;
use std::collections::BTreeMap;
use std::time::Duration;

const STATS_SYSCTL: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// Run count and total run time of one program.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    pub runs: u64,
    pub ns: u64,
}

/// Every loaded struct_ops program's cost so far, by program name.
pub fn snapshot() -> BTreeMap<String, Cost> {
    let mut all = BTreeMap::new();
    for p in ProgInfoIter::default().filter(|p| p.ty == ProgramType::StructOps) {
        let c: &mut Cost = all
            .entry(p.name.to_string_lossy().into_owned())
            .or_default();
        c.runs += p.run_cnt;
        c.ns += p.run_time_ns;
    }
    all
}

/// What each program cost between two snapshots; programs that did not
/// run are left out, programs loaded in between count from zero, and a
/// counter that went back (a scheduler reloaded under the same names)
/// counts as not having run.
pub fn since(
    before: &BTreeMap<String, Cost>,
    after: &BTreeMap<String, Cost>,
) -> BTreeMap<String, Cost> {
    after
        .iter()
        .filter_map(|(name, a)| {
            let b = before.get(name).copied().unwrap_or_default();
            let d = Cost {
                runs: a.runs.saturating_sub(b.runs),
                ns: a.ns.saturating_sub(b.ns),
            };
            (d.runs > 0).then(|| (name.clone(), d))
        })
        .collect()
}

/// The result line: totals, then `name=runs/avg_ns` per callback, busiest
/// first.
pub fn line(costs: &BTreeMap<String, Cost>, seconds: f64) -> String {
    let runs: u64 = costs.values().map(|c| c.runs).sum();
    let ns: u64 = costs.values().map(|c| c.ns).sum();
    let mut out = format!(
        "result workload=bpf-cost seconds={seconds} callbacks={runs} bpf_ns={ns} bpf_ns_per_s={:.0}",
        ns as f64 / seconds
    );
    let mut by_runs: Vec<_> = costs.iter().collect();
    by_runs.sort_by(|a, b| b.1.runs.cmp(&a.1.runs).then(a.0.cmp(b.0)));
    for (name, c) in by_runs {
        out.push_str(&format!(" {name}={}/{}ns", c.runs, c.ns / c.runs.max(1)));
    }
    out
}

/// Turns the kernel's BPF statistics on for as long as the guard lives,
/// restoring the previous setting after.
pub struct StatsOn {
    was: String,
}

impl StatsOn {
    pub fn new() -> Result<Self> {
        let was = std::fs::read_to_string(STATS_SYSCTL).with_context(|| {
            format!("reading {STATS_SYSCTL} (BPF statistics need a kernel with them and root)")
        })?;
        std::fs::write(STATS_SYSCTL, "1").with_context(|| format!("enabling {STATS_SYSCTL}"))?;
        Ok(StatsOn {
            was: was.trim().to_string(),
        })
    }
}

impl Drop for StatsOn {
    fn drop(&mut self) {
        let _ = std::fs::write(STATS_SYSCTL, &self.was);
    }
}

/// Watches for `duration` with statistics on; the per-program cost.
pub fn watch(duration: Duration) -> Result<BTreeMap<String, Cost>> {
    let _on = StatsOn::new()?;
    let before = snapshot();
    std::thread::sleep(duration);
    Ok(since(&before, &snapshot()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn costs(items: &[(&str, u64, u64)]) -> BTreeMap<String, Cost> {
        items
            .iter()
            .map(|&(n, runs, ns)| (n.to_string(), Cost { runs, ns }))
            .collect()
    }

    #[test]
    fn differences_keep_only_programs_that_ran() {
        let before = costs(&[("sky_running", 10, 1000), ("sky_tick", 5, 50)]);
        let after = costs(&[
            ("sky_running", 30, 5000),
            ("sky_tick", 5, 50),
            ("sky_new", 2, 400),
        ]);
        let d = since(&before, &after);
        assert_eq!(d, costs(&[("sky_running", 20, 4000), ("sky_new", 2, 400)]));
        let l = line(&d, 2.0);
        assert!(
            l.starts_with(
                "result workload=bpf-cost seconds=2 callbacks=22 bpf_ns=4400 bpf_ns_per_s=2200"
            ),
            "{l}"
        );
        assert!(l.ends_with(" sky_running=20/200ns sky_new=2/200ns"), "{l}");
    }

    #[test]
    fn a_counter_that_went_back_counts_as_zero() {
        // A scheduler reloaded between snapshots restarts its counters.
        let d = since(
            &costs(&[("sky_running", 50, 900)]),
            &costs(&[("sky_running", 3, 30)]),
        );
        assert!(d.is_empty(), "{d:?}");
    }
}
