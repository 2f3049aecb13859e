//! Scheduling policies as data. A policy is a TOML file naming every knob
//! the BPF side reads (see `struct sky_config` in bpf/intf.h); the presets
//! in `scheds/` are compiled in, and any file can be loaded by path.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::Path;

/// The presets shipped in `scheds/`, by name.
pub const PRESETS: [(&str, &str); 3] = [
    ("sky1", include_str!("../../../scheds/sky1.toml")),
    (
        "sky1-strict",
        include_str!("../../../scheds/sky1-strict.toml"),
    ),
    ("vtime", include_str!("../../../scheds/vtime.toml")),
];

/// A policy as written in a `scheds/*.toml` file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    pub name: String,
    pub description: String,
    /// SKY-1 last-CPU affinity on (true) or plain vtime (false).
    pub affinity: bool,
    pub walk_depth: u32,
    pub slice_us: u64,
    pub affinity_grace_us: u64,
    pub sleeper_credit_us: u64,
    pub starve_ms: u64,
    /// Left out: derived from cache sizes.
    pub decay_core_us: Option<u64>,
    pub decay_llc_us: Option<u64>,
}

/// Command-line overrides; `None` keeps the policy's value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overrides {
    pub walk_depth: Option<u32>,
    pub slice_us: Option<u64>,
    pub affinity_grace_us: Option<u64>,
    pub decay_core_us: Option<u64>,
    pub decay_llc_us: Option<u64>,
}

/// Every knob resolved to the units BPF uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Knobs {
    pub affinity: bool,
    pub walk_depth: u32,
    pub slice_ns: u64,
    pub affinity_grace_ns: u64,
    pub sleeper_credit_ns: u64,
    pub starve_ns: u64,
    pub decay_core_ns: u64,
    pub decay_llc_ns: u64,
}

/// Limits a knob must respect; outside them the scheduler would misbehave
/// (a zero slice never runs anything, a huge one turns off preemption).
const WALK_DEPTH: (u64, u64) = (1, 32);
const SLICE_US: (u64, u64) = (100, 100_000);
const AFFINITY_GRACE_US: (u64, u64) = (0, 100_000);
const SLEEPER_CREDIT_US: (u64, u64) = (0, 1_000_000);
const STARVE_MS: (u64, u64) = (1, 10_000);
const DECAY_US: (u64, u64) = (1, 10_000_000);

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

    /// A preset by name, or a policy file by path (anything with a `/` or
    /// ending in `.toml`).
    pub fn load(name_or_path: &str) -> Result<Self> {
        if name_or_path.contains('/') || name_or_path.ends_with(".toml") {
            let path = Path::new(name_or_path);
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading policy file {}", path.display()))?;
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
        if self.name.trim().is_empty() {
            bail!("name is empty");
        }
        check("walk_depth", self.walk_depth.into(), WALK_DEPTH)?;
        check("slice_us", self.slice_us, SLICE_US)?;
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
        if self.affinity_grace_us >= self.starve_ms * 1000 {
            bail!(
                "affinity_grace_us = {} must stay below starve_ms = {} ms",
                self.affinity_grace_us,
                self.starve_ms
            );
        }
        if let Some(v) = self.decay_core_us {
            check("decay_core_us", v, DECAY_US)?;
        }
        if let Some(v) = self.decay_llc_us {
            check("decay_llc_us", v, DECAY_US)?;
        }
        Ok(())
    }

    /// Applies overrides and fills derived thresholds (ns) where the policy
    /// leaves them out.
    pub fn resolve(
        &self,
        over: &Overrides,
        derived_core_ns: u64,
        derived_llc_ns: u64,
    ) -> Result<Knobs> {
        let mut p = self.clone();
        p.walk_depth = over.walk_depth.unwrap_or(p.walk_depth);
        p.slice_us = over.slice_us.unwrap_or(p.slice_us);
        p.affinity_grace_us = over.affinity_grace_us.unwrap_or(p.affinity_grace_us);
        p.decay_core_us = over.decay_core_us.or(p.decay_core_us);
        p.decay_llc_us = over.decay_llc_us.or(p.decay_llc_us);
        p.validate().context("command-line override")?;

        let decay_core_ns = p.decay_core_us.map_or(derived_core_ns, |us| us * 1000);
        let decay_llc_ns = p.decay_llc_us.map_or(derived_llc_ns, |us| us * 1000);
        if decay_core_ns > decay_llc_ns {
            bail!(
                "decay_core ({} us) must not exceed decay_llc ({} us): the LLC outlives the core cache",
                decay_core_ns / 1000,
                decay_llc_ns / 1000
            );
        }
        Ok(Knobs {
            affinity: p.affinity,
            walk_depth: p.walk_depth,
            slice_ns: p.slice_us * 1000,
            affinity_grace_ns: p.affinity_grace_us * 1000,
            sleeper_credit_ns: p.sleeper_credit_us * 1000,
            starve_ns: p.starve_ms * 1_000_000,
            decay_core_ns,
            decay_llc_ns,
        })
    }
}

pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|(name, _)| *name).collect()
}

#[cfg(test)]
mod tests;
