//! Scheduler tracing through tracefs for `trace_waits`: turns the events
//! on, reads trace_pipe beside the workload, and leaves tracing as found.

use crate::gang_share::{cpu_domains, GangShare};
use crate::smt_share::{sibling_pairs, SmtShare};
use crate::trace_waits::{parse_line, WaitBook};
use anyhow::{Context, Result};
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const EVENTS: [&str; 4] = [
    "sched/sched_switch",
    "sched/sched_wakeup",
    "sched/sched_wakeup_new",
    "sched/sched_migrate_task",
];
/// Traced where the kernel has them: timer interrupts (x86) for machine
/// gaps, reschedule IPIs sent (6.3+) and taken (x86) for their latency.
const MACHINE_EVENTS: [&str; 3] = [
    "irq_vectors/local_timer_entry",
    "ipi/ipi_send_cpu",
    "irq_vectors/reschedule_entry",
];

/// Traced where the kernel has it: a task renaming itself, so the pairing
/// observer (smt_share.rs) knows a process by its new name at once.
const RENAME_EVENT: &str = "task/task_rename";

/// Where tracefs is, mounting it if the system has not.
fn tracefs() -> Result<PathBuf> {
    let candidates = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
    let found = || {
        candidates
            .iter()
            .map(PathBuf::from)
            .find(|d| d.join("trace_pipe").exists())
    };
    if let Some(dir) = found() {
        return Ok(dir);
    }
    // SAFETY: constant NUL-terminated strings; mount only reads them.
    unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            c"/sys/kernel/tracing".as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    found().context(
        "no tracefs at /sys/kernel/tracing or /sys/kernel/debug/tracing, and mounting \
         it failed (needs root and a kernel with CONFIG_FTRACE)",
    )
}

/// Scheduler tracing through tracefs while a workload runs: the three
/// events on, a per-CPU buffer big enough to hold seconds of events if the
/// reader falls behind (a busy machine is exactly when it does), and the
/// global trace clock (a wait starts on one CPU and ends on another). The
/// reader is an ordinary thread; whatever the buffer could not hold is
/// counted as lost, never guessed.
pub struct Tracer {
    dir: PathBuf,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<Result<WaitBook>>>,
    /// Settings as found, put back when done: (file, value).
    found: Vec<(&'static str, String)>,
}

/// The selected option of a tracefs choice file (`[global] local ...`),
/// or the file's text.
fn selected(text: &str) -> String {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
        .unwrap_or(text.trim())
        .to_string()
}

impl Tracer {
    pub fn start(buffer_kb_per_cpu: u64) -> Result<Self> {
        let dir = tracefs()?;
        let found = ["trace_clock", "buffer_size_kb", "current_tracer"]
            .into_iter()
            .filter_map(|f| Some((f, selected(&std::fs::read_to_string(dir.join(f)).ok()?))))
            .collect();
        let mut tracer = Tracer {
            dir,
            stop: Arc::new(AtomicBool::new(false)),
            reader: None,
            found,
        };
        tracer.write("tracing_on", "0")?;
        tracer.write("current_tracer", "nop")?;
        tracer.write("trace_clock", "global")?;
        tracer.write("buffer_size_kb", &buffer_kb_per_cpu.to_string())?;
        tracer.write("trace", "")?;
        for event in EVENTS {
            tracer.write(&format!("events/{event}/enable"), "1")?;
        }
        for event in MACHINE_EVENTS {
            if tracer
                .write(&format!("events/{event}/enable"), "1")
                .is_err()
            {
                eprintln!(
                    "sky-work: no {event} tracepoint: machine gaps are measured from \
                     scheduler events only, or IPI latencies not at all"
                );
            }
        }
        if tracer
            .write(&format!("events/{RENAME_EVENT}/enable"), "1")
            .is_err()
        {
            eprintln!(
                "sky-work: no {RENAME_EVENT} tracepoint: a task that renames itself is \
                 seen by its new name from its next switch only"
            );
        }
        let pipe = tracer.dir.join("trace_pipe");
        let pipe = File::options()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&pipe)
            .with_context(|| format!("opening {}", pipe.display()))?;
        let stop = tracer.stop.clone();
        // SAFETY: sysconf has no preconditions.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(0) as usize;
        tracer.reader = Some(
            std::thread::Builder::new()
                .name("trace-reader".into())
                .spawn(move || read_pipe(pipe, &stop, online))
                .context("starting the trace reader")?,
        );
        tracer.write("tracing_on", "1")?;
        Ok(tracer)
    }

    /// Stops tracing, reads what is left and returns every wait seen, with
    /// the events the buffer dropped added to the lost count.
    pub fn finish(mut self) -> Result<WaitBook> {
        self.write("tracing_on", "0")?;
        self.stop.store(true, Ordering::Release);
        let reader = self.reader.take().context("the trace reader is gone")?;
        let mut book = reader
            .join()
            .map_err(|_| anyhow::anyhow!("the trace reader panicked"))??;
        book.lost_events += buffer_losses(&self.dir);
        Ok(book)
    }

    fn write(&self, file: &str, value: &str) -> Result<()> {
        let path = self.dir.join(file);
        std::fs::write(&path, value)
            .with_context(|| format!("writing {value:?} to {}", path.display()))
    }
}

impl Drop for Tracer {
    /// Leaves tracing as found: tracing and the events off (as a tracer
    /// must find them to start), the clock, buffer size and tracer back.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.write("tracing_on", "0");
        for event in EVENTS.iter().chain(&MACHINE_EVENTS).chain([&RENAME_EVENT]) {
            let _ = self.write(&format!("events/{event}/enable"), "0");
        }
        for (file, value) in std::mem::take(&mut self.found) {
            let _ = self.write(file, &value);
        }
    }
}

fn read_pipe(mut pipe: File, stop: &AtomicBool, cpus_online: usize) -> Result<WaitBook> {
    let mut book = WaitBook::expecting(cpus_online);
    book.smt = SmtShare::new(&sibling_pairs());
    book.gangs = GangShare::new(&cpu_domains());
    let mut buf = vec![0u8; 1 << 16];
    let mut pending: Vec<u8> = Vec::new();
    loop {
        // Read before the empty read that ends it: an empty read after the
        // stop (tracing already off) means everything was read.
        let stopping = stop.load(Ordering::Acquire);
        match pipe.read(&mut buf) {
            Ok(n) if n > 0 => {
                pending.extend_from_slice(&buf[..n]);
                let complete = pending
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                for line in pending[..complete].split(|&b| b == b'\n') {
                    if let Some(event) = parse_line(&String::from_utf8_lossy(line)) {
                        book.feed(event);
                    }
                }
                pending.drain(..complete);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() != ErrorKind::WouldBlock => {
                return Err(e).context("reading trace_pipe")
            }
            // Empty (EAGAIN, or 0 bytes): done once tracing has stopped,
            // since everything traced before the stop was already there.
            _ => {
                if stopping {
                    return Ok(book);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Events the ring buffers overwrote or dropped, from per_cpu/*/stats.
fn buffer_losses(dir: &Path) -> u64 {
    let Ok(cpus) = std::fs::read_dir(dir.join("per_cpu")) else {
        return 0;
    };
    cpus.flatten()
        .filter_map(|cpu| std::fs::read_to_string(cpu.path().join("stats")).ok())
        .flat_map(|text| {
            text.lines()
                .filter_map(|line| {
                    let (key, value) = line.split_once(':')?;
                    ["overrun", "dropped events"]
                        .contains(&key.trim())
                        .then(|| value.trim().parse::<u64>().ok())?
                })
                .collect::<Vec<_>>()
        })
        .sum()
}
