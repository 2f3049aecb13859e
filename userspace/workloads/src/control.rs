//! Clients of scx_sky's control socket for the VM tests: a storm of
//! policy switches, and clients that misbehave.

use anyhow::Result;
use sky_control::{Request, Session};
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// `sky-work policy-storm`: switches back to back on one connection, in
/// batches of `window` sent in one write before their answers are read
/// (so a storm does not wait for a wakeup per switch on a loaded
/// machine), or
/// a connection each, as separate `scx_sky policy set` commands make.
pub fn storm(
    policies: &str,
    duration: Duration,
    dir: &Path,
    window: usize,
    connect_each: bool,
) -> Result<String> {
    let names = policy_names(policies);
    if names.is_empty() {
        anyhow::bail!("--policies names no policy");
    }
    if window == 0 {
        anyhow::bail!("--window must be at least 1");
    }
    let mut tally = Tally::default();
    let started = Instant::now();
    let mut next = 0usize;
    let mut request = || {
        next += 1;
        Request::Set(names[next % names.len()].clone())
    };
    if connect_each {
        while started.elapsed() < duration {
            let t = Instant::now();
            let answer = sky_control::request(dir, &request());
            if tally.count(answer, t) {
                break;
            }
        }
    } else {
        // Batches of `window` requests in one write, answered in one.
        let mut session = Session::connect(dir)?;
        'storm: while started.elapsed() < duration {
            let batch: Vec<Request> = (0..window).map(|_| request()).collect();
            let sent = Instant::now();
            session.send_all(&batch)?;
            for _ in 0..window {
                if tally.count(session.receive(), sent) {
                    break 'storm;
                }
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    Ok(format!(
        "result workload=policy-storm window={} switches={} refused={} per_s={:.0} \
         p50_us={} p99_us={}",
        if connect_each { 0 } else { window },
        tally.switches,
        tally.refused,
        tally.switches as f64 / secs.max(1e-9),
        crate::percentile(&mut tally.latencies, 50.0),
        crate::percentile(&mut tally.latencies, 99.0)
    ))
}

#[derive(Default)]
struct Tally {
    switches: u64,
    refused: u64,
    latencies: Vec<u64>,
}

impl Tally {
    /// Counts one answer; true when the scheduler is gone.
    fn count(&mut self, answer: Result<String>, sent: Instant) -> bool {
        self.latencies.push(sent.elapsed().as_micros() as u64);
        match answer {
            Ok(_) => self.switches += 1,
            Err(e) => {
                self.refused += 1;
                if self.refused == 1 {
                    eprintln!("sky-work: policy-storm: {e:#}");
                }
                return e.to_string().contains("no scx_sky is running");
            }
        }
        false
    }
}

/// The presets or policy files of a comma-separated `--policies`.
pub fn policy_names(policies: &str) -> Vec<String> {
    policies
        .split(',')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// `sky-work control-abuse`: each bad client, and what it was answered
/// (`refused` when it got an error answer).
pub fn abuse(dir: &Path) -> String {
    let path = sky_control::socket_path(dir);
    let send = |bytes: &[u8], half_close: bool| -> std::io::Result<String> {
        let mut s = std::os::unix::net::UnixStream::connect(&path)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.write_all(bytes)?;
        if half_close {
            s.shutdown(std::net::Shutdown::Write)?;
        }
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        Ok(out)
    };
    let cases: [(&str, Vec<u8>, bool); 5] = [
        ("garbage", b"\xff\x00\xfe garbage\n".to_vec(), false),
        ("oversized", vec![b's'; sky_control::MAX_REQUEST * 4], false),
        ("silent", b"set vti".to_vec(), false),
        ("halfclosed", b"set".to_vec(), true),
        ("unknown", b"reboot now\n".to_vec(), false),
    ];
    let mut line = String::from("result workload=control-abuse");
    for (name, bytes, half_close) in cases {
        let verdict = match send(&bytes, half_close) {
            Ok(answer) if answer.starts_with("error: ") => "refused".to_string(),
            Ok(answer) => format!(
                "answered:{}",
                answer.split_whitespace().next().unwrap_or("")
            ),
            // The server may close on an oversized request before reading it all.
            Err(e) if name == "oversized" => format!("closed:{}", e.kind()),
            Err(e) => format!("failed:{}", e.kind()),
        };
        line.push_str(&format!(" {name}={verdict}"));
    }
    line
}
