//! The policy in force and how it changes while the scheduler runs: a new
//! policy is validated whole, written into a free slot of `sky_cfgs` and
//! published by one store of its index (bpf/sky.bpf.h), with a generation
//! that moves on every switch.

use crate::bpf::intf;
use crate::bpf::skel::types::{bss, sky_config};
use anyhow::Result;
use sky_policy::{DecayRule, Knobs, Overrides, Policy};
use sky_topology::DecayThresholds;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

const SLOTS: u32 = intf::sky_consts_SKY_CFG_SLOTS;

/// Switches come at most this often: a slot is then rewritten no sooner
/// than SLOTS x this after it was published (16 ms), far longer than any
/// callback runs.
pub const SWITCH_MIN_INTERVAL: Duration = Duration::from_micros(250);

pub struct LivePolicy {
    pub policy: Policy,
    pub knobs: Knobs,
    /// The presets, parsed once: a switch storm should not parse TOML
    /// each time. Files are read afresh on every switch.
    presets: Vec<Policy>,
    /// Command-line overrides stay in force across switches.
    over: Overrides,
    derived: DecayThresholds,
    pub generation: u64,
    last_switch: Option<Instant>,
}

impl LivePolicy {
    pub fn new(policy: Policy, over: Overrides, derived: DecayThresholds) -> Result<Self> {
        let knobs = policy.resolve(&over, &derived)?;
        let presets = sky_policy::preset_names()
            .iter()
            .map(|name| Policy::load(name))
            .collect::<Result<_>>()?;
        Ok(LivePolicy {
            policy,
            knobs,
            presets,
            over,
            derived,
            generation: 0,
            last_switch: None,
        })
    }

    /// Loads and validates a preset or file; nothing changes if it fails.
    pub fn prepare(&self, name_or_path: &str) -> Result<(Policy, Knobs)> {
        let policy = match self.presets.iter().find(|p| p.name == name_or_path) {
            Some(preset) => preset.clone(),
            None => Policy::load(name_or_path)?,
        };
        let knobs = policy.resolve(&self.over, &self.derived)?;
        Ok((policy, knobs))
    }

    /// Publishes `policy` (resolved to `knobs`) to BPF as the next
    /// generation: the whole config into the slot after the live one,
    /// then the slot's index.
    pub fn publish(&mut self, bss: &mut bss, policy: Policy, knobs: Knobs) -> u64 {
        if let Some(last) = self.last_switch {
            if let Some(wait) = SWITCH_MIN_INTERVAL.checked_sub(last.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        self.generation += 1;
        let next = next_slot(bss.sky_cfg_live);
        write_config(&mut bss.sky_cfgs[next as usize], &knobs, self.generation);
        // The slot must be complete before BPF can see its index.
        fence(Ordering::SeqCst);
        // SAFETY: a plain aligned u32 in the mmapped .bss, read by BPF.
        unsafe { std::ptr::write_volatile(&mut bss.sky_cfg_live, next) };
        self.policy = policy;
        self.knobs = knobs;
        self.last_switch = Some(Instant::now());
        self.generation
    }

    /// The presets, one `NAME  description` line each.
    pub fn list(&self) -> String {
        let lines: Vec<String> = self.presets.iter().map(Policy::listing).collect();
        lines.join("\n")
    }

    /// `policy=NAME generation=N`.
    pub fn summary(&self) -> String {
        format!("policy={} generation={}", self.policy.name, self.generation)
    }

    /// The summary, then every knob in BPF's units.
    pub fn describe(&self) -> String {
        format!("{}\n{}", self.summary(), self.knobs.describe().trim_end())
    }
}

/// The slot after `live` (live is what BPF reads; the next is free).
fn next_slot(live: u32) -> u32 {
    (live % SLOTS + 1) % SLOTS
}

fn write_config(cfg: &mut sky_config, k: &Knobs, generation: u64) {
    cfg.affinity = u32::from(k.affinity);
    cfg.decay = match k.decay {
        DecayRule::Sleep => intf::sky_decay_rule_SKY_DECAY_SLEEP,
        DecayRule::Pressure => intf::sky_decay_rule_SKY_DECAY_PRESSURE,
    };
    cfg.walk_depth = k.walk_depth;
    cfg.wake_sync = u32::from(k.wake_sync);
    cfg.smt_pairing = u32::from(k.smt_pairing);
    cfg.decay_core_ns = k.decay_core_ns;
    cfg.decay_llc_ns = k.decay_llc_ns;
    cfg.decay_core_bytes = k.decay_core_bytes;
    cfg.decay_llc_bytes = k.decay_llc_bytes;
    cfg.fill_bytes_per_ms = k.fill_bytes_per_ms;
    cfg.slice_ns = k.slice_ns;
    cfg.slice_min_ns = k.slice_min_ns;
    cfg.affinity_grace_ns = k.affinity_grace_ns;
    cfg.patience_ns = k.patience_ns;
    cfg.sleeper_credit_ns = k.sleeper_credit_ns;
    cfg.starve_ns = k.starve_ns;
    cfg.generation = generation;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live() -> LivePolicy {
        let derived = DecayThresholds {
            core_ns: 500_000,
            llc_ns: 2_000_000,
            core_bytes: 512 << 10,
            llc_bytes: 2 << 20,
            fill_bytes_per_sec: 1_000_000_000,
        };
        let over = Overrides {
            slice_us: Some(2000),
            ..Default::default()
        };
        LivePolicy::new(Policy::load("sky1").unwrap(), over, derived).unwrap()
    }

    #[test]
    fn slots_go_round_and_never_reuse_the_live_one() {
        assert_eq!(next_slot(0), 1);
        assert_eq!(next_slot(SLOTS - 1), 0);
        // A corrupt index still lands on a valid slot.
        assert!(next_slot(u32::MAX) < SLOTS);
        let mut seen = std::collections::HashSet::new();
        let mut slot = 0;
        for _ in 0..SLOTS {
            slot = next_slot(slot);
            assert!(
                seen.insert(slot),
                "slot {slot} reused within {SLOTS} switches"
            );
        }
    }

    #[test]
    fn a_switch_publishes_a_whole_policy_with_the_next_generation() {
        let mut l = live();
        // SAFETY: bss is plain data (integers and arrays of them).
        let mut bss: Box<bss> = Box::new(unsafe { std::mem::zeroed() });
        let (p, k) = l.prepare("sky1").unwrap();
        assert_eq!(l.publish(&mut bss, p, k), 1);
        let (p, k) = l.prepare("vtime").unwrap();
        assert_eq!(l.publish(&mut bss, p, k), 2);
        assert_eq!(bss.sky_cfg_live, 2);
        let cfg = &bss.sky_cfgs[2];
        assert_eq!((cfg.affinity, cfg.generation), (0, 2));
        // The command-line override holds across the switch.
        assert_eq!(cfg.slice_ns, 2_000_000);
        // The slot before still holds the old policy, whole.
        assert_eq!(
            (bss.sky_cfgs[1].affinity, bss.sky_cfgs[1].generation),
            (1, 1)
        );
        assert!(l.describe().starts_with("policy=vtime generation=2\n"));
        assert!(
            l.describe().contains("slice_ns = 2000000"),
            "{}",
            l.describe()
        );
    }

    #[test]
    fn a_bad_policy_is_refused_and_nothing_changes() {
        let l = live();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad.toml");
        let text = sky_policy::PRESETS[0]
            .1
            .replace("walk_depth = 8", "walk_depth = 99");
        std::fs::write(&file, text).unwrap();
        let e = format!("{:#}", l.prepare(file.to_str().unwrap()).unwrap_err());
        assert!(e.contains("walk_depth = 99"), "{e}");
        assert!(l.prepare("nosuch").is_err());
        assert_eq!((l.policy.name.as_str(), l.generation), ("sky1", 0));
    }
}
