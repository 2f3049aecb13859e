//! Kernel modules for the guest (persistent-memory emulation needs nfit,
//! nd_pmem and a filesystem). Debian ships them as .ko.xz without
//! modules.dep in `linux-modules-<ver>`; this downloads that package once,
//! resolves dependencies from each module's `depends=` modinfo field, and
//! returns decompressed modules in load order (busybox insmod).

use crate::kernel::Kernel;
use crate::paths::{cache_dir, run};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Decompressed modules `names` and their dependencies, dependencies first.
pub fn resolve(kernel: &Kernel, names: &[&str]) -> Result<Vec<PathBuf>> {
    if kernel.version == "custom" || kernel.version.starts_with(crate::kversion::CUSTOM_PREFIX) {
        bail!(
            "modules are only available for Debian's kernels, not {} (--kernel or kernel-build)",
            kernel.version
        );
    }
    let dir = cache_dir()?.join("kernel").join(&kernel.version);
    let tree = tree(&dir, &kernel.version)?;
    let index = index(&tree)?;
    let out = dir.join("ko");
    fs::create_dir_all(&out)?;
    let mut order = Vec::new();
    for name in names {
        visit(name, &index, &out, &mut order, 0)?;
    }
    Ok(order)
}

/// The extracted module tree, downloading the package the first time.
fn tree(dir: &Path, version: &str) -> Result<PathBuf> {
    let tree = dir.join("modules-tree");
    if tree.join("done").exists() {
        return Ok(tree);
    }
    let work = dir.join("modules-download");
    let _ = fs::remove_dir_all(&work);
    let _ = fs::remove_dir_all(&tree);
    fs::create_dir_all(&work)?;
    // 6.19 and later ship modules in linux-modules-<ver>; older kernels in
    // the one linux-image-<ver> package.
    let modules = format!("linux-modules-{version}");
    let known = Command::new("apt-cache")
        .args(["show", "--no-all-versions", &modules])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let package = if known {
        modules
    } else {
        format!("linux-image-{version}")
    };
    eprintln!("xtask: downloading {package}");
    for deb in crate::kernel::download_debs(&[package], &work)? {
        run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tree))?;
    }
    let _ = fs::remove_dir_all(&work);
    fs::write(tree.join("done"), "")?;
    Ok(tree)
}

/// Module name (with '-' as '_') -> compressed file.
fn index(tree: &Path) -> Result<BTreeMap<String, PathBuf>> {
    fn walk(dir: &Path, into: &mut BTreeMap<String, PathBuf>) -> Result<()> {
        for e in fs::read_dir(dir)? {
            let path = e?.path();
            if path.is_dir() {
                walk(&path, into)?;
            } else if let Some(name) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".ko.xz"))
            {
                into.insert(name.replace('-', "_"), path.clone());
            }
        }
        Ok(())
    }
    let mut map = BTreeMap::new();
    walk(tree, &mut map)?;
    if map.is_empty() {
        bail!("no modules found under {}", tree.display());
    }
    Ok(map)
}

fn visit(
    name: &str,
    index: &BTreeMap<String, PathBuf>,
    out: &Path,
    order: &mut Vec<PathBuf>,
    depth: u32,
) -> Result<()> {
    let key = name.replace('-', "_");
    let ko = out.join(format!("{key}.ko"));
    if order.contains(&ko) {
        return Ok(());
    }
    if depth > 32 {
        bail!("module dependencies of {name} loop");
    }
    let Some(xz) = index.get(&key) else {
        // Not a module: built into this kernel.
        return Ok(());
    };
    if !ko.exists() {
        let bytes = Command::new("xz")
            .arg("-dc")
            .arg(xz)
            .output()
            .context("running xz (scripts/setup.sh)")?;
        if !bytes.status.success() {
            bail!("xz could not decompress {}", xz.display());
        }
        fs::write(&ko, &bytes.stdout)?;
    }
    let deps = depends(&fs::read(&ko)?);
    for dep in deps {
        visit(&dep, index, out, order, depth + 1)?;
    }
    order.push(ko);
    Ok(())
}

/// The `depends=` list from a module's .modinfo strings.
pub fn depends(ko: &[u8]) -> Vec<String> {
    ko.split(|b| *b == 0)
        .filter_map(|s| s.strip_prefix(b"depends="))
        .flat_map(|s| {
            String::from_utf8_lossy(s)
                .split(',')
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::depends;

    #[test]
    fn depends_are_read_from_modinfo() {
        let ko = b"\x7fELF...\0license=GPL\0depends=libnvdimm,nd_btt\0vermagic=7.3\0";
        assert_eq!(depends(ko), ["libnvdimm", "nd_btt"]);
        assert!(depends(b"\0depends=\0").is_empty());
        assert!(depends(b"no modinfo").is_empty());
    }
}
