//! The policy in force and how it changes while the scheduler runs: a new
//! policy is validated whole, written into a free slot of `sky_cfgs` and
//! published by one store of its index (bpf/sky.bpf.h), with a generation
//! that moves on every switch. [`Switcher`] shares it between the run loop
//! (SIGHUP, stats) and the control socket's threads, which switch straight
//! into BPF's memory: a switch waits for nothing the run loop does.

use crate::bpf::intf;
use crate::bpf::skel::types::{bss, sky_config};
use anyhow::{bail, ensure, Result};
use libbpf_rs::MapCore;
use log::info;
use sky_control::Request;
use sky_policy::{DecayRule, Knobs, Overrides, Policy};
use sky_topology::DecayThresholds;
use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;
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
    /// Reads `name_or_path` if it names a file ([`sky_policy::names_a_file`]).
    pub fn read(name_or_path: &str) -> Result<Self> {
        Ok(if sky_policy::names_a_file(name_or_path) {
            Wanted::File(Box::new(Policy::load(name_or_path)?))
        } else {
            Wanted::Preset(name_or_path.to_owned())
        })
    }
}

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
    /// When each slot was last replaced as the live one.
    superseded_at: Vec<Option<Instant>>,
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
            superseded_at: vec![None; SLOTS as usize],
        })
    }

    /// Resolves the running policy again for a topology read afresh (a
    /// reload after hotplug may change the cache sizes).
    pub fn rebind(&mut self, derived: DecayThresholds) -> Result<()> {
        self.knobs = self.policy.resolve(&self.over, &derived)?;
        self.derived = derived;
        Ok(())
    }

    /// Resolves a wanted policy against the command line's overrides and
    /// this machine; nothing changes if it fails.
    pub fn prepare(&self, wanted: Wanted) -> Result<(Policy, Knobs)> {
        let policy = match wanted {
            Wanted::File(policy) => *policy,
            Wanted::Preset(name) => match self.presets.iter().find(|p| p.name == name) {
                Some(preset) => preset.clone(),
                None => bail!(
                    "unknown policy {name:?}; presets: {}",
                    sky_policy::preset_names().join(", ")
                ),
            },
        };
        let knobs = policy.resolve(&self.over, &self.derived)?;
        Ok((policy, knobs))
    }

    /// Publishes `policy` (resolved to `knobs`) to BPF as the next
    /// generation: the whole config into the slot after the live one,
    /// then the slot's index.
    pub fn publish(&mut self, bss: &mut bss, policy: Policy, knobs: Knobs) -> u64 {
        let live = bss.sky_cfg_live % SLOTS;
        let next = next_slot(live);
        if let Some(wait) = self.superseded_at[next as usize]
            .and_then(|t| SLOT_REUSE_AFTER.checked_sub(t.elapsed()))
        {
            std::thread::sleep(wait);
        }
        self.generation += 1;
        write_config(&mut bss.sky_cfgs[next as usize], &knobs, self.generation);
        // SAFETY: an aligned u64 in the mmapped .bss; BPF only sets it
        // from 0, and not for this slot until its index is published.
        unsafe { std::ptr::write_volatile(&mut bss.sky_cfg_first_use_ns[next as usize], 0) };
        // The slot must be complete before BPF can see its index.
        fence(Ordering::SeqCst);
        // SAFETY: a plain aligned u32 in the mmapped .bss, read by BPF.
        unsafe { std::ptr::write_volatile(&mut bss.sky_cfg_live, next) };
        self.superseded_at[live as usize] = Some(Instant::now());
        self.policy = policy;
        self.knobs = knobs;
        self.generation
    }

    /// Makes `policy` the running one without writing it anywhere: the
    /// next load publishes it.
    fn adopt(&mut self, policy: Policy, knobs: Knobs) {
        self.generation += 1;
        self.policy = policy;
        self.knobs = knobs;
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

    /// The summary, when BPF first decided under it, then every knob in
    /// BPF's units.
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
    pub fn load_into(&self, bss: &mut bss, derived: DecayThresholds) -> Result<()> {
        let mut s = self.lock();
        s.live.rebind(derived)?;
        let (policy, knobs) = (s.live.policy.clone(), s.live.knobs);
        s.live.publish(bss, policy, knobs);
        Ok(())
    }

    /// From now on switches go straight into the loaded scheduler's .bss.
    pub fn attach(&self, map: &libbpf_rs::MapMut) -> Result<()> {
        self.lock().bss = Some(BssMapping::new(map)?);
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
        let (policy, knobs) = s.live.prepare(wanted)?;
        let Shared { live, bss, .. } = &mut *s;
        match bss {
            Some(map) => {
                live.publish(map.bss(), policy, knobs);
            }
            // Between two loads: the next load publishes it.
            None => live.adopt(policy, knobs),
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
                let first_use = s.bss.as_mut().map_or(0, |m| m.first_use_ns());
                Ok(s.live.describe(first_use))
            }
            Request::List => Ok(self.lock().live.list()),
        }
    }

    /// The running policy and its knobs.
    pub fn policy_and_knobs(&self) -> (Policy, Knobs) {
        let s = self.lock();
        (s.live.policy.clone(), s.live.knobs)
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

/// A mapping of the loaded scheduler's .bss of our own, so the control
/// threads can switch without borrowing the skeleton: the kernel keeps
/// the map alive while it is mapped, whatever happens to the skeleton.
struct BssMapping {
    ptr: NonNull<bss>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory, used under Switcher's lock.
unsafe impl Send for BssMapping {}

impl BssMapping {
    fn new(map: &libbpf_rs::MapMut) -> Result<Self> {
        let size = map.value_size() as usize;
        ensure!(
            size >= std::mem::size_of::<bss>(),
            "the BPF .bss is {size} bytes, smaller than its {} byte layout",
            std::mem::size_of::<bss>()
        );
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .unwrap_or(4096)
            .max(1);
        let len = size.div_ceil(page) * page;
        // SAFETY: a fresh shared mapping of the map's fd; checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.as_fd().as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            bail!(
                "mapping the BPF .bss for runtime switches: {}",
                std::io::Error::last_os_error()
            );
        }
        let ptr = NonNull::new(ptr.cast::<bss>())
            .ok_or_else(|| anyhow::anyhow!("mapping the BPF .bss gave a null address"))?;
        Ok(BssMapping { ptr, len })
    }

    fn bss(&mut self) -> &mut bss {
        // SAFETY: mapped, at least size_of::<bss>() long, page-aligned,
        // and only reached through &mut self.
        unsafe { self.ptr.as_mut() }
    }

    /// When BPF first decided under the live slot (0: not yet).
    fn first_use_ns(&mut self) -> u64 {
        let bss = self.bss();
        let live = (bss.sky_cfg_live % SLOTS) as usize;
        // SAFETY: an aligned u64 BPF writes concurrently.
        unsafe { std::ptr::read_volatile(&bss.sky_cfg_first_use_ns[live]) }
    }
}

impl Drop for BssMapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new(), unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
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
    cfg.gangs = u32::from(k.gangs);
    cfg.gang_spill_ns = k.gang_spill_ns;
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
        let (p, k) = l.prepare(Wanted::read("sky1").unwrap()).unwrap();
        assert_eq!(l.publish(&mut bss, p, k), 1);
        let (p, k) = l.prepare(Wanted::read("vtime").unwrap()).unwrap();
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
        assert_eq!(bss.sky_cfg_first_use_ns[2], 0);
        let text = l.describe(7);
        assert!(
            text.starts_with("policy=vtime generation=2\nfirst_use_ns = 7\n"),
            "{text}"
        );
        assert!(text.contains("slice_ns = 2000000"), "{text}");
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
            let (p, k) = l.prepare(Wanted::read(name).unwrap()).unwrap();
            l.publish(&mut bss, p, k);
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
