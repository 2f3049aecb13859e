//! A schbench-style request benchmark, the figure kernel scheduler
//! developers quote: message threads post requests at a fixed rate to
//! their worker threads, which wake, compute a fixed amount of work and go
//! back to sleep. Measured in the threads themselves, the same under any
//! scheduler:
//!
//! - wakeup latency: from a message thread waking a sleeping worker to
//!   that worker running (what a scheduler adds to a wakeup);
//! - request latency: from a request being posted to its work being done
//!   (wakeup, waiting for a worker, and the work itself, stretched by
//!   preemption);
//! - requests per second done, against those posted.
//!
//! The load is a share of the machine: at `load` 0.5 the requests posted
//! each second need half of every CPU the process may use. The work is a
//! fixed count of loop iterations, calibrated once at start with every
//! CPU computing, so a worker preempted mid-request takes longer instead
//! of doing less.
//!
//! Written here rather than running schbench itself: the VM has no
//! compiler and no package for it, and the scenarios read one result line
//! from every workload.

use anyhow::{bail, Context, Result};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// What a run is asked to do.
#[derive(Debug, Clone, Copy)]
pub struct Schbench {
    pub message_threads: usize,
    /// Workers per message thread.
    pub workers: usize,
    /// Work per request, in microseconds of this machine's CPU.
    pub work: Duration,
    /// Share of the CPUs the requests need (0.01-2.0).
    pub load: f64,
    pub run: Duration,
}

/// What the threads saw, latencies in microseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct SchbenchReport {
    pub cpus: usize,
    pub seconds: f64,
    pub posted: u64,
    pub done: u64,
    pub wakeups: u64,
    pub wake_us: [u64; 4],
    pub request_us: [u64; 4],
}

/// The percentiles reported: p50, p90, p99, p99.9.
const PERCENTILES: [f64; 4] = [50.0, 90.0, 99.0, 99.9];

impl SchbenchReport {
    /// The result line the VM scenarios read.
    pub fn line(&self, load: f64) -> String {
        let [w50, w90, w99, w999] = self.wake_us;
        let [r50, r90, r99, r999] = self.request_us;
        format!(
            "result workload=schbench load={load:.2} cpus={} seconds={:.1} posted={} done={} \
             rps={:.0} wakeups={} wake_p50_us={w50} wake_p90_us={w90} wake_p99_us={w99} \
             wake_p999_us={w999} request_p50_us={r50} request_p90_us={r90} \
             request_p99_us={r99} request_p999_us={r999}",
            self.cpus,
            self.seconds,
            self.posted,
            self.done,
            self.done as f64 / self.seconds.max(1e-9),
            self.wakeups,
        )
    }
}

/// A worker's slot: when it was woken (ns since the run's start, +1 so
/// that 0 means "not woken"), set by the message thread, and its thread.
struct Worker {
    woken_at: AtomicU64,
    thread: OnceLock<Thread>,
}

/// A message thread's requests and its sleeping workers.
#[derive(Default)]
struct Queue {
    /// Post times (ns since the run's start) of requests no worker took.
    requests: VecDeque<u64>,
    /// Workers parked, waiting for a request.
    sleeping: Vec<usize>,
}

/// One message thread's group: its queue and its workers.
struct Group {
    queue: Mutex<Queue>,
    workers: Vec<Worker>,
}

/// What one worker measured.
#[derive(Default)]
struct Measured {
    wake_ns: Vec<u64>,
    request_ns: Vec<u64>,
}

/// Loop iterations per microsecond of one CPU while every CPU computes:
/// one thread per CPU, all counting iterations over the same 200 ms, their
/// median. Timed on one CPU of an idle machine, the work was what that CPU
/// does alone: where CPUs share something (SMT siblings, or a VM's vCPUs
/// time-sliced on fewer host CPUs, as under TCG, where eight vCPUs share
/// one host thread) "half of every CPU" asked for several times what the
/// machine can do, the workers never slept, and no wakeup was measured.
/// Short timed runs do not see the sharing either (a vCPU runs a few
/// milliseconds at full speed before the host switches): the window is
/// long against a host's time slice.
fn iterations_per_us(cpus: usize) -> f64 {
    const WINDOW: Duration = Duration::from_millis(200);
    let start = std::sync::Barrier::new(cpus.max(1));
    let mut rates: Vec<f64> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..cpus.max(1))
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    let begun = Instant::now();
                    let mut n = 0u64;
                    while begun.elapsed() < WINDOW {
                        n += 10_000;
                        std::hint::black_box(spin_iterations(10_000));
                    }
                    n as f64 / (begun.elapsed().as_secs_f64() * 1e6)
                })
            })
            .collect();
        threads.into_iter().filter_map(|t| t.join().ok()).collect()
    });
    rates.sort_by(f64::total_cmp);
    rates.get(rates.len() / 2).copied().unwrap_or(1.0).max(1.0)
}

/// Runs `n` iterations of dependent arithmetic; returns a value the
/// optimiser cannot drop.
fn spin_iterations(n: u64) -> u64 {
    let mut x = 1u64;
    for _ in 0..n {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    x | 1
}

fn since(start: Instant) -> u64 {
    start.elapsed().as_nanos() as u64
}

/// A worker: takes requests from its group's queue until it is empty,
/// then sleeps until woken; stops when `stop` is set and nothing is left.
fn worker(
    group: &Group,
    me: usize,
    start: Instant,
    stop: &AtomicBool,
    measuring: &AtomicBool,
    loops: u64,
) -> Measured {
    // Named for the tracepoint observer; a name is no reason to fail.
    let _ = crate::set_comm("sch-worker");
    let mut got = Measured::default();
    let slot = &group.workers[me];
    loop {
        let request = {
            let mut q = group.queue.lock().unwrap_or_else(|e| e.into_inner());
            match q.requests.pop_front() {
                Some(r) => Some(r),
                None => {
                    if stop.load(Ordering::Acquire) {
                        return got;
                    }
                    q.sleeping.push(me);
                    None
                }
            }
        };
        let Some(posted) = request else {
            let woken = loop {
                let w = slot.woken_at.swap(0, Ordering::AcqRel);
                if w != 0 || stop.load(Ordering::Acquire) {
                    break w;
                }
                std::thread::park();
            };
            if woken != 0 && measuring.load(Ordering::Relaxed) {
                got.wake_ns.push(since(start).saturating_sub(woken - 1));
            }
            continue;
        };
        spin_iterations(loops);
        if measuring.load(Ordering::Relaxed) {
            got.request_ns.push(since(start).saturating_sub(posted));
        }
    }
}

/// A message thread: posts a request every `interval` until `stop`,
/// waking a sleeping worker for it if there is one. Returns how many it
/// posted while measuring.
fn message(
    group: &Group,
    start: Instant,
    interval: Duration,
    stop: &AtomicBool,
    measuring: &AtomicBool,
) -> u64 {
    let _ = crate::set_comm("sch-message");
    let mut posted = 0u64;
    let mut due = Instant::now();
    while !stop.load(Ordering::Acquire) {
        due += interval;
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        } else if now - due > Duration::from_secs(1) {
            // A second behind (the thread itself was starved): the
            // requests it missed are not posted in a burst.
            due = now;
        }
        let at = since(start);
        let woken = {
            let mut q = group.queue.lock().unwrap_or_else(|e| e.into_inner());
            q.requests.push_back(at);
            q.sleeping.pop()
        };
        if let Some(w) = woken.and_then(|w| group.workers.get(w)) {
            w.woken_at.store(at + 1, Ordering::Release);
            if let Some(t) = w.thread.get() {
                t.unpark();
            }
        }
        if measuring.load(Ordering::Relaxed) {
            posted += 1;
        }
    }
    posted
}

/// The CPUs this process may run on.
fn allowed_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Schbench {
    fn check(&self) -> Result<()> {
        if !(1..=64).contains(&self.message_threads) {
            bail!(
                "--message-threads must be 1..=64, got {}",
                self.message_threads
            );
        }
        if !(1..=256).contains(&self.workers) {
            bail!("--workers must be 1..=256, got {}", self.workers);
        }
        if self.work < Duration::from_micros(1) || self.work > Duration::from_secs(1) {
            bail!("--work-us must be 1..=1000000, got {:?}", self.work);
        }
        if !(0.01..=2.0).contains(&self.load) {
            bail!("--load must be 0.01..=2.0, got {}", self.load);
        }
        Ok(())
    }

    /// Each message thread's time between two requests.
    fn interval(&self, cpus: usize) -> Duration {
        let per_s = self.load * cpus as f64 / self.work.as_secs_f64();
        Duration::from_secs_f64(self.message_threads as f64 / per_s)
    }

    /// Runs the benchmark: workers start, then the message threads; the
    /// first tenth of the run (at most a second) warms up unmeasured.
    pub fn run(&self) -> Result<SchbenchReport> {
        self.check()?;
        let cpus = allowed_cpus();
        let loops = (iterations_per_us(cpus) * self.work.as_secs_f64() * 1e6) as u64;
        let interval = self.interval(cpus);
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let measuring = Arc::new(AtomicBool::new(false));
        let groups: Vec<Arc<Group>> = (0..self.message_threads)
            .map(|_| {
                Arc::new(Group {
                    queue: Mutex::new(Queue::default()),
                    workers: (0..self.workers)
                        .map(|_| Worker {
                            woken_at: AtomicU64::new(0),
                            thread: OnceLock::new(),
                        })
                        .collect(),
                })
            })
            .collect();
        let mut workers = Vec::new();
        let mut spawn_error = None;
        'spawn: for group in &groups {
            for me in 0..self.workers {
                let (g, s, m) = (group.clone(), stop.clone(), measuring.clone());
                match std::thread::Builder::new()
                    .stack_size(256 << 10)
                    .spawn(move || worker(&g, me, start, &s, &m, loops))
                {
                    Ok(h) => {
                        let _ = group.workers[me].thread.set(h.thread().clone());
                        workers.push(h);
                    }
                    Err(e) => {
                        spawn_error = Some(e);
                        break 'spawn;
                    }
                }
            }
        }
        let mut messages = Vec::new();
        if spawn_error.is_none() {
            for group in &groups {
                let (g, s, m) = (group.clone(), stop.clone(), measuring.clone());
                match std::thread::Builder::new()
                    .spawn(move || message(&g, start, interval, &s, &m))
                {
                    Ok(h) => messages.push(h),
                    Err(e) => {
                        spawn_error = Some(e);
                        break;
                    }
                }
            }
        }
        let mut seconds = 0.0;
        if spawn_error.is_none() {
            std::thread::sleep((self.run / 10).min(Duration::from_secs(1)));
            measuring.store(true, Ordering::Relaxed);
            let measured_from = Instant::now();
            std::thread::sleep(self.run);
            measuring.store(false, Ordering::Relaxed);
            seconds = measured_from.elapsed().as_secs_f64();
        }
        stop.store(true, Ordering::Release);
        let mut posted = 0;
        for h in messages {
            posted += h
                .join()
                .map_err(|_| anyhow::anyhow!("a message thread panicked"))?;
        }
        // Wake every worker so that each sees `stop` once its queue is empty.
        for w in groups.iter().flat_map(|g| &g.workers) {
            if let Some(t) = w.thread.get() {
                t.unpark();
            }
        }
        let mut all = Measured::default();
        for h in workers {
            let m = h
                .join()
                .map_err(|_| anyhow::anyhow!("a worker thread panicked"))?;
            all.wake_ns.extend(m.wake_ns);
            all.request_ns.extend(m.request_ns);
        }
        if let Some(e) = spawn_error {
            return Err(e).context("spawning the benchmark's threads");
        }
        let micros = |ns: &mut Vec<u64>| PERCENTILES.map(|p| crate::percentile(ns, p) / 1000);
        Ok(SchbenchReport {
            cpus,
            seconds,
            posted,
            done: all.request_ns.len() as u64,
            wakeups: all.wake_ns.len() as u64,
            wake_us: micros(&mut all.wake_ns),
            request_us: micros(&mut all.request_ns),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bench(load: f64, run_ms: u64) -> Schbench {
        Schbench {
            message_threads: 1,
            workers: 2,
            work: Duration::from_micros(200),
            load,
            run: Duration::from_millis(run_ms),
        }
    }

    #[test]
    fn requests_are_posted_at_the_rate_and_done_with_latencies() {
        let b = bench(0.2, 400);
        let r = b.run().unwrap();
        let want = 0.2 * r.cpus as f64 / 200e-6 * r.seconds;
        // The rate is held on average: a message thread held up catches
        // up, so a window may hold a few more than its share, or (on a
        // busy test machine) fewer.
        assert!(
            (r.posted as f64) <= want * 1.5 + 10.0 && (r.posted as f64) >= want * 0.3,
            "posted {} of {want:.0}: {r:?}",
            r.posted
        );
        // Done counts what finished in the window, requests posted just
        // before it among them: a little over posted at most.
        assert!(
            r.done > 0 && r.done <= r.posted + r.posted / 2 + 10,
            "{r:?}"
        );
        assert!(r.wakeups > 0, "{r:?}");
        // A request takes at least its work (calibrated on a busy machine
        // it may be half as long).
        assert!(r.request_us[0] >= 50, "{r:?}");
        assert!(r.wake_us.windows(2).all(|w| w[0] <= w[1]), "{r:?}");
        assert!(r.request_us.windows(2).all(|w| w[0] <= w[1]), "{r:?}");
        let line = r.line(0.2);
        assert!(
            line.starts_with("result workload=schbench load=0.20 "),
            "{line}"
        );
        assert!(line.contains(" wake_p99_us="), "{line}");
    }

    #[test]
    fn the_interval_follows_load_cpus_and_message_threads() {
        let mut b = bench(0.5, 100);
        // 0.5 of 4 CPUs at 200 us a request: 10 000 requests/s.
        assert_eq!(b.interval(4), Duration::from_micros(100));
        b.message_threads = 2;
        assert_eq!(b.interval(4), Duration::from_micros(200));
    }

    #[test]
    fn bad_arguments_are_refused_by_name() {
        for (b, name) in [
            (
                Schbench {
                    message_threads: 0,
                    ..bench(0.5, 10)
                },
                "--message-threads",
            ),
            (
                Schbench {
                    workers: 0,
                    ..bench(0.5, 10)
                },
                "--workers",
            ),
            (
                Schbench {
                    work: Duration::ZERO,
                    ..bench(0.5, 10)
                },
                "--work-us",
            ),
            (bench(0.0, 10), "--load"),
            (bench(f64::NAN, 10), "--load"),
        ] {
            let e = b.run().unwrap_err();
            assert!(e.to_string().contains(name), "{e}");
        }
    }
}
