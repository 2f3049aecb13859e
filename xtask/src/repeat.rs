//! The flake finder's tally over N runs of the VM tests: each test's
//! passes out of the runs it ran in (and how many passed only when
//! measured again on a busy host), and the spread of every figure it
//! judged against its bound, as Markdown for docs/vm-bounds.md.

use crate::judge::{Basis, Figure, Op, Outcome, Verdict};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// What the runs so far showed.
#[derive(Debug, Default)]
pub struct Tally {
    tests: BTreeMap<String, TestRuns>,
    figures: BTreeMap<(String, String), Spread>,
    /// This run's tests as libtest started them, the ones it reported
    /// failed, and the ones that were measured again.
    started: BTreeSet<String>,
    failed: BTreeSet<String>,
    retried: BTreeSet<String>,
}

#[derive(Debug, Default)]
struct TestRuns {
    runs: u32,
    passes: u32,
    /// Passes that needed a second attempt (the host was busy).
    after_retry: u32,
    failed_in: Vec<u32>,
}

#[derive(Debug)]
struct Spread {
    op: Op,
    basis: Basis,
    at: String,
    bounds: Vec<f64>,
    values: Vec<f64>,
    /// Values past their bound.
    misses: u32,
}

impl Tally {
    /// Takes one line of a run's output.
    pub fn line(&mut self, line: &str) {
        if let Some(rest) = line.strip_prefix("test ") {
            if let Some((name, _)) = rest.split_once(" ... ") {
                self.started.insert(name.to_string());
            }
        } else if let Some(name) = line
            .strip_prefix("---- ")
            .and_then(|r| r.strip_suffix(" stdout ----"))
        {
            self.failed.insert(name.to_string());
        } else if let Some(v) = Verdict::parse(line) {
            if v.outcome == Outcome::Retry {
                self.retried.insert(v.test);
            }
        } else if let Some(f) = Figure::parse(line) {
            let spread = self
                .figures
                .entry((f.test.clone(), f.name.clone()))
                .or_insert_with(|| Spread {
                    op: f.op,
                    basis: f.basis,
                    at: f.at.clone(),
                    bounds: Vec::new(),
                    values: Vec::new(),
                    misses: 0,
                });
            spread.bounds.push(f.bound);
            spread.values.push(f.value);
            spread.misses += u32::from(!f.holds());
        }
    }

    /// Closes run `k`: every test libtest started counts one run.
    pub fn end_run(&mut self, k: u32) {
        for name in std::mem::take(&mut self.started) {
            let t = self.tests.entry(name.clone()).or_default();
            t.runs += 1;
            if self.failed.contains(&name) {
                t.failed_in.push(k);
            } else {
                t.passes += 1;
                t.after_retry += u32::from(self.retried.contains(&name));
            }
        }
        self.failed.clear();
        self.retried.clear();
    }

    /// The tests that failed in some run.
    pub fn failed_tests(&self) -> Vec<String> {
        self.tests
            .iter()
            .filter(|(_, t)| !t.failed_in.is_empty())
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// The tally of run logs a `--repeat` left (target/repeat/run-K.log),
    /// in the order given: runs of one commit from more than one sitting
    /// make one table.
    pub fn of_logs(logs: &[std::path::PathBuf]) -> anyhow::Result<Tally> {
        let mut tally = Tally::default();
        for (k, log) in (1..).zip(logs) {
            let text = std::fs::read_to_string(log)
                .map_err(|e| anyhow::anyhow!("reading the run log {}: {e}", log.display()))?;
            for line in text.lines() {
                tally.line(line);
            }
            tally.end_run(k);
        }
        Ok(tally)
    }

    /// The tables after `runs` runs.
    pub fn table(&self, runs: u32) -> String {
        let mut out = format!(
            "VM tests, {runs} run(s) in a row (`cargo xtask test --vm-only --repeat {runs}`)\n\n\
             | test | passed | of which after a busy-host retry | failed in run |\n\
             |---|---|---|---|\n"
        );
        for (name, t) in &self.tests {
            let failed: Vec<String> = t.failed_in.iter().map(u32::to_string).collect();
            let _ = writeln!(
                out,
                "| {name} | {}/{} | {} | {} |",
                t.passes,
                t.runs,
                t.after_retry,
                if failed.is_empty() {
                    "-".into()
                } else {
                    failed.join(", ")
                }
            );
        }
        out.push_str(
            "\nEvery judged figure over every attempt: the bound (a range where it \
             stretches with what the host took), the spread, and the worst value's \
             room: how far the worst value stays from the bound, in the figure's \
             unit (negative: past it), and as a ratio where both are positive \
             (bound/worst for a ceiling, worst/bound for a floor: above 1 passes).\n\n\
             | test | figure | basis | bound | min | median | max | room | n | past | at |\n\
             |---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for ((test, figure), s) in &self.figures {
            let mut v = s.values.clone();
            v.sort_by(f64::total_cmp);
            let (min, max) = (v[0], v[v.len() - 1]);
            let median = v[v.len() / 2];
            let (lo, hi) = min_max(&s.bounds);
            let (symbol, margin) = match s.op {
                Op::AtLeast => (">=", room(min, lo)),
                Op::AtMost => ("<=", room(lo, max)),
            };
            let bound = if (hi - lo).abs() < 1e-9 {
                format!("{symbol} {}", num(lo))
            } else {
                format!("{symbol} {}-{}", num(lo), num(hi))
            };
            let _ = writeln!(
                out,
                "| {test} | {figure} | {} | {bound} | {} | {} | {} | {margin} | {} | {} | {} |",
                s.basis.name(),
                num(min),
                num(median),
                num(max),
                v.len(),
                s.misses,
                s.at
            );
        }
        out
    }
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// How far `above` stays over `below` (a floor's worst over its bound, a
/// ceiling's bound over its worst): the difference, and the ratio where
/// both are positive. A wait in ticks past a promise is often negative,
/// where a ratio would say nothing.
fn room(above: f64, below: f64) -> String {
    let diff = num(above - below);
    if above > 0.0 && below > 0.0 {
        format!("{diff} ({:.2}x)", above / below)
    } else {
        diff
    }
}

/// A figure as the table shows it: four significant digits at most.
fn num(x: f64) -> String {
    if x == x.trunc() && x.abs() < 1e9 {
        format!("{x:.0}")
    } else if x.abs() >= 100.0 {
        format!("{x:.1}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(test: &str, value: f64, bound: f64) -> String {
        Figure {
            test: test.into(),
            attempt: 1,
            name: "wait_ms".into(),
            value,
            op: Op::AtMost,
            bound,
            basis: Basis::Property,
            at: "tests/vm.rs:1".into(),
        }
        .to_string()
    }

    #[test]
    fn passes_retries_failures_and_spreads_are_counted_per_run() {
        let mut t = Tally::default();
        // Run 1: a passes, b fails.
        for line in [
            "test a ... sky-vm: scenario x",
            &figure("a", 40.0, 80.0),
            "ok",
            "test b ... ",
            &figure("b", 90.0, 80.0),
            "---- b stdout ----",
            "test result: FAILED. 1 passed; 1 failed",
        ] {
            t.line(line);
        }
        t.end_run(1);
        // Run 2: a passes after a retry, b passes.
        let retry = Verdict {
            test: "a".into(),
            attempt: 1,
            outcome: Outcome::Retry,
            lost_share: 0.2,
        }
        .to_string();
        for line in [
            "test a ... ",
            &figure("a", 95.0, 80.0),
            &retry,
            &figure("a", 60.0, 80.0),
            "test b ... ",
            &figure("b", 70.0, 80.0),
        ] {
            t.line(line);
        }
        t.end_run(2);
        assert_eq!(t.failed_tests(), vec!["b".to_string()]);
        let table = t.table(2);
        assert!(table.contains("| a | 2/2 | 1 | - |"), "{table}");
        assert!(table.contains("| b | 1/2 | 0 | 1 |"), "{table}");
        // a's three attempts: 40, 60, 95 against <= 80, one past it.
        assert!(
            table.contains(
                "| a | wait_ms | property | <= 80 | 40 | 60 | 95 | -15 (0.84x) | 3 | 1 |"
            ),
            "{table}"
        );
        assert!(!table.contains("| result:"), "{table}");
    }

    #[test]
    fn logs_tally_as_runs_in_order_and_a_missing_log_is_named() {
        let dir = std::env::temp_dir().join(format!("sky-flakes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (one, two) = (dir.join("run-1.log"), dir.join("run-2.log"));
        std::fs::write(&one, format!("test a ... \n{}\n", figure("a", 40.0, 80.0))).unwrap();
        std::fs::write(&two, "test a ... \n---- a stdout ----\n").unwrap();
        let table = Tally::of_logs(&[one, two]).unwrap().table(2);
        assert!(table.contains("| a | 1/2 | 0 | 2 |"), "{table}");
        let missing = dir.join("run-3.log");
        let err = Tally::of_logs(std::slice::from_ref(&missing))
            .unwrap_err()
            .to_string();
        assert!(err.contains(&missing.display().to_string()), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(num(3.0), "3");
        assert_eq!(num(0.12345), "0.1235");
        assert_eq!(num(61.55), "61.55");
        assert_eq!(num(1234.56), "1234.6");
        assert_eq!(room(0.0, 0.0), "0");
        assert_eq!(room(1.0, 0.8), "0.2000 (1.25x)");
        assert_eq!(room(6.2, -1.8), "8");
    }
}
