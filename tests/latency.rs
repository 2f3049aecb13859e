//! The latency path (bpf/burst.bpf.h, bpf/latency.bpf.h) in the VM, judged
//! by the tracepoint observer, the same instrument for EEVDF and scx_sky.
//! Each boots a VM, so they are #[ignore]d in a plain `cargo test`; `cargo
//! xtask test` runs them.

// Shared by the VM test binaries; each uses part of it.
#[allow(dead_code)]
mod scenario;

use scenario::{assert_clean_exit, assert_enabled, checks, on_a_quiet_host, run_scenario, stat};
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
/// same boot: 0.86-2.38 in the five runs.
const WAKES_MIN: f64 = 0.65;

/// The hogs' work rate under sky1 against EEVDF's in the same boot:
/// 0.71-1.09 in the five runs.
const HOG_WORK_MIN: f64 = 0.55;

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
        let out = run_scenario("latency", "2x2x2");
        let c = checks(&out);
        assert_clean_exit(&c);
        assert!(!c.contains_key("trace_failed"), "an observer run failed");
        for sched in ["sky", "sky-nolat"] {
            assert_enabled(&c, &format!("state_after_{sched}"));
        }
        let runs = by_sched(&out, &scheds);
        let (eevdf, sky, nolat) = (&runs[0], &runs[1], &runs[2]);
        for (sched, (w, _)) in scheds.iter().zip(&runs) {
            assert!(
                stat(w, "wakes") >= 1000.0,
                "{sched}: too few ping-pong wakeups to judge: {w:?}"
            );
        }
        let p99 = stat(&sky.0, "wake_p99_us");
        let nolat_p99 = stat(&nolat.0, "wake_p99_us");
        assert!(
            p99 <= ABLATION_P99_SHARE_MAX * nolat_p99,
            "with the latency path off the p99 was {nolat_p99} us, with it {p99} us: \
         the path made wakeups slower"
        );
        let wakes = stat(&sky.0, "wakes") / stat(&eevdf.0, "wakes");
        assert!(
            wakes >= WAKES_MIN,
            "the ping-pong pairs woke {wakes:.2}x as often as under EEVDF"
        );
        let hog = stat(&sky.1, "iterations_per_s") / stat(&eevdf.1, "iterations_per_s");
        assert!(
            hog >= HOG_WORK_MIN,
            "the hogs did {hog:.2}x EEVDF's work under sky1"
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
