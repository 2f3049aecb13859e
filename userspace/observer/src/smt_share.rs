//! SMT pairing judged from the scheduler tracepoints, for any scheduler:
//! while a PM writer runs, what does its core's other hardware thread run
//! — a compute task (the pairing seed 000 asks for: docs/seeds.md), another PM writer,
//! nothing, or something else? Tasks are told apart by name, as
//! `sky-work pm-write` and `sky-work compute` name themselves.

use std::collections::HashMap;

/// What a CPU runs, for pairing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Compute = 0,
    PmWriter = 1,
    Idle = 2,
    Other = 3,
}

impl Kind {
    pub fn of(pid: u32, comm: &str) -> Kind {
        match (pid, comm) {
            (0, _) => Kind::Idle,
            (_, "pm-writer") => Kind::PmWriter,
            (_, c) if c.starts_with("cpu-") => Kind::Compute,
            _ => Kind::Other,
        }
    }
}

/// Nanoseconds PM writers ran, by what ran beside them.
#[derive(Debug, Clone, Default)]
pub struct SmtShare {
    /// CPU -> its SMT sibling.
    sibling: HashMap<u32, u32>,
    /// CPU -> what it runs since its last switch seen.
    current: HashMap<u32, Kind>,
    last_ts_ns: u64,
    /// Indexed by `Kind` of the sibling.
    pub beside_ns: [u64; 4],
}

impl SmtShare {
    /// `pairs`: each CPU and its sibling (both directions are taken).
    pub fn new(pairs: &[(u32, u32)]) -> Self {
        let mut sibling = HashMap::new();
        for &(a, b) in pairs {
            sibling.insert(a, b);
            sibling.insert(b, a);
        }
        SmtShare {
            sibling,
            ..Default::default()
        }
    }

    /// Time passes to @ts: PM writers' run time is filed by their
    /// siblings' kind. CPUs not seen switching yet are left out.
    pub fn advance(&mut self, ts_ns: u64) {
        let dt = ts_ns.saturating_sub(self.last_ts_ns);
        if self.last_ts_ns > 0 {
            for (cpu, kind) in &self.current {
                if *kind != Kind::PmWriter {
                    continue;
                }
                let Some(sib) = self.sibling.get(cpu) else {
                    continue;
                };
                if let Some(beside) = self.current.get(sib) {
                    self.beside_ns[*beside as usize] += dt;
                }
            }
        }
        self.last_ts_ns = self.last_ts_ns.max(ts_ns);
    }

    pub fn switched(&mut self, cpu: u32, next_pid: u32, next_comm: &str) {
        self.current.insert(cpu, Kind::of(next_pid, next_comm));
    }

    /// The task running on @cpu took a new name: a process that names
    /// itself after it starts is what it says from then, not from its
    /// next switch (a lone CPU hog may not switch again for its whole
    /// life).
    pub fn renamed(&mut self, cpu: u32, comm: &str) {
        if let Some(kind) = self.current.get_mut(&cpu) {
            if *kind != Kind::Idle {
                *kind = Kind::of(u32::MAX, comm);
            }
        }
    }

    pub fn total_ns(&self) -> u64 {
        self.beside_ns.iter().sum()
    }

    /// Of the PM-writer time beside a task that pairs (a compute task or
    /// another PM writer), the share beside compute: the pairing decisions
    /// alone. Time beside idle or other tasks is left out: unclassed work
    /// (shells, the observer) must run somewhere, and a sibling between
    /// two processes idles whatever the scheduler does. `None` if a PM
    /// writer never ran beside one.
    pub fn paired(&self) -> Option<f64> {
        let compute = self.beside_ns[Kind::Compute as usize];
        let both = compute + self.beside_ns[Kind::PmWriter as usize];
        (both > 0).then(|| compute as f64 / both as f64)
    }

    /// Share of PM-writer run time beside each kind, or `None` if no PM
    /// writer ran beside a known sibling.
    pub fn line(&self) -> Option<String> {
        let total = self.total_ns();
        let share = |k: Kind| self.beside_ns[k as usize] as f64 / total as f64;
        (total > 0).then(|| {
            format!(
                "result observer=trace smt pm_writer_ms={} beside_compute={:.3} \
                 beside_pm_writer={:.3} beside_idle={:.3} beside_other={:.3} paired={:.3}",
                total / 1_000_000,
                share(Kind::Compute),
                share(Kind::PmWriter),
                share(Kind::Idle),
                share(Kind::Other),
                self.paired().unwrap_or(0.0)
            )
        })
    }
}

/// The SMT sibling pairs of this machine (the topology scx_sky reads);
/// empty without SMT or if it cannot be read.
pub fn sibling_pairs() -> Vec<(u32, u32)> {
    let Ok(topo) = sky_topology::Topology::from_host() else {
        return Vec::new();
    };
    topo.cpus
        .iter()
        .flat_map(|c| {
            c.siblings
                .iter()
                .filter(move |&&s| s != c.id)
                .map(move |&s| (c.id as u32, s as u32))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pm_writer_time_is_filed_by_what_runs_beside_it() {
        // Two cores: CPUs 0+1, 2+3.
        let mut s = SmtShare::new(&[(0, 1), (2, 3)]);
        s.advance(1_000);
        s.switched(0, 10, "pm-writer");
        s.switched(1, 11, "cpu-idiv");
        s.switched(2, 12, "pm-writer");
        s.switched(3, 0, "swapper/3");
        s.advance(5_000); // 4 us: CPU 0 beside compute, CPU 2 beside idle.
        s.switched(1, 13, "pm-writer");
        s.advance(7_000); // 2 us: CPUs 0 and 1 beside each other, 2 idle.
        assert_eq!(s.beside_ns, [4_000, 4_000, 6_000, 0]);
        let line = s.line().unwrap();
        assert!(line.contains("beside_compute=0.286"), "{line}");
        assert!(line.contains("paired=0.500"), "{line}");
        assert_eq!(SmtShare::new(&[]).line(), None);
        assert_eq!(Kind::of(5, "sh"), Kind::Other);
    }

    #[test]
    fn a_task_that_renames_itself_counts_by_its_new_name_at_once() {
        let mut s = SmtShare::new(&[(0, 1)]);
        s.advance(1_000);
        s.switched(0, 10, "sky-work");
        s.switched(1, 11, "sky-work");
        s.advance(2_000);
        s.renamed(0, "pm-writer");
        s.advance(3_000); // 1 us: the PM writer beside a task not yet named.
        s.renamed(1, "cpu-idiv");
        s.advance(6_000); // 3 us beside compute.
        assert_eq!(s.beside_ns, [3_000, 0, 0, 1_000]);
        // An idle CPU stays idle whatever is renamed while it idles.
        s.switched(1, 0, "swapper/1");
        s.renamed(1, "cpu-idiv");
        s.advance(7_000);
        assert_eq!(s.beside_ns[Kind::Idle as usize], 1_000);
    }
}
