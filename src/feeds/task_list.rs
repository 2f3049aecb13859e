//! The running tasks, as BPF's task iterator (bpf/tasks.bpf.h) lists them:
//! every thread of the machine in a few reads, with whether it is runnable
//! and where it runs. Where the iterator cannot be attached or read, /proc
//! is walked instead (`sky_classify::live::scan_tasks`), with a log line.

use crate::bpf::intf::sky_task_row;
use crate::bpf::skel::BpfSkel;
use crate::map_values;
use anyhow::{Context, Result};
use libbpf_rs::{Iter, Link};
use log::warn;
use sky_classify::live::{scan_processes, scan_tasks, LiveTask};
use sky_proc::process_cgroup;
use std::collections::{BTreeSet, HashMap};
use std::io::Read;
use std::path::Path;

const ROW: usize = std::mem::size_of::<sky_task_row>();

/// Which tasks a pass must list: each feed says what it needs, and one
/// listing serves both. Listing every thread costs in proportion to the
/// machine (40-60 ms of CPU for 10 000 threads under TCG); the threads of
/// a few processes cost in proportion to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listing {
    Nothing,
    /// The threads of these processes (read from /proc).
    Processes(BTreeSet<u32>),
    All,
}

impl Listing {
    /// What serves both `self` and `other`.
    pub fn and(self, other: Listing) -> Listing {
        match (self, other) {
            (Listing::All, _) | (_, Listing::All) => Listing::All,
            (Listing::Processes(mut a), Listing::Processes(mut b)) => {
                a.append(&mut b);
                Listing::Processes(a)
            }
            (Listing::Nothing, x) | (x, Listing::Nothing) => x,
        }
    }
}

pub struct TaskLister {
    /// The iterator's link; None: /proc is walked.
    link: Option<Link>,
    /// Has a failed read been said?
    warned: bool,
}

impl TaskLister {
    pub fn new(skel: &BpfSkel) -> TaskLister {
        let link = skel
            .progs
            .sky_list_tasks
            .attach()
            .inspect_err(|e| warn!("no BPF task iterator ({e}): tasks are listed from /proc"))
            .ok();
        TaskLister {
            link,
            warned: false,
        }
    }

    /// The threads `listing` names, with their process's cgroup path if
    /// `with_cgroup`.
    pub fn list(&mut self, listing: &Listing, with_cgroup: bool) -> Vec<LiveTask> {
        match listing {
            Listing::Nothing => Vec::new(),
            Listing::Processes(pids) => {
                scan_processes(Path::new("/proc"), pids.iter().copied(), with_cgroup)
            }
            Listing::All => self.list_all(with_cgroup),
        }
    }

    /// Every thread, with its process's cgroup path if `with_cgroup` (read
    /// from /proc once per process).
    fn list_all(&mut self, with_cgroup: bool) -> Vec<LiveTask> {
        let Some(link) = &self.link else {
            return scan_tasks(Path::new("/proc"), with_cgroup);
        };
        let mut tasks = match read_rows(link) {
            Ok(tasks) => tasks,
            Err(e) => {
                if !std::mem::replace(&mut self.warned, true) {
                    warn!("the BPF task iterator failed ({e:#}): tasks are listed from /proc");
                }
                return scan_tasks(Path::new("/proc"), with_cgroup);
            }
        };
        if with_cgroup {
            let mut of_process: HashMap<u32, String> = HashMap::new();
            for t in &mut tasks {
                t.cgroup = of_process
                    .entry(t.pid)
                    .or_insert_with(|| process_cgroup(Path::new("/proc"), t.pid))
                    .clone();
            }
        }
        tasks
    }
}

/// One run of the iterator.
fn read_rows(link: &Link) -> Result<Vec<LiveTask>> {
    let mut bytes = Vec::new();
    Iter::new(link)
        .context("starting the iterator")?
        .read_to_end(&mut bytes)
        .context("reading the iterator")?;
    parse_rows(&bytes)
}

/// The rows the iterator wrote, back to back.
fn parse_rows(bytes: &[u8]) -> Result<Vec<LiveTask>> {
    let rows: Vec<sky_task_row> = map_values::read_all(bytes)
        .with_context(|| format!("{} bytes are not whole rows of {ROW}", bytes.len()))?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let name: Vec<u8> = row
                .comm
                .iter()
                .map(|&c| c as u8)
                .take_while(|&c| c != 0)
                .collect();
            LiveTask {
                tid: row.tid,
                pid: row.pid,
                comm: String::from_utf8_lossy(&name).into_owned(),
                cgroup: String::new(),
                runnable_on: Some((row.runnable != 0, row.cpu.max(0) as usize)),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::intf;

    fn row(tid: u32, pid: u32, cpu: i32, runnable: u32, comm: &[u8]) -> Vec<u8> {
        let mut r = sky_task_row {
            tid,
            pid,
            cpu,
            runnable,
            comm: [0; intf::sky_consts_SKY_COMM_LEN as usize],
        };
        for (d, s) in r.comm.iter_mut().zip(comm) {
            *d = *s as _;
        }
        map_values::bytes(&r).to_vec()
    }

    #[test]
    fn one_listing_serves_both_feeds() {
        let procs = |p: &[u32]| Listing::Processes(p.iter().copied().collect());
        assert_eq!(procs(&[1, 3]).and(procs(&[3, 5])), procs(&[1, 3, 5]));
        assert_eq!(procs(&[1]).and(Listing::All), Listing::All);
        assert_eq!(Listing::All.and(Listing::Nothing), Listing::All);
        assert_eq!(Listing::Nothing.and(procs(&[2])), procs(&[2]));
        assert_eq!(Listing::Nothing.and(Listing::Nothing), Listing::Nothing);
    }

    /// Rows become tasks with their names, states and CPUs; a name of 15
    /// bytes (no room for more) and one that is not UTF-8 are kept; a
    /// torn read is an error, not a wrong task.
    #[test]
    fn rows_are_read_as_the_iterator_wrote_them() {
        let mut bytes = row(7, 5, 3, 1, b"mb-a");
        bytes.extend(row(9, 9, 0, 0, b"fifteen-bytes!!"));
        bytes.extend(row(11, 9, 1, 0, b"caf\xe9"));
        let tasks = parse_rows(&bytes).unwrap();
        assert_eq!(tasks.len(), 3);
        assert_eq!(
            (tasks[0].tid, tasks[0].pid, tasks[0].comm.as_str()),
            (7, 5, "mb-a")
        );
        assert_eq!(tasks[0].runnable_on, Some((true, 3)));
        assert_eq!(tasks[1].comm, "fifteen-bytes!!");
        assert_eq!(tasks[1].runnable_on, Some((false, 0)));
        assert_eq!(tasks[2].comm, "caf\u{fffd}");
        assert!(parse_rows(&bytes[..ROW + 1]).is_err());
        assert!(parse_rows(&[]).unwrap().is_empty());
    }
}
