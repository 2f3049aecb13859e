//! `scx_sky classify --replay`: the task classifier on counter streams,
//! through the binary as a user runs it (no PMU, no root).

use std::process::Command;

fn classify(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_scx_sky"))
        .arg("classify")
        .args(args)
        .output()
        .expect("running scx_sky");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_shipped_stream_prints_each_change_and_the_final_class() {
    let (ok, out, err) = classify(&["--replay", "phase-change"]);
    assert!(ok, "{err}");
    let changes: Vec<&str> = out.lines().filter(|l| l.starts_with("period")).collect();
    assert_eq!(changes.len(), 3, "{out}");
    assert!(changes[1].contains("12") && changes[1].contains("compute -> pm-writer"));
    assert!(out.contains("final  phases") && out.trim_end().ends_with("compute"));
}

#[test]
fn a_hint_beats_the_counters_and_a_file_replays_like_a_shipped_stream() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.csv");
    std::fs::write(
        &file,
        "period,task,cycles,instructions,llc_misses\n\
         0,w,1000000,900000,10\n1,w,1000000,900000,10\n2,w,1000000,900000,10\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let (ok, out, err) = classify(&["--replay", path]);
    assert!(ok, "{err}");
    assert!(
        out.contains("final  w") && out.trim_end().ends_with("compute"),
        "{out}"
    );
    let (ok, out, err) = classify(&["--replay", path, "--class", "w=pm-writer"]);
    assert!(ok, "{err}");
    assert!(out.contains("pm-writer (hint; counters: compute)"), "{out}");
}

#[test]
fn bad_input_is_refused_with_what_was_wrong() {
    let (ok, _, err) = classify(&["--replay", "no-such-stream"]);
    assert!(!ok && err.contains("shipped streams: compute"), "{err}");
    let (ok, _, err) = classify(&["--replay", "compute", "--class", "x=io"]);
    assert!(!ok && err.contains("unknown class \"io\""), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.csv");
    std::fs::write(&file, "period,task,cycles,instructions\n0,a,1,-2\n").unwrap();
    let (ok, _, err) = classify(&["--replay", file.to_str().unwrap()]);
    assert!(
        !ok && err.contains("line 2") && err.contains("\"instructions\""),
        "{err}"
    );
}
