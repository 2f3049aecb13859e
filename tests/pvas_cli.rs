//! `scx_sky pvas create | run | ls | destroy` end to end.

use std::process::Command;

fn scx_sky(args: &[&str], registry: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_scx_sky"))
        .args(args)
        .env("SKY_PVAS_REGISTRY", registry)
        .output()
        .expect("running scx_sky")
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn create_run_ls_destroy() {
    let dir = tempfile::Builder::new()
        .prefix("sky-cli")
        .tempdir_in("/dev/shm")
        .unwrap();
    let reg = dir.path().join("registry");
    let d = dir.path().to_str().unwrap();
    let name = format!("cli-{}", std::process::id());

    let o = scx_sky(
        &[
            "pvas",
            "create",
            &name,
            "--members",
            "4",
            "--segment-mb",
            "2",
            "--dir",
            d,
        ],
        &reg,
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("4 members x 2 MiB"), "{}", text(&o));

    // A second create of the same name fails and says why.
    let o = scx_sky(&["pvas", "create", &name, "--dir", d], &reg);
    assert!(!o.status.success());
    assert!(text(&o).contains("exists"), "{}", text(&o));

    // run reserves the ID for the program it becomes.
    let o = scx_sky(
        &[
            "pvas",
            "run",
            &name,
            "--id",
            "3",
            "--dir",
            d,
            "--",
            "sh",
            "-c",
            "echo id=$SKY_PVAS_ID path=$SKY_PVAS_PATH; \
             [ -e /proc/$$/fd/$SKY_PVAS_LOCK_FD ] && echo slot-lock-inherited",
        ],
        &reg,
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("id=3 path=")
            && text(&o).contains(&name)
            && text(&o).contains("slot-lock-inherited"),
        "{}",
        text(&o)
    );

    let o = scx_sky(
        &["pvas", "run", &name, "--id", "9", "--dir", d, "--", "true"],
        &reg,
    );
    assert!(!o.status.success());
    assert!(
        text(&o).contains("member ID 9 outside 1..=4"),
        "{}",
        text(&o)
    );

    let o = scx_sky(&["pvas", "ls"], &reg);
    assert!(
        o.status.success() && text(&o).contains(&name),
        "{}",
        text(&o)
    );

    let o = scx_sky(&["pvas", "destroy", &name, "--dir", d], &reg);
    assert!(o.status.success(), "{}", text(&o));
    let o = scx_sky(&["pvas", "ls"], &reg);
    assert!(
        !text(&o).contains(&name),
        "destroyed space still listed: {}",
        text(&o)
    );
    let o = scx_sky(&["pvas", "destroy", &name, "--dir", d], &reg);
    assert!(
        !o.status.success() && text(&o).contains(&name),
        "{}",
        text(&o)
    );
}

/// One space whose file is refused (others may write it) is a line of its
/// own; the good one is listed in full, and ls succeeds.
#[test]
fn ls_lists_past_a_refused_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("sky-cli-ls")
        .tempdir_in("/dev/shm")
        .unwrap();
    let reg = dir.path().join("registry");
    let d = dir.path().to_str().unwrap();
    let (good, bad) = (
        format!("good-{}", std::process::id()),
        format!("bad-{}", std::process::id()),
    );
    for name in [&good, &bad] {
        let o = scx_sky(
            &[
                "pvas",
                "create",
                name,
                "--members",
                "2",
                "--segment-mb",
                "2",
                "--dir",
                d,
            ],
            &reg,
        );
        assert!(o.status.success(), "{}", text(&o));
    }
    let bad_file = dir.path().join(format!("scx_sky-pvas-{bad}"));
    std::fs::set_permissions(&bad_file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let o = scx_sky(&["pvas", "ls"], &reg);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with(&good) && l.contains("2 members max")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("? ") && l.contains(&bad) && l.contains("0666")),
        "{out}"
    );
}
