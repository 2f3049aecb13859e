//! Class and gang changes are logged each at debug, as they happen, and
//! at info as a summary at most once a minute: a busy machine changes
//! classes many times a minute, and a service's journal should say what
//! happens, not fill with it (`--log-level debug` shows each).

use log::{debug, info};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How often a summary is logged at most.
pub const SUMMARY_EVERY: Duration = Duration::from_secs(60);

pub struct ChangeLog {
    /// What changes: "class" or "gang".
    what: &'static str,
    since: Instant,
    /// Changes since the last summary, by kind ("unknown -> compute").
    kinds: BTreeMap<String, u64>,
}

impl ChangeLog {
    pub fn new(what: &'static str) -> Self {
        ChangeLog {
            what,
            since: Instant::now(),
            kinds: BTreeMap::new(),
        }
    }

    /// One change of `kind`, described by `line` at debug.
    pub fn record(&mut self, kind: String, line: impl FnOnce() -> String) {
        debug!("{}", line());
        *self.kinds.entry(kind).or_default() += 1;
    }

    /// Logs the summary if one is due (called every refresh).
    pub fn tick(&mut self) {
        if let Some(line) = self.summary_due(Instant::now()) {
            info!("{line}");
        }
    }

    /// The summary of what changed since the last one, if there was any
    /// change and [`SUMMARY_EVERY`] has passed; starts the next window.
    fn summary_due(&mut self, now: Instant) -> Option<String> {
        if self.kinds.is_empty() || now.duration_since(self.since) < SUMMARY_EVERY {
            return None;
        }
        let total: u64 = self.kinds.values().sum();
        let kinds: Vec<String> = self
            .kinds
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect();
        let line = format!(
            "{} changes in the last {} s: {total} ({})",
            self.what,
            now.duration_since(self.since).as_secs(),
            kinds.join(", ")
        );
        self.kinds.clear();
        self.since = now;
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_summed_by_kind_once_a_window() {
        let mut log = ChangeLog::new("class");
        let start = log.since;
        assert_eq!(
            log.summary_due(start + SUMMARY_EVERY * 2),
            None,
            "nothing changed"
        );
        log.record("unknown -> compute".into(), || "a".into());
        log.record("unknown -> compute".into(), || "b".into());
        log.record("compute -> pm-writer".into(), || "c".into());
        assert_eq!(log.summary_due(start + SUMMARY_EVERY / 2), None, "too soon");
        let line = log.summary_due(start + SUMMARY_EVERY).unwrap();
        assert_eq!(
            line,
            "class changes in the last 60 s: 3 (compute -> pm-writer: 1, unknown -> compute: 2)"
        );
        log.record("x".into(), || "d".into());
        assert_eq!(
            log.summary_due(start + SUMMARY_EVERY * 3 / 2),
            None,
            "a new window"
        );
        assert!(log
            .summary_due(start + SUMMARY_EVERY * 2)
            .unwrap()
            .contains(": 1 (x: 1)"));
    }
}
