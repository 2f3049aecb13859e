//! Workloads for scx_sky's tests and benchmarks, and the kernel-side
//! per-task counters used to judge a scheduler without trusting its own
//! statistics.

pub mod bpf_cost;
pub mod cache_loop;
pub mod cache_phase;
pub mod child;
pub mod control;
pub mod daemon_probe;
pub mod hostile;
pub mod observer_check;
pub mod pingpong;
pub mod rdma_verbs;
pub mod relabel;
pub mod schbench;
pub mod share;
pub mod sleepers;
pub mod smt_pair;
pub mod stop;
pub mod switch_latency;
pub mod threads;
pub mod wait_watch;

/// Restricts the calling thread to `cpus`.
pub fn pin_current_thread(cpus: &[usize]) -> anyhow::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET only writes inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            anyhow::bail!("CPU {cpu} is beyond what a cpu_set_t holds");
        }
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) } != 0 {
        anyhow::bail!(
            "pinning to CPUs {cpus:?}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// The kernel's load weight of a nice level (kernel/sched/core.c
/// `sched_prio_to_weight`, nice -20..=19), for judging CPU shares.
pub fn nice_weight(nice: i32) -> Option<u64> {
    const WEIGHTS: [u64; 40] = [
        88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100,
        4904, 3906, 3121, 2501, 1991, 1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172,
        137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
    ];
    let idx = usize::try_from(nice + 20).ok()?;
    WEIGHTS.get(idx).copied()
}

pub use sky_observer::percentile;

/// Names the calling thread (its comm, at most 15 bytes), as class hints
/// and the tracepoint observer see it.
pub fn set_comm(name: &str) -> anyhow::Result<()> {
    let mut buf = [0u8; 16];
    let n = name.len().min(15);
    buf[..n].copy_from_slice(&name.as_bytes()[..n]);
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    if unsafe { libc::prctl(libc::PR_SET_NAME, buf.as_ptr()) } != 0 {
        anyhow::bail!(
            "naming the task {name:?}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
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
