//! Overload in the VM (tests/vm/overload.sh): after churn (hostile load
//! and CPU hotplug), 2 000 sleepers on 4 CPUs, far more runnable threads
//! than `starve_ms` can serve. scx_sky must survive it (the watchdog at
//! SCX_TIMEOUT_MS ejects a scheduler that stalls a task that long), serve
//! every thread, and keep the rescue queue a rescue, not the scheduler
//! (bpf/bound.bpf.h, "Overload" in docs/design.md). The sleepers measure
//! themselves, the same under any scheduler. Boots a VM, so #[ignore]d in
//! a plain `cargo test`; `cargo xtask test` runs it.

// Shared by the VM test binaries; each uses part of it.
#[allow(dead_code)]
mod scenario;

use scenario::boots::{self, run_part};
use scenario::{
    assert_clean_exit, assert_enabled, at_least, at_most, check, checks, on_a_quiet_host, stat,
    Basis,
};
use xtask::report;

/// Share of dispatches that were starvation rescues. With the bound held
/// at `starve_ms` under this load, 0.80 (the rescue queue was the
/// scheduler); with the bound following the load, kernel threads first
/// and the latency path stepping aside, 0.258-0.281 in five runs in a row;
/// with no sleeper credit or burst term while the bound has grown (each
/// queue a round), 0.075-0.079 in five runs in a row (TCG, 1x2x2, kernel
/// 7.3.4, quiet host). About twice the worst: a queue order
/// that lets sleepers in ahead again fails it.
const RESCUE_SHARE_MAX: f64 = 0.15;

/// Share of dispatches that ran later than the bound in force plus a
/// slice (`late_runs`): 0.75 with the bound held at `starve_ms`,
/// 0.0083-0.0152 with a sleeper credit, 0.0020-0.0026 in the same five
/// runs without; four times the worst.
const LATE_SHARE_MAX: f64 = 0.01;

/// Loops of the thread that did fewest, as a share of the median
/// thread's (the sleepers' own figure, the same under any scheduler; the
/// runs below made the threads under the load, one by one, not parked and
/// released together as now: docs/vm-bounds.md has the runs of this form):
/// 0.581 and 0.603 in a run with a sleeper credit under overload,
/// 0.718-0.806 over the ten sleeper processes of the same five runs
/// without. A floor under the worst, not a test of the queue order (the
/// rescue share is).
const MIN_THREAD_SHARE: f64 = 0.6;

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn overload_is_served_round_robin_within_a_bound_that_follows_the_load() {
    on_a_quiet_host(|| {
        let out = run_part(&boots::OVERLOAD);
        let c = checks(&out);
        assert_clean_exit(&c);
        assert_eq!(check(&c, "churn_exit"), "0", "the churn load failed");
        assert_enabled(&c, "state_after_sky");
        let sleepers = report::lines_with(&out, "result workload=sleepers ");
        assert_eq!(sleepers.len(), 2, "two sleeper processes reported");
        let mut loops = 0.0;
        for (which, s) in ["first", "second"].iter().zip(&sleepers) {
            eprintln!("sleepers: {s:?}");
            // Every thread finished loops while measured: none was starved.
            assert!(stat(s, "min_thread_loops") >= 1.0, "{s:?}");
            assert!(stat(s, "loops") >= stat(s, "threads"), "{s:?}");
            // ... and shared the CPUs nearly evenly: each queue a round.
            at_least(
                &format!("{which}_min_thread_share"),
                stat(s, "min_share"),
                MIN_THREAD_SHARE,
                Basis::Property,
                format_args!("the least served thread's loops against the median's: {s:?}"),
            );
            loops += stat(s, "loops");
        }
        for which in ["first", "second"] {
            assert_eq!(check(&c, &format!("{which}_sleepers_exit")), "0");
        }
        let t = report::one_line(&out, "stats total:").expect("a stats total line");
        let dispatches = stat(&t, "dispatches");
        // Each loop sleeps, so each is a wakeup the scheduler dispatched:
        // the shares below are of at least that many decisions.
        at_least(
            "dispatches_per_loop",
            dispatches / loops,
            1.0,
            Basis::Property,
            format_args!("{loops} loops: {t:?}"),
        );
        at_most(
            "rescue_share",
            stat(&t, "starvation_rescues") / dispatches,
            RESCUE_SHARE_MAX,
            Basis::Property,
            format_args!("rescues among dispatches (the rescue queue is scheduling?): {t:?}"),
        );
        // The bound grew, and the kernel's own threads (the watchdog's
        // check-in among them) were served ahead of it: without that, the
        // watchdog's kworker waited out the timeout and the kernel ejected
        // scx_sky (bpf/bound.bpf.h, sky_bound_kernel_first).
        assert!(
            stat(&t, "kernel_first") > 0.0,
            "no kernel thread was served first: the bound never grew under this load: {t:?}"
        );
        at_most(
            "late_share",
            stat(&t, "late_runs") / dispatches,
            LATE_SHARE_MAX,
            Basis::Property,
            format_args!("dispatches that ran past the bound in force: {t:?}"),
        );
    });
}
