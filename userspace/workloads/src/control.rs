//! Clients of scx_sky's control socket for the VM tests: a storm of
//! policy switches, and clients that misbehave.

use anyhow::Result;
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// `sky-work policy-storm`: one switch per request, back to back.
pub fn storm(policies: &str, duration: Duration, dir: &Path) -> Result<String> {
    let names: Vec<&str> = policies.split(',').filter(|p| !p.is_empty()).collect();
    if names.is_empty() {
        anyhow::bail!("--policies names no policy");
    }
    let started = Instant::now();
    let (mut switches, mut refused) = (0u64, 0u64);
    let mut latencies = Vec::new();
    while started.elapsed() < duration {
        let name = names[switches as usize % names.len()];
        let t = Instant::now();
        match sky_control::request(dir, &sky_control::Request::Set(name.to_string())) {
            Ok(_) => switches += 1,
            Err(e) => {
                refused += 1;
                if refused == 1 {
                    eprintln!("sky-work: policy-storm: {e:#}");
                }
                // A scheduler that is gone will not come back here.
                if e.to_string().contains("no scx_sky is running") {
                    break;
                }
            }
        }
        latencies.push(t.elapsed().as_micros() as u64);
    }
    let secs = started.elapsed().as_secs_f64();
    Ok(format!(
        "result workload=policy-storm switches={switches} refused={refused} per_s={:.0} \
         p50_us={} p99_us={}",
        switches as f64 / secs.max(1e-9),
        crate::percentile(&mut latencies, 50.0),
        crate::percentile(&mut latencies, 99.0)
    ))
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
