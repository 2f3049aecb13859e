//! `scx_sky gangs`: the running scheduler's gangs and cache domains, read
//! from its scx_stats socket (target `gangs`), and why each gang is where
//! it is.

use crate::feeds::gang_maps::{GangView, GangsView};
use anyhow::{Context, Result};
use std::fmt::Write;
use std::path::Path;

pub fn run(socket: Option<&Path>, pid: Option<u32>, json: bool) -> Result<()> {
    let value = sky_stats::Reader::connect(socket)?.gangs()?;
    if json {
        println!("{value}");
        return Ok(());
    }
    let view: GangsView = sky_stats::scx_stats::serde_json::from_value(value).context(
        "the scheduler's gangs answer is not what this scx_sky reads (another version?)",
    )?;
    print!("{}", render(&view, pid.map(process_of)));
    Ok(())
}

/// The process a thread (or process) ID belongs to: its Tgid, else itself.
fn process_of(pid: u32) -> u32 {
    sky_proc::thread_group(pid).unwrap_or(pid)
}

fn render(view: &GangsView, process: Option<u32>) -> String {
    let mut out = String::new();
    if let Some(p) = process {
        match view.gangs.iter().find(|g| g.processes.contains(&p)) {
            Some(g) => gang_line(&mut out, g),
            None => {
                let _ = writeln!(
                    out,
                    "process {p} is in no gang with a home: it is not memory-bound (no gang \
                     rule says so and no thread of it is classed memory-bound), so its threads \
                     balance as usual"
                );
            }
        }
        return out;
    }
    for d in &view.domains {
        let gangs: Vec<String> = d.gangs.iter().map(|g| g.to_string()).collect();
        let _ = writeln!(
            out,
            "domain {} ({} CPUs): {}{}",
            d.id,
            d.cpus,
            d.state,
            if gangs.is_empty() {
                String::new()
            } else {
                format!(", gangs {}", gangs.join(" "))
            }
        );
    }
    let total: u64 = view.state_ms.values().sum();
    if total > 0 {
        let shares: Vec<String> = view
            .state_ms
            .iter()
            .map(|(state, ms)| format!("{state} {:.1}%", *ms as f64 * 100.0 / total as f64))
            .collect();
        let _ = writeln!(out, "domain time as planned: {}", shares.join(", "));
    }
    if view.gangs.is_empty() {
        let _ = writeln!(out, "no memory-bound gang and no gang by rule");
    }
    for g in &view.gangs {
        gang_line(&mut out, g);
    }
    out
}

fn gang_line(out: &mut String, g: &GangView) {
    let procs: Vec<String> = g.processes.iter().map(u32::to_string).collect();
    let _ = writeln!(
        out,
        "gang {} ({}: processes {}, {} threads, {} runnable): {} ({})",
        g.id,
        g.gang,
        procs.join(","),
        g.threads,
        g.demand,
        if g.memory_bound {
            "memory-bound"
        } else {
            "not memory-bound"
        },
        g.judged_by
    );
    match &g.why {
        Some(why) => {
            let _ = writeln!(out, "  {why}");
        }
        None => {
            let _ = writeln!(out, "  no home: its threads balance as usual");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feeds::gang_maps::DomainView;
    use sky_gangs::planner::DomainState;

    fn view() -> GangsView {
        GangsView {
            domains: vec![
                DomainView {
                    id: 0,
                    cpus: 4,
                    state: DomainState::Clean,
                    gangs: vec![3],
                },
                DomainView {
                    id: 1,
                    cpus: 4,
                    state: DomainState::Empty,
                    gangs: vec![],
                },
            ],
            gangs: vec![GangView {
                id: 3,
                gang: "space job".into(),
                processes: vec![40, 41],
                threads: 3,
                demand: 3,
                memory_bound: true,
                judged_by: "gang rule".into(),
                home: Some(0),
                why: Some("gang 3 home domain 0 (clean): new: an empty domain that fits it".into()),
            }],
            state_ms: [("clean".to_string(), 750), ("empty".to_string(), 250)].into(),
        }
    }

    #[test]
    fn domains_gangs_and_reasons_are_shown() {
        let text = render(&view(), None);
        assert!(text.contains("domain 0 (4 CPUs): clean, gangs 3"), "{text}");
        assert!(text.contains("domain 1 (4 CPUs): empty\n"), "{text}");
        assert!(text.contains("clean 75.0%, empty 25.0%"), "{text}");
        assert!(
            text.contains("gang 3 (space job: processes 40,41, 3 threads"),
            "{text}"
        );
        assert!(text.contains("memory-bound (gang rule)"), "{text}");
        assert!(
            text.contains("  gang 3 home domain 0 (clean): new"),
            "{text}"
        );
    }

    #[test]
    fn one_process_is_explained_or_said_to_have_no_home() {
        let text = render(&view(), Some(41));
        assert!(text.starts_with("gang 3 (space job"), "{text}");
        assert!(!text.contains("domain 1"), "{text}");
        let text = render(&view(), Some(99));
        assert!(
            text.contains("process 99 is in no gang with a home"),
            "{text}"
        );
    }

    #[test]
    fn a_thread_id_names_its_process() {
        assert_eq!(process_of(std::process::id()), std::process::id());
        assert_eq!(process_of(u32::MAX), u32::MAX);
    }
}
