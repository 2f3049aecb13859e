//! `cargo xtask eval`: named scenarios, each in one VM boot under EEVDF,
//! the anchors (scx_bpfland, scx_cosmos, scx_lavd) and scx_sky's
//! presets, judged by instruments that do not ask the schedulers: the
//! tracepoint observer (`sky-work trace-waits`) and the cache model
//! (xtask/cachesim). Writes Markdown tables and PNG plots, every figure
//! beside EEVDF's from the same boot. A benchmark: it asserts nothing
//! unless `--strict`.

pub mod figures;
pub mod native;
pub mod plot;
pub mod render;
pub mod roster;
pub mod scenario;
pub mod targets;

use crate::cachesim;
use crate::paths::{output, workspace_root};
use crate::vm::{self, VmConfig};
use anyhow::{bail, Context, Result};
use clap::Args;
use roster::{Kind, Sched};
use scenario::Scenario;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

#[derive(Args, Clone, Debug)]
pub struct EvalArgs {
    /// Scenarios, comma-separated [default: all].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub scenario: Vec<Scenario>,
    /// Schedulers beside EEVDF, comma-separated: anchors (scx_bpfland,
    /// scx_cosmos, scx_lavd) and scx_sky presets (sky1, sky1-strict,
    /// vtime) [default: all of them].
    #[arg(long, value_delimiter = ',', value_parser = roster::parse_name)]
    pub sched: Vec<Kind>,
    /// Leave the anchors out, for this reason (they stay in the tables,
    /// marked skipped with it): building them takes ~12 minutes.
    #[arg(long, value_name = "REASON")]
    pub skip_anchors: Option<String>,
    /// Runs per scheduler, each with new processes [default: per scenario].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: Option<u32>,
    /// Seconds per run [default: per scenario].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=600))]
    pub seconds: Option<u32>,
    /// Directory for results.md and the plots [default: target/eval/DATE-TIME].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also keep this run as the latest: docs/results.md, plots in docs/results/.
    #[arg(long)]
    pub update_docs: bool,
    /// Fail unless every scheduler that could run started, ran every run
    /// without being ejected and left no kernel errors.
    #[arg(long)]
    pub strict: bool,
    /// Boot this Debian kernel: an exact version or a series such as 6.16.
    #[arg(long, value_name = "VER", conflicts_with = "native")]
    pub kernel_version: Option<String>,
    /// Run on this machine instead of in a VM: real hardware with a
    /// sched_ext kernel, as root. No cache model: the PMU's cache misses
    /// (perf stat) fill the miss-rate columns.
    #[arg(long)]
    pub native: bool,
}

impl EvalArgs {
    pub fn scenarios(&self) -> Vec<Scenario> {
        if self.scenario.is_empty() {
            <Scenario as clap::ValueEnum>::value_variants().to_vec()
        } else {
            self.scenario.clone()
        }
    }
}

/// The guest command: the roster as environment variables, then eval.sh.
/// Natively the anchors run from the cache, not from the guest's /usr/bin.
fn command(scenario: Scenario, roster: &[Sched], runs: u32, seconds: u32, native: bool) -> String {
    let (workload, arg) = scenario.workload();
    let mut cmd = format!(
        "EVAL_SCHEDS={} EVAL_RUNS={runs} EVAL_SECONDS={seconds}",
        roster.len()
    );
    if let Some(a) = arg {
        cmd.push_str(&format!(" EVAL_ARG={a}"));
    }
    for (i, s) in roster.iter().enumerate() {
        let c = match (&s.unavailable, &s.kind) {
            (Some(_), _) => "skip".to_string(),
            (None, Kind::Anchor(_)) if native => s
                .binary
                .as_ref()
                .map_or("skip".into(), |b| b.display().to_string()),
            (None, Kind::Sky(_)) if !scenario.sky_args().is_empty() => {
                format!("{} {}", s.guest_command(), scenario.sky_args())
            }
            (None, _) => s.guest_command(),
        };
        // Commands are built here from fixed words: no quotes inside.
        cmd.push_str(&format!(" EVAL_SCHED_{i}='{c}'"));
    }
    cmd.push_str(&format!(" sh ./eval.sh {workload}"));
    cmd
}

/// What the figures were measured with, for the report's head.
fn provenance(roster: &[Sched]) -> String {
    let git = output(
        Command::new("git")
            .args(["describe", "--always", "--dirty"])
            .current_dir(workspace_root()),
    )
    .unwrap_or_else(|_| "unknown".into());
    let qemu = output(Command::new("qemu-system-x86_64").arg("--version"))
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or("qemu: unknown")
        .to_string();
    let mut text = format!(
        "- scx_sky: git {}\n- {qemu} (TCG, one host thread)\n",
        git.trim()
    );
    for s in roster.iter().skip(1) {
        text += &format!(
            "- {}: {}\n",
            s.label(),
            s.unavailable.as_deref().unwrap_or("ran")
        );
    }
    text
}

/// Runs one scenario's boot and returns its Markdown section.
fn run_scenario(
    args: &EvalArgs,
    scenario: Scenario,
    roster: &[Sched],
    dir: &Path,
    verdicts: &mut Vec<targets::Verdict>,
) -> Result<String> {
    let roster = &roster::with_references(roster, scenario.references());
    let runs = args.runs.unwrap_or(scenario.default_runs());
    let seconds = args.seconds.unwrap_or(scenario.default_seconds());
    let cfg = VmConfig {
        kernel_version: args.kernel_version.clone(),
        topology: scenario.topology(),
        timeout: Duration::from_secs(scenario.timeout_s(roster.len(), runs, seconds)),
        extra_binaries: roster::guest_binaries(roster),
        cache_model: scenario.cache_model(),
        icount_shift: scenario.icount_shift(),
        pmem_mb: scenario.pmem_mb(),
        ..VmConfig::default()
    };
    let machine = if args.native {
        "this machine".to_string()
    } else {
        cfg.topology.to_string()
    };
    eprintln!(
        "xtask: eval {}: {} schedulers x {runs} runs of {seconds} s on {machine}",
        scenario.name(),
        roster.len(),
    );
    let cmd = command(scenario, roster, runs, seconds, args.native);
    let out = if args.native {
        native::run(&cmd)?
    } else {
        vm::run(&cfg, &cmd)?
    };
    fs::write(
        dir.join(format!("{}-console.txt", scenario.name())),
        &out.output,
    )?;
    if out.status != 0 {
        bail!(
            "the {} scenario failed in the guest (status {}); console in {}",
            scenario.name(),
            out.status,
            dir.display()
        );
    }
    let cache = out.cache.as_deref().map(cachesim::parse).transpose()?;
    let boot = figures::parse(&out.output, roster.len(), cache.as_ref())?;
    if args.strict {
        strict_check(&boot, roster)?;
    }
    let h = &boot.header;
    let mut md = format!(
        "## {}\n\n{} — kernel {}, {} CPUs ({}), {} runs of {} s per scheduler, {}.\n",
        scenario.name(),
        h.get("date").map_or("?", String::as_str),
        h.get("kernel").map_or("?", String::as_str),
        h.get("cpus").map_or("?", String::as_str),
        machine,
        runs,
        seconds,
        match &cfg.cache_model {
            _ if args.native => {
                "natively; miss rates from the PMU (cache-misses over cache-references, \
                 all CPUs)"
                    .into()
            }
            Some(m) => format!(
                "cache model {m}{}",
                cfg.icount_shift
                    .map_or(String::new(), |s| format!(", -icount shift={s}"))
            ),
            None => "no cache model".into(),
        }
    );
    md += &format!("\n{}\n\n", scenario.about_text());
    md += &scenario.report(&boot, roster, cache.as_ref(), dir, verdicts)?;
    Ok(md)
}

/// Every scenario's targets in one table, ahead of the scenarios.
fn targets_section(verdicts: &[targets::Verdict]) -> String {
    if verdicts.is_empty() {
        return String::new();
    }
    let met = verdicts.iter().filter(|v| v.met == Some(true)).count();
    let missed = verdicts.iter().filter(|v| v.met == Some(false)).count();
    format!(
        "\n## Targets\n\n`scx_sky -p {}` against the same boot's EEVDF and anchors \
         (`xtask/src/eval/targets.rs`): {met} met, {missed} missed, {} not judged.\n\n{}",
        targets::JUDGED,
        verdicts.len() - met - missed,
        targets::table(verdicts).render()
    )
}

/// `--strict`: every scheduler that could run did, cleanly.
fn strict_check(boot: &figures::Boot, roster: &[Sched]) -> Result<()> {
    for (i, s) in roster.iter().enumerate() {
        if s.unavailable.is_some() {
            continue;
        }
        let why = render::note(boot, roster, i);
        let runs = boot.runs_of(i).count();
        if !why.is_empty() || runs == 0 {
            bail!(
                "{}: {} ({runs} runs)",
                s.label(),
                if why.is_empty() { "no runs" } else { &why }
            );
        }
    }
    Ok(())
}

pub fn run(args: &EvalArgs) -> Result<()> {
    if args.native {
        native::preflight()?;
    }
    let roster = roster::roster(&args.sched, args.skip_anchors.as_deref());
    for s in &roster {
        if let Some(why) = &s.unavailable {
            eprintln!("xtask: eval: {} does not run: {why}", s.label());
        }
    }
    let dir = match &args.out {
        Some(d) => d.clone(),
        None => {
            let stamp = output(Command::new("date").arg("-u").arg("+%Y-%m-%d-%H%M%S"))?;
            workspace_root().join("target/eval").join(stamp.trim())
        }
    };
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let args_text: Vec<String> = std::env::args().skip(1).collect();
    let head = format!(
        "# scx_sky evaluation\n\nWritten by `cargo xtask {}` ([how to read it](evaluation.md)).\n\n{}",
        args_text.join(" "),
        provenance(&roster)
    );
    let results = dir.join("results.md");
    let mut failed = Vec::new();
    let mut sections = String::new();
    let mut verdicts = Vec::new();
    let mut md = head.clone();
    for scenario in args.scenarios() {
        let section = match run_scenario(args, scenario, &roster, &dir, &mut verdicts) {
            Ok(s) => s,
            Err(e) => {
                failed.push(scenario.name());
                format!("## {}\n\nfailed: {e:#}\n", scenario.name())
            }
        };
        println!("\n{section}");
        sections += &format!("\n{section}");
        md = format!("{head}{}{sections}", targets_section(&verdicts));
        fs::write(&results, &md)?;
    }
    eprintln!("xtask: eval: results in {}", results.display());
    if args.update_docs {
        update_docs(&dir, &md)?;
    }
    if !failed.is_empty() {
        bail!("scenarios failed: {}", failed.join(", "));
    }
    Ok(())
}

/// docs/results.md and docs/results/*.png become this run's.
fn update_docs(dir: &Path, md: &str) -> Result<()> {
    let docs = workspace_root().join("docs");
    let plots = docs.join("results");
    let _ = fs::remove_dir_all(&plots);
    fs::create_dir_all(&plots)?;
    let mut text = md.to_string();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "png") {
            let name = path
                .file_name()
                .context("plot name")?
                .to_string_lossy()
                .to_string();
            fs::copy(&path, plots.join(&name))?;
            text = text.replace(&format!("]({name})"), &format!("](results/{name})"));
        }
    }
    // The queue between machines is measured by its own command: its
    // section stays.
    let old = fs::read_to_string(docs.join("results.md")).unwrap_or_default();
    text = text.trim_end().to_string() + &crate::rdma_bench::kept_section(&old);
    fs::write(docs.join("results.md"), text)?;
    eprintln!("xtask: eval: docs/results.md and docs/results/ updated");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        eval: EvalArgs,
    }

    fn parse(args: &[&str]) -> Result<EvalArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("eval").chain(args.iter().copied())).map(|c| c.eval)
    }

    #[test]
    fn options_parse_and_bad_ones_are_refused_by_name() {
        let all = parse(&[]).unwrap();
        let every = <Scenario as clap::ValueEnum>::value_variants();
        assert_eq!(all.scenarios(), every);
        let some = parse(&[
            "--scenario",
            "sky1",
            "--sched",
            "sky1,scx_lavd",
            "--runs",
            "2",
        ])
        .unwrap();
        assert_eq!(some.sched.len(), 2);
        for (args, name) in [
            (&["--scenario", "nope"][..], "--scenario"),
            (&["--sched", "cfs"], "cfs"),
            (&["--runs", "0"], "--runs"),
            (&["--seconds", "0"], "--seconds"),
            (
                &["--native", "--kernel-version", "6.12"],
                "--kernel-version",
            ),
        ] {
            let err = parse(args).map(|_| ()).expect_err("accepted").to_string();
            assert!(err.contains(name), "{args:?}: {err}");
        }
    }

    #[test]
    fn the_guest_command_keeps_the_roster_in_order() {
        let roster = roster::roster(&[Kind::Sky("sky1"), Kind::Sky("vtime")], None);
        let cmd = command(Scenario::Sky1, &roster, 2, 3, false);
        assert_eq!(
            cmd,
            "EVAL_SCHEDS=3 EVAL_RUNS=2 EVAL_SECONDS=3 EVAL_SCHED_0='eevdf' \
             EVAL_SCHED_1='scx_sky -p sky1 --stats-interval 0' \
             EVAL_SCHED_2='scx_sky -p vtime --stats-interval 0' sh ./eval.sh sky1"
        );
        let skipped = roster::roster(&[], Some("test"));
        assert!(command(Scenario::Sky1, &skipped, 1, 1, false).contains("EVAL_SCHED_1='skip'"));
        let gangs = command(Scenario::Gangs4, &roster, 1, 1, false);
        assert!(gangs.contains(" EVAL_ARG=4 "), "{gangs}");
        assert!(
            gangs.contains("--stats-interval 0 --class mb-*=memory-bound'"),
            "{gangs}"
        );
        assert!(gangs.ends_with("sh ./eval.sh gangs"), "{gangs}");
    }
}
