//! `cargo xtask kernel-build --series 6.12`: a small kernel with sched_ext
//! built from Debian's `linux-source-<series>` package, for series Debian
//! ships without sched_ext (6.12 LTS). The result is cached like a
//! downloaded kernel, as `<cache>/kernel/custom-<series>/{vmlinuz,config}`,
//! so `--kernel-version custom-6.12` (or `6.12`) boots it. Optional and
//! slow; not part of `cargo xtask test`.

use crate::kernel::{self, Kernel};
use crate::kversion::{Selector, CUSTOM_PREFIX};
use crate::paths::{cache_dir, run};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What building a kernel needs beyond setup.sh's list (pahole from
/// dwarves turns DWARF into the BTF sched_ext requires).
const BUILD_PACKAGES: [&str; 10] = [
    "gcc",
    "make",
    "bc",
    "bison",
    "flex",
    "libssl-dev",
    "libelf-dev",
    "dwarves",
    "xz-utils",
    "cpio",
];

/// Options the VM and scx_sky need, on top of x86_64 defconfig: SMP
/// topology, serial console, initramfs, the filesystems init mounts, the
/// per-task counters the workloads read (/proc/PID/sched needs
/// SCHED_DEBUG in 6.12), BPF with BTF, sched_ext, tracing, ACPI power-off.
const ENABLE: [&str; 42] = [
    "64BIT",
    "SMP",
    "SCHED_SMT",
    "SCHED_MC",
    "HOTPLUG_CPU",
    "ACPI",
    "SERIAL_8250",
    "SERIAL_8250_CONSOLE",
    "BLK_DEV_INITRD",
    "PROC_FS",
    "SYSFS",
    "DEVTMPFS",
    "DEVTMPFS_MOUNT",
    "TMPFS",
    "SHMEM",
    "BINFMT_ELF",
    "BINFMT_SCRIPT",
    "FUTEX",
    "PERF_EVENTS",
    "SCHEDSTATS",
    "SCHED_DEBUG",
    "DEBUG_FS",
    "BPF",
    "BPF_SYSCALL",
    "BPF_JIT",
    "BPF_JIT_ALWAYS_ON",
    "DEBUG_INFO",
    "DEBUG_INFO_DWARF5",
    "DEBUG_INFO_BTF",
    "SCHED_CLASS_EXT",
    "FTRACE",
    "FUNCTION_TRACER",
    "DYNAMIC_FTRACE",
    "FTRACE_SYSCALLS",
    "KPROBES",
    "KPROBE_EVENTS",
    "BPF_EVENTS",
    "CGROUPS",
    "CGROUP_SCHED",
    "EXT_GROUP_SCHED",
    "IKCONFIG",
    "IKCONFIG_PROC",
];

/// Off: what only costs build time in a serial-console VM with an
/// initramfs, and debug-info variants BTF cannot use.
const DISABLE: [&str; 14] = [
    "DRM",
    "SOUND",
    "USB_SUPPORT",
    "WIRELESS",
    "WLAN",
    "NETDEVICES",
    "NETFILTER",
    "NFS_FS",
    "SECURITY_SELINUX",
    "AUDIT",
    "RANDOMIZE_BASE",
    "DEBUG_INFO_NONE",
    "DEBUG_INFO_REDUCED",
    "DEBUG_INFO_SPLIT",
];

/// These must come out of olddefconfig as =y, or the kernel is useless here.
const REQUIRED: [&str; 8] = [
    "SMP",
    "SERIAL_8250_CONSOLE",
    "BLK_DEV_INITRD",
    "DEVTMPFS",
    "BPF_SYSCALL",
    "DEBUG_INFO_BTF",
    "SCHED_CLASS_EXT",
    "SCHED_DEBUG",
];

/// Builds (or returns the cached) custom kernel of `series`.
pub fn build(series: &str, jobs: u32) -> Result<Kernel> {
    let series = match Selector::parse(series)? {
        Selector::Prefix(p) if p.len() == 2 => format!("{}.{}", p[0], p[1]),
        _ => bail!("--series wants MAJOR.MINOR, e.g. 6.12; got {series:?}"),
    };
    if jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    let name = format!("{CUSTOM_PREFIX}{series}");
    let kdir = cache_dir()?.join("kernel").join(&name);
    if kdir.join("vmlinuz").is_file() && kdir.join("config").is_file() {
        eprintln!(
            "xtask: {name} is already built ({}); remove it to rebuild",
            kdir.display()
        );
        return kernel::ensure(&kernel::KernelChoice::Version(name));
    }
    install_build_packages()?;
    let work = cache_dir()?.join("kbuild").join(&series);
    let src = source_tree(&work, &series)?;
    configure(&src)?;
    eprintln!(
        "xtask: building {name} in {} (nice 19, -j{jobs})",
        src.display()
    );
    run(Command::new("nice")
        .args(["-n", "19", "make", &format!("-j{jobs}"), "bzImage"])
        .current_dir(&src))
    .context("the kernel build failed (its output is above)")?;
    fs::create_dir_all(&kdir)?;
    // The config first and the image last: a half-copied kernel is never
    // taken for a built one.
    fs::copy(src.join(".config"), kdir.join("config"))?;
    let tmp = kdir.join("vmlinuz.partial");
    fs::copy(src.join("arch/x86/boot/bzImage"), &tmp)?;
    fs::rename(&tmp, kdir.join("vmlinuz"))?;
    eprintln!(
        "xtask: cached {name}; boot it with --kernel-version {name}; the sources stay in {} (remove to free about 4 GB)",
        work.display()
    );
    kernel::ensure(&kernel::KernelChoice::Version(name))
}

/// apt-get installs what is missing (bookworm's versions only).
fn install_build_packages() -> Result<()> {
    let missing: Vec<&str> = BUILD_PACKAGES
        .iter()
        .copied()
        .filter(|p| {
            !Command::new("dpkg-query")
                .args(["-W", "-f=${Status}", p])
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("xtask: installing {}", missing.join(" "));
    run(Command::new("apt-get")
        .args(["install", "-y", "-qq", "-t", "bookworm"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
    .with_context(|| {
        format!(
            "installing the kernel build packages {} (needs root)",
            missing.join(" ")
        )
    })
}

/// The unpacked source of `linux-source-<series>`, downloading it once.
fn source_tree(work: &Path, series: &str) -> Result<PathBuf> {
    let src = work.join(format!("linux-source-{series}"));
    let done = work.join("extracted");
    if done.exists() && src.join("Makefile").is_file() {
        return Ok(src);
    }
    let _ = fs::remove_dir_all(work);
    let dl = work.join("download");
    fs::create_dir_all(&dl).with_context(|| format!("creating {}", dl.display()))?;
    let package = format!("linux-source-{series}");
    eprintln!("xtask: downloading {package}");
    let deb = kernel::download_debs(std::slice::from_ref(&package), &dl)
        .context("apt-cache search --names-only ^linux-source- lists the sources")?
        .into_iter()
        .next()
        .with_context(|| format!("apt-get download left no .deb in {}", dl.display()))?;
    let tree = dl.join("tree");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tree))?;
    let tarball = tree
        .join("usr/src")
        .join(format!("linux-source-{series}.tar.xz"));
    if !tarball.is_file() {
        bail!("{package} holds no {}", tarball.display());
    }
    eprintln!("xtask: unpacking {}", tarball.display());
    run(Command::new("tar")
        .arg("-xf")
        .arg(&tarball)
        .arg("-C")
        .arg(work))?;
    if !src.join("Makefile").is_file() {
        bail!("{} did not unpack to {}", tarball.display(), src.display());
    }
    let _ = fs::remove_dir_all(&dl);
    fs::write(&done, "")?;
    Ok(src)
}

/// defconfig, our options, olddefconfig; then checks the ones we rely on.
fn configure(src: &Path) -> Result<()> {
    run(Command::new("make").arg("defconfig").current_dir(src))?;
    let mut cfg = Command::new("scripts/config");
    cfg.current_dir(src);
    for opt in ENABLE {
        cfg.args(["--enable", opt]);
    }
    for opt in DISABLE {
        cfg.args(["--disable", opt]);
    }
    cfg.args(["--set-str", "LOCALVERSION", "-sky"]);
    cfg.args(["--disable", "LOCALVERSION_AUTO"]);
    run(&mut cfg)?;
    run(Command::new("make").arg("olddefconfig").current_dir(src))?;
    let config = fs::read_to_string(src.join(".config"))?;
    let lost = missing_options(&config, &REQUIRED);
    if !lost.is_empty() {
        bail!(
            "the kernel config lost {} (a dependency is missing; for DEBUG_INFO_BTF, pahole from dwarves)",
            lost.join(", ")
        );
    }
    Ok(())
}

/// Which of `wanted` are not `=y` in `config`.
pub fn missing_options(config: &str, wanted: &[&str]) -> Vec<String> {
    wanted
        .iter()
        .filter(|o| {
            let line = format!("CONFIG_{o}=y");
            !config.lines().any(|l| l.trim() == line)
        })
        .map(|o| format!("CONFIG_{o}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_options_are_named() {
        let config = "CONFIG_SMP=y\n# CONFIG_DEBUG_INFO_BTF is not set\nCONFIG_SCHED_CLASS_EXT=m\n";
        assert_eq!(
            missing_options(config, &["SMP", "DEBUG_INFO_BTF", "SCHED_CLASS_EXT"]),
            ["CONFIG_DEBUG_INFO_BTF", "CONFIG_SCHED_CLASS_EXT"]
        );
    }

    #[test]
    fn series_must_be_major_minor() {
        for bad in ["6", "6.12.1", "custom-6.12", "", "x"] {
            let err = build(bad, 2).unwrap_err().to_string();
            assert!(
                err.contains("MAJOR.MINOR") || err.contains("kernel version"),
                "{bad}: {err}"
            );
        }
    }
}
