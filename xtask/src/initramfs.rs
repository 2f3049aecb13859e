//! Packs the guest's root filesystem: static busybox, the project's binaries
//! with the shared libraries they load, the scenario scripts, the kernel
//! config, and the command to run.

use crate::kernel::Kernel;
use crate::paths::{output, run, workspace_root};
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const INIT: &str = include_str!("init.sh");
const BUSYBOX: &str = "/bin/busybox";

pub struct Contents<'a> {
    /// Programs for the guest's /bin, with the shared libraries they load.
    pub binaries: &'a [PathBuf],
    /// More programs, each at its own absolute path in the guest (file on
    /// this machine, path in the guest), with their shared libraries.
    pub placed: &'a [(PathBuf, PathBuf)],
    /// Directories copied as they are over the guest's root (symbolic
    /// links stay links; no libraries are looked up).
    pub trees: &'a [PathBuf],
    /// Kernel modules, in load order; init.sh insmods them at boot.
    pub modules: &'a [PathBuf],
    pub kernel: &'a Kernel,
    /// Shell command run as root once the guest is up.
    pub command: &'a str,
}

/// Writes the initramfs (an uncompressed newc cpio) to `out`.
pub fn build(contents: &Contents, out: &Path) -> Result<()> {
    let stage = out.with_extension("d");
    let _ = fs::remove_dir_all(&stage);
    for dir in [
        "bin",
        "proc",
        "sys",
        "dev",
        "tmp",
        "boot",
        "scenarios",
        "lib64",
        "root",
    ] {
        fs::create_dir_all(stage.join(dir))?;
    }
    check_static(Path::new(BUSYBOX))?;
    copy_exec(Path::new(BUSYBOX), &stage.join("bin/busybox"))?;
    let mut libs = BTreeSet::new();
    // /bin/NAME for `binaries`, the given guest path for `placed`.
    let mut in_bin = Vec::new();
    for bin in contents.binaries {
        let name = bin.file_name().context("binary path has no file name")?;
        in_bin.push((bin.clone(), Path::new("/bin").join(name)));
    }
    for (bin, guest) in in_bin.iter().chain(contents.placed) {
        let rel = guest
            .strip_prefix("/")
            .with_context(|| format!("{} is not an absolute path", guest.display()))?;
        let dest = stage.join(rel);
        fs::create_dir_all(dest.parent().context("guest path has no parent")?)?;
        copy_exec(bin, &dest)?;
        libs.extend(shared_libraries(bin)?);
    }
    for lib in &libs {
        let dest = stage.join(lib.strip_prefix("/").unwrap_or(lib));
        fs::create_dir_all(dest.parent().unwrap())?;
        fs::copy(lib, &dest).with_context(|| format!("copying {}", lib.display()))?;
    }
    for script in fs::read_dir(workspace_root().join("tests/vm"))? {
        let script = script?.path();
        if script.extension().is_some_and(|e| e == "sh") {
            copy_exec(
                &script,
                &stage.join("scenarios").join(script.file_name().unwrap()),
            )?;
        }
    }
    for tree in contents.trees {
        copy_tree(tree, &stage)?;
    }
    let mod_dir = stage.join("lib/modules/sky");
    fs::create_dir_all(&mod_dir)?;
    for (i, ko) in contents.modules.iter().enumerate() {
        let name = ko
            .file_name()
            .context("module path has no file name")?
            .to_string_lossy();
        fs::copy(ko, mod_dir.join(format!("{i:02}-{name}")))?;
    }
    if let Some(config) = &contents.kernel.config {
        fs::copy(
            config,
            stage.join(format!("boot/config-{}", contents.kernel.version)),
        )?;
    }
    write_exec(&stage.join("init"), INIT)?;
    write_exec(&stage.join("run.sh"), &format!("{}\n", contents.command))?;

    let cpio = fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    run(Command::new("sh")
        .arg("-c")
        .arg("find . -print0 | cpio --null -o -H newc --quiet")
        .current_dir(&stage)
        .stdout(cpio))
    .context("packing the initramfs with cpio")?;
    let _ = fs::remove_dir_all(&stage);
    Ok(())
}

fn check_static(path: &Path) -> Result<()> {
    if !path.exists() {
        bail!(
            "{} is missing: run scripts/setup.sh (busybox-static)",
            path.display()
        );
    }
    Ok(())
}

/// The shared objects `bin` loads, by absolute path, from ldd.
fn shared_libraries(bin: &Path) -> Result<Vec<PathBuf>> {
    let text = match output(Command::new("ldd").arg(bin)) {
        Ok(t) => t,
        // ldd exits non-zero for static binaries: nothing to copy.
        Err(_) => return Ok(Vec::new()),
    };
    // The vDSO has no file; libraries not found have no path.
    Ok(parse_ldd(&text)?
        .into_iter()
        .filter_map(|(_, path)| path.filter(|p| p.is_absolute()))
        .collect())
}

/// (soname, resolved path) for each line of ldd's output; None for "not
/// found". The vDSO and the loader (which has no `=>`) count too.
pub(crate) fn parse_ldd(text: &str) -> Result<Vec<(String, Option<PathBuf>)>> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (name, rest) = match line.split_once(" => ") {
            Some((n, r)) => (n.trim(), r.trim()),
            None => {
                let first = line.split_whitespace().next().unwrap_or(line);
                let name = Path::new(first)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                out.push((name, Some(PathBuf::from(first))));
                continue;
            }
        };
        let path = if rest.starts_with("not found") {
            None
        } else {
            rest.split_whitespace().next().map(PathBuf::from)
        };
        out.push((name.to_string(), path));
    }
    if out.is_empty() {
        bail!("ldd printed nothing");
    }
    Ok(out)
}

/// Copies the contents of `from` into `to`, keeping modes and symbolic links.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    for entry in fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let (src, dest) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            fs::create_dir_all(&dest)?;
            copy_tree(&src, &dest)?;
        } else if kind.is_symlink() {
            let _ = fs::remove_file(&dest);
            std::os::unix::fs::symlink(fs::read_link(&src)?, &dest)?;
        } else {
            fs::copy(&src, &dest)
                .with_context(|| format!("copying {} into the initramfs", src.display()))?;
        }
    }
    Ok(())
}

fn copy_exec(from: &Path, to: &Path) -> Result<()> {
    fs::copy(from, to).with_context(|| format!("copying {} into the initramfs", from.display()))?;
    fs::set_permissions(to, fs::Permissions::from_mode(0o755))?;
    Ok(())
}

fn write_exec(path: &Path, text: &str) -> Result<()> {
    fs::write(path, text)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_lines_are_read() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibndctl.so.6 => /t/usr/lib/libndctl.so.6 (0x1)\n\tlibx.so.1 => not found\n\t/lib64/ld-linux-x86-64.so.2 (0x2)\n";
        let got = parse_ldd(text).unwrap();
        assert_eq!(got[0].0, "linux-vdso.so.1");
        assert_eq!(
            got[1],
            (
                "libndctl.so.6".to_string(),
                Some(PathBuf::from("/t/usr/lib/libndctl.so.6"))
            )
        );
        assert_eq!(got[2], ("libx.so.1".to_string(), None));
        assert_eq!(got[3].0, "ld-linux-x86-64.so.2");
    }
}
