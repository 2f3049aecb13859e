//! A BPF map the daemon fills may be full: that is said when entries
//! start not fitting and when they fit again, not once for good nor on
//! every refresh; the writers retry what did not fit each refresh.

use log::{info, warn};

/// Whether a map had room at the last write: a warning when entries
/// start not fitting, a line when they fit again.
#[derive(Debug, Default)]
pub struct MapRoom {
    full: bool,
}

impl MapRoom {
    /// Notes one refresh's writes to `map`; `unwritten`: what did not fit.
    /// Returns the line logged, if the map's state changed.
    pub fn note(&mut self, map: &str, unwritten: &[String]) -> Option<String> {
        let line = match (self.full, unwritten.first()) {
            (false, Some(first)) => format!(
                "{map}: {} entries not written (map full?), first {first}; retried every refresh",
                unwritten.len()
            ),
            (true, None) => format!("{map}: every entry written again"),
            _ => return None,
        };
        self.full = !unwritten.is_empty();
        if self.full {
            warn!("{line}");
        } else {
            info!("{line}");
        }
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::MapRoom;

    #[test]
    fn a_full_map_is_told_when_it_fills_and_when_it_has_room_again() {
        let mut room = MapRoom::default();
        assert_eq!(room.note("m", &[]), None);
        let failed = vec!["process 7 in gang 0x1: E2BIG".to_string(); 3];
        let line = room.note("m", &failed).unwrap();
        assert!(
            line.contains("3 entries not written") && line.contains("process 7"),
            "{line}"
        );
        // Still full: not told again every refresh.
        assert_eq!(room.note("m", &failed), None);
        assert_eq!(
            room.note("m", &[]).as_deref(),
            Some("m: every entry written again")
        );
        assert_eq!(room.note("m", &[]), None);
    }
}
