//! Thread workloads: a burst of many short-lived threads released at once
//! (stresses enqueue/dispatch and task init/exit paths) and CPU burners.

use anyhow::{bail, Context, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Spins for `d`; returns the loop iterations made.
pub(crate) fn spin_for(d: Duration) -> u64 {
    spin_until_stopped(d, &AtomicBool::new(false))
}

/// Spins for `d` or until `stop` is set; returns the loop iterations made.
fn spin_until_stopped(d: Duration, stop: &AtomicBool) -> u64 {
    let end = Instant::now() + d;
    let mut n = 0u64;
    while Instant::now() < end && !stop.load(Ordering::Relaxed) {
        n = std::hint::black_box(n.wrapping_add(1));
    }
    n
}

/// Starts `count` threads, releases them together, each spins for `spin`
/// and exits. Returns how many ran.
pub fn burst(count: usize, spin: Duration) -> Result<usize> {
    if count == 0 || count > 100_000 {
        bail!("--count must be 1..=100000, got {count}");
    }
    let barrier = Arc::new(Barrier::new(count));
    let done = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::with_capacity(count);
    for i in 0..count {
        let (barrier, done) = (barrier.clone(), done.clone());
        let handle = std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || {
                barrier.wait();
                spin_for(spin);
                done.fetch_add(1, Ordering::Relaxed);
            })
            .with_context(|| format!("spawning thread {i} of {count}"))?;
        handles.push(handle);
    }
    for h in handles {
        h.join()
            .map_err(|_| anyhow::anyhow!("a burst thread panicked"))?;
    }
    Ok(done.load(Ordering::Relaxed) as usize)
}

/// What a burn got done: loop iterations over the time it ran.
pub struct Burned {
    pub iterations: u64,
    pub elapsed: Duration,
}

/// Keeps `threads` CPUs busy for `duration`, or until `stop` is set (a
/// script stops the hogs when the work beside them ends, so they never
/// run alone into the measured time); returns the iterations done and how
/// long that took, so runs of different lengths compare by rate.
pub fn burn(threads: usize, duration: Duration, stop: &'static AtomicBool) -> Result<Burned> {
    if threads == 0 || threads > 4096 {
        bail!("--threads must be 1..=4096, got {threads}");
    }
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            std::thread::spawn(move || {
                // Named for the tracepoint observer; a name is no reason to fail.
                let _ = crate::set_comm("burn");
                spin_until_stopped(duration, stop)
            })
        })
        .collect();
    let mut iterations = 0;
    for h in handles {
        iterations += h
            .join()
            .map_err(|_| anyhow::anyhow!("a burner thread panicked"))?;
    }
    Ok(Burned {
        iterations,
        elapsed: start.elapsed(),
    })
}

/// A memory-bound gang (seed 003, docs/seeds.md): `threads` threads walk one shared
/// buffer of `mb` MiB in a dependent pseudo-random chain (each load's
/// address comes from the one before, so the caches, not the ALUs, set the
/// pace) for `run`. Returns the loads made. On real hardware its CPI
/// depends on whether its threads share one LLC; under TCG only where it
/// runs can be judged.
///
/// `pins`: walker `t` runs only on CPU `pins[t % pins.len()]` (none if
/// empty), for placements set by hand (seed 003's All / Partial share).
pub fn shared_walk(threads: usize, mb: usize, run: Duration, pins: &[usize]) -> Result<u64> {
    if threads == 0 || threads > 1024 {
        bail!("--threads must be 1..=1024, got {threads}");
    }
    if mb == 0 || mb > 4096 {
        bail!("--mb must be 1..=4096, got {mb}");
    }
    let slots = mb * (1 << 20) / 8;
    // A single cycle through every slot (Sattolo's shuffle), so a walk
    // never settles into a short loop that fits in cache.
    let mut chain: Vec<u64> = (0..slots as u64).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..slots).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        chain.swap(i, (seed % i as u64) as usize);
    }
    let chain = Arc::new(chain);
    let loads = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + run;
    let mut handles = Vec::with_capacity(threads);
    for t in 0..threads {
        let (chain, loads) = (chain.clone(), loads.clone());
        let pin = (!pins.is_empty()).then(|| pins[t % pins.len()]);
        let handle = std::thread::Builder::new()
            .spawn(move || {
                if let Some(cpu) = pin {
                    if let Err(e) = crate::pin_current_thread(&[cpu]) {
                        eprintln!("sky-work: walker {t} not pinned to CPU {cpu}: {e:#}");
                    }
                }
                let mut at = (t * slots / threads) as u64;
                let mut n = 0u64;
                while Instant::now() < end {
                    for _ in 0..4096 {
                        at = chain[at as usize];
                    }
                    n += 4096;
                }
                std::hint::black_box(at);
                loads.fetch_add(n, Ordering::Relaxed);
            })
            .with_context(|| format!("spawning walker {t} of {threads}"))?;
        handles.push(handle);
    }
    for h in handles {
        h.join()
            .map_err(|_| anyhow::anyhow!("a walker thread panicked"))?;
    }
    Ok(loads.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_run_every_thread() {
        assert_eq!(burst(200, Duration::from_micros(50)).unwrap(), 200);
        assert!(burst(0, Duration::ZERO).is_err());
    }

    #[test]
    fn burners_do_work() {
        static RUN_ON: AtomicBool = AtomicBool::new(false);
        let b = burn(2, Duration::from_millis(20), &RUN_ON).unwrap();
        assert!(b.iterations > 0 && b.elapsed >= Duration::from_millis(20));
        assert!(burn(0, Duration::ZERO, &RUN_ON).is_err());
    }

    #[test]
    fn burners_stop_when_told() {
        static STOP: AtomicBool = AtomicBool::new(false);
        let stopper = std::thread::spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            STOP.store(true, Ordering::Relaxed);
        });
        let b = burn(2, Duration::from_secs(60), &STOP).unwrap();
        stopper.join().unwrap();
        assert!(b.iterations > 0);
        assert!(b.elapsed < Duration::from_secs(30), "ran {:?}", b.elapsed);
    }
}
