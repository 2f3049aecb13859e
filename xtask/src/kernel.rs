//! Fetches a kernel with sched_ext: the newest Debian `linux-binary-<ver>`
//! package whose config has CONFIG_SCHED_CLASS_EXT=y. Packages are only
//! downloaded (`apt-get download`), never installed, and the kernel is
//! cached outside the repository.

use crate::paths::{cache_dir, output, run};
use anyhow::{bail, Context, Result};
use std::cmp::Ordering;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, Clone)]
pub struct Kernel {
    pub version: String,
    pub vmlinuz: PathBuf,
    /// The kernel's config, when known (installed in the guest as /boot/config-<ver>).
    pub config: Option<PathBuf>,
}

/// The kernel to boot: `explicit` if given, else the cached or freshly
/// downloaded newest sched_ext kernel.
pub fn ensure(explicit: Option<&Path>) -> Result<Kernel> {
    if let Some(path) = explicit
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("SKY_KERNEL").map(PathBuf::from))
    {
        if !path.is_file() {
            bail!("kernel image {} does not exist", path.display());
        }
        return Ok(Kernel {
            version: "custom".into(),
            vmlinuz: path,
            config: None,
        });
    }
    let dir = cache_dir()?.join("kernel");
    for version in candidate_versions()? {
        let kdir = dir.join(&version);
        if let Some(k) = cached(&kdir, &version) {
            return Ok(k);
        }
        if kdir.join("no-sched-ext").exists() {
            continue;
        }
        match download(&kdir, &version)? {
            Some(k) => return Ok(k),
            None => eprintln!("xtask: kernel {version} has no sched_ext; trying an older one"),
        }
    }
    bail!(
        "no Debian kernel package with CONFIG_SCHED_CLASS_EXT=y is available; \
         run scripts/setup.sh (it adds the trixie-backports suite) or pass --kernel PATH"
    )
}

fn cached(kdir: &Path, version: &str) -> Option<Kernel> {
    let vmlinuz = kdir.join("vmlinuz");
    let config = kdir.join("config");
    (vmlinuz.is_file() && config.is_file()).then(|| Kernel {
        version: version.into(),
        vmlinuz,
        config: Some(config),
    })
}

/// Versions of `linux-binary-<ver>-amd64` packages apt knows, newest first
/// (the generic flavour only: cloud kernels lack drivers, rt changes timing).
pub fn candidate_versions() -> Result<Vec<String>> {
    let list = output(Command::new("apt-cache").args(["search", "--names-only", "^linux-binary-"]))
        .context("asking apt for kernel packages")?;
    let mut versions: Vec<String> = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|pkg| pkg.strip_prefix("linux-binary-"))
        .filter(|v| v.starts_with(|c: char| c.is_ascii_digit()))
        .filter(|v| v.ends_with("-amd64") && !v.contains("-cloud-") && !v.contains("-rt-"))
        .map(str::to_string)
        .collect();
    versions.sort_by(|a, b| compare_versions(b, a));
    versions.dedup();
    if versions.is_empty() {
        bail!("apt knows no linux-binary-*-amd64 package; run scripts/setup.sh first");
    }
    Ok(versions)
}

/// Orders kernel versions such as `7.3.4+deb13-amd64` numerically.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    let nums = |v: &str| -> Vec<u64> {
        v.split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().unwrap_or(0))
            .collect()
    };
    nums(a).cmp(&nums(b))
}

pub fn has_sched_ext(config: &str) -> bool {
    config
        .lines()
        .any(|l| l.trim() == "CONFIG_SCHED_CLASS_EXT=y")
}

fn download(kdir: &Path, version: &str) -> Result<Option<Kernel>> {
    let work = kdir.join("download");
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    eprintln!("xtask: downloading kernel {version}");
    // Older kernels ship config and image in one linux-image package.
    let packages = [
        format!("linux-base-{version}"),
        format!("linux-binary-{version}"),
    ];
    run(Command::new("apt-get")
        .arg("download")
        .args(&packages)
        .current_dir(&work))
    .with_context(|| format!("downloading {}", packages.join(" ")))?;
    let tree = work.join("tree");
    for deb in fs::read_dir(&work)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
    {
        if deb.extension().is_some_and(|e| e == "deb") {
            run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tree))?;
        }
    }
    let config = find_file(&tree, |name| {
        name == "config" || name.starts_with("config-")
    })
    .context("the kernel packages hold no config file")?;
    let vmlinuz = find_file(&tree, |name| {
        name == "vmlinuz" || name.starts_with("vmlinuz-")
    })
    .context("the kernel packages hold no vmlinuz")?;
    if !has_sched_ext(&fs::read_to_string(&config)?) {
        fs::write(kdir.join("no-sched-ext"), "")?;
        let _ = fs::remove_dir_all(&work);
        return Ok(None);
    }
    // Move into place last, so an interrupted download is never taken for a
    // cached kernel.
    fs::rename(&config, kdir.join("config"))?;
    fs::rename(&vmlinuz, kdir.join("vmlinuz"))?;
    let _ = fs::remove_dir_all(&work);
    Ok(cached(kdir, version))
}

fn find_file(dir: &Path, wanted: impl Fn(&str) -> bool + Copy) -> Option<PathBuf> {
    for entry in fs::read_dir(dir).ok()?.filter_map(|e| e.ok()) {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_file(&path, wanted) {
                return Some(found);
            }
        } else if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(wanted)
        {
            return Some(path);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_numerically() {
        let mut v = vec![
            "7.2.9+deb13-amd64",
            "7.3.4+deb13-amd64",
            "7.2.11+deb13-amd64",
            "6.12.38+deb13-amd64",
        ];
        v.sort_by(|a, b| compare_versions(b, a));
        assert_eq!(
            v,
            [
                "7.3.4+deb13-amd64",
                "7.2.11+deb13-amd64",
                "7.2.9+deb13-amd64",
                "6.12.38+deb13-amd64"
            ]
        );
    }

    #[test]
    fn sched_ext_is_read_from_the_config() {
        assert!(has_sched_ext("CONFIG_BPF=y\nCONFIG_SCHED_CLASS_EXT=y\n"));
        assert!(!has_sched_ext("# CONFIG_SCHED_CLASS_EXT is not set\n"));
        assert!(!has_sched_ext("CONFIG_SCHED_CLASS_EXT=m\n"));
    }
}
