//! The gang table: the running tasks grouped into gangs by the rules, with
//! stable gang IDs for the planner and BPF. Built from the same /proc walk
//! the classes use (`sky_classify::live::scan_tasks`), and from the
//! shared-space registry's member lists (passed in: pid -> space names).

use crate::planner;
use crate::rules::{GangKey, GangRules, Hint, SpaceKey, TaskInfo};
use sky_classify::live::LiveTask;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One gang's members now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GangEntry {
    pub id: planner::GangId,
    /// Every thread of the gang.
    pub tids: Vec<u32>,
    /// Its processes (thread-group IDs).
    pub processes: BTreeSet<u32>,
    pub hint: Hint,
    /// The rule that made it, if not the default (one process).
    pub rule: Option<usize>,
}

/// Gang IDs that stay the same across scans while a gang exists, and are
/// never reused for another gang: BPF and the planner key on them.
#[derive(Debug, Default)]
pub struct GangIds {
    next: u64,
    ids: HashMap<GangKey, planner::GangId>,
}

impl GangIds {
    fn id(&mut self, key: &GangKey) -> planner::GangId {
        if let Some(id) = self.ids.get(key) {
            return *id;
        }
        self.next += 1;
        let id = planner::GangId(self.next);
        self.ids.insert(key.clone(), id);
        id
    }

    /// Forgets gangs that are gone: a gang that comes back is a new one.
    fn retain(&mut self, present: &BTreeMap<GangKey, GangEntry>) {
        self.ids.retain(|k, _| present.contains_key(k));
    }
}

/// The gangs of the tasks in one scan.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct GangTable {
    pub gangs: BTreeMap<GangKey, GangEntry>,
}

impl GangTable {
    /// Groups `tasks` by `rules`. A process's name is its leader's (the
    /// thread whose ID is the process ID); `spaces` lists the spaces each
    /// process is a member of.
    pub fn build(
        tasks: &[LiveTask],
        rules: &GangRules,
        spaces: &BTreeMap<u32, Vec<SpaceKey>>,
        ids: &mut GangIds,
    ) -> GangTable {
        let leaders: HashMap<u32, &str> = tasks
            .iter()
            .filter(|t| t.tid == t.pid)
            .map(|t| (t.pid, t.comm.as_str()))
            .collect();
        let mut gangs: BTreeMap<GangKey, GangEntry> = BTreeMap::new();
        for t in tasks {
            let info = TaskInfo {
                pid: t.tid,
                tgid: t.pid,
                comm: leaders.get(&t.pid).copied().unwrap_or(&t.comm),
                cgroup: &t.cgroup,
                spaces: spaces.get(&t.pid).map_or(&[], Vec::as_slice),
            };
            let gang = rules.gang(&info);
            let entry = gangs.entry(gang.key.clone()).or_insert_with(|| GangEntry {
                id: ids.id(&gang.key),
                tids: Vec::new(),
                processes: BTreeSet::new(),
                hint: gang.hint,
                rule: gang.rule,
            });
            entry.tids.push(t.tid);
            entry.processes.insert(t.pid);
        }
        ids.retain(&gangs);
        GangTable { gangs }
    }

    /// The planner's view: every gang with its thread count, memory-bound
    /// as `memory_bound` says (hints first; detection is the caller's).
    pub fn planner_gangs(
        &self,
        memory_bound: impl Fn(&GangKey, &GangEntry) -> bool,
    ) -> Vec<planner::Gang> {
        self.gangs
            .iter()
            .map(|(key, e)| planner::Gang {
                id: e.id,
                threads: e.tids.len() as u32,
                memory_bound: memory_bound(key, e),
            })
            .collect()
    }

    /// The gang of each thread, for BPF's map.
    pub fn gang_of_thread(&self) -> BTreeMap<u32, planner::GangId> {
        self.gangs
            .values()
            .flat_map(|e| e.tids.iter().map(move |&tid| (tid, e.id)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(tid: u32, pid: u32, comm: &str, cgroup: &str) -> LiveTask {
        LiveTask {
            tid,
            pid,
            comm: comm.into(),
            cgroup: cgroup.into(),
            runnable_on: None,
        }
    }

    fn rules(cli: &[&str]) -> GangRules {
        let cli: Vec<String> = cli.iter().map(|s| s.to_string()).collect();
        GangRules::new(&cli, &[]).unwrap()
    }

    #[test]
    fn threads_of_a_process_are_one_gang_by_default_and_named_by_their_leader() {
        let tasks = [
            task(10, 10, "stream", "/a"),
            task(11, 10, "worker-1", "/a"),
            task(20, 20, "other", "/a"),
        ];
        let mut ids = GangIds::default();
        let t = GangTable::build(&tasks, &rules(&["comm:stream"]), &BTreeMap::new(), &mut ids);
        // The renamed thread stays with its process's comm rule.
        assert_eq!(t.gangs.len(), 2);
        let g = &t.gangs[&GangKey::Rule(0)];
        assert_eq!(g.tids, [10, 11]);
        assert_eq!(g.processes, BTreeSet::from([10]));
        assert_eq!(t.gangs[&GangKey::Process(20)].tids, [20]);
    }

    #[test]
    fn a_spaces_member_processes_are_one_gang() {
        let tasks = [
            task(1, 1, "a", "/"),
            task(2, 2, "b", "/"),
            task(3, 3, "c", "/"),
        ];
        let job = |uid| SpaceKey {
            name: "job".into(),
            uid,
            dev: 1,
            ino: 100 + uid as u64,
        };
        // Processes 1 and 2 in user 1000's job, 4 in user 1001's.
        let tasks = [tasks.as_slice(), &[task(4, 4, "d", "/")]].concat();
        let spaces = BTreeMap::from([
            (1, vec![job(1000)]),
            (2, vec![job(1000)]),
            (4, vec![job(1001)]),
        ]);
        let mut ids = GangIds::default();
        let t = GangTable::build(&tasks, &rules(&["space:*=memory-bound"]), &spaces, &mut ids);
        let job_a = &t.gangs[&GangKey::Space(job(1000))];
        assert_eq!(job_a.processes, BTreeSet::from([1, 2]));
        // Two users' spaces of one name are two gangs.
        assert_eq!(
            t.gangs[&GangKey::Space(job(1001))].processes,
            BTreeSet::from([4])
        );
        assert_ne!(job_a.id, t.gangs[&GangKey::Space(job(1001))].id);
        assert_eq!(job_a.hint, Hint::MemoryBound);
        assert!(t.gangs.contains_key(&GangKey::Process(3)));
        let planned = t.planner_gangs(|_, e| e.hint == Hint::MemoryBound);
        assert_eq!(planned.iter().filter(|g| g.memory_bound).count(), 2);
        let threads = |id| planned.iter().find(|g| g.id == id).unwrap().threads;
        assert_eq!(threads(job_a.id), 2);
    }

    #[test]
    fn gang_ids_are_stable_while_a_gang_lives_and_never_reused() {
        let mut ids = GangIds::default();
        let none = rules(&[]);
        let first = GangTable::build(
            &[task(5, 5, "x", "/"), task(6, 6, "y", "/")],
            &none,
            &BTreeMap::new(),
            &mut ids,
        );
        let id5 = first.gangs[&GangKey::Process(5)].id;
        let id6 = first.gangs[&GangKey::Process(6)].id;
        assert_ne!(id5, id6);
        // 5 lives on, 6 is gone, 7 is new.
        let second = GangTable::build(
            &[task(5, 5, "x", "/"), task(7, 7, "z", "/")],
            &none,
            &BTreeMap::new(),
            &mut ids,
        );
        assert_eq!(second.gangs[&GangKey::Process(5)].id, id5);
        let id7 = second.gangs[&GangKey::Process(7)].id;
        assert!(id7 != id5 && id7 != id6);
        // 6 returns (a reused pid): a new gang, a new ID.
        let third = GangTable::build(&[task(6, 6, "y", "/")], &none, &BTreeMap::new(), &mut ids);
        let again = third.gangs[&GangKey::Process(6)].id;
        assert!(again != id6 && again != id7);
        assert_eq!(third.gang_of_thread(), BTreeMap::from([(6, again)]));
    }
}
