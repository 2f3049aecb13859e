//! Where things are: the workspace, its build outputs, and the cache for
//! downloaded kernels (outside the repository).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives inside the workspace")
        .to_path_buf()
}

/// `$SKY_CACHE_DIR`, else `$XDG_CACHE_HOME/scx_sky`, else `~/.cache/scx_sky`.
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("SKY_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let base = match std::env::var_os("XDG_CACHE_HOME") {
        Some(x) => PathBuf::from(x),
        None => PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?).join(".cache"),
    };
    Ok(base.join("scx_sky"))
}

/// The release binaries the VM needs, in cargo's target directory.
pub fn release_bin(name: &str) -> Result<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let path = target.join("release").join(name);
    if !path.exists() {
        bail!(
            "{} is missing: build it with `cargo build --release --workspace`",
            path.display()
        );
    }
    Ok(path)
}

/// Runs a command, failing with its name and status if it fails. Says how
/// long it took, so a CI log shows where its time goes.
pub fn run(cmd: &mut Command) -> Result<()> {
    let started = std::time::Instant::now();
    let status = cmd
        .status()
        .with_context(|| format!("starting {:?}", cmd.get_program()))?;
    eprintln!("xtask: {:.0} s: {:?}", started.elapsed().as_secs_f64(), cmd);
    if !status.success() {
        bail!("{:?} failed: {status}", cmd);
    }
    Ok(())
}

/// Runs a command and returns its standard output.
pub fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("starting {:?}", cmd.get_program()))?;
    if !out.status.success() {
        bail!(
            "{:?} failed: {}: {}",
            cmd,
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
