//! scx_sky: parses the command line and hands off. The scheduler lives in
//! scheduler.rs, the BPF side in bpf/.

mod bpf;
mod bss;
mod classes;
mod cli;
mod control;
mod feeds;
mod gangs;
mod gangs_cli;
mod live_policy;
mod map_room;
mod pmu_cpus;
mod policy_cli;
mod pvas_cli;
mod scheduler;
mod stats;
mod stats_cli;
mod task_list;
mod top;
mod wakeup;

use anyhow::{Context, Result};
use clap::{CommandFactory, FromArgMatches};
use cli::{Cli, Command};
use scheduler::Scheduler;
use sky_topology::{format_cpulist, Topology};
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;

fn main() {
    // The statistics are listed under --help from the shared header's
    // descriptions, so the list cannot drift from what BPF counts.
    let help = format!("Statistics (printed as name=value):\n{}", stats::describe());
    let matches = Cli::command().after_long_help(help).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let level = if cli.run.verbose {
        simplelog::LevelFilter::Debug
    } else {
        simplelog::LevelFilter::Info
    };
    let _ = simplelog::TermLogger::init(
        level,
        simplelog::ConfigBuilder::new()
            .set_time_level(simplelog::LevelFilter::Error)
            .set_target_level(simplelog::LevelFilter::Off)
            .set_thread_level(simplelog::LevelFilter::Off)
            .build(),
        simplelog::TerminalMode::Stderr,
        simplelog::ColorChoice::Never,
    );
    if let Err(e) = dispatch(cli) {
        eprintln!("scx_sky: error: {e:#}");
        std::process::exit(1);
    }
}

fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        None => match cli.run.monitor {
            Some(secs) => stats_cli::run(
                cli.run.stats_socket.as_deref(),
                stats_cli::Format::Line,
                Some(cli::seconds("monitor", secs)?),
            ),
            None => run_scheduler(&cli.run, &cli.control_dir),
        },
        Some(Command::Stats {
            json,
            openmetrics,
            meta,
            watch,
        }) => {
            let format = match (json, openmetrics, meta) {
                (true, _, _) => stats_cli::Format::Json,
                (_, true, _) => stats_cli::Format::OpenMetrics,
                (_, _, true) => stats_cli::Format::Meta,
                _ => stats_cli::Format::Line,
            };
            let watch = watch.map(|s| cli::seconds("watch", s)).transpose()?;
            stats_cli::run(cli.run.stats_socket.as_deref(), format, watch)
        }
        Some(Command::Policy(cmd)) => policy_cli::run(cmd, &cli.control_dir),
        Some(Command::Top { snapshot }) => {
            let mut link = top::Link::new(cli.run.stats_socket.clone(), cli.control_dir.clone());
            if snapshot {
                println!("{}", sky_tui::snapshot(&mut link, 80, 24)?);
                Ok(())
            } else {
                sky_tui::run(&mut link)
            }
        }
        Some(Command::Policies) => {
            for name in sky_policy::preset_names() {
                let p = sky_policy::Policy::load(name)?;
                println!("{}", p.listing());
            }
            Ok(())
        }
        Some(Command::Classify {
            replay,
            policy,
            classes,
        }) => replay_classes(&replay, &policy, &classes),
        Some(Command::Topology { cache_fill_mbps }) => show_topology(cache_fill_mbps),
        Some(Command::Pvas(cmd)) => pvas_cli::run(cmd),
        Some(Command::Gangs { pid, json }) => {
            gangs_cli::run(cli.run.stats_socket.as_deref(), pid, json)
        }
    }
}

/// Loads the scheduler and keeps it running, reloading when the kernel
/// asks for a restart (e.g. a CPU came online in an unknown cache domain).
/// The control socket and the running policy outlive reloads; SIGHUP
/// re-reads the policy.
fn run_scheduler(opts: &cli::RunOpts, control_dir: &std::path::Path) -> Result<()> {
    let wakeup = wakeup::Wakeup::new()?;
    let shutdown = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        wakeup.on_signal(signal, shutdown.clone())?;
    }
    let reread = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    wakeup.on_signal(signal_hook::consts::SIGHUP, reread.clone())?;
    let live = live_policy::Switcher::new(scheduler::start_policy(opts)?);
    let mut open_object = MaybeUninit::uninit();
    // Bound once attached, kept across reloads, removed on the way out.
    let mut control = None;
    loop {
        let mut sched = Scheduler::init(opts, &live, &wakeup, &mut open_object)?;
        if control.is_none() {
            control = control::start(control_dir, live.clone(), wakeup.clone());
        }
        let exit = sched.run(&shutdown, &reread, &opts.policy)?;
        if shutdown.load(Ordering::Relaxed) || !exit.should_restart() {
            return Ok(());
        }
        log::info!("restarting at the kernel's request");
    }
}

/// `scx_sky classify --replay`: the classifier on a stream, no PMU needed.
fn replay_classes(stream: &str, policy: &str, class_rules: &[String]) -> Result<()> {
    use sky_classify::{replay, Hints, TaskId};
    let policy = sky_policy::Policy::load(policy)?;
    let hints = Hints::new(class_rules, &policy.class_rule)?;
    let text = match replay::SHIPPED.iter().find(|(name, _)| *name == stream) {
        Some((_, text)) => text.to_string(),
        None => std::fs::read_to_string(stream).with_context(|| {
            let names: Vec<_> = replay::SHIPPED.iter().map(|(n, _)| *n).collect();
            format!(
                "reading counter stream {stream} (not a file; shipped streams: {})",
                names.join(", ")
            )
        })?,
    };
    let records = replay::parse(&text, stream)?;
    let (decisions, classifier) = replay::run(&records, policy.classify)?;
    for d in &decisions {
        println!(
            "period {:>4}  {:<16} {} -> {}",
            d.period, d.task, d.transition.from, d.transition.to
        );
    }
    let mut tasks: Vec<&String> = records.iter().map(|r| &r.task).collect();
    tasks.sort();
    tasks.dedup();
    for task in tasks {
        let counted = classifier.class_of(task);
        let id = TaskId {
            pid: 0,
            comm: task,
            cgroup: "",
        };
        match hints.class_for(&id) {
            Some(hinted) => println!("final  {task:<16} {hinted} (hint; counters: {counted})"),
            None => println!("final  {task:<16} {counted}"),
        }
    }
    Ok(())
}

fn show_topology(cache_fill_mbps: u64) -> Result<()> {
    let topo = Topology::from_host()?;
    for (i, llc) in topo.llcs.iter().enumerate() {
        let size = llc
            .size_bytes
            .map_or("size unknown".into(), |s| format!("{} KiB", s >> 10));
        println!("llc {i}: cpus {} ({size})", format_cpulist(&llc.cpus));
    }
    let t = topo.decay_thresholds(cache_fill_mbps.saturating_mul(1_000_000).max(1));
    println!(
        "decay thresholds: core {} us, llc {} us",
        t.core_ns / 1000,
        t.llc_ns / 1000
    );
    Ok(())
}
