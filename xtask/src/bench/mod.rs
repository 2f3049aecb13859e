//! `cargo xtask bench`: the SKY-1 workload swept over sleep, array size
//! and load, plus a wakeup storm, under EEVDF and each scx_sky variant, in
//! one VM boot per topology. A benchmark, not a test: it reports figures
//! and marks each against the target, it does not assert.

pub mod plan;
pub mod table;

use crate::vm::{self, CpuTopology, VmConfig};
use anyhow::{bail, Result};
use clap::Args;
use plan::Plan;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Args, Clone, Debug)]
pub struct BenchArgs {
    /// Guest topologies as SOCKETSxCORESxTHREADS, comma-separated; one boot
    /// each [default: 1x2x2,2x2x2].
    #[arg(long, value_delimiter = ',')]
    pub topology: Vec<CpuTopology>,
    /// Seconds per workload run [default: 5; 3 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub seconds: Option<u32>,
    /// Four representative cells instead of the full sweep of 36.
    #[arg(long)]
    pub quick: bool,
    /// Only the wakeup storm (sky-work pingpong, one pair per guest CPU).
    #[arg(long, conflicts_with_all = ["quick", "cell"])]
    pub storm: bool,
    /// Only these cells, as SLEEP_US:ARRAY_KB:TASKS_PER_CPU (repeatable),
    /// with the storm; e.g. `--cell 5000:4:3` to work on one cell.
    #[arg(long, value_parser = plan::parse_cell, conflicts_with = "quick")]
    pub cell: Vec<plan::Cell>,
    /// Compare these scx_sky argument strings with EEVDF instead of the
    /// standard variants (repeatable), e.g. `--variant "-p sky1 --affinity-grace-us 2000"`.
    #[arg(long, allow_hyphen_values = true, value_parser = plan::parse_variant)]
    pub variant: Vec<String>,
    /// Boot this kernel image instead of the downloaded one.
    #[arg(long, conflicts_with = "kernel_version")]
    pub kernel: Option<PathBuf>,
    /// Boot this Debian kernel: an exact version or a series such as 6.16.
    #[arg(long, value_name = "VER")]
    pub kernel_version: Option<String>,
    /// Guest memory in MiB.
    #[arg(long, default_value_t = 2048)]
    pub memory_mb: u32,
    /// Give up on a boot after this many seconds [default: estimated from
    /// the number of runs].
    #[arg(long)]
    pub timeout: Option<u64>,
}

impl BenchArgs {
    pub fn plan(&self) -> Result<Plan> {
        let cells = if self.storm {
            Vec::new()
        } else if !self.cell.is_empty() {
            self.cell.clone()
        } else if self.quick {
            plan::quick_sweep()
        } else {
            plan::full_sweep()
        };
        let seconds = self.seconds.unwrap_or(if self.quick { 3 } else { 5 });
        let variants: Vec<&str> = if self.variant.is_empty() {
            plan::SKY_VARIANTS.to_vec()
        } else {
            self.variant.iter().map(String::as_str).collect()
        };
        Plan::new(cells, &variants, seconds, true)
    }
}

/// Boots each topology in turn, prints its tables as soon as it is done,
/// then all of them together for pasting into docs/design.md.
pub fn run(args: &BenchArgs) -> Result<()> {
    let plan = args.plan()?;
    let topologies = plan::topologies(&args.topology)?;
    let started = Instant::now();
    let mut tables = Vec::new();
    let mut failed_runs = 0;
    for topology in topologies {
        let cfg = VmConfig {
            kernel: args.kernel.clone(),
            kernel_version: args.kernel_version.clone(),
            topology,
            memory_mb: args.memory_mb,
            timeout: args
                .timeout
                .map_or_else(|| plan.timeout(), Duration::from_secs),
            echo: true,
            ..VmConfig::default()
        };
        eprintln!(
            "xtask: bench on {topology}: {} runs of {} s in one boot",
            plan.runs(),
            plan.seconds
        );
        let boot = Instant::now();
        let out = vm::run(&cfg, &plan.command())?;
        // Render what there is before judging the status: a scenario that
        // failed late still printed figures worth seeing.
        let rendered = table::render(topology, &plan, &out.output);
        if let Ok(r) = &rendered {
            println!("\n{}", r.text);
            println!("(boot on {topology} took {})\n", minutes(boot.elapsed()));
        }
        if out.status != 0 {
            bail!(
                "the benchmark scenario on {topology} failed with status {}",
                out.status
            );
        }
        let r = rendered?;
        failed_runs += r.failed_runs;
        tables.push(r.text);
    }
    if tables.len() > 1 {
        println!("\nAll topologies:\n\n{}", tables.join("\n"));
    }
    println!("bench wall time {}", minutes(started.elapsed()));
    if failed_runs > 0 {
        bail!("{failed_runs} runs had no figures: see \"no figures\" in the tables");
    }
    Ok(())
}

fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02} min", s / 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn parse(args: &[&str]) -> Result<BenchArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied())).map(|c| c.bench)
    }

    #[test]
    fn options_choose_the_plan() {
        let full = parse(&[]).unwrap().plan().unwrap();
        assert_eq!((full.cells.len(), full.seconds, full.storm), (36, 5, true));
        let quick = parse(&["--quick"]).unwrap().plan().unwrap();
        assert_eq!((quick.cells.len(), quick.seconds), (4, 3));
        let storm = parse(&["--storm", "--seconds", "7"])
            .unwrap()
            .plan()
            .unwrap();
        assert_eq!(
            (storm.cells.len(), storm.seconds, storm.storm),
            (0, 7, true)
        );
        let picked = parse(&["--cell", "5000:4:3", "--cell", "100:64:1"])
            .unwrap()
            .plan()
            .unwrap();
        assert_eq!(picked.cells.len(), 2);
        assert_eq!(picked.cells[0].id(), "5000:4:3");
        assert_eq!(picked.variants, plan::SKY_VARIANTS);
        let tuned = parse(&["--quick", "--variant", "-p sky1 --starve-ms 80"])
            .unwrap()
            .plan()
            .unwrap();
        assert_eq!(tuned.variants, ["-p sky1 --starve-ms 80"]);
        let two = parse(&["--topology", "1x2x2,2x1x2"]).unwrap();
        assert_eq!(plan::topologies(&two.topology).unwrap().len(), 2);
    }

    #[test]
    fn bad_options_are_refused_by_name() {
        for (args, name) in [
            (&["--seconds", "0"][..], "--seconds"),
            (&["--topology", "2x2"], "--topology"),
            (&["--quick", "--storm"], "--storm"),
            (&["--cell", "1:2"], "--cell"),
            (&["--variant", "-p 'x'"], "variant"),
        ] {
            let err = parse(args).expect_err("accepted").to_string();
            assert!(err.contains(name), "{args:?}: {err}");
        }
    }

    #[test]
    fn durations_read_as_minutes() {
        assert_eq!(minutes(Duration::from_secs(125)), "2:05 min");
    }
}
