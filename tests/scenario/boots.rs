//! Scenarios that share one boot. A boot costs a VM test some 5 s of its
//! time under TCG (the kernel, the initramfs, the firmware) before the
//! scenario's first line; scenarios of one topology and the plain test
//! bed (the host's clock, no emulated devices) run one after another in
//! one guest instead (tests/vm/shared.sh puts the guest back as a fresh
//! boot left it between them), each judged by its own test.
//!
//! Only under `cargo xtask test`, which names a directory for the shared
//! boots' outputs (`SKY_VM_SHARE_DIR`): the first test of a boot to run
//! boots it with every part whose test this run will run (libtest's
//! filters), and each part's test then takes its own output from there.
//! A part the shared boot lost (the guest died or hung before it), a test
//! run on its own (`cargo test`), and a second attempt on a busy host
//! boot alone, as any scenario does.

use super::{note_host_lost, run_scenario_configured, scenario_config, show_if_failed, vm_line};
use std::path::{Path, PathBuf};
use xtask::judge;
use xtask::vm;
use xtask::vm_tests::SHARE_DIR;

/// One scenario run, for the test named `test`.
#[derive(Debug)]
pub struct Part {
    pub test: &'static str,
    pub scenario: &'static str,
    /// Shell words, as the scenario's command line takes them.
    pub args: &'static str,
}

/// Parts that share a boot of `topology`.
pub struct Boot {
    pub topology: &'static str,
    pub parts: &'static [&'static Part],
}

macro_rules! part {
    ($name:ident, $test:literal, $scenario:literal, $args:literal) => {
        pub static $name: Part = Part {
            test: $test,
            scenario: $scenario,
            args: $args,
        };
    };
}

part!(
    LIFECYCLE,
    "loads_survives_sigkill_and_reloads_for_an_unknown_cpu",
    "lifecycle",
    ""
);
part!(BURST, "ten_thousand_thread_burst_is_survived", "burst", "");
part!(
    HOTPLUG,
    "cpu_hotplug_under_load_is_handled_in_place",
    "hotplug",
    ""
);
part!(TRUST, "unprivileged_labels_steer_nothing", "trust", "");
part!(
    VERIFIER,
    "no_bpf_program_costs_the_verifier_more_than_its_baseline",
    "verifier",
    ""
);
part!(
    HOSTILE,
    "hostile_load_with_hotplug_never_stalls",
    "hostile",
    ""
);
part!(
    GANGS_PROCESS,
    "gangs_keep_each_memory_bound_gang_in_one_clean_domain",
    "gangs",
    "5 2 sky"
);
part!(
    GANGS_SPACE,
    "gangs_keep_a_shared_spaces_member_processes_together",
    "gangs",
    "5 2 sky space"
);
part!(
    GANGS_FOUR,
    "with_more_gangs_than_domains_gangs_stay_whole_and_nothing_starves",
    "gangs",
    "5 4 sky"
);
part!(
    LATENCY,
    "the_latency_path_shortens_wakeups_beside_hogs",
    "latency",
    ""
);
// Four benchmark runs per scheduler, each a new pair of processes: the
// partner rule fires a few times a boot (0-7 splits and steals with two
// runs in 16 boots, none in two of them: the members spin and yield more
// than they sleep, so a wakeup beside a running partner is rare); four
// runs give the check that it fired twice the chances.
part!(
    PARTNERS,
    "shared_space_members_do_not_wait_behind_each_other_while_cpus_idle",
    "partners",
    "4 'eevdf sky sky-nogangs' 1"
);
part!(
    SMT_TWO_DOMAINS,
    "smt_pairing_holds_on_four_cores_in_two_cache_domains",
    "smt",
    "10 sky"
);
part!(CLASSES, "class_hints_reach_bpf", "classes", "");
part!(
    MAPS,
    "full_class_and_gang_maps_are_survived_and_recovered_from",
    "maps",
    ""
);
part!(
    PMU,
    "pmu_counts_reach_the_classifier_and_classes_reach_bpf",
    "pmu",
    ""
);
part!(
    SCAN,
    "stats_and_sigterm_are_answered_while_scanning",
    "scan",
    ""
);
part!(
    SWITCH,
    "policies_switch_at_runtime_without_a_reload",
    "switch",
    "10"
);
part!(
    FAIRNESS,
    "nice_weights_hold_and_every_preset_is_healthy",
    "fairness",
    ""
);
part!(
    NEAR_BURST,
    "a_near_burst_task_gets_no_more_than_its_fair_share_beside_hogs",
    "nearburst",
    "8 sky"
);
part!(
    OVERLOAD,
    "overload_is_served_round_robin_within_a_bound_that_follows_the_load",
    "overload",
    "2000 20 10 sky"
);
part!(
    SMT_ONE_CORE_PAIR,
    "smt_pairing_puts_pm_writers_beside_compute",
    "smt",
    "10 'sky sky-nohints' 4"
);

/// The shared boots: two sockets of two SMT cores, and one socket's. In
/// each, the scenarios that take CPUs off- and online come last, so that
/// what the others measure is of a machine that never lost a CPU, as a
/// boot of their own is.
pub static BOOTS: [Boot; 2] = [
    Boot {
        topology: "2x2x2",
        parts: &[
            &VERIFIER,
            &GANGS_PROCESS,
            &GANGS_SPACE,
            &GANGS_FOUR,
            &LATENCY,
            &PARTNERS,
            &SMT_TWO_DOMAINS,
            &TRUST,
            &BURST,
            &LIFECYCLE,
            &HOTPLUG,
            &HOSTILE,
        ],
    },
    Boot {
        topology: "1x2x2",
        parts: &[
            &CLASSES,
            &MAPS,
            &SCAN,
            &SWITCH,
            &FAIRNESS,
            &NEAR_BURST,
            &SMT_ONE_CORE_PAIR,
            &PMU,
            &OVERLOAD,
        ],
    },
];

fn boot_of(part: &Part) -> &'static Boot {
    BOOTS
        .iter()
        .find(|b| b.parts.iter().any(|p| p.test == part.test))
        .unwrap_or_else(|| panic!("{} is in no shared boot", part.test))
}

/// Runs `part`'s scenario (in its shared boot when it has one this run)
/// and requires exit status 0, as `run_scenario` does.
pub fn run_part(part: &Part) -> String {
    let boot = boot_of(part);
    let alone =
        || run_scenario_configured(part.scenario, part.args, &scenario_config(boot.topology));
    let Some(dir) = std::env::var_os(SHARE_DIR).map(PathBuf::from) else {
        return alone();
    };
    if judge::attempt() > 1 {
        return alone();
    }
    let booted = dir.join(format!("{}.booted", boot.topology));
    if !booted.exists() {
        boot_together(boot, &dir, &booted);
    }
    let file = dir.join(format!("{}.out", part.test));
    let Ok(shared) = std::fs::read_to_string(&file) else {
        judge::emit(&format!(
            "sky-vm: {} has no output from the shared boot of {}: booting alone",
            part.test, boot.topology
        ));
        return alone();
    };
    let _ = std::fs::remove_file(&file);
    let (head, output) = shared.split_once('\n').unwrap_or((&shared, ""));
    let field = |key: &str| {
        xtask::report::fields(head)
            .get(key)
            .cloned()
            .unwrap_or_default()
    };
    let host = format!(
        "part_s={} lost_share={}",
        field("part_s"),
        field("lost_share")
    );
    eprintln!("sky-vm: shared boot: {host}");
    judge::emit(&vm_line(
        part.scenario,
        part.args,
        boot.topology,
        &format!("shared boot, {host}"),
    ));
    note_host_lost(field("lost_share").parse().unwrap_or(0.0));
    show_if_failed(part.scenario, output);
    let status = field("status");
    assert_eq!(
        status,
        "0",
        "scenario {} exited {status} (shared boot of {}):\n{}",
        part.scenario,
        boot.topology,
        vm::tail(output, 60)
    );
    output.to_string()
}

/// Boots `boot` once with each of its parts whose test this run will run,
/// and writes each part's output to `dir` (TEST.out: a head line with its
/// exit status, its time in the guest and what the host took, then the
/// output).
fn boot_together(boot: &Boot, dir: &Path, booted: &Path) {
    let parts: Vec<&Part> = boot
        .parts
        .iter()
        .copied()
        .filter(|p| selected(p.test))
        .collect();
    std::fs::create_dir_all(dir).expect("the shared boots' directory");
    std::fs::write(booted, "").expect("the shared boot's mark");
    let mut command = "sh ./shared.sh".to_string();
    for p in &parts {
        command += &format!(" {} {} {}", p.test, p.scenario, quote(p.args));
    }
    let cfg = vm::VmConfig {
        // Each part's own bound (scenario_config), in a row.
        timeout: scenario_config(boot.topology).timeout * parts.len().max(1) as u32,
        ..scenario_config(boot.topology)
    };
    let out = match vm::run(&cfg, &command) {
        Ok(out) => out,
        Err(e) => {
            judge::emit(&format!(
                "sky-vm: the shared boot of {} failed ({e:#}): each part boots alone",
                boot.topology
            ));
            return;
        }
    };
    judge::emit(&format!(
        "sky-vm: shared boot of {} parts on {}: {}",
        parts.len(),
        boot.topology,
        out.host
    ));
    let lost = out.host.lost_share();
    for Finished {
        test,
        status,
        seconds,
        text,
    } in split_parts(&out.output)
    {
        let head = format!("status={status} part_s={seconds:.1} lost_share={lost:.3}\n");
        std::fs::write(dir.join(format!("{test}.out")), head + &text)
            .expect("a shared part's output");
    }
}

/// A part of a shared boot that ran to its end.
#[derive(Debug, PartialEq)]
struct Finished {
    test: String,
    status: String,
    /// Its time in the guest, from begin to end.
    seconds: f64,
    text: String,
}

/// Each finished part of a shared boot's output. A part without its end
/// line (the guest died in it) is left out.
fn split_parts(output: &str) -> Vec<Finished> {
    let mut parts = Vec::new();
    let mut current: Option<(String, f64, String)> = None;
    for line in output.lines() {
        let Some(rest) = line.split_once("sky-vm: part ").map(|(_, r)| r) else {
            if let Some((_, _, text)) = current.as_mut() {
                text.push_str(line);
                text.push('\n');
            }
            continue;
        };
        let f = xtask::report::fields(rest);
        let uptime = f
            .get("uptime_s")
            .and_then(|u| u.parse().ok())
            .unwrap_or(0.0);
        let mut words = rest.split_whitespace();
        let (test, what) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        match what {
            "begin" => current = Some((test.to_string(), uptime, String::new())),
            "end" => {
                if let Some((test, began, text)) = current.take().filter(|(t, ..)| t == test) {
                    parts.push(Finished {
                        test,
                        status: f.get("status").cloned().unwrap_or_default(),
                        seconds: uptime - began,
                        text,
                    });
                }
            }
            _ => {}
        }
    }
    parts
}

/// `args` as one shell word (single-quoted).
fn quote(args: &str) -> String {
    format!("'{}'", args.replace('\'', "'\\''"))
}

/// Whether libtest runs `test` in this process: no filter, or one it
/// contains, and no `--skip` it contains (the filters every test binary
/// of the run was given).
fn selected(test: &str) -> bool {
    let mut filters = Vec::new();
    let mut skips = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--skip" => skips.extend(args.next()),
            "--format" | "--logfile" | "--color" | "-Z" | "--test-threads" => {
                args.next();
            }
            flag if flag.starts_with('-') => {}
            filter => filters.push(filter.to_string()),
        }
    }
    (filters.is_empty() || filters.iter().any(|f| test.contains(f.as_str())))
        && !skips.iter().any(|s| test.contains(s.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_boots_output_splits_into_its_finished_parts() {
        let out = "sky-vm: up\nsky-vm: part a begin uptime_s=3\ncheck x=1\n\
                   sky-vm: part a end status=0 uptime_s=9\nnoise\n\
                   sky-vm: part b begin uptime_s=10\ncheck y=2\n\
                   sky-vm: part b end status=1 uptime_s=12\n\
                   sky-vm: part c begin uptime_s=13\nhalf a part\n";
        let parts = split_parts(out);
        let part = |test: &str, status: &str, seconds, text: &str| Finished {
            test: test.into(),
            status: status.into(),
            seconds,
            text: text.into(),
        };
        assert_eq!(
            parts,
            vec![
                part("a", "0", 6.0, "check x=1\n"),
                part("b", "1", 2.0, "check y=2\n"),
            ]
        );
        assert_eq!(
            quote("10 'sky sky-nohints' 4"),
            "'10 '\\''sky sky-nohints'\\'' 4'"
        );
    }

    #[test]
    fn every_part_is_in_one_boot_and_names_a_test() {
        let mut seen = std::collections::BTreeSet::new();
        let sources: String = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/tests"))
            .unwrap()
            .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
            .collect();
        for boot in &BOOTS {
            for p in boot.parts {
                assert!(seen.insert(p.test), "{} is in two boots", p.test);
                assert!(
                    sources.contains(&format!("fn {}()", p.test)),
                    "no test {}",
                    p.test
                );
                assert!(
                    std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vm"))
                        .join(format!("{}.sh", p.scenario))
                        .exists(),
                    "no scenario {}",
                    p.scenario
                );
            }
        }
    }
}
