//! SMT pairing (bpf/smt.bpf.h) in the VM, judged by the tracepoint
//! observer (the same instrument for EEVDF and scx_sky): PM writers beside
//! compute tasks while every task is restarted as a new process, on 2, 4
//! and 4 cores in one and two cache domains. Each boots a VM, so they are
//! #[ignore]d in a plain `cargo test`; `cargo xtask test` runs them.

// Shared by the VM test binaries; each uses part of it.
#[allow(dead_code)]
mod scenario;

use scenario::boots::{self, run_part};
use scenario::{
    assert_clean_exit, assert_enabled, at_least, checks, host_share_floor, on_a_quiet_host,
    run_scenario_with, stat, Basis,
};
use xtask::report::{self, Fields};

/// SMT pairing as the tracepoint observer sees it (tests/vm/smt.sh: one PM
/// writer or compute task per CPU, PM writers started first, every task
/// restarted as a new process each second, ten times): of the PM-writer
/// time beside a task that pairs, the share beside a compute task
/// (`paired`), and of all PM-writer time the share beside compute. The
/// rest of the time the sibling idles between two processes or runs the
/// restart loops and the observer (about 0.1 each, for EEVDF as well).
/// scx_sky with hints (TCG, kernel 7.3.4), on a quiet host:
/// - 1x2x2, eight runs: paired 0.990-0.999, beside compute 0.774-0.914
///   (EEVDF in the same boots: paired 0.08-0.98, by luck of placement);
/// - 2x2x2 (4 PM writers + 4 compute tasks, two cache domains), six runs:
///   paired 0.919-0.966, beside compute 0.698-0.797 (EEVDF 0.43-0.65);
/// - 1x4x2 (4 PM writers + 4 compute tasks on four cores of one domain),
///   five runs: paired 0.947-0.977, beside compute 0.820-0.845 (EEVDF
///   0.628 / 0.523). On another host, where restarting a process takes
///   more of the guest (the sibling idles or runs the restart loop 0.15-0.25
///   of the time, not 0.1), eleven runs, six of this code and five of the
///   code the bound was first set on, alike: paired 0.910-0.960, beside
///   compute 0.681-0.810 (0.681 at a lost share of 0.042, 0.692 at 0.030).
///
/// CI runs scx_sky alone (EEVDF's figures come from runs of the scenario's
/// default, `eevdf sky`, which the tests do not judge). The bounds sit
/// below the worst quiet run, 0.95 / 0.65, 0.90 / 0.62 and 0.90 / 0.64,
/// lowered by the share of the run the host took (`host_share_floor`),
/// which keeps the busy-host runs under them too. The runs:
/// docs/vm-bounds.md.
const SMT_PAIRED_MIN: [(&str, f64, f64); 3] = [
    ("1x2x2", 0.95, 0.65),
    ("2x2x2", 0.90, 0.62),
    ("1x4x2", 0.90, 0.64),
];

/// The observer's `smt` line for each scheduler the scenario ran, in order.
fn smt_shares(out: &str, scheds: &[&str]) -> Vec<Fields> {
    let shares = report::lines_with(out, "result observer=trace smt ");
    assert_eq!(
        shares.len(),
        scheds.len(),
        "expected an smt line for each of {scheds:?}"
    );
    for (sched, share) in scheds.iter().zip(&shares) {
        eprintln!("{sched}: {share:?}");
    }
    shares
}

/// Pairing holds up to `SMT_PAIRED_MIN` for `topology`.
fn assert_paired(topology: &str, sky: &Fields) {
    let (_, paired_min, beside_min) = SMT_PAIRED_MIN
        .iter()
        .find(|(t, _, _)| *t == topology)
        .expect("bounds for the topology");
    at_least(
        "paired",
        stat(sky, "paired"),
        host_share_floor(*paired_min),
        Basis::Property,
        format_args!("{topology}: PM writers beside compute, of their paired time: {sky:?}"),
    );
    at_least(
        "beside_compute",
        stat(sky, "beside_compute"),
        host_share_floor(*beside_min),
        Basis::Property,
        format_args!("{topology}: PM writers beside compute, of their time: {sky:?}"),
    );
}

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn smt_pairing_puts_pm_writers_beside_compute() {
    on_a_quiet_host(|| {
        // Without hints, four processes in a row are enough
        // (`boots::SMT_ONE_CORE_PAIR`): its figures are zeros and a share
        // SKY-1 holds from the first.
        let out = run_part(&boots::SMT_ONE_CORE_PAIR);
        let c = checks(&out);
        assert_clean_exit(&c);
        assert!(!c.contains_key("trace_failed"), "an observer run failed");
        let shares = smt_shares(&out, &["sky", "sky-nohints"]);
        assert_paired("1x2x2", &shares[0]);
        // Without hints (and no PMU in the VM) there are no classes: pairing
        // stays out of the way and SKY-1 runs as before.
        for sched in ["sky", "sky-nohints"] {
            assert_enabled(&c, &format!("state_after_{sched}"));
        }
        let totals = report::lines_with(&out, "stats total:");
        assert_eq!(totals.len(), 2, "a stats total line per scx_sky run");
        // Pairing acted, by placing a task beside its mate's class or by
        // moving one there at a slice end: a run whose tasks were placed
        // paired from the start needs no move (a repeat run: 13
        // placements, no move, paired 1.0).
        assert!(
            stat(&totals[0], "smt_moves") + stat(&totals[0], "smt_placements") > 0.0,
            "{:?}",
            totals[0]
        );
        for key in ["smt_moves", "smt_placements", "ran_ns_pm_writer"] {
            assert_eq!(stat(&totals[1], key), 0.0, "no hints: {key}");
        }
        at_least(
            "no_hints_last_cpu_share_pct",
            stat(&totals[1], "last_cpu_share"),
            80.0,
            Basis::Property,
            format_args!("no hints: SKY-1 kept tasks on their CPUs: {:?}", totals[1]),
        );
    });
}

/// scx_sky alone on `topology` (smt.sh, ten restarts of every task, as
/// `run` runs it): clean, enabled throughout, and paired within
/// `SMT_PAIRED_MIN`.
fn sky_pairs_on(topology: &str, run: impl Fn() -> String) {
    on_a_quiet_host(|| {
        let out = run();
        let c = checks(&out);
        assert_clean_exit(&c);
        assert!(!c.contains_key("trace_failed"), "an observer run failed");
        assert_enabled(&c, "state_after_sky");
        let shares = smt_shares(&out, &["sky"]);
        assert_paired(topology, &shares[0]);
    });
}

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn smt_pairing_holds_on_four_cores_in_two_cache_domains() {
    sky_pairs_on("2x2x2", || run_part(&boots::SMT_TWO_DOMAINS));
}

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn smt_pairing_holds_on_four_cores_of_one_domain() {
    sky_pairs_on("1x4x2", || run_scenario_with("smt", "10 sky", "1x4x2"));
}
