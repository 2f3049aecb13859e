//! Turns one benchmark boot's result lines into tables: per cell, EEVDF's
//! figures and each scx_sky variant's as ratios to them, judged against
//! the target. Every figure comes from the kernel's per-task counters, as
//! the workloads report them.

use super::plan::{Cell, Plan, BURST_US};
use crate::markdown::Table;
use crate::report::{self, Fields};
use crate::vm::CpuTopology;
use anyhow::{bail, Context, Result};

/// How far below EEVDF's last-CPU share scx_sky may be, in points.
pub const SHARE_SLACK_POINTS: f64 = 1.0;
/// The least work scx_sky must do, as a fraction of EEVDF's.
pub const MIN_WORK_RATIO: f64 = 0.98;

/// What the guest said about itself (the scenario's `bench` line).
#[derive(Debug, Clone, PartialEq)]
pub struct Guest {
    pub date: String,
    pub kernel: String,
    pub cpus: u32,
}

impl Guest {
    /// Reads the scenario's `bench-header key=value ...` line.
    pub fn parse(output: &str) -> Result<Guest> {
        let f = report::one_line(output, "bench-header ")
            .context("the scenario printed no bench header")?;
        let get = |k: &str| {
            f.get(k)
                .filter(|v| !v.is_empty())
                .cloned()
                .with_context(|| format!("the bench header has no {k}=: {f:?}"))
        };
        let cpus = report::number(&f, "cpus")?;
        if !(1.0..=1024.0).contains(&cpus) || cpus.fract() != 0.0 {
            bail!("the bench header's cpus={cpus} is not a CPU count");
        }
        Ok(Guest {
            date: get("date")?,
            kernel: get("kernel")?,
            cpus: cpus as u32,
        })
    }
}

/// One workload run, or why it has no figures.
type Outcome<'a> = std::result::Result<&'a Fields, String>;

/// Finds the run of `sched` (`eevdf` or `variant<i>`) in `cell` and checks it
/// is valid: the workload finished and, for scx_sky, the scheduler stayed
/// loaded throughout, exited cleanly and the kernel logged no error.
fn outcome<'a>(runs: &'a [Fields], cell: &str, sched: &str) -> Outcome<'a> {
    let field = |r: &Fields, k: &str| r.get(k).map(String::as_str).unwrap_or("").to_string();
    let run = runs
        .iter()
        .find(|r| field(r, "cell") == cell && field(r, "sched") == sched)
        .ok_or_else(|| "no result".to_string())?;
    match field(run, "failed").as_str() {
        "" => {}
        "start" => return Err("scx_sky did not start".into()),
        "workload" => return Err("the workload failed".into()),
        other => return Err(format!("failed: {other}")),
    }
    if sched != "eevdf" {
        let exit = field(run, "sky_exit");
        if exit != "0" {
            return Err(format!("scx_sky exited with status {exit}"));
        }
        let state = field(run, "state");
        if state != "enabled" {
            return Err(format!("sched_ext was {state:?} at the end of the run"));
        }
        let errors = field(run, "errors");
        if errors != "0" {
            return Err(format!("{errors} kernel error lines (see dmesg above)"));
        }
    }
    Ok(run)
}

/// A cache-loop run's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoopFigures {
    /// Share of timeslices begun on the CPU of the one before, %.
    pub share: f64,
    pub migrations: f64,
    pub work: f64,
    /// Burst-and-sleep cycles completed. Not judged: under TCG with one
    /// thread for every vCPU, a scheduler that completes more cycles spends
    /// more of the host's time in the guest kernel and shows less work.
    pub cycles: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

impl LoopFigures {
    pub fn of(f: &Fields) -> Result<Self> {
        let slices = report::number(f, "timeslices")?;
        let migrations = report::number(f, "migrations")?;
        if slices <= 0.0 {
            bail!("no timeslices counted: {f:?}");
        }
        Ok(LoopFigures {
            share: 100.0 * (1.0 - migrations / slices),
            migrations,
            work: report::number(f, "passes")?,
            cycles: report::number(f, "cycles")?,
            p50_us: report::number(f, "wait_p50_us")?,
            p99_us: report::number(f, "wait_p99_us")?,
        })
    }

    /// The target's parts this run misses against EEVDF's `base`.
    pub fn misses(&self, base: &LoopFigures) -> Vec<&'static str> {
        let mut miss = Vec::new();
        if self.share < base.share - SHARE_SLACK_POINTS {
            miss.push("last-CPU");
        }
        if self.p99_us > base.p99_us {
            miss.push("p99 wait");
        }
        if self.work < MIN_WORK_RATIO * base.work {
            miss.push("work");
        }
        miss
    }
}

/// A ping-pong run's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StormFigures {
    pub round_trips: f64,
    pub per_s: f64,
    pub migrations: f64,
    pub share: f64,
}

impl StormFigures {
    pub fn of(f: &Fields) -> Result<Self> {
        let slices = report::number(f, "timeslices")?;
        let migrations = report::number(f, "migrations")?;
        if slices <= 0.0 {
            bail!("no timeslices counted: {f:?}");
        }
        Ok(StormFigures {
            round_trips: report::number(f, "round_trips")?,
            per_s: report::number(f, "round_trips_per_s")?,
            migrations,
            share: 100.0 * (1.0 - migrations / slices),
        })
    }
}

/// `value / base` as `0.93x`, or "-" when there is no base to divide by.
fn ratio(value: f64, base: f64) -> String {
    if base > 0.0 {
        format!("{:.2}x", value / base)
    } else {
        "-".into()
    }
}

fn verdict(misses: &[&str]) -> String {
    if misses.is_empty() {
        "pass".into()
    } else {
        format!("miss: {}", misses.join(", "))
    }
}

/// One boot's tables and how many runs had no figures.
#[derive(Debug)]
pub struct Rendered {
    pub text: String,
    pub failed_runs: usize,
}

fn sched_names(plan: &Plan) -> Vec<(String, String)> {
    std::iter::once(("eevdf".to_string(), "EEVDF".to_string()))
        .chain(
            plan.variants
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("variant{i}"), format!("scx_sky {v}"))),
        )
        .collect()
}

/// Renders one boot: the header, the sweep table, the storm table and a
/// pass count per variant.
pub fn render(topology: CpuTopology, plan: &Plan, output: &str) -> Result<Rendered> {
    let guest = Guest::parse(output)?;
    if guest.cpus != topology.cpus() {
        bail!(
            "the guest has {} CPUs but topology {topology} has {}",
            guest.cpus,
            topology.cpus()
        );
    }
    let runs = report::lines_with(output, "result ");
    let mut text = format!(
        "### {topology} ({} CPUs), {}, guest kernel {}\n\n",
        guest.cpus, guest.date, guest.kernel
    );
    text.push_str(&format!(
        "qemu TCG, {} s per run, every run shown; figures from the kernel's \
         /proc/<pid>/sched and schedstat; scx_sky as ratios to EEVDF in the same cell.\n\
         TARGET: last-CPU share at most {SHARE_SLACK_POINTS} point below EEVDF's, \
         p99 run-queue wait at most EEVDF's, work at least {MIN_WORK_RATIO}x EEVDF's; \
         storm: round trips at least 1.00x EEVDF's.\n\n",
        plan.seconds
    ));
    text.push_str(&watchdog(&runs));
    let mut failed = 0;
    let mut passes = vec![0usize; plan.variants.len()];
    if !plan.cells.is_empty() {
        text.push_str(&format!(
            "SKY-1 workload ({} ms bursts, sleep between bursts, array per task, tasks per CPU):\n\n",
            BURST_US as f64 / 1000.0
        ));
        let table = sweep_table(plan, &runs, guest.cpus, &mut failed, &mut passes);
        text.push_str(&table.render());
        text.push('\n');
    }
    if plan.storm {
        text.push_str(&format!(
            "Wakeup storm (sky-work pingpong, {} pairs bouncing one byte over pipes):\n\n",
            guest.cpus
        ));
        let table = storm_table(plan, &runs, &mut failed, &mut passes);
        text.push_str(&table.render());
        text.push('\n');
    }
    let groups = plan.cells.len() + usize::from(plan.storm);
    let cells = match plan.cells.len() {
        1 => "1 cell".to_string(),
        n => format!("{n} cells"),
    };
    let what = match (plan.cells.len(), plan.storm) {
        (0, _) => "the storm".to_string(),
        (_, false) => cells,
        (_, true) => format!("{cells} and the storm"),
    };
    for (i, v) in plan.variants.iter().enumerate() {
        text.push_str(&format!(
            "scx_sky {v}: meets the target in {} of {groups} ({what})\n",
            passes[i]
        ));
    }
    if failed > 0 {
        text.push_str(&format!("{failed} runs had no figures (see the rows)\n"));
    }
    Ok(Rendered {
        text,
        failed_runs: failed,
    })
}

/// The sched_ext watchdog the scx_sky runs had, as scx_sky reported it.
fn watchdog(runs: &[Fields]) -> String {
    let mut values: Vec<&str> = runs
        .iter()
        .filter(|r| r.contains_key("sky_exit"))
        .map(|r| r.get("watchdog_ms").map_or("unconfirmed", String::as_str))
        .collect();
    let total = values.len();
    let unconfirmed = values.iter().filter(|v| v.parse::<u32>().is_err()).count();
    values.sort_unstable();
    values.dedup();
    match values[..] {
        [] => String::new(),
        [ms] if unconfirmed == 0 => format!("sched_ext watchdog {ms} ms in every scx_sky run.\n\n"),
        _ if unconfirmed > 0 => {
            format!(
                "sched_ext watchdog NOT confirmed in {unconfirmed} of {total} scx_sky runs.\n\n"
            )
        }
        _ => format!("sched_ext watchdog varied: {} ms.\n\n", values.join(", ")),
    }
}

fn sweep_table(
    plan: &Plan,
    runs: &[Fields],
    cpus: u32,
    failed: &mut usize,
    passes: &mut [usize],
) -> Table {
    let mut table = Table::new(&[
        "sleep",
        "array",
        "tasks/CPU",
        "scheduler",
        "last-CPU",
        "migrations",
        "work",
        "cycles",
        "p50 wait",
        "p99 wait",
        "target",
    ]);
    for cell in &plan.cells {
        let id = cell.id();
        let mut base = None;
        for (n, (sched, name)) in sched_names(plan).into_iter().enumerate() {
            let mut row = vec![String::new(); 3];
            if n == 0 {
                row = cell_columns(cell, cpus);
            }
            row.push(name);
            let figures = outcome(runs, &id, &sched)
                .and_then(|f| LoopFigures::of(f).map_err(|e| format!("{e:#}")));
            match figures {
                Err(why) => {
                    *failed += 1;
                    table.pad_for_note(&mut row);
                    row.push(format!("no figures: {why}"));
                }
                Ok(f) if n == 0 => {
                    base = Some(f);
                    row.extend([
                        format!("{:.1} %", f.share),
                        format!("{}", f.migrations),
                        format!("{}", f.work),
                        format!("{}", f.cycles),
                        format!("{:.1} µs", f.p50_us),
                        format!("{:.1} µs", f.p99_us),
                        String::new(),
                    ]);
                }
                Ok(f) => match base {
                    None => {
                        row.push(format!("{:.1} %", f.share));
                        table.pad_for_note(&mut row);
                        row.push("no EEVDF baseline".into());
                    }
                    Some(b) => {
                        let misses = f.misses(&b);
                        if misses.is_empty() {
                            passes[n - 1] += 1;
                        }
                        row.extend([
                            format!("{:.1} % ({:+.1})", f.share, f.share - b.share),
                            format!("{} ({})", ratio(f.migrations, b.migrations), f.migrations),
                            ratio(f.work, b.work),
                            ratio(f.cycles, b.cycles),
                            ratio(f.p50_us, b.p50_us),
                            ratio(f.p99_us, b.p99_us),
                            verdict(&misses),
                        ]);
                    }
                },
            }
            table.row(row);
        }
    }
    table
}

fn cell_columns(cell: &Cell, cpus: u32) -> Vec<String> {
    vec![
        cell.sleep_label(),
        cell.array_label(),
        format!(
            "{} ({} tasks)",
            cell.tasks_per_cpu,
            cell.tasks_per_cpu * cpus
        ),
    ]
}

fn storm_table(plan: &Plan, runs: &[Fields], failed: &mut usize, passes: &mut [usize]) -> Table {
    let mut table = Table::new(&[
        "scheduler",
        "round trips",
        "per s",
        "ratio",
        "migrations",
        "last-CPU",
        "target",
    ]);
    let mut base: Option<StormFigures> = None;
    for (n, (sched, name)) in sched_names(plan).into_iter().enumerate() {
        let figures = outcome(runs, "storm", &sched)
            .and_then(|f| StormFigures::of(f).map_err(|e| format!("{e:#}")));
        let mut row = vec![name];
        match figures {
            Err(why) => {
                *failed += 1;
                table.pad_for_note(&mut row);
                row.push(format!("no figures: {why}"));
            }
            Ok(f) => {
                let target = match (n, base) {
                    (0, _) => {
                        base = Some(f);
                        String::new()
                    }
                    (_, None) => "no EEVDF baseline".into(),
                    (_, Some(b)) if f.round_trips >= b.round_trips => {
                        passes[n - 1] += 1;
                        "pass".into()
                    }
                    (_, Some(_)) => "miss: round trips".into(),
                };
                row.extend([
                    format!("{}", f.round_trips),
                    format!("{:.0}", f.per_s),
                    base.filter(|_| n > 0)
                        .map_or(String::new(), |b| ratio(f.round_trips, b.round_trips)),
                    format!("{}", f.migrations),
                    format!("{:.1} %", f.share),
                    target,
                ]);
            }
        }
        table.row(row);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::plan::parse_cell;

    const HEADER: &str = "bench-header date=2026-11-22 kernel=7.3.4+bpo-amd64 cpus=4 seconds=5\n";

    fn plan(cells: &[&str], storm: bool) -> Plan {
        let cells = cells.iter().map(|c| parse_cell(c).unwrap()).collect();
        Plan::new(cells, &["-p sky1", "-p sky1-strict"], 5, storm).unwrap()
    }

    fn loop_line(cell: &str, sched: &str, migr: u32, passes: u32, p99: f64) -> String {
        let sky = if sched == "eevdf" {
            String::new()
        } else {
            "sky_exit=0 state=enabled errors=0 watchdog_ms=3000 ".into()
        };
        format!(
            "result cell={cell} sched={sched} {sky}workload=cache-loop procs=8 passes={passes} \
             migrations={migr} timeslices=1000 cycles={} wait_p50_us=10.0 wait_p99_us={p99} wait_max_us=900.0\n",
            passes / 10 + 1
        )
    }

    /// The trimmed cells of the first table line containing `needle`.
    fn row(text: &str, needle: &str) -> Vec<String> {
        let line = text
            .lines()
            .find(|l| l.starts_with('|') && l.contains(needle))
            .unwrap_or_else(|| panic!("no row with {needle:?} in\n{text}"));
        let inner = line.trim_start_matches('|').trim_end_matches('|');
        inner.split('|').map(|c| c.trim().to_string()).collect()
    }

    fn topo() -> CpuTopology {
        "1x2x2".parse().unwrap()
    }

    #[test]
    fn targets_are_judged_against_eevdf_in_the_same_cell() {
        let base = LoopFigures {
            share: 99.0,
            migrations: 10.0,
            work: 1000.0,
            cycles: 50.0,
            p50_us: 5.0,
            p99_us: 100.0,
        };
        assert!(base.misses(&base).is_empty());
        let just_within = LoopFigures {
            share: 98.0,
            work: 980.0,
            ..base
        };
        assert!(just_within.misses(&base).is_empty());
        let all_worse = LoopFigures {
            share: 97.9,
            migrations: 50.0,
            work: 979.0,
            cycles: 10.0,
            p50_us: 1.0,
            p99_us: 100.1,
        };
        assert_eq!(all_worse.misses(&base), ["last-CPU", "p99 wait", "work"]);
    }

    #[test]
    fn a_boot_renders_one_row_per_run_with_verdicts() {
        let mut out = String::from(HEADER);
        out += &loop_line("100:4:2", "eevdf", 10, 1000, 100.0);
        out += &loop_line("100:4:2", "variant0", 20, 990, 90.0); // pass: 98.0 % vs 99.0 %
        out += &loop_line("100:4:2", "variant1", 100, 900, 200.0); // misses all three
        out += "result cell=storm sched=eevdf workload=pingpong pairs=4 seconds=5 round_trips=1000 round_trips_per_s=200.0 migrations=4 timeslices=4000\n";
        out += "result cell=storm sched=variant0 sky_exit=0 state=enabled errors=0 watchdog_ms=3000 workload=pingpong pairs=4 seconds=5 round_trips=1100 round_trips_per_s=220.0 migrations=40 timeslices=4400\n";
        out += "result cell=storm sched=variant1 failed=start\n";
        let r = render(topo(), &plan(&["100:4:2"], true), &out).unwrap();
        let t = &r.text;
        assert!(
            t.contains("### 1x2x2 (4 CPUs), 2026-11-22, guest kernel 7.3.4+bpo-amd64"),
            "{t}"
        );
        assert_eq!(
            row(t, "| 0.1 ms"),
            [
                "0.1 ms",
                "4 KiB",
                "2 (8 tasks)",
                "EEVDF",
                "99.0 %",
                "10",
                "1000",
                "101",
                "10.0 µs",
                "100.0 µs",
                ""
            ]
        );
        assert_eq!(
            row(t, "scx_sky -p sky1 "),
            [
                "",
                "",
                "",
                "scx_sky -p sky1",
                "98.0 % (-1.0)",
                "2.00x (20)",
                "0.99x",
                "0.99x",
                "1.00x",
                "0.90x",
                "pass"
            ]
        );
        assert_eq!(
            row(t, "scx_sky -p sky1-strict ")[4..],
            [
                "90.0 % (-9.0)",
                "10.00x (100)",
                "0.90x",
                "0.90x",
                "1.00x",
                "2.00x",
                "miss: last-CPU, p99 wait, work"
            ]
        );
        assert_eq!(
            row(t, "| 1100 "),
            [
                "scx_sky -p sky1",
                "1100",
                "220",
                "1.10x",
                "40",
                "99.1 %",
                "pass"
            ]
        );
        assert!(t.contains("no figures: scx_sky did not start"), "{t}");
        assert!(
            t.contains("scx_sky -p sky1: meets the target in 2 of 2 (1 cell and the storm)"),
            "{t}"
        );
        assert!(
            t.contains("scx_sky -p sky1-strict: meets the target in 0 of 2 (1 cell and the storm)"),
            "{t}"
        );
        assert_eq!(r.failed_runs, 1);
        // Every line of the table has the same number of columns.
        let widths: Vec<usize> = t
            .lines()
            .filter(|l| l.starts_with("| 0.1") || l.starts_with("|   "))
            .map(|l| l.chars().count())
            .collect();
        assert_eq!(widths.len(), 3);
        assert!(widths.iter().all(|w| *w == widths[0]), "{t}");
    }

    #[test]
    fn invalid_runs_have_no_figures() {
        let mut out = String::from(HEADER);
        out += &loop_line("100:4:2", "eevdf", 10, 1000, 100.0);
        out += &loop_line("100:4:2", "variant0", 20, 990, 90.0).replace("sky_exit=0", "sky_exit=1");
        out += &loop_line("100:4:2", "variant1", 20, 990, 90.0)
            .replace("state=enabled", "state=disabled");
        let r = render(topo(), &plan(&["100:4:2", "500:64:1"], false), &out).unwrap();
        assert!(
            r.text.contains("scx_sky exited with status 1"),
            "{}",
            r.text
        );
        assert!(r.text.contains("sched_ext was \"disabled\""), "{}", r.text);
        // The second cell printed nothing at all: three missing runs.
        assert_eq!(r.text.matches("no figures: no result").count(), 3);
        assert_eq!(r.failed_runs, 5);
        let unset = loop_line("100:4:2", "variant0", 1, 1, 1.0).replace("3000", "unconfirmed");
        let runs = report::lines_with(&(unset + &loop_line("x", "variant1", 1, 1, 1.0)), "result ");
        assert_eq!(
            watchdog(&runs),
            "sched_ext watchdog NOT confirmed in 1 of 2 scx_sky runs.\n\n"
        );
        let errors = loop_line("100:4:2", "variant0", 1, 1, 1.0).replace("errors=0", "errors=2");
        let runs = report::lines_with(&errors, "result ");
        assert!(outcome(&runs, "100:4:2", "variant0")
            .unwrap_err()
            .contains("2 kernel error"));
    }

    #[test]
    fn a_missing_or_broken_header_is_an_error() {
        let body = loop_line("100:4:2", "eevdf", 10, 1000, 100.0);
        let err = render(topo(), &plan(&["100:4:2"], false), &body).unwrap_err();
        assert!(format!("{err:#}").contains("bench header"), "{err:#}");
        let wrong_cpus = format!("bench-header date=2026-11-22 kernel=k cpus=8\n{body}");
        let err = render(topo(), &plan(&["100:4:2"], false), &wrong_cpus).unwrap_err();
        assert!(err.to_string().contains("8 CPUs"), "{err:#}");
        let no_kernel = format!("bench-header date=2026-11-22 cpus=4\n{body}");
        assert!(render(topo(), &plan(&["100:4:2"], false), &no_kernel).is_err());
        let bad = "bench-header date=x kernel=y cpus=4\nresult cell=100:4:2 sched=eevdf workload=cache-loop passes=1 migrations=0 timeslices=0 wait_p50_us=1 wait_p99_us=1\n";
        let r = render(topo(), &plan(&["100:4:2"], false), bad).unwrap();
        assert!(r.text.contains("no timeslices counted"), "{}", r.text);
    }
}
