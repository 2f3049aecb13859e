//! `cargo xtask eval --native`: the same runner (tests/vm/eval.sh) on this
//! machine instead of in a VM, for real hardware: a sched_ext kernel, as
//! root. There is no cache model there; the PMU counts the misses instead
//! (`perf stat -a -e cache-references,cache-misses` around every run,
//! EVAL_NATIVE), so the miss-rate columns hold the hardware's figures.

use crate::vm::{self, VmOutcome};
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// What a native evaluation needs, checked once before any scenario: a
/// sched_ext kernel and root; without perf it runs, saying what is lost.
pub fn preflight() -> Result<()> {
    if !vm::host_has_sched_ext() {
        bail!("--native: this kernel has no sched_ext (/sys/kernel/sched_ext is missing)");
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("--native: the runner loads schedulers and reads the sched tracepoints: run as root");
    }
    if Command::new("perf").arg("--version").output().is_err() {
        eprintln!("xtask: eval --native: no perf on PATH; the miss-rate columns stay empty");
    }
    Ok(())
}

/// Runs the guest command here, in tests/vm with the release binaries
/// first on PATH, printing its output as it comes.
pub fn run(command: &str) -> Result<VmOutcome> {
    let mut child = vm::native_command(&format!("EVAL_NATIVE=1 {command}"))?
        .stdout(Stdio::piped())
        .spawn()
        .context("starting sh")?;
    let mut output = String::new();
    let stdout = child.stdout.take().context("the runner's output")?;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading the runner's output")?;
        println!("{line}");
        output.push_str(&line);
        output.push('\n');
    }
    let status = child.wait()?.code().unwrap_or(1);
    Ok(VmOutcome {
        status,
        output,
        cache: None,
        // No VM: the scheduler's clocks are the machine's own.
        host: crate::host_load::HostLoad::default(),
    })
}
