//! Partners stacked on one CPU while another idles, from the scheduler
//! tracepoints, for any scheduler. Two tasks of one group (the members of
//! a shared space, the two sides of a ping-pong pair) that could run side
//! by side should not wait behind each other while a CPU has nothing to
//! do. A wait is *stacked* when it ends with its CPU switching to it from
//! another task of its own group: a partner ran ahead of it there. The
//! time within a stacked wait during which some CPU was idle is time the
//! pair could have run at once; under TCG part of it is the emulator's
//! (an idle vCPU woken by an IPI waits for its turn on the host), which
//! EEVDF pays too, so the figure is judged against EEVDF's in one boot.
//!
//! A CPU counts as idle from a switch to the idle task (pid 0) until its
//! next switch; a CPU taken offline stays idle (scenarios that judge
//! partners do not hotplug).

use crate::group_of;
use std::collections::{BTreeMap, HashSet};

/// One group's stacked waits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartnerGroup {
    pub stacked: u64,
    pub stacked_ns: u64,
    /// The part of the stacked waits during which some CPU was idle.
    pub stacked_idle_ns: u64,
}

#[derive(Debug, Clone, Default)]
pub struct Partners {
    idle_cpus: HashSet<u32>,
    /// Time so far during which at least one CPU was idle: a wait's share
    /// of it is this clock's advance over the wait.
    idle_any_ns: u64,
    last_ns: u64,
    pub groups: BTreeMap<String, PartnerGroup>,
}

impl Partners {
    /// Time moves on to @ts_ns (every event, in trace order).
    pub fn advance(&mut self, ts_ns: u64) {
        if ts_ns > self.last_ns {
            if self.last_ns > 0 && !self.idle_cpus.is_empty() {
                self.idle_any_ns += ts_ns - self.last_ns;
            }
            self.last_ns = ts_ns;
        }
    }

    /// The idle clock now: keep it with a wait that begins.
    pub fn idle_mark(&self) -> u64 {
        self.idle_any_ns
    }

    /// @cpu switched to @next_pid (0: the idle task).
    pub fn switched(&mut self, cpu: u32, next_pid: u32) {
        if next_pid == 0 {
            self.idle_cpus.insert(cpu);
        } else {
            self.idle_cpus.remove(&cpu);
        }
    }

    /// A wait of @comm that began at @since_ns (idle clock @idle_mark then)
    /// ended at @ts_ns with its CPU switching to it from @prev (pid, comm).
    pub fn waited(
        &mut self,
        comm: &str,
        prev: (u32, &str),
        since_ns: u64,
        idle_mark: u64,
        ts_ns: u64,
    ) {
        let (prev_pid, prev_comm) = prev;
        let group = group_of(comm);
        if prev_pid == 0 || group_of(prev_comm) != group {
            return;
        }
        if !self.groups.contains_key(group) {
            self.groups
                .insert(group.to_string(), PartnerGroup::default());
        }
        let g = self.groups.get_mut(group).expect("inserted above");
        g.stacked += 1;
        g.stacked_ns += ts_ns.saturating_sub(since_ns);
        g.stacked_idle_ns += self.idle_any_ns.saturating_sub(idle_mark);
    }

    /// One line per group with stacked waits; @run_ns gives a group's CPU
    /// time, against which the idle part is a share.
    pub fn lines(&self, run_ns: impl Fn(&str) -> u64) -> Vec<String> {
        self.groups
            .iter()
            .map(|(name, g)| {
                let run = run_ns(name);
                format!(
                    "result observer=trace partners group={} stacked={} stacked_ms={} \
                     stacked_idle_ms={} run_ms={} stacked_idle_share={:.4}",
                    name.replace(' ', "_"),
                    g.stacked,
                    g.stacked_ns / 1_000_000,
                    g.stacked_idle_ns / 1_000_000,
                    run / 1_000_000,
                    if run > 0 {
                        g.stacked_idle_ns as f64 / run as f64
                    } else {
                        0.0
                    }
                )
            })
            .collect()
    }
}
