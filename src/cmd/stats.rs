//! `scx_sky stats` and `scx_sky --monitor`: read a running scheduler's
//! statistics from its scx_stats socket (`stats` once or while it runs,
//! `--monitor` also while it is not yet or no longer up).

use crate::counters::{catalog, Counters};
use anyhow::Result;
use sky_stats::scx_stats::serde_json::{Map, Value};
use sky_stats::Reader;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// How to show what was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The scheduler's own stats line.
    Line,
    Json,
    OpenMetrics,
    /// The `stats_meta` answer (every statistic and its description).
    Meta,
}

/// One read of the totals, or with `watch` a read every `watch` of what
/// grew since the last (Ctrl-C ends it).
pub fn run(socket: Option<&Path>, format: Format, watch: Option<Duration>) -> Result<()> {
    let mut reader = Reader::connect(socket)?;
    let out = &mut std::io::stdout();
    if format == Format::Meta {
        return print(out, &reader.meta()?.to_string());
    }
    let Some(every) = watch else {
        return print(out, &render(format, &reader.read("totals")?));
    };
    // The first top read sets the client's baseline.
    reader.read("top")?;
    loop {
        std::thread::sleep(every);
        print(out, &render(format, &reader.read("top")?))?;
    }
}

/// `--monitor`: the stats line every `every`, as long as it runs. It waits
/// for a scheduler that is not up yet, and for one that went away to come
/// back (a restart, a reload), as the scx schedulers' monitors do; it says
/// so once each time.
pub fn monitor(socket: Option<&Path>, every: Duration) -> Result<()> {
    let out = &mut std::io::stdout();
    let retry = every.clamp(Duration::from_millis(200), Duration::from_secs(1));
    loop {
        let mut reader = wait_for_scheduler(socket, retry);
        // The first top read sets the client's baseline.
        if let Err(e) = reader.read("top") {
            log::warn!("--monitor: {e:#}; waiting for scx_sky again");
            continue;
        }
        loop {
            std::thread::sleep(every);
            match reader.read("top") {
                Ok(sample) => print(out, &render(Format::Line, &sample))?,
                Err(e) => {
                    log::warn!("--monitor: {e:#}; waiting for scx_sky again");
                    break;
                }
            }
        }
    }
}

/// Connects to the stats socket, trying again every `retry` until it can.
fn wait_for_scheduler(socket: Option<&Path>, retry: Duration) -> Reader {
    let mut said = false;
    loop {
        match Reader::connect(socket) {
            Ok(reader) => {
                if said {
                    log::info!("--monitor: scx_sky is up");
                }
                return reader;
            }
            Err(e) if !said => {
                log::info!("--monitor: waiting for scx_sky ({e:#})");
                said = true;
            }
            Err(_) => {}
        }
        std::thread::sleep(retry);
    }
}

fn render(format: Format, sample: &Map<String, Value>) -> String {
    match format {
        Format::Json => Value::Object(sample.clone()).to_string(),
        Format::OpenMetrics => catalog().openmetrics(sample).trim_end().to_string(),
        Format::Line | Format::Meta => {
            let (policy, generation) = sky_stats::policy_of(sample);
            format!(
                "policy={policy} generation={generation} {}",
                Counters::from_sample(sample).line()
            )
        }
    }
}

/// A reader that stops early (`| head`) ends the output, not in a panic.
fn print(out: &mut impl Write, text: &str) -> Result<()> {
    match writeln!(out, "{text}").and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        other => Ok(other?),
    }
}
