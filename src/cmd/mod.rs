//! The subcommands: each reads the running scheduler through its sockets
//! or runs a piece of the product on its own (the classifier on a stream,
//! the topology); none loads BPF.

pub mod gangs;
pub mod policy;
pub mod pvas;
pub mod stats;
pub mod top;

use crate::cli::{self, Command, RunOpts};
use anyhow::{Context, Result};
use sky_topology::{format_cpulist, Topology};
use std::path::Path;

/// Runs one subcommand; `run` holds the options every subcommand shares
/// (the stats socket); `dir_named`: was `--control-dir` given?
pub fn run(command: Command, run: &RunOpts, control_dir: &Path, dir_named: bool) -> Result<()> {
    match command {
        Command::Stats {
            json,
            openmetrics,
            meta,
            watch,
        } => {
            let format = match (json, openmetrics, meta) {
                (true, _, _) => stats::Format::Json,
                (_, true, _) => stats::Format::OpenMetrics,
                (_, _, true) => stats::Format::Meta,
                _ => stats::Format::Line,
            };
            let watch = watch.map(|s| cli::seconds("watch", s)).transpose()?;
            stats::run(run.stats_socket.as_deref(), format, watch)
        }
        Command::Policy(cmd) => {
            // Root has the control socket; anyone else the system bus
            // (unless a socket directory was named: that one, then).
            // SAFETY: geteuid has no preconditions.
            let root = unsafe { libc::geteuid() } == 0;
            policy::run(cmd, control_dir, !root && !dir_named)
        }
        Command::Top { snapshot } => {
            let mut link = top::Link::new(run.stats_socket.clone(), control_dir.to_path_buf());
            if snapshot {
                println!("{}", sky_tui::snapshot(&mut link, 80, 24)?);
                Ok(())
            } else {
                sky_tui::run(Box::new(link))
            }
        }
        Command::Policies => {
            for line in sky_policy::lookup::listing(&sky_policy::lookup::policy_dirs()) {
                println!("{line}");
            }
            Ok(())
        }
        Command::Completions { shell } => {
            let mut cmd = cli::command();
            clap_complete::generate(shell, &mut cmd, "scx_sky", &mut std::io::stdout());
            Ok(())
        }
        Command::Manpages { dir } => write_manpages(&dir),
        Command::Classify {
            replay,
            policy,
            classes,
        } => replay_classes(&replay, &policy, &classes),
        Command::Topology { cache_fill_mbps } => show_topology(cache_fill_mbps),
        Command::Pvas(cmd) => pvas::run(cmd),
        Command::Gangs { pid, json } => gangs::run(run.stats_socket.as_deref(), pid, json),
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

/// scx_sky.8, then scx_sky-COMMAND.8 (and deeper) for every subcommand.
fn write_manpages(dir: &Path) -> Result<()> {
    fn write(cmd: clap::Command, dir: &Path) -> Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            write(sub.clone(), dir)?;
        }
        let man = clap_mangen::Man::new(cmd).section("8");
        let path = dir.join(man.get_filename());
        let mut file =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        man.render(&mut file)
            .with_context(|| format!("writing {}", path.display()))
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut cmd = cli::command().disable_help_subcommand(true);
    // Subcommands are named scx_sky-COMMAND, as clap_mangen expects.
    cmd.build();
    write(cmd, dir)
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
