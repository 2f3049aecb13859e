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

/// The clang for BPF (and any C xtask builds): `$BPF_CLANG`, which
/// .cargo/config.toml sets to scripts/bpf-clang unless it was set, else
/// that script (xtask run outside cargo).
pub fn bpf_clang() -> PathBuf {
    std::env::var_os("BPF_CLANG")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("scripts/bpf-clang"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// scripts/bpf-clang with PATH holding only fake clangs (each says its
    /// version, or its own name and arguments) and the tools it uses.
    fn bpf_clang_among(clangs: &[(&str, &str)]) -> std::process::Output {
        let dir = tempfile::tempdir().unwrap();
        for tool in ["seq", "sed", "head"] {
            let real = ["/usr/bin", "/bin"]
                .iter()
                .map(|d| Path::new(d).join(tool))
                .find(|p| p.exists())
                .unwrap();
            std::os::unix::fs::symlink(real, dir.path().join(tool)).unwrap();
        }
        for (name, version) in clangs {
            let path = dir.path().join(name);
            std::fs::write(
                &path,
                format!(
                    "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'Some clang version {version} (x)'; \
                     else echo \"{name} $*\"; fi\n"
                ),
            )
            .unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Command::new(workspace_root().join("scripts/bpf-clang"))
            .args(["-target", "bpf"])
            .env("PATH", dir.path())
            .output()
            .unwrap()
    }

    #[test]
    fn bpf_clang_runs_the_first_clang_new_enough() {
        let said = |o: std::process::Output| String::from_utf8_lossy(&o.stdout).trim().to_string();
        // Plain clang too old (an old default): the newest versioned one.
        let out = bpf_clang_among(&[
            ("clang", "15.0.7"),
            ("clang-18", "18.1.8"),
            ("clang-19", "19.1.7"),
        ]);
        assert_eq!(said(out), "clang-19 -target bpf");
        // A plain clang new enough comes first (Arch, Fedora).
        let out = bpf_clang_among(&[("clang", "20.1.0"), ("clang-19", "19.1.7")]);
        assert_eq!(said(out), "clang -target bpf");
        // None new enough: a clear refusal, not an old compiler.
        let out = bpf_clang_among(&[("clang", "17.0.6"), ("clang-17", "17.0.6")]);
        assert_eq!(out.status.code(), Some(127));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no clang >= 18"), "{err}");
    }
}
