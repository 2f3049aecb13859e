//! Writing the plan into BPF's gang maps (bpf/gang.bpf.h): homes, and
//! which processes make up gangs of several. What was written is kept to
//! write only changes; a full map is said when it fills and when it has
//! room again, and every refresh retries what did not fit.

use super::{bpf_key, GangFeed, NO_DOMAIN};
use crate::bpf::intf;
use crate::map_values;
use libbpf_rs::{MapCore, MapFlags};
use sky_gangs::planner::Plan;
use sky_gangs::rules::{GangKey, Hint};
use sky_gangs::table::GangTable;
use sky_proc::monotonic_ns;
use std::collections::{BTreeMap, HashMap};

impl GangFeed {
    /// Writes the plan's homes; removes homes of gangs that have none now.
    pub(super) fn write_homes(
        &mut self,
        homes: &impl MapCore,
        table: &GangTable,
        plan: &Plan,
        in_bpf: &BTreeMap<u64, (u32, bool)>,
    ) {
        let mut want: HashMap<u64, u32> = HashMap::new();
        for (key, e) in &table.gangs {
            if let Some(d) = plan.homes.get(&e.id) {
                want.insert(bpf_key(key, e.id), d.0);
            } else if e.hint == Hint::NotMemoryBound && matches!(key, GangKey::Process(_)) {
                // Keeps BPF from claiming a home for it by its class.
                want.insert(bpf_key(key, e.id), NO_DOMAIN);
            }
        }
        let listed_processes: std::collections::HashSet<u32> = table
            .gangs
            .values()
            .flat_map(|e| e.processes.iter().copied())
            .collect();
        let since = monotonic_ns();
        let mut unwritten = Vec::new();
        for (key, llc) in &want {
            if in_bpf.get(key) == Some(&(*llc, true)) {
                continue;
            }
            let home = intf::sky_gang_home {
                llc: *llc,
                planned: 1,
                since_ns: since,
            };
            let value = map_values::bytes(&home);
            if let Err(e) = homes.update(&key.to_ne_bytes(), value, MapFlags::ANY) {
                unwritten.push(format!("gang {key:#x}: {e}"));
            }
        }
        self.homes_room.note("sky_gang_homes", &unwritten);
        for (key, (_, planned)) in in_bpf {
            if want.contains_key(key) {
                continue;
            }
            // A provisional home of a process not listed yet stays: the
            // next refresh adopts it (or drops it, if the process turns
            // out to be in a gang of several).
            let listed =
                *key < intf::SKY_GANG_SHARED_BASE && listed_processes.contains(&(*key as u32));
            if *planned || listed {
                let _ = homes.delete(&key.to_ne_bytes());
            }
        }
    }

    /// Tells BPF which processes are in a gang of several.
    pub(super) fn write_proc_gangs(
        &mut self,
        proc_gang: &impl MapCore,
        table: &GangTable,
        dropped: Option<u64>,
    ) {
        // BPF drops a process's entry when its leader exits (a reused pid
        // must not inherit the gang). If any went since the last refresh,
        // what was written is checked against the map: a pid reused by a
        // process of the same gang is written again, not taken for done.
        forget_dropped(
            &mut self.proc_written,
            &mut self.proc_dropped_seen,
            dropped,
            |pid| {
                matches!(
                    proc_gang.lookup(&pid.to_ne_bytes(), MapFlags::ANY),
                    Ok(Some(_))
                )
            },
        );
        let mut want: HashMap<u32, u64> = HashMap::new();
        for (key, e) in &table.gangs {
            if !matches!(key, GangKey::Process(_)) {
                for &pid in &e.processes {
                    want.insert(pid, bpf_key(key, e.id));
                }
            }
        }
        let mut unwritten = Vec::new();
        for (pid, gang) in &want {
            if self.proc_written.get(pid) == Some(gang) {
                continue;
            }
            if let Err(e) = proc_gang.update(&pid.to_ne_bytes(), &gang.to_ne_bytes(), MapFlags::ANY)
            {
                unwritten.push(format!("process {pid} in gang {gang:#x}: {e}"));
                continue;
            }
            self.proc_written.insert(*pid, *gang);
        }
        self.proc_room.note("sky_proc_gang", &unwritten);
        self.proc_written.retain(|pid, _| {
            let keep = want.contains_key(pid);
            if !keep {
                let _ = proc_gang.delete(&pid.to_ne_bytes());
            }
            keep
        });
    }
}

/// If BPF's count of dropped entries moved from `seen`, forgets what was
/// written that is no longer `in_map`, so it is written again.
fn forget_dropped(
    written: &mut HashMap<u32, u64>,
    seen: &mut u64,
    dropped: Option<u64>,
    in_map: impl Fn(u32) -> bool,
) {
    if let Some(d) = dropped.filter(|d| d != seen) {
        *seen = d;
        written.retain(|&pid, _| in_map(pid));
    }
}

#[cfg(test)]
mod tests {
    use super::forget_dropped;
    use std::collections::HashMap;

    /// Process 2's leader exited and BPF dropped its entry; a new process
    /// of the same gang got pid 2 before the next refresh: it is written
    /// again because the count moved, not taken for written.
    #[test]
    fn an_entry_bpf_dropped_is_written_again() {
        let mut written = HashMap::from([(1, 10), (2, 10), (3, 11)]);
        let mut seen = 4;
        let in_map = |pid| pid != 2;
        forget_dropped(&mut written, &mut seen, Some(4), in_map);
        assert_eq!(written.len(), 3, "nothing dropped: no lookups");
        forget_dropped(&mut written, &mut seen, Some(5), in_map);
        assert_eq!(
            (written.len(), written.contains_key(&2), seen),
            (2, false, 5)
        );
    }
}
