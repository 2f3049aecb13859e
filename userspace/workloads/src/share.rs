//! Weighted sharing: threads of different nice levels pinned to one CPU,
//! all spinning. Under any fair scheduler each gets CPU time in proportion
//! to its nice weight; the run times come from the kernel (schedstat).

use crate::{nice_weight, pin_current_thread};
use anyhow::{bail, Context, Result};
use sky_proc::SchedStat;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq)]
pub struct ShareReport {
    pub nices: Vec<i32>,
    pub run_ns: Vec<u64>,
}

impl ShareReport {
    /// CPU time of the first thread over the last, and what the weights
    /// say it should be.
    pub fn ratios(&self) -> (f64, f64) {
        let (Some(first), Some(last)) = (self.run_ns.first(), self.run_ns.last()) else {
            return (0.0, 0.0);
        };
        let w = |n: i32| nice_weight(n).unwrap_or(1) as f64;
        let want = w(self.nices[0]) / w(*self.nices.last().unwrap());
        (*first as f64 / (*last).max(1) as f64, want)
    }

    pub fn line(&self) -> String {
        let (got, want) = self.ratios();
        let list = |v: Vec<String>| v.join(",");
        format!(
            "result workload=share nices={} run_ms={} share_ratio={got:.3} weight_ratio={want:.3}",
            list(self.nices.iter().map(i32::to_string).collect()),
            list(
                self.run_ns
                    .iter()
                    .map(|n| (n / 1_000_000).to_string())
                    .collect()
            ),
        )
    }
}

/// Runs one spinning thread per nice level, all pinned to `cpu`.
pub fn run(nices: &[i32], cpu: usize, duration: Duration) -> Result<ShareReport> {
    if nices.len() < 2 {
        bail!("--nices needs at least two levels, got {nices:?}");
    }
    if let Some(bad) = nices.iter().find(|n| nice_weight(**n).is_none()) {
        bail!("--nices: {bad} is not a nice level (-20..=19)");
    }
    let barrier = Arc::new(Barrier::new(nices.len()));
    let handles: Vec<_> = nices
        .iter()
        .map(|&nice| {
            let barrier = barrier.clone();
            std::thread::spawn(move || -> Result<u64> {
                pin_current_thread(&[cpu])?;
                let tid = unsafe { libc::gettid() } as libc::id_t;
                if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) } != 0 {
                    bail!("setting nice {nice}: {}", std::io::Error::last_os_error());
                }
                barrier.wait();
                let before = SchedStat::of_self()?.run_ns;
                let end = Instant::now() + duration;
                while Instant::now() < end {
                    std::hint::spin_loop();
                }
                Ok(SchedStat::of_self()?.run_ns - before)
            })
        })
        .collect();
    let mut run_ns = Vec::new();
    for h in handles {
        run_ns.push(
            h.join()
                .map_err(|_| anyhow::anyhow!("a share thread panicked"))?
                .context("share thread")?,
        );
    }
    Ok(ShareReport {
        nices: nices.to_vec(),
        run_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_come_from_run_times_and_weights() {
        let r = ShareReport {
            nices: vec![0, 5],
            run_ns: vec![3_000_000_000, 1_000_000_000],
        };
        let (got, want) = r.ratios();
        assert!((got - 3.0).abs() < 1e-9);
        assert!((want - 1024.0 / 335.0).abs() < 1e-9);
        assert!(r.line().contains("run_ms=3000,1000"), "{}", r.line());
    }

    #[test]
    fn bad_levels_are_refused_by_name() {
        let e = run(&[0], 0, Duration::ZERO).unwrap_err().to_string();
        assert!(e.contains("--nices"), "{e}");
        let e = run(&[0, 25], 0, Duration::ZERO).unwrap_err().to_string();
        assert!(e.contains("25"), "{e}");
    }

    #[test]
    fn equal_levels_share_a_cpu_and_report_real_time() {
        let cpu = unsafe { libc::sched_getcpu() }.max(0) as usize;
        let r = run(&[0, 0], cpu, Duration::from_millis(200)).unwrap();
        assert_eq!(r.run_ns.len(), 2);
        assert!(r.run_ns.iter().all(|&ns| ns > 10_000_000), "{r:?}");
    }
}
