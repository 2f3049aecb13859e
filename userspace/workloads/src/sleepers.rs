//! Overload: many threads that each compute a little and sleep a few
//! microseconds, in a loop, so that far more are runnable than CPUs can
//! serve within a scheduler's wait bound. What a user sees is measured
//! here, in the threads themselves, the same under any scheduler: loops
//! done (throughput), how evenly they were shared (the least and the median
//! thread), and the longest time any thread went without finishing a loop
//! (its longest stall: a wait bound that fails shows here).
//!
//! The threads are made first, parked on futex words, and released a
//! twentieth at a time, 10 ms apart, as a process starting its threads
//! would start them; they are measured once all run. Made while they run,
//! the maker would have its fair share of the CPUs like any of them, so
//! making N would take time of order N squared (about 300 s for 1000 in
//! the VM's overload scenario); a mutex barrier would release them one by
//! one (a convoy), and one wake of all a herd: each a test of its own.

use anyhow::{bail, Context, Result};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the threads did.
#[derive(Debug, Clone, PartialEq)]
pub struct SleepersReport {
    pub threads: usize,
    pub seconds: f64,
    /// Loops done by all threads.
    pub loops: u64,
    /// Loops of the thread that did fewest, the median one, the most.
    pub min_thread: u64,
    pub median_thread: u64,
    pub max_thread: u64,
    /// The longest time one thread went between two loops' ends while
    /// measured, in milliseconds.
    pub max_gap_ms: f64,
    /// How long making every thread took (parked, before the load), and
    /// joining them after (under it).
    pub make_s: f64,
    pub join_s: f64,
}

impl SleepersReport {
    /// The result line the VM scenarios read.
    pub fn line(&self) -> String {
        let fair = if self.median_thread > 0 {
            self.min_thread as f64 / self.median_thread as f64
        } else {
            0.0
        };
        format!(
            "result workload=sleepers threads={} seconds={:.1} loops={} loops_per_s={:.0} \
             min_thread_loops={} p50_thread_loops={} max_thread_loops={} min_share={:.3} \
             max_gap_ms={:.1} make_s={:.1} join_s={:.1}",
            self.threads,
            self.seconds,
            self.loops,
            self.loops as f64 / self.seconds.max(1e-9),
            self.min_thread,
            self.median_thread,
            self.max_thread,
            fair,
            self.max_gap_ms,
            self.make_s,
            self.join_s
        )
    }
}

/// Release batches and the gap between them.
const BATCHES: usize = 20;
const BATCH_GAP: Duration = Duration::from_millis(10);

/// A futex word threads park on until one wake releases them all.
struct Gate(AtomicU32);

impl Gate {
    fn wait(&self) {
        while self.0.load(Ordering::Acquire) == 0 {
            // SAFETY: FUTEX_WAIT on a live word of this process; it
            // returns at once if the word is no longer 0.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.0.as_ptr(),
                    libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                    0,
                    std::ptr::null::<libc::timespec>(),
                )
            };
        }
    }

    fn open(&self) {
        self.0.store(1, Ordering::Release);
        // SAFETY: FUTEX_WAKE of every waiter on a live word.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.0.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
            )
        };
    }
}

/// Blocks SIGUSR1 in the calling thread; returns the set to wait on.
fn block_sigusr1() -> Result<libc::sigset_t> {
    // SAFETY: plain signal-set manipulation of this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            bail!("blocking SIGUSR1 failed");
        }
        Ok(set)
    }
}

/// One thread: parked until `gate` opens, then compute for `work`, sleep
/// for `sleep`, until `stop`, counting loops (and gaps between them) only
/// while `measuring`. Returns (loops, longest gap).
fn sleeper(
    gate: &Gate,
    measuring: &AtomicBool,
    stop: &AtomicBool,
    work: Duration,
    sleep: Duration,
) -> (u64, Duration) {
    // Named for the tracepoint observer; a name is no reason to fail.
    let _ = crate::set_comm("sleeper");
    gate.wait();
    let (mut loops, mut gap) = (0u64, Duration::ZERO);
    let mut last: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        crate::threads::spin_for(work);
        std::thread::sleep(sleep);
        if !measuring.load(Ordering::Relaxed) {
            continue;
        }
        let now = Instant::now();
        if let Some(last) = last {
            gap = gap.max(now - last);
            loops += 1;
        }
        last = Some(now);
    }
    (loops, gap)
}

/// Runs `threads` sleepers; each computes `work` and sleeps `sleep` per
/// loop. They are made parked, released in batches (once made, or with
/// `on_sigusr1` when that signal comes), and measured for `run` once all
/// are running.
pub fn run(
    threads: usize,
    work: Duration,
    sleep: Duration,
    on_sigusr1: bool,
    run: Duration,
) -> Result<SleepersReport> {
    if threads == 0 || threads > 20_000 {
        bail!("--threads must be 1..=20000, got {threads}");
    }
    if work > Duration::from_secs(1) || sleep > Duration::from_secs(1) {
        bail!("--work-us and --sleep-us must be at most 1 s");
    }
    // Blocked before any thread is made (they inherit it), so that only
    // the wait below takes it.
    let usr1 = on_sigusr1.then(block_sigusr1).transpose()?;
    let gates: Arc<Vec<Gate>> = Arc::new((0..BATCHES).map(|_| Gate(AtomicU32::new(0))).collect());
    let open_all = || gates.iter().for_each(Gate::open);
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let making = Instant::now();
    let mut handles = Vec::with_capacity(threads);
    for i in 0..threads {
        let (g, m, s) = (gates.clone(), measuring.clone(), stop.clone());
        let spawned = std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || sleeper(&g[i % BATCHES], &m, &s, work, sleep));
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                open_all();
                return Err(e).with_context(|| format!("spawning sleeper {i} of {threads}"));
            }
        }
    }
    let make_s = making.elapsed().as_secs_f64();
    if let Some(set) = usr1 {
        eprintln!("sleepers: parked {threads} threads");
        let mut sig = 0;
        // SAFETY: a signal set made by block_sigusr1, and an int out.
        if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
            stop.store(true, Ordering::Relaxed);
            open_all();
            bail!("waiting for SIGUSR1 failed");
        }
    }
    for gate in gates.iter() {
        gate.open();
        std::thread::sleep(BATCH_GAP);
    }
    measuring.store(true, Ordering::Relaxed);
    let started = Instant::now();
    std::thread::sleep(run);
    measuring.store(false, Ordering::Relaxed);
    let seconds = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let joining = Instant::now();
    let mut per_thread = Vec::with_capacity(threads);
    let mut max_gap = Duration::ZERO;
    for h in handles {
        let (loops, gap) = h
            .join()
            .map_err(|_| anyhow::anyhow!("a sleeper thread panicked"))?;
        per_thread.push(loops);
        max_gap = max_gap.max(gap);
    }
    let join_s = joining.elapsed().as_secs_f64();
    per_thread.sort_unstable();
    Ok(SleepersReport {
        threads,
        seconds,
        loops: per_thread.iter().sum(),
        min_thread: per_thread[0],
        median_thread: per_thread[per_thread.len() / 2],
        max_thread: per_thread[per_thread.len() - 1],
        max_gap_ms: max_gap.as_secs_f64() * 1e3,
        make_s,
        join_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_thread_loops_and_the_longest_gap_covers_a_loop() {
        let r = run(
            4,
            Duration::from_micros(200),
            Duration::from_micros(100),
            false,
            Duration::from_millis(200),
        )
        .unwrap();
        assert_eq!(r.threads, 4);
        assert!(r.min_thread > 0, "{r:?}");
        assert!(r.min_thread <= r.median_thread && r.median_thread <= r.max_thread);
        assert!(r.loops >= 4 * r.min_thread, "{r:?}");
        // A loop is 200 us of work plus a sleep: no gap is shorter.
        assert!(r.max_gap_ms >= 0.3, "{r:?}");
        assert!(r.line().contains("threads=4 "), "{}", r.line());
        assert!(r.make_s >= 0.0 && r.make_s < r.seconds, "{r:?}");
        assert!(r.line().contains(" make_s="), "{}", r.line());
    }

    #[test]
    fn bad_counts_and_durations_are_refused_by_name() {
        let z = Duration::ZERO;
        let e = run(0, z, z, false, z).unwrap_err();
        assert!(e.to_string().contains("--threads"), "{e}");
        let e = run(1, Duration::from_secs(2), z, false, z).unwrap_err();
        assert!(e.to_string().contains("--work-us"), "{e}");
    }
}
