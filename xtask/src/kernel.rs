//! Kernels for the VM: any amd64 kernel Debian's archive offers (apt), or
//! one built here (`cargo xtask kernel-build`), chosen by version. Packages
//! are only downloaded (`apt-get download`), never installed. Each version
//! is cached under `<cache>/kernel/<version>/` as `vmlinuz` + `config`, or
//! as a `no-sched-ext` marker when its config lacks CONFIG_SCHED_CLASS_EXT=y
//! so it is never downloaded again. Where the archive has the image but no
//! config (linux-binary without linux-base), sched_ext is read from the
//! image (kimage.rs).

use crate::kversion::{self, Available, Selector, Source, CUSTOM_PREFIX};
use crate::paths::{cache_dir, output, run};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

pub use crate::kversion::compare_versions;

/// `apt-get download` into the cache. apt's sandbox user cannot write
/// there (it is under root's home); downloading as root is what happens
/// anyway, this only drops the warning saying so. Quiet: apt's progress
/// lines would print the mirror's address into logs.
pub const APT_DOWNLOAD: [&str; 4] = ["-qq", "-o", "APT::Sandbox::User=root", "download"];

/// Downloads `packages` (never installs them) into `dir` and returns the
/// .deb files there, sorted.
pub fn download_debs(packages: &[String], dir: &Path) -> Result<Vec<PathBuf>> {
    download_debs_with(&[], packages, dir)
}

/// The same with apt `options` (`-o` settings: another apt state).
pub fn download_debs_with(
    options: &[String],
    packages: &[String],
    dir: &Path,
) -> Result<Vec<PathBuf>> {
    run(Command::new("apt-get")
        .args(options)
        .args(APT_DOWNLOAD)
        .args(packages)
        .current_dir(dir))
    .with_context(|| format!("downloading {}", packages.join(" ")))?;
    let mut debs: Vec<PathBuf> = fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    debs.sort();
    Ok(debs)
}

#[derive(Debug, Clone)]
pub struct Kernel {
    pub version: String,
    pub vmlinuz: PathBuf,
    /// The kernel's config, when known (installed in the guest as /boot/config-<ver>).
    pub config: Option<PathBuf>,
}

/// Which kernel to boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelChoice {
    /// An image file (`--kernel`, `$SKY_KERNEL`).
    Image(PathBuf),
    /// A version or series (`--kernel-version`, `$SKY_KERNEL_VERSION`).
    Version(String),
    /// The newest kernel with sched_ext.
    Newest,
}

impl KernelChoice {
    /// Command-line choices win over the environment; an image over a version.
    pub fn from_args(image: Option<&Path>, version: Option<&str>) -> KernelChoice {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        if let Some(p) = image {
            KernelChoice::Image(p.to_path_buf())
        } else if let Some(v) = version {
            KernelChoice::Version(v.to_string())
        } else if let Some(p) = env("SKY_KERNEL") {
            KernelChoice::Image(PathBuf::from(p))
        } else if let Some(v) = env("SKY_KERNEL_VERSION") {
            KernelChoice::Version(v)
        } else {
            KernelChoice::Newest
        }
    }
}

/// The kernel to boot for `choice`, downloading it the first time.
pub fn ensure(choice: &KernelChoice) -> Result<Kernel> {
    match choice {
        KernelChoice::Image(path) => {
            if !path.is_file() {
                bail!("kernel image {} does not exist", path.display());
            }
            Ok(Kernel {
                version: "custom".into(),
                vmlinuz: path.clone(),
                config: None,
            })
        }
        KernelChoice::Version(v) => select(&Selector::parse(v)?, &available()?),
        KernelChoice::Newest => select(&Selector::Prefix(Vec::new()), &available()?),
    }
}

fn kernel_dir(version: &str) -> Result<PathBuf> {
    Ok(cache_dir()?.join("kernel").join(version))
}

/// What the cache knows about a version's sched_ext support.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// vmlinuz and a config with CONFIG_SCHED_CLASS_EXT=y are cached.
    SchedExt,
    /// Its config was read and lacks CONFIG_SCHED_CLASS_EXT=y.
    NoSchedExt,
    /// Never downloaded.
    Unknown,
}

pub fn status(version: &str) -> Result<Status> {
    let dir = kernel_dir(version)?;
    Ok(if cached(&dir, version).is_some() {
        Status::SchedExt
    } else if dir.join("no-sched-ext").exists() {
        Status::NoSchedExt
    } else {
        Status::Unknown
    })
}

/// The image is moved into place last, so its presence means the rest is
/// there: the config, or (when the archive has none) the marker saying
/// sched_ext was read from the image.
fn cached(kdir: &Path, version: &str) -> Option<Kernel> {
    let vmlinuz = kdir.join("vmlinuz");
    let config = kdir.join("config");
    if !vmlinuz.is_file() {
        return None;
    }
    let config = if config.is_file() {
        Some(config)
    } else if kdir.join(SCHED_EXT_IN_IMAGE).is_file() {
        None
    } else {
        return None;
    };
    Some(Kernel {
        version: version.into(),
        vmlinuz,
        config,
    })
}

/// Marker for a kernel without a config whose image has sched_ext.
const SCHED_EXT_IN_IMAGE: &str = "sched-ext-in-image";

/// Every kernel apt offers plus every one in the cache (our own builds,
/// and downloads apt no longer lists), oldest first.
pub fn available() -> Result<Vec<Available>> {
    let apt = output(Command::new("apt-cache").args([
        "search",
        "--names-only",
        "^linux-(binary|image|base)-[0-9]",
    ]));
    let mut all = match &apt {
        Ok(text) => kversion::parse_apt_search(text),
        Err(_) => Vec::new(),
    };
    let dir = cache_dir()?.join("kernel");
    if let Ok(entries) = fs::read_dir(&dir) {
        for entry in entries.filter_map(|e| e.ok()) {
            let Ok(version) = entry.file_name().into_string() else {
                continue;
            };
            if all.iter().any(|a| a.version == version) {
                continue;
            }
            let known = cached(&entry.path(), &version).is_some()
                || entry.path().join("no-sched-ext").exists();
            if known {
                let source = if version.starts_with(CUSTOM_PREFIX) {
                    Source::Custom
                } else {
                    Source::Cached
                };
                all.push(Available { version, source });
            }
        }
    }
    all.sort_by(|a, b| compare_versions(&a.version, &b.version));
    if all.is_empty() {
        match apt {
            Err(e) => bail!("apt cannot list kernel packages ({e:#}) and none is cached"),
            Ok(_) => bail!(
                "apt knows no linux-image/linux-binary amd64 package; \
                 run scripts/setup.sh (it adds the trixie-backports suite) or pass --kernel PATH"
            ),
        }
    }
    Ok(all)
}

/// The kernel `sel` names, downloaded if needed. A series prefix takes the
/// newest point release with sched_ext; when a series' newest Debian kernel
/// lacks sched_ext its older ones are taken to lack it too (Debian does not
/// drop config options within a series) and are not downloaded. Our own
/// build of a series comes after Debian's.
pub fn select(sel: &Selector, all: &[Available]) -> Result<Kernel> {
    let found = kversion::matching(sel, all)?;
    if let Selector::Exact(_) = sel {
        let a = found[0];
        return match fetch(a)? {
            Some(k) => Ok(k),
            None => bail!(
                "kernel {} has no sched_ext (its config lacks CONFIG_SCHED_CLASS_EXT=y); \
                 pick another with --kernel-version (cargo xtask kernels lists them)",
                a.version
            ),
        };
    }
    match newest_with_sched_ext(&found)? {
        Some(k) => Ok(k),
        None => bail!(
            "no {} kernel has sched_ext: the newest of each series lacks CONFIG_SCHED_CLASS_EXT=y \
             (older ones of such a series are not tried); `cargo xtask kernels` lists them, \
             `cargo xtask kernel-build --series X.Y` builds one",
            sel.describe()
        ),
    }
}

/// The first kernel of `newest_first` with sched_ext, skipping the rest of
/// a series once a Debian kernel of it lacks sched_ext.
fn newest_with_sched_ext(newest_first: &[&Available]) -> Result<Option<Kernel>> {
    for group in kversion::by_series(newest_first) {
        let mut series_lacks_it = false;
        for a in group {
            if series_lacks_it && a.source != Source::Custom {
                continue;
            }
            match fetch(a)? {
                Some(k) => return Ok(Some(k)),
                None if a.source != Source::Custom => series_lacks_it = true,
                None => {}
            }
        }
    }
    Ok(None)
}

/// The oldest Debian kernel with sched_ext. Series are tried oldest first;
/// a series whose newest kernel lacks sched_ext is skipped whole.
pub fn oldest_sched_ext(all: &[Available]) -> Result<Kernel> {
    let debian: Vec<Available> = all
        .iter()
        .filter(|a| a.source != Source::Custom)
        .cloned()
        .collect();
    let found = kversion::matching(&Selector::Prefix(Vec::new()), &debian)?;
    for group in kversion::by_series(&found).into_iter().rev() {
        if fetch(group[0])?.is_none() {
            continue;
        }
        for a in group.iter().rev() {
            if let Some(k) = fetch(a)? {
                return Ok(k);
            }
        }
    }
    bail!("no Debian kernel with sched_ext is available (cargo xtask kernels lists them)")
}

/// The newest kernel with sched_ext of each series, newest series first;
/// series without one are left out.
pub fn newest_per_series(all: &[Available]) -> Result<Vec<Kernel>> {
    let found = kversion::matching(&Selector::Prefix(Vec::new()), all)?;
    let mut kernels = Vec::new();
    for group in kversion::by_series(&found) {
        match newest_with_sched_ext(&group)? {
            Some(k) => kernels.push(k),
            None => eprintln!(
                "xtask: series {} has no kernel with sched_ext; skipped",
                kversion::series(&group[0].version)
            ),
        }
    }
    Ok(kernels)
}

/// The kernel if it has sched_ext, None if its config lacks it; downloads
/// Debian kernels the first time.
pub fn fetch(a: &Available) -> Result<Option<Kernel>> {
    let kdir = kernel_dir(&a.version)?;
    if let Some(k) = cached(&kdir, &a.version) {
        return Ok(Some(k));
    }
    if kdir.join("no-sched-ext").exists() {
        return Ok(None);
    }
    match a.source {
        Source::Split | Source::BinaryOnly | Source::Image => download(&kdir, a),
        Source::Custom => bail!(
            "{} is not built (or its build was interrupted): run cargo xtask kernel-build --series {}",
            a.version,
            kversion::series(&a.version)
        ),
        Source::Cached => bail!(
            "{} is only partly cached and apt no longer offers it: remove {}",
            a.version,
            kdir.display()
        ),
    }
}

pub fn has_sched_ext(config: &str) -> bool {
    config
        .lines()
        .any(|l| l.trim() == "CONFIG_SCHED_CLASS_EXT=y")
}

fn download(kdir: &Path, a: &Available) -> Result<Option<Kernel>> {
    let version = &a.version;
    let work = kdir.join("download");
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    eprintln!("xtask: downloading kernel {version}");
    let packages = match a.source {
        Source::Split => vec![
            format!("linux-base-{version}"),
            format!("linux-binary-{version}"),
        ],
        Source::BinaryOnly => vec![format!("linux-binary-{version}")],
        _ => vec![format!("linux-image-{version}")],
    };
    let debs = download_debs(&packages, &work)?;
    let tree = work.join("tree");
    fs::create_dir_all(&tree)?;
    for deb in debs {
        extract(&deb, &tree, a.source)?;
    }
    let vmlinuz = find_file(&tree, |name| {
        name == "vmlinuz" || name.starts_with("vmlinuz-")
    })
    .with_context(|| format!("the packages of {version} hold no vmlinuz"))?;
    let config = find_file(&tree, |name| {
        name == "config" || name.starts_with("config-")
    });
    let sched_ext = match &config {
        Some(config) => has_sched_ext(
            &fs::read_to_string(config).with_context(|| format!("reading {}", config.display()))?,
        ),
        None if a.source == Source::BinaryOnly => crate::kimage::has_sched_ext(&vmlinuz)?,
        None => bail!("the packages of {version} hold no config file"),
    };
    if !sched_ext {
        let why = if config.is_some() {
            "its config lacks CONFIG_SCHED_CLASS_EXT=y\n"
        } else {
            "its image's BTF has no struct sched_ext_ops\n"
        };
        fs::write(kdir.join("no-sched-ext"), why)?;
        let _ = fs::remove_dir_all(&work);
        eprintln!("xtask: kernel {version} has no sched_ext (recorded)");
        return Ok(None);
    }
    match &config {
        Some(config) => fs::rename(config, kdir.join("config"))?,
        None => fs::write(
            kdir.join(SCHED_EXT_IN_IMAGE),
            "the archive has no linux-base package (config) for this kernel; \
             its image's BTF has struct sched_ext_ops\n",
        )?,
    }
    // The image last: see cached().
    fs::rename(&vmlinuz, kdir.join("vmlinuz"))?;
    let _ = fs::remove_dir_all(&work);
    Ok(cached(kdir, version))
}

/// Unpacks a kernel package. The one-package layout also holds every
/// module (hundreds of MB): only its /boot is extracted.
fn extract(deb: &Path, tree: &Path, source: Source) -> Result<()> {
    match source {
        Source::Image => run(Command::new("sh")
            .arg("-c")
            .arg(r#"dpkg-deb --fsys-tarfile "$0" | tar -x -C "$1" --wildcards './boot/*'"#)
            .arg(deb)
            .arg(tree))
        .with_context(|| format!("extracting /boot from {}", deb.display())),
        _ => run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(tree)),
    }
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

/// `cargo xtask kernels`: every kernel with what is known of its sched_ext
/// support. With `probe`, unknown ones are downloaded to find out.
pub fn list(probe: bool) -> Result<()> {
    let all = available()?;
    if probe {
        // Newest first, so the kernels most likely to be booted come first.
        for a in all.iter().rev() {
            if a.source != Source::Custom && status(&a.version)? == Status::Unknown {
                // One failed download should not hide what the others show.
                if let Err(e) = fetch(a) {
                    eprintln!("xtask: could not probe {}: {e:#}", a.version);
                }
            }
        }
    }
    println!(
        "{:<24} {:<7} {:<20} sched_ext",
        "kernel", "series", "packages"
    );
    let (mut yes, mut no, mut unknown) = (0, 0, 0);
    for a in &all {
        let packages = match a.source {
            Source::Split => "linux-binary + base",
            Source::BinaryOnly => "linux-binary only",
            Source::Image => "linux-image",
            Source::Custom => "kernel-build",
            Source::Cached => "cache only",
        };
        let known = match status(&a.version)? {
            Status::SchedExt => {
                yes += 1;
                if kernel_dir(&a.version)?.join("config").is_file() {
                    "yes (config, cached)"
                } else {
                    "yes (image BTF, cached)"
                }
            }
            Status::NoSchedExt => {
                no += 1;
                "no (verified)"
            }
            Status::Unknown => {
                unknown += 1;
                "? (not downloaded)"
            }
        };
        println!(
            "{:<24} {:<7} {:<20} {known}",
            a.version,
            kversion::series(&a.version),
            packages
        );
    }
    println!(
        "\n{} kernels: {yes} with sched_ext, {no} without, {unknown} unknown{}",
        all.len(),
        if unknown > 0 {
            " (cargo xtask kernels --probe downloads them to find out)"
        } else {
            ""
        }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sched_ext_is_read_from_the_config() {
        assert!(has_sched_ext("CONFIG_BPF=y\nCONFIG_SCHED_CLASS_EXT=y\n"));
        assert!(!has_sched_ext("# CONFIG_SCHED_CLASS_EXT is not set\n"));
        assert!(!has_sched_ext("CONFIG_SCHED_CLASS_EXT=m\n"));
    }

    #[test]
    fn command_line_choices_win_over_the_environment() {
        let img = Path::new("/tmp/bzImage");
        assert_eq!(
            KernelChoice::from_args(Some(img), Some("6.16")),
            KernelChoice::Image(img.to_path_buf())
        );
        assert_eq!(
            KernelChoice::from_args(None, Some("6.16")),
            KernelChoice::Version("6.16".into())
        );
    }
}
