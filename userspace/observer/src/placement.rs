//! Where tasks ran, from the scheduler tracepoints, for any scheduler:
//! per group of tasks the switch-ins, the share of them on the CPU the
//! task ran on last (SKY-1's figure), migrations (`sched_migrate_task`
//! between two CPUs: what the kernel counts in `se.nr_migrations`), and
//! the wake-up latency (waits that began with a wakeup, not a
//! preemption). Per task the same counts, which the evaluation holds
//! against the kernel's own (`/proc/<pid>/sched`, `schedstat`).

use crate::group_of;
use std::collections::HashMap;

/// One task's counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskPlacement {
    pub comm: String,
    pub switch_ins: u64,
    pub switch_outs: u64,
    /// Switch-ins on the CPU of the task's previous switch-in.
    pub same_cpu_ins: u64,
    pub migrations: u64,
    pub run_ns: u64,
    last_cpu: Option<u32>,
}

/// A group's counts (tasks grouped by name, as `group_of`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupPlacement {
    pub switch_ins: u64,
    /// Switch-ins that had a previous one to compare with.
    pub repeat_ins: u64,
    pub same_cpu_ins: u64,
    pub migrations: u64,
    /// Waits from a wakeup to the switch-in, µs.
    pub wake_waits_us: Vec<u64>,
    /// CPU time its tasks ran (switch-in to switch-out).
    pub run_ns: u64,
}

impl GroupPlacement {
    /// The share of switch-ins on the task's last CPU.
    pub fn last_cpu_share(&self) -> Option<f64> {
        (self.repeat_ins > 0).then(|| self.same_cpu_ins as f64 / self.repeat_ins as f64)
    }
}

#[derive(Debug, Clone, Default)]
pub struct Placement {
    pub tasks: HashMap<u32, TaskPlacement>,
    pub groups: HashMap<String, GroupPlacement>,
}

impl Placement {
    /// A task's group; allocates only for a group not seen before (this
    /// runs for every traced event the reader must keep up with).
    fn group(&mut self, comm: &str) -> &mut GroupPlacement {
        let name = group_of(comm);
        if !self.groups.contains_key(name) {
            self.groups
                .insert(name.to_string(), GroupPlacement::default());
        }
        self.groups.get_mut(name).expect("inserted above")
    }

    fn task(&mut self, pid: u32, comm: &str) -> &mut TaskPlacement {
        let t = self.tasks.entry(pid).or_default();
        if t.comm != comm {
            t.comm = comm.to_string();
        }
        t
    }

    pub fn switched_in(&mut self, cpu: u32, pid: u32, comm: &str) {
        if pid == 0 {
            return;
        }
        let t = self.task(pid, comm);
        t.switch_ins += 1;
        let previous = t.last_cpu.replace(cpu);
        let same = previous == Some(cpu);
        t.same_cpu_ins += u64::from(same);
        let g = self.group(comm);
        g.switch_ins += 1;
        if previous.is_some() {
            g.repeat_ins += 1;
            g.same_cpu_ins += u64::from(same);
        }
    }

    /// `ran_ns`: how long it ran since its switch-in, if that was traced
    /// (the wait book follows what runs where).
    pub fn switched_out(&mut self, pid: u32, comm: &str, ran_ns: Option<u64>) {
        if pid == 0 {
            return;
        }
        let t = self.task(pid, comm);
        t.switch_outs += 1;
        t.run_ns += ran_ns.unwrap_or(0);
        self.group(comm).run_ns += ran_ns.unwrap_or(0);
    }

    /// How evenly `group`'s tasks ran: the 10th and 90th percentile of
    /// their run times (ns) and how many tasks ran.
    pub fn run_spread(&self, group: &str) -> (u64, u64, usize) {
        let mut times: Vec<u64> = self
            .tasks
            .values()
            .filter(|t| t.run_ns > 0 && group_of(&t.comm) == group)
            .map(|t| t.run_ns)
            .collect();
        let p10 = crate::percentile(&mut times, 10.0);
        (p10, crate::percentile(&mut times, 90.0), times.len())
    }

    /// `sched_migrate_task`: fires on every set_task_cpu(), which counts a
    /// migration only between two different CPUs.
    pub fn migrated(&mut self, pid: u32, comm: &str, orig_cpu: u32, dest_cpu: u32) {
        if orig_cpu == dest_cpu || pid == 0 {
            return;
        }
        self.task(pid, comm).migrations += 1;
        self.group(comm).migrations += 1;
    }

    pub fn woke_and_waited(&mut self, comm: &str, wait_ns: u64) {
        self.group(comm).wake_waits_us.push(wait_ns / 1000);
    }

    /// One line per group that ran, most switch-ins first.
    pub fn lines(&self) -> Vec<String> {
        let mut groups: Vec<_> = self
            .groups
            .iter()
            .filter(|(_, g)| g.switch_ins > 0)
            .collect();
        groups.sort_by(|a, b| b.1.switch_ins.cmp(&a.1.switch_ins).then(a.0.cmp(b.0)));
        groups
            .into_iter()
            .map(|(name, g)| {
                let mut wakes = g.wake_waits_us.clone();
                format!(
                    "result observer=trace placement group={name} switch_ins={} \
                     last_cpu_share={} migrations={} wakes={} wake_p50_us={} wake_p90_us={} \
                     wake_p99_us={} wake_max_us={} run_ms={}",
                    g.switch_ins,
                    g.last_cpu_share().map_or("-".into(), |s| format!("{s:.4}")),
                    g.migrations,
                    wakes.len(),
                    crate::percentile(&mut wakes, 50.0),
                    crate::percentile(&mut wakes, 90.0),
                    crate::percentile(&mut wakes, 99.0),
                    wakes.iter().max().copied().unwrap_or(0),
                    g.run_ns / 1_000_000,
                )
            })
            .collect()
    }

    /// One line per task of `group`, for holding against /proc.
    pub fn task_lines(&self, group: &str) -> Vec<String> {
        let mut pids: Vec<_> = self
            .tasks
            .iter()
            .filter(|(_, t)| group_of(&t.comm) == group)
            .collect();
        pids.sort_by_key(|(pid, _)| **pid);
        pids.into_iter()
            .map(|(pid, t)| {
                format!(
                    "result observer=trace task pid={pid} comm={} switch_ins={} switch_outs={} \
                     migrations={} run_us={}",
                    t.comm.replace(' ', "_"),
                    t.switch_ins,
                    t.switch_outs,
                    t.migrations,
                    t.run_ns / 1000
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_ins_on_the_last_cpu_and_migrations_are_counted() {
        let mut p = Placement::default();
        p.switched_in(1, 10, "loop-a");
        p.switched_out(10, "loop-a", Some(100));
        p.switched_in(1, 10, "loop-a");
        p.switched_out(10, "loop-a", Some(2_000_000));
        p.migrated(10, "loop-a", 1, 1);
        p.migrated(10, "loop-a", 1, 2);
        p.switched_in(2, 10, "loop-a");
        p.switched_in(3, 11, "loop-b");
        p.switched_in(0, 0, "swapper/0");
        p.woke_and_waited("loop-a", 7_000);
        let g = &p.groups["loop-a"];
        assert_eq!((g.switch_ins, g.repeat_ins, g.same_cpu_ins), (3, 2, 1));
        assert_eq!(g.last_cpu_share(), Some(0.5));
        assert_eq!(g.migrations, 1, "set_task_cpu to the same CPU is none");
        let t = &p.tasks[&10];
        assert_eq!((t.switch_ins, t.switch_outs, t.run_ns), (3, 2, 2_000_100));
        assert_eq!(g.run_ns, 2_000_100, "the group's run time is its tasks'");
        assert_eq!(p.groups["loop-b"].last_cpu_share(), None);
        assert!(!p.tasks.contains_key(&0));
        let lines = p.lines();
        assert!(lines[0].contains("group=loop-a switch_ins=3 last_cpu_share=0.5000 migrations=1 wakes=1 wake_p50_us=7 "), "{lines:?}");
        assert!(lines[0].ends_with(" run_ms=2"), "{lines:?}");
        assert!(lines[1].contains("last_cpu_share=- "), "{lines:?}");
        let tasks = p.task_lines("loop-a");
        assert_eq!(tasks.len(), 1);
        assert!(
            tasks[0].ends_with(
                "pid=10 comm=loop-a switch_ins=3 switch_outs=2 migrations=1 run_us=2000"
            ),
            "{tasks:?}"
        );
    }
}
