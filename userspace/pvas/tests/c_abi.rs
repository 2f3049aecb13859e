//! A C program, built against include/sky_pvas.h and libsky_pvas.so, as a
//! member alongside Rust members.

mod common;

use common::*;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn build_c_peer(out_dir: &std::path::Path) -> PathBuf {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let lib_dir = PathBuf::from(env!("CARGO_BIN_EXE_sky-pvas-peer"))
        .parent()
        .unwrap()
        .to_path_buf();
    assert!(
        lib_dir.join("libsky_pvas.so").exists(),
        "{} has no libsky_pvas.so: build the crate (cargo build -p sky-pvas) first",
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

#[test]
fn a_c_member_exchanges_messages_and_drains_a_queue() {
    let s = space("c-abi", 4, 4);
    let exe = build_c_peer(s.dir.path());
    let sizes = strs(&[1, 100, 8192, 8193, 300_000, 1 << 20]);
    let c = Command::new(&exe)
        .args(&sizes)
        .env("SKY_PVAS_PATH", &s.path)
        .env("SKY_PVAS_ID", "2")
        .env("SKY_PVAS_SCRATCH_DIR", s.dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
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
    to_c.finish();
    from_c.finish();
    let queue = peer(
        &s.path,
        1,
        "queue-send",
        &strs(&["push", "2", "100", "64", "4"]),
        &[],
    );
    assert_eq!(queue.finish().last().unwrap(), "ok flushed");
    let out = c.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "C member failed: {text}");
    assert!(
        text.contains("c messages ok") && text.contains("c fork ok") && text.ends_with("c ok\n"),
        "{text}"
    );
}
