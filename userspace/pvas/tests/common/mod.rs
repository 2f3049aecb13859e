//! Helpers for the multi-process tests: spaces in a private directory on
//! /dev/shm (or under $SKY_PVAS_TEST_DIR, e.g. a DAX mount), and member
//! processes (real fork/exec of sky-pvas-peer).

#![allow(dead_code)]

use sky_pvas::{CreateOptions, Space};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub struct TestSpace {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
    /// The space's name (unique per test process).
    pub name: String,
}

/// Where test spaces go: $SKY_PVAS_TEST_DIR (the VM runs the crash tests
/// on a DAX mount with it: tests/vm/pvas-dax.sh), else /dev/shm.
pub fn test_dir() -> PathBuf {
    std::env::var_os("SKY_PVAS_TEST_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from("/dev/shm"), PathBuf::from)
}

/// A fresh space; its registry entry goes to a private directory too.
pub fn space(name: &str, members: u32, segment_mb: u64) -> TestSpace {
    let dir = tempfile::Builder::new()
        .prefix("sky-pvas-test")
        .tempdir_in(test_dir())
        .unwrap();
    // Same value in every test thread: a private registry for this run.
    std::env::set_var(
        "SKY_PVAS_REGISTRY",
        std::env::temp_dir().join(format!("sky-pvas-reg-{}", std::process::id())),
    );
    let opts = CreateOptions {
        dir: dir.path().to_path_buf(),
        max_members: members,
        segment_size: segment_mb << 20,
        ..Default::default()
    };
    let unique = format!("{name}-{}", std::process::id());
    let created = Space::create(&unique, &opts).unwrap();
    let path = created.path().to_path_buf();
    drop(created);
    TestSpace {
        dir,
        path,
        name: unique,
    }
}

/// A member process whose stdout lines arrive on a channel.
pub struct Peer {
    pub child: Child,
    pub lines: mpsc::Receiver<String>,
}

pub fn peer(
    path: &std::path::Path,
    id: u32,
    role: &str,
    args: &[String],
    env: &[(&str, &str)],
) -> Peer {
    // SKY_PVAS_PEER: where the peer is when the tests run elsewhere than
    // where they were built (tests/vm/pvas-dax.sh).
    let exe = std::env::var_os("SKY_PVAS_PEER")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_sky-pvas-peer").into());
    let mut cmd = Command::new(exe);
    cmd.arg(path).arg(id.to_string()).arg(role).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    member(cmd)
}

/// Any member program (a C one too), its stdout lines on a channel.
pub fn member(mut cmd: Command) -> Peer {
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {:?}: {e}", cmd.get_program()));
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Peer { child, lines: rx }
}

impl Peer {
    /// Waits for exit and returns every line; panics on a failed exit.
    pub fn finish(mut self) -> Vec<String> {
        let status = self.child.wait().unwrap();
        let lines: Vec<String> = self.lines.iter().collect();
        assert!(status.success(), "peer failed ({status}): {lines:?}");
        lines
    }

    /// Like `finish`, but a member still running after `limit` is killed
    /// and the test fails: a hang is a failure, not a stuck test run.
    pub fn finish_within(self, limit: Duration) -> Vec<String> {
        let (status, lines) = self.wait_within(limit);
        match status {
            Some(s) => assert!(s.success(), "peer failed ({s}): {lines:?}"),
            None => panic!("member still running after {limit:?}, killed: {lines:?}"),
        }
        lines
    }

    /// How the member ended (None: still running after `limit`, so killed)
    /// and every line it printed.
    pub fn wait_within(mut self, limit: Duration) -> (Option<ExitStatus>, Vec<String>) {
        let end = std::time::Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break Some(status);
            }
            if std::time::Instant::now() >= end {
                self.kill();
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        (status, self.lines.iter().collect())
    }

    /// The next line, within `timeout`.
    pub fn line(&self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok()
    }

    /// Lines that arrive within `window`.
    pub fn lines_for(&self, window: Duration) -> Vec<String> {
        let end = std::time::Instant::now() + window;
        let mut out = Vec::new();
        while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(l) => out.push(l),
                Err(_) => break,
            }
        }
        out
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Peer {
    /// A failed test must not leave members running (they would hold the
    /// test's output pipes open).
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}

pub fn strs(v: &[impl ToString]) -> Vec<String> {
    v.iter().map(ToString::to_string).collect()
}

/// A member that only holds `id` (until killed or the space goes), started
/// and attached.
pub fn hold(path: &std::path::Path, id: u32) -> Peer {
    let p = peer(path, id, "hold", &[], &[]);
    assert_eq!(
        p.line(Duration::from_secs(10)).as_deref(),
        Some("ok holding"),
        "member {id} did not attach"
    );
    p
}
