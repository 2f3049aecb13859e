//! `cargo xtask install` into a staging tree, then the installed tree
//! used as a user would: the installed binary's help, version, policies
//! (found in the installed share/ by name), topology and statistics list;
//! the completion scripts parsed by their shells; the man pages; the
//! service unit checked by `systemd-analyze verify`; the bus policy read
//! by a dbus-daemon (root owns org.scx.Sky, others call it) and the polkit
//! action's id; a C program built against the installed header, library
//! and pkg-config file.

use std::path::{Path, PathBuf};
use std::process::Command;
use xtask::install::{self, Layout};
use xtask::private_bus::{am_root, PrivateBus};

/// Runs `cmd`; its stdout, or a panic with everything it said.
fn ok(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The bash completion, under the prefix.
const BASH: &str = "share/bash-completion/completions/scx_sky";

/// The staged file `rel` (under the prefix) holds each of `needles`.
fn staged_holds(layout: &Layout, rel: &str, needles: &[&str]) {
    let text = std::fs::read_to_string(layout.staged(rel))
        .unwrap_or_else(|e| panic!("{rel} was not staged: {e}"));
    for needle in needles {
        assert!(text.contains(needle), "{rel} lacks {needle:?}:\n{text}");
    }
}

fn staged(stage: &Path) -> (Layout, PathBuf) {
    let layout = Layout::new(Some(stage.to_path_buf()), "/usr".into()).unwrap();
    let bin = layout.staged("bin/scx_sky");
    (layout, bin)
}

#[test]
fn the_installed_tree_runs_and_its_files_check() {
    install::build().unwrap();
    let stage = tempfile::tempdir().unwrap();
    let (layout, scx_sky) = staged(stage.path());
    let written = install::install(&layout).unwrap();
    for rel in [
        "bin/scx_sky",
        "bin/sky-pvas-remote",
        "share/scx_sky/policies/sky1.toml",
        "lib/libsky_pvas.so",
        "include/sky_pvas.h",
        "lib/pkgconfig/sky_pvas.pc",
        "share/man/man8/scx_sky.8",
        "share/man/man8/scx_sky-policy-set.8",
        "lib/systemd/system/scx_sky.service",
        "share/doc/scx_sky/LICENSE",
        "share/dbus-1/system.d/org.scx.Sky.conf",
        "share/polkit-1/actions/org.scx.sky.policy",
    ] {
        assert!(written.contains(&layout.staged(rel)), "{rel} not installed");
    }
    assert!(written.contains(&stage.path().join("etc/default/scx_sky")));

    // The binary, from the staged tree.
    let help = ok(Command::new(&scx_sky).arg("--help"));
    assert!(
        help.contains("--policy") && help.contains("--help-stats"),
        "{help}"
    );
    let version = ok(Command::new(&scx_sky).arg("-V"));
    assert!(
        version.starts_with(&format!("scx_sky {}", env!("CARGO_PKG_VERSION")))
            && version.contains("-linux-"),
        "{version}"
    );
    // Presets by name from share/ beside bin/, shadowing the built-ins.
    let policies = ok(Command::new(&scx_sky).arg("policies"));
    let share = layout.staged("share/scx_sky/policies");
    let share = share.canonicalize().unwrap();
    for name in ["sky1", "sky1-strict", "vtime"] {
        let line = policies
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} not listed:\n{policies}"));
        assert!(
            line.ends_with(&format!("({}/{name}.toml)", share.display())),
            "{line}"
        );
    }
    let topology = ok(Command::new(&scx_sky).arg("topology"));
    assert!(
        topology.contains("llc 0: cpus") && topology.contains("decay thresholds"),
        "{topology}"
    );
    let stats = ok(Command::new(&scx_sky).arg("--help-stats"));
    assert!(
        stats.lines().any(|l| l.starts_with("generation ")),
        "{stats}"
    );
    assert!(stats.lines().count() > 20, "{stats}");

    // Completions: each script parses in its shell (where installed), and
    // names the subcommands.
    ok(Command::new("bash").arg("-n").arg(layout.staged(BASH)));
    staged_holds(&layout, BASH, &["complete -F _scx_sky", "policies"]);
    staged_holds(
        &layout,
        "share/zsh/site-functions/_scx_sky",
        &["#compdef scx_sky"],
    );
    staged_holds(
        &layout,
        "share/fish/vendor_completions.d/scx_sky.fish",
        &["complete -c scx_sky"],
    );

    // Man pages: roff with the name and section.
    staged_holds(
        &layout,
        "share/man/man8/scx_sky.8",
        &[".TH scx_sky 8", "completions", "\\-\\-help\\-stats"],
    );

    // The unit, as installed and checked by systemd with the staged
    // binary in ExecStart (verify wants the program to exist).
    staged_holds(
        &layout,
        "lib/systemd/system/scx_sky.service",
        &["ExecStart=/usr/bin/scx_sky $SCX_SKY_FLAGS"],
    );
    let check_dir = tempfile::tempdir().unwrap();
    let checked = check_dir.path().join("scx_sky.service");
    std::fs::write(&checked, install::unit(&layout.staged("bin")).unwrap()).unwrap();
    ok(Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&checked));
    // And verify can fail: a unit naming a missing program is refused.
    let broken = check_dir.path().join("scx_sky-broken.service");
    std::fs::write(&broken, install::unit(Path::new("/nonexistent")).unwrap()).unwrap();
    let refused = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&broken)
        .output()
        .unwrap();
    assert!(
        !refused.status.success(),
        "verify accepted a missing ExecStart"
    );

    // The polkit action is the one the service asks about.
    staged_holds(
        &layout,
        "share/polkit-1/actions/org.scx.sky.policy",
        &[&format!("<action id=\"{}\">", sky_dbus::ACTION_SET)],
    );
    bus_policy_holds(&layout.staged("share/dbus-1/system.d"));

    // libsky_pvas: a C member built with pkg-config's flags for the staged
    // tree links, and runs far enough to say it has no space to attach.
    let pkg = |args: &[&str]| {
        ok(Command::new("pkg-config")
            .env("PKG_CONFIG_PATH", layout.staged("lib/pkgconfig"))
            .env("PKG_CONFIG_SYSROOT_DIR", stage.path())
            .args(args)
            .arg("sky_pvas"))
    };
    let flags: Vec<String> = pkg(&["--cflags", "--libs"])
        .split_whitespace()
        .map(str::to_string)
        .collect();
    assert!(flags
        .iter()
        .any(|f| f.starts_with("-I") && f.contains(&*stage.path().to_string_lossy())));
    let peer = check_dir.path().join("peer");
    ok(Command::new("cc")
        .args(["-std=c11", "-Wall", "-Werror"])
        .arg(xtask::paths::workspace_root().join("userspace/pvas/tests/c/peer.c"))
        .args(&flags)
        .arg("-o")
        .arg(&peer));
    let run = Command::new(&peer)
        .env("LD_LIBRARY_PATH", layout.staged("lib"))
        .env_remove("SKY_PVAS_PATH")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&run.stdout);
    assert!(
        !run.status.success()
            && said.contains("c error: attach:")
            && said.contains("SKY_PVAS_PATH"),
        "{said}{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

#[test]
fn an_existing_options_file_is_kept() {
    install::build().unwrap();
    let stage = tempfile::tempdir().unwrap();
    let (layout, _) = staged(stage.path());
    let options = stage.path().join("etc/default/scx_sky");
    std::fs::create_dir_all(options.parent().unwrap()).unwrap();
    std::fs::write(&options, "SCX_SKY_FLAGS=\"-p vtime\"\n").unwrap();
    let written = install::install(&layout).unwrap();
    assert!(!written.contains(&options));
    assert_eq!(
        std::fs::read_to_string(&options).unwrap(),
        "SCX_SKY_FLAGS=\"-p vtime\"\n"
    );
}

/// A dbus-daemon reading the installed policy (and nothing else that
/// allows): root may own org.scx.Sky and anyone may call it; a user who is
/// not root may not own it.
fn bus_policy_holds(system_d: &Path) {
    // system.conf's defaults: deny owning and calling, allow replies.
    let bus = PrivateBus::start(
        "system",
        &format!(
            "<policy context=\"default\">\n<allow user=\"*\"/>\n\
             <deny own=\"*\"/>\n<deny send_type=\"method_call\"/>\n\
             <allow send_type=\"signal\"/>\n\
             <allow send_requested_reply=\"true\" send_type=\"method_return\"/>\n\
             <allow send_requested_reply=\"true\" send_type=\"error\"/>\n\
             <allow receive_type=\"method_call\"/>\n<allow receive_type=\"method_return\"/>\n\
             <allow receive_type=\"error\"/>\n<allow receive_type=\"signal\"/>\n\
             <allow send_destination=\"org.freedesktop.DBus\"/>\n</policy>\n\
             <includedir>{}</includedir>",
            system_d.display()
        ),
    );
    let handler: sky_dbus::Handler = std::sync::Arc::new(|_| Ok("policy=sky1 generation=1".into()));
    let served = sky_dbus::serve(&sky_dbus::Bus::Address(bus.address().to_string()), handler);
    if am_root() {
        let _served = served.expect("root may own org.scx.Sky");
        // Anyone may call it: nobody reads the policy.
        let said = bus.call_unprivileged(
            sky_dbus::BUS_NAME,
            sky_dbus::OBJECT_PATH,
            &format!("{}.Get", sky_dbus::INTERFACE),
            &[],
        );
        assert_eq!(said.as_deref(), Ok("policy=sky1 generation=1"), "{said:?}");
    } else {
        let e = served
            .err()
            .expect("a user who is not root owned org.scx.Sky");
        assert!(format!("{e:#}").contains("org.scx.Sky"), "{e:#}");
    }
}
