//! Feeds task classes to BPF: on every refresh the running tasks' classes
//! (from class hints, else from the PMU counts BPF charged them, judged by
//! the classifier) are written to the `sky_pid_class` map and entries of
//! tasks gone removed.

use crate::bpf::intf;
use crate::feeds::change_log::ChangeLog;
use crate::feeds::gang_maps::TaskFacts;
use crate::feeds::map_room::MapRoom;
use crate::feeds::task_list::Listing;
use crate::map_values;
use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags};
use log::{info, warn};
use sky_classify::pmu::{self, Counter, OpenCounters, PmuSource};
use sky_classify::{live, replay, Class, ClassTable, Classifier, Deltas, Hints, TaskId};
use sky_policy::Policy;
use sky_pvas_format::hints::SpaceHints;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

/// Opens the PMU counters `source` asks for on every online CPU, or
/// returns `None` with a log line saying why there are none.
pub fn open_pmu(source: PmuSource, topo: &sky_topology::Topology) -> Option<OpenCounters> {
    if source == PmuSource::Off {
        return None;
    }
    let table = pmu::event_table(&pmu::CpuModel::of_host(), source);
    let cpus: Vec<usize> = topo.online_cpus().map(|c| c.id).collect();
    match pmu::open(&cpus, &table) {
        Ok((open, notes)) => {
            info!(
                "PMU ({source}): counting {} on {} CPUs; tasks are classed from their counts",
                open.describe(),
                cpus.len()
            );
            for note in notes {
                info!("PMU: {note}");
            }
            Some(open)
        }
        Err(e) => {
            info!("no usable PMU ({e:#}): task classes come from hints only");
            None
        }
    }
}

pub struct ClassFeed {
    /// `--class`: tried before the policy's `[[class_rule]]`.
    command_line: Vec<String>,
    hints: Hints,
    /// The hints BPF cannot apply, as last logged.
    daemon_only: Vec<String>,
    table: ClassTable,
    /// sky_pid_class: full at the last write?
    room: MapRoom,
    /// How often the tasks are listed: every 100 ms when some hint is the
    /// daemon's to apply; every second when BPF applies them all (the
    /// listing then only keeps the census and saves BPF the name match).
    period: Duration,
    refreshed_at: Option<Instant>,
    pmu: Option<PmuClasses>,
}

/// Classes from the PMU: the counts BPF charged each task, as deltas per
/// period, through the classifier.
struct PmuClasses {
    classifier: Classifier<u32>,
    deltas: Deltas,
    /// Each task's cycles and instructions in the last period (for the
    /// gangs' CPI test).
    period: HashMap<u32, (u64, u64)>,
    /// Which counter slots are counted.
    open: [bool; Counter::COUNT],
    record: Option<Recorder>,
    /// Measured class changes: each at debug, a summary at info.
    changes: ChangeLog,
}

/// `--record-counters`: every period's deltas as a replay stream
/// (`scx_sky classify --replay FILE` judges them again, with other
/// thresholds), to tune `[classify]` on a real machine.
struct Recorder {
    path: std::path::PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    period: u64,
}

impl Recorder {
    fn create(path: &Path) -> Result<Recorder> {
        let file = std::fs::File::create(path)
            .with_context(|| format!("creating the counter record {}", path.display()))?;
        let mut out = std::io::BufWriter::new(file);
        writeln!(
            out,
            "# scx_sky --record-counters: per-task counts per 100 ms period"
        )
        .and_then(|_| writeln!(out, "{}", replay::HEADER))
        .with_context(|| format!("writing {}", path.display()))?;
        Ok(Recorder {
            path: path.to_path_buf(),
            out,
            period: 0,
        })
    }
}

/// Listing every thread in /proc is not free (a few ms per thousand
/// threads): done as often as hints need, no more.
const DAEMON_PERIOD: Duration = Duration::from_millis(100);
const CENSUS_PERIOD: Duration = Duration::from_secs(1);

impl ClassFeed {
    /// Classes from the hints (`--class`, the policy's `[[class_rule]]`),
    /// shared spaces' PM writers, and the PMU counters if open (`pmu`);
    /// `record`: where to write every period's counts (`--record-counters`).
    pub fn new(
        command_line: &[String],
        policy: &Policy,
        pmu: Option<&OpenCounters>,
        record: Option<&Path>,
    ) -> Result<Self> {
        let hints = Hints::new(command_line, &policy.class_rule)?;
        let pmu = match pmu {
            Some(open) => Some(PmuClasses {
                classifier: Classifier::new(policy.classify.clone())?,
                deltas: Deltas::default(),
                period: HashMap::new(),
                open: Counter::ALL.map(|c| open.is_open(c)),
                record: record.map(Recorder::create).transpose()?,
                changes: ChangeLog::new("class"),
            }),
            None => {
                if let Some(path) = record {
                    warn!("no PMU counters: nothing to record in {}", path.display());
                }
                None
            }
        };
        let mut feed = ClassFeed {
            command_line: command_line.to_vec(),
            hints,
            daemon_only: Vec::new(),
            table: ClassTable::default(),
            room: MapRoom::default(),
            period: DAEMON_PERIOD,
            refreshed_at: None,
            pmu,
        };
        feed.hints_changed();
        Ok(feed)
    }

    /// Takes `policy`'s class hints and `[classify]` thresholds (a switch
    /// published it; BPF has its name hints already): the next refresh,
    /// due at once, classes every task by them.
    pub fn follow(&mut self, policy: &Policy) -> Result<()> {
        self.hints = Hints::new(&self.command_line, &policy.class_rule)?;
        if let Some(pmu) = &mut self.pmu {
            if *pmu.classifier.thresholds() != policy.classify {
                pmu.classifier = Classifier::new(policy.classify.clone())?;
            }
        }
        self.hints_changed();
        self.refreshed_at = None;
        Ok(())
    }

    /// Hints BPF cannot express (other globs) are the daemon's alone,
    /// within 100 ms (a log line names them); if BPF applies them all and
    /// no counters are read, the tasks are listed only every second.
    fn hints_changed(&mut self) {
        let max = intf::sky_consts_SKY_COMM_RULES_MAX as usize;
        let (bpf, daemon_only) = self.hints.bpf_comm_rules(max);
        if !daemon_only.is_empty() && daemon_only != self.daemon_only {
            info!(
                "class hints applied within 100 ms, not at once (BPF matches only \
                 NAME, NAME*, *NAME, *NAME* of up to 15 bytes, in order): {}",
                daemon_only.join(", ")
            );
        }
        self.period = if bpf.len() == self.hints.len() && self.pmu.is_none() {
            CENSUS_PERIOD
        } else {
            DAEMON_PERIOD
        };
        self.daemon_only = daemon_only;
    }

    /// Is a refresh due (a period has passed since the last one)?
    pub fn due(&self) -> bool {
        self.until_due().is_zero()
    }

    /// How long until a refresh is due (zero: it is).
    pub fn until_due(&self) -> Duration {
        self.refreshed_at
            .map_or(Duration::ZERO, |t| self.period.saturating_sub(t.elapsed()))
    }

    /// The tasks a refresh must list: every one when a hint or the PMU
    /// could class any task; only the threads of shared spaces' PM
    /// writers when nothing else classes (every other task is unknown,
    /// listed or not); none with nothing that could class a task.
    pub fn listing(&self, spaces: &[SpaceHints]) -> Listing {
        if !self.hints.is_empty() || self.pmu.is_some() {
            return Listing::All;
        }
        let writers: BTreeSet<u32> = spaces
            .iter()
            .flat_map(|s| s.pm_writers.iter().copied())
            .collect();
        if writers.is_empty() {
            Listing::Nothing
        } else {
            Listing::Processes(writers)
        }
    }

    /// Can a task be classed memory-bound (a hint says so of some tasks,
    /// or the PMU counts)? If not, no gang is memory-bound by class.
    pub fn can_class_memory_bound(&self) -> bool {
        self.pmu.is_some() || self.hints.gives(Class::MemoryBound)
    }

    /// Do the hints need each task's cgroup?
    pub fn needs_cgroups(&self) -> bool {
        self.hints.by_cgroup()
    }

    /// Brings the class map in step with `tasks`, the tasks running now
    /// (as [`ClassFeed::listing`] asks), and their PMU counts
    /// (`counts`: sky_pid_counts); `spaces`: the shared spaces now.
    pub fn refresh(
        &mut self,
        map: &impl MapCore,
        counts: &impl MapCore,
        tasks: &[live::LiveTask],
        spaces: &[SpaceHints],
    ) {
        self.refreshed_at = Some(Instant::now());
        let space_pm_writers: HashSet<u32> = spaces
            .iter()
            .flat_map(|space| space.pm_writers.iter().copied())
            .collect();
        if let Some(pmu) = &mut self.pmu {
            let alive: HashMap<u32, &str> =
                tasks.iter().map(|t| (t.tid, t.comm.as_str())).collect();
            pmu.observe(counts, &alive);
            pmu.end_period();
        }
        let pmu = &self.pmu;
        let classes = tasks.iter().map(|t| {
            let id = TaskId {
                pid: t.tid,
                comm: &t.comm,
                cgroup: &t.cgroup,
            };
            let measured = pmu
                .as_ref()
                .map_or(Class::Unknown, |p| p.classifier.class_of(&t.tid));
            let in_space = space_pm_writers.contains(&t.pid);
            (t.tid, self.hints.resolve(&id, in_space, measured))
        });
        let changes = self.table.update(classes.collect::<Vec<_>>());
        let mut unwritten = Vec::new();
        for (tid, class) in changes.set {
            let value = class.bpf_value().to_ne_bytes();
            if let Err(e) = map.update(&tid.to_ne_bytes(), &value, MapFlags::ANY) {
                self.table.forget_failed(tid);
                unwritten.push(format!("task {tid} class {class}: {e}"));
            }
        }
        self.room.note("sky_pid_class", &unwritten);
        for tid in changes.clear {
            // Gone already is fine: the entry is what we wanted removed.
            let _ = map.delete(&tid.to_ne_bytes());
        }
    }

    /// The classes as this refresh left them, for the run loop.
    pub fn view(&self) -> ClassesView {
        ClassesView {
            table: self.table.clone(),
            hints: self.hints.clone(),
        }
    }
}

/// What the gang feed asks of the classes.
impl TaskFacts for ClassFeed {
    /// The daemon's class from its last refresh, else what the hints say
    /// of the task now (one newer than that refresh).
    fn class_of(&self, task: &live::LiveTask) -> Option<Class> {
        self.table.get(task.tid).or_else(|| {
            self.hints.class_for(&TaskId {
                pid: task.tid,
                comm: &task.comm,
                cgroup: &task.cgroup,
            })
        })
    }

    fn period_counts(&self, tid: u32) -> Option<(u64, u64)> {
        self.pmu.as_ref()?.period.get(&tid).copied()
    }
}

/// The classes as the last refresh left them: what the run loop (stats,
/// `scx_sky top`) shows while the feeds worker goes on.
#[derive(Debug, Clone, Default)]
pub struct ClassesView {
    table: ClassTable,
    hints: Hints,
}

impl ClassesView {
    /// The class BPF gives thread `tid`: the daemon's, or else a name hint
    /// on its current name (what BPF matches by itself); None if unknown.
    pub fn class_of_thread(&self, tid: u32) -> Option<Class> {
        if let Some(class) = self.table.get(tid) {
            return Some(class);
        }
        let comm = sky_proc::comm(tid)?;
        let id = TaskId {
            pid: tid,
            comm: &comm,
            cgroup: "",
        };
        self.hints.class_for(&id).filter(|c| *c != Class::Unknown)
    }

    /// `compute=2 pm-writer=2 memory-bound=0`: tasks per known class.
    pub fn census(&self) -> String {
        self.table
            .census()
            .iter()
            .filter(|(c, _)| *c != sky_classify::Class::Unknown)
            .map(|(c, n)| format!("{c}={n}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// What [`PmuClasses::observe`] asks of the counts map: a subset of
/// [`MapCore`], which is sealed, so that a fake map can stand in for it.
trait CountsMap {
    /// Every entry, as (key, value): by BPF_MAP_LOOKUP_BATCH, a few calls
    /// for thousands of tasks (a lookup per key cost 10-20 % of a CPU at
    /// 1 000 threads every 100 ms in a TCG guest); if that returns
    /// nothing (a kernel that refuses it, or an empty map), by a walk, one
    /// call per key and one per value.
    fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)>;
    fn delete(&self, key: &[u8]) -> libbpf_rs::Result<()>;
}

/// Entries a batch lookup asks for at once.
const COUNTS_BATCH: u32 = 512;

impl<M: MapCore> CountsMap for M {
    fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let batched: Vec<(Vec<u8>, Vec<u8>)> = self
            .lookup_batch(COUNTS_BATCH, MapFlags::ANY, MapFlags::ANY)
            .map(|it| it.collect())
            .unwrap_or_default();
        if !batched.is_empty() {
            return batched;
        }
        self.keys()
            .filter_map(|key| {
                let value = self.lookup(&key, MapFlags::ANY).ok()??;
                Some((key, value))
            })
            .collect()
    }

    fn delete(&self, key: &[u8]) -> libbpf_rs::Result<()> {
        MapCore::delete(self, key)
    }
}

impl PmuClasses {
    /// Each counted task's deltas since the last period go through the
    /// classifier, once; tasks gone are forgotten and their sums removed.
    /// A task whose measured class changes is logged with the features
    /// that decided it (`alive`: the tasks running, with their names).
    fn observe(&mut self, counts: &impl CountsMap, alive: &HashMap<u32, &str>) {
        self.period.clear();
        // Every entry is read before any delete: deleting the key a walk
        // stands on sends the kernel's walk back to the first bucket,
        // which takes the live tasks again, with near-zero deltas in place
        // of their period's. A read can still return a key twice when BPF
        // evicts or adds entries meanwhile: each task is taken once.
        let mut entries: Vec<(u32, Vec<u8>)> = counts
            .entries()
            .into_iter()
            .filter_map(|(key, value)| {
                let tid = u32::from_ne_bytes(key.as_slice().try_into().ok()?);
                Some((tid, value))
            })
            .collect();
        entries.sort_by_key(|(tid, _)| *tid);
        entries.dedup_by_key(|(tid, _)| *tid);
        let mut gone = Vec::new();
        for (tid, value) in entries {
            let Some(comm) = alive.get(&tid) else {
                gone.push(tid.to_ne_bytes());
                self.deltas.forget(tid);
                self.classifier.forget(&tid);
                continue;
            };
            let Some(c) = map_values::read::<intf::sky_task_counts>(&value) else {
                continue;
            };
            let counters = self.deltas.take(tid, c.start_time, c.count, self.open);
            self.period
                .insert(tid, (counters.cycles, counters.instructions));
            if counters.instructions > 0 {
                self.record(tid, comm, &counters);
            }
            if let Some(change) = self.classifier.observe(&tid, &counters) {
                let features = counters
                    .features(0)
                    .map_or_else(|| "no instructions".to_string(), |f| f.to_string());
                self.changes
                    .record(format!("{} -> {}", change.from, change.to), || {
                        format!(
                            "class: task {tid} ({comm}) measured {} -> {}: {features}",
                            change.from, change.to
                        )
                    });
            }
        }
        for key in gone {
            let _ = counts.delete(&key);
        }
        self.changes.tick();
    }
}

impl PmuClasses {
    /// Appends a row to the record, if one is kept; a write that fails
    /// ends the record with a warning, not the scheduler.
    fn record(&mut self, tid: u32, comm: &str, counters: &sky_classify::Counters) {
        let Some(rec) = &mut self.record else {
            return;
        };
        let row = replay::row(rec.period, &format!("{comm}/{tid}"), counters);
        if let Err(e) = writeln!(rec.out, "{row}") {
            warn!("stopped recording counters in {}: {e}", rec.path.display());
            self.record = None;
        }
    }

    /// A period is over: the record's next rows belong to the next one.
    fn end_period(&mut self) {
        let Some(rec) = &mut self.record else {
            return;
        };
        rec.period += 1;
        if let Err(e) = rec.out.flush() {
            warn!("stopped recording counters in {}: {e}", rec.path.display());
            self.record = None;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use sky_classify::Class;
    use std::cell::{Cell, RefCell};
    use std::collections::BTreeMap;
    use std::ops::Bound;

    /// A hash map walked as the kernel walks one: the key after the last
    /// one returned, or the first key again when that one is gone.
    #[derive(Default)]
    struct WalkedMap {
        entries: RefCell<BTreeMap<u32, Vec<u8>>>,
        /// The walk step at which the walk starts over, as the kernel's
        /// does when BPF evicts the key it stands on.
        evict_at: Cell<Option<usize>>,
        walk_steps: Cell<usize>,
        lookups: RefCell<HashMap<u32, usize>>,
        deletes: Cell<usize>,
    }

    impl WalkedMap {
        /// Thread `tid` started at 1 and counted (cycles, instructions).
        fn set(&self, tid: u32, (cycles, instructions): (u64, u64)) {
            let value = [1, cycles, instructions, 0, 0, 0]
                .iter()
                .flat_map(|v| v.to_ne_bytes())
                .collect();
            self.entries.borrow_mut().insert(tid, value);
        }

        /// (walk steps, tasks looked up, most lookups of one task, deletes)
        /// since the last call.
        fn take_ops(&self) -> (usize, usize, usize, usize) {
            let lookups = std::mem::take(&mut *self.lookups.borrow_mut());
            (
                self.walk_steps.replace(0),
                lookups.len(),
                lookups.values().copied().max().unwrap_or(0),
                self.deletes.replace(0),
            )
        }
    }

    impl CountsMap for WalkedMap {
        /// As the fallback reads them: a walk, and a lookup per key (the
        /// batch lookup returns what one walk would, in fewer calls).
        fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
            self.keys()
                .filter_map(|key| Some((key.clone(), self.lookup(&key)?)))
                .collect()
        }

        fn delete(&self, key: &[u8]) -> libbpf_rs::Result<()> {
            self.deletes.set(self.deletes.get() + 1);
            let tid = u32::from_ne_bytes(key.try_into().unwrap());
            self.entries.borrow_mut().remove(&tid);
            Ok(())
        }
    }

    impl WalkedMap {
        fn keys(&self) -> impl Iterator<Item = Vec<u8>> + '_ {
            let mut prev: Option<u32> = None;
            std::iter::from_fn(move || {
                let step = self.walk_steps.get() + 1;
                self.walk_steps.set(step);
                let entries = self.entries.borrow();
                let evicted = self.evict_at.get() == Some(step);
                let next = match prev {
                    Some(p) if entries.contains_key(&p) && !evicted => {
                        entries.range((Bound::Excluded(p), Bound::Unbounded)).next()
                    }
                    _ => entries.iter().next(),
                };
                let tid = *next?.0;
                prev = Some(tid);
                Some(tid.to_ne_bytes().to_vec())
            })
        }

        fn lookup(&self, key: &[u8]) -> Option<Vec<u8>> {
            let tid = u32::from_ne_bytes(key.try_into().unwrap());
            *self.lookups.borrow_mut().entry(tid).or_default() += 1;
            self.entries.borrow().get(&tid).cloned()
        }
    }

    fn pmu_classes() -> PmuClasses {
        PmuClasses {
            classifier: Classifier::new(Policy::load("sky1").unwrap().classify).unwrap(),
            deltas: Deltas::default(),
            period: HashMap::new(),
            changes: ChangeLog::new("class"),
            open: [true; Counter::COUNT],
            record: None,
        }
    }

    /// The live tasks whose period counts are not `want`'s.
    fn wrong_counts(pmu: &PmuClasses, want: &HashMap<u32, (u64, u64)>) -> Vec<u32> {
        let mut wrong: Vec<u32> = want
            .iter()
            .filter(|(tid, counts)| pmu.period.get(tid) != Some(counts))
            .map(|(tid, _)| *tid)
            .collect();
        wrong.sort_unstable();
        wrong
    }

    /// 1000 counted threads, 300 of them gone (spread over the map).
    fn thousand_threads(map: &WalkedMap) -> HashMap<u32, &'static str> {
        for tid in 1..=1000 {
            map.set(tid, (3 * u64::from(tid), 2 * u64::from(tid)));
        }
        (1..=1000)
            .filter(|tid| tid % 10 >= 3)
            .map(|tid| (tid, "worker"))
            .collect()
    }

    #[test]
    fn each_counted_task_is_taken_once_and_the_gone_deleted_after_the_walk() {
        let map = WalkedMap::default();
        let alive = thousand_threads(&map);
        let mut pmu = pmu_classes();
        pmu.observe(&map, &alive);
        let (steps, looked_up, most, deletes) = map.take_ops();
        assert!(
            steps <= 1001,
            "{steps} walk steps for 1000 keys (one pass is 1001)"
        );
        assert_eq!(
            (looked_up, most, deletes),
            (1000, 1, 300),
            "(entries read, most reads of one, deletes): each entry is read \
             once, as a batch reads it, and the gone deleted"
        );
        let mut left: Vec<u32> = map.entries.borrow().keys().copied().collect();
        let mut live: Vec<u32> = alive.keys().copied().collect();
        left.sort_unstable();
        live.sort_unstable();
        assert_eq!(
            left, live,
            "the gone tasks' entries, and only those, removed"
        );
        let want: HashMap<u32, (u64, u64)> = alive
            .keys()
            .map(|&tid| (tid, (3 * u64::from(tid), 2 * u64::from(tid))))
            .collect();
        let wrong = wrong_counts(&pmu, &want);
        assert!(
            wrong.is_empty() && pmu.period.len() == want.len(),
            "{} of {} live tasks lack their period's counts: {:?}...",
            wrong.len(),
            want.len(),
            &wrong[..wrong.len().min(8)]
        );
    }

    #[test]
    fn a_walk_bpf_sends_back_to_the_start_still_takes_each_task_once() {
        let map = WalkedMap::default();
        let alive = thousand_threads(&map);
        let mut pmu = pmu_classes();
        pmu.observe(&map, &alive);
        map.take_ops();
        // Next period every live task counted 100 cycles and 50
        // instructions more, and the walk starts over halfway through.
        for &tid in alive.keys() {
            map.set(tid, (3 * u64::from(tid) + 100, 2 * u64::from(tid) + 50));
        }
        map.evict_at.set(Some(350));
        pmu.observe(&map, &alive);
        let (_, looked_up, most, _) = map.take_ops();
        // The walk read some entries twice; each task's deltas were taken
        // once (a second take would leave it a zero delta).
        assert_eq!((looked_up, most), (700, 2));
        let want: HashMap<u32, (u64, u64)> = alive.keys().map(|&tid| (tid, (100, 50))).collect();
        assert_eq!(wrong_counts(&pmu, &want), Vec::<u32>::new());
    }

    #[test]
    fn classes_have_the_values_bpf_knows_them_by() {
        let bpf = [
            (Class::Unknown, intf::sky_class_SKY_CLASS_UNKNOWN),
            (Class::Compute, intf::sky_class_SKY_CLASS_COMPUTE),
            (Class::PmWriter, intf::sky_class_SKY_CLASS_PM_WRITER),
            (Class::MemoryBound, intf::sky_class_SKY_CLASS_MEMORY_BOUND),
        ];
        for (class, value) in bpf {
            assert_eq!(class.bpf_value(), value, "{class}");
        }
        assert_eq!(Class::ALL.len(), intf::sky_class_SKY_NR_CLASSES as usize);
    }

    #[test]
    fn counter_slots_and_counts_have_the_layout_bpf_writes() {
        let slots = [
            (Counter::Cycles, intf::sky_pmu_counter_SKY_PMU_CYCLES),
            (
                Counter::Instructions,
                intf::sky_pmu_counter_SKY_PMU_INSTRUCTIONS,
            ),
            (Counter::LlcMisses, intf::sky_pmu_counter_SKY_PMU_LLC_MISSES),
            (
                Counter::StallCycles,
                intf::sky_pmu_counter_SKY_PMU_STALL_CYCLES,
            ),
            (Counter::Stores, intf::sky_pmu_counter_SKY_PMU_STORES),
        ];
        for (counter, value) in slots {
            assert_eq!(counter as u32, value, "{}", counter.name());
        }
        assert_eq!(
            Counter::ALL.len(),
            intf::sky_pmu_counter_SKY_NR_PMU as usize
        );
        // The start time, then one sum per counter, in Counter's order.
        let bytes: Vec<u8> = (1..=6u64).flat_map(|v| v.to_ne_bytes()).collect();
        let c: intf::sky_task_counts = map_values::read(&bytes).unwrap();
        assert_eq!((c.start_time, c.count), (1, [2, 3, 4, 5, 6]));
        assert!(map_values::read::<intf::sky_task_counts>(&bytes[..40]).is_none());
    }

    /// A shared space whose live members are `pids`, `pm_writers` of
    /// them writing a persistent queue.
    pub(crate) fn space(name: &str, pids: &[u32], pm_writers: &[u32]) -> SpaceHints {
        SpaceHints {
            name: name.into(),
            path: format!("/registry/{name}").into(),
            id: sky_pvas_format::hints::SpaceId {
                uid: 1000,
                dev: 1,
                ino: pids.first().copied().unwrap_or(0).into(),
            },
            header: sky_pvas_format::layout::HeaderFixed::new(8, 1 << 20, 1 << 40, 1, 0),
            members: Vec::new(),
            pids: pids.to_vec(),
            pm_writers: pm_writers.to_vec(),
            memory_bound: false,
        }
    }

    /// With nothing but shared spaces to class by, only their PM writers'
    /// threads are listed: every other task is unknown whether listed or
    /// not. A hint or the PMU needs every task.
    #[test]
    fn only_pm_writers_are_listed_when_nothing_else_classes() {
        let policy = Policy::load("sky1").unwrap();
        let feed = ClassFeed::new(&[], &policy, None, None).unwrap();
        assert_eq!(feed.listing(&[]), Listing::Nothing);
        assert_eq!(
            feed.listing(&[space("idle", &[7, 8], &[])]),
            Listing::Nothing
        );
        let spaces = [space("q", &[7, 8], &[8]), space("r", &[9, 10], &[10, 9])];
        assert_eq!(
            feed.listing(&spaces),
            Listing::Processes([8, 9, 10].into_iter().collect())
        );
        let hinted = ClassFeed::new(&["cpu-*=compute".into()], &policy, None, None).unwrap();
        assert_eq!(hinted.listing(&spaces), Listing::All);
        let counted = ClassFeed::new(&[], &policy, Some(&OpenCounters::default()), None).unwrap();
        assert_eq!(counted.listing(&[]), Listing::All);
    }

    #[test]
    fn tasks_are_listed_every_100_ms_only_for_hints_bpf_cannot_apply_or_counters() {
        let policy = Policy::load("sky1").unwrap();
        let cli = ["cpu-*=compute", "*pm*=pm-writer", "c?x=compute"].map(String::from);
        let mut feed = ClassFeed::new(&cli, &policy, None, None).unwrap();
        assert_eq!(feed.daemon_only, ["c?x"]);
        assert_eq!(feed.period, DAEMON_PERIOD, "c?x needs the daemon");
        let bpf_only = ["cpu-*=compute".to_string()];
        let mut bpf_feed = ClassFeed::new(&bpf_only, &policy, None, None).unwrap();
        assert_eq!(bpf_feed.period, CENSUS_PERIOD);
        // A switch to a policy with a rule only the daemon applies.
        let mut daemon = policy.clone();
        daemon.class_rule.push(sky_classify::RuleSpec {
            comm: Some("d?b".into()),
            cgroup: None,
            pid: None,
            class: "memory-bound".into(),
        });
        bpf_feed.follow(&daemon).unwrap();
        assert_eq!(bpf_feed.period, DAEMON_PERIOD);
        assert!(bpf_feed.can_class_memory_bound());
        assert!(bpf_feed.due(), "the new rules are applied at once");
        bpf_feed.follow(&policy).unwrap();
        assert_eq!(bpf_feed.period, CENSUS_PERIOD);
        assert!(!bpf_feed.can_class_memory_bound());
        // The command line's hints stay across switches.
        feed.follow(&policy).unwrap();
        assert_eq!(feed.daemon_only, ["c?x"]);
        // Counters must be read every period, hints or not.
        let pmu = OpenCounters::default();
        let feed = ClassFeed::new(&[], &policy, Some(&pmu), None).unwrap();
        assert_eq!(feed.period, DAEMON_PERIOD);
    }
}
