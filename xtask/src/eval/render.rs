//! Tables: a scenario's figures as columns (each a function of a run),
//! one summary row per scheduler (the mean of its valid runs, and the
//! ratio to EEVDF's mean where the column asks for it) and one row per
//! run (every run is reported, not the best). A scheduler that did not
//! run keeps its row, with the reason.

use super::figures::{Boot, Run};
use super::roster::Sched;
use crate::markdown::Table;

/// How a column's values read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// 0..1, shown as a percentage.
    Share,
    /// Microseconds, shown as milliseconds.
    Us,
    /// Nanoseconds.
    Ns,
    /// A rate per second.
    PerSec,
    /// Gigabytes per second.
    GBps,
    /// A ratio of two figures of the same run.
    Factor,
}

impl Unit {
    pub(super) fn show(self, v: f64) -> String {
        match self {
            Unit::Share => format!("{:.2}%", v * 100.0),
            Unit::Us => format!("{:.2} ms", v / 1000.0),
            Unit::Ns => format!("{v:.0} ns"),
            Unit::PerSec if v >= 100.0 => format!("{v:.0}/s"),
            Unit::PerSec => format!("{v:.1}/s"),
            Unit::GBps => format!("{v:.3} GB/s"),
            Unit::Factor => format!("{v:.2}x"),
        }
    }
}

pub type Getter = Box<dyn Fn(&Run) -> Option<f64>>;

pub struct Column {
    pub name: String,
    pub unit: Unit,
    pub get: Getter,
    /// Show the ratio to EEVDF's mean beside the value.
    pub ratio: bool,
}

impl Column {
    pub fn new(
        name: &str,
        unit: Unit,
        ratio: bool,
        get: impl Fn(&Run) -> Option<f64> + 'static,
    ) -> Column {
        Column {
            name: name.to_string(),
            unit,
            get: Box::new(get),
            ratio,
        }
    }

    /// The mean over a scheduler's valid runs that have the figure.
    pub fn mean(&self, runs: &[&Run]) -> Option<f64> {
        mean(runs, &self.get)
    }
}

/// The mean of a figure over the runs that have it.
pub fn mean(runs: &[&Run], get: impl Fn(&Run) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = runs.iter().filter_map(|r| get(r)).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// A table headed `scheduler`, `second`, the columns, `note`.
fn table(second: &str, columns: &[Column]) -> Table {
    let mut head = vec!["scheduler", second];
    head.extend(columns.iter().map(|c| c.name.as_str()));
    head.push("note");
    Table::new(&head)
}

/// `value / base` as `0.93x`.
pub fn ratio(value: f64, base: Option<f64>) -> Option<f64> {
    base.filter(|b| *b > 0.0).map(|b| value / b)
}

/// The valid runs of scheduler `i`.
pub fn valid_runs(boot: &Boot, i: usize) -> Vec<&Run> {
    boot.runs_of(i).filter(|r| r.invalid().is_none()).collect()
}

/// What went wrong with scheduler `i`, for the note column.
pub fn note(boot: &Boot, roster: &[Sched], i: usize) -> String {
    if let Some(why) = &roster[i].unavailable {
        return why.clone();
    }
    let o = &boot.outcomes[i];
    if !o.started {
        return "did not start (see the log)".into();
    }
    let mut notes = Vec::new();
    let invalid: Vec<String> = boot.runs_of(i).filter_map(Run::invalid).collect();
    if !invalid.is_empty() {
        notes.push(format!(
            "{} runs invalid: {}",
            invalid.len(),
            invalid.join("; ")
        ));
    }
    if o.errors > 0 {
        notes.push(format!("{} kernel error lines", o.errors));
    }
    if o.exit.is_some_and(|e| e != 0) {
        notes.push(format!("exit status {}", o.exit.unwrap_or(-1)));
    }
    notes.join(", ")
}

/// One row per scheduler: means, ratios to EEVDF (row 0), a note.
pub fn summary(boot: &Boot, roster: &[Sched], columns: &[Column]) -> Table {
    let mut t = table("runs", columns);
    let base: Vec<Option<f64>> = columns
        .iter()
        .map(|c| c.mean(&valid_runs(boot, 0)))
        .collect();
    for (i, s) in roster.iter().enumerate() {
        let runs = valid_runs(boot, i);
        let mut row = vec![s.label(), runs.len().to_string()];
        for (c, b) in columns.iter().zip(&base) {
            row.push(match c.mean(&runs) {
                None => "-".into(),
                Some(v) => match ratio(v, *b).filter(|_| c.ratio && i > 0) {
                    Some(r) => format!("{} ({r:.2}x)", c.unit.show(v)),
                    None => c.unit.show(v),
                },
            });
        }
        row.push(note(boot, roster, i));
        t.row(row);
    }
    t
}

/// One row per run, valid or not.
pub fn every_run(boot: &Boot, roster: &[Sched], columns: &[Column]) -> Table {
    let mut t = table("run", columns);
    for run in &boot.runs {
        let mut row = vec![roster[run.sched].label(), run.run.to_string()];
        row.extend(
            columns
                .iter()
                .map(|c| (c.get)(run).map_or("-".into(), |v| c.unit.show(v))),
        );
        row.push(run.invalid().unwrap_or_default());
        t.row(row);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::figures::SchedOutcome;
    use crate::eval::roster::{Kind, Sched};
    use crate::report::Fields;

    fn run(sched: usize, n: u32, passes: &str, state: Option<&str>) -> Run {
        let mut f = Fields::new();
        f.insert("workload".into(), "w".into());
        f.insert("passes".into(), passes.into());
        let mut lines = vec![f];
        if let Some(s) = state {
            lines.push(Fields::from([("state".to_string(), s.to_string())]));
        }
        Run {
            sched,
            run: n,
            lines,
            cache: None,
        }
    }

    #[test]
    fn summaries_are_means_with_ratios_to_eevdf_and_say_what_failed() {
        let roster = vec![
            Sched {
                kind: Kind::Eevdf,
                unavailable: None,
                binary: None,
            },
            Sched {
                kind: Kind::Sky("sky1"),
                unavailable: None,
                binary: None,
            },
            Sched {
                kind: Kind::Sky("vtime"),
                unavailable: Some("skipped: test".into()),
                binary: None,
            },
        ];
        let boot = Boot {
            runs: vec![
                run(0, 1, "100", None),
                run(0, 2, "300", None),
                run(1, 1, "300", Some("enabled")),
                run(1, 2, "900", Some("disabled")),
            ],
            outcomes: vec![
                SchedOutcome {
                    started: true,
                    ..Default::default()
                },
                SchedOutcome {
                    started: true,
                    errors: 2,
                    exit: Some(0),
                },
                SchedOutcome::default(),
            ],
            ..Boot::default()
        };
        let cols = vec![Column::new("work", Unit::PerSec, true, |r: &Run| {
            r.workload("w", "passes")
        })];
        let text = summary(&boot, &roster, &cols).render();
        assert!(text.contains("| EEVDF "), "{text}");
        assert!(text.contains("200/s "), "{text}");
        assert!(
            text.contains("300/s (1.50x)"),
            "the invalid run is left out: {text}"
        );
        assert!(
            text.contains("1 runs invalid: scheduler disabled during the run"),
            "{text}"
        );
        assert!(text.contains("2 kernel error lines"), "{text}");
        assert!(text.contains("skipped: test"), "{text}");
        let all = every_run(&boot, &roster, &cols).render();
        assert_eq!(all.lines().count(), 2 + 4, "{all}");
        assert!(all.contains("900/s"), "every run is shown: {all}");
    }
}
