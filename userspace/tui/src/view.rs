//! Drawing the model: a header with the policy, the topology on the left
//! (cache domain -> core -> hardware thread, each with its load and the
//! task that ran most, and its gang state), the task table on the right, sparklines of the
//! scheduler's last-CPU share, wait and moves, and a status line. Laid
//! out for 80x24 and anything larger; smaller terminals get what fits.

use crate::model::{CpuView, Model, Scheduler};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Sparkline, Table};
use ratatui::Frame;

pub fn render(frame: &mut Frame, model: &Model) {
    let [header, body, sparks, status] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(6),
        Constraint::Length(4),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(header_text(model), header);
    let [topo, table] =
        Layout::horizontal([Constraint::Length(34), Constraint::Min(20)]).areas(body);
    frame.render_widget(topology(model), topo);
    frame.render_widget(task_table(model), table);
    render_sparklines(frame, model, sparks);
    frame.render_widget(
        Paragraph::new(format!(
            "q quit  s sort ({})  p next policy  {}",
            model.sort.name(),
            model.status
        )),
        status,
    );
}

fn header_text(model: &Model) -> Paragraph<'static> {
    let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.1}%", v * 100.0));
    let line = match &model.scheduler {
        Scheduler::Running {
            policy,
            generation,
            last_cpu_share,
            mean_wait_us,
        } => Line::from(vec![
            Span::styled("scx_sky ", Style::new().add_modifier(Modifier::BOLD)),
            Span::raw(format!("policy {policy} (generation {generation})  ")),
            Span::raw(format!(
                "last-CPU {}  wait {}",
                pct(*last_cpu_share),
                mean_wait_us.map_or("-".into(), |w| format!("{:.0} us", w))
            )),
        ]),
        Scheduler::Absent(why) => Line::from(vec![
            Span::styled("scx_sky ", Style::new().add_modifier(Modifier::BOLD)),
            Span::raw(why.clone()),
        ]),
    };
    // Second line: the gangs' run time at home, when gangs ran.
    let gangs = match (&model.scheduler, model.gangs.home_share) {
        (Scheduler::Running { .. }, Some(h)) => format!("gangs home {}", pct(Some(h))),
        _ => String::new(),
    };
    Paragraph::new(vec![line, Line::raw(gangs)])
}

/// `cpu3 ▇▇▇░ 71% sky-work`: one hardware thread.
fn cpu_line(cpu: &CpuView) -> String {
    if !cpu.online {
        return format!("  cpu{:<3} offline", cpu.id);
    }
    let filled = (cpu.busy * 4.0).round().clamp(0.0, 4.0) as usize;
    let bar: String = "#".repeat(filled) + &".".repeat(4 - filled);
    let name = cpu.current.as_deref().unwrap_or("");
    let class = cpu.class.as_deref().map_or(' ', class_letter);
    format!(
        "  cpu{:<3} {bar} {:>3.0}% {class} {name}",
        cpu.id,
        cpu.busy * 100.0
    )
}

/// A class in one letter, for the topology pane (C compute, P pm-writer,
/// M memory-bound; the legend is in the table's class column).
fn class_letter(class: &str) -> char {
    match class {
        "compute" => 'C',
        "pm-writer" => 'P',
        "memory-bound" => 'M',
        _ => '?',
    }
}

/// A class in the table's five columns.
fn class_short(class: &str) -> &str {
    match class {
        "compute" => "C cpu",
        "pm-writer" => "P pmw",
        "memory-bound" => "M mem",
        other => other,
    }
}

fn topology(model: &Model) -> Paragraph<'static> {
    let mut lines = Vec::new();
    for (l, cores) in model.topo.llcs.iter().enumerate() {
        let gangs = match model.gangs.domains.get(l) {
            Some((state, 0)) => format!(" {state}"),
            Some((state, 1)) => format!(" {state}, 1 gang"),
            Some((state, n)) => format!(" {state}, {n} gangs"),
            None => String::new(),
        };
        lines.push(Line::styled(
            format!("cache domain {l}{gangs}"),
            Style::new().add_modifier(Modifier::BOLD),
        ));
        for (c, threads) in cores.iter().enumerate() {
            lines.push(Line::raw(format!(" core {c}")));
            lines.extend(threads.iter().map(|t| Line::raw(cpu_line(t))));
        }
    }
    Paragraph::new(lines).block(Block::new().borders(Borders::RIGHT))
}

/// The wait column: scx_sky's per-task p99 over the period while it runs,
/// else the kernel's mean wait per run.
fn wait_header(model: &Model) -> &'static str {
    match model.scheduler {
        Scheduler::Running { .. } => "p99_us",
        Scheduler::Absent(_) => "wait_us",
    }
}

fn task_table(model: &Model) -> Table<'static> {
    let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.0}", v * 100.0));
    let rows = model.tasks.iter().map(|t| {
        Row::new(vec![
            t.tid.to_string(),
            t.comm.clone(),
            t.cpu.to_string(),
            format!("{:.0}", t.busy * 100.0),
            pct(t.last_cpu_share),
            model
                .shown_wait_us(t)
                .map_or("-".into(), |w| format!("{w:.0}")),
            t.class.as_deref().map_or("-", class_short).to_string(),
        ])
    });
    // 46 columns at 80x24: the name gives way first.
    Table::new(
        rows,
        [
            Constraint::Length(6),
            Constraint::Min(7),
            Constraint::Length(3),
            Constraint::Length(4),
            Constraint::Length(5),
            Constraint::Length(7),
            Constraint::Length(5),
        ],
    )
    .header(
        Row::new([
            "tid",
            "comm",
            "cpu",
            "cpu%",
            "last%",
            wait_header(model),
            "class",
        ])
        .style(Style::new().add_modifier(Modifier::BOLD)),
    )
}

fn render_sparklines(frame: &mut Frame, model: &Model, area: Rect) {
    let columns = Layout::horizontal([Constraint::Ratio(1, 3); 3]).split(area);
    let series = [
        ("last-CPU share", &model.last_cpu_history),
        ("wait us", &model.wait_history),
        ("moves", &model.moves_history),
    ];
    for ((title, history), area) in series.into_iter().zip(columns.iter()) {
        // The newest samples that fit, so the line ends at now.
        let width = area.width.saturating_sub(2) as usize;
        let data: Vec<u64> = history.iter().rev().take(width).rev().copied().collect();
        let last = data.last().copied().unwrap_or(0);
        let shown = if title.starts_with("last") {
            format!("{title} {:.1}%", last as f64 / 10.0)
        } else {
            format!("{title} {last}")
        };
        frame.render_widget(
            Sparkline::default()
                .block(Block::new().borders(Borders::TOP).title(shown))
                .data(&data),
            *area,
        );
    }
}
