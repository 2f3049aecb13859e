//! Scheduling policies as data. A policy is a TOML file naming every knob
//! the BPF side reads (see `struct sky_config` in bpf/intf.h); the presets
//! in `scheds/` are compiled in, and any file can be loaded by path.
//! Loading validates everything, including the promise the knobs together
//! make: that no task waits much past `starve_ms`.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sky_classify::{Hints, RuleSpec, Thresholds};
use sky_gangs::rules::{GangRuleSpec, GangRules};
use sky_topology::DecayThresholds;
use std::path::Path;

mod file;
pub use file::{read_policy_file, MAX_POLICY_FILE_BYTES};

/// The presets shipped in `scheds/`, by name.
pub const PRESETS: [(&str, &str); 3] = [
    ("sky1", include_str!("../../../scheds/sky1.toml")),
    (
        "sky1-strict",
        include_str!("../../../scheds/sky1-strict.toml"),
    ),
    ("vtime", include_str!("../../../scheds/vtime.toml")),
];

/// How a task's cache footprint is judged cold (`enum sky_decay_rule`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DecayRule {
    /// SKY-1 as published: by how long the task slept.
    Sleep,
    /// By how much other tasks ran on its CPU and cache domain since.
    Pressure,
}

/// A policy as written in a `scheds/*.toml` file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    pub name: String,
    pub description: String,
    /// SKY-1 last-CPU affinity on (true) or plain vtime (false).
    pub affinity: bool,
    #[serde(default = "default_decay")]
    pub decay: DecayRule,
    pub walk_depth: u32,
    pub slice_us: u64,
    #[serde(default = "default_slice_min_us")]
    pub slice_min_us: u64,
    pub affinity_grace_us: u64,
    pub sleeper_credit_us: u64,
    pub starve_ms: u64,
    /// A synchronous wakeup may run on the waker's CPU.
    #[serde(default = "default_wake_sync")]
    pub wake_sync: bool,
    /// SMT pairing: PM writers beside compute tasks (needs classes and a
    /// machine with SMT; does nothing otherwise).
    #[serde(default = "default_smt_pairing")]
    pub smt_pairing: bool,
    /// Shared-cache gangs: each memory-bound gang's threads run in one
    /// cache domain, one gang per domain while domains are spare.
    #[serde(default = "default_gangs")]
    pub gangs: bool,
    /// How long a gang thread waits for a CPU at home before another
    /// domain may take it (default: the patience, 4 slices).
    pub gang_spill_us: Option<u64>,
    /// The latency path: a task whose runs per wakeup stay under this is
    /// short (sorts ahead, claims idle CPUs near, may preempt); 0 is off.
    #[serde(default = "default_latency_burst_us")]
    pub latency_burst_us: u64,
    /// How long a task runs before a short wakee may preempt it.
    #[serde(default = "default_latency_min_run_us")]
    pub latency_min_run_us: u64,
    /// Left out: derived from cache sizes.
    pub decay_core_us: Option<u64>,
    pub decay_llc_us: Option<u64>,
    pub decay_core_kb: Option<u64>,
    pub decay_llc_kb: Option<u64>,
    /// Where task classes begin and end (`[classify]`; defaults if left
    /// out).
    #[serde(default)]
    pub classify: Thresholds,
    /// Class hints (`[[class_rule]]` tables), tried after the command
    /// line's `--class` rules.
    #[serde(default)]
    pub class_rule: Vec<RuleSpec>,
    /// Gang rules (`[[gang_rule]]` tables), tried after the command
    /// line's `--gang` rules.
    #[serde(default)]
    pub gang_rule: Vec<GangRuleSpec>,
}

fn default_decay() -> DecayRule {
    DecayRule::Pressure
}
fn default_slice_min_us() -> u64 {
    250
}
fn default_wake_sync() -> bool {
    true
}
fn default_smt_pairing() -> bool {
    true
}
fn default_gangs() -> bool {
    true
}
fn default_latency_burst_us() -> u64 {
    500
}
fn default_latency_min_run_us() -> u64 {
    500
}

/// Command-line overrides; `None` keeps the policy's value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overrides {
    pub decay: Option<DecayRule>,
    pub walk_depth: Option<u32>,
    pub slice_us: Option<u64>,
    pub affinity_grace_us: Option<u64>,
    pub starve_ms: Option<u64>,
    pub smt_pairing: Option<bool>,
    pub gangs: Option<bool>,
    pub latency_burst_us: Option<u64>,
    pub latency_min_run_us: Option<u64>,
    pub decay_core_us: Option<u64>,
    pub decay_llc_us: Option<u64>,
}

/// Every knob resolved to the units BPF uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Knobs {
    pub affinity: bool,
    pub decay: DecayRule,
    pub walk_depth: u32,
    pub wake_sync: bool,
    pub smt_pairing: bool,
    pub gangs: bool,
    pub slice_ns: u64,
    pub slice_min_ns: u64,
    pub affinity_grace_ns: u64,
    /// How long a task waits for its busy CPU before any idle CPU may take
    /// it whatever the loads say: PATIENCE_SLICES slices.
    pub patience_ns: u64,
    /// How long a gang thread waits at home before it may spill.
    pub gang_spill_ns: u64,
    pub sleeper_credit_ns: u64,
    pub starve_ns: u64,
    pub latency_burst_ns: u64,
    pub latency_min_run_ns: u64,
    pub decay_core_ns: u64,
    pub decay_llc_ns: u64,
    pub decay_core_bytes: u64,
    pub decay_llc_bytes: u64,
    pub fill_bytes_per_ms: u64,
}

/// How many slices a task waits for its busy CPU before any idle CPU may
/// take it whatever the loads say (its CPU is busy with something long: a
/// hog whose slices keep being renewed, a task of a higher scheduling
/// class, a CPU going offline).
pub const PATIENCE_SLICES: u64 = 4;

/// The starvation rescue (bpf/bound.bpf.h) takes a task that has waited
/// this many eighths of starve_ms: two scan periods (starve_ms / 8 each)
/// early, so that a scan one period late and a CPU slow to answer its kick
/// still run the task by starve_ms.
pub const RESCUE_AFTER_EIGHTHS: u64 = 6;

/// Limits a knob must respect; outside them the scheduler would misbehave
/// (a zero slice never runs anything, a huge one turns off preemption).
const WALK_DEPTH: (u64, u64) = (1, 32);
const SLICE_US: (u64, u64) = (100, 100_000);
const SLICE_MIN_US: (u64, u64) = (50, 100_000);
const AFFINITY_GRACE_US: (u64, u64) = (0, 100_000);
const SLEEPER_CREDIT_US: (u64, u64) = (0, 1_000_000);
/// 0 is off; a burst limit over a slice would call a hog short.
const LATENCY_BURST_US: (u64, u64) = (0, 100_000);
/// Below 50 us a hog could be preempted faster than it can do any work.
const LATENCY_MIN_RUN_US: (u64, u64) = (50, 100_000);
/// The rescue scans every starve_ms / 8: below 10 ms that is more often
/// than every 1.25 ms, timer and scan overhead for no gain.
const STARVE_MS: (u64, u64) = (10, 10_000);
const DECAY_US: (u64, u64) = (1, 10_000_000);
const DECAY_KB: (u64, u64) = (1, 1 << 30);

/// The longest policy name.
const NAME_MAX: usize = 64;

/// A policy's name is one word of a line-based protocol (`policy=NAME
/// generation=N` on the control socket and the stats line): a space or a
/// newline in it would split or forge that line.
fn check_name(name: &str) -> Result<()> {
    let plain = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    if name.is_empty() || name.len() > NAME_MAX || !name.bytes().all(plain) {
        bail!(
            "name = {name:?} is not allowed: a name is 1 to {NAME_MAX} characters, \
             each a letter A-Z or a-z, a digit, '.', '_' or '-'"
        );
    }
    Ok(())
}

fn check(field: &str, value: u64, (lo, hi): (u64, u64)) -> Result<()> {
    if value < lo || value > hi {
        bail!("{field} = {value} is outside {lo}..={hi}");
    }
    Ok(())
}

impl Policy {
    /// Parses and validates policy text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        let policy: Policy =
            toml::from_str(text).with_context(|| format!("policy {origin} is not valid"))?;
        policy
            .validate()
            .with_context(|| format!("policy {origin} is not valid"))?;
        Ok(policy)
    }

    /// A preset by name, or a policy file by path ([`names_a_file`]).
    pub fn load(name_or_path: &str) -> Result<Self> {
        if names_a_file(name_or_path) {
            let path = Path::new(name_or_path);
            let text = read_policy_file(path)?;
            return Self::parse(&text, &path.display().to_string());
        }
        match PRESETS.iter().find(|(name, _)| *name == name_or_path) {
            Some((name, text)) => Self::parse(text, &format!("preset {name}")),
            None => bail!(
                "unknown policy {name_or_path:?}; presets: {}",
                preset_names().join(", ")
            ),
        }
    }

    fn validate(&self) -> Result<()> {
        check_name(&self.name)?;
        check("walk_depth", self.walk_depth.into(), WALK_DEPTH)?;
        check("slice_us", self.slice_us, SLICE_US)?;
        check("slice_min_us", self.slice_min_us, SLICE_MIN_US)?;
        if self.slice_min_us > self.slice_us {
            bail!(
                "slice_min_us = {} must not exceed slice_us = {}",
                self.slice_min_us,
                self.slice_us
            );
        }
        check(
            "sleeper_credit_us",
            self.sleeper_credit_us,
            SLEEPER_CREDIT_US,
        )?;
        check("starve_ms", self.starve_ms, STARVE_MS)?;
        check(
            "affinity_grace_us",
            self.affinity_grace_us,
            AFFINITY_GRACE_US,
        )?;
        check("latency_burst_us", self.latency_burst_us, LATENCY_BURST_US)?;
        if self.latency_burst_us > self.slice_us {
            bail!(
                "latency_burst_us = {} must not exceed slice_us = {}: a task that runs a \
                 whole slice per wakeup is not short",
                self.latency_burst_us,
                self.slice_us
            );
        }
        check(
            "latency_min_run_us",
            self.latency_min_run_us,
            LATENCY_MIN_RUN_US,
        )?;
        self.check_wait_bound()?;
        self.check_gang_spill()?;
        self.classify.validate()?;
        Hints::new(&[], &self.class_rule)?;
        GangRules::new(&[], &self.gang_rule)?;
        for (field, value, range) in [
            ("decay_core_us", self.decay_core_us, DECAY_US),
            ("decay_llc_us", self.decay_llc_us, DECAY_US),
            ("decay_core_kb", self.decay_core_kb, DECAY_KB),
            ("decay_llc_kb", self.decay_llc_kb, DECAY_KB),
        ] {
            if let Some(v) = value {
                check(field, v, range)?;
            }
        }
        Ok(())
    }

    /// The spill wait: what the policy says, else the patience.
    fn gang_spill_us(&self) -> u64 {
        self.gang_spill_us.unwrap_or_else(|| self.patience_us())
    }

    /// A gang thread must be free to spill before the starvation rescue
    /// takes it: else the rescue, not the spill, would bound its wait, and
    /// a rescued task goes to whichever CPU asks first.
    fn check_gang_spill(&self) -> Result<()> {
        let rescue_us = self.starve_ms * 1000 * RESCUE_AFTER_EIGHTHS / 8;
        let spill_us = self.gang_spill_us();
        if spill_us >= rescue_us {
            bail!(
                "gang_spill_us = {spill_us} must be below {RESCUE_AFTER_EIGHTHS}/8 of starve_ms \
                 ({rescue_us} us), when the starvation rescue takes a task{}",
                if self.gang_spill_us.is_none() {
                    " (left out, it is 4 x slice_us; set it)"
                } else {
                    ""
                }
            );
        }
        Ok(())
    }

    /// How long affinity holds a waiting task at most once its grace is
    /// over, whatever the loads say (`Knobs::patience_ns`).
    fn patience_us(&self) -> u64 {
        PATIENCE_SLICES * self.slice_us
    }

    /// The starvation rescue takes a task that waited RESCUE_AFTER_EIGHTHS
    /// of starve_ms. Affinity must have let go of it before then: an idle
    /// CPU may take a warm task after its grace, and any waiting task
    /// after the patience. If the rescue came first, it would be the normal
    /// path, not a bound, and affinity would never be given up in time.
    fn check_wait_bound(&self) -> Result<()> {
        let affinity_us = self.patience_us() + self.affinity_grace_us;
        let rescue_us = self.starve_ms * 1000 * RESCUE_AFTER_EIGHTHS / 8;
        if rescue_us <= affinity_us {
            bail!(
                "starve_ms = {} breaks the wait bound: affinity may hold a task for \
                 {PATIENCE_SLICES} x slice_us + affinity_grace_us = {} us and the rescue \
                 takes it at {RESCUE_AFTER_EIGHTHS}/8 of starve_ms, so starve_ms must be \
                 at least {} ms",
                self.starve_ms,
                affinity_us,
                affinity_us * 8 / RESCUE_AFTER_EIGHTHS / 1000 + 1
            );
        }
        Ok(())
    }

    /// Applies overrides and fills derived thresholds where the policy
    /// leaves them out.
    pub fn resolve(&self, over: &Overrides, derived: &DecayThresholds) -> Result<Knobs> {
        let mut p = self.clone();
        p.decay = over.decay.unwrap_or(p.decay);
        p.walk_depth = over.walk_depth.unwrap_or(p.walk_depth);
        p.slice_us = over.slice_us.unwrap_or(p.slice_us);
        p.slice_min_us = p.slice_min_us.min(p.slice_us);
        p.affinity_grace_us = over.affinity_grace_us.unwrap_or(p.affinity_grace_us);
        p.starve_ms = over.starve_ms.unwrap_or(p.starve_ms);
        p.smt_pairing = over.smt_pairing.unwrap_or(p.smt_pairing);
        p.gangs = over.gangs.unwrap_or(p.gangs);
        p.latency_burst_us = over.latency_burst_us.unwrap_or(p.latency_burst_us);
        p.latency_min_run_us = over.latency_min_run_us.unwrap_or(p.latency_min_run_us);
        p.decay_core_us = over.decay_core_us.or(p.decay_core_us);
        p.decay_llc_us = over.decay_llc_us.or(p.decay_llc_us);
        p.validate().context("command-line override")?;

        let decay_core_ns = p.decay_core_us.map_or(derived.core_ns, |us| us * 1000);
        let decay_llc_ns = p.decay_llc_us.map_or(derived.llc_ns, |us| us * 1000);
        if decay_core_ns > decay_llc_ns {
            bail!(
                "decay_core ({} us) must not exceed decay_llc ({} us): the LLC outlives the core cache",
                decay_core_ns / 1000,
                decay_llc_ns / 1000
            );
        }
        let decay_core_bytes = p.decay_core_kb.map_or(derived.core_bytes, |kb| kb << 10);
        let decay_llc_bytes = p.decay_llc_kb.map_or(derived.llc_bytes, |kb| kb << 10);
        if decay_core_bytes > decay_llc_bytes {
            bail!(
                "decay_core_kb ({}) must not exceed decay_llc_kb ({}): the LLC holds more",
                decay_core_bytes >> 10,
                decay_llc_bytes >> 10
            );
        }
        Ok(Knobs {
            affinity: p.affinity,
            decay: p.decay,
            walk_depth: p.walk_depth,
            wake_sync: p.wake_sync,
            smt_pairing: p.smt_pairing,
            gangs: p.gangs,
            slice_ns: p.slice_us * 1000,
            slice_min_ns: p.slice_min_us * 1000,
            affinity_grace_ns: p.affinity_grace_us * 1000,
            patience_ns: p.patience_us() * 1000,
            gang_spill_ns: p.gang_spill_us() * 1000,
            sleeper_credit_ns: p.sleeper_credit_us * 1000,
            starve_ns: p.starve_ms * 1_000_000,
            latency_burst_ns: p.latency_burst_us * 1000,
            latency_min_run_ns: p.latency_min_run_us * 1000,
            decay_core_ns,
            decay_llc_ns,
            decay_core_bytes,
            decay_llc_bytes,
            fill_bytes_per_ms: (derived.fill_bytes_per_sec / 1000).max(1),
        })
    }
}

impl Knobs {
    /// Every knob as `name = value` lines (TOML), for `scx_sky policy get`.
    pub fn describe(&self) -> String {
        toml::to_string(self).unwrap_or_else(|e| format!("# cannot show the knobs: {e}\n"))
    }
}

/// Does this policy argument name a file (anything with a `/` or ending
/// in `.toml`) rather than a preset?
pub fn names_a_file(name_or_path: &str) -> bool {
    name_or_path.contains('/') || name_or_path.ends_with(".toml")
}

impl Policy {
    /// `NAME  description`: one line of a policy list.
    pub fn listing(&self) -> String {
        format!("{:<12} {}", self.name, self.description)
    }
}

pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|(name, _)| *name).collect()
}

#[cfg(test)]
mod tests;
