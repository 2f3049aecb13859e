//! The latency path (bpf/burst.bpf.h, bpf/latency.bpf.h) in the VM, judged
//! by the tracepoint observer, the same instrument for EEVDF and scx_sky.
//! Each boots a VM, so they are #[ignore]d in a plain `cargo test`; `cargo
//! xtask test` runs them.

// Shared by the VM test binaries; each uses part of it.
#[allow(dead_code)]
mod scenario;

use scenario::boots::{self, run_part};
use scenario::{
    assert_clean_exit, assert_enabled, at_least, at_most, checks, on_a_quiet_host, part, stat,
    Basis, Promise,
};
use xtask::report::{self, Fields};

/// Five runs (TCG, 2x2x2, kernel 7.3.4), each one boot, with the hogs
/// running through every round: the
/// ping-pong tasks' wake p99 in ms for EEVDF / sky1 / sky1 with the
/// latency path off (`--latency-burst-us 0`): 19.0 / 24.2 / 39.9,
/// 19.8 / 20.6 / 26.2, 18.7 / 29.4 / 38.1, 19.1 / 38.2 / 35.9,
/// 18.5 / 37.8 / 43.3. With hogs on every CPU, sky1's p99 is no better
/// than EEVDF's and only sometimes better than the ablation's (0.61-1.06
/// of it): a wakee queued behind a hog waits for that CPU's preemption
/// IPI or tick, which TCG delivers late (docs/design.md, "The latency
/// path"). So this test guards against the path making things worse, with
/// margin over the worst run, not for the win it is meant to bring.
const ABLATION_P99_SHARE_MAX: f64 = 1.35;

/// Ping-pong wakeups (so round trips) under sky1 against EEVDF's in the
/// same boot: 0.86-2.38 in the five runs; five more of a later build
/// 1.58-2.92; one fresh-clone CI run on a quiet host 0.60, with the hogs at
/// 0.57 in the same phase (everything in that phase did less: the
/// ablation's phase right after was normal). Bound below that run.
const WAKES_MIN: f64 = 0.5;

/// The hogs' work rate under sky1 against EEVDF's in the same boot:
/// 0.71-1.09 in the five runs, 0.82-0.92 in five more, 0.57 in the CI run
/// above. Bound below that run.
const HOG_WORK_MIN: f64 = 0.45;

/// Each scheduler's ping-pong placement line and hog work, in run order.
fn by_sched(out: &str, scheds: &[&str]) -> Vec<(Fields, Fields)> {
    let wakes = report::lines_with(out, "result observer=trace placement group=pingpong ");
    let hogs = report::lines_with(out, "result workload=burn ");
    assert_eq!(wakes.len(), scheds.len(), "a ping-pong line per scheduler");
    assert_eq!(hogs.len(), scheds.len(), "a burn line per scheduler");
    let all: Vec<_> = wakes.into_iter().zip(hogs).collect();
    for (sched, (w, h)) in scheds.iter().zip(&all) {
        eprintln!(
            "{sched}: wake p50 {} us p90 {} us p99 {} us max {} us, wakes {}, hog work {}/s",
            stat(w, "wake_p50_us"),
            stat(w, "wake_p90_us"),
            stat(w, "wake_p99_us"),
            stat(w, "wake_max_us"),
            stat(w, "wakes"),
            stat(h, "iterations_per_s")
        );
    }
    all
}

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn the_latency_path_shortens_wakeups_beside_hogs() {
    on_a_quiet_host(|| {
        let scheds = ["eevdf", "sky", "sky-nolat"];
        let out = run_part(&boots::LATENCY);
        let c = checks(&out);
        assert_clean_exit(&c);
        assert!(!c.contains_key("trace_failed"), "an observer run failed");
        for sched in ["sky", "sky-nolat"] {
            assert_enabled(&c, &format!("state_after_{sched}"));
        }
        let runs = by_sched(&out, &scheds);
        let (eevdf, sky, nolat) = (&runs[0], &runs[1], &runs[2]);
        // A p99 needs wakes beyond its hundredth: at least 200 of them
        // (the runs had thousands).
        for (sched, (w, _)) in scheds.iter().zip(&runs) {
            at_least(
                &format!("wakes[{sched}]"),
                stat(w, "wakes"),
                200.0,
                Basis::Property,
                format_args!("too few ping-pong wakeups for a p99: {w:?}"),
            );
        }
        let p99 = stat(&sky.0, "wake_p99_us");
        let nolat_p99 = stat(&nolat.0, "wake_p99_us");
        at_most(
            "wake_p99_vs_path_off",
            p99 / nolat_p99,
            ABLATION_P99_SHARE_MAX,
            Basis::SameBoot,
            format_args!(
                "with the latency path off the p99 was {nolat_p99} us, with it {p99} us: \
                 the path made wakeups slower"
            ),
        );
        at_least(
            "wakes_vs_eevdf",
            stat(&sky.0, "wakes") / stat(&eevdf.0, "wakes"),
            WAKES_MIN,
            Basis::SameBoot,
            "the ping-pong pairs' wakeups under sky1 against EEVDF's",
        );
        at_least(
            "hog_work_vs_eevdf",
            stat(&sky.1, "iterations_per_s") / stat(&eevdf.1, "iterations_per_s"),
            HOG_WORK_MIN,
            Basis::SameBoot,
            "the hogs' work under sky1 against EEVDF's",
        );
        // scx_sky's own counters say which decisions did it, and that none
        // were made with the path off.
        let totals = report::lines_with(&out, "stats total:");
        assert_eq!(totals.len(), 2, "a stats total line per scx_sky run");
        assert!(stat(&totals[0], "lat_preempts") > 0.0, "{:?}", totals[0]);
        for key in [
            "short_wakeups",
            "lat_preempts",
            "lat_idle_claims",
            "lat_shared",
            "lat_tick_ends",
            "sync_refused",
            "short_steals",
        ] {
            assert_eq!(stat(&totals[1], key), 0.0, "latency path off: {key}");
        }
    });
}

/// A near-burst task's share of the CPU it shares with three hogs: the
/// issue's bound, its fair share (a quarter) plus 10 %. Five runs: sky1
/// 0.211-0.258, EEVDF in the same boots 0.246-0.263; with
/// `--latency-burst-us 2000` (its bursts well under the limit) 0.236: the
/// rule that a short task sleeps at least as long as it runs holds it
/// back, not the limit alone.
const NEAR_BURST_SHARE_MAX: f64 = 0.25 * 1.10;

/// The longest wait of any task in the near-burst scenario, in ticks past
/// scx_sky's promise (its bound 50 + a slice 5: `Promise`): a tick for a
/// preempted CPU to notice and a TCG kick (20 ms), on a quiet host;
/// stretched by what the host took. Five runs within 80 ms.
const NEAR_BURST_WAIT_TICKS: f64 = 6.0;

/// Group `group`'s CPU time in ms, from the observer's placement lines.
fn run_ms(part: &str, group: &str) -> f64 {
    let line = report::lines_with(
        part,
        &format!("result observer=trace placement group={group} "),
    );
    let fields = line
        .first()
        .unwrap_or_else(|| panic!("the observer saw no {group}"));
    stat(fields, "run_ms")
}

/// A hostile near-burst task (tests/vm/nearburst.sh: it computes 450 us,
/// just under latency_burst_us, and sleeps 10 us, pinned with three hogs
/// to one CPU) gets no more than its fair share + 10 % under scx_sky, every
/// task's longest wait stays within the bound, and scx_sky is not ejected
/// at SCX_TIMEOUT_MS=3000: the latency path does not take it for short
/// (it runs more than half the time between its wakeups).
#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn a_near_burst_task_gets_no_more_than_its_fair_share_beside_hogs() {
    on_a_quiet_host(|| {
        // scx_sky alone: EEVDF's share, 0.246-0.263 in the five runs, comes
        // from the scenario's default, `8 "eevdf sky"`.
        let out = run_part(&boots::NEAR_BURST);
        let c = checks(&out);
        assert_clean_exit(&c);
        assert_enabled(&c, "state_after_sky");
        let p = part(&out, "sky");
        let (near, hogs) = (run_ms(p, "sleeper"), run_ms(p, "burn"));
        at_most(
            "near_burst_cpu_share",
            near / (near + hogs),
            NEAR_BURST_SHARE_MAX,
            Basis::Property,
            format_args!(
                "the near-burst task's share of its CPU (fair: 0.25): {near} ms against the \
                 hogs' {hogs} ms"
            ),
        );
        let promise = Promise::of(p, &out);
        for group in ["sleeper", "burn"] {
            let waits = report::lines_with(p, &format!("result observer=trace group={group} "));
            let w = waits
                .first()
                .unwrap_or_else(|| panic!("no waits of {group}"));
            promise.judge(
                &format!("wait_max[{group}]"),
                stat(w, "max_clear_wait_us") / 1000.0,
                NEAR_BURST_WAIT_TICKS,
                format_args!("{w:?}"),
            );
        }
    });
}
