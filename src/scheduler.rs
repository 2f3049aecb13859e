//! Loading, configuring and running the BPF scheduler.

use crate::bpf::intf;
use crate::bpf::skel::{BpfSkel, BpfSkelBuilder};
use crate::cli::{seconds, RunOpts};
use crate::stats::Counters;
use anyhow::{bail, Context, Result};
use libbpf_rs::OpenObject;
use log::{info, warn};
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report, UserExitInfo};
use sky_policy::{Knobs, Overrides, Policy};
use sky_topology::Topology;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Scheduler<'a> {
    skel: BpfSkel<'a>,
    struct_ops: Option<libbpf_rs::Link>,
    stats_interval: Duration,
    run_for: Duration,
}

impl<'a> Scheduler<'a> {
    pub fn init(opts: &RunOpts, open_object: &'a mut MaybeUninit<OpenObject>) -> Result<Self> {
        let stats_interval = seconds("stats-interval", opts.stats_interval)?;
        let run_for = seconds("run-for", opts.run_for)?;

        // Where the caches are and how long their contents last.
        let topo = Topology::from_host().context("reading the CPU topology from sysfs")?;
        check_topology_fits(&topo)?;
        let fill = opts
            .cache_fill_mbps
            .checked_mul(1_000_000)
            .filter(|&f| f > 0)
            .context("--cache-fill-mbps must be between 1 and 2^44")?;
        let derived = topo.decay_thresholds(fill);

        // The policy, with command-line overrides, in BPF's units.
        let policy = Policy::load(&opts.policy)?;
        let over = Overrides {
            walk_depth: opts.walk_depth,
            slice_us: opts.slice_us,
            affinity_grace_us: opts.affinity_grace_us,
            decay_core_us: opts.decay_core_us,
            decay_llc_us: opts.decay_llc_us,
        };
        let knobs = policy.resolve(&over, derived.core_ns, derived.llc_ns)?;
        info!(
            "scx_sky {}: policy {} ({}), {} CPUs in {} cache domains, SMT {}",
            env!("CARGO_PKG_VERSION"),
            policy.name,
            policy.description,
            topo.online_cpus().count(),
            topo.llcs.len(),
            if topo.smt() { "on" } else { "off" },
        );
        info!(
            "decay thresholds: core {} us, llc {} us (derived {} / {} us); slice {} us, \
             affinity grace {} us, walk depth {}",
            knobs.decay_core_ns / 1000,
            knobs.decay_llc_ns / 1000,
            derived.core_ns / 1000,
            derived.llc_ns / 1000,
            knobs.slice_ns / 1000,
            knobs.affinity_grace_ns / 1000,
            knobs.walk_depth,
        );

        // Open the BPF object and hand it the topology and the policy.
        let mut builder = BpfSkelBuilder::default();
        builder.obj_builder.debug(opts.verbose);
        let mut skel = scx_ops_open!(
            builder,
            open_object,
            sky_ops,
            None::<libbpf_rs::libbpf_sys::bpf_object_open_opts>
        )?;
        skel.struct_ops.sky_ops_mut().exit_dump_len = opts.exit_dump_len;
        let rodata = skel
            .maps
            .rodata_data
            .as_mut()
            .context("BPF object has no rodata")?;
        rodata.nr_llcs = topo.llcs.len() as u32;
        for cpu in &topo.cpus {
            rodata.cpu_llc[cpu.id] = cpu
                .llc
                .map_or(intf::sky_consts_SKY_LLC_UNKNOWN, |l| l as u32);
        }
        write_config(
            &mut skel
                .maps
                .bss_data
                .as_mut()
                .context("BPF object has no bss")?
                .sky_cfg,
            &knobs,
            1,
        );

        // Verify and load, then attach: from here on tasks are ours.
        let mut skel = scx_ops_load!(skel, sky_ops, uei)?;
        let struct_ops = Some(scx_ops_attach!(skel, sky_ops)?);
        info!("scx_sky attached");
        Ok(Self {
            skel,
            struct_ops,
            stats_interval,
            run_for,
        })
    }

    /// Runs until asked to stop, the time limit passes, or the kernel ejects
    /// the scheduler; then detaches and reports why it ended.
    pub fn run(&mut self, shutdown: &AtomicBool) -> Result<UserExitInfo> {
        let started = Instant::now();
        let mut last_print = started;
        let mut last = self.counters()?;
        while !shutdown.load(Ordering::Relaxed) && !uei_exited!(&self.skel, uei) {
            if !self.run_for.is_zero() && started.elapsed() >= self.run_for {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            if !self.stats_interval.is_zero() && last_print.elapsed() >= self.stats_interval {
                let now = self.counters()?;
                info!("stats: {}", now.since(&last).line());
                last = now;
                last_print = Instant::now();
            }
        }
        // Totals over the whole run, read before detaching frees the maps.
        match self.counters() {
            Ok(total) => info!("stats total: {}", total.line()),
            Err(e) => warn!("could not read final stats: {e:#}"),
        }
        self.struct_ops.take();
        uei_report!(&self.skel, uei)
    }

    fn counters(&self) -> Result<Counters> {
        Counters::read(&self.skel.maps.sky_stats)
    }
}

fn write_config(cfg: &mut crate::bpf::skel::types::sky_config, k: &Knobs, generation: u64) {
    cfg.affinity = u32::from(k.affinity);
    cfg.walk_depth = k.walk_depth;
    cfg.decay_core_ns = k.decay_core_ns;
    cfg.decay_llc_ns = k.decay_llc_ns;
    cfg.slice_ns = k.slice_ns;
    cfg.affinity_grace_ns = k.affinity_grace_ns;
    cfg.sleeper_credit_ns = k.sleeper_credit_ns;
    cfg.starve_ns = k.starve_ns;
    cfg.generation = generation;
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

/// Sets a flag on SIGINT/SIGTERM so the run loop unloads cleanly.
pub fn shutdown_flag() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    let handler_flag = flag.clone();
    ctrlc::set_handler(move || handler_flag.store(true, Ordering::Relaxed))
        .context("installing the SIGINT/SIGTERM handler")?;
    Ok(flag)
}
