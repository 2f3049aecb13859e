//! The persistent queue between machines (seed 002) and its test beds in
//! the VM. In one guest (tests/vm/rdma-bed.sh): soft-RoCE (rxe) on both
//! ends of a veth pair between two network namespaces, rdma-core 56 and
//! perftest (xtask/src/guest_tools.rs, tests/vm/lib.sh `rdma_pair`): the
//! verbs, counts by tagged plain WRITEs, the C API, a hostile peer
//! refused, perftest as the ceiling. Between two guests
//! (tests/vm/rdma-nodes.sh, `cargo xtask vm --nodes 2`): push and pull,
//! resume after a kill of either side and a link cut, the area on Device
//! DAX, perftest. Each boots VMs, so they are #[ignore]d in a plain
//! `cargo test`; `cargo xtask test` runs them.

// Shared by the VM test binaries; each uses part of it.
#[allow(dead_code)]
mod scenario;

use scenario::{check, checks, on_a_quiet_host, run_scenario_configured, scenario_config};
use xtask::report;
use xtask::vm::VmConfig;

#[test]
#[ignore = "boots a VM: run with cargo xtask test"]
fn in_one_guest_the_verbs_tagged_counts_and_c_api_work_and_a_hostile_peer_is_refused() {
    on_a_quiet_host(|| {
        let cfg = VmConfig {
            rdma: true,
            extra_binaries: [
                xtask::pvas::hostile_binary()
                    .unwrap_or_else(|e| panic!("building the hostile peer: {e:#}")),
                xtask::pvas::c_remote_binary()
                    .unwrap_or_else(|e| panic!("building the C end: {e:#}")),
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
        // The queue (sky-pvas-remote) with counts placed by tagged plain
        // WRITEs (the fallback for devices without ATOMIC WRITE), which the
        // receiver alone asked for and both sides use: 200 messages of 1 B to
        // the entry size, 4 per enqueue call, every byte checked by the
        // receiver, none lost, none twice.
        for mode in ["push-plain", "pull-plain"] {
            for side in ["send", "recv"] {
                assert_eq!(
                    check(&c, &format!("queue_{mode}_{side}_exit")),
                    "0",
                    "{mode} {side}"
                );
                let placed = format!(
                    "result workload=rdma-queue mode={mode} side={side} counters=TaggedWrite\n"
                );
                assert!(out.contains(&placed), "{mode} {side}: not TaggedWrite");
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
    });
}

/// The same queue between two guests (`cargo xtask vm --nodes 2`): two
/// kernels, each with its own rxe device on one virtio-net link and its
/// own NVDIMM; node 2 receives (listens), node 1 sends
/// (tests/vm/rdma-nodes.sh).
#[test]
#[ignore = "boots two VMs: run with cargo xtask test"]
fn the_queue_between_two_guests_moves_every_message_once_across_their_link() {
    on_a_quiet_host(|| {
        let cfg = VmConfig {
            rdma: true,
            pmem_mb: Some(64),
            timeout: std::time::Duration::from_secs(900),
            ..scenario_config("1x2x1")
        };
        let outs = xtask::nodes::run(&cfg, 2, "sh ./rdma-nodes.sh 65536")
            .unwrap_or_else(|e| panic!("the two nodes did not both finish: {e:#}"));
        for out in &outs {
            eprintln!("sky-vm: {}", out.host);
        }
        let (one, two) = (&outs[0].output, &outs[1].output);
        let (c1, c2) = (checks(one), checks(two));
        assert_eq!(check(&c1, "rdma_node"), "1");
        assert_eq!(check(&c2, "rdma_node"), "2");
        let line = |out: &str, prefix: &str| {
            report::one_line(out, prefix).unwrap_or_else(|e| panic!("{prefix}: {e}"))
        };
        // Push and pull, 200 messages of 1 B to the entry size, every byte
        // checked by node 2's receiver.
        for mode in ["push", "pull"] {
            assert_eq!(
                check(&c1, &format!("queue_{mode}_send_exit")),
                "0",
                "{mode}"
            );
            assert_eq!(
                check(&c2, &format!("queue_{mode}_recv_exit")),
                "0",
                "{mode}"
            );
            let sent = line(
                one,
                &format!("result workload=rdma-queue mode={mode} side=send epoch="),
            );
            assert_eq!(sent["enqueued"], "200", "{mode}: {sent:?}");
            let took = line(
                two,
                &format!("result workload=rdma-queue mode={mode} side=recv epoch="),
            );
            assert_eq!(took["consumed"], "200", "{mode}: {took:?}");
            // Counts placed by ATOMIC WRITE, which rxe serves.
            for (out, side) in [(one, "send"), (two, "recv")] {
                let placed = format!(
                    "result workload=rdma-queue mode={mode} side={side} counters=AtomicWrite\n"
                );
                assert!(out.contains(&placed), "{mode} {side}: not AtomicWrite");
            }
        }
        // Node 2's receiver leaves after 80, node 1's sender is killed; new
        // processes on both go on: 81 to 200 at the receiver, each once.
        for mode in ["push", "pull"] {
            assert_eq!(check(&c2, &format!("resume_{mode}_first_recv_exit")), "0");
            assert_eq!(check(&c2, &format!("resume_{mode}_recv_exit")), "0");
            assert_eq!(check(&c1, &format!("resume_{mode}_send_exit")), "0");
            let send = line(
                one,
                &format!("result workload=rdma-resume mode={mode} side=send "),
            );
            if mode == "push" {
                assert_eq!(send["durability"], "FlushGlobal", "{send:?}");
            }
            let enqueued: u64 = send["enqueued"].parse().unwrap();
            assert!((80..=96).contains(&enqueued), "{mode}: {send:?}");
            let recv = line(
                two,
                &format!("result workload=rdma-resume mode={mode} side=recv "),
            );
            assert_eq!(
                (recv["first"].as_str(), recv["last"].as_str()),
                ("81", "200")
            );
        }
        // The receiver killed inside a dequeue and started again; the link
        // cut for 1 s (push) and 12 s (pull) between the two kernels: 1 to 240
        // applied, each once.
        for mode in ["push", "pull"] {
            for how in ["kill", "link"] {
                let key = |k: &str| format!("survive_{mode}_{how}_{k}");
                assert_eq!(check(&c1, &key("send_exit")), "0", "{mode} {how}");
                assert_eq!(check(&c2, &key("recv_exit")), "0", "{mode} {how}");
                assert_eq!(check(&c2, &key("applied_once")), "1", "{mode} {how}");
            }
            let reopened = |c: &report::Fields, k: &str| -> u32 { check(c, k).parse().unwrap() };
            assert!(
                reopened(&c1, &format!("survive_{mode}_kill_send_reopened")) >= 1,
                "{mode}: the sender never reopened after the receiver's kill"
            );
            assert_eq!(
                check(&c2, &format!("survive_{mode}_kill_again")),
                "1",
                "{mode}"
            );
            if mode == "pull" {
                let both = reopened(&c1, "survive_pull_link_send_reopened")
                    + reopened(&c2, "survive_pull_link_recv_reopened");
                assert!(both >= 1, "a 12 s cut never broke the link");
            }
        }
        // Each node's NVDIMM as Device DAX: node 2's holds the push
        // receiver's area across a restart of both sides, then a pull
        // sender's; node 1's the pull receiver's.
        for (c, node) in [(&c1, 1), (&c2, 2)] {
            assert_eq!(check(c, "pmem_namespace"), "devdax", "node {node}");
        }
        for round in ["1", "2"] {
            assert_eq!(check(&c1, &format!("devdax_push{round}_send_exit")), "0");
            assert_eq!(check(&c2, &format!("devdax_push{round}_recv_exit")), "0");
        }
        assert_eq!(check(&c2, "devdax_pull_send_exit"), "0");
        assert_eq!(check(&c1, "devdax_pull_recv_exit"), "0");
        let first = line(one, "result workload=rdma-devdax round=1 side=send ");
        assert_eq!(first["durability"], "FlushPersistent", "{first:?}");
        assert_eq!(first["medium"], "Pmem", "{first:?}");
        assert_eq!(
            line(one, "result workload=rdma-devdax round=2 side=send ")["enqueued"],
            "100"
        );
        let again = line(two, "result workload=rdma-devdax round=2 side=recv ");
        assert_eq!(
            (again["first"].as_str(), again["last"].as_str()),
            ("101", "150")
        );
        assert_eq!(
            line(two, "result workload=rdma-devdax round=pull side=send ")["medium"],
            "Pmem"
        );
        assert_eq!(
            line(one, "result workload=rdma-devdax round=pull side=recv ")["medium"],
            "Pmem"
        );
        // perftest between the two kernels. A server may fail after it
        // served, on calibrating its clock for its own report (the host's
        // timing, tests/vm/lib.sh `perftest_clock_failed`); the client's
        // exit and report show the exchange done.
        for test in ["ib_write_bw", "ib_read_bw", "ib_write_lat"] {
            assert_eq!(check(&c1, &format!("{test}_exit")), "0", "{test} client");
            let server = check(&c2, &format!("{test}_server_exit"));
            let clock = c2.get(&format!("{test}_server_clock_failed"));
            assert!(
                server == "0" || clock.map(String::as_str) == Some("1"),
                "{test} server: exit {server}, clock failed {clock:?}"
            );
        }
        for test in ["ib_write_bw", "ib_read_bw"] {
            let mb: f64 = line(one, &format!("result workload=perftest test={test} "))["mb_per_s"]
                .parse()
                .unwrap_or(0.0);
            assert!(mb > 0.0, "{test} moved nothing");
        }
        let us: f64 = line(one, "result workload=perftest test=ib_write_lat ")["typical_us"]
            .parse()
            .unwrap_or(0.0);
        assert!(us > 0.0, "ib_write_lat measured nothing");
    });
}
