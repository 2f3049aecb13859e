//! Shared-cache gangs judged from the scheduler tracepoints, for any
//! scheduler (seed 003, docs/seeds.md): is each gang's work in one cache domain ("All
//! share"), and does any domain run two gangs at once (Dirty)? A gang is
//! told by name: every task whose name starts with `mb-` belongs to the
//! gang of that name (`mb-a`, `mb-b`, ...), whichever process it is in, so
//! a restarted gang and a shared space's member processes count as one.
//!
//! - All share: of the time two or more of a gang's tasks run, the share
//!   in which all of them run in one domain.
//! - Dirty: time a domain runs tasks of two or more gangs at once, as a
//!   share of domain time (domains x the traced span).

use std::collections::{BTreeMap, HashMap};

/// Names of gang tasks start with this; the whole name is the gang.
pub const GANG_PREFIX: &str = "mb-";

#[derive(Debug, Clone, Default)]
pub struct GangShare {
    /// CPU -> its cache domain.
    llc_of: HashMap<u32, u32>,
    domains: usize,
    /// CPU -> the gang it runs now, if any.
    current: HashMap<u32, Option<String>>,
    last_ts_ns: u64,
    /// Per gang: (time with >= 2 tasks running, of it in one domain).
    pub together_ns: BTreeMap<String, (u64, u64)>,
    /// Time some domain ran two gangs at once, summed over domains.
    pub dirty_ns: u64,
    /// Time any gang task ran (the span Dirty is measured over).
    pub span_ns: u64,
}

fn gang_of(pid: u32, comm: &str) -> Option<String> {
    (pid != 0 && comm.starts_with(GANG_PREFIX)).then(|| comm.to_string())
}

impl GangShare {
    /// `cpus`: each CPU with its cache domain.
    pub fn new(cpus: &[(u32, u32)]) -> Self {
        let llc_of: HashMap<u32, u32> = cpus.iter().copied().collect();
        let mut domains: Vec<u32> = llc_of.values().copied().collect();
        domains.sort_unstable();
        domains.dedup();
        GangShare {
            llc_of,
            domains: domains.len(),
            ..Default::default()
        }
    }

    /// Time passes to `ts_ns`: what ran since the last event is filed.
    pub fn advance(&mut self, ts_ns: u64) {
        let dt = ts_ns.saturating_sub(self.last_ts_ns);
        if self.last_ts_ns > 0 && dt > 0 {
            // gang -> domains it runs in, with how many tasks.
            let mut spread: BTreeMap<&str, BTreeMap<u32, u32>> = BTreeMap::new();
            for (cpu, gang) in &self.current {
                if let (Some(g), Some(llc)) = (gang, self.llc_of.get(cpu)) {
                    *spread.entry(g).or_default().entry(*llc).or_default() += 1;
                }
            }
            if !spread.is_empty() {
                self.span_ns += dt;
            }
            let mut per_domain: HashMap<u32, u32> = HashMap::new();
            for (gang, domains) in &spread {
                for llc in domains.keys() {
                    *per_domain.entry(*llc).or_default() += 1;
                }
                let running: u32 = domains.values().sum();
                if running >= 2 {
                    let e = self.together_ns.entry(gang.to_string()).or_default();
                    e.0 += dt;
                    if domains.len() == 1 {
                        e.1 += dt;
                    }
                }
            }
            self.dirty_ns += dt * per_domain.values().filter(|&&n| n >= 2).count() as u64;
        }
        self.last_ts_ns = self.last_ts_ns.max(ts_ns);
    }

    pub fn switched(&mut self, cpu: u32, next_pid: u32, next_comm: &str) {
        self.current.insert(cpu, gang_of(next_pid, next_comm));
    }

    /// The task on `cpu` took a new name (exec, PR_SET_NAME).
    pub fn renamed(&mut self, cpu: u32, comm: &str) {
        if let Some(g) = self.current.get_mut(&cpu) {
            *g = gang_of(u32::MAX, comm);
        }
    }

    /// All-share over every gang's together-time, and the lowest of any
    /// gang that ran together at least 100 ms.
    pub fn all_share(&self) -> Option<(f64, f64)> {
        let (t, a) = self
            .together_ns
            .values()
            .fold((0, 0), |(t, a), (tt, aa)| (t + tt, a + aa));
        let min = self
            .together_ns
            .values()
            .filter(|(t, _)| *t >= 100_000_000)
            .map(|(t, a)| *a as f64 / *t as f64)
            .fold(f64::INFINITY, f64::min);
        (t > 0).then(|| (a as f64 / t as f64, if min.is_finite() { min } else { 0.0 }))
    }

    /// Dirty domain time as a share of all domain time over the span.
    pub fn dirty_share(&self) -> f64 {
        let all = self.span_ns * self.domains.max(1) as u64;
        if all == 0 {
            0.0
        } else {
            self.dirty_ns as f64 / all as f64
        }
    }

    /// `result observer=trace gangs ...`, or `None` if no gang ran.
    pub fn line(&self) -> Option<String> {
        let (all, min) = self.all_share()?;
        Some(format!(
            "result observer=trace gangs gangs={} span_ms={} all_share={all:.3} \
             all_share_min={min:.3} dirty_share={:.3} dirty_llc_ms={}",
            self.together_ns.len(),
            self.span_ns / 1_000_000,
            self.dirty_share(),
            self.dirty_ns / 1_000_000
        ))
    }
}

/// Each online CPU of this machine with its cache domain (the topology
/// scx_sky reads); empty if it cannot be read.
pub fn cpu_domains() -> Vec<(u32, u32)> {
    let Ok(topo) = sky_topology::Topology::from_host() else {
        return Vec::new();
    };
    topo.cpus
        .iter()
        .filter_map(|c| Some((c.id as u32, c.llc? as u32)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gangs_are_judged_together_and_domains_dirty() {
        // Two domains: CPUs 0-1 and 2-3.
        let mut s = GangShare::new(&[(0, 0), (1, 0), (2, 1), (3, 1)]);
        s.advance(1_000);
        s.switched(0, 10, "mb-a");
        s.switched(1, 11, "mb-a");
        s.switched(2, 12, "mb-b");
        s.switched(3, 13, "mb-b");
        s.advance(5_000); // 4 us: both gangs together, no domain Dirty.
        s.switched(1, 14, "mb-b");
        s.switched(3, 15, "mb-a");
        s.advance(7_000); // 2 us: both spread, both domains Dirty.
        s.switched(1, 0, "swapper/1");
        s.switched(3, 16, "bash");
        s.advance(8_000); // 1 us: one task each: not counted together.
        assert_eq!(s.together_ns["mb-a"], (6_000, 4_000));
        assert_eq!(s.together_ns["mb-b"], (6_000, 4_000));
        assert_eq!(s.dirty_ns, 4_000);
        assert_eq!(s.span_ns, 7_000);
        let line = s.line().unwrap();
        assert!(line.contains("all_share=0.667"), "{line}");
        assert!(line.contains("dirty_share=0.286"), "{line}");
        // Renamed into a gang, counted at once.
        s.renamed(3, "mb-c");
        assert_eq!(s.current[&3].as_deref(), Some("mb-c"));
        assert_eq!(GangShare::new(&[]).line(), None);
    }
}
