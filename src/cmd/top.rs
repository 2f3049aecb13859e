//! `scx_sky top`: the TUI (userspace/tui) wired to the running
//! scheduler's stats socket (figures per period) and control socket
//! (policy switching).

use crate::counters::Counters;
use crate::feeds::gang_maps::GangsView;
use sky_control::Request;
use sky_stats::Reader;
use sky_tui::model::GangFigures;
use sky_tui::{PeriodStats, SchedulerLink};
use std::collections::HashMap;
use std::path::PathBuf;

pub struct Link {
    pub stats_socket: Option<PathBuf>,
    pub control_dir: PathBuf,
    reader: Option<Reader>,
}

impl Link {
    pub fn new(stats_socket: Option<PathBuf>, control_dir: PathBuf) -> Link {
        Link {
            stats_socket,
            control_dir,
            reader: None,
        }
    }
}

impl SchedulerLink for Link {
    fn period(&mut self) -> Result<PeriodStats, String> {
        if self.reader.is_none() {
            let mut reader =
                Reader::connect(self.stats_socket.as_deref()).map_err(|e| format!("{e:#}"))?;
            // The first read of `top` only sets this client's baseline.
            reader.read("top").map_err(|e| format!("{e:#}"))?;
            self.reader = Some(reader);
        }
        let reader = self.reader.as_mut().expect("connected above");
        let sample = match reader.read("top") {
            Ok(s) => s,
            Err(e) => {
                // Gone (stopped, restarted): connect afresh next period.
                self.reader = None;
                return Err(format!("lost scx_sky's statistics: {e:#}"));
            }
        };
        let counters = Counters::from_sample(&sample);
        let moves = counters.get(crate::bpf::intf::sky_stat_idx_SKY_STAT_MOVES_IN_LLC)
            + counters.get(crate::bpf::intf::sky_stat_idx_SKY_STAT_MOVES_ACROSS_LLC);
        let (policy, generation) = sky_stats::policy_of(&sample);
        let gangs = GangFigures {
            home_share: counters.gang_home_share(),
            domains: reader
                .gangs()
                .ok()
                .and_then(|v| sky_stats::scx_stats::serde_json::from_value::<GangsView>(v).ok())
                .map(|v| {
                    v.domains
                        .iter()
                        .map(|d| (d.state.to_string(), d.gangs.len()))
                        .collect()
                })
                .unwrap_or_default(),
        };
        Ok(PeriodStats {
            policy: policy.to_string(),
            generation,
            last_cpu_share: counters.last_cpu_share(),
            mean_wait_us: counters.mean_wait_us(),
            moves,
            gangs,
        })
    }

    fn threads(&mut self, tids: &[u32]) -> HashMap<u32, sky_stats::ThreadView> {
        let Some(reader) = self.reader.as_mut() else {
            return HashMap::new();
        };
        // A scheduler too old to know the target, or gone: nothing known
        // (period() notices a lost scheduler and says so).
        reader
            .threads(tids)
            .map(|c| c.into_iter().collect())
            .unwrap_or_default()
    }

    /// The preset after the running policy, in `policy list` order: three
    /// requests on one connection.
    fn next_policy(&mut self) -> Result<String, String> {
        let mut session =
            sky_control::Session::connect(&self.control_dir).map_err(|e| format!("{e:#}"))?;
        let mut ask = |req: Request| session.ask(&req).map_err(|e| format!("{e:#}"));
        let names: Vec<String> = ask(Request::List)?
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect();
        let running = ask(Request::Get)?;
        let current = running
            .split_whitespace()
            .find_map(|w| w.strip_prefix("policy="))
            .unwrap_or("");
        let next = match names.iter().position(|n| n == current) {
            Some(i) => names[(i + 1) % names.len()].clone(),
            None => names.first().cloned().ok_or("scx_sky lists no preset")?,
        };
        ask(Request::Set(next))
    }
}
