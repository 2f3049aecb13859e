//! The daemon's scanning, off the run loop: a worker thread lists the
//! running tasks (BPF's task iterator, `task_list.rs`), the shared spaces
//! (registry and member tables) and the PMU counts, classes and gangs
//! them, and writes BPF's class and gang maps. The run loop answers
//! stats, signals and the kernel's exit requests and never waits for it:
//! it shows the view the worker last published, and hands it new
//! policies through a channel.
//!
//! Two kinds of pass, each on a budget of its own (`Budget`: a fifth of
//! one CPU over time), so neither starves the other:
//! - a full pass lists the tasks the feeds need (`Listing`: every task
//!   when a hint, rule or the PMU could concern any; only the spaces'
//!   members' threads when the spaces are all there is), when the
//!   classes' or gangs' period is due;
//! - between them, the shared spaces are watched every tick (20 ms while
//!   they move, 100 ms once they have been still for 2 s), and when
//!   their members changed a membership pass lists only the threads of
//!   the processes the gangs are made of (the members, those that were,
//!   and the processes of planned gangs) and regangs from the last full
//!   listing patched with them: a member that joins is in its gang
//!   within a tick, and a process that leaves or exits is out of its
//!   gang, whatever the machine's size.
//!
//! So scanning takes at most two fifths of a CPU, on a machine of any
//! size and whatever users do with their spaces; a machine whose full
//! pass costs more than its budget lists its tasks less often than the
//! classes' and gangs' period, and its spaces are still watched.

pub mod change_log;
pub mod class_map;
pub mod gang_maps;
pub mod map_room;
pub mod task_list;

use crate::bpf::skel::BpfSkel;
use crate::bss::BssMapping;
use crate::feeds::class_map::{ClassFeed, ClassesView};
use crate::feeds::gang_maps::{members_of, GangFeed, GangMaps, GangsView};
use crate::feeds::task_list::{Listing, TaskLister};
use anyhow::{Context, Result};
use libbpf_rs::MapHandle;
use log::warn;
use sky_classify::live::{scan_processes, LiveTask};
use sky_policy::Policy;
use sky_pvas_format::hints::SpaceHints;
use sky_pvas_format::registry::Registry;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the worker looks at the spaces while it watches them and
/// they moved lately (BUSY_FOR: a space registered or gone, a member
/// joined or left); the shortest it sleeps. Otherwise it sleeps until a
/// full pass is due (and its budget allows it) or a policy comes: each
/// wake-up of a daemon thread takes a CPU from a task for a moment.
const TICK: Duration = Duration::from_millis(20);
/// How often it looks at spaces that have not moved for BUSY_FOR: a look
/// reads every member table (8 % of a TCG CPU at TICK for one space of
/// two members), and members join a new space right after it is made,
/// which its registry entry says at once (inotify).
const QUIET_TICK: Duration = Duration::from_millis(100);
const BUSY_FOR: Duration = Duration::from_secs(2);
/// How soon a feed's own refresh must be due for it to join the other's
/// pass (`Worker::full_pass`).
const ALIGN: Duration = Duration::from_millis(50);
/// The longest it sleeps.
const LONGEST_SLEEP: Duration = Duration::from_secs(1);
/// The share of one CPU each kind of pass may take over time...
const BUDGET_SHARE: f64 = 0.2;
/// ...and the most it may bank for short passes run back to back.
const BUDGET_BANK: Duration = Duration::from_millis(200);

/// CPU time a kind of pass may spend: earned at BUDGET_SHARE of the time
/// that passes, up to BUDGET_BANK; a pass starts only with some in hand
/// and spends the CPU time it took (so one long pass leaves it owing, and
/// the next waits until it has earned that back). CPU time, not wall
/// time: on a busy machine a pass waits for a CPU far longer than it runs
/// (1 s for 0.1 s in a loaded VM), and that wait costs nobody anything.
struct Budget {
    /// Seconds in hand (negative: owed).
    credit: f64,
    earned_at: Instant,
}

/// CPU time this thread has run.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into ts.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

impl Budget {
    fn new() -> Budget {
        Budget {
            credit: BUDGET_BANK.as_secs_f64(),
            earned_at: Instant::now(),
        }
    }

    /// Adds what the time since the last call earned; may a pass run?
    fn may_run(&mut self) -> bool {
        let now = Instant::now();
        let earned = now.duration_since(self.earned_at).as_secs_f64() * BUDGET_SHARE;
        self.credit = (self.credit + earned).min(BUDGET_BANK.as_secs_f64());
        self.earned_at = now;
        self.credit > 0.0
    }

    fn spend(&mut self, took: Duration) {
        self.credit -= took.as_secs_f64();
    }

    /// How long until a pass may run (zero: it may).
    fn until_credit(&self) -> Duration {
        let owed = -self.credit;
        if owed < 0.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(owed / BUDGET_SHARE).max(Duration::from_millis(1))
    }
}

/// What a tick of the worker did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    None,
    /// Looked at the spaces: no member changed.
    Watch,
    Membership,
    Full,
}

/// What the run loop shows of the classes and gangs.
#[derive(Debug, Clone, Default)]
pub struct FeedsView {
    pub classes: ClassesView,
    pub gangs: GangsView,
}

impl FeedsView {
    /// ` classes: compute=N ... gangs: ...`: the tasks of each known
    /// class, and the gangs' domains as planned.
    pub fn census(&self) -> String {
        format!(
            " classes: {}{}",
            self.classes.census(),
            self.gangs.summary()
        )
    }
}

/// The worker, from the run loop's side. Dropped, it tells the worker to
/// stop and does not wait: a pass over 10 000 threads takes a while, and
/// the process exiting (or the next load) must not wait for it. The
/// worker writes only through descriptors and a mapping of its own, which
/// keep the maps it writes alive until it stops.
pub struct Feeds {
    stop: Arc<AtomicBool>,
    policies: Sender<Policy>,
    view: Arc<Mutex<Arc<FeedsView>>>,
}

/// BPF's maps the worker writes, by descriptors of its own.
struct Maps {
    pid_class: MapHandle,
    pid_counts: MapHandle,
    gang_homes: MapHandle,
    proc_gang: MapHandle,
    bss: BssMapping,
}

struct Worker {
    classes: ClassFeed,
    gangs: GangFeed,
    registry: Registry,
    tasks: TaskLister,
    /// The last full pass's tasks, with the members of shared spaces
    /// listed afresh by each membership pass since.
    listing: Vec<LiveTask>,
    /// The spaces' members at the last regang.
    members: BTreeSet<u32>,
    /// When a space was last registered or removed, or its members
    /// changed.
    spaces_moved_at: Option<Instant>,
    maps: Maps,
}

impl Feeds {
    /// Starts the worker on `skel`'s maps.
    pub fn start(skel: &BpfSkel, classes: ClassFeed, mut gangs: GangFeed) -> Result<Feeds> {
        let handle = |map: &libbpf_rs::Map, name: &str| {
            MapHandle::try_from(map).with_context(|| format!("a descriptor of {name}"))
        };
        let maps = Maps {
            pid_class: handle(&skel.maps.sky_pid_class, "sky_pid_class")?,
            pid_counts: handle(&skel.maps.sky_pid_counts, "sky_pid_counts")?,
            gang_homes: handle(&skel.maps.sky_gang_homes, "sky_gang_homes")?,
            proc_gang: handle(&skel.maps.sky_proc_gang, "sky_proc_gang")?,
            bss: BssMapping::new(&skel.maps.bss)?,
        };
        let registry = Registry::watched();
        if !registry.is_watched() {
            warn!("inotify unavailable: the shared-space registry is listed on every pass");
        }
        if let Some(why) = sky_pvas_format::mounts::openat2_refused() {
            warn!("{why}");
        }
        let view = Arc::new(Mutex::new(Arc::new(FeedsView {
            classes: classes.view(),
            gangs: gangs.view().clone(),
        })));
        let stop = Arc::new(AtomicBool::new(false));
        let (policies, policy_rx) = channel();
        gangs.classes_can_say_memory_bound(classes.can_class_memory_bound());
        let mut worker = Worker {
            classes,
            gangs,
            registry,
            tasks: TaskLister::new(skel),
            listing: Vec::new(),
            members: BTreeSet::new(),
            spaces_moved_at: None,
            maps,
        };
        {
            let (stop, view) = (stop.clone(), view.clone());
            std::thread::Builder::new()
                .name("sky-feeds".into())
                .spawn(move || worker.run(&stop, &policy_rx, &view))
                .context("starting the feeds worker")?;
        }
        Ok(Feeds {
            stop,
            policies,
            view,
        })
    }

    /// The view the worker last published.
    pub fn view(&self) -> Arc<FeedsView> {
        self.view.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The daemon's hints, `[classify]` and gang rules become `policy`'s
    /// at the worker's next tick.
    pub fn follow(&self, policy: Policy) {
        let _ = self.policies.send(policy);
    }
}

impl Drop for Feeds {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Worker {
    fn run(
        &mut self,
        stop: &AtomicBool,
        policies: &Receiver<Policy>,
        view: &Mutex<Arc<FeedsView>>,
    ) {
        let (mut full, mut watch) = (Budget::new(), Budget::new());
        let mut sleep = TICK;
        while !stop.load(Ordering::Relaxed) {
            // A new policy is followed at once, in budget or not.
            let mut switched = false;
            match policies.recv_timeout(sleep) {
                Ok(policy) => {
                    self.follow(&policy);
                    switched = true;
                    while let Ok(policy) = policies.try_recv() {
                        self.follow(&policy);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            let started = thread_cpu_time();
            let may_list = full.may_run() || switched;
            let pass = self.pass(may_list, || watch.may_run(), stop);
            let took = thread_cpu_time().saturating_sub(started);
            match pass {
                Pass::None => {}
                Pass::Full => full.spend(took),
                Pass::Watch | Pass::Membership => watch.spend(took),
            }
            if matches!(pass, Pass::Full | Pass::Membership) {
                let next = Arc::new(FeedsView {
                    classes: self.classes.view(),
                    gangs: self.gangs.view().clone(),
                });
                *view.lock().unwrap_or_else(|e| e.into_inner()) = next;
            }
            sleep = self.next_sleep(&full);
        }
    }

    /// Until the spaces are looked at again (while watched), or a full
    /// pass is due and in budget.
    fn next_sleep(&self, full: &Budget) -> Duration {
        if self.gangs.watches_spaces() {
            let busy = self.spaces_moved_at.is_some_and(|t| t.elapsed() < BUSY_FOR);
            return if busy { TICK } else { QUIET_TICK };
        }
        let due = self.classes.until_due().min(self.gangs.until_due());
        due.max(full.until_credit()).clamp(TICK, LONGEST_SLEEP)
    }

    fn follow(&mut self, policy: &Policy) {
        if let Err(e) = self.classes.follow(policy) {
            warn!(
                "policy {}: the daemon's class hints stay as they were: {e:#}",
                policy.name
            );
        }
        if let Err(e) = self.gangs.follow(policy) {
            warn!(
                "policy {}: the gang rules stay as they were: {e:#}",
                policy.name
            );
        }
        self.gangs
            .classes_can_say_memory_bound(self.classes.can_class_memory_bound());
    }

    /// A full pass if one is due and `may_list`, else a look at the
    /// spaces if watched and `may_watch()`, and a membership pass if their
    /// members changed.
    fn pass(
        &mut self,
        may_list: bool,
        may_watch: impl FnOnce() -> bool,
        stop: &AtomicBool,
    ) -> Pass {
        let full = may_list && (self.classes.due() || self.gangs.due());
        let watch = self.gangs.watches_spaces();
        if !(full || watch && may_watch()) {
            return Pass::None;
        }
        let spaces = self.spaces();
        let changed = watch && self.gangs.spaces_changed(&spaces);
        if changed {
            self.spaces_moved_at = Some(Instant::now());
        }
        if full {
            self.full_pass(spaces, changed, stop);
            Pass::Full
        } else if changed {
            self.membership_pass(&spaces);
            Pass::Membership
        } else {
            Pass::Watch
        }
    }

    /// Classes and gangs, each when its period is due (gangs also when
    /// the spaces' members `changed`), from one listing of the tasks
    /// either needs.
    fn full_pass(&mut self, spaces: Vec<SpaceHints>, changed: bool, stop: &AtomicBool) {
        // Each feed also refreshes when the other's pass comes within
        // ALIGN of its own: the two 100 ms periods, started apart, would
        // otherwise list every task twice a period.
        let (classes_now, gangs_now) = (self.classes.due(), self.gangs.due() || changed);
        let classes_due = refreshes(classes_now, gangs_now, self.classes.until_due());
        let gangs_due = refreshes(gangs_now, classes_now, self.gangs.until_due());
        // One listing for both feeds, whichever is due: a membership pass
        // regangs from it later.
        let for_gangs = self.gangs.listing(&spaces);
        let gang_tasks = for_gangs != Listing::Nothing;
        let listing = self.classes.listing(&spaces).and(for_gangs);
        let cgroups = self.needs_cgroups();
        self.listing = self.tasks.list(&listing, cgroups);
        // A listing of many tasks takes a while: the scheduler may be
        // going by now.
        if stop.load(Ordering::Relaxed) {
            return;
        }
        // Spaces read again after the listing, for the gangs: a process
        // that has a space's name by now reserved its slot before its exec,
        // so it is never seen as a gang of its own for a period.
        let gang_spaces = (gangs_due && gang_tasks).then(|| self.spaces());
        let maps = &mut self.maps;
        if classes_due {
            self.classes
                .refresh(&maps.pid_class, &maps.pid_counts, &self.listing, &spaces);
        }
        if gangs_due {
            self.regang(&gang_spaces.unwrap_or(spaces));
        }
    }

    /// The gangs again after the spaces' members changed: the threads of
    /// members, of those that were members at the last regang, and of the
    /// processes in planned gangs listed afresh (a process that exited
    /// must not linger as a gang of its own), everyone else's as the last
    /// full pass saw them.
    fn membership_pass(&mut self, spaces: &[SpaceHints]) {
        let mut again = members_of(spaces);
        again.append(&mut self.members);
        again.extend(self.gangs.planned_processes());
        self.listing.retain(|t| !again.contains(&t.pid));
        let cgroups = self.needs_cgroups();
        self.listing
            .extend(scan_processes(Path::new("/proc"), again, cgroups));
        self.regang(spaces);
    }

    /// Listings carry cgroups if either feed's hints need them: a
    /// membership pass regangs from the full pass's listing.
    fn needs_cgroups(&self) -> bool {
        self.classes.needs_cgroups() || self.gangs.needs_cgroups()
    }

    fn regang(&mut self, spaces: &[SpaceHints]) {
        self.members = members_of(spaces);
        let (maps, classes) = (&mut self.maps, &self.classes);
        let bpf = GangMaps {
            homes: &maps.gang_homes,
            proc_gang: &maps.proc_gang,
            bss: Some(maps.bss.bss()),
        };
        self.gangs.refresh(bpf, &self.listing, spaces, classes);
    }

    /// The shared spaces now: the registry as inotify last showed it,
    /// member tables read afresh.
    fn spaces(&mut self) -> Vec<SpaceHints> {
        if self.registry.refresh() {
            self.spaces_moved_at = Some(Instant::now());
        }
        if let Some(line) = self.registry.over_caps_news() {
            warn!("{line}");
        }
        self.registry.spaces()
    }
}

/// Does a feed refresh in this pass: due itself (`due`), or the other
/// feed's pass (`other_due`) comes within ALIGN of its own (`until`)?
fn refreshes(due: bool, other_due: bool, until: Duration) -> bool {
    due || other_due && until <= ALIGN
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two feeds of one period whose refreshes fell apart come back
    /// together at the first pass within ALIGN of both, and stay so.
    #[test]
    fn a_feed_joins_the_other_feeds_pass_when_its_own_is_near() {
        let ms = Duration::from_millis;
        assert!(refreshes(true, false, ms(0)));
        assert!(refreshes(false, true, ms(50)), "due within ALIGN: joins");
        assert!(!refreshes(false, true, ms(51)), "not yet near");
        assert!(!refreshes(false, false, ms(0)), "nothing due, nothing runs");
    }

    /// Long passes are held to a fifth of the time; short ones, with
    /// credit banked, run at once.
    #[test]
    fn the_budget_holds_long_passes_to_a_fifth_and_lets_short_ones_run() {
        let mut b = Budget::new();
        assert!(b.may_run(), "a fresh worker runs at once");
        // Ten short passes back to back, within the bank.
        for _ in 0..10 {
            assert!(b.may_run());
            b.spend(Duration::from_millis(5));
        }
        // A 300 ms pass leaves it 150 ms owing; it runs again only once a
        // fifth of the time since has paid that back.
        b.spend(Duration::from_millis(300));
        assert!(!b.may_run());
        // 150 ms owed: the worker sleeps the 750 ms that earn it back.
        let until = b.until_credit().as_secs_f64();
        assert!((0.74..=0.76).contains(&until), "{until}");
        b.earned_at -= Duration::from_millis(500);
        assert!(!b.may_run(), "0.5 s earns 100 ms, less than owed");
        b.earned_at -= Duration::from_millis(500);
        assert!(b.may_run());
        assert_eq!(b.until_credit(), Duration::ZERO);
        // Idle time banks no more than BUDGET_BANK.
        b.earned_at -= Duration::from_secs(10);
        b.may_run();
        assert!(b.credit <= BUDGET_BANK.as_secs_f64());
    }
}
