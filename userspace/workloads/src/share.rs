//! Weighted sharing: threads of different nice levels pinned to one CPU,
//! all spinning. Under any fair scheduler each gets CPU time in proportion
//! to its nice weight; the run and wait times come from the kernel
//! (schedstat). With a renice period the first thread changes its own nice
//! level (n, n+1, n, ...) that often as it spins: each change makes the
//! kernel restart it on its CPU without a slice end, which must not give
//! it a fresh slice, or it keeps the CPU while the others wait.

use crate::{nice_weight, pin_current_thread};
use anyhow::{bail, Context, Result};
use sky_proc::SchedStat;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq)]
pub struct ShareReport {
    pub nices: Vec<i32>,
    /// The first thread alternated between its level and the next.
    pub reniced: bool,
    pub run_ns: Vec<u64>,
    pub wait_ns: Vec<u64>,
    /// Times each thread was switched in.
    pub runs: Vec<u64>,
}

impl ShareReport {
    /// CPU time of the first thread over the last, and what the weights
    /// say it should be.
    pub fn ratios(&self) -> (f64, f64) {
        let (Some(first), Some(last)) = (self.run_ns.first(), self.run_ns.last()) else {
            return (0.0, 0.0);
        };
        let w = |n: i32| nice_weight(n).unwrap_or(1) as f64;
        let first_weight = if self.reniced {
            (w(self.nices[0]) + w(self.nices[0] + 1)) / 2.0
        } else {
            w(self.nices[0])
        };
        let want = first_weight / w(*self.nices.last().unwrap());
        (*first as f64 / (*last).max(1) as f64, want)
    }

    /// Each thread's mean wait between two runs, in microseconds.
    pub fn wait_per_run_us(&self) -> Vec<u64> {
        self.wait_ns
            .iter()
            .zip(&self.runs)
            .map(|(w, r)| w / r.max(&1) / 1000)
            .collect()
    }

    pub fn line(&self) -> String {
        let (got, want) = self.ratios();
        let list = |v: &[u64], unit: u64| {
            v.iter()
                .map(|n| (n / unit).to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let nices: Vec<String> = self.nices.iter().map(i32::to_string).collect();
        format!(
            "result workload=share nices={} reniced={} run_ms={} runs={} wait_per_run_us={} \
             share_ratio={got:.3} weight_ratio={want:.3}",
            nices.join(","),
            u8::from(self.reniced),
            list(&self.run_ns, 1_000_000),
            list(&self.runs, 1),
            list(&self.wait_per_run_us(), 1),
        )
    }
}

fn set_nice(nice: i32) -> Result<()> {
    let tid = unsafe { libc::gettid() } as libc::id_t;
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) } != 0 {
        bail!("setting nice {nice}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// Runs one spinning thread per nice level, all pinned to `cpu`; the first
/// renices itself every `renice_every`, if given.
pub fn run(
    nices: &[i32],
    cpu: usize,
    duration: Duration,
    renice_every: Option<Duration>,
) -> Result<ShareReport> {
    if nices.len() < 2 {
        bail!("--nices needs at least two levels, got {nices:?}");
    }
    if let Some(bad) = nices.iter().find(|n| nice_weight(**n).is_none()) {
        bail!("--nices: {bad} is not a nice level (-20..=19)");
    }
    if renice_every.is_some() && nice_weight(nices[0] + 1).is_none() {
        bail!(
            "--renice-first-every-ms alternates the first level with the next: {} has none",
            nices[0]
        );
    }
    let barrier = Arc::new(Barrier::new(nices.len()));
    let handles: Vec<_> = nices
        .iter()
        .enumerate()
        .map(|(i, &nice)| {
            let barrier = barrier.clone();
            let renice_every = renice_every.filter(|_| i == 0);
            std::thread::spawn(move || -> Result<SchedStat> {
                pin_current_thread(&[cpu])?;
                set_nice(nice)?;
                barrier.wait();
                let before = SchedStat::of_self()?;
                let start = Instant::now();
                let end = start + duration;
                let mut changes = 0u32;
                loop {
                    let now = Instant::now();
                    if now >= end {
                        break;
                    }
                    if let Some(every) = renice_every {
                        let due = (now - start).as_nanos() / every.as_nanos().max(1);
                        if due > u128::from(changes) {
                            changes += 1;
                            set_nice(nice + (changes % 2) as i32)?;
                        }
                    }
                    std::hint::spin_loop();
                }
                let after = SchedStat::of_self()?;
                Ok(SchedStat {
                    run_ns: after.run_ns - before.run_ns,
                    wait_ns: after.wait_ns - before.wait_ns,
                    timeslices: after.timeslices - before.timeslices,
                })
            })
        })
        .collect();
    let mut report = ShareReport {
        nices: nices.to_vec(),
        reniced: renice_every.is_some(),
        run_ns: Vec::new(),
        wait_ns: Vec::new(),
        runs: Vec::new(),
    };
    for h in handles {
        let s = h
            .join()
            .map_err(|_| anyhow::anyhow!("a share thread panicked"))?
            .context("share thread")?;
        report.run_ns.push(s.run_ns);
        report.wait_ns.push(s.wait_ns);
        report.runs.push(s.timeslices);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_come_from_run_times_and_weights() {
        let mut r = ShareReport {
            nices: vec![0, 5],
            reniced: false,
            run_ns: vec![3_000_000_000, 1_000_000_000],
            wait_ns: vec![1_000_000_000, 3_000_000_000],
            runs: vec![500, 1000],
        };
        let (got, want) = r.ratios();
        assert!((got - 3.0).abs() < 1e-9);
        assert!((want - 1024.0 / 335.0).abs() < 1e-9);
        let line = r.line();
        assert!(
            line.contains(" reniced=0 run_ms=3000,1000 runs=500,1000 "),
            "{line}"
        );
        assert!(line.contains(" wait_per_run_us=2000,3000 "), "{line}");
        // A reniced first thread weighs the mean of its two levels.
        r.reniced = true;
        assert!((r.ratios().1 - (1024.0 + 820.0) / 2.0 / 335.0).abs() < 1e-9);
    }

    #[test]
    fn bad_levels_are_refused_by_name() {
        let e = run(&[0], 0, Duration::ZERO, None).unwrap_err().to_string();
        assert!(e.contains("--nices"), "{e}");
        let e = run(&[0, 25], 0, Duration::ZERO, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("25"), "{e}");
        let every = Some(Duration::from_millis(1));
        let e = run(&[19, 0], 0, Duration::ZERO, every)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--renice-first-every-ms") && e.contains("19"),
            "{e}"
        );
    }

    #[test]
    fn equal_levels_share_a_cpu_and_report_real_time() {
        let cpu = unsafe { libc::sched_getcpu() }.max(0) as usize;
        let r = run(&[0, 0], cpu, Duration::from_millis(200), None).unwrap();
        assert_eq!(r.run_ns.len(), 2);
        assert!(r.run_ns.iter().all(|&ns| ns > 10_000_000), "{r:?}");
        assert!(r.runs.iter().all(|&n| n > 0), "{r:?}");
    }
}
