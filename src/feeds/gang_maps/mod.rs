//! Feeds gangs to BPF (bpf/gang.bpf.h): every 100 ms the running tasks are
//! grouped by the gang rules (sky_gangs::table), each gang judged
//! memory-bound or not, the planner gives every memory-bound gang a home
//! domain, and the result goes to BPF's maps: which processes form a gang
//! of several (`sky_proc_gang`), each gang's home (`sky_gang_homes`) and
//! the gangs homed per domain (`sky_llc_gangs`). Homes BPF chose itself
//! for new processes (provisional) are adopted by the planner first.

use crate::bpf::intf;
use crate::bpf::skel::types::bss;
use crate::feeds::change_log::ChangeLog;
use crate::feeds::map_room::MapRoom;
use crate::feeds::task_list::Listing;
use crate::map_values;
use anyhow::Result;
use libbpf_rs::{MapCore, MapFlags};
use log::{info, warn};
use sky_classify::live::LiveTask;
use sky_classify::Class;
use sky_gangs::detect::{Detector, ThreadPeriod};
use sky_gangs::inputs::{self, Demand};
use sky_gangs::planner::{
    self, Domain, DomainId, DomainState, GangId, Plan, Planner, Reason, Settings,
};
use sky_gangs::rules::{GangKey, GangRules, Hint, SpaceKey};
use sky_gangs::table::{GangIds, GangTable};
use sky_policy::Policy;
use sky_pvas_format::hints::SpaceHints;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

mod maps;

const PERIOD: Duration = Duration::from_millis(100);
/// The period with nothing to gang (no rule, no space, no class that can
/// say memory-bound, no gang of several): a refresh then only follows
/// hotplug and the domains' state clock, and each wake-up of the worker
/// takes a CPU from a task for a moment.
const QUIET_PERIOD: Duration = Duration::from_secs(1);
/// Spaces are watched this long after the last one went (jobs that make
/// a new space for each run).
const SPACE_WATCH_LINGER: Duration = Duration::from_secs(10);
const NO_DOMAIN: u32 = intf::sky_consts_SKY_LLC_UNKNOWN;

/// A gang's key in BPF's maps (see SKY_GANG_SHARED_BASE in bpf/intf.h).
fn bpf_key(key: &GangKey, id: GangId) -> u64 {
    match key {
        GangKey::Process(tgid) => u64::from(*tgid),
        _ => intf::SKY_GANG_SHARED_BASE + id.0,
    }
}

/// Thread `tid` of process `pid` now: runnable (state R), and the CPU it
/// is on or last ran on (/proc/PID/task/TID/stat).
fn thread_now(pid: u32, tid: u32) -> Option<(bool, usize)> {
    let s = sky_proc::Stat::of_thread(pid, tid)?;
    Some((s.runnable(), s.processor))
}

/// Each thread's state and CPU for one refresh, as listed or else read
/// ([`thread_now`]) once however many uses (the CPI test's domains, the
/// planner's demand) ask.
#[derive(Default)]
struct ThreadsNow(HashMap<u32, Option<(bool, usize)>>);

impl ThreadsNow {
    fn of(&mut self, task: &LiveTask) -> Option<(bool, usize)> {
        *self
            .0
            .entry(task.tid)
            .or_insert_with(|| task.runnable_on.or_else(|| thread_now(task.pid, task.tid)))
    }
}

/// One gang as the last refresh saw it, for `scx_sky gangs`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct GangView {
    pub id: u64,
    /// `process 1234`, `space NAME`, `cgroup PATH`, `rule N`.
    pub gang: String,
    pub processes: Vec<u32>,
    pub threads: usize,
    /// Runnable threads (the planner's demand).
    pub demand: u32,
    pub memory_bound: bool,
    /// Why it is (or is not) memory-bound.
    pub judged_by: String,
    pub home: Option<u32>,
    pub why: Option<String>,
}

/// One domain as the last plan left it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DomainView {
    pub id: u32,
    pub cpus: u32,
    pub state: DomainState,
    pub gangs: Vec<u64>,
}

/// What `scx_sky gangs` shows.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct GangsView {
    pub domains: Vec<DomainView>,
    pub gangs: Vec<GangView>,
    /// Milliseconds each domain state was planned, summed over domains
    /// since the start (Dirty ms / all ms = the Dirty share).
    pub state_ms: BTreeMap<String, u64>,
}

impl GangsView {
    /// ` gangs: homed=2 llc0=clean llc1=clean dirty=0.4%`: the domains
    /// as planned, and the planned Dirty share of domain time so far.
    pub fn summary(&self) -> String {
        let homed: usize = self.domains.iter().map(|d| d.gangs.len()).sum();
        let total: u64 = self.state_ms.values().sum();
        let dirty = self.state_ms.get("dirty").copied().unwrap_or(0);
        let mut s = format!(" gangs: homed={homed}");
        for d in &self.domains {
            s += &format!(" llc{}={}", d.id, d.state);
        }
        if total > 0 {
            s += &format!(" dirty={:.1}%", dirty as f64 * 100.0 / total as f64);
        }
        s
    }
}

/// BPF's side of the gangs: the maps a refresh reads and writes, and the
/// globals it follows (hotplug) and publishes to (counts for BPF's
/// provisional homes).
pub struct GangMaps<'a, M: MapCore> {
    pub homes: &'a M,
    pub proc_gang: &'a M,
    pub bss: Option<&'a mut bss>,
}

/// What the classifier knows of a task this period.
pub trait TaskFacts {
    /// Its class (the daemon's, or its hints').
    fn class_of(&self, task: &LiveTask) -> Option<Class>;
    /// Its (cycles, instructions) this period, where the PMU counts.
    fn period_counts(&self, tid: u32) -> Option<(u64, u64)>;
}

pub struct GangFeed {
    /// `--gang`: tried before the policy's `[[gang_rule]]`.
    command_line: Vec<String>,
    rules: GangRules,
    /// The CPI test, fed from the PMU where it counts.
    detector: Detector,
    /// Each CPU's cache domain.
    llc_of_cpu: Vec<Option<u32>>,
    ids: GangIds,
    planner: Planner,
    started: Instant,
    refreshed_at: Option<Instant>,
    /// Each memory-bound gang's runnable threads over the last periods.
    demand: Demand,
    /// The processes BPF knows in a gang of several, as written.
    proc_written: HashMap<u32, u64>,
    /// sky_proc_gang and sky_gang_homes: full at the last write?
    proc_room: MapRoom,
    homes_room: MapRoom,
    /// BPF's count of process entries dropped, as last seen.
    proc_dropped_seen: u64,
    warned_dangling: bool,
    /// Each space's member processes at the last refresh.
    spaces_seen: Vec<(SpaceKey, Vec<u32>)>,
    /// When a space was last there.
    spaces_last_seen: Option<Instant>,
    /// Can a class say memory-bound (the PMU, or a hint)? Then any
    /// process may be a gang to plan.
    classes_possible: bool,
    /// Nothing to gang at the last refresh (`QUIET_PERIOD`).
    quiet: bool,
    view: GangsView,
    /// Gangs placed or moved: each at debug, a summary at info.
    changes: ChangeLog,
}

/// The processes the spaces name as members.
pub fn members_of(spaces: &[SpaceHints]) -> BTreeSet<u32> {
    spaces.iter().flat_map(|s| s.pids.iter().copied()).collect()
}

/// Each space with its member processes, in a comparable form.
fn members_signature(spaces: &[SpaceHints]) -> Vec<(SpaceKey, Vec<u32>)> {
    let mut v: Vec<(SpaceKey, Vec<u32>)> = spaces
        .iter()
        .map(|s| {
            let mut pids = s.pids.clone();
            pids.sort_unstable();
            (space_key(s), pids)
        })
        .collect();
    v.sort();
    v
}

/// A space as gangs know it: its name for rules, its owner and file to
/// tell it from another user's space of the same name.
fn space_key(s: &SpaceHints) -> SpaceKey {
    SpaceKey {
        name: s.name.clone(),
        uid: s.id.uid,
        dev: s.id.dev,
        ino: s.id.ino,
    }
}

impl GangFeed {
    /// Gangs by the rules `--gang` (`command_line`) and the policy's
    /// `[[gang_rule]]`, over the domains of `topo`.
    pub fn new(
        command_line: &[String],
        policy: &Policy,
        topo: &sky_topology::Topology,
    ) -> Result<Self> {
        let rules = GangRules::new(command_line, &policy.gang_rule)?;
        let domains = topo
            .llcs
            .iter()
            .enumerate()
            .map(|(i, llc)| Domain {
                id: DomainId(i as u32),
                cpus: llc.cpus.iter().filter(|&&c| topo.cpus[c].online).count() as u32,
            })
            .collect();
        Ok(GangFeed {
            command_line: command_line.to_vec(),
            rules,
            detector: Detector::default(),
            llc_of_cpu: topo.cpus.iter().map(|c| c.llc.map(|l| l as u32)).collect(),
            ids: GangIds::default(),
            planner: Planner::new(domains, Settings::default()),
            started: Instant::now(),
            refreshed_at: None,
            demand: Demand::default(),
            proc_written: HashMap::new(),
            proc_room: MapRoom::default(),
            homes_room: MapRoom::default(),
            proc_dropped_seen: 0,
            warned_dangling: false,
            spaces_seen: Vec::new(),
            spaces_last_seen: None,
            classes_possible: true,
            quiet: false,
            view: GangsView::default(),
            changes: ChangeLog::new("gang"),
        })
    }

    /// Takes `policy`'s gang rules (a switch published it), after the
    /// command line's: the next refresh, due at once, forms gangs by them.
    pub fn follow(&mut self, policy: &Policy) -> Result<()> {
        self.rules = GangRules::new(&self.command_line, &policy.gang_rule)?;
        self.refreshed_at = None;
        Ok(())
    }

    pub fn due(&self) -> bool {
        self.until_due().is_zero()
    }

    /// How long until a refresh is due (zero: it is).
    pub fn until_due(&self) -> Duration {
        let period = if self.quiet { QUIET_PERIOD } else { PERIOD };
        self.refreshed_at
            .map_or(Duration::ZERO, |t| period.saturating_sub(t.elapsed()))
    }

    /// Whether a class can say memory-bound (the PMU counts, or a hint
    /// gives it): the class feed's, after each policy it follows.
    pub fn classes_can_say_memory_bound(&mut self, possible: bool) {
        if possible != self.classes_possible {
            self.classes_possible = possible;
            self.refreshed_at = None;
        }
    }

    /// The tasks a refresh must list: every one when a rule or a class
    /// that can say memory-bound could put any task in
    /// a gang that is planned; else only the threads of the spaces'
    /// members and of the processes in planned gangs (every other process
    /// is a gang of its own that is not memory-bound: not planned, not
    /// written to BPF, not shown); none without spaces.
    pub fn listing(&self, spaces: &[SpaceHints]) -> Listing {
        if !self.rules.is_empty() || self.classes_possible {
            return Listing::All;
        }
        let mut pids = members_of(spaces);
        pids.extend(self.planned_processes());
        if pids.is_empty() {
            Listing::Nothing
        } else {
            Listing::Processes(pids)
        }
    }

    /// Are there spaces (their members are gangs), or were there in the
    /// last SPACE_WATCH_LINGER, or space rules? Then the spaces are watched
    /// closely: a member that joins is put in its gang at once, not a
    /// period later (also when a job destroys its space and makes another).
    pub fn watches_spaces(&self) -> bool {
        self.rules.by_space()
            || !self.spaces_seen.is_empty()
            || self
                .spaces_last_seen
                .is_some_and(|t| t.elapsed() < SPACE_WATCH_LINGER)
    }

    /// Has any space's membership changed since the last refresh?
    pub fn spaces_changed(&self, spaces: &[SpaceHints]) -> bool {
        members_signature(spaces) != self.spaces_seen
    }

    pub fn needs_cgroups(&self) -> bool {
        self.rules.by_cgroup()
    }

    /// The processes of the last refresh's gangs that the plan is about:
    /// memory-bound ones, or several processes (every other process is a
    /// gang of its own by default).
    pub fn planned_processes(&self) -> impl Iterator<Item = u32> + '_ {
        self.view
            .gangs
            .iter()
            .filter(|g| g.memory_bound || g.processes.len() > 1)
            .flat_map(|g| g.processes.iter().copied())
    }

    /// The last refresh's gangs, domains and planned state times.
    pub fn view(&self) -> &GangsView {
        &self.view
    }

    /// One refresh: group `tasks`, judge, plan, and hand BPF the result.
    pub fn refresh<M: MapCore>(
        &mut self,
        maps: GangMaps<'_, M>,
        tasks: &[LiveTask],
        spaces: &[SpaceHints],
        facts: &impl TaskFacts,
    ) {
        let elapsed = self.refreshed_at.map(|t| t.elapsed());
        self.refreshed_at = Some(Instant::now());
        let now = self.started.elapsed();
        if let Some(bss) = &maps.bss {
            self.follow_hotplug(bss);
        }
        let dropped = maps.bss.as_ref().map(|b| b.sky_proc_gang_dropped);
        self.warn_dangling(tasks, spaces);

        let table = self.group(tasks, spaces);
        let by_tid: HashMap<u32, &LiveTask> = tasks.iter().map(|t| (t.tid, t)).collect();
        let mut threads_now = ThreadsNow::default();
        self.sample_cpi(&table, &by_tid, facts, &mut threads_now);
        let judged = self.judge(&table, spaces, &by_tid, facts);
        let gangs = self.demands(&table, &judged, &by_tid, &mut threads_now);
        let in_bpf = read_homes(maps.homes);
        self.adopt_homes(&table, &judged, &by_tid, &in_bpf, now);
        let plan = self.planner.plan(&gangs, now);
        log_changes(&table, &plan, &mut self.changes);
        self.changes.tick();
        self.write_homes(maps.homes, &table, &plan, &in_bpf);
        self.write_proc_gangs(maps.proc_gang, &table, dropped);
        if let Some(bss) = maps.bss {
            publish_counts(bss, &plan, &table, &in_bpf, self.planner.domains().len());
        }
        self.quiet = self.rules.is_empty()
            && !self.classes_possible
            && spaces.is_empty()
            && !self.watches_spaces()
            && table
                .gangs
                .iter()
                .all(|(key, e)| matches!(key, GangKey::Process(_)) && !judged[&e.id].0);
        self.refresh_view(&table, &gangs, &judged, &plan, elapsed);
    }

    /// `tasks` grouped by the rules, the spaces' members with their spaces.
    fn group(&mut self, tasks: &[LiveTask], spaces: &[SpaceHints]) -> GangTable {
        let mut members: BTreeMap<u32, Vec<SpaceKey>> = BTreeMap::new();
        for space in spaces {
            for pid in &space.pids {
                members.entry(*pid).or_default().push(space_key(space));
            }
        }
        self.spaces_seen = members_signature(spaces);
        if !spaces.is_empty() {
            self.spaces_last_seen = Some(Instant::now());
        }
        GangTable::build(tasks, &self.rules, &members, &mut self.ids)
    }

    /// Each gang's verdict (memory-bound?) and what gave it.
    fn judge(
        &self,
        table: &GangTable,
        spaces: &[SpaceHints],
        by_tid: &HashMap<u32, &LiveTask>,
        facts: &impl TaskFacts,
    ) -> BTreeMap<GangId, (bool, String)> {
        let flagged: HashSet<SpaceKey> = spaces
            .iter()
            .filter(|s| s.memory_bound)
            .map(space_key)
            .collect();
        let thread_is_memory_bound = |tid: u32| {
            by_tid
                .get(&tid)
                .and_then(|t| facts.class_of(t))
                .is_some_and(|c| c == Class::MemoryBound)
        };
        table
            .gangs
            .iter()
            .map(|(key, e)| {
                let space_says = matches!(key, GangKey::Space(s) if flagged.contains(s));
                let cpi = self.detector.verdict(e.id);
                let verdict = inputs::judge(e, space_says, thread_is_memory_bound, cpi);
                (e.id, verdict)
            })
            .collect()
    }

    /// The gangs as the planner takes them: memory-bound ones with their
    /// demand (runnable threads, smoothed), the others with none.
    fn demands(
        &mut self,
        table: &GangTable,
        judged: &BTreeMap<GangId, (bool, String)>,
        by_tid: &HashMap<u32, &LiveTask>,
        threads_now: &mut ThreadsNow,
    ) -> Vec<planner::Gang> {
        self.demand.retain(|g| judged.contains_key(&g));
        let mut gangs = Vec::new();
        for e in table.gangs.values() {
            let memory_bound = judged[&e.id].0;
            let mut threads = 0;
            if memory_bound {
                let runnable = e
                    .tids
                    .iter()
                    .filter_map(|tid| threads_now.of(by_tid.get(tid)?))
                    .filter(|(running, _)| *running)
                    .count() as u32;
                threads = self.demand.record(e.id, runnable);
            }
            gangs.push(planner::Gang {
                id: e.id,
                threads,
                memory_bound,
            });
        }
        gangs
    }

    /// A memory-bound gang the planner has not placed yet (new, or just
    /// formed from processes that joined a space) keeps the home its
    /// threads already run in (`inputs::inherited_home`).
    fn adopt_homes(
        &mut self,
        table: &GangTable,
        judged: &BTreeMap<GangId, (bool, String)>,
        by_tid: &HashMap<u32, &LiveTask>,
        in_bpf: &BTreeMap<u64, (u32, bool)>,
        now: Duration,
    ) {
        let home_of = |pid: u32| match in_bpf.get(&u64::from(pid)) {
            Some(&(llc, _)) if llc != NO_DOMAIN => Some(DomainId(llc)),
            _ => None,
        };
        for e in table.gangs.values() {
            if !judged[&e.id].0 || self.planner.home(e.id).is_some() {
                continue;
            }
            let mut threads_of_process: BTreeMap<u32, usize> = BTreeMap::new();
            for t in e.tids.iter().filter_map(|tid| by_tid.get(tid)) {
                *threads_of_process.entry(t.pid).or_default() += 1;
            }
            if let Some(home) = inputs::inherited_home(&threads_of_process, home_of) {
                self.planner.adopt(e.id, home, now);
            }
        }
    }

    /// One CPI sample per gang left to detection (hint `auto`) from its
    /// threads' counts this period and where they are now.
    fn sample_cpi(
        &mut self,
        table: &GangTable,
        by_tid: &HashMap<u32, &LiveTask>,
        facts: &impl TaskFacts,
        threads_now: &mut ThreadsNow,
    ) {
        for e in table.gangs.values() {
            if e.hint != Hint::Auto || e.tids.len() < 2 {
                continue;
            }
            let threads: Vec<ThreadPeriod> = e
                .tids
                .iter()
                .filter_map(|tid| {
                    let (cycles, instructions) = facts.period_counts(*tid)?;
                    let task = by_tid.get(tid)?;
                    let domain = threads_now
                        .of(task)
                        .and_then(|(_, cpu)| self.llc_of_cpu.get(cpu).copied().flatten())
                        .map(DomainId);
                    Some(ThreadPeriod {
                        cycles,
                        instructions,
                        domain,
                    })
                })
                .collect();
            self.detector.observe(e.id, &threads);
        }
        let alive: HashSet<GangId> = table.gangs.values().map(|e| e.id).collect();
        self.detector.retain(|g| alive.contains(&g));
    }

    /// Domains whose CPUs all went offline are gone for the planner.
    fn follow_hotplug(&mut self, bss: &bss) {
        let domains: Vec<Domain> = (0..self.planner.domains().len().max(bss.sky_llc_online.len()))
            .take(intf::sky_consts_SKY_MAX_LLCS as usize)
            .filter_map(|i| {
                // SAFETY: an aligned s32 BPF updates atomically.
                let n = unsafe { std::ptr::read_volatile(&bss.sky_llc_online[i]) };
                (n > 0).then_some(Domain {
                    id: DomainId(i as u32),
                    cpus: n as u32,
                })
            })
            .collect();
        if domains != self.planner.domains() {
            info!(
                "gangs: cache domains now {}",
                domains
                    .iter()
                    .map(|d| format!("{}:{} CPUs", d.id.0, d.cpus))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            self.planner.set_domains(domains);
        }
    }

    /// What `scx_sky gangs` shows after this refresh; `elapsed` since the
    /// last one is added to each planned domain state's time.
    fn refresh_view(
        &mut self,
        table: &GangTable,
        gangs: &[planner::Gang],
        judged: &BTreeMap<GangId, (bool, String)>,
        plan: &Plan,
        elapsed: Option<Duration>,
    ) {
        let mut state_ms = std::mem::take(&mut self.view.state_ms);
        let detector = &self.detector;
        let cpi_sampled = |g: GangId| detector.verdict(g).is_some();
        let domains = self.planner.domains();
        if let Some(dt) = elapsed {
            for state in plan.states.values() {
                *state_ms.entry(state.to_string()).or_default() += dt.as_millis() as u64;
            }
        }
        let demand: HashMap<GangId, u32> = gangs.iter().map(|g| (g.id, g.threads)).collect();
        self.view = GangsView {
            domains: domains
                .iter()
                .map(|d| DomainView {
                    id: d.id.0,
                    cpus: d.cpus,
                    state: plan
                        .states
                        .get(&d.id)
                        .copied()
                        .unwrap_or(DomainState::Empty),
                    gangs: plan
                        .homes
                        .iter()
                        .filter(|(_, h)| **h == d.id)
                        .map(|(g, _)| g.0)
                        .collect(),
                })
                .collect(),
            gangs: table
                .gangs
                .iter()
                // A process of its own is shown when it matters: memory-bound,
                // or under the CPI test (most processes are neither).
                .filter(|(key, e)| {
                    !matches!(key, GangKey::Process(_))
                        || judged[&e.id].0
                        || e.hint != Hint::Auto
                        || cpi_sampled(e.id)
                })
                .map(|(key, e)| GangView {
                    id: e.id.0,
                    gang: describe(key),
                    processes: e.processes.iter().copied().collect(),
                    threads: e.tids.len(),
                    demand: demand.get(&e.id).copied().unwrap_or(0),
                    memory_bound: judged[&e.id].0,
                    judged_by: judged[&e.id].1.clone(),
                    home: plan.homes.get(&e.id).map(|d| d.0),
                    why: plan.explain(e.id),
                })
                .collect(),
            state_ms,
        }
    }

    /// A rule naming a cgroup or space that does not exist is a warning
    /// (once): it may come later.
    fn warn_dangling(&mut self, tasks: &[LiveTask], spaces: &[SpaceHints]) {
        if self.warned_dangling || self.rules.is_empty() {
            return;
        }
        self.warned_dangling = true;
        let cgroups: Vec<&str> = tasks.iter().map(|t| t.cgroup.as_str()).collect();
        let names: Vec<&str> = spaces.iter().map(|s| s.name.as_str()).collect();
        for w in self.rules.dangling(&cgroups, &names) {
            warn!("gang rule: {w}");
        }
    }
}

/// One line per gang placed or moved by this plan (kept homes are quiet).
fn log_changes(table: &GangTable, plan: &Plan, changes: &mut ChangeLog) {
    for (key, e) in &table.gangs {
        let kind = match plan.reasons.get(&e.id) {
            Some(Reason::New(_)) => "placed",
            Some(Reason::Moved { .. }) => "moved",
            Some(Reason::Rehomed { .. }) => "rehomed (domain gone)",
            Some(Reason::Confirmed { .. }) => "confirmed",
            _ => continue,
        };
        if let Some(why) = plan.explain(e.id) {
            changes.record(kind.to_string(), || {
                format!(
                    "gang {} ({}, {} processes, {} threads): {why}",
                    e.id.0,
                    describe(key),
                    e.processes.len(),
                    e.tids.len()
                )
            });
        }
    }
}

/// `process 1234`, `space NAME`, `cgroup PATH`, `rule N`.
fn describe(key: &GangKey) -> String {
    match key {
        GangKey::Process(p) => format!("process {p}"),
        GangKey::Cgroup(c) => format!("cgroup {c}"),
        GangKey::Space(s) => format!("space {s}"),
        GangKey::Rule(r) => format!("rule {}", r + 1),
    }
}

/// Every entry of `sky_gang_homes`: key -> (llc, planned).
fn read_homes(homes: &impl MapCore) -> BTreeMap<u64, (u32, bool)> {
    homes
        .keys()
        .filter_map(|k| {
            let key = u64::from_ne_bytes(k.as_slice().try_into().ok()?);
            let value = homes.lookup(&k, MapFlags::ANY).ok()??;
            let home: intf::sky_gang_home = map_values::read(&value)?;
            Some((key, (home.llc, home.planned != 0)))
        })
        .collect()
}

/// Gangs homed per domain for BPF's provisional choices: the plan's, plus
/// provisional homes of processes the plan has not seen yet.
fn publish_counts(
    bss: &mut bss,
    plan: &Plan,
    table: &GangTable,
    in_bpf: &BTreeMap<u64, (u32, bool)>,
    domains: usize,
) {
    let mut counts = vec![0i32; bss.sky_llc_gangs.len()];
    for d in plan.homes.values() {
        if let Some(c) = counts.get_mut(d.0 as usize) {
            *c += 1;
        }
    }
    for (key, (llc, planned)) in in_bpf {
        let unseen = *key < intf::SKY_GANG_SHARED_BASE
            && !table.gangs.contains_key(&GangKey::Process(*key as u32));
        if !planned && unseen {
            if let Some(c) = counts.get_mut(*llc as usize) {
                *c += 1;
            }
        }
    }
    for (i, c) in counts
        .iter()
        .enumerate()
        .take(domains.max(1).max(counts.len()))
    {
        // SAFETY: an aligned s32 in the mapped .bss; BPF adds to it
        // atomically between plans and this store resets it to the truth.
        unsafe { std::ptr::write_volatile(&mut bss.sky_llc_gangs[i], *c) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_gangs_are_keyed_by_pid_others_above_the_shared_base() {
        assert_eq!(bpf_key(&GangKey::Process(42), GangId(9)), 42);
        let job = SpaceKey {
            name: "job".into(),
            uid: 1000,
            dev: 1,
            ino: 2,
        };
        let k = bpf_key(&GangKey::Space(job), GangId(9));
        assert_eq!(k, intf::SKY_GANG_SHARED_BASE + 9);
        assert!(k > u64::from(u32::MAX));
    }

    /// With spaces and neither rules nor classes that can say
    /// memory-bound, only the members' threads are listed; a rule or such
    /// a class needs every task.
    #[test]
    fn only_members_are_listed_when_spaces_are_all_there_is() {
        let policy = Policy::load("sky1").unwrap();
        let topo = sky_topology::Topology::from_host().unwrap();
        let mut feed = GangFeed::new(&[], &policy, &topo).unwrap();
        feed.classes_can_say_memory_bound(false);
        let space = crate::feeds::class_map::tests::space;
        assert_eq!(feed.listing(&[]), Listing::Nothing);
        let spaces = [space("a", &[3, 4], &[]), space("b", &[4, 6], &[6])];
        assert_eq!(
            feed.listing(&spaces),
            Listing::Processes([3, 4, 6].into_iter().collect())
        );
        feed.classes_can_say_memory_bound(true);
        assert_eq!(feed.listing(&spaces), Listing::All);
        let mut ruled = GangFeed::new(&["comm:db*=memory-bound".into()], &policy, &topo).unwrap();
        ruled.classes_can_say_memory_bound(false);
        assert_eq!(ruled.listing(&[]), Listing::All);
    }

    #[test]
    fn runnable_threads_are_read_from_proc() {
        // The thread running this test is running.
        let pid = std::process::id();
        // SAFETY: gettid takes nothing and cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
        assert!(thread_now(pid, tid).is_some_and(|(running, _)| running));
        assert_eq!(thread_now(pid, u32::MAX), None);
        // Field 39, the CPU: one of this machine's, and (pinned) the one.
        let cpus = std::thread::available_parallelism().unwrap().get();
        let (_, cpu) = thread_now(pid, tid).unwrap();
        assert!(cpu < 4096 && (cpus > 1 || cpu == 0), "{cpu}");
        // SAFETY: sched_getcpu takes nothing.
        let here = unsafe { libc::sched_getcpu() };
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: pins this test's thread to the CPU it is on.
        unsafe {
            libc::CPU_SET(here as usize, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
        }
        assert_eq!(thread_now(pid, tid).unwrap().1, here as usize);
    }
}
