//! The running scheduler's control socket. One request per connection,
//! one line each way:
//!
//! ```text
//! set NAME|FILE   ->  ok policy=NAME generation=N
//! get             ->  ok policy=NAME generation=N, then every knob
//! list            ->  ok, then one preset per line
//! ```
//!
//! Failures come back as `error: WHY`. The socket lives in a root-owned
//! directory of mode 0700 and is itself mode 0600: only root may switch.
//! A request is at most [`MAX_REQUEST`] bytes and must arrive within
//! [`IO_TIMEOUT`]; the server answers one client at a time on its own
//! thread, so a slow or hostile client delays other clients by at most
//! that, never scheduling (BPF runs on its own) or the stats loop.

use anyhow::{bail, Context, Result};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Where the running scheduler listens.
pub const SOCKET_DIR: &str = "/run/scx_sky";
pub const SOCKET_NAME: &str = "control.sock";
/// Longest request accepted, newline included.
pub const MAX_REQUEST: usize = 4096;
/// How long a client may take to send its request or read the answer.
pub const IO_TIMEOUT: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Switch to a preset or a policy file.
    Set(String),
    /// The running policy, its generation and every knob.
    Get,
    /// The presets.
    List,
}

impl Request {
    /// Parses one request line; the error says what was wrong.
    pub fn parse(line: &str) -> Result<Request, String> {
        let line = line.trim_end_matches(['\n', '\r']);
        let (verb, arg) = match line.split_once(' ') {
            Some((v, a)) => (v, a.trim()),
            None => (line, ""),
        };
        match (verb, arg) {
            ("set", "") => Err("set needs a policy: set NAME|FILE".into()),
            ("set", name) => Ok(Request::Set(name.to_string())),
            ("get", "") => Ok(Request::Get),
            ("list", "") => Ok(Request::List),
            ("get" | "list", _) => Err(format!("{verb} takes no argument")),
            _ => Err(format!(
                "unknown request {:?}: use set NAME|FILE, get or list",
                truncate(line, 40)
            )),
        }
    }

    pub fn line(&self) -> String {
        match self {
            Request::Set(name) => format!("set {name}\n"),
            Request::Get => "get\n".into(),
            Request::List => "list\n".into(),
        }
    }
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The socket path under `dir`.
pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join(SOCKET_NAME)
}

/// The listening end, owned by the running scheduler.
pub struct Server {
    listener: UnixListener,
    path: PathBuf,
}

impl Server {
    /// Makes `dir` (mode 0700, and its parents if missing) if needed and
    /// refuses one that is not a
    /// real directory owned by this user with no access for others (a
    /// squatter could otherwise swap the socket); then replaces any stale
    /// socket and listens, mode 0600.
    pub fn bind(dir: &Path) -> Result<Server> {
        match std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
        {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
        let meta = std::fs::symlink_metadata(dir)
            .with_context(|| format!("checking {}", dir.display()))?;
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o077 != 0 {
            bail!(
                "{} must be a directory owned by uid {me} with no access for others \
                 (found {}, uid {}, mode {:o}); remove it and start again",
                dir.display(),
                if meta.is_dir() {
                    "a directory"
                } else {
                    "something else"
                },
                meta.uid(),
                meta.mode() & 0o7777
            );
        }
        let path = socket_path(dir);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
        }
        let listener = UnixListener::bind(&path)
            .with_context(|| format!("listening on {}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("restricting {}", path.display()))?;
        Ok(Server { listener, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Answers requests until `stop` is set (checked every 100 ms):
    /// `handle` turns a request into the answer's text or an error.
    pub fn serve(
        &self,
        stop: &AtomicBool,
        mut handle: impl FnMut(Request) -> Result<String, String>,
    ) {
        while !stop.load(Ordering::Relaxed) {
            if !readable(&self.listener, 100) {
                continue;
            }
            let Ok((stream, _)) = self.listener.accept() else {
                continue;
            };
            // A client that misbehaves only loses its own answer.
            let _ = answer(stream, &mut handle);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Waits up to `ms` for a connection.
fn readable(listener: &UnixListener, ms: i32) -> bool {
    let mut fd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: fd is one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut fd, 1, ms) > 0 }
}

fn answer(
    mut stream: UnixStream,
    handle: &mut impl FnMut(Request) -> Result<String, String>,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let reply = match read_request(&mut stream) {
        Ok(line) => match Request::parse(&line).and_then(&mut *handle) {
            Ok(text) => format!("ok{}{text}\n", if text.is_empty() { "" } else { " " }),
            Err(e) => format!("error: {e}\n"),
        },
        Err(e) => format!("error: {e}\n"),
    };
    stream.write_all(reply.as_bytes())
}

/// One line, at most MAX_REQUEST bytes, within IO_TIMEOUT.
fn read_request(stream: &mut UnixStream) -> Result<String, String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > MAX_REQUEST {
                    return Err(format!("request longer than {MAX_REQUEST} bytes"));
                }
                if buf.contains(&b'\n') {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(format!(
                    "no complete request within {} ms",
                    IO_TIMEOUT.as_millis()
                ))
            }
            Err(e) => return Err(format!("reading the request: {e}")),
        }
    }
    let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
    String::from_utf8(line.to_vec()).map_err(|_| "the request is not UTF-8 text".to_string())
}

/// Sends `req` to the scheduler listening in `dir` and returns its answer
/// (`ok ...` with the `ok` stripped), or the error it gave. Says plainly
/// when no scheduler listens or the caller may not talk to it.
pub fn request(dir: &Path, req: &Request) -> Result<String> {
    let path = socket_path(dir);
    let mut stream = match UnixStream::connect(&path) {
        Ok(s) => s,
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused) => {
            bail!(
                "no scx_sky is running (nothing listens on {})",
                path.display()
            )
        }
        Err(e) if e.kind() == ErrorKind::PermissionDenied => bail!(
            "permission denied on {}: only root may control scx_sky (try sudo)",
            path.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("connecting to {}", path.display())),
    };
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(req.line().as_bytes())?;
    let mut reply = String::new();
    stream
        .read_to_string(&mut reply)
        .context("reading scx_sky's answer")?;
    if let Some(rest) = reply.strip_prefix("ok") {
        return Ok(rest.trim_start_matches(' ').trim_end().to_string());
    }
    match reply.strip_prefix("error: ") {
        Some(why) => bail!("scx_sky refused: {}", why.trim_end()),
        None => bail!(
            "scx_sky answered something unexpected: {:?}",
            truncate(&reply, 80)
        ),
    }
}

#[cfg(test)]
mod tests;
