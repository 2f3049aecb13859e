//! `scx_sky top`: the machine's cache domains, cores and hardware threads
//! with what runs on each, the busiest tasks (sortable), the running
//! policy with its generation, and sparklines of the scheduler's last-CPU
//! share, wait and moves, and each cache domain's gang state (empty,
//! clean, dirty) with the gangs' share of run time at home; `p` switches to the next policy through the
//! control socket. Figures about CPUs and tasks come from /proc, so they
//! mean the same under any scheduler; the scheduler's own come through a
//! [`SchedulerLink`] (its stats and control sockets, wired in scx_sky).

pub mod model;
pub mod sampler;
pub mod view;

use anyhow::{bail, Result};
use model::{Model, TopoView};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::collections::HashMap;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::time::Duration;

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
/// panic included (ratatui's hook). The figures are read on a thread of
/// their own ([`sampler`]): a key is acted on within [`KEY_POLL`] even
/// while a busy machine or scheduler makes a reading take seconds, and
/// `q` does not wait for one to finish.
pub fn run(link: Box<dyn SchedulerLink + Send>) -> Result<()> {
    let topo = sky_topology::Topology::from_host()?;
    let mut model = Model::new(TopoView::from_topology(&topo));
    let (asks, asked) = mpsc::channel();
    let (updated, updates) = mpsc::channel();
    std::thread::Builder::new()
        .name("top-sampler".into())
        .spawn(move || sampler::sample(link, asked, updated))?;
    let mut terminal = ratatui::try_init()?;
    let result = event_loop(
        &mut model,
        &mut |m: &Model| {
            terminal.draw(|f| view::render(f, m))?;
            Ok(())
        },
        &mut terminal_key,
        &asks,
        &updates,
    );
    ratatui::restore();
    // The sampler is left behind: it may be inside a reading that takes
    // seconds, and it ends with the process.
    result
}

/// The next key pressed within `wait`, from the terminal.
fn terminal_key(wait: Duration) -> Result<Option<KeyEvent>> {
    if !event::poll(wait)? {
        return Ok(None);
    }
    // Anything else (a resize, a release) only redraws.
    Ok(match event::read()? {
        Event::Key(key) if key.kind == KeyEventKind::Press => Some(key),
        _ => Some(KeyEvent::new(KeyCode::Null, KeyModifiers::NONE)),
    })
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
    let mut looks = sampler::Looks::take();
    for _ in 0..2 {
        std::thread::sleep(PERIOD);
        sampler::apply(&mut model, sampler::gather(link, &mut looks));
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

/// How long the screen waits for a key before looking for new figures
/// (the price of answering keys at once: 20 looks a second, each a poll
/// of the terminal and of a channel).
pub const KEY_POLL: Duration = Duration::from_millis(50);

/// How long `q` waits for a policy switch asked for just before it.
pub const SWITCH_WAIT: Duration = Duration::from_secs(5);

/// Draws the model, then acts on keys and the sampler's updates as they
/// come, until a key quits. `key` waits at most its argument for one.
fn event_loop(
    model: &mut Model,
    draw: &mut dyn FnMut(&Model) -> Result<()>,
    key: &mut dyn FnMut(Duration) -> Result<Option<KeyEvent>>,
    asks: &Sender<sampler::Command>,
    updates: &Receiver<sampler::Update>,
) -> Result<()> {
    let mut switching = false;
    loop {
        draw(model)?;
        let mut changed = false;
        while !changed {
            if let Some(k) = key(KEY_POLL)? {
                match on_key(model, k) {
                    Action::Quit => {
                        // A switch asked for and then `q`: it is done (or
                        // refused) before the screen goes, not left to
                        // chance.
                        if switching {
                            wait_for_switch(updates);
                        }
                        return Ok(());
                    }
                    Action::NextPolicy => {
                        model.status = "switching to the next policy...".into();
                        switching = true;
                        asks.send(sampler::Command::NextPolicy)
                            .map_err(|_| anyhow::anyhow!("the figures' reader has stopped"))?;
                    }
                    Action::Redraw => {}
                }
                changed = true;
            }
            // Every update that came, however fast keys come.
            loop {
                match updates.try_recv() {
                    Ok(sampler::Update::Period(g)) => sampler::apply(model, *g),
                    Ok(sampler::Update::Switched(outcome)) => {
                        switching = false;
                        model.status = match outcome {
                            Ok(summary) => format!("switched: {summary}"),
                            Err(why) => why,
                        }
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => bail!("the figures' reader has stopped"),
                }
                changed = true;
            }
        }
    }
}

/// Waits at most [`SWITCH_WAIT`] for the sampler to say the switch asked
/// for is done.
fn wait_for_switch(updates: &Receiver<sampler::Update>) {
    let deadline = std::time::Instant::now() + SWITCH_WAIT;
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        match updates.recv_timeout(left) {
            Ok(sampler::Update::Switched(_)) | Err(_) => return,
            Ok(sampler::Update::Period(_)) => {}
        }
    }
}

#[cfg(test)]
mod tests;
