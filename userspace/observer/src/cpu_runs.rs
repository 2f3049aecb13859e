//! What each CPU ran lately, for the longest waits: a wait that ends on a
//! CPU which switched many times meanwhile was passed over (an order or a
//! rescue that failed it); one that ends on a CPU which ran one task the
//! whole time waited for that task's slice to end (a slice renewed, or a
//! class above the scheduler's); a CPU that idled meanwhile ran it late
//! for lack of a kick.

use std::collections::{HashMap, VecDeque};

/// Switch-ins kept per CPU: the longest wait the tests bound is well under
/// a second, in which a busy CPU switches a few thousand times at most.
const KEPT_PER_CPU: usize = 4096;

/// What one CPU ran during a wait.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meanwhile {
    /// Tasks switched in on the CPU inside the wait.
    pub switches: u32,
    /// The longest stretch one task ran there inside the wait, and its name
    /// (`swapper/N`: the CPU idled).
    pub longest_run_ns: u64,
    pub longest_by: String,
}

/// The recent switch-ins of every CPU: (time, name switched in).
#[derive(Debug, Default)]
pub struct CpuRuns {
    recent: HashMap<u32, VecDeque<(u64, String)>>,
}

impl CpuRuns {
    pub fn switched_in(&mut self, cpu: u32, ts_ns: u64, comm: &str) {
        let runs = self.recent.entry(cpu).or_default();
        if runs.len() == KEPT_PER_CPU {
            runs.pop_front();
        }
        runs.push_back((ts_ns, comm.to_string()));
    }

    /// What `cpu` ran in (`since_ns`, `now_ns`], from the switch-ins seen
    /// before `now_ns`: the task running at `since_ns` counts from there.
    /// A stretch older than the history starts at its first entry.
    pub fn during(&self, cpu: u32, since_ns: u64, now_ns: u64) -> Meanwhile {
        let mut m = Meanwhile::default();
        let Some(runs) = self.recent.get(&cpu) else {
            return m;
        };
        let first = runs.partition_point(|(ts, _)| *ts <= since_ns);
        let from = first.saturating_sub(1);
        for (i, (ts, comm)) in runs.iter().enumerate().skip(from) {
            let start = (*ts).max(since_ns);
            let end = runs.get(i + 1).map_or(now_ns, |(next, _)| *next);
            if *ts > since_ns {
                m.switches += 1;
            }
            let ran = end.saturating_sub(start);
            if ran > m.longest_run_ns {
                m.longest_run_ns = ran;
                m.longest_by = comm.clone();
            }
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_sees_the_switches_inside_it_and_the_longest_stretch() {
        let mut c = CpuRuns::default();
        c.switched_in(3, 100, "hog");
        c.switched_in(3, 200, "a");
        c.switched_in(3, 210, "b");
        c.switched_in(1, 150, "elsewhere");
        // Wait from 150 to 400: hog ran 150-200 (50), a 10, b 210-400 (190).
        let m = c.during(3, 150, 400);
        assert_eq!(m.switches, 2);
        assert_eq!((m.longest_run_ns, m.longest_by.as_str()), (190, "b"));
    }

    #[test]
    fn one_task_running_throughout_is_named_with_no_switches() {
        let mut c = CpuRuns::default();
        c.switched_in(0, 10, "spinner");
        let m = c.during(0, 50, 1_000);
        assert_eq!(m.switches, 0);
        assert_eq!((m.longest_run_ns, m.longest_by.as_str()), (950, "spinner"));
        assert_eq!(c.during(7, 50, 1_000), Meanwhile::default());
    }

    #[test]
    fn the_history_is_bounded() {
        let mut c = CpuRuns::default();
        for ts in 0..(KEPT_PER_CPU as u64 + 10) {
            c.switched_in(0, ts, "t");
        }
        assert_eq!(c.recent[&0].len(), KEPT_PER_CPU);
        assert_eq!(c.recent[&0].front().unwrap().0, 10);
    }
}
