//! Scheduling policies as data. A policy is a TOML file setting the knobs
//! the BPF side reads (declared once in knobs.rs; `struct sky_config` in
//! bpf/intf.h); the presets in `scheds/` are compiled in, a name is looked
//! up in the policy directories first (lookup.rs), and any file can be
//! loaded by path.
//! Loading validates everything, including the promise the knobs together
//! make: that no task waits much past `starve_ms`.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sky_classify::{Hints, RuleSpec, Thresholds};
use sky_gangs::rules::{GangRuleSpec, GangRules};
use sky_topology::DecayThresholds;
use std::path::Path;

mod file;
mod knobs;
pub mod lookup;
pub use file::{read_policy_file, MAX_POLICY_FILE_BYTES};
use knobs::PolicyFile;
pub use knobs::{knob_table, knobs_doc, to_bpf, KnobValue, Knobs, Overrides};

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
    Sleep = 0,
    /// By how much other tasks ran on its CPU and cache domain since.
    Pressure = 1,
}

/// A policy: its name, its knobs and its rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub name: String,
    pub description: String,
    /// Every knob (knobs.rs), the defaults where the file left one out.
    pub knobs: Knobs,
    /// Where task classes begin and end (`[classify]`; defaults if left
    /// out).
    pub classify: Thresholds,
    /// Class hints (`[[class_rule]]` tables), tried after the command
    /// line's `--class` rules.
    pub class_rule: Vec<RuleSpec>,
    /// Gang rules (`[[gang_rule]]` tables), tried after the command
    /// line's `--gang` rules.
    pub gang_rule: Vec<GangRuleSpec>,
}

/// A policy resolved for this machine: every knob set (derived ones
/// filled in), and what BPF needs beside the knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Resolved {
    #[serde(flatten)]
    pub knobs: Knobs,
    /// How long a task waits for its busy CPU before any idle CPU may take
    /// it whatever the loads say: PATIENCE_SLICES slices.
    pub patience_us: u64,
    /// What a running CPU pulls into its caches per ms (--cache-fill-mbps).
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
        let file: PolicyFile =
            toml::from_str(text).with_context(|| format!("policy {origin} is not valid"))?;
        let policy = Policy {
            knobs: file.knobs(),
            name: file.name,
            description: file.description,
            classify: file.classify,
            class_rule: file.class_rule,
            gang_rule: file.gang_rule,
        };
        policy
            .validate()
            .with_context(|| format!("policy {origin} is not valid"))?;
        Ok(policy)
    }

    /// A policy file by path ([`names_a_file`]), or a name looked up in
    /// the policy directories, then among the presets ([`lookup`]).
    pub fn load(name_or_path: &str) -> Result<Self> {
        Self::load_from(name_or_path, &lookup::policy_dirs())
    }

    /// [`Policy::load`] with these policy directories.
    pub fn load_from(name_or_path: &str, dirs: &[std::path::PathBuf]) -> Result<Self> {
        if names_a_file(name_or_path) {
            let path = Path::new(name_or_path);
            let text = read_policy_file(path)?;
            return Self::parse(&text, &path.display().to_string());
        }
        match lookup::find(name_or_path, dirs) {
            Some(origin) => lookup::load(&origin, name_or_path),
            None => bail!("{}", unknown(name_or_path, dirs)),
        }
    }

    fn validate(&self) -> Result<()> {
        check_name(&self.name)?;
        validate_knobs(&self.knobs)?;
        self.classify.validate()?;
        Hints::new(&[], &self.class_rule)?;
        GangRules::new(&[], &self.gang_rule)?;
        Ok(())
    }

    /// Applies overrides and fills derived thresholds where the policy
    /// leaves them out.
    pub fn resolve(&self, over: &Overrides, derived: &DecayThresholds) -> Result<Resolved> {
        let mut k = self.knobs.overridden(over);
        k.slice_min_us = k.slice_min_us.min(k.slice_us);
        validate_knobs(&k).context("command-line override")?;
        // What the policy leaves out, from the slice and the caches.
        k.gang_spill_us = k.gang_spill_us.or(Some(patience_us(&k)));
        k.decay_core_us = k.decay_core_us.or(Some((derived.core_ns / 1000).max(1)));
        k.decay_llc_us = k.decay_llc_us.or(Some((derived.llc_ns / 1000).max(1)));
        k.decay_core_kb = k.decay_core_kb.or(Some((derived.core_bytes >> 10).max(1)));
        k.decay_llc_kb = k.decay_llc_kb.or(Some((derived.llc_bytes >> 10).max(1)));
        if k.decay_core_us > k.decay_llc_us {
            bail!(
                "decay_core_us ({}) must not exceed decay_llc_us ({}): the LLC outlives the core cache",
                k.decay_core_us.unwrap_or(0),
                k.decay_llc_us.unwrap_or(0)
            );
        }
        if k.decay_core_kb > k.decay_llc_kb {
            bail!(
                "decay_core_kb ({}) must not exceed decay_llc_kb ({}): the LLC holds more",
                k.decay_core_kb.unwrap_or(0),
                k.decay_llc_kb.unwrap_or(0)
            );
        }
        Ok(Resolved {
            knobs: k,
            patience_us: patience_us(&k),
            fill_bytes_per_ms: (derived.fill_bytes_per_sec / 1000).max(1),
        })
    }
}

/// Each knob's range, then the rules between knobs.
fn validate_knobs(k: &Knobs) -> Result<()> {
    k.check_ranges()?;
    if k.slice_min_us > k.slice_us {
        bail!(
            "slice_min_us = {} must not exceed slice_us = {}",
            k.slice_min_us,
            k.slice_us
        );
    }
    if k.latency_burst_us > k.slice_us {
        bail!(
            "latency_burst_us = {} must not exceed slice_us = {}: a task that runs a \
             whole slice per wakeup is not short",
            k.latency_burst_us,
            k.slice_us
        );
    }
    check_wait_bound(k)?;
    check_gang_spill(k)
}

/// How long affinity holds a waiting task at most once its grace is
/// over, whatever the loads say (`Resolved::patience_us`).
fn patience_us(k: &Knobs) -> u64 {
    PATIENCE_SLICES * k.slice_us
}

/// A gang thread must be free to spill before the starvation rescue
/// takes it: else the rescue, not the spill, would bound its wait, and
/// a rescued task goes to whichever CPU asks first.
fn check_gang_spill(k: &Knobs) -> Result<()> {
    let rescue_us = k.starve_ms * 1000 * RESCUE_AFTER_EIGHTHS / 8;
    let spill_us = k.gang_spill_us.unwrap_or_else(|| patience_us(k));
    if spill_us >= rescue_us {
        bail!(
            "gang_spill_us = {spill_us} must be below {RESCUE_AFTER_EIGHTHS}/8 of starve_ms \
             ({rescue_us} us), when the starvation rescue takes a task{}",
            if k.gang_spill_us.is_none() {
                " (left out, it is 4 x slice_us; set it)"
            } else {
                ""
            }
        );
    }
    Ok(())
}

/// The starvation rescue takes a task that waited RESCUE_AFTER_EIGHTHS
/// of starve_ms. Affinity must have let go of it before then: an idle
/// CPU may take a warm task after its grace, and any waiting task
/// after the patience. If the rescue came first, it would be the normal
/// path, not a bound, and affinity would never be given up in time.
fn check_wait_bound(k: &Knobs) -> Result<()> {
    let affinity_us = patience_us(k) + k.affinity_grace_us;
    let rescue_us = k.starve_ms * 1000 * RESCUE_AFTER_EIGHTHS / 8;
    if rescue_us <= affinity_us {
        bail!(
            "starve_ms = {} breaks the wait bound: affinity may hold a task for \
             {PATIENCE_SLICES} x slice_us + affinity_grace_us = {} us and the rescue \
             takes it at {RESCUE_AFTER_EIGHTHS}/8 of starve_ms, so starve_ms must be \
             at least {} ms",
            k.starve_ms,
            affinity_us,
            affinity_us * 8 / RESCUE_AFTER_EIGHTHS / 1000 + 1
        );
    }
    Ok(())
}

impl Resolved {
    /// Every knob as `name = value` lines (TOML, as a policy file writes
    /// them), then what is derived from them, for `scx_sky policy get`.
    pub fn describe(&self) -> String {
        toml::to_string(self).unwrap_or_else(|e| format!("# cannot show the knobs: {e}\n"))
    }
}

/// Does this policy argument name a file (anything with a `/` or ending
/// in `.toml`) rather than a preset?
pub fn names_a_file(name_or_path: &str) -> bool {
    name_or_path.contains('/') || name_or_path.ends_with(".toml")
}

/// "unknown policy NAME; known: ..." for a name nothing answers to.
pub fn unknown(name: &str, dirs: &[std::path::PathBuf]) -> String {
    let known: Vec<String> = lookup::names(dirs).into_iter().map(|(n, _)| n).collect();
    format!(
        "unknown policy {name:?}: no {name}.toml in {} and no preset of that name; known: {}",
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        known.join(", ")
    )
}

pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|(name, _)| *name).collect()
}

#[cfg(test)]
mod tests;
