//! The persistent queue between machines (seed 002) and its test bed in
//! the VM: soft-RoCE (rxe) on both ends of a veth pair between two network
//! namespaces, rdma-core 56 and perftest (xtask/src/guest_tools.rs,
//! tests/vm/lib.sh `rdma_pair`, tests/vm/rdma-bed.sh): the verbs, the
//! queue push and pull, its resume after a kill of either side and a link
//! cut, its area on Device DAX, a hostile peer refused, perftest as the
//! ceiling. Boots a
//! VM, so #[ignore]d in a plain `cargo test`; `cargo xtask test` runs it.

// Shared by the VM test binaries; each uses part of it.
#[allow(dead_code)]
mod scenario;

use scenario::{check, checks, run_scenario_configured, scenario_config};
use xtask::report;
use xtask::vm::VmConfig;

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn the_queue_between_machines_moves_every_message_once_and_resumes_after_a_kill() {
    let cfg = VmConfig {
        rdma: true,
        // An emulated NVDIMM: a Device DAX namespace for the queue's area.
        pmem_mb: Some(64),
        extra_binaries: [
            xtask::pvas::hostile_binary()
                .unwrap_or_else(|e| panic!("building the hostile peer: {e:#}")),
            xtask::pvas::c_remote_binary().unwrap_or_else(|e| panic!("building the C end: {e:#}")),
        ]
        .concat(),
        ..scenario_config("1x2x1")
    };
    let out = run_scenario_configured("rdma-bed", "65536 200", &cfg);
    let c = checks(&out);
    assert_eq!(check(&c, "rdma_devices"), "2", "an rxe device on each end");
    // The queue's verbs through sky-rdma: the device can FLUSH (both
    // placements) and ATOMIC WRITE; messages of 1 B to 52 KiB written,
    // flushed and read back whole; the done marker placed atomically; a
    // region that grants only remote writes refuses a read; FLUSH to
    // persistence refused on DRAM (it needs Device DAX).
    assert_eq!(check(&c, "verbs_server_exit"), "0");
    assert_eq!(check(&c, "verbs_client_exit"), "0");
    let client = report::one_line(&out, "result workload=rdma-verbs side=client ").unwrap();
    let server = report::one_line(&out, "result workload=rdma-verbs side=server ").unwrap();
    for cap in ["flush_global", "flush_persistent", "atomic_write"] {
        assert_eq!(
            client.get(cap).map(String::as_str),
            Some("yes"),
            "{client:?}"
        );
    }
    assert_eq!(client["read_back_wrong"], "0", "{client:?}");
    assert_eq!(server["bytes_wrong"], "0", "{server:?}");
    assert!(server["bytes_checked"].parse::<u64>().unwrap() > 50_000);
    assert!(
        client["write_only_read"].contains("remote_access_error"),
        "a read of a write-only region: {client:?}"
    );
    assert!(
        server["persistent_on_dram"].starts_with("refused:"),
        "{server:?}"
    );
    // The persistent queue between machines (sky-pvas-remote), push and
    // pull: 200 messages of 1 B to the entry size, every byte checked by
    // the receiver, none lost, none twice.
    // Then again with counts placed by tagged plain WRITEs (the fallback
    // for devices without ATOMIC WRITE), which the receiver alone asked
    // for and both sides use, and 4 messages per enqueue call.
    for mode in ["push", "pull", "push-plain", "pull-plain"] {
        for side in ["send", "recv"] {
            assert_eq!(
                check(&c, &format!("queue_{mode}_{side}_exit")),
                "0",
                "{mode} {side}"
            );
            let want = match mode.ends_with("-plain") {
                true => "TaggedWrite",
                false => "AtomicWrite",
            };
            let placed =
                format!("result workload=rdma-queue mode={mode} side={side} counters={want}\n");
            assert!(out.contains(&placed), "{mode} {side}: not {want}");
            let done = report::one_line(
                &out,
                &format!("result workload=rdma-queue mode={mode} side={side} epoch="),
            )
            .unwrap();
            let key = if side == "send" {
                "enqueued"
            } else {
                "consumed"
            };
            assert_eq!(done[key], "200", "{mode} {side}: {done:?}");
        }
    }
    // The C API against the Rust tool, on the same wire: a C push sender
    // and a C pull receiver, 120 messages each, every byte checked by
    // whichever end receives.
    for mode in ["push", "pull"] {
        for side in ["send", "recv"] {
            assert_eq!(
                check(&c, &format!("c_{mode}_{side}_exit")),
                "0",
                "C API, {mode} {side}"
            );
        }
        let (c_line, rust_line) = match mode {
            "push" => ("c ok sent first=1 last=120", "ok took first=1 last=120"),
            _ => ("c ok took first=1 last=120", "ok done epoch="),
        };
        for want in [c_line, rust_line] {
            assert!(
                out.contains(&format!("c_api {mode}: {want}")),
                "C API, {mode}: no {want:?}"
            );
        }
    }
    // Resume, push and pull: the receiver leaves after 80 messages, the
    // sender is killed (SIGKILL) mid-stream; restarted as new processes,
    // the sender learns that 80 to 96 messages (a ring of 16 past the
    // consumed count) are in for good and sends the rest, the receiver
    // takes 81 to 200 in order, each once, every byte checked.
    for mode in ["push", "pull"] {
        for key in ["first_recv_exit", "send_exit", "recv_exit"] {
            assert_eq!(
                check(&c, &format!("resume_{mode}_{key}")),
                "0",
                "{mode} {key}"
            );
        }
        let send = report::one_line(
            &out,
            &format!("result workload=rdma-resume mode={mode} side=send "),
        )
        .unwrap();
        if mode == "push" {
            // rxe serves FLUSH, and the receiver grants it on its area.
            assert_eq!(send["durability"], "FlushGlobal", "{send:?}");
        }
        let enqueued: u64 = send["enqueued"].parse().unwrap();
        assert!((80..=96).contains(&enqueued), "{mode}: {send:?}");
        let recv = report::one_line(
            &out,
            &format!("result workload=rdma-resume mode={mode} side=recv "),
        )
        .unwrap();
        assert_eq!(
            (recv["first"].as_str(), recv["last"].as_str()),
            ("81", "200"),
            "{mode}"
        );
    }
    // The area on persistent memory RDMA may pin (Device DAX): the push
    // sender FLUSHes to persistence; 100 messages, then new processes go
    // on from what the namespace holds (101 to 150); pull from there too.
    assert_eq!(check(&c, "pmem_namespace"), "devdax");
    for key in [
        "devdax_push1_send_exit",
        "devdax_push1_recv_exit",
        "devdax_push2_send_exit",
        "devdax_push2_recv_exit",
        "devdax_pull_send_exit",
        "devdax_pull_recv_exit",
    ] {
        assert_eq!(check(&c, key), "0", "{key}");
    }
    let round = |r: &str, side: &str| {
        report::one_line(
            &out,
            &format!("result workload=rdma-devdax round={r} side={side} "),
        )
        .unwrap_or_else(|e| panic!("devdax {r} {side}: {e}"))
    };
    let first = round("1", "send");
    assert_eq!(first["durability"], "FlushPersistent", "{first:?}");
    assert_eq!(first["medium"], "Pmem", "{first:?}");
    assert_eq!(round("2", "send")["enqueued"], "100");
    let again = round("2", "recv");
    assert_eq!(
        (again["first"].as_str(), again["last"].as_str()),
        ("101", "150")
    );
    assert_eq!(round("pull", "send")["medium"], "Pmem");
    // The receiver killed inside a dequeue (SIGKILL; message 80 applied,
    // not yet consumed for good) and started again, push and pull; the link cut for 1 s (push) and 12 s (pull): both sides
    // open the queue again from their durable state; the receiver's record of what it
    // applied lists 1 to 240, each once.
    for mode in ["push", "pull"] {
        for how in ["kill", "link"] {
            for key in ["send_exit", "recv_exit"] {
                assert_eq!(
                    check(&c, &format!("survive_{mode}_{how}_{key}")),
                    "0",
                    "{mode} {how} {key}"
                );
            }
            assert_eq!(
                check(&c, &format!("survive_{mode}_{how}_applied_once")),
                "1",
                "{mode} {how}: not every message applied once"
            );
        }
        // A killed receiver breaks the sender's connection: it reopened.
        let reopened = |how: &str| -> u32 {
            check(&c, &format!("survive_{mode}_{how}_reopened"))
                .parse()
                .unwrap()
        };
        assert!(reopened("kill") >= 1, "{mode}: the sender never reopened");
        // Killed inside the dequeue of message 80, after applying it: it
        // comes again, and the application's record skips it.
        assert_eq!(
            check(&c, &format!("survive_{mode}_kill_again")),
            "1",
            "{mode}: the message in flight at the kill did not come again once"
        );
        // Pull's link is cut for 12 s, past every work request's 10 s
        // limit: the connection broke and was made again.
        if mode == "pull" {
            assert!(reopened("link") >= 1, "a 12 s cut never broke the link");
        }
    }
    // A hostile peer: garbage into a push receiver's ring and counter,
    // impossible consumed counts to a pull sender: refused with the reason
    // (the honest end exits 1 naming the broken protocol); a read of a
    // push receiver's ring and a write into a pull sender's: refused by
    // the NIC (remote access error); then an honest peer finishes the
    // queue and every message is applied once.
    for mode in ["push", "pull"] {
        let k = |key: &str| check(&c, &format!("hostile_{mode}_{key}"));
        assert_eq!(k("scribble_exit"), "0", "{mode}: the hostile peer failed");
        assert_eq!(k("victim_exit"), "1", "{mode}: garbage was not refused");
        assert_eq!(k("refused"), "1", "{mode}: refused without the reason");
        assert_eq!(k("reach_exit"), "0", "{mode}: reached beyond its grant");
        assert_eq!(k("reach_refused"), "1", "{mode}");
        assert_eq!(k("honest_exit"), "0", "{mode}");
        assert_eq!(k("victim_again_exit"), "0", "{mode}");
        assert_eq!(k("applied_once"), "1", "{mode}: something was lost");
    }
    for test in ["ib_write_bw", "ib_read_bw", "ib_write_lat"] {
        assert_eq!(check(&c, &format!("{test}_exit")), "0", "{test} failed");
    }
    for test in ["ib_write_bw", "ib_read_bw"] {
        let line = report::one_line(&out, &format!("result workload=perftest test={test} "))
            .unwrap_or_else(|e| panic!("no {test} result: {e}"));
        let mb: f64 = line
            .get("mb_per_s")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        assert!(mb > 0.0, "{test} moved nothing: {line:?}");
    }
    let lat = report::one_line(&out, "result workload=perftest test=ib_write_lat ").unwrap();
    let us: f64 = lat
        .get("typical_us")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    assert!(us > 0.0, "ib_write_lat measured nothing: {lat:?}");
}
