//! The SKY-1 workload: N processes, each repeatedly computing over its own
//! small array (4 KB by default) in short bursts separated by short sleeps.
//! A scheduler that keeps each process on its last CPU keeps the array in
//! that CPU's cache.
//!
//! Each process also samples the kernel's own counters (schedstat run-queue
//! wait per cycle, migrations), so the result does not depend on the
//! scheduler under test reporting honestly.

use crate::cache_phase::{mark, Marker};
use crate::wait_watch::WaitWatch;
use crate::{child, percentile};
use anyhow::{bail, Context, Result};
use sky_proc::{migrations_of_self, SchedStat};
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct CacheLoop {
    pub procs: usize,
    pub array_bytes: usize,
    pub burst: Duration,
    pub sleep: Duration,
    pub duration: Duration,
    /// Bytes between the words a pass updates: 64 touches each 64-byte
    /// line once; 16 every line of SKY-1's 16-byte-line cache.
    pub stride: usize,
    /// Mark the run as one phase for the VM's cache model.
    pub mark_phase: bool,
}

/// What all processes did, summed, plus the spread of per-cycle waits.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    pub procs: usize,
    /// Passes over the arrays: work done.
    pub passes: u64,
    pub migrations: u64,
    pub timeslices: u64,
    pub cycles: u64,
    pub wait_p50_ns: u64,
    pub wait_p99_ns: u64,
    /// The longest single run-queue wait any process saw (watched every
    /// 200 us), not a cycle's total.
    pub wait_max_ns: u64,
}

impl Report {
    pub fn line(&self) -> String {
        format!(
            "result workload=cache-loop procs={} passes={} migrations={} timeslices={} cycles={} \
             wait_p50_us={:.1} wait_p99_us={:.1} wait_max_us={:.1}",
            self.procs,
            self.passes,
            self.migrations,
            self.timeslices,
            self.cycles,
            self.wait_p50_ns as f64 / 1e3,
            self.wait_p99_ns as f64 / 1e3,
            self.wait_max_ns as f64 / 1e3,
        )
    }
}

impl CacheLoop {
    pub fn validate(&self) -> Result<()> {
        if self.procs == 0 || self.procs > 4096 {
            bail!("--procs must be 1..=4096, got {}", self.procs);
        }
        if self.array_bytes == 0 || self.array_bytes > 1 << 30 {
            bail!("--array-kb must be 1..=1048576");
        }
        if self.burst.is_zero() {
            bail!("--burst-us must be at least 1");
        }
        if !self.stride.is_power_of_two() || self.stride > 4096 {
            bail!(
                "--stride must be a power of two up to 4096, got {}",
                self.stride
            );
        }
        Ok(())
    }

    /// Forks the processes, waits for them, and sums what they report.
    pub fn run(&self) -> Result<Report> {
        self.validate()?;
        let start = Instant::now() + Duration::from_millis(20);
        let children = (0..self.procs)
            .map(|_| child::spawn("cache-loop", |out| self.child(start, out)))
            .collect::<Result<Vec<_>>>()?;
        if self.mark_phase {
            // The phase is the time every process computes, no set-up.
            std::thread::sleep(start.saturating_duration_since(Instant::now()));
            mark(Marker::Begin);
            std::thread::sleep((start + self.duration).saturating_duration_since(Instant::now()));
            mark(Marker::End);
        }
        let mut report = Report {
            procs: self.procs,
            ..Default::default()
        };
        let mut waits = Vec::new();
        for c in children {
            merge_child(&c.finish("cache-loop")?, &mut report, &mut waits)?;
        }
        report.cycles = waits.len() as u64;
        report.wait_p50_ns = percentile(&mut waits, 50.0);
        report.wait_p99_ns = percentile(&mut waits, 99.0);
        Ok(report)
    }

    fn child(&self, start: Instant, out: OwnedFd) -> Result<()> {
        // Named, so the tracepoint observer tells the workload apart.
        crate::set_comm("cache-loop")?;
        let mut array = vec![0u8; self.array_bytes];
        std::thread::sleep(start.saturating_duration_since(Instant::now()));
        let end = start + self.duration;
        let first = SchedStat::of_self()?;
        let migrations_before = migrations_of_self()?;
        let mut prev = first;
        let mut passes = 0u64;
        let mut waits = Vec::new();
        // Per cycle: the whole wait (what the benchmark's percentiles
        // are of); the longest single wait is watched as the burst goes.
        let mut watch = WaitWatch::for_current_thread()?;
        while Instant::now() < end && !crate::stop::requested() {
            let burst_end = Instant::now() + self.burst;
            while Instant::now() < burst_end {
                touch(&mut array, self.stride, passes);
                passes += 1;
                watch.tick()?;
            }
            std::thread::sleep(self.sleep);
            let now = watch.check()?;
            waits.push(now.wait_ns - prev.wait_ns);
            prev = now;
        }
        std::hint::black_box(&array);
        let last = SchedStat::of_self()?;
        let mut out = File::from(out);
        writeln!(
            out,
            "{} {} {} {}",
            passes,
            migrations_of_self()? - migrations_before,
            last.timeslices - first.timeslices,
            watch.waits.max_ns
        )?;
        let samples: Vec<String> = waits.iter().map(u64::to_string).collect();
        writeln!(out, "{}", samples.join(" "))?;
        Ok(())
    }
}

/// One pass of real work over the array, one byte every `stride`.
fn touch(array: &mut [u8], stride: usize, seed: u64) {
    let mut acc = seed as u8;
    for chunk in array.chunks_mut(stride) {
        acc = acc.wrapping_mul(31).wrapping_add(chunk[0]);
        chunk[0] = acc;
    }
}

fn merge_child(text: &str, report: &mut Report, waits: &mut Vec<u64>) -> Result<()> {
    let mut lines = text.lines();
    let head: Vec<u64> = lines
        .next()
        .context("empty child report")?
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .context("bad child report")?;
    let [passes, migrations, slices, max_wait] = head[..] else {
        bail!("child report has {} fields, expected 4", head.len());
    };
    report.wait_max_ns = report.wait_max_ns.max(max_wait);
    report.passes += passes;
    report.migrations += migrations;
    report.timeslices += slices;
    for w in lines.next().unwrap_or("").split_whitespace() {
        waits.push(w.parse().context("bad wait sample")?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_run_and_report_real_counters() {
        let cfg = CacheLoop {
            procs: 3,
            array_bytes: 4096,
            burst: Duration::from_micros(200),
            sleep: Duration::from_micros(100),
            duration: Duration::from_millis(200),
            stride: 16,
            mark_phase: true,
        };
        let r = cfg.run().unwrap();
        assert_eq!(r.procs, 3);
        assert!(r.passes > 0);
        assert!(r.cycles >= 3, "each process completes cycles: {r:?}");
        assert!(r.wait_p99_ns >= r.wait_p50_ns);
        assert!(r.line().starts_with("result workload=cache-loop procs=3 "));
    }

    #[test]
    fn bad_settings_are_refused() {
        let cfg = CacheLoop {
            procs: 0,
            array_bytes: 4096,
            burst: Duration::from_micros(1),
            sleep: Duration::ZERO,
            duration: Duration::ZERO,
            stride: 64,
            mark_phase: false,
        };
        assert!(cfg.run().unwrap_err().to_string().contains("--procs"));
        let odd = CacheLoop {
            procs: 1,
            stride: 24,
            ..cfg
        };
        assert!(odd.run().unwrap_err().to_string().contains("--stride"));
    }

    #[test]
    fn malformed_child_reports_are_errors() {
        let mut r = Report::default();
        let mut w = Vec::new();
        assert!(merge_child("", &mut r, &mut w).is_err());
        assert!(merge_child("1 2 3\n", &mut r, &mut w).is_err());
        assert!(merge_child("1 2 x 4\n", &mut r, &mut w).is_err());
        merge_child("10 1 4 9\n5 7\n", &mut r, &mut w).unwrap();
        merge_child("1 0 1 3\n", &mut r, &mut w).unwrap();
        assert_eq!((r.passes, r.migrations, r.timeslices), (11, 1, 5));
        assert_eq!(r.wait_max_ns, 9, "the longest single wait of any child");
        assert_eq!(w, vec![5, 7]);
    }
}
