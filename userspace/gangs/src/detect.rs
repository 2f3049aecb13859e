//! Memory-bound detection from the PMU, gang by gang: each sampling period
//! a gang's threads' cycles and instructions make one CPI sample, filed
//! under All share when all its counted threads sit in one cache domain
//! and under Partial share when they are spread over several; the
//! [`memory_bound`](crate::memory_bound) then judges the two distributions.
//!
//! Partial share here is "spread over domains", the observable half of the
//! paper's "spread over domains another memory-bound program uses": a gang
//! spread over domains nobody else loads pays only for the data its threads
//! share across caches, so the test can only under-detect, never invent a
//! difference.
//!
//! Once memory-bound, a gang is kept at home and samples only All share
//! from then on; its Partial-share window keeps its old samples (a ring
//! drops the oldest only when a new one comes), so the verdict holds while
//! the gang lives. A gang that is not memory-bound keeps being sampled
//! wherever it runs, and its verdict follows its phases.

use crate::memory_bound::{CpiSamples, Verdict, DEFAULT_ALPHA, DEFAULT_MIN_RATIO};
use crate::planner::{DomainId, GangId};
use std::collections::HashMap;

/// Fewest instructions a period's sample must count: below this the CPI
/// of a mostly idle gang is noise (timer ticks, page faults).
pub const MIN_INSTRUCTIONS: u64 = 1_000_000;

/// One thread of a gang over one sampling period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadPeriod {
    pub cycles: u64,
    pub instructions: u64,
    /// The cache domain of the CPU it is on (or last ran on) now.
    pub domain: Option<DomainId>,
}

/// Where a gang's threads ran during a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    All,
    Partial,
}

/// One CPI sample of a gang from its threads' period, or `None`: fewer
/// than two threads counted anything (one thread shares no cache with
/// itself), a domain is unknown, or too few instructions.
pub fn sample(threads: &[ThreadPeriod]) -> Option<(Share, f64)> {
    let counted: Vec<&ThreadPeriod> = threads.iter().filter(|t| t.instructions > 0).collect();
    if counted.len() < 2 {
        return None;
    }
    let mut domains = Vec::with_capacity(counted.len());
    for t in &counted {
        domains.push(t.domain?);
    }
    let cycles: u64 = counted.iter().map(|t| t.cycles).sum();
    let instructions: u64 = counted.iter().map(|t| t.instructions).sum();
    if instructions < MIN_INSTRUCTIONS {
        return None;
    }
    let share = if domains.iter().all(|d| *d == domains[0]) {
        Share::All
    } else {
        Share::Partial
    };
    Some((share, cycles as f64 / instructions as f64))
}

/// Every gang's samples and latest verdict.
#[derive(Debug, Default)]
pub struct Detector {
    gangs: HashMap<GangId, (CpiSamples, Verdict)>,
}

impl Detector {
    /// Files one period of `gang`'s threads and judges it again.
    pub fn observe(&mut self, gang: GangId, threads: &[ThreadPeriod]) {
        let Some((share, cpi)) = sample(threads) else {
            return;
        };
        let (samples, verdict) = self.gangs.entry(gang).or_insert_with(|| {
            let s = CpiSamples::new();
            let v = s.verdict(DEFAULT_ALPHA, DEFAULT_MIN_RATIO);
            (s, v)
        });
        let taken = match share {
            Share::All => samples.push_all(cpi),
            Share::Partial => samples.push_partial(cpi),
        };
        if taken {
            *verdict = samples.verdict(DEFAULT_ALPHA, DEFAULT_MIN_RATIO);
        }
    }

    /// The verdict on `gang`, if it was ever sampled.
    pub fn verdict(&self, gang: GangId) -> Option<&Verdict> {
        self.gangs.get(&gang).map(|(_, v)| v)
    }

    /// Forgets gangs that are gone.
    pub fn retain(&mut self, alive: impl Fn(GangId) -> bool) {
        self.gangs.retain(|g, _| alive(*g));
    }
}

/// A verdict in words, for `scx_sky gangs`.
pub fn describe(v: &Verdict) -> String {
    match v {
        Verdict::Insufficient {
            all,
            partial,
            needed,
        } => format!(
            "CPI test: {all} All-share and {partial} Partial-share samples, {needed} each needed"
        ),
        Verdict::MemoryBound(e) | Verdict::NotMemoryBound(e) => format!(
            "CPI test: median CPI {:.2}x spread out, p = {:.2e} (U test, {} All-share and {} \
             Partial-share samples)",
            e.median_ratio, e.p_value, e.n_all, e.n_partial
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Rng;

    fn t(cycles: u64, instructions: u64, domain: u32) -> ThreadPeriod {
        ThreadPeriod {
            cycles,
            instructions,
            domain: Some(DomainId(domain)),
        }
    }

    #[test]
    fn a_sample_needs_two_counted_threads_known_domains_and_enough_work() {
        assert_eq!(sample(&[t(10_000_000, 2_000_000, 0)]), None);
        assert_eq!(
            sample(&[t(1_000_000, 1_000_000, 0), t(1_000_000, 0, 1)]),
            None,
            "the idle thread is not counted, one thread is left"
        );
        assert_eq!(sample(&[t(1000, 400_000, 0), t(1000, 400_000, 0)]), None);
        let mut unknown = t(1_000_000, 1_000_000, 0);
        unknown.domain = None;
        assert_eq!(sample(&[unknown, t(1_000_000, 1_000_000, 0)]), None);
        assert_eq!(
            sample(&[t(1_000_000, 2_000_000, 0), t(2_000_000, 2_000_000, 0)]),
            Some((Share::All, 0.75))
        );
        assert_eq!(
            sample(&[t(6_000_000, 2_000_000, 0), t(2_000_000, 2_000_000, 1)]),
            Some((Share::Partial, 2.0))
        );
    }

    /// A gang of three threads, `periods` periods, every third one spread
    /// over two domains; CPI from `cpi(share)` with 20 % noise.
    fn run(d: &mut Detector, gang: GangId, periods: usize, cpi: impl Fn(Share) -> f64) {
        let mut rng = Rng::new(3);
        for p in 0..periods {
            let share = if p % 3 == 0 {
                Share::Partial
            } else {
                Share::All
            };
            let threads: Vec<ThreadPeriod> = (0..3)
                .map(|i| {
                    let c = cpi(share) * (0.9 + 0.2 * rng.uniform());
                    let instructions = 10_000_000;
                    let domain = if share == Share::Partial && i == 2 {
                        1
                    } else {
                        0
                    };
                    t((c * instructions as f64) as u64, instructions, domain)
                })
                .collect();
            d.observe(gang, &threads);
        }
    }

    #[test]
    fn a_gang_whose_cpi_jumps_when_spread_is_memory_bound_others_are_not() {
        let mut d = Detector::default();
        let (mb, cpu) = (GangId(1), GangId(2));
        // The paper's figures: CPI ~0.5 together, ~3.2 spread out.
        run(&mut d, mb, 90, |s| if s == Share::All { 0.5 } else { 3.2 });
        run(&mut d, cpu, 90, |_| 1.0);
        let v = d.verdict(mb).unwrap();
        assert!(v.is_memory_bound(), "{v:?}");
        assert!(
            describe(v).contains("30 Partial-share samples"),
            "{}",
            describe(v)
        );
        assert!(!d.verdict(cpu).unwrap().is_memory_bound());
        // Too few spread-out samples yet: no verdict either way.
        let mut early = Detector::default();
        run(
            &mut early,
            mb,
            30,
            |s| if s == Share::All { 0.5 } else { 3.2 },
        );
        let v = early.verdict(mb).unwrap();
        assert!(
            matches!(v, Verdict::Insufficient { partial: 10, .. }),
            "{v:?}"
        );
        assert!(describe(v).contains("20 each needed"), "{}", describe(v));
        d.retain(|g| g == cpu);
        assert!(d.verdict(mb).is_none() && d.verdict(cpu).is_some());
    }
}
