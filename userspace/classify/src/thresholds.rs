//! Where one class ends and another begins: every boundary has an enter
//! value and a looser leave value, so a task near a boundary does not
//! flap, and a new class must hold for `dwell_periods` periods in a row.
//! Policy files carry these under `[classify]`.

use crate::counters::Features;
use anyhow::{bail, Result};
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    /// pm-writer: share of cycles stalled at least this to enter...
    pub pm_stall_enter: f64,
    /// ...and to stay.
    pub pm_stall_leave: f64,
    /// pm-writer: stores per thousand instructions, to enter and to stay.
    pub pm_stores_pki_enter: f64,
    pub pm_stores_pki_leave: f64,
    /// memory-bound: LLC misses per thousand instructions, enter and stay.
    pub memory_mpki_enter: f64,
    pub memory_mpki_leave: f64,
    /// compute, on CPUs that count only cycles and instructions: cycles
    /// per instruction at most this to enter...
    pub compute_cpi_enter: f64,
    /// ...and to stay.
    pub compute_cpi_leave: f64,
    /// Periods in a row a new class must hold before the task takes it.
    pub dwell_periods: u32,
    /// A period with fewer instructions than this says nothing.
    pub min_instructions: u64,
}

impl Default for Thresholds {
    /// Starting points from the paper's two kinds of task (seed 000, docs/seeds.md):
    /// a PM writer's 256 B stores and flushes stall most of its cycles; an
    /// integer-division loop retires an instruction every cycle or two and
    /// touches no memory. Real workloads should be checked with
    /// `scx_sky classify --replay` on recorded counters.
    fn default() -> Self {
        Thresholds {
            pm_stall_enter: 0.40,
            pm_stall_leave: 0.30,
            pm_stores_pki_enter: 60.0,
            pm_stores_pki_leave: 40.0,
            memory_mpki_enter: 8.0,
            memory_mpki_leave: 5.0,
            compute_cpi_enter: 1.2,
            compute_cpi_leave: 1.6,
            dwell_periods: 3,
            min_instructions: 100_000,
        }
    }
}

/// Which side of a boundary a test is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Enter,
    Stay,
}

impl Thresholds {
    pub fn validate(&self) -> Result<()> {
        let shares = [
            ("pm_stall_enter", self.pm_stall_enter),
            ("pm_stall_leave", self.pm_stall_leave),
        ];
        for (field, v) in shares {
            if !(0.0..=1.0).contains(&v) {
                bail!("classify.{field} = {v} is a share of cycles: it must be within 0..=1");
            }
        }
        let positive = [
            ("pm_stores_pki_enter", self.pm_stores_pki_enter),
            ("pm_stores_pki_leave", self.pm_stores_pki_leave),
            ("memory_mpki_enter", self.memory_mpki_enter),
            ("memory_mpki_leave", self.memory_mpki_leave),
            ("compute_cpi_enter", self.compute_cpi_enter),
            ("compute_cpi_leave", self.compute_cpi_leave),
        ];
        for (field, v) in positive {
            if !v.is_finite() || v <= 0.0 {
                bail!("classify.{field} = {v} must be a positive number");
            }
        }
        // "At least" boundaries stay with less than they enter with,
        // "at most" ones with more; else the class would flap.
        let looser = [
            ("pm_stall", self.pm_stall_leave <= self.pm_stall_enter),
            (
                "pm_stores_pki",
                self.pm_stores_pki_leave <= self.pm_stores_pki_enter,
            ),
            (
                "memory_mpki",
                self.memory_mpki_leave <= self.memory_mpki_enter,
            ),
            (
                "compute_cpi",
                self.compute_cpi_leave >= self.compute_cpi_enter,
            ),
        ];
        for (field, ok) in looser {
            if !ok {
                bail!(
                    "classify.{field}_leave must be looser than classify.{field}_enter \
                     (a task must not leave a class on the values it entered it with)"
                );
            }
        }
        if self.dwell_periods == 0 {
            bail!("classify.dwell_periods must be at least 1");
        }
        Ok(())
    }

    fn pick(side: Side, enter: f64, leave: f64) -> f64 {
        match side {
            Side::Enter => enter,
            Side::Stay => leave,
        }
    }

    /// Stalls on many stores: writing to (persistent) memory. Needs both
    /// the stall and the store counts.
    pub fn is_pm_writer(&self, f: &Features, side: Side) -> bool {
        let stall = Self::pick(side, self.pm_stall_enter, self.pm_stall_leave);
        let stores = Self::pick(side, self.pm_stores_pki_enter, self.pm_stores_pki_leave);
        matches!((f.stall_share, f.stores_pki), (Some(s), Some(w)) if s >= stall && w >= stores)
    }

    /// Misses the last-level cache often (and is no PM writer).
    pub fn is_memory_bound(&self, f: &Features, side: Side) -> bool {
        let mpki = Self::pick(side, self.memory_mpki_enter, self.memory_mpki_leave);
        matches!(f.llc_mpki, Some(m) if m >= mpki)
    }

    /// Busy without memory traffic: misses the LLC rarely. Not judged by
    /// stalls or stores: an integer-division loop (the paper's compute
    /// task) stalls on its divider, and a matrix multiply stores into
    /// cache at a high rate. Where the CPU counts no LLC misses, a low
    /// CPI stands in.
    pub fn is_compute(&self, f: &Features, side: Side) -> bool {
        match f.llc_mpki {
            // Below memory-bound's leave value to enter, its enter value to stay.
            Some(m) => m < Self::pick(side, self.memory_mpki_leave, self.memory_mpki_enter),
            None => f.cpi <= Self::pick(side, self.compute_cpi_enter, self.compute_cpi_leave),
        }
    }
}
