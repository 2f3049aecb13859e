//! The other sched_ext schedulers scx_sky is measured beside (the
//! "anchors"): scx_bpfland, scx_cosmos and scx_lavd, built from the crate
//! registry with the project's toolchain into the cache (never into the
//! repository), once per version. A build that fails is reported with
//! the reason, so the evaluation can say so in its tables.

use crate::paths::cache_dir;
use anyhow::{Context, Result};
use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// A scheduler from the registry, at a pinned version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchor {
    pub name: &'static str,
    pub version: &'static str,
}

/// The anchors, in the order the tables show them. Versions are pinned so
/// that figures from different days compare; raise them here.
pub const ANCHORS: [Anchor; 3] = [
    Anchor {
        name: "scx_bpfland",
        version: "1.1.4",
    },
    Anchor {
        name: "scx_cosmos",
        version: "1.1.7",
    },
    Anchor {
        name: "scx_lavd",
        version: "1.1.4",
    },
];

impl Anchor {
    pub fn by_name(name: &str) -> Option<Anchor> {
        ANCHORS.iter().copied().find(|a| a.name == name)
    }

    fn root(&self) -> Result<PathBuf> {
        Ok(cache_dir()?
            .join("anchors")
            .join(format!("{}-{}", self.name, self.version)))
    }

    /// Where the guest finds it.
    pub fn guest_path(&self) -> PathBuf {
        PathBuf::from("/usr/bin").join(self.name)
    }

    /// The built binary, building it first if needed (minutes: the three
    /// take about 12 on 2 cores, sharing one target directory). Err holds
    /// why it is unavailable, in one line, with the log's path.
    pub fn ensure(&self) -> Result<PathBuf, String> {
        self.ensure_inner().map_err(|e| format!("{e:#}"))
    }

    fn ensure_inner(&self) -> Result<PathBuf> {
        let root = self.root()?;
        let bin = root.join("bin").join(self.name);
        if bin.exists() {
            return Ok(bin);
        }
        let dir = root.parent().context("anchor cache")?.to_path_buf();
        fs::create_dir_all(&dir)?;
        let log_path = dir.join(format!("{}-{}.log", self.name, self.version));
        let log = fs::File::create(&log_path)?;
        eprintln!(
            "xtask: building {} {} (log: {})",
            self.name,
            self.version,
            log_path.display()
        );
        let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["install", self.name, "--version", self.version, "--locked"])
            .arg("--root")
            .arg(&root)
            .arg("--target-dir")
            .arg(dir.join("build"))
            // scx_cargo's own default (`clang`) is missing on Debian.
            .env("BPF_CLANG", crate::paths::bpf_clang())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .status()
            .context("starting cargo install")?;
        if !status.success() || !bin.exists() {
            let text = fs::read_to_string(&log_path).unwrap_or_default();
            let why = text
                .lines()
                .rev()
                .find(|l| l.starts_with("error"))
                .unwrap_or("no error line");
            anyhow::bail!(
                "cargo install {} {} failed ({status}): {why} (log: {})",
                self.name,
                self.version,
                log_path.display()
            );
        }
        Ok(bin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_are_named_and_placed() {
        assert_eq!(Anchor::by_name("scx_lavd").unwrap().version, "1.1.4");
        assert!(Anchor::by_name("scx_sky").is_none());
        assert_eq!(
            ANCHORS[0].guest_path(),
            PathBuf::from("/usr/bin/scx_bpfland")
        );
        for (i, a) in ANCHORS.iter().enumerate() {
            assert!(!ANCHORS[..i].iter().any(|b| b.name == a.name));
        }
    }
}
