//! A workload with a known answer for the tracepoint observer: processes
//! named `obs-check` that burst, sleep (wakeups), yield (preemptions) and
//! hop between CPUs (migrations), then block. While they are blocked
//! nothing about them changes, so the kernel's own counters for each
//! (`/proc/<pid>/sched`, `schedstat`) can be held against what the
//! observer saw of the same tasks.

use crate::child::{self, Child};
use crate::pin_current_thread;
use anyhow::{bail, Context, Result};
use sky_proc::{sched_field, SchedStat};
use std::fs::File;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub const COMM: &str = "obs-check";

#[derive(Debug, Clone)]
pub struct ObserverCheck {
    pub procs: usize,
    pub duration: Duration,
    /// The children are released (and exit) once this file exists: after
    /// the observer has stopped, so their exits are not in its trace.
    pub hold: PathBuf,
}

/// What the kernel counted for one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelCounts {
    pub switches: u64,
    pub migrations: u64,
    pub run_ns: u64,
    pub timeslices: u64,
}

impl KernelCounts {
    pub fn of(pid: i32) -> Result<Self> {
        let sched_path = format!("/proc/{pid}/sched");
        let sched = std::fs::read_to_string(&sched_path)
            .with_context(|| format!("reading {sched_path}"))?;
        let stat_path = format!("/proc/{pid}/schedstat");
        let stat = SchedStat::parse(
            &std::fs::read_to_string(&stat_path).with_context(|| format!("reading {stat_path}"))?,
        )?;
        let field = |name: &str| {
            sched_field(&sched, name).with_context(|| format!("{sched_path} has no {name}"))
        };
        Ok(KernelCounts {
            switches: field("nr_switches")?,
            migrations: field("se.nr_migrations")?,
            run_ns: stat.run_ns,
            timeslices: stat.timeslices,
        })
    }
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl ObserverCheck {
    /// Runs the children, prints each one's kernel counts once all are
    /// blocked, then `obs-check ready`; releases them when `hold` exists.
    pub fn run(&self) -> Result<()> {
        if self.procs == 0 || self.procs > 256 {
            bail!("--procs must be 1..=256, got {}", self.procs);
        }
        let children = (0..self.procs)
            .map(|i| child::spawn(COMM, |out| self.child(i, out)))
            .collect::<Result<Vec<Child>>>()?;
        for c in &children {
            // The report ends when the child closes its pipe, just before
            // it blocks: the only sleep after that is the sigwait.
            c.read_report()?;
            wait_sleeping(c.pid())?;
        }
        let mut out = std::io::stdout().lock();
        for c in &children {
            let k = KernelCounts::of(c.pid())?;
            writeln!(
                out,
                "result kernel task pid={} switches={} migrations={} run_us={} timeslices={}",
                c.pid(),
                k.switches,
                k.migrations,
                k.run_ns / 1000,
                k.timeslices
            )?;
        }
        writeln!(out, "obs-check ready")?;
        out.flush()?;
        while !self.hold.exists() {
            std::thread::sleep(Duration::from_millis(20));
        }
        for c in children {
            // SAFETY: a signal to our own child.
            unsafe { libc::kill(c.pid(), libc::SIGUSR1) };
            c.finish(COMM)?;
        }
        Ok(())
    }

    fn child(&self, index: usize, out: std::os::fd::OwnedFd) -> Result<()> {
        crate::set_comm(COMM)?;
        // Blocked now, taken by sigwait at the end: the release signal
        // wakes nothing before then.
        // SAFETY: plain signal-set manipulation of this process.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGUSR1);
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        }
        let all: Vec<usize> = (0..cpus()).collect();
        let end = Instant::now() + self.duration;
        let mut cycle = index;
        while Instant::now() < end {
            let burst_end = Instant::now() + Duration::from_micros(1000);
            while Instant::now() < burst_end {
                std::hint::spin_loop();
            }
            match cycle % 4 {
                0 => std::thread::sleep(Duration::from_millis(2)),
                1 => std::thread::yield_now(),
                // A move the scheduler cannot refuse: a migration.
                2 => pin_current_thread(&[cycle / 4 % all.len()])?,
                _ => pin_current_thread(&all)?,
            }
            cycle += 1;
        }
        let mut out = File::from(out);
        writeln!(out, "cycles={}", cycle - index)?;
        drop(out);
        let mut sig = 0;
        // SAFETY: waits for the blocked SIGUSR1; set is initialised above.
        if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
            bail!("sigwait failed");
        }
        Ok(())
    }
}

/// Waits until `pid` sleeps (state S).
fn wait_sleeping(pid: i32) -> Result<()> {
    let path = format!("/proc/{pid}/stat");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut text = String::new();
        File::open(&path)
            .and_then(|mut f| f.read_to_string(&mut text))
            .with_context(|| format!("reading {path}"))?;
        // The state follows the command's closing parenthesis.
        let state = text.rsplit_once(") ").and_then(|(_, r)| r.chars().next());
        if state == Some('S') {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{COMM} child {pid} did not block within 60 s (state {state:?})");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
