//! The switch-latency benchmark's two halves: how long a policy switch
//! takes to reach BPF's decisions, done live through scx_sky's control
//! socket, and done the way scx_loader switches (stop the scheduler
//! process, start another), which also leaves tasks outside sched_ext for
//! a while.
//!
//! Both end at the same event: the first BPF callback that pinned the new
//! policy, which scx_sky stamps with bpf_ktime_get_ns() (CLOCK_MONOTONIC)
//! and reports as `first_use_ns` in `policy get`. Both start at the same
//! clock, read just before the request (or the SIGINT) is sent.

use anyhow::{bail, Context, Result};
use sky_control::{Request, Session};
use sky_proc::monotonic_ns;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest wait for one live switch to reach BPF.
const REACH_LIMIT: Duration = Duration::from_secs(20);
/// Longest wait for a restarted scheduler's first decision: loading
/// verifies every program, which takes tens of seconds under emulation.
const LOAD_LIMIT: Duration = Duration::from_secs(180);

/// `generation` out of a `set` or `get` answer (`policy=NAME generation=N`).
pub fn generation_of(answer: &str) -> Option<u64> {
    answer
        .split_whitespace()
        .find_map(|w| w.strip_prefix("generation="))?
        .parse()
        .ok()
}

/// `generation` and `first_use_ns` out of a `policy get` answer.
pub fn parse_get(answer: &str) -> Option<(u64, u64)> {
    let generation = generation_of(answer)?;
    let first_use = answer
        .lines()
        .find_map(|l| l.strip_prefix("first_use_ns = "))?
        .trim()
        .parse()
        .ok()?;
    Some((generation, first_use))
}

fn names(policies: &str) -> Result<Vec<String>> {
    let names = crate::control::policy_names(policies);
    if names.len() < 2 {
        bail!("--policies must name at least two policies to switch between, got {policies:?}");
    }
    Ok(names)
}

/// `sky-work switch-latency`: `switches` live switches, one at a time,
/// each timed from the request to BPF's first decision under it.
pub fn live(policies: &str, switches: usize, dir: &Path) -> Result<String> {
    let names = names(policies)?;
    let mut session = Session::connect(dir)?;
    let (mut reach_us, mut answer_us) = (Vec::new(), Vec::new());
    let started = Instant::now();
    for i in 0..switches {
        let t0 = monotonic_ns();
        let answer = session.ask(&Request::Set(names[i % names.len()].clone()))?;
        answer_us.push((monotonic_ns() - t0) / 1000);
        let generation = generation_of(&answer)
            .with_context(|| format!("no generation in the answer {answer:?}"))?;
        let first_use = wait_first_use(&mut session, generation)?;
        reach_us.push(first_use.saturating_sub(t0) / 1000);
    }
    Ok(format!(
        "result workload=switch-latency how=live switches={switches} seconds={:.1} {} {}",
        started.elapsed().as_secs_f64(),
        spread("reach", &mut reach_us),
        spread("answer", &mut answer_us),
    ))
}

/// Asks until BPF has decided under `generation`; its first_use_ns.
fn wait_first_use(session: &mut Session, generation: u64) -> Result<u64> {
    let deadline = Instant::now() + REACH_LIMIT;
    loop {
        let answer = session.ask(&Request::Get)?;
        match parse_get(&answer) {
            Some((g, first_use)) if g == generation && first_use != 0 => return Ok(first_use),
            Some((g, _)) if g != generation => {
                bail!("another client switched (generation {g}, expected {generation})")
            }
            Some(_) => {}
            None => bail!("unexpected answer to get: {answer:?}"),
        }
        if Instant::now() > deadline {
            bail!("generation {generation} made no BPF decision in {REACH_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// `NAME_p50_us=.. NAME_p99_us=.. NAME_max_us=..`.
fn spread(name: &str, us: &mut [u64]) -> String {
    let max = us.iter().copied().max().unwrap_or(0);
    format!(
        "{name}_p50_us={} {name}_p99_us={} {name}_max_us={max}",
        crate::percentile(us, 50.0),
        crate::percentile(us, 99.0)
    )
}

/// `sky-work restart-latency`: switches by stopping the scheduler process
/// and starting a new one with the next policy, `restarts` times; `cmd` is
/// the scheduler's command line, `--policy NAME` is appended.
pub fn restart(policies: &str, restarts: usize, dir: &Path, cmd: &[String]) -> Result<String> {
    let names = names(policies)?;
    let Some((program, args)) = cmd.split_first() else {
        bail!("give the scheduler's command line after --");
    };
    let spawn = |policy: &str| -> Result<Child> {
        Command::new(program)
            .args(args)
            .args(["--policy", policy])
            .spawn()
            .with_context(|| format!("starting {program}"))
    };
    let mut child = spawn(&names[0])?;
    let watcher = StateWatcher::start();
    let (mut reach_us, mut outside_us) = (Vec::new(), Vec::new());
    let started = Instant::now();
    let result = (|| -> Result<()> {
        wait_loaded(dir, &mut child, 0)?;
        for i in 1..=restarts {
            let t0 = monotonic_ns();
            watcher.reset();
            // SAFETY: kill with a pid we spawned and have not reaped.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            let status = child.wait().context("waiting for the scheduler to stop")?;
            if !status.success() {
                bail!("restart {i}: the scheduler stopped with {status}");
            }
            child = spawn(&names[i % names.len()])?;
            let first_use = wait_loaded(dir, &mut child, t0)?;
            reach_us.push(first_use.saturating_sub(t0) / 1000);
            outside_us.push(watcher.outside_us(Duration::from_secs(5)));
        }
        Ok(())
    })();
    // SAFETY: as above; the last scheduler is stopped however we got here.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let _ = child.wait();
    watcher.stop();
    result?;
    Ok(format!(
        "result workload=switch-latency how=restart switches={restarts} seconds={:.1} {} {}",
        started.elapsed().as_secs_f64(),
        spread("reach", &mut reach_us),
        spread("outside", &mut outside_us),
    ))
}

/// Waits for a freshly started scheduler to answer with a decision made
/// after `after_ns`; its first_use_ns.
fn wait_loaded(dir: &Path, child: &mut Child, after_ns: u64) -> Result<u64> {
    let deadline = Instant::now() + LOAD_LIMIT;
    loop {
        if let Some(status) = child.try_wait()? {
            bail!("the scheduler exited with {status} before it loaded");
        }
        // The old process's socket may still be there for a moment: only
        // an answer with a decision after the restart began counts.
        if let Ok(answer) = sky_control::request(dir, &Request::Get) {
            if let Some((_, first_use)) = parse_get(&answer) {
                if first_use != 0 && first_use > after_ns {
                    return Ok(first_use);
                }
            }
        }
        if Instant::now() > deadline {
            bail!("the scheduler made no decision within {LOAD_LIMIT:?} of starting");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Watches /sys/kernel/sched_ext/state on a thread of its own: how long
/// it left `enabled` (tasks are on the fair class from `disabling` until
/// the next `enabled`), to about the 200 us it sleeps between looks.
struct StateWatcher {
    stop: Arc<AtomicBool>,
    /// (first look not `enabled`, first `enabled` after it), ns.
    window: Arc<std::sync::Mutex<(u64, u64)>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

const STATE: &str = "/sys/kernel/sched_ext/state";

impl StateWatcher {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let window = Arc::new(std::sync::Mutex::new((0, 0)));
        let (s, w) = (stop.clone(), window.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let enabled = std::fs::read_to_string(STATE)
                    .map(|t| t.trim() == "enabled")
                    .unwrap_or(true);
                let now = monotonic_ns();
                let mut win = w.lock().unwrap_or_else(|p| p.into_inner());
                match (enabled, *win) {
                    (false, (0, _)) => win.0 = now,
                    (true, (left, 0)) if left != 0 => win.1 = now,
                    _ => {}
                }
                drop(win);
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        StateWatcher {
            stop,
            window,
            thread: Some(thread),
        }
    }

    fn reset(&self) {
        *self.window.lock().unwrap_or_else(|p| p.into_inner()) = (0, 0);
    }

    /// The last window outside sched_ext in us, once it closed (waiting up
    /// to `wait`); 0 if tasks never left it.
    fn outside_us(&self, wait: Duration) -> u64 {
        let deadline = Instant::now() + wait;
        loop {
            let (left, back) = *self.window.lock().unwrap_or_else(|p| p.into_inner());
            if left == 0 || back != 0 || Instant::now() > deadline {
                return back.saturating_sub(left) / 1000;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_answers_parse_and_others_do_not() {
        let get = "policy=vtime generation=12\nfirst_use_ns = 345\naffinity = 0";
        assert_eq!(parse_get(get), Some((12, 345)));
        assert_eq!(generation_of("policy=vtime generation=12"), Some(12));
        assert_eq!(generation_of("policy=vtime"), None);
        assert_eq!(parse_get("policy=vtime generation=12"), None);
        assert_eq!(parse_get("generation=x\nfirst_use_ns = 1"), None);
        assert!(names("sky1").is_err());
        assert_eq!(names("a,,b").unwrap(), vec!["a", "b"]);
    }

    #[test]
    fn the_monotonic_clock_moves() {
        let a = monotonic_ns();
        std::thread::sleep(Duration::from_millis(2));
        let b = monotonic_ns();
        assert!(b - a >= 2_000_000, "{a} {b}");
    }
}
