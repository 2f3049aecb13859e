//! What `scx_sky top` shows, and where each figure comes from: the
//! topology from sysfs, CPU use and tasks from /proc (the kernel's own
//! counters, so the view is the same whatever scheduler runs), the policy
//! and the scheduler's statistics from its stats socket.

use sky_proc::{sched_field, SchedStat, Stat};
use sky_topology::Topology;
use std::collections::{HashMap, VecDeque};
use std::path::Path;

/// Samples kept for the sparklines.
pub const HISTORY: usize = 120;

/// One hardware thread.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuView {
    pub id: usize,
    /// Busy share over the last period, 0..=1.
    pub busy: f64,
    /// Name of the task that ran most there last period.
    pub current: Option<String>,
    /// Its class, if the scheduler knows it.
    pub class: Option<String>,
    pub online: bool,
}

/// Cache domains -> cores -> hardware threads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopoView {
    pub llcs: Vec<Vec<Vec<CpuView>>>,
}

impl TopoView {
    /// The layout of `topo`, every CPU idle and unnamed.
    pub fn from_topology(topo: &Topology) -> TopoView {
        let llcs = topo
            .llcs
            .iter()
            .map(|llc| {
                let mut cores: Vec<Vec<CpuView>> = Vec::new();
                for &cpu in &llc.cpus {
                    let first = topo.cpus[cpu].siblings.first().copied().unwrap_or(cpu);
                    let view = CpuView {
                        id: cpu,
                        online: topo.cpus[cpu].online,
                        ..Default::default()
                    };
                    match cores
                        .iter_mut()
                        .find(|c| c.first().map(|v| v.id) == Some(first))
                    {
                        Some(core) => core.push(view),
                        None if first == cpu => cores.push(vec![view]),
                        // Its sibling comes later in the list: start the core here.
                        None => cores.push(vec![view]),
                    }
                }
                cores
            })
            .collect();
        TopoView { llcs }
    }

    pub fn cpus_mut(&mut self) -> impl Iterator<Item = &mut CpuView> {
        self.llcs.iter_mut().flatten().flatten()
    }
}

/// One row of the task table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskRow {
    pub tid: u32,
    pub comm: String,
    pub cpu: usize,
    /// CPU share over the last period, 0..=1 of one CPU.
    pub busy: f64,
    /// Share of its runs that stayed on the CPU it ran on before
    /// (1 - migrations / switches, over the last period).
    pub last_cpu_share: Option<f64>,
    /// Mean run-queue wait per run over the last period, microseconds.
    pub wait_us: Option<f64>,
    /// The class the scheduler gives it, if known.
    pub class: Option<String>,
    /// The 99th percentile of its waits in the scheduler's queues over the
    /// last period, microseconds (from scx_sky's per-task histogram).
    pub wait_p99_us: Option<u64>,
}

fn shown_wait_us(scheduler: &Scheduler, t: &TaskRow) -> Option<f64> {
    match scheduler {
        Scheduler::Running { .. } => t.wait_p99_us.map(|w| w as f64),
        Scheduler::Absent(_) => t.wait_us,
    }
}

/// What the scheduler says of one thread: its class, and its wait
/// histogram since it started, as (bucket, count).
pub type ThreadView = sky_stats::ThreadView;

/// One period's wait histogram: `now` less `before` per bucket (a thread
/// ID reused by a new thread has counts below the old: `now` whole).
pub fn histogram_growth(now: &[(usize, u64)], before: &[(usize, u64)]) -> Vec<(usize, u64)> {
    let old: HashMap<usize, u64> = before.iter().copied().collect();
    let restarted = now.iter().any(|(b, n)| old.get(b).is_some_and(|o| n < o));
    now.iter()
        .map(|&(b, n)| {
            (
                b,
                if restarted {
                    n
                } else {
                    n - old.get(&b).copied().unwrap_or(0)
                },
            )
        })
        .filter(|&(_, n)| n > 0)
        .collect()
}

/// Table columns one can sort by (key `s` cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortKey {
    #[default]
    Busy,
    Wait,
    LastCpu,
    Pid,
}

impl SortKey {
    pub fn next(self) -> SortKey {
        match self {
            SortKey::Busy => SortKey::Wait,
            SortKey::Wait => SortKey::LastCpu,
            SortKey::LastCpu => SortKey::Pid,
            SortKey::Pid => SortKey::Busy,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SortKey::Busy => "cpu%",
            SortKey::Wait => "wait",
            SortKey::LastCpu => "last-cpu",
            SortKey::Pid => "pid",
        }
    }
}

/// Shared-cache gangs as the scheduler's last plan left them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GangFigures {
    /// Of the gangs' run time this period, the share at home; None
    /// without gang run time.
    pub home_share: Option<f64>,
    /// Per cache domain, by index: its state (`empty`, `clean`, `dirty`)
    /// and the gangs homed there; empty when the scheduler did not say.
    pub domains: Vec<(String, usize)>,
}

/// The running scheduler as its stats socket last described it.
#[derive(Debug, Clone, PartialEq)]
pub enum Scheduler {
    Running {
        policy: String,
        generation: u64,
        /// This period's last-CPU share and mean wait, from its counters.
        last_cpu_share: Option<f64>,
        mean_wait_us: Option<f64>,
    },
    /// Why there is nothing to show (no scx_sky, no permission, ...).
    Absent(String),
}

#[derive(Debug, Clone)]
pub struct Model {
    pub scheduler: Scheduler,
    pub topo: TopoView,
    pub tasks: Vec<TaskRow>,
    pub sort: SortKey,
    /// Per period: last-CPU share (per mille), mean wait (us), moves.
    pub last_cpu_history: VecDeque<u64>,
    pub wait_history: VecDeque<u64>,
    pub moves_history: VecDeque<u64>,
    /// One line for the user: what a key did, or why it could not.
    pub status: String,
    /// Each thread's wait histogram at the last look, to take the period's
    /// growth from.
    pub wait_histograms: HashMap<u32, Vec<(usize, u64)>>,
    pub gangs: GangFigures,
}

impl Model {
    pub fn new(topo: TopoView) -> Model {
        Model {
            scheduler: Scheduler::Absent("looking for scx_sky...".into()),
            topo,
            tasks: Vec::new(),
            sort: SortKey::default(),
            last_cpu_history: VecDeque::new(),
            wait_history: VecDeque::new(),
            moves_history: VecDeque::new(),
            status: String::new(),
            wait_histograms: HashMap::new(),
            gangs: GangFigures::default(),
        }
    }

    /// The wait the table shows for `t`: scx_sky's p99 over the period
    /// while it runs (none for a thread it has not counted yet), else the
    /// kernel's mean wait per run.
    pub fn shown_wait_us(&self, t: &TaskRow) -> Option<f64> {
        shown_wait_us(&self.scheduler, t)
    }

    /// Orders the task table by the sort key, largest first (pid: lowest).
    pub fn sort_tasks(&mut self) {
        let (sort, scheduler) = (self.sort, &self.scheduler);
        let key = |t: &TaskRow| -> f64 {
            match sort {
                SortKey::Busy => t.busy,
                SortKey::Wait => shown_wait_us(scheduler, t).unwrap_or(-1.0),
                SortKey::LastCpu => t.last_cpu_share.unwrap_or(-1.0),
                SortKey::Pid => -(t.tid as f64),
            }
        };
        self.tasks.sort_by(|a, b| key(b).total_cmp(&key(a)));
    }

    /// Appends one period's scheduler figures to the sparklines.
    pub fn record(&mut self, last_cpu_share: Option<f64>, wait_us: Option<f64>, moves: u64) {
        let push = |h: &mut VecDeque<u64>, v: u64| {
            h.push_back(v);
            while h.len() > HISTORY {
                h.pop_front();
            }
        };
        push(
            &mut self.last_cpu_history,
            last_cpu_share.map_or(0, |s| (s * 1000.0) as u64),
        );
        push(&mut self.wait_history, wait_us.unwrap_or(0.0) as u64);
        push(&mut self.moves_history, moves);
    }
}

/// Busy and total jiffies of each CPU, from /proc/stat text.
pub use sky_proc::cpu_times;

/// A thread's counters at one look.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadSample {
    pub comm: String,
    pub cpu: usize,
    pub stat: SchedStat,
    pub switches: Option<u64>,
    pub migrations: Option<u64>,
}

/// Every thread under `proc_root` with the counters the table needs.
pub fn scan_threads(proc_root: &Path) -> HashMap<u32, ThreadSample> {
    let mut out = HashMap::new();
    for thread in sky_proc::threads(proc_root) {
        let (Some(comm), Some(stat), Some(sched_stat)) = (
            thread.read("comm"),
            thread.read("stat"),
            thread.read("schedstat"),
        ) else {
            continue;
        };
        let Ok(stat_counts) = SchedStat::parse(&sched_stat) else {
            continue;
        };
        let sched = thread.read("sched").unwrap_or_default();
        out.insert(
            thread.tid,
            ThreadSample {
                comm: comm.trim_end().to_string(),
                cpu: Stat::parse(&stat).map_or(0, |s| s.processor),
                stat: stat_counts,
                switches: sched_field(&sched, "nr_switches"),
                migrations: sched_field(&sched, "se.nr_migrations"),
            },
        );
    }
    out
}

/// The task table for one period, from two looks `period_ns` apart:
/// only threads that ran in it, each with its CPU share, last-CPU share
/// and mean wait over the period.
pub fn task_rows(
    before: &HashMap<u32, ThreadSample>,
    now: &HashMap<u32, ThreadSample>,
    period_ns: u64,
) -> Vec<TaskRow> {
    now.iter()
        .filter_map(|(&tid, n)| {
            let b = before.get(&tid)?;
            let ran = n.stat.run_ns.saturating_sub(b.stat.run_ns);
            if ran == 0 {
                return None;
            }
            let slices = n.stat.timeslices.saturating_sub(b.stat.timeslices);
            let waited = n.stat.wait_ns.saturating_sub(b.stat.wait_ns);
            let last_cpu_share = match (n.switches, b.switches, n.migrations, b.migrations) {
                (Some(s1), Some(s0), Some(m1), Some(m0)) if s1 > s0 => {
                    let moves = m1.saturating_sub(m0) as f64;
                    Some((1.0 - moves / (s1 - s0) as f64).clamp(0.0, 1.0))
                }
                _ => None,
            };
            Some(TaskRow {
                tid,
                comm: n.comm.clone(),
                cpu: n.cpu,
                // Capped: one thread uses at most one CPU; reading /proc
                // takes a while, so a thread's interval can exceed the period.
                busy: (ran as f64 / period_ns.max(1) as f64).min(1.0),
                last_cpu_share,
                wait_us: (slices > 0).then(|| waited as f64 / slices as f64 / 1000.0),
                // The scheduler's to say, asked once the rows are known.
                class: None,
                wait_p99_us: None,
            })
        })
        .collect()
}

/// Each CPU's busy share and the task that ran most there.
pub fn fill_cpus(
    topo: &mut TopoView,
    before: &HashMap<usize, (u64, u64)>,
    now: &HashMap<usize, (u64, u64)>,
    tasks: &[TaskRow],
) {
    for cpu in topo.cpus_mut() {
        cpu.busy = match (before.get(&cpu.id), now.get(&cpu.id)) {
            (Some(&(b0, t0)), Some(&(b1, t1))) if t1 > t0 => {
                (b1.saturating_sub(b0)) as f64 / (t1 - t0) as f64
            }
            _ => 0.0,
        };
        let busiest = tasks
            .iter()
            .filter(|t| t.cpu == cpu.id)
            .max_by(|a, b| a.busy.total_cmp(&b.busy));
        cpu.current = busiest.map(|t| t.comm.clone());
        cpu.class = busiest.and_then(|t| t.class.clone());
    }
}
