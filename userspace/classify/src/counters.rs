//! Per-task counter deltas over one period, and the features classes are
//! judged by.

use crate::pmu::Counter;
use std::collections::HashMap;
use std::fmt;

/// What the PMU counted while one task ran during one period. Events the
/// CPU does not offer are `None`: features that need them are unknown,
/// never guessed.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    pub cycles: u64,
    pub instructions: u64,
    pub llc_misses: Option<u64>,
    /// Cycles the back end stalled (memory or resources), where offered.
    pub stall_cycles: Option<u64>,
    /// Retired stores, where offered.
    pub stores: Option<u64>,
}

impl Counters {
    /// Scales counts read from a multiplexed event: it counted only for
    /// `running` of the `enabled` nanoseconds, so the counts are
    /// extrapolated by `enabled / running` (as perf does). Nothing counted
    /// (`running == 0`) gives zeros.
    pub fn scaled(self, enabled_ns: u64, running_ns: u64) -> Counters {
        if running_ns == 0 {
            return Counters::default();
        }
        if running_ns >= enabled_ns {
            return self;
        }
        let scale = |v: u64| {
            u64::try_from(v as u128 * enabled_ns as u128 / running_ns as u128).unwrap_or(u64::MAX)
        };
        Counters {
            cycles: scale(self.cycles),
            instructions: scale(self.instructions),
            llc_misses: self.llc_misses.map(scale),
            stall_cycles: self.stall_cycles.map(scale),
            stores: self.stores.map(scale),
        }
    }

    /// The features of this period, or `None` if the task hardly ran (too
    /// few instructions for ratios to mean anything).
    pub fn features(&self, min_instructions: u64) -> Option<Features> {
        if self.instructions < min_instructions.max(1) || self.cycles == 0 {
            return None;
        }
        let per_ki = |v: u64| v as f64 * 1000.0 / self.instructions as f64;
        Some(Features {
            cpi: self.cycles as f64 / self.instructions as f64,
            llc_mpki: self.llc_misses.map(per_ki),
            stall_share: self
                .stall_cycles
                .map(|s| (s as f64 / self.cycles as f64).min(1.0)),
            stores_pki: self.stores.map(per_ki),
        })
    }
}

/// Turns the running sums BPF keeps per task (bpf/pmu.bpf.h, by counter
/// slot) into what each task counted since the last look.
#[derive(Debug, Clone, Default)]
pub struct Deltas {
    /// Thread ID -> (its start time, the sums at the last look).
    last: HashMap<u32, (u64, [u64; Counter::COUNT])>,
}

impl Deltas {
    /// What `tid` counted since the last look; `open[slot]` says which
    /// slots are counted at all (the others are `None`, not 0). A thread
    /// seen for the first time, or whose ID now belongs to a new thread
    /// (another start time), counted all of its sums; a sum that went
    /// backwards (BPF restarted it) counts from 0.
    pub fn take(
        &mut self,
        tid: u32,
        start_time: u64,
        sums: [u64; Counter::COUNT],
        open: [bool; Counter::COUNT],
    ) -> Counters {
        let before = match self.last.insert(tid, (start_time, sums)) {
            Some((start, before)) if start == start_time => before,
            _ => [0; Counter::COUNT],
        };
        let d: Vec<u64> = sums
            .iter()
            .zip(before)
            .map(|(now, was)| now.checked_sub(was).unwrap_or(*now))
            .collect();
        let slot = |i: usize| open[i].then_some(d[i]);
        Counters {
            cycles: d[0],
            instructions: d[1],
            llc_misses: slot(2),
            stall_cycles: slot(3),
            stores: slot(4),
        }
    }

    pub fn forget(&mut self, tid: u32) {
        self.last.remove(&tid);
    }
}

/// Ratios that tell the classes apart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Features {
    /// Cycles per instruction.
    pub cpi: f64,
    /// Last-level cache misses per thousand instructions.
    pub llc_mpki: Option<f64>,
    /// Share of cycles the back end stalled (0..=1).
    pub stall_share: Option<f64>,
    /// Stores per thousand instructions.
    pub stores_pki: Option<f64>,
}

impl fmt::Display for Features {
    /// `cpi=1.02 llc_mpki=0.3 stall=- stores_pki=-` (`-`: not counted).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opt =
            |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
        write!(
            f,
            "cpi={:.2} llc_mpki={} stall={} stores_pki={}",
            self.cpi,
            opt(self.llc_mpki, 1),
            opt(self.stall_share, 2),
            opt(self.stores_pki, 1)
        )
    }
}
