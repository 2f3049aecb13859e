//! One boot's output, read back: the runs of each scheduler (every
//! `result sched=I run=R ...` line of the workload and of the observer),
//! what went wrong with a scheduler (it did not start, was ejected, left
//! kernel errors), and the cache model's phase of each run.

use crate::cachesim::{self, Phase};
use crate::report::{self, Fields};
use anyhow::{bail, Context, Result};

/// One run of a workload under one scheduler.
#[derive(Debug, Clone, Default)]
pub struct Run {
    pub sched: usize,
    pub run: u32,
    /// Its result lines, in order.
    pub lines: Vec<Fields>,
    /// The cache model's counts of it, when the boot had one.
    pub cache: Option<Phase>,
}

impl Run {
    /// The first line with every `key=value` of `want`.
    pub fn line(&self, want: &[(&str, &str)]) -> Option<&Fields> {
        self.lines.iter().find(|f| {
            want.iter()
                .all(|(k, v)| f.get(*k).map(String::as_str) == Some(*v))
        })
    }

    /// A number from the first line matching `want`.
    pub fn number(&self, want: &[(&str, &str)], key: &str) -> Option<f64> {
        report::number(self.line(want)?, key).ok()
    }

    /// `key` from the first line that has it (observer lines whose kind
    /// is a bare word, such as `smt` or `gangs`, are found by their keys).
    pub fn first(&self, key: &str) -> Option<f64> {
        let f = self.lines.iter().find(|f| f.contains_key(key))?;
        report::number(f, key).ok()
    }

    /// `key` of every result line of workload `name` (one per task of
    /// that kind).
    fn values(&self, name: &str, key: &str) -> Vec<f64> {
        self.lines
            .iter()
            .filter(|f| f.get("workload").map(String::as_str) == Some(name))
            .filter_map(|f| report::number(f, key).ok())
            .collect()
    }

    /// The sum of `key` over the tasks of workload `name`.
    pub fn sum(&self, name: &str, key: &str) -> Option<f64> {
        let v = self.values(name, key);
        (!v.is_empty()).then(|| v.iter().sum())
    }

    /// The mean of `key` over the tasks of workload `name`.
    pub fn mean(&self, name: &str, key: &str) -> Option<f64> {
        let v = self.values(name, key);
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }

    /// The workload's own result line (`workload=NAME`).
    pub fn workload(&self, name: &str, key: &str) -> Option<f64> {
        self.number(&[("workload", name)], key)
    }

    /// The observer's placement figures of a task group.
    pub fn placement(&self, group: &str, key: &str) -> Option<f64> {
        let f = self.lines.iter().find(|f| {
            f.get("group").map(String::as_str) == Some(group) && f.contains_key("last_cpu_share")
        })?;
        report::number(f, key).ok()
    }

    /// Why the run's figures cannot be trusted, if they cannot.
    pub fn invalid(&self) -> Option<String> {
        if let Some(f) = self.lines.iter().find(|f| f.contains_key("failed")) {
            return Some(format!("failed: {}", f["failed"]));
        }
        if let Some(f) = self
            .lines
            .iter()
            .find(|f| f.get("state").is_some_and(|s| s != "enabled"))
        {
            return Some(format!("scheduler {} during the run", f["state"]));
        }
        None
    }
}

/// A scheduler's troubles outside its runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchedOutcome {
    pub started: bool,
    /// Kernel error lines its runs added, and its exit status.
    pub errors: u64,
    pub exit: Option<i32>,
}

#[derive(Debug, Clone, Default)]
pub struct Boot {
    pub header: Fields,
    pub runs: Vec<Run>,
    pub outcomes: Vec<SchedOutcome>,
}

impl Boot {
    pub fn runs_of(&self, sched: usize) -> impl Iterator<Item = &Run> {
        self.runs.iter().filter(move |r| r.sched == sched)
    }
}

fn sched_of(f: &Fields) -> Result<usize> {
    f.get("sched")
        .context("a line without sched=")?
        .parse()
        .context("sched= is not an index")
}

/// Reads the guest's output for a roster of `scheds` schedulers, and the
/// cache model's counts if the boot had one: each run marks one phase.
pub fn parse(output: &str, scheds: usize, cache: Option<&cachesim::Report>) -> Result<Boot> {
    let mut boot = Boot {
        header: report::one_line(output, "eval-header ")?,
        outcomes: vec![SchedOutcome::default(); scheds],
        ..Boot::default()
    };
    for line in output.lines() {
        if let Some(rest) = line.split_once("eval-run ").map(|(_, r)| r) {
            let f = report::fields(rest);
            boot.runs.push(Run {
                sched: sched_of(&f)?,
                run: f
                    .get("run")
                    .and_then(|r| r.parse().ok())
                    .context("eval-run without run=")?,
                ..Run::default()
            });
        } else if let Some(rest) = line.split_once("eval-sched ").map(|(_, r)| r) {
            let f = report::fields(rest);
            let i = sched_of(&f)?;
            let o = boot
                .outcomes
                .get_mut(i)
                .context("eval-sched beyond the roster")?;
            o.started = f.get("started").map(String::as_str) == Some("1");
            o.errors = f.get("errors").and_then(|e| e.parse().ok()).unwrap_or(0);
            o.exit = f.get("exit").and_then(|e| e.parse().ok());
        } else if let Some(rest) = line.split_once("result ").map(|(_, r)| r) {
            let f = report::fields(rest);
            let Ok(sched) = sched_of(&f) else { continue };
            if let Some(run) = boot.runs.last_mut().filter(|r| r.sched == sched) {
                run.lines.push(f);
            }
        }
    }
    if let Some(report) = cache {
        if report.phases.len() != boot.runs.len() {
            bail!(
                "the cache model counted {} phases for {} runs",
                report.phases.len(),
                boot.runs.len()
            );
        }
        for (run, phase) in boot.runs.iter_mut().zip(&report.phases) {
            run.cache = Some(phase.clone());
        }
    }
    Ok(boot)
}
