//! Workloads for scx_sky's tests and benchmarks, and the kernel-side
//! per-task counters used to judge a scheduler without trusting its own
//! statistics.

pub mod cache_loop;
pub mod child;
pub mod pingpong;
pub mod procstat;
pub mod threads;

/// The p-th percentile (0-100) of `samples` by nearest rank; 0 when empty.
pub fn percentile(samples: &mut [u64], p: f64) -> u64 {
    if samples.is_empty() {
        return 0;
    }
    samples.sort_unstable();
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let mut v: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(percentile(&mut v, 50.0), 50);
        assert_eq!(percentile(&mut v, 99.0), 99);
        assert_eq!(percentile(&mut v, 100.0), 100);
        assert_eq!(percentile(&mut v, 0.0), 1);
        assert_eq!(percentile(&mut [], 99.0), 0);
        assert_eq!(percentile(&mut [7], 99.0), 7);
    }
}
