//! Who is compared: EEVDF (always first: every ratio is against it), the
//! anchors (other sched_ext schedulers, built from the registry) and
//! scx_sky's presets. A scheduler that cannot take part stays in the
//! roster with the reason, so the tables say so instead of dropping it.

use crate::anchors::{Anchor, ANCHORS};
use anyhow::{bail, Result};
use std::path::PathBuf;

/// scx_sky's presets, as `scx_sky -p NAME` (scheds/*.toml).
pub const SKY_PRESETS: [&str; 3] = ["sky1", "sky1-strict", "vtime"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Eevdf,
    /// EEVDF with the workload's placement set by hand (`all`, `partial`):
    /// a scenario's reference rows.
    Pinned(&'static str),
    Anchor(Anchor),
    Sky(&'static str),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sched {
    pub kind: Kind,
    /// Why it does not run, if it does not (failed to build, skipped).
    pub unavailable: Option<String>,
    /// The anchor's binary on this machine.
    pub binary: Option<PathBuf>,
}

impl Sched {
    fn new(kind: Kind) -> Sched {
        Sched {
            kind,
            unavailable: None,
            binary: None,
        }
    }

    /// How tables name it.
    pub fn label(&self) -> String {
        match &self.kind {
            Kind::Eevdf => "EEVDF".into(),
            Kind::Pinned(p) => format!("EEVDF, gangs pinned {}", capitalised(p)),
            Kind::Anchor(a) => format!("{} {}", a.name, a.version),
            Kind::Sky(p) => format!("scx_sky -p {p}"),
        }
    }

    /// A short name for files and plots.
    pub fn key(&self) -> String {
        match &self.kind {
            Kind::Eevdf => "eevdf".into(),
            Kind::Pinned(p) => format!("pinned-{p}"),
            Kind::Anchor(a) => a.name.trim_start_matches("scx_").into(),
            Kind::Sky(p) => format!("sky-{p}"),
        }
    }

    /// What the guest runs: `eevdf`, `pinned-PLACEMENT` (EEVDF, the
    /// workload pins), or the scheduler's command line.
    /// Stats go to the log once a second at most; the runs judge the
    /// kernel's view, not the scheduler's.
    pub fn guest_command(&self) -> String {
        match &self.kind {
            Kind::Eevdf => "eevdf".into(),
            Kind::Pinned(p) => format!("pinned-{p}"),
            Kind::Anchor(a) => a.guest_path().display().to_string(),
            Kind::Sky(p) => format!("scx_sky -p {p} --stats-interval 0"),
        }
    }
}

/// Parses `--sched` names: anchors by crate name (`scx_lavd`), presets by
/// name (`sky1`).
pub fn parse_name(name: &str) -> Result<Kind> {
    if let Some(a) = Anchor::by_name(name) {
        return Ok(Kind::Anchor(a));
    }
    if let Some(p) = SKY_PRESETS.iter().find(|p| **p == name) {
        return Ok(Kind::Sky(p));
    }
    let anchors: Vec<&str> = ANCHORS.iter().map(|a| a.name).collect();
    bail!(
        "--sched {name:?} is neither an anchor ({}) nor a scx_sky preset ({})",
        anchors.join(", "),
        SKY_PRESETS.join(", ")
    )
}

/// EEVDF, then `chosen` (default: every anchor, then every preset).
/// Anchors are built now; `skip_anchors` (with its reason) keeps them in
/// the roster as not run.
pub fn roster(chosen: &[Kind], skip_anchors: Option<&str>) -> Vec<Sched> {
    let default: Vec<Kind> = ANCHORS
        .iter()
        .map(|a| Kind::Anchor(*a))
        .chain(SKY_PRESETS.iter().map(|p| Kind::Sky(p)))
        .collect();
    let kinds = if chosen.is_empty() { &default } else { chosen };
    let mut out = vec![Sched::new(Kind::Eevdf)];
    for kind in kinds {
        if out.iter().any(|s| &s.kind == kind) {
            continue;
        }
        let mut s = Sched::new(kind.clone());
        if let Kind::Anchor(a) = kind {
            match skip_anchors {
                Some(why) => s.unavailable = Some(format!("skipped: {why}")),
                None => match a.ensure() {
                    Ok(bin) => s.binary = Some(bin),
                    Err(why) => s.unavailable = Some(format!("failed to build: {why}")),
                },
            }
        }
        out.push(s);
    }
    out
}

/// `roster` with a scenario's reference rows right after EEVDF.
pub fn with_references(roster: &[Sched], references: &[Kind]) -> Vec<Sched> {
    let mut out = roster[..1].to_vec();
    out.extend(references.iter().cloned().map(Sched::new));
    out.extend(roster[1..].iter().cloned());
    out
}

fn capitalised(word: &str) -> String {
    let mut c = word.chars();
    c.next()
        .map_or(String::new(), |f| f.to_uppercase().chain(c).collect())
}

/// The binaries the guest needs besides the project's: (host, guest).
pub fn guest_binaries(roster: &[Sched]) -> Vec<(PathBuf, PathBuf)> {
    roster
        .iter()
        .filter_map(|s| match (&s.kind, &s.binary) {
            (Kind::Anchor(a), Some(bin)) if s.unavailable.is_none() => {
                Some((bin.clone(), a.guest_path()))
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_bad_ones_are_refused() {
        assert_eq!(parse_name("sky1").unwrap(), Kind::Sky("sky1"));
        assert!(
            matches!(parse_name("scx_cosmos").unwrap(), Kind::Anchor(a) if a.version == "1.1.7")
        );
        let err = parse_name("cfs").unwrap_err().to_string();
        assert!(err.contains("\"cfs\"") && err.contains("scx_lavd") && err.contains("vtime"));
    }

    #[test]
    fn eevdf_comes_first_and_skipped_anchors_stay_with_the_reason() {
        let r = roster(&[], Some("not in CI"));
        assert_eq!(r[0].kind, Kind::Eevdf);
        assert_eq!(r.len(), 1 + ANCHORS.len() + SKY_PRESETS.len());
        let lavd = r.iter().find(|s| s.key() == "lavd").unwrap();
        assert_eq!(lavd.unavailable.as_deref(), Some("skipped: not in CI"));
        assert!(guest_binaries(&r).is_empty());
        let sky = r.iter().find(|s| s.key() == "sky-sky1").unwrap();
        assert_eq!(sky.guest_command(), "scx_sky -p sky1 --stats-interval 0");
        assert_eq!(sky.label(), "scx_sky -p sky1");
        let two = roster(&[Kind::Sky("vtime"), Kind::Sky("vtime")], None);
        assert_eq!(two.len(), 2, "EEVDF and vtime once");
        let refs = with_references(&two, &[Kind::Pinned("all"), Kind::Pinned("partial")]);
        let labels: Vec<String> = refs.iter().map(Sched::label).collect();
        assert_eq!(
            labels,
            [
                "EEVDF",
                "EEVDF, gangs pinned All",
                "EEVDF, gangs pinned Partial",
                "scx_sky -p vtime"
            ]
        );
        assert_eq!(refs[2].guest_command(), "pinned-partial");
    }
}
