//! A guest whose PID 1 is Debian's systemd (`VmConfig::systemd`), with the
//! system bus, polkitd and the journal, and scx_sky installed into it by
//! `cargo xtask install --prefix /usr` (install.rs): the service runs as
//! a user's machine runs it, from the installed unit, environment file,
//! bus policy and polkit action.
//!
//! Everything comes from this machine's own packages (systemd, dbus,
//! polkitd: scripts/setup.sh), the programs at the paths Debian's units
//! name, with the shared libraries they load. Only the units the test
//! needs are copied: the standard targets and slices, the journal, the
//! bus, polkit, and the VM's own target, which starts the scenario as a
//! service and powers off after it. init.sh hands over to systemd when
//! it finds that target.

use crate::install::{self, Layout};
use anyhow::{Context, Result};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// Programs at their own paths in the guest, as Debian's units name them.
pub const PROGRAMS: [&str; 6] = [
    "/lib/systemd/systemd",
    "/lib/systemd/systemd-journald",
    "/usr/bin/systemctl",
    "/usr/bin/journalctl",
    "/usr/bin/dbus-daemon",
    "/usr/lib/polkit-1/polkitd",
];

/// Units copied from this machine's /lib/systemd/system (the root and
/// system slices are built into systemd).
const UNITS: [&str; 17] = [
    "basic.target",
    "sysinit.target",
    "sockets.target",
    "paths.target",
    "timers.target",
    "slices.target",
    "local-fs.target",
    "swap.target",
    "shutdown.target",
    "multi-user.target",
    "systemd-journald.service",
    "systemd-journald.socket",
    "systemd-journald-dev-log.socket",
    "systemd-journald-audit.socket",
    "dbus.service",
    "dbus.socket",
    "polkit.service",
];

/// Files of the bus and of polkit copied to the same path in the guest.
const FILES: [&str; 6] = [
    "/usr/share/dbus-1/system.conf",
    "/usr/share/dbus-1/system.d/org.freedesktop.PolicyKit1.conf",
    "/usr/share/dbus-1/system.d/org.freedesktop.systemd1.conf",
    "/usr/share/dbus-1/system-services/org.freedesktop.PolicyKit1.service",
    "/usr/share/polkit-1/rules.d/50-default.rules",
    "/usr/lib/os-release",
];

/// The users the services run as (`nobody` calls the bus in the tests).
const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh
messagebus:x:100:102::/nonexistent:/bin/false
polkitd:x:996:996:polkit:/nonexistent:/bin/false
nobody:x:65534:65534:nobody:/nonexistent:/bin/sh
";
const GROUP: &str = "root:x:0:
messagebus:x:102:
polkitd:x:996:
nogroup:x:65534:
";

/// The guest's default target: the services the scenario talks to, then
/// the scenario.
const TARGET: &str = "[Unit]
Description=The scx_sky test VM
Requires=basic.target
Wants=systemd-journald.service dbus.socket dbus.service polkit.service sky-scenario.service
After=basic.target
AllowIsolate=yes
";

/// The scenario as a service: its output on the console, where the host
/// reads it, then the exit line init.sh would print, and power off.
const SCENARIO: &str = "[Unit]
Description=The scenario of the scx_sky test VM
After=basic.target systemd-journald.service dbus.service polkit.service

[Service]
Type=oneshot
Environment=PATH=/usr/sbin:/usr/bin:/sbin:/bin
WorkingDirectory=/scenarios
StandardInput=null
StandardOutput=tty
StandardError=tty
TTYPath=/dev/console
TimeoutStartSec=infinity
ExecStart=/bin/sh -c 'sh /run.sh; echo SKY-VM-EXIT=$?; sync; poweroff -f'
";

/// Builds the tree copied over the guest's root (initramfs `trees`):
/// units, bus and polkit files, users, and scx_sky installed with prefix
/// /usr. The programs (`PROGRAMS`) go in as placed binaries.
pub fn tree(dir: &Path) -> Result<PathBuf> {
    let root = dir.join(format!("systemd-guest-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    let units = root.join("lib/systemd/system");
    fs::create_dir_all(&units)?;
    for unit in UNITS {
        let from = Path::new("/lib/systemd/system").join(unit);
        fs::copy(&from, units.join(unit)).with_context(|| {
            format!(
                "{} is missing: run scripts/setup.sh (systemd, dbus, polkitd)",
                from.display()
            )
        })?;
    }
    for file in FILES {
        let to = root.join(&file[1..]);
        fs::create_dir_all(to.parent().context("a guest file has no directory")?)?;
        fs::copy(file, &to).with_context(|| {
            format!("{file} is missing: run scripts/setup.sh (systemd, dbus, polkitd)")
        })?;
    }
    let etc = root.join("etc");
    let own = etc.join("systemd/system");
    fs::create_dir_all(&own)?;
    fs::create_dir_all(etc.join("polkit-1/rules.d"))?;
    fs::create_dir_all(root.join("var/lib/polkit-1"))?;
    fs::create_dir_all(root.join("var/log"))?;
    // As on Debian: /var/run is /run (the statistics socket's directory).
    symlink("../run", root.join("var/run"))?;
    fs::write(etc.join("passwd"), PASSWD)?;
    fs::write(etc.join("group"), GROUP)?;
    fs::write(own.join("sky-vm.target"), TARGET)?;
    fs::write(own.join("sky-scenario.service"), SCENARIO)?;
    symlink("sky-vm.target", own.join("default.target"))?;
    let layout = Layout::new(Some(root.clone()), PathBuf::from("/usr"))?;
    install::install(&layout).context("installing scx_sky into the guest's tree")?;
    Ok(root)
}

/// (this machine's path, guest path) for each of `PROGRAMS`.
pub fn programs() -> Vec<(PathBuf, PathBuf)> {
    PROGRAMS
        .iter()
        .map(|p| (PathBuf::from(p), PathBuf::from(p)))
        .collect()
}
