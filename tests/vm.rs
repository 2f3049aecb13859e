//! VM integration tests: each boots the sched_ext kernel under qemu with a
//! chosen CPU topology, runs a scenario from tests/vm/ as root, and judges
//! what it printed. They need qemu, busybox and the kernel (scripts/setup.sh)
//! and the release binaries, so they are #[ignore]d in a plain `cargo test`;
//! `cargo xtask test` builds everything and runs them.

// Shared by the VM test binaries; each uses part of it.
#[allow(dead_code)]
mod scenario;

use scenario::boots::{self, run_part, Part};
use scenario::{
    assert_clean_exit, assert_enabled, assert_no_fault, at_least, at_most, check, checks, judge,
    on_a_quiet_host, run_scenario_clocked, stat, trace_group, Basis, GuestClock, Promise,
};
use std::time::Duration;
use xtask::matrix;
use xtask::report;
use xtask::vm::{self, VmConfig};

/// How far past scx_sky's promise (its wait bound plus a slice:
/// `Promise`) a wait may run, in timer ticks, where the kernel's own
/// counters (schedstat run-queue wait, watched every 200 us by each task)
/// judge SKY-1's eight processes on four vCPUs by instructions
/// (`GuestClock`): a tick for a preempted CPU to notice, and what TCG
/// adds while a reschedule IPI waits for its vCPU's turn. Nine runs of
/// 38-58 ms against a promise of 55 ms (0.75 tick past it at most); the
/// runs behind every VM bound: docs/vm-bounds.md.
const SKY1_WAIT_TICKS: f64 = 6.0;

/// The same for fairness (one task a vCPU, the host's clock): 25-35 ms,
/// within the promise.
const FAIRNESS_WAIT_TICKS: f64 = 1.0;

/// Ticks past the promise the longest single wait under the hostile load
/// may run (more tasks pinned to one CPU than it can run, SCHED_IDLE and
/// nice 19 tasks among hogs, CPUs going on- and offline), measured exactly
/// by the tracepoint observer (`sky-work trace-waits`: every wait of every
/// task, from wakeup or preemption to switch-in), for waits that
/// overlapped no CPU going off- or online. Under TCG a kick takes up to
/// 20 ms (5 ticks) to reach its vCPU (these traces). Sixteen runs: 52-70
/// ms, 4 ticks past the promise at most (EEVDF on the same load in the
/// same boot: 1.6 s for a SCHED_IDLE thread).
const HOSTILE_WAIT_TICKS: f64 = 16.0;

/// The same for every wait, those a CPU going offline held up included
/// (the kernel stops every CPU while one leaves): 58-91 ms in the same
/// sixteen runs (EEVDF: 2.4 s); a CI run's 277 ms on a quiet host is
/// unexplained (docs/vm-bounds.md: what the observer prints now to
/// explain the next).
const HOSTILE_HOTPLUG_WAIT_TICKS: f64 = 48.0;

/// How much longer, at most, a spinner waits between runs beside one that
/// renices itself every millisecond than beside one that does not (one CPU,
/// same boot). The kernel restores a renicing task without a slice end;
/// taken as a new start (a fresh slice, the CPU's clock moved to it) its
/// neighbour waited 8.7x as long (36 ms between runs against 4 ms); with
/// the slice kept but the clock still moved, 2.8-7.9x in eight runs; as a
/// restore, 0.96-0.99x in six runs (docs/vm-bounds.md).
const RENICE_WAIT_RATIO: f64 = 2.0;

/// How far a nice pair's CPU shares may stray from their weights' ratio,
/// as a share of it (tests/vm/fairness.sh: a nice 0 and a nice 5 spinner,
/// and a plain spinner beside one renicing itself).
const SHARE_VS_WEIGHTS_OFF: f64 = 0.10;

/// The kinds of thread the hostile load runs, as the observer groups them
/// (thread names are cut to 15 characters).
const HOSTILE_GROUPS: [&str; 7] = [
    "hostile-hog",
    "hostile-pinned",
    "hostile-affinit",
    "hostile-nice",
    "hostile-class",
    "hostile-yield",
    "hostile-fork",
];

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn loads_survives_sigkill_and_reloads_for_an_unknown_cpu() {
    on_a_quiet_host(|| {
        let out = run_part(&boots::LIFECYCLE);
        let c = checks(&out);
        assert_eq!(check(&c, "state_before"), "disabled");
        assert_enabled(&c, "state_running");
        assert!(
            check(&c, "ops").starts_with("sky_"),
            "ops name {:?} is not scx_sky's",
            check(&c, "ops")
        );
        // A second instance refused, naming the first, and took nothing of it.
        assert_eq!(check(&c, "second_exit"), "1");
        assert_eq!(check(&c, "second_named_ops"), "1");
        assert_eq!(check(&c, "first_still_controlled"), "yes");
        // A stopped daemon leaves neither its control socket nor its stats one.
        assert_eq!(check(&c, "control_left"), "0");
        assert_eq!(check(&c, "stats_left"), "0");
        // SIGKILL: the kernel unregisters the scheduler by itself and a new
        // daemon attaches.
        assert_eq!(check(&c, "state_after_sigkill"), "disabled");
        assert_enabled(&c, "state_reattached");
        assert_eq!(check(&c, "state_after"), "disabled");
        // Restart path: the CPU that was offline at start came online in an
        // unknown cache domain, BPF asked for a reload, and the daemon did it.
        assert_enabled(&c, "state_after_restart");
        assert_eq!(check(&c, "cpu3_online"), "1");
        assert_eq!(check(&c, "attaches"), "2", "the daemon did not reload");
        assert!(
            out.contains("restarting at the kernel's request"),
            "no restart logged"
        );
        // --monitor waited for the scheduler, printed while it ran, waited
        // again when it stopped and printed again once it was back.
        assert_eq!(check(&c, "monitor_alive"), "yes");
        assert!(check(&c, "monitor_waits").parse::<u32>().unwrap_or(0) >= 2);
        assert!(check(&c, "monitor_lines_first").parse::<u32>().unwrap_or(0) >= 1);
        assert!(check(&c, "monitor_lines_again").parse::<u32>().unwrap_or(0) >= 1);
        let reasons = check(&c, "disable_reasons");
        assert!(
            reasons.contains("unregistered-from-BPF"),
            "the reload was not BPF's request: {reasons}"
        );
        assert_clean_exit(&c);
    });
}

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn sky1_workload_stays_on_its_last_cpus_without_idling() {
    on_a_quiet_host(|| {
        // SKY-1's set-up: 8 processes on 4 CPUs (two cache domains of an SMT pair).
        let out = run_scenario_clocked("sky1", "", "2x1x2", GuestClock::Instructions);
        let c = checks(&out);
        assert_clean_exit(&c);
        let stats = report::one_line(&out, "stats total:").unwrap();
        // Eight processes that never sleep on four CPUs for 6 s of guest
        // time: slices and ticks, not the host's speed, set how often
        // they are dispatched (a slice is at most 5 ms: 4 800 at least).
        at_least(
            "dispatches",
            stat(&stats, "dispatches"),
            1000.0,
            Basis::Property,
            format_args!("too little scheduling to judge: {stats:?}"),
        );
        at_least(
            "last_cpu_share_pct",
            stat(&stats, "last_cpu_share"),
            90.0,
            Basis::Property,
            format_args!("runs on the task's last CPU: {stats:?}"),
        );
        assert_eq!(
            stat(&stats, "idle_with_waiters"),
            0.0,
            "a CPU went idle while a task it could run waited past the bound"
        );
        assert_eq!(
            stat(&stats, "late_runs"),
            0.0,
            "a task waited in scx_sky's queues past starve_ms plus a slice"
        );
        // The kernel's own counters agree that tasks stayed put, and that no
        // wait came near the bound.
        let work = report::one_line(&out, "result workload=cache-loop").unwrap();
        assert_eq!(stat(&work, "procs"), 8.0);
        Promise::of(&out, &out).judge(
            "wait_max",
            stat(&work, "wait_max_us") / 1000.0,
            SKY1_WAIT_TICKS,
            format_args!("{work:?}"),
        );
        at_least(
            "kernel_same_cpu_share",
            1.0 - stat(&work, "migrations") / stat(&work, "timeslices"),
            0.85,
            Basis::Property,
            format_args!("kernel counters, 1 - migrations/timeslices: {work:?}"),
        );
    });
}

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn ten_thousand_thread_burst_is_survived() {
    on_a_quiet_host(|| {
        let out = run_part(&boots::BURST);
        let c = checks(&out);
        let burst = report::one_line(&out, "result workload=burst").unwrap();
        assert_eq!(stat(&burst, "threads"), 10_000.0);
        assert_enabled(&c, "state_after_burst");
        assert_clean_exit(&c);
    });
}

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn cpu_hotplug_under_load_is_handled_in_place() {
    on_a_quiet_host(|| {
        let out = run_part(&boots::HOTPLUG);
        let c = checks(&out);
        for cpu in [3, 5] {
            assert_eq!(
                check(&c, &format!("offline_cpu{cpu}")),
                "0",
                "cpu{cpu} did not go offline"
            );
            assert_eq!(
                check(&c, &format!("online_cpu{cpu}")),
                "1",
                "cpu{cpu} did not come back"
            );
        }
        assert_enabled(&c, "state_after_hotplug");
        assert_clean_exit(&c);
        let stats = report::one_line(&out, "stats total:").unwrap();
        assert!(
            stat(&stats, "hotplug_events") >= 4.0,
            "BPF saw too few hotplug events: {stats:?}"
        );
        // In place: no restart, so exactly one load.
        assert_eq!(
            out.matches("scx_sky attached").count(),
            1,
            "the scheduler was restarted"
        );
    });
}

/// The share of a hinted task's run time (the kernel's, since the task
/// took its name: the workload's `run_ms`) that BPF must charge to its
/// class. A hint BPF applies itself charges all of it, whatever the
/// host's speed; 20 processes of 20 ms, gone before the daemon's next
/// look (every second), are charged their class only because BPF matches
/// the name hint itself: with a glob BPF cannot apply (daemon only: `sh
/// ./classes.sh 'cpu-matmu?=memory-bound'`) they got 0.11-0.28 s of some
/// 1.7 s. The share passes 1: BPF charges the class everything from the
/// name to the exit, by the clock from running to stopping, where
/// `run_ms` is the kernel's count from the first round to the report;
/// the difference weighs most for a 20 ms process. Eight runs
/// (docs/vm-bounds.md): the 3 s tasks 1.01-1.07, the 20 ms processes
/// 2.2-4.7.
const HINTED_CHARGED_SHARE: f64 = 0.9;

/// The most of the same share charged to a class no hint names (before
/// a switch brings the hint, after one takes it away).
const UNHINTED_CHARGED_SHARE: f64 = 0.1;

/// Hints reach BPF: a PM writer and two compute tasks classed by name
/// for 3 s, 20 short processes named at start and gone before the
/// daemon's next look, and after a switch to a policy with hints and a
/// gang rule of its own, 20 more; back on sky1, nothing of it holds.
#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn class_hints_reach_bpf() {
    on_a_quiet_host(|| {
        let out = run_part(&boots::CLASSES);
        let c = checks(&out);
        assert_clean_exit(&c);
        assert_enabled(&c, "state_after_load");
        let stats = report::one_line(&out, "stats total:").unwrap();
        let ns = |key: &str| stat(&stats, key);
        let run_ns = |workload: &str| -> f64 {
            report::lines_with(&out, &format!("result workload={workload} "))
                .iter()
                .map(|r| stat(r, "run_ms") * 1e6)
                .sum()
        };
        let charged = |name: &str, class_ns: f64, ran_ns: f64, bound: f64, hinted: bool| {
            assert!(ran_ns > 0.0, "{name}: no run time to charge: {stats:?}");
            let (figure, share) = (format!("{name}_charged_share"), class_ns / ran_ns);
            let context = format!("{class_ns} ns of {ran_ns} ns: {stats:?}");
            if hinted {
                at_least(&figure, share, bound, Basis::Property, context);
            } else {
                at_most(&figure, share, bound, Basis::Property, context);
            }
        };
        charged(
            "pm_writer",
            ns("ran_ns_pm_writer"),
            run_ns("pm-write"),
            HINTED_CHARGED_SHARE,
            true,
        );
        // Two compute tasks.
        assert_eq!(
            report::lines_with(&out, "result workload=compute ").len(),
            2
        );
        charged(
            "compute",
            ns("ran_ns_compute"),
            run_ns("compute"),
            HINTED_CHARGED_SHARE,
            true,
        );
        let check_ns = |key: &str| stat(&c, key);
        charged(
            "short_matmul",
            check_ns("matmul_mb_ns"),
            check_ns("matmul_run_ms") * 1e6,
            HINTED_CHARGED_SHARE,
            true,
        );
        assert!(ns("ran_ns_unknown") > 0.0, "{stats:?}");
        // Every PM-writer nanosecond is filed by what its sibling ran: five
        // runs filed 96-100 % (beside compute or beside idle, as placement
        // fell: nothing is paired in this scenario).
        let beside: f64 = ["compute", "pm_writer", "idle", "other"]
            .iter()
            .map(|k| ns(&format!("pm_beside_{k}_ns")))
            .sum();
        at_least(
            "pm_writer_filed_share",
            beside / ns("ran_ns_pm_writer"),
            0.9,
            Basis::Property,
            format_args!("PM-writer time filed by sibling: {stats:?}"),
        );
        at_most(
            "pm_writer_filed_share_max",
            beside / ns("ran_ns_pm_writer"),
            1.02,
            Basis::Property,
            format_args!("PM-writer time filed by sibling: {stats:?}"),
        );
        // Some stats line saw the three long-lived classed tasks.
        assert!(
            out.contains("classes: compute=2 pm-writer=1"),
            "no stats line counted the classed tasks"
        );
        // A switch to a policy with its own name hint and gang rule: BPF
        // applies the hint at once, the daemon classes and gangs by the new
        // rules; back on sky1 nothing of it is left. (Before the fix, only
        // the start policy's hints held.)
        assert_eq!(check(&c, "switch_exit"), "0");
        assert_eq!(check(&c, "back_exit"), "0");
        for (phase, hinted) in [("before_switch", false), ("hinted", true), ("back", false)] {
            charged(
                &format!("{phase}_matadd"),
                check_ns(&format!("{phase}_mb_ns")),
                check_ns(&format!("{phase}_run_ms")) * 1e6,
                if hinted {
                    HINTED_CHARGED_SHARE
                } else {
                    UNHINTED_CHARGED_SHARE
                },
                hinted,
            );
        }
        assert_eq!(check(&c, "hinted_rule_gangs"), "1", "the rule's gang");
        assert_ne!(check(&c, "hinted_census"), "0", "the daemon's census");
        assert_eq!(check(&c, "back_rule_gangs"), "0");
        assert_enabled(&c, "state_after_switches");
    });
}

/// Unprivileged users steer nothing of root's (tests/vm/trust.sh): two
/// users' spaces of one name are two gangs, and a member's label naming
/// root's process or another user's is shown unproven and gangs neither.
/// (Before the daemon asked the kernel for proof, the labels were listed
/// as members and the victims ganged with alice's space; the spaces were
/// one gang, keyed by name.)
#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn unprivileged_labels_steer_nothing() {
    on_a_quiet_host(|| {
        let out = run_part(&boots::TRUST);
        let c = checks(&out);
        assert_clean_exit(&c);
        assert_eq!(check(&c, "create_exit_alice"), "0");
        assert_eq!(check(&c, "create_exit_bob"), "0");
        assert!(
            out.contains("result workload=relabel id=3")
                && out.contains("result workload=relabel id=4"),
            "the forged labels were not written"
        );
        assert_eq!(
            check(&c, "settled"),
            "yes",
            "the labels and gangs were never all listed (see the polls)"
        );
        for (key, why) in [
            ("unproven_root", "root's process listed as a member"),
            ("unproven_bob", "bob's process listed as alice's member"),
            ("alice_gangs", "alice's space is not one gang"),
            ("bob_gangs", "bob's space is not a gang of its own"),
        ] {
            assert_eq!(check(&c, key), "1", "{why}");
        }
        assert_eq!(check(&c, "root_victim_ganged"), "no");
        assert_eq!(check(&c, "bob_victim_ganged"), "no");
        assert_enabled(&c, "state_after_trust");
    });
}

/// Full class and gang maps (tests/vm/maps.sh: maps sized 64 and 8,
/// overflowed by 120 classed threads and 12 gangs): no ejection, a line
/// when a map fills and one when it has room again, and afterwards new
/// threads are classed and new gangs homed.
#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn full_class_and_gang_maps_are_survived_and_recovered_from() {
    on_a_quiet_host(|| {
        let out = run_part(&boots::MAPS);
        let c = checks(&out);
        assert_clean_exit(&c);
        assert_enabled(&c, "state_when_full");
        assert_enabled(&c, "state_after");
        // Told when a map fills and when it has room again, not on every
        // refresh while it is full (4-8 refreshes here); the overload may
        // fill it twice as its threads come and go (one CI run: 2 and 2).
        for map in ["class", "homes"] {
            let full: u32 = check(&c, &format!("{map}_full_lines")).parse().unwrap_or(0);
            let room: u32 = check(&c, &format!("{map}_room_lines")).parse().unwrap_or(0);
            assert!((1..=3).contains(&full), "{map}: told full {full} times");
            assert_eq!(room, full, "{map}: every time full, told of room again");
        }
        // 20 burner threads.
        let compute: u32 = check(&c, "compute_after").parse().unwrap_or(0);
        assert!(
            compute >= 20,
            "{compute} threads classed after the maps had room"
        );
        assert!(check(&c, "homed_after").parse::<u32>().unwrap_or(0) >= 1);
    });
}

/// The scan VM test's bounds, each a figure of the scanning run against
/// one of the baseline's in the same boot (the same daemon with nothing to
/// scan). Under TCG both runs move with the host's speed together; a scan
/// that held up an answer or the exit (a pass lists 10 000 threads in
/// 40-60 ms of CPU) shows as the ratio, not as milliseconds.
/// - The statistics round trips' median and longest (40 of them) against
///   the baseline's. Five runs of the old form, scanning / baseline: the
///   longest 42.6-54.7 / 35.5-61.0 ms (medians 12.1-13.1 in both). As
///   ratios, 26 runs (docs/vm-bounds.md): the median 0.71-1.33, the
///   longest 0.56-2.63.
/// - SIGTERM to the daemon's detach against the baseline's SIGTERM to
///   sched_ext disabled, which holds its own detach and the kernel's
///   moving every task back (some 95 ms of the 10 000 idle threads, alike
///   in both runs). Against the baseline's detach alone (4-25 ms, one
///   sample a run, a few ticks of TCG jitter) the ratio ran 0.44-2.56 in
///   fifteen runs and 4.44 in the sixteenth (a baseline of 4.1 ms);
///   against the disable, 0.033-0.112 in ten runs and 0.185 in that one.
///
/// A scan on the daemon's run loop, as before its feeds worker (a median
/// of 370 ms, a detach of 386 ms), is 20-30 times the baseline's round
/// trips and about 4 times its disable.
const SCAN_STATS_P50_RATIO: f64 = 2.0;
const SCAN_STATS_MAX_RATIO: f64 = 4.0;
const SCAN_DETACH_VS_DISABLE: f64 = 1.0;

/// The daemon answers while it has much to scan (tests/vm/scan.sh: 10 000
/// idle threads listed with their cgroups as often as the worker's budget
/// allows, 10 000 registry entries), as soon as with nothing to scan (the
/// baseline, same boot): statistics requests and SIGTERM do not wait for
/// the scan, which runs on the feeds worker.
#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn stats_and_sigterm_are_answered_while_scanning() {
    on_a_quiet_host(|| {
        let out = run_part(&boots::SCAN);
        let c = checks(&out);
        assert_eq!(check(&c, "idle_threads"), "10001");
        for run in ["baseline", "scanning"] {
            assert_enabled(&c, &format!("state_before_term_{run}"));
            assert_no_fault(
                &c,
                &format!("sky_exit_{run}"),
                &format!("scx_sky did not exit cleanly ({run})"),
            );
        }
        assert_no_fault(&c, "dmesg_errors", "dmesg reports scheduler errors");
        let line = |what: &str, run: &str| {
            report::one_line(&out, &format!("result run={run} workload={what}")).unwrap()
        };
        let (stats, base_stats) = (
            line("stats-latency", "scanning"),
            line("stats-latency", "baseline"),
        );
        let (term, base_term) = (
            line("term-latency", "scanning"),
            line("term-latency", "baseline"),
        );
        let context = format!("scanning {stats:?} {term:?}, baseline {base_stats:?} {base_term:?}");
        assert_eq!(stat(&stats, "requests"), 40.0, "{stats:?}");
        for (figure, key, bound) in [
            ("stats_p50", "p50_ms", SCAN_STATS_P50_RATIO),
            ("stats_max", "max_ms", SCAN_STATS_MAX_RATIO),
        ] {
            at_most(
                &format!("{figure}_vs_baseline"),
                stat(&stats, key) / stat(&base_stats, key),
                bound,
                Basis::SameBoot,
                &context,
            );
        }
        at_most(
            "detach_vs_baseline_disable",
            stat(&term, "detached_ms") / stat(&base_term, "disabled_ms"),
            SCAN_DETACH_VS_DISABLE,
            Basis::SameBoot,
            &context,
        );
        assert!(
            out.contains("shared-space registry: entries not read"),
            "the registry's caps were not said"
        );
    });
}

/// Shared-cache gangs as the tracepoint observer sees them (tests/vm/
/// gangs.sh on 2 sockets x 2 cores x 2 threads, two cache domains of 4
/// CPUs: memory-bound gangs of 3 threads and 2 compute tasks, the compute
/// tasks started first, every process restarted about every 2 s, 5 in a
/// row): `all_share`, of the time two or more of a gang's threads ran, the
/// share in which all ran in one domain (`all_share_min`: the worst gang),
/// and `dirty_share`, the share of domain time a domain ran two gangs at
/// once. scx_sky with a class hint (TCG, kernel 7.3.4), on a quiet host:
/// - two gangs, each one process: all_share 0.985-1.000, all_share_min
///   0.971-1.000, dirty 0.001-0.012 in six runs (EEVDF 0.025 and 0.432).
///   Bounds: the targets, >= 0.95 and <= 0.05;
/// - two gangs, each two processes of a shared space (`scx_sky pvas run`;
///   its members are a gang by default), six runs: all_share 0.968-0.988,
///   all_share_min 0.966-0.978, dirty 0.003-0.017. Bounds: 0.93, 0.90 and
///   0.05, below the worst run;
/// - four gangs of one process (more gangs than domains: both domains are
///   Dirty in any placement): with the latency path, all_share 0.840-0.931
///   and all_share_min 0.722-0.895 in seven runs (partners never apply to
///   these one-process gangs; the latency path costs this form its shares,
///   docs/vm-bounds.md); the longest wait of a gang or compute thread
///   64-152 ms (scx_sky's bound of starve_ms + slice + tick, 59 ms, plus
///   TCG's reschedule IPIs, up to 98 ms). Bounds 0.80, 0.65 and 250 ms (a
///   starving task waits seconds: the bound still tells).
///
/// In every run BPF counted at most 3.6 % of the gangs' run time away
/// from home (bound 10 %). The runs, with the ablations: docs/vm-bounds.md.
const GANG_BOUNDS: [(&str, f64, f64, f64); 3] = [
    ("process", 0.95, 0.95, 0.05),
    ("space", 0.93, 0.90, 0.05),
    ("four", 0.80, 0.65, 1.0),
];
/// The four-gang form's longest wait, in ticks past the promise (59 ms
/// then): 64-152 ms, up to 24 ticks past it.
const GANG_WAIT_TICKS: f64 = 48.0;

/// Runs tests/vm/gangs.sh as `part` says; checks the scx_sky run's
/// observer line against the bounds of `form` and returns the whole
/// output and the part after the line that starts the scx_sky run.
fn gang_scenario(part: &Part, form: &str) -> (String, String) {
    let (_, all_min, worst_min, dirty_max) = GANG_BOUNDS
        .iter()
        .find(|(f, ..)| *f == form)
        .expect("bounds for the form");
    let out = run_part(part);
    let c = checks(&out);
    assert_clean_exit(&c);
    assert!(!c.contains_key("trace_failed"), "an observer run failed");
    assert_enabled(&c, "state_after_sky");
    assert_eq!(check(&c, "gangs_cli_exit"), "0", "scx_sky gangs failed");
    let sky_part = out
        .split_once("run scheduler=sky")
        .expect("the scenario ran scx_sky")
        .1
        .to_string();
    assert!(
        sky_part.contains("gangs: domain 0 (4 CPUs)"),
        "scx_sky gangs showed no domain"
    );
    let line = report::one_line(&sky_part, "result observer=trace gangs ")
        .expect("the observer's gangs line for scx_sky");
    eprintln!("sky: {line:?}");
    // Five rounds of 2 s of guest time: the gangs run 10 s at any speed.
    at_least(
        "span_ms",
        stat(&line, "span_ms"),
        5000.0,
        Basis::Property,
        format_args!("{line:?}"),
    );
    at_least(
        "all_share",
        stat(&line, "all_share"),
        *all_min,
        Basis::Property,
        format_args!("{form}: {line:?}"),
    );
    at_least(
        "all_share_min",
        stat(&line, "all_share_min"),
        *worst_min,
        Basis::Property,
        format_args!("{form}: {line:?}"),
    );
    at_most(
        "dirty_share",
        stat(&line, "dirty_share"),
        *dirty_max,
        Basis::Property,
        format_args!("{form}: {line:?}"),
    );
    // BPF counted the gangs' run time, nearly all of it at home.
    let t = report::one_line(&sky_part, "stats total:").expect("a stats total line");
    let home = stat(&t, "gang_home_ns");
    assert!(home > 0.0, "no gang time at home: {t:?}");
    at_most(
        "away_vs_home",
        stat(&t, "gang_away_ns") / home,
        0.1,
        Basis::Property,
        format_args!("{t:?}"),
    );
    (out, sky_part)
}

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn gangs_keep_each_memory_bound_gang_in_one_clean_domain() {
    on_a_quiet_host(|| {
        // scx_sky alone: EEVDF's figures (GANG_BOUNDS) come from the
        // scenario's default, `eevdf sky`, which the test does not judge.
        let (_, sky) = gang_scenario(&boots::GANGS_PROCESS, "process");
        // BPF homed the new gangs itself, at exec (5 rounds x 2 gangs). The
        // daemon can still win a window of about a millisecond, between exec
        // setting the name and the exec tracepoint: seven runs counted
        // 10, 10, 10, 10, 11, 10 and 9 (when the claim waited for the first
        // placement: 2, 4, 4, 6, 7, 9). Closing it (a claim at task_rename,
        // before the name is visible) is open work.
        let t = report::one_line(&sky, "stats total:").unwrap();
        at_least(
            "gangs_homed_at_exec",
            stat(&t, "gang_provisional"),
            8.0,
            Basis::Property,
            format_args!("of 10 gangs started: {t:?}"),
        );
    });
}

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn gangs_keep_a_shared_spaces_member_processes_together() {
    on_a_quiet_host(|| {
        gang_scenario(&boots::GANGS_SPACE, "space");
    });
}

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn with_more_gangs_than_domains_gangs_stay_whole_and_nothing_starves() {
    on_a_quiet_host(|| {
        let (out, sky) = gang_scenario(&boots::GANGS_FOUR, "four");
        let promise = Promise::of(&sky, &out);
        let groups = report::lines_with(&sky, "result observer=trace ");
        for name in ["mb-a", "mb-b", "mb-c", "mb-d", "cpu-idiv"] {
            let g = trace_group(&groups, name);
            promise.judge(
                &format!("wait_max[{name}]"),
                stat(g, "max_wait_us") / 1000.0,
                GANG_WAIT_TICKS,
                format_args!("{g:?}"),
            );
        }
    });
}

/// PMU plumbing with software clocks standing in for cycles and
/// instructions (tests/vm/pmu.sh; the VM has no PMU): counts reach the
/// classifier, which classes an unhinted busy task compute from them
/// alone, and BPF charges that task's run time as compute; a hinted PM
/// writer stays a PM writer; the counts recorded with --record-counters
/// replay to the same class. BPF's per-class run time is held against the
/// run time the kernel counted for each workload since it was named
/// (`run_ms`), not against an absolute figure: how much a task runs in 3 s
/// of five busy tasks on four vCPUs depends on the host (the landing CI
/// once gave the PM writer under 2 s). Five runs, two with
/// two host processes spinning beside the VM: the PM writer was charged
/// 1.01-1.09 times what it ran (its exit is charged too), compute 4.6-6.6
/// times what cpu-idiv ran (every busy task, kernel threads and the gang
/// included, measures a CPI of 1 here). Without counts reaching BPF
/// compute gets next to nothing (nothing else is hinted compute). Bounds:
/// 0.9 and 0.5.
const COMPUTE_CHARGED_SHARE: f64 = 0.5;
const PM_WRITER_CHARGED_SHARE: f64 = 0.9;

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn pmu_counts_reach_the_classifier_and_classes_reach_bpf() {
    on_a_quiet_host(|| {
        let out = run_part(&boots::PMU);
        let c = checks(&out);
        assert_clean_exit(&c);
        assert_enabled(&c, "state_after_software");
        assert_enabled(&c, "state_after_auto");
        assert!(
            out.contains("PMU (software): counting cycles instructions llc-misses on 4 CPUs"),
            "the software counters were not opened"
        );
        // The compute thread by its id (the replay's `final  cpu-idiv/TID`):
        // its first period may be counted before it renames itself from
        // sky-work to cpu-idiv, and the class line names it as it was then.
        let tid = out
            .lines()
            .find_map(|l| l.strip_prefix("final  cpu-idiv/"))
            .and_then(|rest| rest.split_whitespace().next())
            .expect("the replay names no cpu-idiv thread");
        let measured = out
            .lines()
            .find(|l| {
                l.contains(&format!("class: task {tid} ("))
                    && l.contains("measured unknown -> compute:")
            })
            .expect("the classifier never classed the compute task from its counts");
        // Both clocks count nanoseconds over the same intervals.
        assert!(
            measured.contains("cpi=1.0") || measured.contains("cpi=0.9"),
            "{measured}"
        );
        let totals = report::lines_with(&out, "stats total:");
        // A total per scx_sky run, and per instance of the reload.
        assert_eq!(totals.len(), 4, "a stats total line per scx_sky instance");
        // CPU 3 came online after the start, then went down and came back: its
        // counters were opened each time, so no read errors while a task ran
        // there (at least 3 stats lines). The first instance opens them only
        // if its loop comes round before the reload BPF asks for: in one CI
        // run perf_event_open still said ENODEV for the CPU just listed
        // online, and the reload came first (the reload opens them anyway).
        let opened: u32 = check(&c, "pmu_opened_cpu3").parse().unwrap_or(0);
        assert!((1..=2).contains(&opened), "opened on CPU 3 {opened} times");
        // A stats line a second of guest time, over a 3 s task.
        at_least(
            "pmu_lines_after_online",
            stat(&c, "pmu_lines_after_online"),
            3.0,
            Basis::Property,
            "stats lines while a task ran on CPU 3",
        );
        assert_eq!(check(&c, "pmu_errors_after_online"), "0");
        let secs = |key: &str| stat(&totals[0], key) / 1e9;
        let ran = |workload: &str| {
            let line = report::one_line(&out, &format!("result workload={workload} "))
                .unwrap_or_else(|e| panic!("no result line of {workload}: {e}"));
            stat(&line, "run_ms") / 1000.0
        };
        let (idiv, writer) = (ran("compute"), ran("pm-write"));
        eprintln!(
        "pmu: cpu-idiv ran {idiv} s, compute charged {:.3} s; the PM writer ran {writer} s, charged {:.3} s",
        secs("ran_ns_compute"),
        secs("ran_ns_pm_writer")
    );
        // Busy tasks of 3 s (a fifth of four CPUs each at the least): run
        // time in guest time, whatever the host's speed.
        for (name, ran) in [("cpu_idiv", idiv), ("pm_writer", writer)] {
            at_least(
                &format!("{name}_run_s"),
                ran,
                0.5,
                Basis::Property,
                "too little run to judge",
            );
        }
        at_least(
            "compute_charged_share",
            secs("ran_ns_compute") / idiv,
            COMPUTE_CHARGED_SHARE,
            Basis::Property,
            format_args!("cpu-idiv ran {idiv} s: {:?}", totals[0]),
        );
        at_least(
            "pm_writer_charged_share",
            secs("ran_ns_pm_writer") / writer,
            PM_WRITER_CHARGED_SHARE,
            Basis::Property,
            format_args!("the PM writer ran {writer} s: {:?}", totals[0]),
        );
        assert!(stat(&totals[0], "pmu_charges") > 0.0, "{:?}", totals[0]);
        // Page faults stand in for LLC misses: cache pressure was measured.
        assert!(out.contains("cache pressure measured: LLC misses x"));
        assert!(
            stat(&totals[0], "measured_fill_bytes") > 0.0,
            "{:?}",
            totals[0]
        );
        assert_eq!(stat(&totals[0], "pmu_read_errors"), 0.0, "{:?}", totals[0]);
        // The gang's counts reached the CPI test (one cache domain here: every
        // sample is All share), which found no difference to call it
        // memory-bound on.
        let gang = out
            .lines()
            .find(|l| l.starts_with("gangs: gang "))
            .expect("scx_sky gangs showed the gang");
        assert!(gang.contains("not memory-bound (CPI test: "), "{gang}");
        let samples: u32 = gang
            .split("CPI test: ")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        at_least(
            "gang_cpi_samples",
            f64::from(samples),
            5.0,
            Basis::Property,
            format_args!("the gang's CPI was sampled, a period a second: {gang}"),
        );
        // The recorded counts replay to the same class.
        assert_eq!(check(&c, "replay_exit"), "0", "the record did not replay");
        at_least(
            "recorded_rows",
            stat(&c, "recorded_rows"),
            20.0,
            Basis::Property,
            "rows of counts recorded",
        );
        assert_eq!(check(&c, "replay_idiv"), "compute");
        // `--pmu auto` in a VM without a PMU: one plain line, hints still work.
        assert!(
            out.contains("no usable PMU (cannot count cycles"),
            "no line said the VM has no PMU"
        );
        assert_eq!(stat(&totals[1], "pmu_charges"), 0.0, "{:?}", totals[1]);
    });
}

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn policies_switch_at_runtime_without_a_reload() {
    on_a_quiet_host(|| {
        let out = run_part(&boots::SWITCH);
        let c = checks(&out);
        assert_clean_exit(&c);
        for p in ["sky1-strict", "vtime", "sky1"] {
            assert_eq!(check(&c, &format!("now_{p}")), p, "policy set {p}");
        }
        assert_eq!(check(&c, "generations_moved"), "3");
        // A malformed policy file: refused with the field named, nothing changed.
        assert_ne!(check(&c, "bad_exit"), "0");
        assert_eq!(check(&c, "bad_names_field"), "1");
        assert_eq!(check(&c, "after_bad"), "sky1");
        // Not root: refused, and told why.
        assert_ne!(check(&c, "nobody_exit"), "0");
        assert_eq!(check(&c, "nobody_told"), "1");
        // The same user through D-Bus, with no system bus to reach.
        assert_ne!(check(&c, "nobody_bus_exit"), "0");
        assert_eq!(check(&c, "nobody_bus_told"), "1");
        // Bad clients on the socket get errors, and the scheduler runs on.
        let abuse = report::one_line(&out, "result workload=control-abuse").unwrap();
        for case in ["garbage", "silent", "halfclosed", "unknown"] {
            assert_eq!(
                abuse.get(case).map(String::as_str),
                Some("refused"),
                "{abuse:?}"
            );
        }
        let oversized = abuse.get("oversized").cloned().unwrap_or_default();
        assert!(
            oversized == "refused" || oversized.starts_with("closed:"),
            "{abuse:?}"
        );
        assert_eq!(check(&c, "after_abuse"), "sky1");
        // SIGHUP re-applies the start policy as a new generation.
        assert_eq!(
            check(&c, "sighup_policy"),
            "sky1",
            "SIGHUP not acted on within 15 s"
        );
        assert_eq!(check(&c, "sighup_moved"), "1");
        // Statistics through the scx_stats socket.
        assert!(
            check(&c, "meta_fields").parse::<usize>().unwrap_or(0) >= 20,
            "stats_meta described too few statistics"
        );
        assert_eq!(check(&c, "json_policy"), "sky1");
        assert_eq!(
            check(&c, "json_generation"),
            check(&c, "control_generation")
        );
        let json_dispatches: f64 = check(&c, "json_dispatches").parse().unwrap_or(0.0);
        assert!(json_dispatches > 0.0, "the JSON sample counted no dispatch");
        assert_eq!(check(&c, "om_last"), "#_EOF");
        assert_eq!(check(&c, "om_dispatches"), "1");
        // `scx_sky --monitor 1` until its first line.
        assert!(
            check(&c, "monitor_lines").parse::<u32>().unwrap_or(0) >= 1,
            "--monitor printed no line"
        );
        // scx_sky top as text: 24 lines with the policy, topology and load
        // (the compute tasks with the class the scheduler gives them and their
        // wait p99 from its histograms);
        // a non-root user gets the screen with the reason, not a failure.
        assert_eq!(check(&c, "top_exit"), "0");
        assert_eq!(check(&c, "top_lines"), "24");
        for part in [
            "top_policy",
            "top_topology",
            "top_tasks",
            "top_classes",
            "top_p99",
        ] {
            assert_eq!(check(&c, part), "1", "{part}");
        }
        assert_eq!(check(&c, "top_nobody_exit"), "0");
        assert_eq!(check(&c, "top_nobody_told"), "1");
        // scx_sky top driven through a terminal: `p` switched the running
        // scheduler to the next preset, the screen showed it, `q` quit and
        // left the terminal restored.
        assert_eq!(check(&c, "drive_exit"), "0");
        let drive = report::one_line(&out, "result workload=tui-drive").unwrap();
        for (field, want) in [("exited", "true"), ("status", "0"), ("restored", "true")] {
            assert_eq!(
                drive.get(field).map(String::as_str),
                Some(want),
                "{drive:?}"
            );
        }
        assert_eq!(drive.get("steps_done"), drive.get("steps"), "{drive:?}");
        assert_eq!(check(&c, "drive_running"), "sky1-strict");
        // The storm as fast as the socket answers: none refused, at least
        // a window of them, and every answer a switch applied (a new
        // generation). How many a second is the host's speed: a
        // benchmark's figure, kept in docs/results.md.
        let storm = report::one_line(&out, "result workload=policy-storm").unwrap();
        // The benchmark's figure, in the log of every run (docs/results.md).
        if let Some(line) = out.lines().find(|l| l.contains("workload=policy-storm")) {
            judge::emit(&format!("sky-vm: benchmark {}", line.trim()));
        }
        assert_eq!(stat(&storm, "refused"), 0.0, "{storm:?}");
        let switches = stat(&storm, "switches");
        assert!(switches >= stat(&storm, "window"), "{storm:?}");
        assert_eq!(
            stat(&c, "storm_generations"),
            switches,
            "switches answered against generations moved: {storm:?}"
        );
        assert_enabled(&c, "state_after_storm");
        // One enable for the whole run, and no disable but the final one.
        assert_eq!(check(&c, "enabled_lines"), "1");
        assert_eq!(check(&c, "disable_reasons"), "unregistered-from-user-space");
        // Every load process finished and reported.
        assert_eq!(check(&c, "load_results"), check(&c, "load_expected"));
        let total = report::one_line(&out, "stats total:").unwrap();
        // The sample read mid-run is part of the scheduler's own totals.
        assert!(json_dispatches <= stat(&total, "dispatches"), "{total:?}");
        assert!(stat(&total, "generation") >= switches, "{total:?}");
    });
}

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn hostile_load_with_hotplug_never_stalls() {
    on_a_quiet_host(|| {
        let out = run_part(&boots::HOSTILE);
        let c = checks(&out);
        assert_eq!(check(&c, "load_exit"), "0", "the hostile load failed");
        assert_enabled(&c, "state_after_hostile");
        assert_clean_exit(&c);
        let kinds = report::lines_with(&out, "result workload=hostile kind=");
        assert_eq!(kinds.len(), 7, "a kind of hostile thread is missing");
        for k in &kinds {
            assert!(
                stat(k, "min_progress") > 0.0,
                "a thread made no progress: {k:?}"
            );
        }
        assert_eq!(
            check(&c, "trace_exit"),
            "0",
            "the tracepoint observer failed or lost events"
        );
        let groups = report::lines_with(&out, "result observer=trace ");
        let promise = Promise::of(&out, &out);
        for name in HOSTILE_GROUPS {
            let g = trace_group(&groups, name);
            promise.judge(
                &format!("wait_max[{name}]"),
                stat(g, "max_clear_wait_us") / 1000.0,
                HOSTILE_WAIT_TICKS,
                format_args!("a {name} thread, no CPU going off- or online: {g:?}"),
            );
            promise.judge(
                &format!("wait_max_hotplug[{name}]"),
                stat(g, "max_wait_us") / 1000.0,
                HOSTILE_HOTPLUG_WAIT_TICKS,
                format_args!("a {name} thread, across a CPU going off- or online: {g:?}"),
            );
        }
        let total = report::one_line(&out, "result observer=trace total").unwrap();
        promise.judge(
            "open_wait",
            stat(&total, "open_max_us") / 1000.0,
            HOSTILE_HOTPLUG_WAIT_TICKS,
            format_args!("a task still waiting when tracing stopped: {total:?}"),
        );
    });
}

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn nice_weights_hold_and_every_preset_is_healthy() {
    on_a_quiet_host(|| {
        let out = run_part(&boots::FAIRNESS);
        let c = checks(&out);
        assert_no_fault(&c, "dmesg_errors", "dmesg reports errors");
        // A pair's CPU share against what its weights say.
        let share_vs_weights = |figure: &str, who: &str, line: &report::Fields| {
            let (got, want) = (stat(line, "share_ratio"), stat(line, "weight_ratio"));
            at_most(
                figure,
                (got / want - 1.0).abs(),
                SHARE_VS_WEIGHTS_OFF,
                Basis::Property,
                format_args!("{who} got {got:.2}x the CPU, weights say {want:.2}x: {line:?}"),
            );
        };
        let share = report::one_line(&out, "result workload=share").unwrap();
        share_vs_weights("nice_share_vs_weights_off", "nice 0 vs 5", &share);
        // The plain spinner's mean wait between runs, beside one that
        // renices itself every millisecond and beside one that does not.
        let neighbour_wait = |pair: &str| {
            let line = report::one_line(&out, &format!("result pair={pair} workload=share"))
                .unwrap_or_else(|e| panic!("the {pair} pair: {e:#}"));
            let waits = line.get("wait_per_run_us").cloned().unwrap_or_default();
            let wait: f64 = waits
                .split(',')
                .nth(1)
                .and_then(|w| w.parse().ok())
                .unwrap_or_else(|| panic!("no second wait_per_run_us in {line:?}"));
            (wait, line)
        };
        let (plain, plain_line) = neighbour_wait("plain");
        let (reniced, reniced_line) = neighbour_wait("reniced");
        // The renicing spinner still gets what its two weights say: a
        // scheduler that starved it would shorten its neighbour's waits.
        share_vs_weights(
            "reniced_share_vs_weights_off",
            "the renicing spinner vs its neighbour",
            &reniced_line,
        );
        at_most(
            "renice_neighbour_wait_vs_plain",
            reniced / plain.max(1.0),
            RENICE_WAIT_RATIO,
            Basis::SameBoot,
            format_args!(
                "beside a spinner renicing itself every ms its neighbour waited {reniced} us \
                 between runs, {plain} us beside a plain one: {reniced_line:?} {plain_line:?}"
            ),
        );
        let promises = Promise::all(&out, &out);
        let policies = ["sky1", "sky1-strict", "vtime"];
        // One start for the shares, then one per preset.
        assert_eq!(promises.len(), 1 + policies.len(), "{promises:?}");
        for (policy, promise) in policies.iter().zip(&promises[1..]) {
            assert_enabled(&c, &format!("state_after_{policy}"));
            let run = report::lines_with(&out, &format!("result policy={policy} "));
            assert_eq!(run.len(), 1, "{policy} printed no result");
            assert!(stat(&run[0], "passes") > 0.0, "{policy}: no work done");
            promise.judge(
                &format!("wait_max[{policy}]"),
                stat(&run[0], "wait_max_us") / 1000.0,
                FAIRNESS_WAIT_TICKS,
                format_args!("{policy}: {:?}", run[0]),
            );
        }
    });
}

/// The crash tests `pvas_queue_survives_crashes_on_dax` runs in the VM by
/// default: every kill point between payload, flush, fence and publish
/// (96 kills; 9-13 s in the VM) and senders killed mid-copy
/// of 8 MiB messages (4-5 s); the whole test took 34-52 s. The thousand
/// random kills took 120 and 166 s there (3 s natively): they run only
/// with SKY_DAX_ALL_CRASH_TESTS=1.
const DAX_CRASH_TESTS: [&str; 2] = [
    "kills_between_persist_steps_lose_and_repeat_nothing",
    "receivers_survive_senders_killed_mid_transfer",
];
const DAX_SLOW_CRASH_TEST: &str = "a_thousand_random_kills_keep_the_queue_whole";

/// sky-pvas on real DAX (issue 9, item 10): the qemu NVDIMM made an fsdax
/// namespace with Debian's ndctl, ext4 mounted with -o dax, a space there
/// mapped with MAP_SYNC and persisting by cache-line flushes and a fence
/// (not msync), and the crash tests passing with their spaces on it.
#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn pvas_queue_survives_crashes_on_dax() {
    on_a_quiet_host(|| {
        let mut tests = DAX_CRASH_TESTS.to_vec();
        if std::env::var_os("SKY_DAX_ALL_CRASH_TESTS").is_some_and(|v| v == "1") {
            tests.push(DAX_SLOW_CRASH_TEST);
        }
        let cfg = VmConfig {
            topology: "1x2x2".parse().unwrap(),
            timeout: Duration::from_secs(if tests.len() > 2 { 900 } else { 420 }),
            pmem_mb: Some(512),
            extra_binaries: xtask::pvas::crash_test_binaries()
                .unwrap_or_else(|e| panic!("building the crash tests: {e:#}")),
            ..VmConfig::default()
        };
        let out = vm::run(&cfg, &format!("sh ./pvas-dax.sh {}", tests.join(" ")))
            .unwrap_or_else(|e| panic!("scenario pvas-dax could not run: {e:#}"));
        let c = checks(&out.output);
        let tail = || vm::tail(&out.output, 40);
        assert_eq!(check(&c, "pmem_namespace"), "fsdax", "{}", tail());
        assert_eq!(check(&c, "pmem_mount"), "dax", "{}", tail());
        for t in &tests {
            assert_eq!(
                check(&c, &format!("crash_{t}")),
                "0",
                "crash test {t} failed on the DAX mount:\n{}",
                tail()
            );
        }
        assert_eq!(
            check(&c, "persist"),
            "flush+fence",
            "a space on the DAX mount does not persist by flush+fence"
        );
        assert_eq!(
            check(&c, "map_sync"),
            "yes",
            "the kernel shows no MAP_SYNC mapping (VmFlags sf) for the space"
        );
        assert_eq!(out.status, 0, "pvas-dax exited {}:\n{}", out.status, tail());
    });
}

/// The smoke (load, sky1's placement, a clean exit) in the oldest Debian
/// kernel with sched_ext: the other VM tests boot the newest, so scx_sky
/// keeps loading on every kernel in between (`cargo xtask matrix --all`
/// boots each series).
#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn the_oldest_kernel_with_sched_ext_runs_the_smoke() {
    on_a_quiet_host(|| {
        let kernels = matrix::choose(&matrix::Which::Oldest)
            .unwrap_or_else(|e| panic!("no oldest kernel: {e:#}"));
        let cfg = VmConfig {
            topology: "2x1x2".parse().unwrap(),
            timeout: Duration::from_secs(600),
            ..VmConfig::default()
        };
        let results = matrix::run(&kernels, &cfg);
        matrix::print_table(&results);
        assert_eq!(results.len(), 1);
        assert!(results[0].passed(), "{:?}", results[0]);
    });
}
