//! Counter streams from a file, recorded or synthetic, so the classifier
//! is exercised end to end without a PMU (`scx_sky classify --replay`).
//!
//! The format is CSV with a header naming the columns; `#` starts a
//! comment line. `period`, `task`, `cycles` and `instructions` are
//! required; `llc_misses`, `stall_cycles` and `stores` may be missing or
//! empty (the CPU does not count them); `enabled_ns` and `running_ns`, if
//! present, scale multiplexed counts.
//!
//! ```text
//! period,task,cycles,instructions,llc_misses,stall_cycles,stores
//! 0,idiv,1000000,900000,12,50000,1000
//! ```

use crate::classifier::{Classifier, Transition};
use crate::counters::Counters;
use crate::thresholds::Thresholds;
use anyhow::{bail, Context, Result};

/// One row: a task's counters over one period.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub period: u64,
    pub task: String,
    pub counters: Counters,
}

const REQUIRED: [&str; 4] = ["period", "task", "cycles", "instructions"];
const OPTIONAL: [&str; 5] = [
    "llc_misses",
    "stall_cycles",
    "stores",
    "enabled_ns",
    "running_ns",
];

/// Parses a stream; `source` names it in errors, which give the line and
/// the field.
pub fn parse(text: &str, source: &str) -> Result<Vec<Record>> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
    let (header_line, header) = lines
        .next()
        .with_context(|| format!("{source}: no header line (expected {})", REQUIRED.join(",")))?;
    let columns: Vec<&str> = header.split(',').map(str::trim).collect();
    for (i, name) in columns.iter().enumerate() {
        if !REQUIRED.contains(name) && !OPTIONAL.contains(name) {
            bail!(
                "{source} line {header_line}: unknown column {name:?} (the columns are {} and {})",
                REQUIRED.join(", "),
                OPTIONAL.join(", ")
            );
        }
        if columns[..i].contains(name) {
            bail!("{source} line {header_line}: column {name:?} appears twice");
        }
    }
    for name in REQUIRED {
        if !columns.contains(&name) {
            bail!("{source} line {header_line}: the header has no {name:?} column");
        }
    }
    let at = |name: &str| columns.iter().position(|c| *c == name);
    let mut records = Vec::new();
    for (n, line) in lines {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len() != columns.len() {
            bail!(
                "{source} line {n}: {} fields where the header has {}",
                fields.len(),
                columns.len()
            );
        }
        let number = |name: &str| -> Result<Option<u64>> {
            let Some(i) = at(name) else { return Ok(None) };
            if fields[i].is_empty() {
                return Ok(None);
            }
            fields[i].parse().map(Some).map_err(|_| {
                anyhow::anyhow!(
                    "{source} line {n}: field {name:?} is {:?}, not a whole number",
                    fields[i]
                )
            })
        };
        let required = |name: &str| -> Result<u64> {
            number(name)?.with_context(|| format!("{source} line {n}: field {name:?} is empty"))
        };
        let task = fields[at("task").unwrap_or(0)];
        if task.is_empty() {
            bail!("{source} line {n}: field \"task\" is empty");
        }
        let raw = Counters {
            cycles: required("cycles")?,
            instructions: required("instructions")?,
            llc_misses: number("llc_misses")?,
            stall_cycles: number("stall_cycles")?,
            stores: number("stores")?,
        };
        let counters = match (number("enabled_ns")?, number("running_ns")?) {
            (Some(enabled), Some(running)) => raw.scaled(enabled, running),
            (None, None) => raw,
            _ => bail!("{source} line {n}: enabled_ns and running_ns go together"),
        };
        records.push(Record {
            period: required("period")?,
            task: task.to_string(),
            counters,
        });
    }
    Ok(records)
}

/// The header `scx_sky --record-counters` writes (counts already scaled).
pub const HEADER: &str = "period,task,cycles,instructions,llc_misses,stall_cycles,stores";

/// One row under [`HEADER`]: a task's counts over one period, uncounted
/// events left empty. Commas and line breaks in the name (a task may name
/// itself anything) become `_`, so the row always parses back.
pub fn row(period: u64, task: &str, c: &Counters) -> String {
    let task: String = task
        .chars()
        .map(|ch| {
            if ch == ',' || ch.is_control() {
                '_'
            } else {
                ch
            }
        })
        .collect();
    let task = if task.trim().is_empty() {
        "_".to_string()
    } else {
        task.trim().to_string()
    };
    let opt = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
    format!(
        "{period},{task},{},{},{},{},{}",
        c.cycles,
        c.instructions,
        opt(c.llc_misses),
        opt(c.stall_cycles),
        opt(c.stores)
    )
}

/// One class change found by a replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub period: u64,
    pub task: String,
    pub transition: Transition,
}

/// Feeds the records, in order, to a fresh classifier; returns every
/// class change and the classifier (for final classes).
pub fn run(
    records: &[Record],
    thresholds: Thresholds,
) -> Result<(Vec<Decision>, Classifier<String>)> {
    let mut classifier = Classifier::new(thresholds)?;
    let mut decisions = Vec::new();
    for r in records {
        if let Some(transition) = classifier.observe(&r.task, &r.counters) {
            decisions.push(Decision {
                period: r.period,
                task: r.task.clone(),
                transition,
            });
        }
    }
    Ok((decisions, classifier))
}

/// The streams shipped in `streams/`, by name: what a compute loop, a PM
/// writer, a memory streamer and a task changing phase look like to the
/// PMU (synthetic, with noise; see streams/README.md).
pub const SHIPPED: [(&str, &str); 4] = [
    ("compute", include_str!("../streams/compute.csv")),
    ("pm-writer", include_str!("../streams/pm-writer.csv")),
    (
        "memory-streamer",
        include_str!("../streams/memory-streamer.csv"),
    ),
    ("phase-change", include_str!("../streams/phase-change.csv")),
];
