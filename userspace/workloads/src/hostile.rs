//! A hostile load for schedulers: everything at once that makes placement
//! and fairness hard, each thread watching its own run-queue waits through
//! the kernel's counters (so the verdict does not trust the scheduler):
//!
//! - hogs: one spinner per CPU, free to run anywhere;
//! - pinned: more spinners pinned to one CPU than it can run;
//! - affinity: threads changing their own cpumask every few milliseconds;
//! - nice: threads changing their own nice level every few ms;
//! - class: threads cycling SCHED_OTHER, SCHED_BATCH, SCHED_IDLE and short
//!   SCHED_FIFO bursts;
//! - yield: sched_yield() spinners;
//! - fork: a fork/exit storm of short-lived processes.
//!
//! The report gives, per kind, the least progress any thread made and the
//! longest wait any thread saw.

use crate::pin_current_thread;
use crate::wait_watch::{WaitWatch, Waits};
use anyhow::{bail, Context, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct Hostile {
    pub duration: Duration,
    /// Spinners pinned to `pin_cpu`.
    pub pinned: usize,
    pub pin_cpu: usize,
    /// Threads of each other kind (hogs get one per online CPU).
    pub per_kind: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Hog,
    Pinned,
    Affinity,
    Nice,
    Class,
    Yield,
    Fork,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Hog => "hog",
            Kind::Pinned => "pinned",
            Kind::Affinity => "affinity",
            Kind::Nice => "nice",
            Kind::Class => "class",
            Kind::Yield => "yield",
            Kind::Fork => "fork",
        }
    }
}

/// What one thread did.
#[derive(Debug, Clone, Copy)]
struct Outcome {
    kind: Kind,
    progress: u64,
    waits: Waits,
}

/// Per kind: threads, least progress, longest wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindReport {
    pub kind: &'static str,
    pub threads: usize,
    pub min_progress: u64,
    pub waits: Waits,
}

impl KindReport {
    pub fn line(&self) -> String {
        format!(
            "result workload=hostile kind={} threads={} min_progress={} max_wait_us={} \
             max_single_wait_us={}",
            self.kind,
            self.threads,
            self.min_progress,
            self.waits.max_ns / 1000,
            self.waits.max_single_ns / 1000
        )
    }
}

impl Hostile {
    pub fn validate(&self) -> Result<()> {
        if self.per_kind == 0 || self.per_kind > 64 || self.pinned > 256 {
            bail!("--per-kind must be 1..=64 and --pinned at most 256");
        }
        if self.pin_cpu >= online_cpus() {
            bail!(
                "--pin-cpu {} is not below the {} online CPUs",
                self.pin_cpu,
                online_cpus()
            );
        }
        Ok(())
    }

    pub fn run(&self) -> Result<Vec<KindReport>> {
        self.validate()?;
        let stop = Arc::new(AtomicBool::new(false));
        let cpus = online_cpus();
        let mut plan = vec![(Kind::Hog, cpus), (Kind::Pinned, self.pinned)];
        for kind in [
            Kind::Affinity,
            Kind::Nice,
            Kind::Class,
            Kind::Yield,
            Kind::Fork,
        ] {
            plan.push((kind, self.per_kind));
        }
        let mut handles = Vec::new();
        for (kind, count) in plan {
            for i in 0..count {
                let (stop, pin_cpu) = (stop.clone(), self.pin_cpu);
                let h = std::thread::Builder::new()
                    .name(format!("hostile-{}", kind.name()))
                    .spawn(move || run_thread(kind, i, pin_cpu, cpus, &stop))
                    .with_context(|| format!("starting a {} thread", kind.name()))?;
                handles.push(h);
            }
        }
        std::thread::sleep(self.duration);
        stop.store(true, Ordering::Relaxed);
        let mut outcomes = Vec::new();
        for h in handles {
            outcomes.push(
                h.join()
                    .map_err(|_| anyhow::anyhow!("a hostile thread panicked"))??,
            );
        }
        Ok(summarise(&outcomes))
    }
}

fn summarise(outcomes: &[Outcome]) -> Vec<KindReport> {
    let mut reports: Vec<KindReport> = Vec::new();
    for o in outcomes {
        match reports.iter_mut().find(|r| r.kind == o.kind.name()) {
            Some(r) => {
                r.threads += 1;
                r.min_progress = r.min_progress.min(o.progress);
                r.waits = r.waits.max(o.waits);
            }
            None => reports.push(KindReport {
                kind: o.kind.name(),
                threads: 1,
                min_progress: o.progress,
                waits: o.waits,
            }),
        }
    }
    reports
}

pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Spins for `d`, looking at the wait counter as it goes.
fn spin(watch: &mut WaitWatch, d: Duration) -> Result<()> {
    let end = Instant::now() + d;
    while Instant::now() < end {
        std::hint::spin_loop();
        watch.tick()?;
    }
    Ok(())
}

fn run_thread(
    kind: Kind,
    i: usize,
    pin_cpu: usize,
    cpus: usize,
    stop: &AtomicBool,
) -> Result<Outcome> {
    let mut watch = WaitWatch::for_current_thread()?;
    let mut progress = 0u64;
    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ ((i as u64 + 1) * 0x1000_0001);
    let tid = unsafe { libc::gettid() } as libc::id_t;
    while !stop.load(Ordering::Relaxed) {
        match kind {
            Kind::Hog => spin(&mut watch, Duration::from_millis(5))?,
            Kind::Pinned => {
                // Hotplug may break the pin: take it again each round.
                let _ = pin_current_thread(&[pin_cpu]);
                spin(&mut watch, Duration::from_millis(50))?;
            }
            Kind::Affinity => {
                rng = xorshift(rng);
                let first = rng as usize % cpus;
                let set: Vec<usize> = (0..cpus)
                    .filter(|c| *c == first || (rng >> c) & 1 == 1)
                    .collect();
                // Some CPUs may be offline right now: the kernel refuses a
                // mask of only offline CPUs, which is fine here.
                let _ = pin_current_thread(&set);
                spin(&mut watch, Duration::from_millis(3))?;
            }
            Kind::Nice => {
                let nice = (progress % 25) as i32 - 5;
                unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) };
                spin(&mut watch, Duration::from_millis(4))?;
            }
            Kind::Class => {
                set_class(progress)?;
                let burst = if progress % 4 == 3 { 1 } else { 10 };
                spin(&mut watch, Duration::from_millis(burst))?;
            }
            Kind::Yield => {
                // Look after every yield: each is a wait of its own.
                for _ in 0..100 {
                    unsafe { libc::sched_yield() };
                    watch.check()?;
                }
            }
            Kind::Fork => {
                fork_and_reap()?;
                watch.check()?;
            }
        }
        progress += 1;
    }
    if kind == Kind::Class {
        set_class(0)?;
    }
    Ok(Outcome {
        kind,
        progress,
        waits: watch.waits,
    })
}

fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// Round `n` of the class cycle: OTHER, BATCH, IDLE, then a FIFO burst.
fn set_class(n: u64) -> Result<()> {
    let (policy, prio) = match n % 4 {
        0 => (libc::SCHED_OTHER, 0),
        1 => (libc::SCHED_BATCH, 0),
        2 => (libc::SCHED_IDLE, 0),
        _ => (libc::SCHED_FIFO, 1),
    };
    let param = libc::sched_param {
        sched_priority: prio,
    };
    if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
        bail!(
            "sched_setscheduler(policy {policy}): {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// Forks a child that spins briefly and exits, and waits for it.
fn fork_and_reap() -> Result<()> {
    // SAFETY: the child only spins on the monotonic clock and _exits:
    // nothing that could deadlock on a lock another thread held at fork.
    match unsafe { libc::fork() } {
        -1 => bail!("fork: {}", std::io::Error::last_os_error()),
        0 => {
            let mut t = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            let mut start = t;
            unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut start) };
            loop {
                unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
                let ns = (t.tv_sec - start.tv_sec) * 1_000_000_000 + (t.tv_nsec - start.tv_nsec);
                if ns > 100_000 {
                    break;
                }
            }
            unsafe { libc::_exit(0) }
        }
        pid => {
            let mut status = 0;
            unsafe { libc::waitpid(pid, &mut status, 0) };
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reports_progress_and_waits() {
        // Needs root (SCHED_FIFO), like everything in this project's tests.
        let h = Hostile {
            duration: Duration::from_millis(300),
            pinned: 2,
            pin_cpu: 0,
            per_kind: 1,
        };
        let reports = h.run().unwrap();
        let kinds: Vec<&str> = reports.iter().map(|r| r.kind).collect();
        assert_eq!(
            kinds,
            ["hog", "pinned", "affinity", "nice", "class", "yield", "fork"]
        );
        for r in &reports {
            assert!(r.min_progress > 0, "{r:?} made no progress");
        }
        let pinned = reports.iter().find(|r| r.kind == "pinned").unwrap();
        assert_eq!(pinned.threads, 2);
        assert!(pinned
            .line()
            .starts_with("result workload=hostile kind=pinned threads=2 "));
    }

    #[test]
    fn bad_settings_are_refused() {
        let h = Hostile {
            duration: Duration::ZERO,
            pinned: 1,
            pin_cpu: 100_000,
            per_kind: 1,
        };
        assert!(h.validate().unwrap_err().to_string().contains("--pin-cpu"));
        let h = Hostile {
            per_kind: 0,
            pin_cpu: 0,
            ..h
        };
        assert!(h.validate().unwrap_err().to_string().contains("--per-kind"));
    }

    #[test]
    fn reports_keep_the_worst_thread_of_each_kind() {
        let o = |kind, progress, max_ns, max_single_ns| Outcome {
            kind,
            progress,
            waits: Waits {
                max_ns,
                max_single_ns,
            },
        };
        let r = summarise(&[
            o(Kind::Hog, 5, 10, 7),
            o(Kind::Hog, 3, 30, 5),
            o(Kind::Fork, 9, 1, 1),
        ]);
        assert_eq!(r.len(), 2);
        assert_eq!(
            (
                r[0].threads,
                r[0].min_progress,
                r[0].waits.max_ns,
                r[0].waits.max_single_ns
            ),
            (2, 3, 30, 7)
        );
        assert_eq!(r[1].kind, "fork");
    }
}
