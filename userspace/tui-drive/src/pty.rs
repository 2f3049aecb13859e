//! A program on a pseudo-terminal, and its screen as a terminal emulator
//! (vt100) shows it: what `sky-tui-drive` types into and reads.

use anyhow::{anyhow, bail, Context, Result};
use std::fs::File;
use std::io::{self, ErrorKind, Read, Write};
use std::num::NonZeroU16;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The terminal emulator's answers to the queries a program blocks on
/// until a terminal replies; they are written back to the program.
#[derive(Default)]
pub(super) struct Replies(pub(super) Vec<u8>);

impl vt100::Callbacks for Replies {
    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        _: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        let first = params.first().and_then(|p| p.first()).copied().unwrap_or(0);
        match (i1, c, first) {
            // ESC[6n, cursor position report (crossterm's cursor::position()
            // waits for it): 1-based, kept on the screen when the cursor
            // sits past the last column waiting to wrap.
            (None, 'n', 6) => {
                let (row, col) = screen.cursor_position();
                let col = col.min(screen.size().1.get() - 1);
                self.0
                    .extend(format!("\x1b[{};{}R", row + 1, col + 1).into_bytes());
            }
            // ESC[c, primary device attributes (crossterm's keyboard
            // enhancement probe waits for it): a plain VT102.
            (None, 'c', 0) => self.0.extend(b"\x1b[?6c"),
            _ => {}
        }
    }
}

/// A program running on a pseudo-terminal, and its screen as a terminal
/// emulator shows it.
pub struct Driver {
    child: Child,
    master: File,
    term: vt100::Parser<Replies>,
    status: Option<ExitStatus>,
    killed: bool,
    /// Reading the master failed with EIO: no process has the terminal
    /// open any more, so nothing more will ever be drawn.
    hung_up: bool,
}

impl Driver {
    /// Starts `program` (with its arguments) on a new `cols` x `rows`
    /// pseudo-terminal as its controlling terminal.
    pub fn spawn(program: &[String], cols: u16, rows: u16) -> Result<Driver> {
        let (Some(name), Some(c), Some(r)) = (
            program.first(),
            NonZeroU16::new(cols),
            NonZeroU16::new(rows),
        ) else {
            bail!("tui-drive needs a program, and a terminal of at least 1x1");
        };
        let (master, slave) = open_pty(cols, rows)?;
        let mut cmd = Command::new(name);
        cmd.args(&program[1..])
            .env("TERM", "xterm-256color")
            // Inherited LINES/COLUMNS would override the window size in
            // curses programs.
            .env_remove("LINES")
            .env_remove("COLUMNS")
            .stdin(Stdio::from(slave.try_clone()?))
            .stdout(Stdio::from(slave.try_clone()?))
            .stderr(Stdio::from(slave));
        // SAFETY: setsid and ioctl are async-signal-safe, as code between
        // fork and exec must be; fd 0 is the slave by the time this runs.
        unsafe {
            cmd.pre_exec(|| {
                // A new session without a controlling terminal, then the
                // slave as its terminal: programs that open /dev/tty
                // (crossterm does) get the pty, and ^C goes to them.
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            })
        };
        let child = cmd.spawn().with_context(|| format!("starting {name:?}"))?;
        // Dropping the command closes our copies of the slave, so that the
        // master reports a hang-up once the program is gone.
        drop(cmd);
        Ok(Driver {
            child,
            master: File::from(master),
            term: vt100::Parser::new_with_callbacks(r, c, 0, Replies::default()),
            status: None,
            killed: false,
            hung_up: false,
        })
    }

    /// The screen's rows as text (trailing blanks trimmed).
    pub fn rows(&self) -> Vec<String> {
        let width = self.term.screen().size().1.get();
        self.term.screen().rows(0, width).collect()
    }

    /// Whether `text` is on some row of the screen.
    pub fn shows(&self, text: &str) -> bool {
        self.rows().iter().any(|row| row.contains(text))
    }

    /// Whether the program left the alternate screen and shows the cursor.
    pub fn restored(&self) -> bool {
        let screen = self.term.screen();
        !screen.alternate_screen() && !screen.hide_cursor()
    }

    /// Reads what the program wrote, waiting up to `wait` for the first
    /// bytes, and answers its queries; returns the bytes read.
    fn pump(&mut self, wait: Duration) -> Result<usize> {
        if self.hung_up {
            std::thread::sleep(wait);
            return Ok(0);
        }
        let mut pfd = libc::pollfd {
            fd: self.master.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = wait.as_millis().min(60_000) as libc::c_int;
        // SAFETY: one valid pollfd for the duration of the call.
        if unsafe { libc::poll(&mut pfd, 1, ms) } <= 0 {
            return Ok(0); // nothing yet, or a signal (EINTR): callers loop
        }
        // One read a call: callers loop, and check their deadlines between
        // reads even when the program never stops drawing.
        let mut buf = [0u8; 16384];
        let n = match self.master.read(&mut buf) {
            Ok(n) => {
                self.hung_up = n == 0;
                n
            }
            Err(e) if matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::WouldBlock) => 0,
            // Linux's way to say that no one has the slave open any more.
            Err(e) if e.raw_os_error() == Some(libc::EIO) => {
                self.hung_up = true;
                0
            }
            Err(e) => return Err(e).context("reading the pseudo-terminal"),
        };
        self.term.process(&buf[..n]);
        let replies = std::mem::take(&mut self.term.callbacks_mut().0);
        if !replies.is_empty() && !self.hung_up {
            self.master
                .write_all(&replies)
                .context("answering a terminal query")?;
        }
        Ok(n)
    }

    /// Waits until `text` is on the screen, for at most `timeout`.
    pub fn wait_for(&mut self, text: &str, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.shows(text) {
                return Ok(());
            }
            if self.hung_up {
                bail!("the program closed its terminal before {text:?} appeared");
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!("{text:?} did not appear within {timeout:?}");
            }
            self.pump(left.min(Duration::from_millis(100)))?;
        }
    }

    /// Types `bytes` into the program's terminal.
    pub fn send(&mut self, bytes: &[u8]) -> Result<()> {
        if self.hung_up || self.exited()? {
            bail!("the program has exited");
        }
        self.master.write_all(bytes).context("typing a key")
    }

    /// Keeps the screen up to date for `time`.
    pub fn idle(&mut self, time: Duration) -> Result<()> {
        let deadline = Instant::now() + time;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            self.pump(left.min(Duration::from_millis(100)))?;
        }
        Ok(())
    }

    fn exited(&mut self) -> Result<bool> {
        if self.status.is_none() {
            self.status = self.child.try_wait().context("waiting for the program")?;
        }
        Ok(self.status.is_some())
    }

    /// Gives the program `grace` to exit, kills it if it is still running,
    /// then reads its last output (leaving the alternate screen comes just
    /// before the exit).
    pub fn finish(&mut self, grace: Duration) -> Result<()> {
        let deadline = Instant::now() + grace;
        // Keep reading meanwhile: a program blocked writing to a full
        // terminal never exits.
        while !self.exited()? && Instant::now() < deadline {
            self.pump(Duration::from_millis(20))?;
        }
        if self.status.is_none() {
            self.killed = true;
            // Fails only when it has just exited; wait() reaps it either way.
            let _ = self.child.kill();
            self.status = Some(self.child.wait().context("reaping the program")?);
        }
        // Bounded: a descendant that kept the terminal could draw forever.
        let deadline = Instant::now() + Duration::from_secs(1);
        while !self.hung_up && Instant::now() < deadline {
            if self.pump(Duration::from_millis(100))? == 0 {
                break;
            }
        }
        Ok(())
    }

    /// The result line's view of the program's end: whether it exited by
    /// itself, and its exit code (128 + signal when a signal ended it,
    /// `none` when it had to be killed or still runs).
    pub fn exit_fields(&self) -> (bool, String) {
        match self.status {
            Some(s) if !self.killed => {
                let code = s.code().or(s.signal().map(|sig| 128 + sig));
                (true, code.map_or("none".into(), |c| c.to_string()))
            }
            _ => (false, "none".into()),
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if self.status.is_none() {
            // Never leave a program running behind a failed test or run.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A new pseudo-terminal of `cols` x `rows`: the master (non-blocking) and
/// the slave, both closed on exec so that no other child inherits them.
fn open_pty(cols: u16, rows: u16) -> Result<(OwnedFd, OwnedFd)> {
    let ok = |ret: libc::c_int, what: &str| match ret {
        0.. => Ok(ret),
        _ => Err(anyhow!("{what}: {}", io::Error::last_os_error())),
    };
    let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: plain libc calls on descriptors this function owns, and a
    // name buffer passed with its length.
    unsafe {
        let fd = ok(libc::posix_openpt(flags), "opening a pseudo-terminal")?;
        let master = OwnedFd::from_raw_fd(fd);
        ok(libc::grantpt(fd), "granting the pseudo-terminal")?;
        ok(libc::unlockpt(fd), "unlocking the pseudo-terminal")?;
        let mut name = [0 as libc::c_char; 128];
        let err = libc::ptsname_r(fd, name.as_mut_ptr(), name.len());
        if err != 0 {
            let err = io::Error::from_raw_os_error(err);
            bail!("naming the pseudo-terminal: {err}");
        }
        let slave =
            OwnedFd::from_raw_fd(ok(libc::open(name.as_ptr(), flags), "opening the slave")?);
        // The size is set before the program starts: it reads it once at
        // start-up and would draw for the wrong size otherwise.
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        ok(libc::ioctl(fd, libc::TIOCSWINSZ, &size), "TIOCSWINSZ")?;
        let fl = ok(libc::fcntl(fd, libc::F_GETFL), "F_GETFL")?;
        ok(
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK),
            "O_NONBLOCK",
        )?;
        Ok((master, slave))
    }
}
