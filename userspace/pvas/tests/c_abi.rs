//! A C program, built against include/sky_pvas.h and libsky_pvas.so, as a
//! member alongside Rust members.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn build_c_peer(out_dir: &Path) -> PathBuf {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // The library of this very build is beside this test (target/*/deps):
    // `cargo test` builds it there and does not copy it up to target/*/,
    // where the copy may be from an older `cargo build` (the C member then
    // ran old library code).
    let lib_dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    assert!(
        lib_dir.join("libsky_pvas.so").exists(),
        "{} has no libsky_pvas.so",
        lib_dir.display()
    );
    let exe = out_dir.join("c-peer");
    let status = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Werror", "-O2"])
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c/peer.c"))
        .arg("-L")
        .arg(&lib_dir)
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
        .args(["-lsky_pvas", "-o"])
        .arg(&exe)
        .status()
        .expect("running cc");
    assert!(status.success(), "the C peer did not compile");
    exe
}

/// Rounds of the whole exchange, each with a fresh space and fresh
/// processes (SKY_PVAS_C_ABI_ROUNDS sets another count). Two library races
/// each failed or hung about one round in 50 on a loaded 2-core machine:
/// a queue wait bound to a holder of the sender's ID that was leaving, and
/// a peer snapshot torn by a claim.
const ROUNDS: usize = 500;
/// A round takes ~0.1 s on an idle 2-core machine; past this it hangs.
const ROUND_LIMIT: Duration = Duration::from_secs(60);

#[test]
fn a_c_member_exchanges_messages_and_drains_a_queue_round_after_round() {
    let scratch = tempfile::tempdir().unwrap();
    let exe = build_c_peer(scratch.path());
    let rounds = std::env::var("SKY_PVAS_C_ABI_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(ROUNDS);
    for round in 0..rounds {
        exchange(&exe, round);
    }
}

/// Member 1 (Rust) sends to the C member 2, which sends each message on to
/// member 3 (Rust); a new member 1 then pushes 100 messages through a
/// persistent queue the C member drains; the C member forks member 4.
fn exchange(exe: &Path, round: usize) {
    let s = space(&format!("c-abi-{round}"), 4, 4);
    let sizes = strs(&[1, 100, 8192, 8193, 300_000, 1 << 20]);
    let mut cmd = Command::new(exe);
    cmd.args(&sizes)
        .env("SKY_PVAS_PATH", &s.path)
        .env("SKY_PVAS_ID", "2")
        .env("SKY_PVAS_SCRATCH_DIR", s.dir.path());
    let c = member(cmd);
    let to_c = peer(
        &s.path,
        1,
        "send",
        &[vec!["2".to_string()], sizes.clone()].concat(),
        &[],
    );
    let from_c = peer(
        &s.path,
        3,
        "recv",
        &[vec!["2".to_string()], sizes.clone()].concat(),
        &[],
    );
    // Every member's ending and lines, then the verdict: a failure shows
    // what each member said (one failing usually explains another).
    let mut ended = vec![
        ("member 1 (send)", to_c.wait_within(ROUND_LIMIT)),
        ("member 3 (recv)", from_c.wait_within(ROUND_LIMIT)),
    ];
    let queue = peer(
        &s.path,
        1,
        "queue-send",
        &strs(&["push", "2", "100", "64", "4"]),
        &[],
    );
    ended.push(("member 1 (queue-send)", queue.wait_within(ROUND_LIMIT)));
    ended.push(("C member 2", c.wait_within(ROUND_LIMIT)));
    let all_ok = ended
        .iter()
        .all(|(_, (status, _))| status.is_some_and(|s| s.success()));
    let lines = |who: &str| &ended.iter().find(|(w, _)| *w == who).unwrap().1 .1;
    assert!(
        all_ok
            && lines("member 1 (queue-send)").last().map(String::as_str) == Some("ok flushed")
            && lines("C member 2")
                .iter()
                .any(|l| l.starts_with("c messages ok"))
            && lines("C member 2").iter().any(|l| l == "c fork ok")
            && lines("C member 2").last().map(String::as_str) == Some("c ok"),
        "round {round}:\n{}",
        ended
            .iter()
            .map(|(who, (status, lines))| format!("{who}: {status:?} {lines:?}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
