//! Loading, configuring and running the BPF scheduler.

use crate::bpf::intf;
use crate::bpf::skel::{BpfSkel, BpfSkelBuilder, OpenBpfSkel};
use crate::cli::{seconds, RunOpts};
use crate::counters::{thread_waits, Counters};
use crate::feeds::class_map::{open_pmu, ClassFeed};
use crate::feeds::gang_maps::GangFeed;
use crate::feeds::Feeds;
use crate::live_policy::{LivePolicy, Switcher};
use crate::pmu_cpus::PmuCpus;
use crate::verifier_cost;
use crate::wakeup::Wakeup;
use anyhow::{bail, Context, Result};
use libbpf_rs::OpenObject;
use log::{info, warn};
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report, UserExitInfo};
use sky_policy::{DecayRule, Policy, Resolved};
use sky_stats::scx_stats::serde_json::Value;
use sky_stats::{SampleRequest, ThreadView};
use sky_topology::{DecayThresholds, Topology};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the run loop looks, unwoken, at what cannot wake it: the
/// kernel's exit request, the time limit, a policy switched through the
/// control socket (for the daemon's hints and gang rules), CPUs coming
/// online. Statistics requests and signals wake it at once
/// (`wakeup.rs`). (Classes and gangs are the feeds worker's, `feeds.rs`.)
/// Each wake-up takes a CPU from a task for a moment: at 20 ms the loop
/// took 1.2-1.9 % of a CPU in a TCG guest doing nothing else.
const LOOP_PERIOD: Duration = Duration::from_millis(100);
/// How long a woken loop waits for the request scx_stats forwards.
const FORWARD_WAIT: Duration = Duration::from_millis(20);

pub struct Scheduler<'a> {
    skel: BpfSkel<'a>,
    struct_ops: Option<libbpf_rs::Link>,
    stats_interval: Duration,
    run_for: Duration,
    /// Classes and gangs, on a worker thread of their own.
    feeds: Feeds,
    /// The policy generation the classes and gangs follow.
    policy_generation: u64,
    live: Switcher,
    /// The scx_stats server (`scx_sky stats`, scx tools); None if it
    /// could not listen.
    stats_server: Option<sky_stats::Served>,
    /// The PMU counters BPF reads, the program that charges them to
    /// tasks (held for the run), and the CPUs they follow.
    pmu: Option<(
        sky_classify::pmu::OpenCounters,
        Option<libbpf_rs::Link>,
        PmuCpus,
    )>,
    /// What the run loop sleeps on.
    wakeup: Arc<Wakeup>,
    /// The exec program that claims gang homes, held for the run.
    _gang_exec: Option<libbpf_rs::Link>,
}

impl<'a> Scheduler<'a> {
    pub fn init(
        opts: &RunOpts,
        live: &Switcher,
        wakeup: &Arc<Wakeup>,
        open_object: &'a mut MaybeUninit<OpenObject>,
    ) -> Result<Self> {
        let stats_interval = seconds("stats", opts.stats_interval)?;
        let run_for = seconds("run-for", opts.run_for)?;
        check_kernel_supports_sched_ext()?;

        // Open the BPF object first: this records the kernel's hotplug
        // sequence number, so a CPU that changes state while the topology
        // is read below makes the attach fail and the loop reload, instead
        // of going unnoticed.
        let mut builder = BpfSkelBuilder::default();
        builder.obj_builder.debug(opts.verbose);
        let kconfig = match &opts.libbpf.kconfig {
            Some(_) => None,
            None => kconfig_fallback(),
        };
        let open_opts = libbpf_open_opts(&opts.libbpf, kconfig.as_ref())?;
        let mut skel = scx_ops_open!(builder, open_object, sky_ops, open_opts)?;
        skel.struct_ops.sky_ops_mut().exit_dump_len = opts.exit_dump_len;
        size_task_maps(&mut skel, opts)?;

        // Where the caches are and how much they hold.
        let topo = Topology::from_host().context("reading the CPU topology from sysfs")?;
        check_topology_fits(&topo)?;
        let derived = decay_thresholds(opts, &topo)?;

        // PMU counters where the machine has them.
        let pmu = open_pmu(opts.pmu, &topo);
        // The running policy (the start policy, or the one switched to
        // before a reload), resolved for this topology.
        let bss = skel
            .maps
            .bss_data
            .as_mut()
            .context("BPF object has no bss")?;
        let loaded = live.load_into(bss, derived, pmu.is_some())?;
        let (policy, generation) = live.policy_and_generation();
        log_start(&policy, &topo, &live.knobs());
        // Classes from hints, shared spaces and counters.
        let classes = ClassFeed::new(
            &opts.classes,
            &policy,
            pmu.as_ref(),
            opts.record_counters.as_deref(),
        )?;
        // Gangs by rule, shared space or process, homed by the planner.
        let gangs = GangFeed::new(&opts.gang_rules, &policy, &topo)?;

        // Hand BPF the topology and what the machine counts.
        write_topology(&mut skel, &topo)?;
        {
            let rodata = skel
                .maps
                .rodata_data
                .as_mut()
                .context("BPF object has no rodata")?;
            if let Some(pmu) = &pmu {
                rodata.sky_pmu_counters = pmu.mask();
                // Measured cache pressure for the decay rule.
                if pmu.is_open(sky_classify::pmu::Counter::LlcMisses) {
                    rodata.sky_pressure_line_bytes = topo.line_bytes;
                    info!(
                        "cache pressure measured: LLC misses x {} B lines, not run time x fill rate",
                        topo.line_bytes
                    );
                }
            }
            // What each CPU runs, by class, is followed on SMT machines.
            rodata.sky_smt_accounting = u32::from(topo.cpus.iter().any(|c| c.siblings.len() > 1));
            // Under overload the wait bound grows with the load, well inside
            // the watchdog's timeout (bpf/bound.bpf.h).
            rodata.sky_bound_max_ns = bound_max_ns(skel.struct_ops.sky_ops().timeout_ms);
            info!(
                "the wait bound grows under overload to at most {} ms; kernel threads are served first then",
                rodata.sky_bound_max_ns / 1_000_000
            );
        }
        if pmu.is_some() {
            skel.progs.sky_pmu_switch.set_autoload(true);
        }

        // Verify and load, then attach: from here on tasks are ours.
        if opts.verifier_stats {
            verifier_cost::start(&mut skel);
        }
        let loaded_skel = scx_ops_load!(skel, sky_ops, uei);
        if opts.verifier_stats {
            let costs = verifier_cost::finish();
            if costs.is_empty() {
                warn!("--verifier-stats: the verifier's statistics were not in libbpf's log");
            }
            for c in costs {
                info!(
                    "verifier: program={} processed={} total_states={} peak_states={}",
                    c.program, c.processed, c.total_states, c.peak_states
                );
            }
            if loaded_skel.is_err() {
                warn!("--verifier-stats leaves the verifier's trace out: run again without it to see why a program was refused");
            }
        }
        let mut skel = loaded_skel?;
        let pmu = pmu.map(|open| {
            let link = attach_pmu(&mut skel, &open)
                .inspect_err(|e| warn!("PMU counts are not charged to tasks: {e:#}"))
                .ok();
            let cpus = PmuCpus::new(&open, topo.nr_cpus());
            (open, link, cpus)
        });
        // Memory-bound processes claim a gang home at exec (bpf/gang.bpf.h);
        // without it they claim one at their first placement.
        let gang_exec = skel
            .progs
            .sky_gang_exec
            .attach()
            .inspect_err(|e| warn!("gang homes are claimed at first placement, not exec: {e}"))
            .ok();
        let struct_ops = Some(scx_ops_attach!(skel, sky_ops)?);
        info!("scx_sky attached");
        // From here the control socket switches straight into BPF.
        live.attach(&skel.maps.bss, loaded)?;
        let feeds = Feeds::start(&skel, classes, gangs)?;
        Ok(Self {
            skel,
            struct_ops,
            stats_interval,
            run_for,
            feeds,
            policy_generation: generation,
            live: live.clone(),
            stats_server: sky_stats::serve(
                &crate::counters::catalog(),
                opts.stats_socket.as_deref(),
                {
                    let wakeup = wakeup.clone();
                    Arc::new(move || wakeup.wake())
                },
            )
            .inspect_err(|e| warn!("statistics are not served ({e:#}): only the log has them"))
            .ok(),
            wakeup: wakeup.clone(),
            pmu,
            _gang_exec: gang_exec,
        })
    }

    /// Runs until asked to stop, the time limit passes, or the kernel ejects
    /// the scheduler; then detaches and reports why it ended. `reread`
    /// (SIGHUP) applies the policy scx_sky was started with again,
    /// re-reading its file. (Control requests never wait for this loop:
    /// they switch through the shared [`Switcher`].)
    pub fn run(
        &mut self,
        shutdown: &AtomicBool,
        reread: &AtomicBool,
        started_with: &str,
    ) -> Result<UserExitInfo> {
        let started = Instant::now();
        let mut last_print = started;
        let mut last = self.counters()?;
        while !shutdown.load(Ordering::Relaxed) && !uei_exited!(&self.skel, uei) {
            if !self.run_for.is_zero() && started.elapsed() >= self.run_for {
                break;
            }
            let woken = self.wakeup.wait(LOOP_PERIOD);
            self.answer_stats_readers(woken)?;
            if reread.swap(false, Ordering::Relaxed) {
                match self.live.switch(started_with) {
                    Ok(s) => info!("SIGHUP: {s}"),
                    Err(e) => warn!("SIGHUP: {e:#}; the running policy stays"),
                }
            }
            self.follow_policy();
            self.follow_pmu_cpus();
            if !self.stats_interval.is_zero() && last_print.elapsed() >= self.stats_interval {
                let now = self.counters()?;
                info!(
                    "stats: {} {}{}",
                    self.live.summary(),
                    now.since(&last).line(),
                    self.class_census()
                );
                last = now;
                last_print = Instant::now();
            }
        }
        // Totals over the whole run, read before detaching frees the maps.
        match self.counters() {
            Ok(total) => info!(
                "stats total: {} {}{}",
                self.live.summary(),
                total.line(),
                self.class_census()
            ),
            Err(e) => warn!("could not read final stats: {e:#}"),
        }
        self.live.detach();
        self.struct_ops.take();
        uei_report!(&self.skel, uei)
    }

    /// A switch (control socket, SIGHUP) published a new policy: the
    /// daemon's hints, classifier and gang rules become the new policy's,
    /// as BPF's name hints did with the switch.
    fn follow_policy(&mut self) {
        let Some((policy, generation)) = self.live.policy_if_newer(self.policy_generation) else {
            return;
        };
        self.policy_generation = generation;
        self.feeds.follow(policy);
    }

    /// PMU counters for CPUs that came online (see `pmu_cpus`).
    /// (sysfs is read only when counters are open: under TCG that read,
    /// every loop, cost more than the rest of the loop.)
    fn follow_pmu_cpus(&mut self) {
        let Some((open, Some(_), cpus)) = &mut self.pmu else {
            return;
        };
        let Some(online) = PmuCpus::online_now() else {
            return;
        };
        cpus.follow(&online, open, &self.skel.maps.sky_pmu_events);
    }

    /// A sample for each reader of the stats socket that asked. `woken`:
    /// a request may be on its way. The reader wakes the loop as it sends,
    /// but scx_stats' proxy thread forwards it to our channel a moment
    /// later, so a woken loop waits for it a little (not otherwise: a wait
    /// on crossbeam's channel spins).
    fn answer_stats_readers(&self, woken: bool) -> Result<()> {
        let Some(server) = &self.stats_server else {
            return Ok(());
        };
        let (res, req) = server.channels();
        let mut first = woken.then(|| req.recv_timeout(FORWARD_WAIT).ok()).flatten();
        while let Some(ask) = first.take().or_else(|| req.try_recv().ok()) {
            let feeds = self.feeds.view();
            let answer = match ask {
                SampleRequest::Totals => {
                    let (name, generation) = self.live.name_and_generation();
                    self.counters()?.sample(&name, generation)
                }
                SampleRequest::Gangs => sky_stats::scx_stats::serde_json::to_value(&feeds.gangs)?,
                SampleRequest::Threads(tids) => Value::Object(
                    tids.into_iter()
                        .filter_map(|tid| {
                            let view = ThreadView {
                                class: feeds
                                    .classes
                                    .class_of_thread(tid)
                                    .map(|c| c.name().to_string()),
                                waits: thread_waits(&self.skel.maps.sky_tasks, tid),
                            };
                            let known = view.class.is_some() || !view.waits.is_empty();
                            let value = sky_stats::scx_stats::serde_json::to_value(view).ok()?;
                            known.then(|| (tid.to_string(), value))
                        })
                        .collect(),
                ),
            };
            let _ = res.send(answer);
        }
        Ok(())
    }

    /// ` classes: compute=N ... gangs: ...`: the tasks of each known
    /// class, and the gangs' domains as planned.
    fn class_census(&self) -> String {
        self.feeds.view().census()
    }

    fn counters(&self) -> Result<Counters> {
        Counters::read(&self.skel.maps.sky_stats)
    }
}

/// The policy scx_sky starts with, command-line overrides applied,
/// validated against the machine's caches as they are now.
pub fn start_policy(opts: &RunOpts) -> Result<LivePolicy> {
    let topo = Topology::from_host().context("reading the CPU topology from sysfs")?;
    LivePolicy::new(
        Policy::load(&opts.policy)?,
        opts.knobs,
        decay_thresholds(opts, &topo)?,
        opts.classes.clone(),
    )
}

/// Decay thresholds from the cache sizes and the fill rate.
fn decay_thresholds(opts: &RunOpts, topo: &Topology) -> Result<DecayThresholds> {
    let fill = opts
        .cache_fill_mbps
        .checked_mul(1_000_000)
        .filter(|&f| f > 0)
        .context("--cache-fill-mbps must be between 1 and 2^44")?;
    Ok(topo.decay_thresholds(fill))
}

fn log_start(policy: &Policy, topo: &Topology, r: &Resolved) {
    let k = &r.knobs;
    info!(
        "scx_sky {}: policy {} ({}), {} CPUs in {} cache domains, SMT {}",
        env!("CARGO_PKG_VERSION"),
        policy.name,
        policy.description,
        topo.online_cpus().count(),
        topo.llcs.len(),
        if topo.smt() { "on" } else { "off" },
    );
    let decay = match k.decay {
        DecayRule::Pressure => format!(
            "pressure: core {} KiB, llc {} KiB at {} MB/s",
            k.decay_core_kb.unwrap_or(0),
            k.decay_llc_kb.unwrap_or(0),
            r.fill_bytes_per_ms / 1000
        ),
        DecayRule::Sleep => format!(
            "sleep: core {} us, llc {} us",
            k.decay_core_us.unwrap_or(0),
            k.decay_llc_us.unwrap_or(0)
        ),
    };
    info!(
        "decay by {decay}; slice {}-{} us, affinity grace {} us, wait bound {} ms, walk depth {}",
        k.slice_min_us, k.slice_us, k.affinity_grace_us, k.starve_ms, k.walk_depth,
    );
}

/// Fills the read-only topology arrays (`bpf/topology.bpf.h`): each CPU's
/// domain, each domain's CPUs, and which CPUs are offline now.
fn write_topology(skel: &mut OpenBpfSkel, topo: &Topology) -> Result<()> {
    let rodata = skel
        .maps
        .rodata_data
        .as_mut()
        .context("BPF object has no rodata")?;
    rodata.sky_nr_llcs = topo.llcs.len() as u32;
    rodata.sky_nr_cpus = topo.nr_cpus() as u32;
    for cpu in &topo.cpus {
        rodata.sky_cpu_llc[cpu.id] = cpu
            .llc
            .map_or(intf::sky_consts_SKY_LLC_UNKNOWN, |l| l as u32);
    }
    let mut next = 0;
    for (i, llc) in topo.llcs.iter().enumerate() {
        rodata.sky_llc_start[i] = next as u32;
        for &cpu in &llc.cpus {
            rodata.sky_llc_cpu_list[next] = cpu as u32;
            next += 1;
        }
    }
    rodata.sky_llc_start[topo.llcs.len()] = next as u32;
    rodata.sky_cpu_sibling.fill(-1);
    for cpu in &topo.cpus {
        if let Some(&sib) = cpu.siblings.iter().find(|&&s| s != cpu.id) {
            rodata.sky_cpu_sibling[cpu.id] = sib as i32;
        }
    }
    let bss = skel
        .maps
        .bss_data
        .as_mut()
        .context("BPF object has no bss")?;
    for cpu in &topo.cpus {
        bss.sky_offline_cpus[cpu.id] = u8::from(!cpu.online);
    }
    for (i, llc) in topo.llcs.iter().enumerate() {
        bss.sky_llc_online[i] = llc.cpus.iter().filter(|&&c| topo.cpus[c].online).count() as i32;
    }
    Ok(())
}

/// The class, counter and gang maps as large as asked (`--max-classed`,
/// `--max-ganged`).
fn size_task_maps(skel: &mut OpenBpfSkel, opts: &RunOpts) -> Result<()> {
    let maps = &mut skel.maps;
    for (map, entries) in [
        (&mut maps.sky_pid_class, opts.max_classed),
        (&mut maps.sky_pid_counts, opts.max_classed),
        (&mut maps.sky_gang_homes, opts.max_ganged),
        (&mut maps.sky_proc_gang, opts.max_ganged),
    ] {
        map.set_max_entries(entries).with_context(|| {
            format!(
                "sizing {} to {entries} entries",
                map.name().to_string_lossy()
            )
        })?;
    }
    Ok(())
}

/// The most the wait bound grows to under overload: a third of the
/// watchdog's timeout (`timeout_ms`, 0 for the kernel's 30 s), at most 1 s.
fn bound_max_ns(timeout_ms: u32) -> u64 {
    let timeout_ns = if timeout_ms == 0 {
        30_000
    } else {
        u64::from(timeout_ms)
    } * 1_000_000;
    (timeout_ns / 3).min(1_000_000_000)
}

/// Puts each CPU's counters where BPF reads them and attaches the program
/// that charges them to tasks at every context switch.
fn attach_pmu(
    skel: &mut BpfSkel,
    open: &sky_classify::pmu::OpenCounters,
) -> Result<libbpf_rs::Link> {
    use libbpf_rs::{MapCore, MapFlags};
    for (index, fd) in open.map_entries(intf::sky_consts_SKY_MAX_CPUS as usize) {
        skel.maps
            .sky_pmu_events
            .update(&index.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)
            .with_context(|| format!("handing BPF PMU counter {index}"))?;
    }
    skel.progs
        .sky_pmu_switch
        .attach()
        .context("attaching the PMU charging program to sched_switch")
}

/// A kernel without sched_ext has no /sys/kernel/sched_ext: say so in
/// words a newcomer can act on, before libbpf fails with something cryptic.
fn check_kernel_supports_sched_ext() -> Result<()> {
    check_sched_ext_at(std::path::Path::new("/sys/kernel/sched_ext"))?;
    if unsafe { libc::geteuid() } != 0 {
        bail!("scx_sky must run as root: loading a BPF scheduler needs CAP_SYS_ADMIN and CAP_BPF");
    }
    Ok(())
}

fn check_sched_ext_at(sysfs_dir: &std::path::Path) -> Result<()> {
    if !sysfs_dir.exists() {
        bail!(
            "this kernel ({}) has no sched_ext: /sys/kernel/sched_ext is missing. \
             scx_sky needs Linux >= 6.12 built with CONFIG_SCHED_CLASS_EXT=y; \
             `cargo xtask run` boots such a kernel in a VM and runs the demo there",
            kernel_release()
        );
    }
    // Checked before anything is set up: a second instance must leave the
    // running one alone (its control socket above all), not fail later.
    if let Some(ops) = running_scheduler(sysfs_dir) {
        bail!(
            "another sched_ext scheduler is running: {ops} ({}/root/ops); \
             scx_sky leaves it alone: stop it first",
            sysfs_dir.display()
        );
    }
    Ok(())
}

/// The scheduler the kernel runs now, by its ops name, if any.
fn running_scheduler(sysfs_dir: &std::path::Path) -> Option<String> {
    let state = std::fs::read_to_string(sysfs_dir.join("state")).ok()?;
    if !matches!(state.trim(), "enabled" | "enabling") {
        return None;
    }
    // root/ops since 6.16; ops before.
    let ops = ["root/ops", "ops"]
        .iter()
        .find_map(|f| std::fs::read_to_string(sysfs_dir.join(f)).ok())
        .map(|o| o.trim().to_string())
        .filter(|o| !o.is_empty());
    Some(ops.unwrap_or_else(|| "(ops name unreadable)".into()))
}

/// libbpf's open options: the scx schedulers' own (`scx_utils::libbpf_clap_opts::LibbpfOpts`:
/// --pin-root-path, --kconfig, --btf-custom-path, --bpf-token-path,
/// --relaxed-maps), with `fallback` as the kernel config where none was
/// given. A --kconfig file that cannot be read is an error naming it
/// (LibbpfOpts would otherwise drop every option without a word).
fn libbpf_open_opts(
    given: &scx_utils::libbpf_clap_opts::LibbpfOpts,
    fallback: Option<&std::ffi::CString>,
) -> Result<Option<libbpf_rs::libbpf_sys::bpf_object_open_opts>> {
    if let Some(path) = &given.kconfig {
        std::fs::read_to_string(path).with_context(|| format!("--kconfig {path}"))?;
    }
    let mut open_opts = given.clone().into_bpf_open_opts();
    if let Some(k) = fallback {
        let o = open_opts.get_or_insert_with(|| libbpf_rs::libbpf_sys::bpf_object_open_opts {
            sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_object_open_opts>() as _,
            ..Default::default()
        });
        if o.kconfig.is_null() {
            o.kconfig = k.as_ptr();
        }
    }
    Ok(open_opts)
}

/// libbpf fills the kernel config values BPF reads (`CONFIG_PREEMPT_RCU`,
/// for telling a task with migration disabled from the BPF prologue's own
/// migrate_disable()) from /boot/config-<release> or /proc/config.gz, and
/// refuses to load when neither exists. Some kernels ship without either;
/// then assume PREEMPT_RCU (Debian's and most distributions' setting). If
/// that is wrong, a migration-disabled task may be seen as movable, which
/// kernels from 6.15 on guard against themselves.
fn kconfig_fallback() -> Option<std::ffi::CString> {
    let boot = format!("/boot/config-{}", kernel_release());
    if std::path::Path::new(&boot).exists() || std::path::Path::new("/proc/config.gz").exists() {
        return None;
    }
    warn!("no kernel config ({boot} or /proc/config.gz): assuming CONFIG_PREEMPT_RCU=y");
    std::ffi::CString::new("CONFIG_PREEMPT_RCU=y\n").ok()
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown release".into())
}

fn check_topology_fits(topo: &Topology) -> Result<()> {
    let max_cpus = intf::sky_consts_SKY_MAX_CPUS as usize;
    let max_llcs = intf::sky_consts_SKY_MAX_LLCS as usize;
    if topo.nr_cpus() > max_cpus {
        bail!(
            "{} possible CPUs; scx_sky supports {max_cpus}",
            topo.nr_cpus()
        );
    }
    if topo.llcs.len() > max_llcs {
        bail!(
            "{} cache domains; scx_sky supports {max_llcs}",
            topo.llcs.len()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use scx_utils::libbpf_clap_opts::LibbpfOpts;
    use std::ffi::{CStr, CString};

    #[test]
    fn libbpf_options_are_the_scx_ones_with_our_kconfig_fallback() {
        let fallback = CString::new("CONFIG_PREEMPT_RCU=y\n").unwrap();
        assert!(libbpf_open_opts(&LibbpfOpts::default(), None)
            .unwrap()
            .is_none());
        let o = libbpf_open_opts(&LibbpfOpts::default(), Some(&fallback))
            .unwrap()
            .unwrap();
        assert_eq!(o.kconfig, fallback.as_ptr());
        // Given options and the fallback together.
        let given = LibbpfOpts {
            pin_root_path: Some("/sys/fs/bpf/sky".into()),
            ..Default::default()
        };
        let o = libbpf_open_opts(&given, Some(&fallback)).unwrap().unwrap();
        // SAFETY: LibbpfOpts leaves a NUL-terminated string there.
        assert_eq!(
            unsafe { CStr::from_ptr(o.pin_root_path) }.to_str(),
            Ok("/sys/fs/bpf/sky")
        );
        assert_eq!(o.kconfig, fallback.as_ptr());
        // A --kconfig file is read and wins over the fallback...
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config");
        std::fs::write(&file, "CONFIG_PREEMPT_RCU=n\n").unwrap();
        let given = LibbpfOpts {
            kconfig: Some(file.display().to_string()),
            ..Default::default()
        };
        let o = libbpf_open_opts(&given, Some(&fallback)).unwrap().unwrap();
        // SAFETY: as above.
        assert_eq!(
            unsafe { CStr::from_ptr(o.kconfig) }.to_str(),
            Ok("CONFIG_PREEMPT_RCU=n\n")
        );
        // ...and one that cannot be read is named, not dropped.
        let given = LibbpfOpts {
            kconfig: Some("/nonexistent/config".into()),
            ..Default::default()
        };
        let e = format!("{:#}", libbpf_open_opts(&given, None).unwrap_err());
        assert!(e.contains("--kconfig /nonexistent/config"), "{e}");
    }

    #[test]
    fn the_overload_bound_stays_inside_the_watchdog() {
        assert_eq!(bound_max_ns(3000), 1_000_000_000);
        assert_eq!(bound_max_ns(1500), 500_000_000);
        // The kernel's default timeout (30 s) when none is set.
        assert_eq!(bound_max_ns(0), 1_000_000_000);
    }

    #[test]
    fn a_kernel_without_sched_ext_is_named_plainly() {
        let dir = tempfile::tempdir().unwrap();
        let e = check_sched_ext_at(&dir.path().join("sched_ext"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("has no sched_ext"), "{e}");
        assert!(e.contains("CONFIG_SCHED_CLASS_EXT=y"), "{e}");
        assert!(e.contains("cargo xtask run"), "{e}");
        assert!(check_sched_ext_at(dir.path()).is_ok());
    }

    #[test]
    fn a_running_scheduler_is_named_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("root")).unwrap();
        std::fs::write(dir.path().join("root/ops"), "bpfland_1.0.20\n").unwrap();
        for (state, running) in [
            ("enabled\n", true),
            ("enabling", true),
            ("disabled\n", false),
        ] {
            std::fs::write(dir.path().join("state"), state).unwrap();
            let r = check_sched_ext_at(dir.path());
            assert_eq!(r.is_err(), running, "state {state:?}: {r:?}");
            if let Err(e) = r {
                let e = e.to_string();
                assert!(
                    e.contains("another sched_ext scheduler is running: bpfland_1.0.20"),
                    "{e}"
                );
                assert!(e.contains("root/ops") && e.contains("stop it first"), "{e}");
            }
        }
        // Before 6.16 the name is in ops.
        std::fs::remove_dir_all(dir.path().join("root")).unwrap();
        std::fs::write(dir.path().join("ops"), "lavd_1\n").unwrap();
        std::fs::write(dir.path().join("state"), "enabled").unwrap();
        assert!(format!("{:#}", check_sched_ext_at(dir.path()).unwrap_err()).contains("lavd_1"));
    }
}
