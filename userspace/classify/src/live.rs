//! Classes for the tasks running now: which tasks exist (from /proc, read
//! by sky_proc), and what must change in BPF's class map (`sky_pid_class`,
//! bpf/class.bpf.h) to match. Only known classes are written; absence means unknown, and
//! an entry is removed when its task is gone, so a reused thread ID does
//! not inherit a class.

use crate::class::Class;
use std::collections::HashMap;
use std::path::Path;

/// A thread as class hints see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveTask {
    pub tid: u32,
    /// Its process (thread group) ID.
    pub pid: u32,
    pub comm: String,
    pub cgroup: String,
    /// Runnable (/proc's state R), and the CPU it is on or last ran on, as
    /// listed, when the listing had them (BPF's task listing has; a /proc
    /// walk has not, and the gangs read them only for their threads).
    pub runnable_on: Option<(bool, usize)>,
}

/// Every thread under `proc_root` (normally /proc), with its process's
/// cgroup if `with_cgroup` (else an empty path: one read fewer per process).
/// Best effort: tasks that exit while it reads are skipped.
pub fn scan_tasks(proc_root: &Path, with_cgroup: bool) -> Vec<LiveTask> {
    scan_processes(proc_root, sky_proc::processes(proc_root), with_cgroup)
}

/// The threads of processes `pids` only, as [`scan_tasks`] lists them: a
/// cost in proportion to those processes, not to the machine.
pub fn scan_processes(
    proc_root: &Path,
    pids: impl IntoIterator<Item = u32>,
    with_cgroup: bool,
) -> Vec<LiveTask> {
    let mut tasks = Vec::new();
    for pid in pids {
        let cgroup = if with_cgroup {
            sky_proc::process_cgroup(proc_root, pid)
        } else {
            String::new()
        };
        for thread in sky_proc::threads_of(proc_root, pid) {
            if let Some(comm) = thread.read("comm") {
                tasks.push(LiveTask {
                    tid: thread.tid,
                    pid,
                    comm: comm.trim_end_matches('\n').to_string(),
                    cgroup: cgroup.clone(),
                    runnable_on: None,
                });
            }
        }
    }
    tasks
}

/// What to write to and remove from the class map.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    pub set: Vec<(u32, Class)>,
    pub clear: Vec<u32>,
}

/// The class map as last written.
#[derive(Debug, Clone, Default)]
pub struct ClassTable {
    written: HashMap<u32, Class>,
}

impl ClassTable {
    /// The class last written for `tid`, if it has one.
    pub fn get(&self, tid: u32) -> Option<Class> {
        self.written.get(&tid).copied()
    }

    /// The changes that make the map hold exactly `now`'s known classes;
    /// recorded as written (call `forget_failed` for any that were not).
    pub fn update(&mut self, now: impl IntoIterator<Item = (u32, Class)>) -> Changes {
        let now: HashMap<u32, Class> = now
            .into_iter()
            .filter(|(_, c)| *c != Class::Unknown)
            .collect();
        let mut changes = Changes::default();
        for (&tid, &class) in &now {
            if self.written.get(&tid) != Some(&class) {
                changes.set.push((tid, class));
            }
        }
        for &tid in self.written.keys() {
            if !now.contains_key(&tid) {
                changes.clear.push(tid);
            }
        }
        changes.set.sort_unstable();
        changes.clear.sort_unstable();
        self.written = now;
        changes
    }

    /// A write that failed (the map was full): try it again next time.
    pub fn forget_failed(&mut self, tid: u32) {
        self.written.remove(&tid);
    }

    /// Tasks per known class, in `Class::ALL` order (unknown: 0).
    pub fn census(&self) -> [(Class, usize); 4] {
        Class::ALL.map(|c| (c, self.written.values().filter(|&&w| w == c).count()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_follows_the_tasks_writing_only_what_changed() {
        let mut t = ClassTable::default();
        let c = t.update([
            (1, Class::Compute),
            (2, Class::PmWriter),
            (3, Class::Unknown),
        ]);
        assert_eq!(c.set, vec![(1, Class::Compute), (2, Class::PmWriter)]);
        assert!(c.clear.is_empty());
        // Unchanged: nothing to do. 2 changed class, 1 is gone.
        let c = t.update([(2, Class::MemoryBound), (4, Class::Compute)]);
        assert_eq!(c.set, vec![(2, Class::MemoryBound), (4, Class::Compute)]);
        assert_eq!(c.clear, vec![1]);
        assert!(t.update([(2, Class::MemoryBound), (4, Class::Compute)]) == Changes::default());
        // A task turned unknown leaves the map.
        let c = t.update([(2, Class::Unknown), (4, Class::Compute)]);
        assert_eq!(c.clear, vec![2]);
        t.forget_failed(4);
        assert_eq!(
            t.update([(4, Class::Compute)]).set,
            vec![(4, Class::Compute)]
        );
        assert_eq!(t.census()[1], (Class::Compute, 1));
    }

    #[test]
    fn this_process_is_found_with_its_name() {
        let me = std::process::id();
        let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
        let cgroup = sky_proc::cgroup_path(&std::fs::read_to_string("/proc/self/cgroup").unwrap());
        for with_cgroup in [true, false] {
            let tasks = scan_tasks(Path::new("/proc"), with_cgroup);
            let mine = tasks.iter().find(|t| t.tid == me).expect("own task listed");
            assert_eq!(mine.pid, me);
            assert_eq!(mine.comm, comm.trim_end());
            let expected = if with_cgroup { cgroup.as_str() } else { "" };
            assert_eq!(mine.cgroup, expected);
        }
        assert!(scan_tasks(Path::new("/nonexistent"), true).is_empty());
    }

    /// A listing of chosen processes has their threads, as the full
    /// listing has them, and nothing of a process that is not there.
    #[test]
    fn chosen_processes_are_listed_as_the_full_listing_lists_them() {
        let me = std::process::id();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let spare = std::thread::spawn(move || rx.recv());
        let chosen = scan_processes(Path::new("/proc"), [me, u32::MAX], true);
        let all = scan_tasks(Path::new("/proc"), true);
        assert!(chosen.len() >= 2, "this process's threads: {chosen:?}");
        assert!(chosen.iter().all(|t| t.pid == me));
        let main = chosen
            .iter()
            .find(|t| t.tid == me)
            .expect("the main thread");
        assert_eq!(Some(main), all.iter().find(|t| t.tid == me));
        assert!(scan_processes(Path::new("/proc"), [u32::MAX], true).is_empty());
        drop(tx);
        let _ = spare.join();
    }
}
