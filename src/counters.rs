//! BPF statistics: per-CPU counters summed here, and the derived figures
//! (last-CPU share, mean wait, SMT pairing shares) shown to users.

use crate::bpf::skel::types::sky_task;
use crate::bpf::{intf, STAT_INFO};
use crate::map_values;
use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags};
use sky_stats::scx_stats::serde_json::Value;
use std::fmt::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const NR_STATS: usize = intf::sky_stat_idx_SKY_NR_STATS as usize;
const _: () = assert!(STAT_INFO.len() == NR_STATS, "build.rs missed a stat");

/// Thread `tid`'s wait histogram from BPF's task storage (`sky_tasks`,
/// read by pidfd) as (bucket, count) for buckets that counted any; empty
/// for a thread that is gone, never ran under scx_sky, or on a kernel
/// without thread pidfds (before 6.9: then only for process leaders).
pub fn thread_waits(tasks: &impl MapCore, tid: u32) -> Vec<(usize, u64)> {
    let Some(pidfd) = thread_pidfd(tid) else {
        return Vec::new();
    };
    let key = pidfd.as_raw_fd().to_ne_bytes();
    let Ok(Some(value)) = tasks.lookup(&key, MapFlags::ANY) else {
        return Vec::new();
    };
    let Some(task) = map_values::read::<sky_task>(&value) else {
        return Vec::new();
    };
    task.waits
        .counts
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(bucket, &n)| (bucket, u64::from(n)))
        .collect()
}

/// A pidfd for thread `tid` (PIDFD_THREAD), or for the process if `tid`
/// leads one and the kernel predates thread pidfds.
fn thread_pidfd(tid: u32) -> Option<OwnedFd> {
    let open = |flags: libc::c_int| {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid as libc::pid_t, flags) };
        // SAFETY: a non-negative return is a new fd that we own.
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
    };
    // PIDFD_THREAD is O_EXCL (include/uapi/linux/pidfd.h).
    open(libc::O_EXCL).or_else(|| open(0))
}

/// Counter totals over all CPUs, in `enum sky_stat_idx` order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters(pub [u64; NR_STATS]);

impl Counters {
    /// Sums the per-CPU rows of the `sky_stats` map.
    pub fn read(map: &impl MapCore) -> Result<Self> {
        let rows = map
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .context("reading the sky_stats map")?
            .context("sky_stats has no entry 0")?;
        Self::sum_rows(rows.iter().map(|r| r.as_slice()))
    }

    /// Sums raw per-CPU rows, each `NR_STATS` native-endian u64s.
    pub fn sum_rows<'a>(rows: impl Iterator<Item = &'a [u8]>) -> Result<Self> {
        let mut total = [0u64; NR_STATS];
        for row in rows {
            if row.len() < NR_STATS * 8 {
                bail!(
                    "per-CPU stats row is {} bytes, expected {}",
                    row.len(),
                    NR_STATS * 8
                );
            }
            for (sum, chunk) in total.iter_mut().zip(row.chunks_exact(8)) {
                *sum = sum.wrapping_add(u64::from_ne_bytes(chunk.try_into().unwrap()));
            }
        }
        Ok(Counters(total))
    }

    /// The counters of a statistics sample (`sky_stats`), by name; a
    /// counter missing from it reads 0.
    pub fn from_sample(sample: &sky_stats::scx_stats::serde_json::Map<String, Value>) -> Self {
        let mut total = [0u64; NR_STATS];
        for ((name, _), v) in STAT_INFO.iter().zip(total.iter_mut()) {
            *v = sample.get(*name).and_then(Value::as_u64).unwrap_or(0);
        }
        Counters(total)
    }

    /// A statistics sample: the policy, its generation and every counter.
    pub fn sample(&self, policy: &str, generation: u64) -> Value {
        let counters = STAT_INFO
            .iter()
            .zip(self.0.iter())
            .map(|((name, _), v)| (*name, *v));
        sky_stats::sample(policy, generation, counters)
    }

    pub fn get(&self, idx: u32) -> u64 {
        self.0[idx as usize]
    }

    /// Counts since `earlier` (counters only grow; a restart resets them).
    pub fn since(&self, earlier: &Counters) -> Counters {
        let mut d = [0u64; NR_STATS];
        for (i, v) in d.iter_mut().enumerate() {
            *v = self.0[i].saturating_sub(earlier.0[i]);
        }
        Counters(d)
    }

    /// Share of runs, among tasks that had run before, that landed on the
    /// CPU the task last ran on. `None` before any such run.
    pub fn last_cpu_share(&self) -> Option<f64> {
        let hits = self.get(intf::sky_stat_idx_SKY_STAT_LAST_CPU_HITS);
        let moves = self.get(intf::sky_stat_idx_SKY_STAT_MOVES_IN_LLC)
            + self.get(intf::sky_stat_idx_SKY_STAT_MOVES_ACROSS_LLC);
        ratio(hits, hits + moves)
    }

    /// Of the run time of memory-bound gangs' threads, the share in their
    /// home domain. `None` without gang run time.
    pub fn gang_home_share(&self) -> Option<f64> {
        let home = self.get(intf::sky_stat_idx_SKY_STAT_GANG_HOME_NS);
        ratio(
            home,
            home + self.get(intf::sky_stat_idx_SKY_STAT_GANG_AWAY_NS),
        )
    }

    pub fn mean_wait_us(&self) -> Option<f64> {
        ratio(
            self.get(intf::sky_stat_idx_SKY_STAT_WAIT_NS),
            self.get(intf::sky_stat_idx_SKY_STAT_DISPATCHES),
        )
        .map(|ns| ns / 1000.0)
    }

    /// Of the time PM writers ran, the share beside a compute sibling
    /// (`pm_beside_compute_share`), and of their time beside a task that
    /// pairs (compute or another PM writer) the share beside compute
    /// (`pm_paired_share`, the pairing decisions alone). `None` before any.
    pub fn pm_shares(&self) -> (Option<f64>, Option<f64>) {
        use intf::*;
        let compute = self.get(sky_stat_idx_SKY_STAT_PM_BESIDE_COMPUTE_NS);
        let rival = self.get(sky_stat_idx_SKY_STAT_PM_BESIDE_PM_WRITER_NS);
        let rest = self.get(sky_stat_idx_SKY_STAT_PM_BESIDE_IDLE_NS)
            + self.get(sky_stat_idx_SKY_STAT_PM_BESIDE_OTHER_NS);
        (
            ratio(compute, compute + rival + rest),
            ratio(compute, compute + rival),
        )
    }

    /// One line: the derived figures, then every counter as name=value.
    pub fn line(&self) -> String {
        let mut s = String::new();
        let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.1}%", v * 100.0));
        let num = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
        let (beside_compute, paired) = self.pm_shares();
        let _ = write!(
            s,
            "last_cpu_share={} mean_wait_us={} pm_beside_compute_share={} pm_paired_share={} \
             gang_home_share={}",
            pct(self.last_cpu_share()),
            num(self.mean_wait_us()),
            pct(beside_compute),
            pct(paired),
            pct(self.gang_home_share())
        );
        for ((name, _), value) in STAT_INFO.iter().zip(self.0.iter()) {
            let _ = write!(s, " {name}={value}");
        }
        s
    }
}

fn ratio(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

/// The statistics served (`sky_stats`): the policy, its generation, and
/// every counter of the stat enum with its description.
pub fn catalog() -> sky_stats::Catalog {
    sky_stats::Catalog::new(&STAT_INFO)
}

/// `--help-stats`: every statistic served, with what it counts.
pub fn describe() -> String {
    let stats = catalog().stats;
    let width = stats.iter().map(|s| s.name.len()).max().unwrap_or(0);
    stats
        .iter()
        .map(|s| format!("{:<width$}  {}\n", s.name, s.help))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(values: &[(u32, u64)]) -> Vec<u8> {
        let mut r = [0u64; NR_STATS];
        for (idx, v) in values {
            r[*idx as usize] = *v;
        }
        r.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    #[test]
    fn names_come_from_the_header_in_enum_order() {
        assert_eq!(
            STAT_INFO[intf::sky_stat_idx_SKY_STAT_DISPATCHES as usize].0,
            "dispatches"
        );
        assert_eq!(
            STAT_INFO[intf::sky_stat_idx_SKY_STAT_LAST_CPU_HITS as usize].0,
            "last_cpu_hits"
        );
        assert!(STAT_INFO.iter().all(|(_, help)| !help.is_empty()));
    }

    #[test]
    fn rows_are_summed_and_shares_derived() {
        use intf::*;
        let a = row(&[
            (sky_stat_idx_SKY_STAT_LAST_CPU_HITS, 9),
            (sky_stat_idx_SKY_STAT_STEALS, 2),
        ]);
        let b = row(&[
            (sky_stat_idx_SKY_STAT_LAST_CPU_HITS, 9),
            (sky_stat_idx_SKY_STAT_MOVES_IN_LLC, 1),
            (sky_stat_idx_SKY_STAT_MOVES_ACROSS_LLC, 1),
            (sky_stat_idx_SKY_STAT_STEALS, 6),
        ]);
        let c = Counters::sum_rows([a.as_slice(), b.as_slice()].into_iter()).unwrap();
        assert_eq!(c.get(sky_stat_idx_SKY_STAT_LAST_CPU_HITS), 18);
        assert_eq!(c.get(sky_stat_idx_SKY_STAT_STEALS), 8);
        assert_eq!(c.last_cpu_share(), Some(0.9));
        assert_eq!(c.mean_wait_us(), None);
        let line = c.line();
        assert!(
            line.starts_with(
                "last_cpu_share=90.0% mean_wait_us=- pm_beside_compute_share=- pm_paired_share=-"
            ),
            "{line}"
        );
        assert!(line.contains(" last_cpu_hits=18 "), "{line}");
    }

    #[test]
    fn pairing_shares_count_pm_writer_time_by_sibling() {
        use intf::*;
        let r = row(&[
            (sky_stat_idx_SKY_STAT_PM_BESIDE_COMPUTE_NS, 6),
            (sky_stat_idx_SKY_STAT_PM_BESIDE_PM_WRITER_NS, 2),
            (sky_stat_idx_SKY_STAT_PM_BESIDE_IDLE_NS, 1),
            (sky_stat_idx_SKY_STAT_PM_BESIDE_OTHER_NS, 1),
        ]);
        let c = Counters::sum_rows([r.as_slice()].into_iter()).unwrap();
        assert_eq!(c.pm_shares(), (Some(0.6), Some(0.75)));
        assert!(c
            .line()
            .contains("pm_beside_compute_share=60.0% pm_paired_share=75.0%"));
    }

    #[test]
    fn gang_home_share_counts_gang_run_time_at_home() {
        use intf::*;
        let r = row(&[
            (sky_stat_idx_SKY_STAT_GANG_HOME_NS, 3),
            (sky_stat_idx_SKY_STAT_GANG_AWAY_NS, 1),
        ]);
        let c = Counters::sum_rows([r.as_slice()].into_iter()).unwrap();
        assert_eq!(c.gang_home_share(), Some(0.75));
        assert!(c.line().contains(" gang_home_share=75.0% "), "{}", c.line());
        let none = Counters::sum_rows([row(&[]).as_slice()].into_iter()).unwrap();
        assert_eq!(none.gang_home_share(), None);
    }

    #[test]
    fn samples_carry_every_counter_by_name_and_come_back_whole() {
        use intf::*;
        let r = row(&[
            (sky_stat_idx_SKY_STAT_DISPATCHES, 7),
            (sky_stat_idx_SKY_STAT_WAIT_NS, 9),
        ]);
        let c = Counters::sum_rows([r.as_slice()].into_iter()).unwrap();
        let sample = c.sample("vtime", 3);
        let map = sample.as_object().unwrap();
        assert_eq!(map["policy"], "vtime");
        assert_eq!(map["generation"], 3);
        assert_eq!(map["dispatches"], 7);
        assert_eq!(map.len(), NR_STATS + 2);
        assert_eq!(Counters::from_sample(map), c);
        // Every served name is in the catalog, in the same order.
        let names: Vec<String> = catalog().stats.iter().map(|s| s.name.clone()).collect();
        assert_eq!(names.len(), NR_STATS + 2);
        assert_eq!(names[2], "dispatches");
    }

    #[test]
    fn deltas_and_short_rows() {
        let one = Counters::sum_rows([row(&[(0, 5)]).as_slice()].into_iter()).unwrap();
        let two = Counters::sum_rows([row(&[(0, 8)]).as_slice()].into_iter()).unwrap();
        assert_eq!(two.since(&one).get(0), 3);
        assert_eq!(one.since(&two).get(0), 0, "a reset never goes negative");
        assert!(Counters::sum_rows([[0u8; 8].as_slice()].into_iter()).is_err());
    }
}
