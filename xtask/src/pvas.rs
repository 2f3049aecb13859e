//! Test-only sky-pvas programs for the VM, built here with the test-only
//! fault injection. The crash tests (tests/vm/pvas-dax.sh): placed in the
//! guest as /bin/sky-pvas-crash-tests, with the member program it starts
//! as /bin/sky-pvas-crash-peer (the script names it in SKY_PVAS_PEER: the
//! path cargo baked into the tests may lie under /tmp, which the guest
//! mounts over). The hostile end of a queue between machines
//! (tests/vm/rdma-bed.sh): /bin/sky-pvas-hostile; and its end in C, through
//! the C API: /bin/sky-pvas-c-remote.

use crate::paths::{release_bin, workspace_root};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where the crash-test binary and its peer go in the guest.
pub const CRASH_TESTS: &str = "/bin/sky-pvas-crash-tests";
pub const CRASH_PEER: &str = "/bin/sky-pvas-crash-peer";

/// sky-pvas's test targets that need the test-only fault injection: those
/// Cargo.toml gives `required-features = ["fault-injection"]` and those
/// with parts under `cfg(feature = "fault-injection")` (crash). `cargo
/// xtask test` runs these, with the library's own, built with the
/// feature; a test below holds the list to Cargo.toml and the sources.
pub const FAULT_INJECTION_TESTS: [&str; 4] = ["power_loss", "hostile", "split", "crash"];

/// Builds the crash tests (release) and returns what the guest needs, as
/// `VmConfig::extra_binaries` takes it.
pub fn crash_test_binaries() -> Result<Vec<(PathBuf, PathBuf)>> {
    let out = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(workspace_root())
        .args([
            "test",
            "--release",
            "-p",
            "sky-pvas",
            // The kill points inside the queue (and the peer built with
            // them) exist only with the test-only feature.
            "--features",
            "fault-injection",
            "--test",
            "crash",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(Stdio::inherit())
        .output()
        .context("starting cargo")?;
    if !out.status.success() {
        bail!("building the sky-pvas crash tests failed: {}", out.status);
    }
    let exe = crash_executable(&String::from_utf8_lossy(&out.stdout))
        .context("cargo named no executable for the crash tests")?;
    // Built by the same cargo run, with the same features.
    let peer = release_bin("sky-pvas-peer")?;
    Ok(vec![
        (exe, PathBuf::from(CRASH_TESTS)),
        (peer, PathBuf::from(CRASH_PEER)),
    ])
}

/// Where the hostile end of a queue between machines goes in the guest.
pub const HOSTILE: &str = "/bin/sky-pvas-hostile";

/// Builds sky-pvas-hostile (release, with the test-only fault injection:
/// a normal build has no such program) and returns it as
/// `VmConfig::extra_binaries` takes it.
pub fn hostile_binary() -> Result<Vec<(PathBuf, PathBuf)>> {
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(workspace_root())
        .args(["build", "--release", "-p", "sky-pvas", "--features"])
        .args(["fault-injection", "--bin", "sky-pvas-hostile"])
        .status()
        .context("starting cargo")?;
    if !status.success() {
        bail!("building sky-pvas-hostile failed: {status}");
    }
    Ok(vec![(
        release_bin("sky-pvas-hostile")?,
        PathBuf::from(HOSTILE),
    )])
}

/// Where the C end of a queue between machines goes in the guest, and the
/// library it loads (its rpath names that directory).
pub const C_REMOTE: &str = "/bin/sky-pvas-c-remote";
const C_REMOTE_LIB_DIR: &str = "/usr/lib/sky-pvas";

/// Builds libsky_pvas.so (release, no test features) and the C end of a
/// queue between machines (userspace/pvas/tests/c/remote.c) against it and
/// include/sky_pvas.h, as a user of the C API would, and returns it as
/// `VmConfig::extra_binaries` takes it, with the library at
/// `C_REMOTE_LIB_DIR`. The library is copied first: a later build with
/// other features cannot change it.
pub fn c_remote_binary() -> Result<Vec<(PathBuf, PathBuf)>> {
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(workspace_root())
        .args(["build", "--release", "-p", "sky-pvas", "--lib"])
        .status()
        .context("starting cargo")?;
    if !status.success() {
        bail!("building libsky_pvas.so failed: {status}");
    }
    let dir = workspace_root().join("target/vm/c-remote");
    std::fs::create_dir_all(&dir)?;
    let lib = dir.join("libsky_pvas.so");
    std::fs::copy(release_bin("libsky_pvas.so")?, &lib)
        .with_context(|| format!("copying libsky_pvas.so to {}", lib.display()))?;
    let crate_dir = workspace_root().join("userspace/pvas");
    let exe = dir.join("sky-pvas-c-remote");
    let status = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Werror", "-O2", "-I"])
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c/remote.c"))
        .arg("-L")
        .arg(&dir)
        .arg(format!("-Wl,-rpath,{C_REMOTE_LIB_DIR}"))
        .args(["-lsky_pvas", "-o"])
        .arg(&exe)
        .status()
        .context("starting cc")?;
    if !status.success() {
        bail!("compiling tests/c/remote.c failed: {status}");
    }
    Ok(vec![
        (exe, PathBuf::from(C_REMOTE)),
        (lib, Path::new(C_REMOTE_LIB_DIR).join("libsky_pvas.so")),
    ])
}

/// The `executable` of the `crash` test target in cargo's JSON messages.
fn crash_executable(json: &str) -> Option<PathBuf> {
    json.lines()
        .filter(|l| l.contains(r#""reason":"compiler-artifact""#))
        .filter(|l| l.contains(r#""name":"crash""#) && l.contains(r#""kind":["test"]"#))
        .find_map(|l| {
            let rest = l.split_once(r#""executable":""#)?.1;
            Some(PathBuf::from(rest.split_once('"')?.0))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crash_test_executable_is_found() {
        let json = concat!(
            r#"{"reason":"compiler-artifact","target":{"kind":["bin"],"name":"sky-pvas-peer"},"executable":"/t/release/sky-pvas-peer"}"#,
            "\n",
            r#"{"reason":"compiler-artifact","target":{"kind":["test"],"name":"crash"},"executable":"/t/release/deps/crash-0123"}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
        );
        assert_eq!(
            crash_executable(json),
            Some(PathBuf::from("/t/release/deps/crash-0123"))
        );
        assert_eq!(crash_executable("{}"), None);
    }

    #[test]
    fn every_test_that_needs_fault_injection_is_run_with_it() {
        let pvas = workspace_root().join("userspace/pvas");
        let manifest = std::fs::read_to_string(pvas.join("Cargo.toml")).unwrap();
        let mut needed = Vec::new();
        for block in manifest.split("[[test]]").skip(1) {
            let block = block.split("\n[").next().unwrap();
            if !block.contains("\"fault-injection\"") {
                continue;
            }
            let name = block
                .lines()
                .find_map(|l| l.trim().strip_prefix("name = \""))
                .and_then(|n| n.strip_suffix('"'))
                .expect("a [[test]] with a name");
            needed.push(name.to_string());
        }
        assert!(!needed.is_empty(), "no [[test]] needs fault-injection");
        for entry in std::fs::read_dir(pvas.join("tests")).unwrap() {
            let path = entry.unwrap().path();
            let source = std::fs::read_to_string(&path).unwrap_or_default();
            if source.contains("cfg(feature = \"fault-injection\")") {
                needed.push(path.file_stem().unwrap().to_string_lossy().to_string());
            }
        }
        for name in needed {
            assert!(
                FAULT_INJECTION_TESTS.contains(&name.as_str()),
                "sky-pvas's test {name} needs fault-injection but is not in FAULT_INJECTION_TESTS"
            );
        }
    }
}
