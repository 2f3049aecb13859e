//! The policy in force and how it changes while the scheduler runs: a new
//! policy is validated whole, written into a free slot of `sky_cfgs` and
//! published by one store of its index (bpf/sky.bpf.h), with a generation
//! that moves on every switch. A slot holds everything BPF takes from a
//! policy: the knobs and the class hints by task name it applies itself.
//! The daemon's own uses of a policy (its hints, `[classify]`, gang rules)
//! follow the generation ([`Switcher::policy_if_newer`]). [`Switcher`]
//! shares it between the run loop (SIGHUP, stats) and the control socket's
//! threads, which switch straight into BPF's memory: a switch waits for
//! nothing the run loop does.

use crate::bpf::intf;
use crate::bpf::skel::types::{bss, sky_comm_rule, sky_config};
use crate::bss::BssMapping;
use anyhow::{bail, Result};
use log::info;
use sky_classify::{Class, CommShape, Hints};
use sky_control::Request;
use sky_policy::{lookup, Overrides, Policy, Resolved};
use sky_topology::DecayThresholds;
use std::sync::atomic::{fence, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

const SLOTS: u32 = intf::sky_consts_SKY_CFG_SLOTS;

/// A slot is rewritten no sooner than this after it stopped being the
/// live one (a callback can pin it only while it is live): far longer
/// than any callback runs. Switches need not wait for each other: up to
/// SLOTS (256) of them may come at once, and a storm runs at SLOTS per
/// this (16 000 a second) before a switch waits at all.
pub const SLOT_REUSE_AFTER: Duration = Duration::from_millis(16);

/// The policy a switch asks for, any file already read and validated.
/// Files are read before [`Switcher`]'s lock is taken: a slow file then
/// holds up only the request that named it, not the run loop or the other
/// control clients.
#[derive(Debug)]
pub enum Wanted {
    Preset(String),
    File(Box<Policy>),
}

impl Wanted {
    /// Reads `name_or_path` if it names a file ([`sky_policy::names_a_file`])
    /// or a name a policy directory answers to ([`sky_policy::lookup`]).
    pub fn read(name_or_path: &str) -> Result<Self> {
        static FINDER: std::sync::OnceLock<lookup::Finder> = std::sync::OnceLock::new();
        let finder = FINDER
            .get_or_init(|| lookup::Finder::new(lookup::policy_dirs(), lookup::UNSHADOWED_FOR));
        if sky_policy::names_a_file(name_or_path) {
            return Ok(Wanted::File(Box::new(Policy::load(name_or_path)?)));
        }
        // A file found by name is read from where it was found, not
        // looked up a second time.
        Ok(match finder.find(name_or_path) {
            Some(origin @ lookup::Origin::File(_)) => {
                Wanted::File(Box::new(lookup::load(&origin, name_or_path)?))
            }
            _ => Wanted::Preset(name_or_path.to_owned()),
        })
    }
}

/// A policy resolved for this machine and command line: all a publish
/// writes.
#[derive(Debug)]
pub struct Prepared {
    policy: Policy,
    knobs: Resolved,
    /// The command line's `--class` hints, then the policy's.
    hints: Hints,
}

pub struct LivePolicy {
    pub policy: Policy,
    pub knobs: Resolved,
    /// The command line's `--class` hints, tried before every policy's
    /// `[[class_rule]]`.
    class_cli: Vec<String>,
    /// Are PMU counts classing tasks (so a class can say memory-bound)?
    /// Known once the counters are opened, at each load.
    pmu_counts: bool,
    /// The presets, parsed once: a switch storm should not parse TOML
    /// each time. Files are read afresh on every switch.
    presets: Vec<Policy>,
    /// Command-line overrides stay in force across switches.
    over: Overrides,
    derived: DecayThresholds,
    pub generation: u64,
    /// When each slot was last replaced as the live one.
    superseded_at: Vec<Option<Instant>>,
}

impl LivePolicy {
    pub fn new(
        policy: Policy,
        over: Overrides,
        derived: DecayThresholds,
        class_cli: Vec<String>,
    ) -> Result<Self> {
        let knobs = policy.resolve(&over, &derived)?;
        Hints::new(&class_cli, &policy.class_rule)?;
        let presets = sky_policy::preset_names()
            .iter()
            .map(|name| Policy::load(name))
            .collect::<Result<_>>()?;
        Ok(LivePolicy {
            policy,
            knobs,
            class_cli,
            pmu_counts: false,
            presets,
            over,
            derived,
            generation: 0,
            superseded_at: vec![None; SLOTS as usize],
        })
    }

    /// Resolves the running policy again for a topology read afresh (a
    /// reload after hotplug may change the cache sizes) and the PMU
    /// counters as opened this time (`pmu_counts`).
    pub fn rebind(&mut self, derived: DecayThresholds, pmu_counts: bool) -> Result<Prepared> {
        let running = self.resolve(self.policy.clone(), &derived)?;
        self.derived = derived;
        self.pmu_counts = pmu_counts;
        Ok(running)
    }

    /// `policy` resolved against the command line (overrides, `--class`
    /// hints) and `derived`.
    fn resolve(&self, policy: Policy, derived: &DecayThresholds) -> Result<Prepared> {
        Ok(Prepared {
            knobs: policy.resolve(&self.over, derived)?,
            hints: Hints::new(&self.class_cli, &policy.class_rule)?,
            policy,
        })
    }

    /// Resolves a wanted policy against the command line's overrides and
    /// this machine; nothing changes if it fails.
    pub fn prepare(&self, wanted: Wanted) -> Result<Prepared> {
        let policy = match wanted {
            Wanted::File(policy) => *policy,
            Wanted::Preset(name) => match self.presets.iter().find(|p| p.name == name) {
                Some(preset) => preset.clone(),
                None => bail!("{}", sky_policy::unknown(&name, &lookup::policy_dirs())),
            },
        };
        self.resolve(policy, &self.derived)
    }

    /// Publishes `policy` (resolved to `knobs`) to BPF as the next
    /// generation: the whole config into the slot after the live one,
    /// then the slot's index.
    pub fn publish(&mut self, bss: &mut bss, next: Prepared) -> u64 {
        let live = bss.sky_cfg_live % SLOTS;
        let slot = next_slot(live);
        if let Some(wait) = self.superseded_at[slot as usize]
            .and_then(|t| SLOT_REUSE_AFTER.checked_sub(t.elapsed()))
        {
            std::thread::sleep(wait);
        }
        self.generation += 1;
        let cfg = &mut bss.sky_cfgs[slot as usize];
        write_config(cfg, &next.knobs, self.generation);
        cfg.nr_comm_rules = write_comm_rules(&next.hints, &mut cfg.comm_rules);
        cfg.gang_by_class = u32::from(self.pmu_counts || next.hints.gives(Class::MemoryBound));
        // SAFETY: an aligned u64 in the mmapped .bss; BPF only sets it
        // from 0, and not for this slot until its index is published.
        unsafe { std::ptr::write_volatile(&mut bss.sky_cfg_first_use_ns[slot as usize], 0) };
        // The slot must be complete before BPF can see its index.
        fence(Ordering::SeqCst);
        // SAFETY: a plain aligned u32 in the mmapped .bss, read by BPF.
        unsafe { std::ptr::write_volatile(&mut bss.sky_cfg_live, slot) };
        self.superseded_at[live as usize] = Some(Instant::now());
        self.policy = next.policy;
        self.knobs = next.knobs;
        self.generation
    }

    /// Makes `policy` the running one without writing it anywhere: the
    /// next load publishes it.
    fn adopt(&mut self, next: Prepared) {
        self.generation += 1;
        self.policy = next.policy;
        self.knobs = next.knobs;
    }

    /// Every policy a name finds, one `NAME  description  (where)` line
    /// each, in lookup order.
    pub fn list(&self) -> String {
        lookup::listing(&lookup::policy_dirs()).join("\n")
    }

    /// `policy=NAME generation=N`.
    pub fn summary(&self) -> String {
        format!("policy={} generation={}", self.policy.name, self.generation)
    }

    /// The summary, when BPF first decided under it, then every knob as a
    /// policy file writes it and what is derived from them.
    pub fn describe(&self, first_use_ns: u64) -> String {
        format!(
            "{}\nfirst_use_ns = {first_use_ns}\n{}",
            self.summary(),
            self.knobs.describe().trim_end()
        )
    }
}

/// The live policy, shared by the run loop and the control socket, and
/// kept across reloads: a policy switched at runtime survives a restart
/// the kernel asks for.
#[derive(Clone)]
pub struct Switcher(Arc<Mutex<Shared>>);

struct Shared {
    live: LivePolicy,
    /// The loaded scheduler's .bss; None between a detach and the next load.
    bss: Option<BssMapping>,
    logged_at: Option<Instant>,
    unlogged: u64,
}

impl Switcher {
    pub fn new(live: LivePolicy) -> Self {
        Switcher(Arc::new(Mutex::new(Shared {
            live,
            bss: None,
            logged_at: None,
            unlogged: 0,
        })))
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A thread that panicked holding the lock left a whole policy
        // (publish cannot stop half way): carry on with it.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes the running policy into a scheduler about to load (its
    /// initial .bss), resolved for the topology it was opened with.
    /// Returns the generation written.
    pub fn load_into(
        &self,
        bss: &mut bss,
        derived: DecayThresholds,
        pmu_counts: bool,
    ) -> Result<u64> {
        let mut s = self.lock();
        let running = s.live.rebind(derived, pmu_counts)?;
        Ok(s.live.publish(bss, running))
    }

    /// From now on switches go straight into the loaded scheduler's .bss;
    /// a switch made since `load_into` wrote generation `loaded` is
    /// published now.
    pub fn attach(&self, map: &libbpf_rs::MapMut, loaded: u64) -> Result<()> {
        let mut s = self.lock();
        let mut mapping = BssMapping::new(map)?;
        if s.live.generation != loaded {
            let (derived, pmu_counts) = (s.live.derived, s.live.pmu_counts);
            let running = s.live.rebind(derived, pmu_counts)?;
            s.live.publish(mapping.bss(), running);
        }
        s.bss = Some(mapping);
        Ok(())
    }

    /// The scheduler is going: switches wait for the next one.
    pub fn detach(&self) {
        self.lock().bss = None;
    }

    /// Switches to a preset or policy file, validated whole first.
    pub fn switch(&self, name_or_path: &str) -> Result<String> {
        let wanted = Wanted::read(name_or_path)?;
        let mut s = self.lock();
        let next = s.live.prepare(wanted)?;
        let Shared { live, bss, .. } = &mut *s;
        match bss {
            Some(map) => {
                live.publish(map.bss(), next);
            }
            // Between two loads: the next load publishes it.
            None => live.adopt(next),
        }
        // One line a second at most: a storm of switches must not turn
        // into a storm of log lines.
        s.unlogged += 1;
        if s.logged_at
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
        {
            info!(
                "policy switched: {} ({} switch(es) since the last line)",
                s.live.summary(),
                s.unlogged
            );
            s.unlogged = 0;
            s.logged_at = Some(Instant::now());
        }
        Ok(s.live.summary())
    }

    /// A control request's answer.
    pub fn answer(&self, req: Request) -> Result<String, String> {
        match req {
            Request::Set(name) => self.switch(&name).map_err(|e| format!("{e:#}")),
            Request::Get => {
                let mut s = self.lock();
                let first_use = s.bss.as_mut().map_or(0, |m| first_use_ns(m.bss()));
                Ok(s.live.describe(first_use))
            }
            Request::List => Ok(self.lock().live.list()),
        }
    }

    /// The running policy and its generation.
    pub fn policy_and_generation(&self) -> (Policy, u64) {
        let s = self.lock();
        (s.live.policy.clone(), s.live.generation)
    }

    /// The running policy's knobs.
    pub fn knobs(&self) -> Resolved {
        self.lock().live.knobs
    }

    /// The running policy and its generation, if that is newer than
    /// `seen`.
    pub fn policy_if_newer(&self, seen: u64) -> Option<(Policy, u64)> {
        let s = self.lock();
        (s.live.generation != seen).then(|| (s.live.policy.clone(), s.live.generation))
    }

    /// The running policy's name and generation.
    pub fn name_and_generation(&self) -> (String, u64) {
        let s = self.lock();
        (s.live.policy.name.clone(), s.live.generation)
    }

    /// `policy=NAME generation=N`.
    pub fn summary(&self) -> String {
        self.lock().live.summary()
    }
}

/// When BPF first decided under the live slot (0: not yet).
fn first_use_ns(bss: &mut bss) -> u64 {
    let live = (bss.sky_cfg_live % SLOTS) as usize;
    // SAFETY: an aligned u64 BPF writes concurrently.
    unsafe { std::ptr::read_volatile(&bss.sky_cfg_first_use_ns[live]) }
}

/// The slot after `live` (live is what BPF reads; the next is free).
fn next_slot(live: u32) -> u32 {
    (live % SLOTS + 1) % SLOTS
}

/// The name hints BPF can apply itself (NAME, NAME*, *NAME, *NAME* of up
/// to 15 bytes, in order, up to the first it cannot) into `rules`;
/// returns how many. The rest are the daemon's (`ClassFeed`).
fn write_comm_rules(hints: &Hints, rules: &mut [sky_comm_rule]) -> u32 {
    let (bpf, _daemon_only) = hints.bpf_comm_rules(rules.len());
    for ((shape, literal, class), rule) in bpf.iter().zip(rules.iter_mut()) {
        rule.pattern = [0; 16];
        for (dst, src) in rule.pattern.iter_mut().zip(literal.bytes()) {
            *dst = src as _;
        }
        rule.len = literal.len() as u32;
        rule.shape = match shape {
            CommShape::Exact => intf::sky_comm_shape_SKY_COMM_EXACT,
            CommShape::Prefix => intf::sky_comm_shape_SKY_COMM_PREFIX,
            CommShape::Suffix => intf::sky_comm_shape_SKY_COMM_SUFFIX,
            CommShape::Contains => intf::sky_comm_shape_SKY_COMM_CONTAINS,
        };
        rule.class = class.bpf_value();
    }
    bpf.len() as u32
}

/// Writes every knob into its `struct sky_config` field, as the knob
/// list says (sky_policy's knobs.rs), then what BPF derives nothing of.
macro_rules! write_knobs {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident : $ty:ty = $default:expr, $unit:literal $(, [$lo:expr, $hi:expr])?
            => $bpf:ident($conv:ident);
    )*) => {
        fn write_config(cfg: &mut sky_config, r: &Resolved, generation: u64) {
            $(cfg.$bpf = sky_policy::to_bpf::$conv(r.knobs.$name);)*
            cfg.patience_ns = r.patience_us * 1000;
            cfg.fill_bytes_per_ms = r.fill_bytes_per_ms;
            cfg.generation = generation;
        }

        /// The `struct sky_config` fields `write_config` sets.
        #[cfg(test)]
        const WRITTEN: &[&str] = &[
            $(stringify!($bpf),)* "patience_ns", "fill_bytes_per_ms", "generation",
        ];
    };
}
sky_policy::for_each_knob!(write_knobs);

#[cfg(test)]
mod tests {
    use super::*;

    fn live() -> LivePolicy {
        live_with_hints(&[])
    }

    fn live_with_hints(class_cli: &[&str]) -> LivePolicy {
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
        let class_cli = class_cli.iter().map(|h| h.to_string()).collect();
        LivePolicy::new(Policy::load("sky1").unwrap(), over, derived, class_cli).unwrap()
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
        let next = l.prepare(Wanted::read("sky1").unwrap()).unwrap();
        assert_eq!(l.publish(&mut bss, next), 1);
        let next = l.prepare(Wanted::read("vtime").unwrap()).unwrap();
        assert_eq!(l.publish(&mut bss, next), 2);
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
        assert_eq!(bss.sky_cfg_first_use_ns[2], 0);
        let text = l.describe(7);
        assert!(
            text.starts_with("policy=vtime generation=2\nfirst_use_ns = 7\n"),
            "{text}"
        );
        assert!(text.contains("slice_us = 2000\n"), "{text}");
    }

    /// The fields of `struct sky_config` in bpf/intf.h.
    fn config_fields() -> Vec<String> {
        let header = include_str!("../bpf/intf.h");
        let body = header
            .split_once("struct sky_config {")
            .and_then(|(_, rest)| rest.split_once("\n};"))
            .map(|(body, _)| body)
            .expect("bpf/intf.h declares struct sky_config");
        body.lines()
            .map(str::trim)
            .filter(|l| l.ends_with(';'))
            .filter_map(|l| l.trim_end_matches(';').split_whitespace().last())
            .map(|name| name.split('[').next().unwrap_or(name).to_string())
            .collect()
    }

    #[test]
    fn the_knob_list_and_struct_sky_config_agree() {
        // Written by publish itself: the hints by task name and whether a
        // class can say memory-bound are not knobs.
        let apart = ["comm_rules", "nr_comm_rules", "gang_by_class"];
        let fields = config_fields();
        assert!(fields.len() > 20, "parsed {fields:?}");
        for field in &fields {
            assert!(
                WRITTEN.contains(&field.as_str()) || apart.contains(&field.as_str()),
                "struct sky_config.{field} is in bpf/intf.h, but no knob writes it: \
                 add it to sky_policy's for_each_knob! list"
            );
        }
        for written in WRITTEN {
            assert!(fields.iter().any(|f| f == written), "{written}");
        }
        assert_eq!(
            sky_policy::to_bpf::rule(sky_policy::DecayRule::Sleep),
            crate::bpf::intf::sky_decay_rule_SKY_DECAY_SLEEP
        );
        assert_eq!(
            sky_policy::to_bpf::rule(sky_policy::DecayRule::Pressure),
            crate::bpf::intf::sky_decay_rule_SKY_DECAY_PRESSURE
        );
    }

    #[test]
    fn every_knob_reaches_bpf_in_bpf_units() {
        let l = live();
        let mut cfg: sky_config = unsafe { std::mem::zeroed() };
        write_config(&mut cfg, &l.knobs, 3);
        let k = &l.knobs.knobs;
        assert_eq!(cfg.slice_ns, k.slice_us * 1000);
        assert_eq!(cfg.starve_ns, k.starve_ms * 1_000_000);
        assert_eq!(cfg.decay_core_bytes, k.decay_core_kb.unwrap() << 10);
        assert_eq!(cfg.gang_spill_ns, k.gang_spill_us.unwrap() * 1000);
        assert_eq!(cfg.patience_ns, 4 * cfg.slice_ns);
        assert_eq!((cfg.affinity, cfg.generation), (1, 3));
        assert!(k.unset().is_empty(), "{:?}", k.unset());
    }

    fn pattern(rule: &sky_comm_rule) -> String {
        let len = rule.len as usize;
        rule.pattern[..len]
            .iter()
            .map(|&b| b as u8 as char)
            .collect()
    }

    #[test]
    fn name_hints_are_written_for_bpf_in_order_up_to_the_first_it_cannot_apply() {
        let mut l = live_with_hints(&[
            "cpu-*=compute",
            "*pm*=pm-writer",
            "c?x=compute",
            "db=compute",
        ]);
        // SAFETY: bss is plain data (integers and arrays of them).
        let mut bss: Box<bss> = Box::new(unsafe { std::mem::zeroed() });
        let running = l.rebind(l.derived, false).unwrap();
        l.publish(&mut bss, running);
        let cfg = &bss.sky_cfgs[1];
        assert_eq!(
            cfg.nr_comm_rules, 2,
            "c?x and what follows are the daemon's"
        );
        let rules = &cfg.comm_rules;
        assert_eq!(pattern(&rules[0]), "cpu-");
        assert_eq!(
            (rules[0].shape, rules[0].class),
            (
                intf::sky_comm_shape_SKY_COMM_PREFIX,
                Class::Compute.bpf_value()
            )
        );
        assert_eq!(pattern(&rules[1]), "pm");
        assert_eq!(
            (rules[1].shape, rules[1].class),
            (
                intf::sky_comm_shape_SKY_COMM_CONTAINS,
                Class::PmWriter.bpf_value()
            )
        );
        assert_eq!(cfg.gang_by_class, 0, "nothing can say memory-bound");
    }

    /// A switch carries the new policy's name hints (after the command
    /// line's) and whether a class can say memory-bound into the slot it
    /// publishes; switching back takes them away again.
    #[test]
    fn a_switch_publishes_the_new_policys_name_hints() {
        let mut l = live_with_hints(&["cpu-*=compute"]);
        // SAFETY: bss is plain data (integers and arrays of them).
        let mut bss: Box<bss> = Box::new(unsafe { std::mem::zeroed() });
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("db.toml");
        let text = sky_policy::PRESETS[0]
            .1
            .replace("name = \"sky1\"", "name = \"db\"")
            + "\n[[class_rule]]\ncomm = \"*db*\"\nclass = \"memory-bound\"\n";
        std::fs::write(&file, text).unwrap();
        let next = l
            .prepare(Wanted::read(file.to_str().unwrap()).unwrap())
            .unwrap();
        l.publish(&mut bss, next);
        let cfg = &bss.sky_cfgs[1];
        assert_eq!(cfg.nr_comm_rules, 2);
        assert_eq!(pattern(&cfg.comm_rules[0]), "cpu-");
        assert_eq!(pattern(&cfg.comm_rules[1]), "db");
        assert_eq!(cfg.comm_rules[1].class, Class::MemoryBound.bpf_value());
        assert_eq!(cfg.gang_by_class, 1);
        l.publish(&mut bss, l.prepare(Wanted::read("sky1").unwrap()).unwrap());
        let cfg = &bss.sky_cfgs[2];
        assert_eq!((cfg.nr_comm_rules, cfg.gang_by_class), (1, 0));
        // With PMU counts any task can be memory-bound.
        let running = l.rebind(l.derived, true).unwrap();
        l.publish(&mut bss, running);
        assert_eq!(bss.sky_cfgs[3].gang_by_class, 1);
    }

    #[test]
    fn a_slot_is_rewritten_only_16_ms_after_it_stopped_being_live() {
        let mut l = live();
        // SAFETY: bss is plain data (integers and arrays of them).
        let mut bss: Box<bss> = Box::new(unsafe { std::mem::zeroed() });
        let started = Instant::now();
        // SLOTS + 2 switches: the last two reuse slots that were live
        // moments ago, so they wait for SLOT_REUSE_AFTER.
        for i in 0..SLOTS + 2 {
            let name = if i % 2 == 0 { "vtime" } else { "sky1" };
            let next = l.prepare(Wanted::read(name).unwrap()).unwrap();
            l.publish(&mut bss, next);
        }
        assert!(
            started.elapsed() >= SLOT_REUSE_AFTER,
            "{:?}",
            started.elapsed()
        );
        assert_eq!(l.generation, u64::from(SLOTS) + 2);
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
        let e = format!("{:#}", Wanted::read(file.to_str().unwrap()).unwrap_err());
        assert!(e.contains("walk_depth = 99"), "{e}");
        let e = format!(
            "{:#}",
            l.prepare(Wanted::read("nosuch").unwrap()).unwrap_err()
        );
        assert!(e.contains("\"nosuch\"") && e.contains("sky1"), "{e}");
        assert_eq!((l.policy.name.as_str(), l.generation), ("sky1", 0));
    }

    /// The run loop and every other client wait on the switcher's lock:
    /// a file, however slow to read, is read before it is taken.
    #[test]
    fn a_policy_file_is_read_before_the_lock_is_taken() {
        let switcher = Switcher::new(live());
        let held = switcher.lock();
        let (tx, rx) = std::sync::mpsc::channel();
        let other = switcher.clone();
        std::thread::spawn(move || {
            let _ = tx.send(
                other
                    .switch("/nonexistent/p.toml")
                    .map_err(|e| format!("{e:#}")),
            );
        });
        let answer = rx.recv_timeout(Duration::from_secs(2));
        drop(held);
        let e = answer
            .expect("the switch waited for the lock before reading the file")
            .unwrap_err();
        assert!(e.contains("/nonexistent/p.toml"), "{e}");
    }
}
