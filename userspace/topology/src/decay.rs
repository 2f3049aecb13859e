//! SKY-1 decay thresholds: when the data a task left in a cache has most
//! likely been overwritten. Two forms, one per decay rule:
//!
//! - by pressure (bytes): the cache is gone once others pulled in as much
//!   as it holds. A CPU's share of its core cache (size / SMT threads) for
//!   the core level, the whole LLC for the domain level.
//! - by sleep time: a cache of S bytes shared by N CPUs, each streaming new
//!   data into it at F bytes/s, loses its old contents after about
//!   S / (N x F) seconds.
//!
//! F defaults to 1 GB/s per CPU, a middle ground between compute-bound
//! loops (far less) and streaming code (far more); `--cache-fill-mbps`
//! overrides it. The pressure rule uses F too, to turn run time into bytes
//! until a PMU measures them.

use crate::Topology;

pub const DEFAULT_FILL_BYTES_PER_SEC: u64 = 1_000_000_000;

/// Bounds that keep a derived threshold meaningful: below the minimum a task
/// would never count as warm, above the maximum never as cold.
const MIN_DECAY_NS: u64 = 50_000;
const MAX_DECAY_NS: u64 = 1_000_000_000;
const MIN_DECAY_BYTES: u64 = 16 << 10;
/// Used when sysfs describes no caches at all.
const FALLBACK_CORE_NS: u64 = 500_000;
const FALLBACK_LLC_NS: u64 = 2_000_000;
const FALLBACK_CORE_BYTES: u64 = 512 << 10;
const FALLBACK_LLC_BYTES: u64 = 2 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecayThresholds {
    /// Off-CPU time after which the core-private cache (L2) is cold.
    pub core_ns: u64,
    /// Off-CPU time after which the last-level cache is cold.
    pub llc_ns: u64,
    /// Bytes others pull into a CPU before its share of the core cache is cold.
    pub core_bytes: u64,
    /// Bytes others pull into a domain before its LLC is cold.
    pub llc_bytes: u64,
    /// The fill rate both forms were derived with.
    pub fill_bytes_per_sec: u64,
}

fn refill_ns(size_bytes: u64, sharers: usize, fill_bytes_per_sec: u64) -> u64 {
    let rate = (sharers.max(1) as u128) * (fill_bytes_per_sec.max(1) as u128);
    let ns = (size_bytes as u128) * 1_000_000_000 / rate;
    (ns.min(u64::MAX as u128) as u64).clamp(MIN_DECAY_NS, MAX_DECAY_NS)
}

impl DecayThresholds {
    /// Derives the thresholds from the smallest caches on the machine, so
    /// the estimate errs towards "cold" (a needless move is cheaper than an
    /// idle CPU).
    pub fn derive(topo: &Topology, fill_bytes_per_sec: u64) -> Self {
        let core: Vec<(u64, usize)> = topo
            .online_cpus()
            .filter_map(|c| c.core_cache.as_ref())
            .map(|c| (c.size_bytes, c.shared_cpus.len().max(1)))
            .collect();
        let core_ns = core
            .iter()
            .map(|&(size, n)| refill_ns(size, n, fill_bytes_per_sec))
            .min();
        let core_bytes = core.iter().map(|&(size, n)| size / n as u64).min();
        let llc_ns = topo
            .llcs
            .iter()
            .filter_map(|d| {
                d.size_bytes
                    .map(|s| refill_ns(s, d.cpus.len(), fill_bytes_per_sec))
            })
            .min();
        let llc_bytes = topo.llcs.iter().filter_map(|d| d.size_bytes).min();

        let core_ns = core_ns.or(llc_ns).unwrap_or(FALLBACK_CORE_NS);
        let llc_ns = llc_ns.unwrap_or(FALLBACK_LLC_NS).max(core_ns);
        let core_bytes = core_bytes
            .unwrap_or(FALLBACK_CORE_BYTES)
            .max(MIN_DECAY_BYTES);
        let llc_bytes = llc_bytes.unwrap_or(FALLBACK_LLC_BYTES).max(core_bytes);
        DecayThresholds {
            core_ns,
            llc_ns,
            core_bytes,
            llc_bytes,
            fill_bytes_per_sec,
        }
    }
}
