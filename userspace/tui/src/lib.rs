//! `scx_sky top`: the machine's cache domains, cores and hardware threads
//! with what runs on each, the busiest tasks (sortable), the running
//! policy with its generation, and sparklines of the scheduler's last-CPU
//! share, wait and moves, and each cache domain's gang state (empty,
//! clean, dirty) with the gangs' share of run time at home; `p` switches to the next policy through the
//! control socket. Figures about CPUs and tasks come from /proc, so they
//! mean the same under any scheduler; the scheduler's own come through a
//! [`SchedulerLink`] (its stats and control sockets, wired in scx_sky).

pub mod model;
pub mod view;

use anyhow::Result;
use model::{Model, Scheduler, TopoView};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// How often the figures are read.
pub const PERIOD: Duration = Duration::from_secs(1);

/// The scheduler's figures over one period.
#[derive(Debug, Clone, PartialEq)]
pub struct PeriodStats {
    pub policy: String,
    pub generation: u64,
    pub last_cpu_share: Option<f64>,
    pub mean_wait_us: Option<f64>,
    /// Tasks moved to another CPU.
    pub moves: u64,
    pub gangs: model::GangFigures,
}

/// How the TUI reaches the running scheduler.
pub trait SchedulerLink {
    /// The scheduler's figures since the last call, or why there are none
    /// (no scx_sky running, no permission to read its socket).
    fn period(&mut self) -> Result<PeriodStats, String>;
    /// Switches to the next policy; the new one's summary, or why not.
    fn next_policy(&mut self) -> Result<String, String>;
    /// What the scheduler knows of each of `tids`: its class (`compute`,
    /// `pm-writer`, `memory-bound`) and its wait histogram; threads it
    /// does not know are left out, and all are when it cannot say.
    fn threads(&mut self, tids: &[u32]) -> HashMap<u32, model::ThreadView>;
}

/// Most threads asked about each period: the busiest.
pub const THREADS_ASKED: usize = 256;

/// What a key asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    NextPolicy,
    Redraw,
}

pub fn on_key(model: &mut Model, key: KeyEvent) -> Action {
    match key.code {
        KeyCode::Char('q') | KeyCode::Esc => Action::Quit,
        KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => Action::Quit,
        KeyCode::Char('s') => {
            model.sort = model.sort.next();
            model.sort_tasks();
            Action::Redraw
        }
        KeyCode::Char('p') => Action::NextPolicy,
        _ => Action::Redraw,
    }
}

/// Runs the TUI until `q`. The terminal is restored however it ends, a
/// panic included (ratatui's hook).
pub fn run(link: &mut dyn SchedulerLink) -> Result<()> {
    let topo = sky_topology::Topology::from_host()?;
    let mut model = Model::new(TopoView::from_topology(&topo));
    let mut terminal = ratatui::try_init()?;
    let result = event_loop(&mut terminal, &mut model, link);
    ratatui::restore();
    result
}

/// One screen of `width` x `height` as text, from three looks a period
/// apart, without a terminal (`scx_sky top --snapshot`: for logs, the
/// README and tests).
pub fn snapshot(link: &mut dyn SchedulerLink, width: u16, height: u16) -> Result<String> {
    let topo = sky_topology::Topology::from_host()?;
    let mut model = Model::new(TopoView::from_topology(&topo));
    // Three looks a period apart: the first two set the baselines (the
    // kernel's counters, then the scheduler's and the busiest threads'
    // wait histograms); the last counts.
    let mut looks = Looks::take();
    for _ in 0..2 {
        std::thread::sleep(PERIOD);
        refresh(&mut model, link, &mut looks);
    }
    Ok(render_text(&model, width, height))
}

/// The model drawn on a `width` x `height` text screen.
pub fn render_text(model: &Model, width: u16, height: u16) -> String {
    let backend = ratatui::backend::TestBackend::new(width, height);
    let mut terminal = match ratatui::Terminal::new(backend) {
        Ok(t) => t,
        Err(e) => return format!("cannot draw: {e}"),
    };
    if let Err(e) = terminal.draw(|f| view::render(f, model)) {
        return format!("cannot draw: {e}");
    }
    let buffer = terminal.backend().buffer();
    (0..height)
        .map(|y| {
            let line: String = (0..width).map(|x| buffer[(x, y)].symbol()).collect();
            line.trim_end().to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    model: &mut Model,
    link: &mut dyn SchedulerLink,
) -> Result<()> {
    // The first figures come a period from now: CPU and task shares need
    // two looks a period apart.
    let mut looks = Looks::take();
    let mut last = Instant::now();
    loop {
        terminal.draw(|f| view::render(f, model))?;
        let wait = PERIOD.saturating_sub(last.elapsed());
        if event::poll(wait)? {
            // Anything else (a resize) only redraws.
            if let Event::Key(key) = event::read()? {
                if key.kind != KeyEventKind::Press {
                    continue;
                }
                match on_key(model, key) {
                    Action::Quit => return Ok(()),
                    Action::NextPolicy => {
                        model.status = match link.next_policy() {
                            Ok(summary) => format!("switched: {summary}"),
                            Err(why) => why,
                        }
                    }
                    Action::Redraw => {}
                }
            }
            continue;
        }
        last = Instant::now();
        refresh(model, link, &mut looks);
    }
}

/// The kernel's counters at one look.
struct Looks {
    /// Halfway through reading them (reading every thread takes a while).
    at: Instant,
    cpus: std::collections::HashMap<usize, (u64, u64)>,
    threads: std::collections::HashMap<u32, model::ThreadSample>,
}

impl Looks {
    fn take() -> Looks {
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

/// One period's figures into the model: what the kernel counted between
/// the last look and this one, and the scheduler's figures.
fn refresh(model: &mut Model, link: &mut dyn SchedulerLink, before: &mut Looks) {
    let now = Looks::take();
    let period = now.at.saturating_duration_since(before.at);
    model.tasks = model::task_rows(&before.threads, &now.threads, period.as_nanos() as u64);
    match link.period() {
        Ok(p) => {
            model.record(p.last_cpu_share, p.mean_wait_us, p.moves);
            model.gangs = p.gangs;
            model.scheduler = Scheduler::Running {
                policy: p.policy,
                generation: p.generation,
                last_cpu_share: p.last_cpu_share,
                mean_wait_us: p.mean_wait_us,
            };
            // The busiest threads' classes and this period's wait p99, as
            // the scheduler counted them.
            model
                .tasks
                .sort_by(|a, b| b.busy.total_cmp(&a.busy).then(a.tid.cmp(&b.tid)));
            let tids: Vec<u32> = model
                .tasks
                .iter()
                .take(THREADS_ASKED)
                .map(|t| t.tid)
                .collect();
            let mut views = link.threads(&tids);
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
    model::fill_cpus(&mut model.topo, &before.cpus, &now.cpus, &model.tasks);
    *before = now;
}

#[cfg(test)]
mod tests;
