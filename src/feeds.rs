//! The daemon's scanning, off the run loop: a worker thread lists the
//! running tasks (/proc), the shared spaces (registry and member tables)
//! and the PMU counts, classes and gangs them, and writes BPF's class and
//! gang maps. The run loop answers stats, signals and the kernel's exit
//! requests and never waits for it: it shows the view the worker last
//! published, and hands it new policies through a channel. On a machine
//! of 10 000 threads and as many registry entries a pass takes long; the
//! worker keeps to a budget (it rests BUDGET_REST times as long as its
//! last pass took), so scanning takes at most a fifth of one CPU.

use crate::bpf::skel::BpfSkel;
use crate::bss::BssMapping;
use crate::classes::{ClassFeed, ClassesView};
use crate::gangs::{GangFeed, GangsView};
use anyhow::{Context, Result};
use libbpf_rs::MapHandle;
use log::warn;
use sky_policy::Policy;
use sky_pvas::hints::SpaceHints;
use sky_pvas::registry::{Registry, MAX_PER_USER, MAX_SPACES};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the worker looks whether a refresh is due.
const TICK: Duration = Duration::from_millis(20);
/// After a pass that took T the worker rests at least this many T.
const BUDGET_REST: u32 = 4;

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
    /// Users over the registry's caps, as last logged.
    registry_over: Vec<(u32, usize)>,
    maps: Maps,
}

impl Feeds {
    /// Starts the worker on `skel`'s maps.
    pub fn start(skel: &BpfSkel, classes: ClassFeed, gangs: GangFeed) -> Result<Feeds> {
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
        let view = Arc::new(Mutex::new(Arc::new(FeedsView {
            classes: classes.view(),
            gangs: gangs.view().clone(),
        })));
        let stop = Arc::new(AtomicBool::new(false));
        let (policies, policy_rx) = channel();
        let mut worker = Worker {
            classes,
            gangs,
            registry,
            registry_over: Vec::new(),
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
        let mut rest_until = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(TICK);
            if Instant::now() < rest_until {
                continue;
            }
            let started = Instant::now();
            while let Ok(policy) = policies.try_recv() {
                self.follow(&policy);
            }
            if self.refresh(stop) {
                let next = Arc::new(FeedsView {
                    classes: self.classes.view(),
                    gangs: self.gangs.view().clone(),
                });
                *view.lock().unwrap_or_else(|e| e.into_inner()) = next;
            }
            rest_until = Instant::now() + started.elapsed() * BUDGET_REST;
        }
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
    }

    /// Classes and gangs, each when its period is due, from one listing
    /// of the running tasks (made only if one of them needs it). Returns
    /// whether anything was refreshed.
    fn refresh(&mut self, stop: &AtomicBool) -> bool {
        let (classes_due, mut gangs_due) = (self.classes.due(), self.gangs.due());
        let watch = self.gangs.watches_spaces();
        if !classes_due && !gangs_due && !watch {
            return false;
        }
        let spaces = self.spaces();
        gangs_due |= watch && self.gangs.spaces_changed(&spaces);
        if !classes_due && !gangs_due {
            return false;
        }
        let class_tasks = classes_due && self.classes.wants_tasks(&spaces);
        let gang_tasks = gangs_due
            && self
                .gangs
                .wants_tasks(&spaces, self.classes.can_class_memory_bound());
        let tasks = if class_tasks || gang_tasks {
            let cgroups = (class_tasks && self.classes.needs_cgroups())
                || (gang_tasks && self.gangs.needs_cgroups());
            sky_classify::live::scan_tasks(std::path::Path::new("/proc"), cgroups)
        } else {
            Vec::new()
        };
        // A listing of many tasks takes a while: the scheduler may be
        // going by now.
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        // Spaces read again after the listing, for the gangs: a process
        // that has a space's name by now reserved its slot before its exec,
        // so it is never seen as a gang of its own for a period.
        let gang_spaces = (gangs_due && gang_tasks).then(|| self.spaces());
        let maps = &mut self.maps;
        if classes_due {
            self.classes
                .refresh(&maps.pid_class, &maps.pid_counts, &tasks, &spaces);
        }
        if gangs_due {
            let spaces = gang_spaces.unwrap_or(spaces);
            let classes = &self.classes;
            self.gangs.refresh(
                &maps.gang_homes,
                &maps.proc_gang,
                Some(maps.bss.bss()),
                &tasks,
                &spaces,
                |task| classes.class_of_task(task),
                |tid| classes.period_counts(tid),
            );
        }
        true
    }

    /// The shared spaces now: the registry as inotify last showed it,
    /// member tables read afresh.
    fn spaces(&mut self) -> Vec<SpaceHints> {
        self.registry.refresh();
        let over = self.registry.over_caps();
        if over != self.registry_over {
            if !over.is_empty() {
                let users: Vec<String> = over
                    .iter()
                    .map(|(uid, n)| format!("uid {uid}: {n}"))
                    .collect();
                warn!(
                    "shared-space registry: entries not read (at most {MAX_PER_USER} a user, \
                     {MAX_SPACES} in all): {}",
                    users.join(", ")
                );
            }
            self.registry_over = over;
        }
        self.registry.spaces()
    }
}
