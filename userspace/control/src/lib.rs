//! The running scheduler's control socket. A connection carries any
//! number of requests, one line each; each answer is one or more lines
//! ended by an empty line:
//!
//! ```text
//! set NAME|FILE   ->  ok policy=NAME generation=N
//! get             ->  ok policy=NAME generation=N, then every knob
//! list            ->  ok, then one preset per line
//! ```
//!
//! Failures come back as `error: WHY`. The socket lives in a root-owned
//! directory of mode 0700 and is itself mode 0600, and the kernel's word
//! on who connected (`SO_PEERCRED`) must be root or the daemon's own user:
//! only root may switch, even if the modes were opened up. A request is at
//! most [`MAX_REQUEST`] bytes and must arrive within [`IO_TIMEOUT`] of the
//! connection or of the previous answer, and a connection lasts at most
//! [`SESSION_LIMIT`], or it is closed. Each client is answered on a thread
//! of its own, at most [`MAX_CLIENTS`] at once, so a slow or hostile
//! client delays nobody but itself, and not for longer than a session:
//! not other clients, not scheduling (BPF runs on its own), not the stats
//! loop. One scheduler owns the socket: a bind refuses a socket something
//! still answers on, and the server removes its socket (and the directory,
//! if it made it) when dropped.

use anyhow::{bail, Context, Result};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the running scheduler listens.
pub const SOCKET_DIR: &str = "/run/scx_sky";
pub const SOCKET_NAME: &str = "control.sock";
/// Longest request accepted, newline included.
pub const MAX_REQUEST: usize = 4096;
/// How long a client may take to send its request or read the answer.
pub const IO_TIMEOUT: Duration = Duration::from_secs(1);
/// Clients answered at once; one more is told to come back later.
pub const MAX_CLIENTS: usize = 8;
/// The longest a connection is kept, however steadily it sends: a client
/// trickling a request just inside IO_TIMEOUT would otherwise hold one of
/// the MAX_CLIENTS places for good. A storm of switches on one connection
/// (the VM tests run 30 s) fits.
pub const SESSION_LIMIT: Duration = Duration::from_secs(60);

/// How a client's error starts when the scheduler said no.
const REFUSED: &str = "scx_sky refused: ";

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
    /// The directory, if this server made it (it goes with the server).
    made_dir: Option<PathBuf>,
    session_limit: Duration,
}

impl Server {
    /// Makes `dir` (mode 0700, and its parents if missing) if needed and
    /// refuses one that is not a
    /// real directory owned by this user with no access for others (a
    /// squatter could otherwise swap the socket); refuses a socket that
    /// something still answers on (another scx_sky); then replaces a stale
    /// one and listens, mode 0600.
    pub fn bind(dir: &Path) -> Result<Server> {
        let made_dir = !dir.exists();
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
        if UnixStream::connect(&path).is_ok() {
            bail!(
                "another scx_sky answers on {}: it keeps its socket (stop it first)",
                path.display()
            );
        }
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
        }
        let listener = UnixListener::bind(&path)
            .with_context(|| format!("listening on {}", path.display()))?;
        let server = Server {
            listener,
            path,
            made_dir: made_dir.then(|| dir.to_path_buf()),
            session_limit: SESSION_LIMIT,
        };
        std::fs::set_permissions(&server.path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("restricting {}", server.path.display()))?;
        Ok(server)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Connections last at most `limit` instead of [`SESSION_LIMIT`].
    pub fn with_session_limit(mut self, limit: Duration) -> Server {
        self.session_limit = limit;
        self
    }

    /// Answers clients until `stop` is set (checked every 100 ms), each on
    /// a thread of its own: `handle` turns a request into the answer's
    /// text or an error.
    pub fn serve<H>(&self, stop: &AtomicBool, handle: H)
    where
        H: Fn(Request) -> Result<String, String> + Send + Sync + 'static,
    {
        let handle = Arc::new(handle);
        let clients = Arc::new(AtomicUsize::new(0));
        while !stop.load(Ordering::Relaxed) {
            if !readable(&self.listener, 100) {
                continue;
            }
            let Ok((mut stream, _)) = self.listener.accept() else {
                continue;
            };
            if let Some(why) = refusal(&stream) {
                let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
                let _ = stream.write_all(format!("error: {why}\n\n").as_bytes());
                continue;
            }
            if clients.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
                clients.fetch_sub(1, Ordering::AcqRel);
                let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
                let _ = stream.write_all(
                    format!("error: {MAX_CLIENTS} clients are connected; try again\n\n").as_bytes(),
                );
                continue;
            }
            // The place is given back however the thread ends (a panic in
            // the handler included), or if it never starts.
            let place = Place(clients.clone());
            let handle = handle.clone();
            let limit = self.session_limit;
            let _ = std::thread::Builder::new()
                .name("sky-control-client".into())
                .spawn(move || {
                    let _place = place;
                    // A client that misbehaves only loses its own answers.
                    let _ = converse(stream, limit, &*handle);
                });
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        if let Some(dir) = &self.made_dir {
            // Only if empty: anything else in it is not ours to remove.
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Why a connected client may not control the scheduler, if it may not:
/// the kernel says who connected (`SO_PEERCRED`), whatever the socket's
/// mode lets through. Root and this daemon's own user may.
fn refusal(stream: &UnixStream) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    match peer_uid(stream) {
        Ok(uid) if uid == 0 || uid == me => None,
        Ok(uid) => Some(format!("uid {uid} may not control scx_sky: root only")),
        Err(e) => Some(format!("cannot tell who connected: {e}")),
    }
}

/// The uid of the process that connected `stream`, as the kernel recorded
/// it at connect time.
pub fn peer_uid(stream: &UnixStream) -> std::io::Result<u32> {
    // SAFETY: ucred is plain data; zero is valid.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt fills at most len bytes of cred, ours.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// One of the MAX_CLIENTS places, taken while a client is answered.
struct Place(Arc<AtomicUsize>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
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

/// Answers one client's requests until it closes, goes quiet for
/// IO_TIMEOUT or sends something that is not a request line.
fn converse(
    mut stream: UnixStream,
    limit: Duration,
    handle: &impl Fn(Request) -> Result<String, String>,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut lines = Lines::default();
    let mut answered = false;
    let mut replies = String::new();
    let ends = Instant::now() + limit;
    loop {
        if Instant::now() >= ends {
            replies += &frame(
                "error:",
                &format!(
                    "session longer than {} ms: connect again",
                    limit.as_millis()
                ),
            );
            return hang_up(stream, &replies);
        }
        match lines.next(&mut stream) {
            Ok(Some(line)) => match Request::parse(&line).and_then(handle) {
                Ok(text) => replies += &frame("ok", &text),
                Err(e) => replies += &frame("error:", &e),
            },
            // The client is done.
            Ok(None) => return stream.write_all(replies.as_bytes()),
            // Quiet after its answers: it is done too.
            Err(Unreadable::Quiet) if answered => return Ok(()),
            Err(e) => {
                replies += &frame("error:", &e.to_string());
                let _ = stream.write_all(replies.as_bytes());
                return Ok(());
            }
        }
        // Requests that came together are answered together: one write,
        // one wakeup of the client, however many it sent at once.
        if !lines.has_line() {
            stream.write_all(replies.as_bytes())?;
            replies.clear();
            answered = true;
        }
    }
}

/// Writes `last` and hangs up on a client that may still be sending: its
/// sends are read and dropped until it closes (for at most IO_TIMEOUT), as
/// closing with its request unread would reset the connection and the
/// client could lose `last` with it.
fn hang_up(mut stream: UnixStream, last: &str) -> std::io::Result<()> {
    stream.write_all(last.as_bytes())?;
    stream.shutdown(std::net::Shutdown::Write)?;
    let until = Instant::now() + IO_TIMEOUT;
    let mut sink = [0u8; 512];
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        stream.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    Ok(())
}

/// `HEAD TEXT`, its lines, and the empty line that ends every answer
/// (so the text's own empty lines are dropped).
fn frame(head: &str, text: &str) -> String {
    let mut out = String::from(head);
    for (i, line) in text.lines().filter(|l| !l.is_empty()).enumerate() {
        out.push_str(if i == 0 { " " } else { "\n" });
        out.push_str(line);
    }
    out.push_str("\n\n");
    out
}

/// Why no request line came.
#[derive(Debug)]
enum Unreadable {
    /// Nothing at all within IO_TIMEOUT.
    Quiet,
    Partial,
    TooLong,
    NotText,
    Failed(std::io::Error),
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreadable::Quiet | Unreadable::Partial => write!(
                f,
                "no complete request within {} ms",
                IO_TIMEOUT.as_millis()
            ),
            Unreadable::TooLong => write!(f, "request longer than {MAX_REQUEST} bytes"),
            Unreadable::NotText => write!(f, "the request is not UTF-8 text"),
            Unreadable::Failed(e) => write!(f, "reading the request: {e}"),
        }
    }
}

/// Request lines out of a stream, each at most MAX_REQUEST bytes and
/// complete within IO_TIMEOUT; what came after a line waits for the next
/// call (a client may send several at once).
#[derive(Default)]
struct Lines {
    buf: Vec<u8>,
}

impl Lines {
    /// The next line; None when the client closed after whole lines. A
    /// last line without its newline counts, so `printf 'get' | nc -N`
    /// works.
    fn next(&mut self, stream: &mut UnixStream) -> Result<Option<String>, Unreadable> {
        let deadline = Instant::now() + IO_TIMEOUT;
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
                if end >= MAX_REQUEST {
                    return Err(Unreadable::TooLong);
                }
                let line: Vec<u8> = self.buf.drain(..=end).collect();
                return text(&line[..end]).map(Some);
            }
            if self.buf.len() >= MAX_REQUEST {
                return Err(Unreadable::TooLong);
            }
            // The whole line within IO_TIMEOUT, not each read: a client
            // sending a byte a second is still cut off.
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.timed_out());
            }
            stream
                .set_read_timeout(Some(left))
                .map_err(Unreadable::Failed)?;
            match stream.read(&mut chunk) {
                Ok(0) if self.buf.is_empty() => return Ok(None),
                Ok(0) => {
                    let line = std::mem::take(&mut self.buf);
                    return text(&line).map(Some);
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(self.timed_out())
                }
                Err(e) => return Err(Unreadable::Failed(e)),
            }
        }
    }

    /// Whether a whole line is already buffered.
    fn has_line(&self) -> bool {
        self.buf.contains(&b'\n')
    }

    fn timed_out(&self) -> Unreadable {
        if self.buf.is_empty() {
            Unreadable::Quiet
        } else {
            Unreadable::Partial
        }
    }
}

fn text(line: &[u8]) -> Result<String, Unreadable> {
    String::from_utf8(line.to_vec()).map_err(|_| Unreadable::NotText)
}

/// A connection to the running scheduler that may carry many requests
/// (a storm of switches need not connect for each).
pub struct Session {
    stream: UnixStream,
    buf: Vec<u8>,
}

impl Session {
    /// Connects to the scheduler listening in `dir`; says plainly when none
    /// listens or the caller may not talk to it.
    pub fn connect(dir: &Path) -> Result<Session> {
        let path = socket_path(dir);
        let stream = match UnixStream::connect(&path) {
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
        Ok(Session {
            stream,
            buf: Vec::new(),
        })
    }

    /// Sends `req` and returns the answer (`ok ...` with the `ok`
    /// stripped), or the error the scheduler gave. The next request must
    /// follow within IO_TIMEOUT, or the scheduler hangs up.
    pub fn ask(&mut self, req: &Request) -> Result<String> {
        self.send(req)?;
        self.receive()
    }

    /// Sends `req` without waiting for its answer: requests may be
    /// pipelined, and [`Session::receive`] returns their answers in order.
    pub fn send(&mut self, req: &Request) -> Result<()> {
        self.send_all(std::slice::from_ref(req))
    }

    /// Sends `reqs` in one write: the scheduler answers them together.
    pub fn send_all(&mut self, reqs: &[Request]) -> Result<()> {
        let lines: String = reqs.iter().map(Request::line).collect();
        let Err(sent) = self.stream.write_all(lines.as_bytes()) else {
            return Ok(());
        };
        // The scheduler may have hung up before it read the request, with
        // a reason (too many clients): that reason is the error to give.
        match self.receive() {
            Err(why) if why.to_string().starts_with(REFUSED) => Err(why),
            _ => Err(sent).context("sending the request to scx_sky"),
        }
    }

    /// The answer to the oldest request not yet answered, as
    /// [`Session::ask`] returns it.
    pub fn receive(&mut self) -> Result<String> {
        let reply = self.answer().context("reading scx_sky's answer")?;
        if let Some(rest) = reply.strip_prefix("ok") {
            return Ok(rest.trim_start_matches(' ').to_string());
        }
        match reply.strip_prefix("error: ") {
            Some(why) => bail!("{REFUSED}{why}"),
            None => bail!(
                "scx_sky answered something unexpected: {:?}",
                truncate(&reply, 80)
            ),
        }
    }

    /// One answer: up to the empty line that ends it (or the end of the
    /// stream), without it.
    fn answer(&mut self) -> Result<String> {
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let answer: Vec<u8> = self.buf.drain(..end + 2).collect();
                return Ok(String::from_utf8_lossy(&answer[..end]).into_owned());
            }
            match self.stream.read(&mut chunk)? {
                0 if self.buf.is_empty() => bail!("scx_sky closed the connection"),
                0 => {
                    let answer = std::mem::take(&mut self.buf);
                    return Ok(String::from_utf8_lossy(&answer).trim_end().to_string());
                }
                n => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

/// One request on a connection of its own.
pub fn request(dir: &Path, req: &Request) -> Result<String> {
    Session::connect(dir)?.ask(req)
}

#[cfg(test)]
mod tests;
