//! Why wakeups were slow, from the scheduler tracepoints, for any
//! scheduler: for every wakeup that waited longer than `SLOW_WAKE_NS`
//! before its task ran, where it was woken from (the waker's CPU), where
//! the kernel put it (`sched_wakeup`'s target CPU), where it ran, whether
//! a reschedule IPI was sent to that CPU while it waited, and which task
//! that CPU ran last before it (what it waited behind), and whether that
//! CPU started other tasks while it waited (passed over). A wake tail has
//! a few causes that these tell apart: queued behind a hog on a busy CPU
//! with no preemption (no IPI, behind a hog, not passed over), passed over
//! for tasks queued ahead of it (the queue's order, or a chain of
//! hand-offs that never lets the CPU look at its queue), a preemption
//! whose IPI was slow to land (IPI sent), or a move to another CPU (target
//! not where it ran).

use crate::group_of;
use std::collections::{BTreeMap, HashMap};

/// A wakeup slower than this is explained (5 ms: beyond a tick at HZ=250,
/// so it waited for more than the next slice end).
pub const SLOW_WAKE_NS: u64 = 5_000_000;

/// Where a wakeup came from: the waker's CPU, and the CPU the kernel woke
/// the task for (`sched_wakeup`'s target; older formats may lack it).
/// Kept with the wait it began (trace_waits.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Woken {
    pub waker_cpu: u32,
    pub target_cpu: Option<u32>,
    /// The task that ran the wakeup, if the trace named it.
    pub waker_pid: Option<u32>,
    /// How many tasks the target CPU had started when the wakeup came
    /// (`SlowWakes::started_on`).
    pub target_starts: u64,
}

/// What the slow wakeups of one group of tasks had in common.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlowGroup {
    pub count: u64,
    /// Ran on the CPU the kernel's wakeup named.
    pub on_target: u64,
    /// The target was the waker's own CPU (a synchronous hand-off).
    pub target_was_waker: u64,
    /// A reschedule IPI was sent to the CPU it ran on while it waited.
    pub ipi_sent: u64,
    /// Ran on its target CPU after that CPU had started two or more other
    /// tasks since the wakeup: it was passed over, not stuck behind one.
    pub passed_over: u64,
    /// The task its CPU switched from to run it was its waker: it waited
    /// for its waker to sleep.
    pub behind_waker: u64,
    /// Group of the task that CPU switched from to run it -> count.
    pub behind: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default)]
pub struct SlowWakes {
    /// CPU -> the last time a reschedule IPI was sent to it.
    resched_sent: HashMap<u32, u64>,
    /// CPU -> how many tasks it has started (switches in).
    starts: HashMap<u32, u64>,
    pub groups: BTreeMap<String, SlowGroup>,
}

impl SlowWakes {
    pub fn resched_sent(&mut self, cpu: u32, ts_ns: u64) {
        self.resched_sent.insert(cpu, ts_ns);
    }

    /// How many tasks @cpu has started so far.
    pub fn started_on(&self, cpu: u32) -> u64 {
        self.starts.get(&cpu).copied().unwrap_or(0)
    }

    /// @cpu switched to another task; call before `ran` for that switch.
    pub fn switched(&mut self, cpu: u32) {
        *self.starts.entry(cpu).or_default() += 1;
    }

    /// A task named @comm, woken as @w says at @since_ns, switched in on
    /// @cpu at @ts_ns after @prev (pid, comm).
    pub fn ran(
        &mut self,
        w: Woken,
        comm: &str,
        cpu: u32,
        prev: (u32, &str),
        since_ns: u64,
        ts_ns: u64,
    ) {
        let (prev_pid, prev_comm) = prev;
        if ts_ns.saturating_sub(since_ns) <= SLOW_WAKE_NS {
            return;
        }
        let started = self.started_on(cpu);
        let g = self.groups.entry(group_of(comm).to_string()).or_default();
        g.count += 1;
        g.on_target += u64::from(w.target_cpu == Some(cpu));
        g.target_was_waker += u64::from(w.target_cpu == Some(w.waker_cpu));
        g.ipi_sent += u64::from(self.resched_sent.get(&cpu).is_some_and(|&t| t >= since_ns));
        // This switch is one start; two more were other tasks run first.
        g.passed_over += u64::from(w.target_cpu == Some(cpu) && started >= w.target_starts + 3);
        g.behind_waker += u64::from(w.waker_pid == Some(prev_pid));
        *g.behind.entry(group_of(prev_comm).to_string()).or_default() += 1;
    }

    /// One line per group with slow wakeups: `behind` lists the three
    /// groups they waited behind most often.
    pub fn lines(&self) -> Vec<String> {
        self.groups
            .iter()
            .map(|(name, g)| {
                let mut behind: Vec<_> = g.behind.iter().collect();
                behind.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
                let behind: Vec<String> = behind
                    .iter()
                    .take(3)
                    .map(|(n, c)| format!("{}:{c}", n.replace(' ', "_")))
                    .collect();
                format!(
                    "result observer=trace slow_wakes group={name} over_ms={} count={} \
                     on_target={} target_was_waker={} ipi_sent={} passed_over={} behind_waker={} behind={}",
                    SLOW_WAKE_NS / 1_000_000,
                    g.count,
                    g.on_target,
                    g.target_was_waker,
                    g.ipi_sent,
                    g.passed_over,
                    g.behind_waker,
                    if behind.is_empty() {
                        "-".to_string()
                    } else {
                        behind.join(",")
                    }
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(waker_cpu: u32, target_cpu: u32) -> Woken {
        Woken {
            waker_cpu,
            target_cpu: Some(target_cpu),
            waker_pid: Some(1),
            target_starts: 0,
        }
    }

    #[test]
    fn only_slow_wakeups_are_explained_by_where_they_went_and_what_they_waited_behind() {
        let mut s = SlowWakes::default();
        // Fast: not counted.
        s.ran(from(0, 0), "ping", 0, (99, "burn"), 1_000, 2_000_000);
        // Slow, a hand-off to the waker's CPU, run there behind a hog.
        s.ran(from(3, 3), "ping", 3, (99, "burn"), 10_000_000, 30_000_000);
        // Slow, sent to CPU 1, run on CPU 2 after an IPI to it.
        s.resched_sent(2, 12_000_000);
        s.ran(
            from(0, 1),
            "ping",
            2,
            (99, "kworker/2:1"),
            11_000_000,
            40_000_000,
        );
        // An IPI before the wait began does not count.
        s.ran(from(0, 2), "ping", 2, (99, "burn"), 50_000_000, 60_000_000);
        let g = &s.groups["ping"];
        assert_eq!(g.count, 3);
        assert_eq!(g.on_target, 2);
        assert_eq!(g.target_was_waker, 1);
        assert_eq!(g.ipi_sent, 1);
        assert_eq!(g.behind["burn"], 2);
        let lines = s.lines();
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].contains(
                "count=3 on_target=2 target_was_waker=1 ipi_sent=1 passed_over=0 \
                 behind_waker=0 behind=burn:2,kworker:1"
            ),
            "{}",
            lines[0]
        );
    }

    #[test]
    fn a_wakee_is_passed_over_when_its_cpu_started_two_other_tasks_or_waits_behind_its_waker() {
        let mut s = SlowWakes::default();
        s.switched(1);
        let w = Woken {
            waker_cpu: 0,
            target_cpu: Some(1),
            waker_pid: Some(1),
            target_starts: s.started_on(1),
        };
        // One other task, then the wakee: stuck behind it, not passed over.
        s.switched(1);
        s.switched(1);
        s.ran(w, "ping", 1, (99, "burn"), 0, 10_000_000);
        assert_eq!(s.groups["ping"].passed_over, 0);
        // Two other tasks, then the wakee.
        let w = Woken {
            target_starts: s.started_on(1),
            ..w
        };
        s.switched(1);
        s.switched(1);
        s.switched(1);
        // Behind its waker (pid 1) at the end.
        s.ran(w, "ping", 1, (1, "ping"), 20_000_000, 30_000_000);
        // On another CPU than its target it was moved, not passed over.
        s.switched(2);
        s.switched(2);
        s.switched(2);
        s.ran(w, "ping", 2, (99, "burn"), 20_000_000, 30_000_000);
        let g = &s.groups["ping"];
        assert_eq!((g.count, g.passed_over, g.behind_waker), (3, 1, 1));
    }

    #[test]
    fn a_target_the_trace_did_not_name_is_never_on_target() {
        let mut s = SlowWakes::default();
        let w = Woken {
            waker_cpu: 1,
            target_cpu: None,
            waker_pid: None,
            target_starts: 0,
        };
        s.ran(w, "ping", 1, (99, "burn"), 0, 50_000_000);
        let g = &s.groups["ping"];
        assert_eq!((g.count, g.on_target, g.target_was_waker), (1, 0, 0));
    }
}
