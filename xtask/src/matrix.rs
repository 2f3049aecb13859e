//! The kernel matrix: boot each chosen kernel once, run the smoke scenario
//! (tests/vm/smoke.sh: load/unload, then SKY-1's workload under sky1),
//! judge what it printed and summarise one row per kernel.

use crate::kernel::{self, Kernel};
use crate::kversion::Selector;
use crate::report::{self, Fields};
use crate::vm::{self, VmConfig};
use anyhow::{bail, Result};
use std::collections::BTreeMap;

/// Which kernels to boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Which {
    /// The newest kernel with sched_ext of every series.
    All,
    /// Each a version or series, as `--kernel-version` takes them.
    Versions(Vec<String>),
    /// The newest and the oldest Debian kernel with sched_ext.
    OldestNewest,
    /// Only the oldest Debian kernel with sched_ext.
    Oldest,
}

/// The kernels `which` names (downloaded), without repeats.
pub fn choose(which: &Which) -> Result<Vec<Kernel>> {
    let all = kernel::available()?;
    let newest = || kernel::select(&Selector::Prefix(Vec::new()), &all);
    let chosen = match which {
        Which::All => kernel::newest_per_series(&all)?,
        Which::Versions(vs) => vs
            .iter()
            .map(|v| kernel::select(&Selector::parse(v)?, &all))
            .collect::<Result<_>>()?,
        Which::OldestNewest => vec![newest()?, kernel::oldest_sched_ext(&all)?],
        Which::Oldest => vec![kernel::oldest_sched_ext(&all)?],
    };
    let mut unique: Vec<Kernel> = Vec::new();
    for k in chosen {
        if !unique.iter().any(|u| u.version == k.version) {
            unique.push(k);
        }
    }
    if unique.is_empty() {
        bail!("no kernel with sched_ext to boot (cargo xtask kernels lists them)");
    }
    Ok(unique)
}

/// One kernel's smoke result.
#[derive(Debug, Clone, PartialEq)]
pub struct Smoke {
    pub kernel: String,
    /// scx_sky loaded and sched_ext reported `enabled`.
    pub loaded: bool,
    /// scx_sky's own last-CPU share under sky1, percent.
    pub sky1_share: Option<f64>,
    /// The same from the kernel's counters (1 - migrations/timeslices), percent.
    pub kernel_share: Option<f64>,
    /// Errors the kernel logged while booting, before anything ran: the
    /// kernel's, not scx_sky's, so named beside the result, not failed.
    pub boot_errors: u32,
    /// Why it failed; empty when it passed.
    pub failures: Vec<String>,
}

impl Smoke {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    fn failed(kernel: &str, why: String) -> Smoke {
        Smoke {
            kernel: kernel.into(),
            loaded: false,
            sky1_share: None,
            kernel_share: None,
            boot_errors: 0,
            failures: vec![why],
        }
    }
}

/// Boots every kernel in turn (one VM at a time) and runs the smoke.
pub fn run(kernels: &[Kernel], base: &VmConfig) -> Vec<Smoke> {
    kernels
        .iter()
        .map(|k| {
            eprintln!("xtask: matrix: booting {}", k.version);
            let cfg = VmConfig {
                kernel: None,
                kernel_version: Some(k.version.clone()),
                ..base.clone()
            };
            match vm::run(&cfg, "sh ./smoke.sh") {
                Ok(out) => judge(&k.version, out.status, &out.output),
                Err(e) => Smoke::failed(
                    &k.version,
                    format!(
                        "VM: {}",
                        format!("{e:#}").lines().next().unwrap_or("failed")
                    ),
                ),
            }
        })
        .collect()
}

/// The scenario's parts: text after each `smoke: NAME` line, by name.
fn parts(output: &str) -> BTreeMap<String, String> {
    let mut parts = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in output.lines() {
        if let Some(name) = line.trim().strip_prefix("smoke: ") {
            current = Some(name.trim().to_string());
            parts.insert(name.trim().to_string(), String::new());
        } else if let Some(name) = &current {
            let text: &mut String = parts.get_mut(name).expect("inserted above");
            text.push_str(line);
            text.push('\n');
        }
    }
    parts
}

/// Every `check key=value` in `text`, later lines winning.
fn checks(text: &str) -> Fields {
    let mut all = Fields::new();
    for fields in report::lines_with(text, "check ") {
        all.extend(fields);
    }
    all
}

/// Why scx_sky did not load: its `error:` line (its log comes before the
/// verdict), else any error-looking line, else how the start ended.
fn load_error(text: &str) -> String {
    let before_verdict = text.split("check loaded=no").next().unwrap_or(text);
    let log: Vec<&str> = before_verdict
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("check "))
        .collect();
    let looks_wrong = |l: &&&str| {
        let l = l.to_ascii_lowercase();
        l.contains("error") || l.contains("failed") || l.contains("invalid")
    };
    let line = log
        .iter()
        .rev()
        .find(|l| l.contains("error:"))
        .or_else(|| log.iter().rev().find(looks_wrong));
    let c = checks(before_verdict);
    let how = if let Some(rc) = c.get("sky_start_exit") {
        format!("exited {rc}")
    } else if let Some(t) = c.get("sky_start_timeout") {
        format!("sched_ext not enabled after {t}")
    } else {
        "sched_ext not enabled".into()
    };
    let text = match line {
        Some(l) => format!("{how}: {l}"),
        None => how,
    };
    text.chars().take(200).collect()
}

/// Judges one boot's output: enabled while running, clean exits, clean
/// dmesg, dispatches in both parts. Last-CPU shares are reported, not
/// judged (TCG timing makes them noisy across kernels).
pub fn judge(kernel: &str, status: i32, output: &str) -> Smoke {
    let parts = parts(output);
    let mut failures = Vec::new();
    let Some(load) = parts.get("load") else {
        return Smoke::failed(
            kernel,
            format!("the smoke scenario did not start (exit status {status})"),
        );
    };
    let load_checks = checks(load);
    let loaded = load_checks.get("loaded").map(String::as_str) == Some("yes");
    let mut smoke = Smoke {
        kernel: kernel.into(),
        loaded,
        sky1_share: None,
        kernel_share: None,
        boot_errors: 0,
        failures: Vec::new(),
    };
    if !loaded {
        smoke
            .failures
            .push(format!("scx_sky did not load: {}", load_error(load)));
        return smoke;
    }
    let expect = |failures: &mut Vec<String>, c: &Fields, part: &str, key: &str, want: &str| {
        let got = c.get(key).map(String::as_str);
        if got != Some(want) {
            failures.push(format!(
                "{part}: {key} is {}, not {want}",
                got.unwrap_or("missing")
            ));
        }
    };
    let dispatched = |failures: &mut Vec<String>, text: &str, part: &str| -> Option<Fields> {
        match report::one_line(text, "stats total:") {
            Ok(stats) => {
                if report::number(&stats, "dispatches").unwrap_or(0.0) <= 0.0 {
                    failures.push(format!("{part}: no task was dispatched"));
                }
                Some(stats)
            }
            Err(e) => {
                failures.push(format!("{part}: {e}"));
                None
            }
        }
    };
    expect(
        &mut failures,
        &load_checks,
        "load",
        "state_running",
        "enabled",
    );
    if !load_checks
        .get("ops")
        .is_some_and(|ops| ops.starts_with("sky_"))
    {
        failures.push(format!(
            "load: ops {:?} is not scx_sky's",
            load_checks.get("ops")
        ));
    }
    expect(&mut failures, &load_checks, "load", "sky_exit", "0");
    expect(
        &mut failures,
        &load_checks,
        "load",
        "state_after",
        "disabled",
    );
    dispatched(&mut failures, load, "load");
    match parts.get("sky1") {
        None => failures.push("sky1: the part did not run".into()),
        Some(sky1) => {
            let c = checks(sky1);
            expect(&mut failures, &c, "sky1", "state_running", "enabled");
            expect(&mut failures, &c, "sky1", "sky_exit", "0");
            expect(&mut failures, &c, "sky1", "state_after", "disabled");
            if let Some(stats) = dispatched(&mut failures, sky1, "sky1") {
                smoke.sky1_share = report::number(&stats, "last_cpu_share").ok();
            }
            if let Ok(work) = report::one_line(sky1, "result workload=cache-loop") {
                let n = |k: &str| report::number(&work, k).ok();
                if let (Some(m), Some(t)) = (n("migrations"), n("timeslices")) {
                    smoke.kernel_share = (t > 0.0).then(|| 100.0 * (1.0 - m / t));
                }
            }
        }
    }
    match parts.get("end") {
        None => failures.push("the scenario stopped before its end".into()),
        Some(end) => {
            let c = checks(end);
            expect(&mut failures, &c, "end", "dmesg_errors", "0");
            smoke.boot_errors = c
                .get("boot_errors")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
        }
    }
    if let Some(what) = checks(output).get("timeout_waiting_for") {
        failures.push(format!("sched_ext never became {what}"));
    }
    if status != 0 && failures.is_empty() {
        failures.push(format!("the scenario exited {status}"));
    }
    smoke.failures = failures;
    smoke
}

/// The table, then `matrix: N passed, M failed`.
pub fn print_table(results: &[Smoke]) {
    let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}%"));
    println!(
        "\n{:<24} {:<6} {:>14} {:>16}  result",
        "kernel", "loads", "sky1 last-cpu", "kernel counters"
    );
    for s in results {
        println!(
            "{:<24} {:<6} {:>14} {:>16}  {}",
            s.kernel,
            if s.loaded { "yes" } else { "no" },
            pct(s.sky1_share),
            pct(s.kernel_share),
            if s.passed() && s.boot_errors > 0 {
                format!(
                    "pass (the kernel logged {} error(s) while booting, before scx_sky ran: \
                     the log's boot-error lines)",
                    s.boot_errors
                )
            } else if s.passed() {
                "pass".to_string()
            } else {
                format!("FAIL: {}", s.failures.join("; "))
            }
        );
    }
    let passed = results.iter().filter(|s| s.passed()).count();
    println!("matrix: {passed} passed, {} failed", results.len() - passed);
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
SeaBIOS noise
sky-vm: up, 4 CPUs, kernel 6.16.3+deb13-amd64
smoke: load
check state_before=disabled
check loaded=yes
check state_running=enabled
check ops=sky_1.0.0_x86_64_unknown_linux_gnu
result workload=burn threads=4 iterations=10
12:00:01 [INFO] stats total: dispatches=1200 last_cpu_share=80.0%
check sky_exit=0
check state_after=disabled
smoke: sky1
check state_running=enabled
result workload=cache-loop procs=8 passes=100 migrations=50 timeslices=1000 wait_p99_us=10.0
12:00:05 [INFO] stats total: dispatches=5000 last_cpu_share=97.5%
check sky_exit=0
check state_after=disabled
smoke: end
check dmesg_errors=0
SKY-VM-EXIT=0
";

    #[test]
    fn a_clean_run_passes_with_both_shares() {
        let s = judge("6.16.3+deb13-amd64", 0, GOOD);
        assert!(s.passed(), "{:?}", s.failures);
        assert!(s.loaded);
        assert_eq!(s.sky1_share, Some(97.5));
        assert_eq!(s.kernel_share, Some(95.0));
    }

    #[test]
    fn a_kernel_fault_while_booting_is_named_not_failed() {
        let booted_badly = GOOD.replace(
            "check dmesg_errors=0\n",
            "check dmesg_errors=0\nboot-error: [    1.1] BUG: Bad page state in process swapper/0\n\
             check boot_errors=1\n",
        );
        let s = judge("6.16.3+deb13-amd64", 0, &booted_badly);
        assert!(s.passed(), "{:?}", s.failures);
        assert_eq!(s.boot_errors, 1);
        let later = booted_badly.replace("dmesg_errors=0", "dmesg_errors=1");
        let s = judge("6.16.3+deb13-amd64", 0, &later);
        assert_eq!(s.failures, ["end: dmesg_errors is 1, not 0"]);
    }

    #[test]
    fn a_load_failure_names_the_error() {
        let out = "\
smoke: load
check state_before=disabled
12:00:00 [WARN] libbpf: prog 'sky_enqueue': BPF program load failed: Invalid argument
scx_sky: error: Failed to load BPF program: Protocol error (os error 71)
libbpf: failed to load BPF skeleton 'bpf_bpf': -EPROTO
check sky_start_exit=1
check loaded=no
check dmesg_errors=0
[   40.569627] reboot: Power down
check dmesg_errors=0
";
        let s = judge("custom-6.12", 1, out);
        assert!(!s.loaded);
        assert_eq!(
            s.failures,
            ["scx_sky did not load: exited 1: scx_sky: error: Failed to load BPF program: Protocol error (os error 71)"]
        );
        let slow = "smoke: load\nlibbpf: map 'sky_ops': created\ncheck sky_start_timeout=180s state=disabled\ncheck loaded=no\n";
        assert_eq!(
            judge("6.18", 1, slow).failures,
            ["scx_sky did not load: sched_ext not enabled after 180s"]
        );
    }

    #[test]
    fn each_broken_check_is_reported() {
        let bad = GOOD
            .replace("dmesg_errors=0", "dmesg_errors=2")
            .replace("stats total: dispatches=5000", "stats total: dispatches=0")
            .replacen("sky_exit=0", "sky_exit=1", 1);
        let s = judge("7.3.4+deb13-amd64", 0, &bad);
        assert_eq!(
            s.failures,
            [
                "load: sky_exit is 1, not 0",
                "sky1: no task was dispatched",
                "end: dmesg_errors is 2, not 0"
            ]
        );
        let cut = &GOOD[..GOOD.find("smoke: sky1").unwrap()];
        let s = judge("7.3.4+deb13-amd64", 1, cut);
        assert_eq!(
            s.failures,
            [
                "sky1: the part did not run",
                "the scenario stopped before its end"
            ]
        );
        assert!(!judge("x", 0, "boot noise only").passed());
    }

    #[test]
    fn a_nonzero_exit_alone_fails() {
        let s = judge("7.3.4+deb13-amd64", 3, GOOD);
        assert_eq!(s.failures, ["the scenario exited 3"]);
    }
}
