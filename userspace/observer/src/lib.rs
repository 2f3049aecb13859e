//! The tracepoint observer: judges any scheduler from the kernel's own
//! sched tracepoints (tracefs), so EEVDF and every sched_ext scheduler
//! get the same figures: each task's waits (`trace_waits`, with what the
//! CPU ran during the longest: `cpu_runs`), where tasks
//! ran and how long wakes took (`placement`, `slow_wakes`), partners left
//! waiting beside an idle CPU (`partners`), SMT pairing and gang shares
//! (`smt_share`, `gang_share`). `sky-work trace-waits` runs it.

pub mod cpu_runs;
pub mod gang_share;
pub mod partners;
pub mod placement;
pub mod slow_wakes;
pub mod smt_share;
pub mod trace_waits;
pub mod tracefs;

/// Tasks are grouped by name without a trailing CPU or instance number
/// (`kworker/3:1` → `kworker`, `hostile-pinned` stays).
pub fn group_of(comm: &str) -> &str {
    let name = comm.split('/').next().unwrap_or(comm);
    name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == ':')
}

/// The p-th percentile (0-100) of `samples` by nearest rank; 0 when empty.
pub fn percentile(samples: &mut [u64], p: f64) -> u64 {
    if samples.is_empty() {
        return 0;
    }
    samples.sort_unstable();
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}
