//! What the planner is told of each gang: whether it is memory-bound and
//! by what ([`judge`]), its demand in CPUs, smoothed over a window so that
//! a gang whose threads take turns sleeping keeps its size ([`Demand`]),
//! and, for a gang it has not placed yet, the home its threads already run
//! in ([`inherited_home`]). The daemon gathers the facts (its maps, /proc,
//! the classifier); the rules are here, with their tests.

use crate::detect;
use crate::memory_bound::Verdict;
use crate::planner::{DomainId, GangId};
use crate::rules::Hint;
use crate::table::GangEntry;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Is a gang memory-bound, and by what: its rule's hint, else its shared
/// space's flag (`space_says`: a member set it), else the class of any of
/// its threads (`thread_is_memory_bound`: hints or the PMU), else the CPI
/// test's verdict (`cpi`).
pub fn judge(
    e: &GangEntry,
    space_says: bool,
    thread_is_memory_bound: impl Fn(u32) -> bool,
    cpi: Option<&Verdict>,
) -> (bool, String) {
    match e.hint {
        Hint::MemoryBound => (true, "gang rule".into()),
        Hint::NotMemoryBound => (false, "gang rule".into()),
        Hint::Auto if space_says => (true, "a member of its space says so".into()),
        Hint::Auto => match e.tids.iter().find(|&&t| thread_is_memory_bound(t)) {
            Some(t) => (true, format!("class of thread {t}")),
            None => match cpi {
                Some(v) => (v.is_memory_bound(), detect::describe(v)),
                None => (
                    false,
                    "no thread classed memory-bound, no CPI samples".into(),
                ),
            },
        },
    }
}

/// Periods a demand is the maximum over (1 s of the daemon's 100 ms
/// periods).
pub const DEMAND_WINDOW: usize = 10;

/// Each memory-bound gang's runnable threads over its last
/// [`DEMAND_WINDOW`] periods.
#[derive(Debug, Default)]
pub struct Demand {
    windows: HashMap<GangId, VecDeque<u32>>,
}

impl Demand {
    /// `gang` had `runnable` threads runnable this period: its demand, the
    /// most it had in the window, and at least 1 (a gang judged now is
    /// one that ran).
    pub fn record(&mut self, gang: GangId, runnable: u32) -> u32 {
        let window = self.windows.entry(gang).or_default();
        window.push_back(runnable);
        if window.len() > DEMAND_WINDOW {
            window.pop_front();
        }
        window.iter().copied().max().unwrap_or(0).max(1)
    }

    /// Forgets the gangs `keep` says are gone: one that comes back starts
    /// a new window.
    pub fn retain(&mut self, mut keep: impl FnMut(GangId) -> bool) {
        self.windows.retain(|g, _| keep(*g));
    }
}

/// The home a gang the planner has not placed yet should keep: the one
/// BPF or an earlier plan gave the process holding most of its threads
/// (ties: the lowest PID), among its processes that have one. Moving
/// threads that BPF placed at their first run costs a cache refill; the
/// planner may still move the gang if that improves the plan
/// (`Planner::adopt`).
///
/// `threads_of_process`: the gang's threads per PID; `home_of`: a
/// process's home in BPF, if it has one.
pub fn inherited_home(
    threads_of_process: &BTreeMap<u32, usize>,
    home_of: impl Fn(u32) -> Option<DomainId>,
) -> Option<DomainId> {
    threads_of_process
        .iter()
        .filter_map(|(&pid, &n)| Some((n, std::cmp::Reverse(pid), home_of(pid)?)))
        .max()
        .map(|(_, _, home)| home)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gang(hint: Hint) -> GangEntry {
        GangEntry {
            id: GangId(1),
            tids: vec![10, 11],
            processes: [10].into(),
            hint,
            rule: None,
        }
    }

    #[test]
    fn a_rule_then_the_space_then_a_class_decide_before_the_cpi_test() {
        let none = |_| false;
        let eleven = |t| t == 11;
        let (mb, by) = judge(&gang(Hint::NotMemoryBound), true, eleven, None);
        assert!(!mb && by == "gang rule");
        let (mb, by) = judge(&gang(Hint::MemoryBound), false, none, None);
        assert!(mb && by == "gang rule");
        let (mb, by) = judge(&gang(Hint::Auto), true, none, None);
        assert!(mb && by.contains("space"), "{by}");
        let (mb, by) = judge(&gang(Hint::Auto), false, eleven, None);
        assert!(mb && by == "class of thread 11", "{by}");
        let (mb, by) = judge(&gang(Hint::Auto), false, none, None);
        assert!(!mb && by.contains("no CPI samples"), "{by}");
    }

    #[test]
    fn demand_is_the_windows_peak_and_at_least_one() {
        let mut d = Demand::default();
        let g = GangId(1);
        assert_eq!(d.record(g, 0), 1);
        assert_eq!(d.record(g, 4), 4);
        // Threads that take turns sleeping keep the gang's size ...
        for _ in 0..DEMAND_WINDOW - 1 {
            assert_eq!(d.record(g, 1), 4);
        }
        // ... until the peak leaves the window.
        assert_eq!(d.record(g, 2), 2);
        // Gangs are counted apart.
        assert_eq!(d.record(GangId(2), 3), 3);
        assert_eq!(d.record(g, 1), 2);
    }

    #[test]
    fn a_forgotten_gang_starts_a_new_window() {
        let mut d = Demand::default();
        d.record(GangId(1), 8);
        d.record(GangId(2), 8);
        d.retain(|g| g == GangId(2));
        assert_eq!(d.record(GangId(1), 2), 2);
        assert_eq!(d.record(GangId(2), 2), 8);
    }

    #[test]
    fn the_home_of_the_process_with_most_threads_is_inherited() {
        let homes: BTreeMap<u32, DomainId> = [(10, DomainId(1)), (20, DomainId(0))].into();
        let home_of = |pid| homes.get(&pid).copied();
        let threads = |t: &[(u32, usize)]| t.iter().copied().collect::<BTreeMap<_, _>>();
        assert_eq!(
            inherited_home(&threads(&[(10, 2), (20, 5)]), home_of),
            Some(DomainId(0))
        );
        // A tie: the lowest PID's.
        assert_eq!(
            inherited_home(&threads(&[(10, 3), (20, 3)]), home_of),
            Some(DomainId(1))
        );
        // The biggest process has no home: the biggest that has one.
        assert_eq!(
            inherited_home(&threads(&[(10, 1), (30, 9)]), home_of),
            Some(DomainId(1))
        );
        assert_eq!(inherited_home(&threads(&[(30, 9)]), home_of), None);
        assert_eq!(inherited_home(&BTreeMap::new(), home_of), None);
    }
}
