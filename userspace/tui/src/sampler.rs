//! Reading the figures, apart from drawing them: each period's look at
//! the kernel's counters and the scheduler's sockets is [`gather`]ed
//! (all the I/O, which under load can take seconds: every thread's
//! files in /proc, and requests a busy scheduler answers late), then
//! [`apply`]d to the model (no I/O). `scx_sky top` gathers on a thread
//! of its own, so a key is acted on at once however slow the reading.

use crate::model::{self, Model, Scheduler, TaskRow, ThreadSample, ThreadView};
use crate::{PeriodStats, SchedulerLink, PERIOD, THREADS_ASKED};
use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::Instant;

/// The kernel's counters at one look.
pub struct Looks {
    /// Halfway through reading them (reading every thread takes a while).
    at: Instant,
    cpus: HashMap<usize, (u64, u64)>,
    threads: HashMap<u32, ThreadSample>,
}

impl Looks {
    pub fn take() -> Looks {
        let started = Instant::now();
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let threads = model::scan_threads(Path::new("/proc"));
        Looks {
            at: started + started.elapsed() / 2,
            cpus: model::cpu_times(&stat),
            threads,
        }
    }
}

/// One period's figures, read but not yet in the model.
pub struct Gathered {
    /// The threads that ran in the period, busiest first.
    tasks: Vec<TaskRow>,
    cpus_before: HashMap<usize, (u64, u64)>,
    cpus_now: HashMap<usize, (u64, u64)>,
    /// The scheduler's figures and what it knows of the busiest threads,
    /// or why there are none.
    scheduler: Result<(PeriodStats, HashMap<u32, ThreadView>), String>,
}

/// Reads what the kernel counted since `before` (which becomes this
/// look) and the scheduler's figures.
pub fn gather(link: &mut dyn SchedulerLink, before: &mut Looks) -> Gathered {
    let now = Looks::take();
    let period = now.at.saturating_duration_since(before.at);
    let mut tasks = model::task_rows(&before.threads, &now.threads, period.as_nanos() as u64);
    tasks.sort_by(|a, b| b.busy.total_cmp(&a.busy).then(a.tid.cmp(&b.tid)));
    let scheduler = link.period().map(|stats| {
        // The busiest threads' classes and wait histograms, as the
        // scheduler counted them.
        let tids: Vec<u32> = tasks.iter().take(THREADS_ASKED).map(|t| t.tid).collect();
        (stats, link.threads(&tids))
    });
    let cpus_before = std::mem::replace(before, now).cpus;
    Gathered {
        tasks,
        cpus_before,
        cpus_now: before.cpus.clone(),
        scheduler,
    }
}

/// One period's figures into the model.
pub fn apply(model: &mut Model, g: Gathered) {
    model.tasks = g.tasks;
    match g.scheduler {
        Ok((p, mut views)) => {
            model.record(p.last_cpu_share, p.mean_wait_us, p.moves);
            model.gangs = p.gangs;
            model.scheduler = Scheduler::Running {
                policy: p.policy,
                generation: p.generation,
                last_cpu_share: p.last_cpu_share,
                mean_wait_us: p.mean_wait_us,
            };
            // Each thread's wait p99 over the period: its histogram's growth.
            let mut histograms = HashMap::new();
            for task in &mut model.tasks {
                let Some(view) = views.remove(&task.tid) else {
                    continue;
                };
                task.class = view.class;
                if let Some(before) = model.wait_histograms.get(&task.tid) {
                    let grown = model::histogram_growth(&view.waits, before);
                    task.wait_p99_us = sky_stats::wait_percentile_us(&grown, 99.0);
                }
                histograms.insert(task.tid, view.waits);
            }
            model.wait_histograms = histograms;
        }
        Err(why) => model.scheduler = Scheduler::Absent(why),
    }
    model.sort_tasks();
    model::fill_cpus(&mut model.topo, &g.cpus_before, &g.cpus_now, &model.tasks);
}

/// What the screen asks of the sampler thread.
pub enum Command {
    NextPolicy,
}

/// What the sampler thread brings the screen.
pub enum Update {
    Period(Box<Gathered>),
    /// The answer to [`Command::NextPolicy`]: the new policy, or why not.
    Switched(Result<String, String>),
}

/// The sampler thread's loop: a look every period, a policy switch when
/// asked; ends when the screen has gone (its channels closed).
pub fn sample(
    mut link: Box<dyn SchedulerLink + Send>,
    asks: Receiver<Command>,
    out: Sender<Update>,
) {
    // The first figures come a period from now: CPU and task shares need
    // two looks a period apart.
    let mut looks = Looks::take();
    let mut next = Instant::now() + PERIOD;
    loop {
        let update = match asks.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Ok(Command::NextPolicy) => Update::Switched(link.next_policy()),
            Err(RecvTimeoutError::Timeout) => {
                let started = Instant::now();
                let g = gather(&mut *link, &mut looks);
                // A period's cadence, but never reading back to back when
                // a reading takes longer than a period.
                next = (started + PERIOD).max(Instant::now() + PERIOD / 4);
                Update::Period(Box::new(g))
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        if out.send(update).is_err() {
            return;
        }
    }
}
