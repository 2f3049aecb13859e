//! Thread workloads: a burst of many short-lived threads released at once
//! (stresses enqueue/dispatch and task init/exit paths) and CPU burners.

use anyhow::{bail, Context, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

fn spin_for(d: Duration) -> u64 {
    let end = Instant::now() + d;
    let mut n = 0u64;
    while Instant::now() < end {
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

/// Keeps `threads` CPUs busy for `duration`; returns loop iterations done.
pub fn burn(threads: usize, duration: Duration) -> Result<u64> {
    if threads == 0 || threads > 4096 {
        bail!("--threads must be 1..=4096, got {threads}");
    }
    let handles: Vec<_> = (0..threads)
        .map(|_| std::thread::spawn(move || spin_for(duration)))
        .collect();
    let mut total = 0;
    for h in handles {
        total += h
            .join()
            .map_err(|_| anyhow::anyhow!("a burner thread panicked"))?;
    }
    Ok(total)
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
        assert!(burn(2, Duration::from_millis(20)).unwrap() > 0);
        assert!(burn(0, Duration::ZERO).is_err());
    }
}
