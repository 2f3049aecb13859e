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
