//! `ndctl` for the guest, from Debian's own packages: the qemu NVDIMM comes
//! up as a raw namespace (no DAX); `ndctl create-namespace -m fsdax` turns
//! it into one ext4 can mount with `-o dax`.
//!
//! The packages are downloaded (`apt-get download`, never installed) with
//! every package they depend on, stopping at libc6: the guest's C library
//! and loader are this machine's, as for every other program in the
//! initramfs. The result is cached as a tree copied over the guest's root:
//!
//! - `usr/lib/sky-ndctl/ndctl` and the libraries it loads, by soname, all
//!   taken from the downloaded packages (checked with ldd);
//! - `bin/ndctl`, a wrapper that points the loader at them, so that
//!   libraries of the same name in /lib (this machine's, brought along by
//!   mkfs.ext4 or scx_sky) are never mixed in.

use crate::kernel::download_debs;
use crate::paths::{cache_dir, output, run};
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the program and its libraries sit in the guest.
const GUEST_DIR: &str = "usr/lib/sky-ndctl";

/// Libraries that may come from this machine: glibc's own, which every
/// program in the initramfs shares.
const GLIBC: [&str; 7] = [
    "linux-vdso.so.1",
    "libc.so.6",
    "ld-linux-x86-64.so.2",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
];

/// The tree to copy over the guest's root, downloading the packages the
/// first time.
pub fn ensure() -> Result<PathBuf> {
    let dir = cache_dir()?.join("tools").join("ndctl");
    let tree = dir.join("guest");
    if tree.join(GUEST_DIR).join("packages").is_file() {
        return Ok(tree);
    }
    fs::create_dir_all(&dir)?;
    // Built aside and renamed into place: tests may boot VMs in parallel.
    let work = dir.join(format!("work-{}", std::process::id()));
    let _ = fs::remove_dir_all(&work);
    let complete = |t: &Path| t.join(GUEST_DIR).join("packages").is_file();
    let result = build(&work).and_then(|built| {
        if !complete(&tree) {
            let _ = fs::remove_dir_all(&tree);
            fs::rename(&built, &tree)
                .with_context(|| format!("moving {} into place", built.display()))?;
        }
        Ok(tree)
    });
    let _ = fs::remove_dir_all(&work);
    result
}

fn build(work: &Path) -> Result<PathBuf> {
    let debs = work.join("debs");
    let root = work.join("root");
    fs::create_dir_all(&debs)?;
    fs::create_dir_all(&root)?;
    let packages = closure("ndctl")?;
    eprintln!("xtask: downloading {}", packages.join(" "));
    let mut names = Vec::new();
    for deb in download_debs(&packages, &debs).context("downloading ndctl and its libraries")? {
        run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root))?;
        names.push(deb.file_name().unwrap().to_string_lossy().into_owned());
    }
    let ndctl = root.join("usr/bin/ndctl");
    if !ndctl.is_file() {
        bail!("the ndctl package holds no usr/bin/ndctl");
    }

    let guest = work.join("guest");
    let lib_dir = guest.join(GUEST_DIR);
    fs::create_dir_all(&lib_dir)?;
    fs::create_dir_all(guest.join("bin"))?;
    let search = ["usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu"]
        .map(|d| root.join(d).display().to_string())
        .join(":");
    let ldd = output(
        Command::new("ldd")
            .arg(&ndctl)
            .env("LD_LIBRARY_PATH", &search),
    )?;
    for (soname, path) in crate::initramfs::parse_ldd(&ldd)? {
        match path {
            Some(p) if p.starts_with(&root) => {
                fs::copy(&p, lib_dir.join(&soname))
                    .with_context(|| format!("copying {}", p.display()))?;
            }
            _ if GLIBC.contains(&soname.as_str()) => {}
            Some(p) => bail!(
                "ndctl would load {} from this machine: add its package to the download",
                p.display()
            ),
            None => bail!("ndctl needs {soname}, which no downloaded package holds"),
        }
    }
    let bin = lib_dir.join("ndctl");
    fs::copy(&ndctl, &bin)?;
    fs::set_permissions(&bin, fs::Permissions::from_mode(0o755))?;
    let wrapper = guest.join("bin/ndctl");
    fs::write(
        &wrapper,
        format!("#!/bin/sh\n# Debian's ndctl with its own libraries (xtask/src/ndctl.rs).\nLD_LIBRARY_PATH=/{GUEST_DIR} exec /{GUEST_DIR}/ndctl \"$@\"\n"),
    )?;
    fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755))?;
    // Written last: its presence marks a complete tree.
    fs::write(lib_dir.join("packages"), names.join("\n") + "\n")?;
    Ok(guest)
}

/// `package` and everything it depends on, down to (not including) libc6.
fn closure(package: &str) -> Result<Vec<String>> {
    let mut seen = BTreeSet::from([package.to_string()]);
    let mut todo = vec![package.to_string()];
    while let Some(p) = todo.pop() {
        let text = output(Command::new("apt-cache").args([
            "depends",
            "--no-recommends",
            "--no-suggests",
            "--no-conflicts",
            "--no-breaks",
            "--no-replaces",
            "--no-enhances",
            "--no-pre-depends",
            &p,
        ]))
        .with_context(|| format!("apt does not know {p} (run apt-get update)"))?;
        for dep in depends(&text) {
            if dep != "libc6" && seen.insert(dep.clone()) {
                todo.push(dep);
            }
        }
    }
    Ok(seen.into_iter().collect())
}

/// The package names on `Depends:` lines of `apt-cache depends` output
/// (virtual packages, shown as `<name>`, are left out).
fn depends(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().trim_start_matches('|').strip_prefix("Depends:"))
        .map(str::trim)
        .filter(|d| !d.starts_with('<') && !d.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depends_lines_are_read() {
        let text = "ndctl\n  PreDepends: init-system-helpers\n  Depends: libc6\n  Depends: libndctl6\n |Depends: liba\n  Depends: <virtual>\n  Recommends: x\n";
        assert_eq!(depends(text), ["libc6", "libndctl6", "liba"]);
    }
}
