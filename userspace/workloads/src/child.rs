//! Forked worker processes that report back over a pipe. Workloads use
//! processes, not threads, so that each worker's `/proc/thread-self`
//! counters are its own and a scheduler sees independent tasks.

use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};

/// A forked worker and the read end of its report pipe.
pub struct Child {
    pid: libc::pid_t,
    report: OwnedFd,
}

/// Forks a process that runs `work` with the write end of its report pipe
/// and exits: 0 when `work` succeeds, 1 (after printing the error) if not.
///
/// The caller must be single-threaded: the child runs ordinary Rust code
/// (allocation included), which is only safe after fork when no other
/// thread could have held a lock.
pub fn spawn(what: &str, work: impl FnOnce(OwnedFd) -> Result<()>) -> Result<Child> {
    let (read_end, write_end) = pipe()?;
    // SAFETY: see the single-threaded requirement above.
    match unsafe { libc::fork() } {
        -1 => bail!("fork failed: {}", std::io::Error::last_os_error()),
        0 => {
            drop(read_end);
            let code = match work(write_end) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("{what} child: {e:#}");
                    1
                }
            };
            // _exit, not exit: the parent's atexit handlers and buffers
            // belong to the parent.
            unsafe { libc::_exit(code) };
        }
        pid => Ok(Child {
            pid,
            report: read_end,
        }),
    }
}

impl Child {
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Reads the report up to its end (the child closed its end of the
    /// pipe) without reaping the child, which may still be running.
    pub fn read_report(&self) -> Result<String> {
        let mut text = String::new();
        File::from(self.report.try_clone()?)
            .read_to_string(&mut text)
            .with_context(|| format!("reading the report of child {}", self.pid))?;
        Ok(text)
    }

    /// Reads the whole report, reaps the process, and fails unless it
    /// exited with status 0.
    pub fn finish(self, what: &str) -> Result<String> {
        let mut text = String::new();
        let read = File::from(self.report).read_to_string(&mut text);
        let mut status = 0;
        // Reap even when the read failed, so no zombie is left behind.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
        read.with_context(|| format!("reading the report of {what} child {}", self.pid))?;
        if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            bail!("{what} child {} failed (status {status:#x})", self.pid);
        }
        Ok(text)
    }
}

/// A pipe whose ends close on exec.
pub fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        bail!("pipe failed: {}", std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 just returned these two descriptors, owned by no one.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reports_come_back_and_failures_are_errors() {
        let ok = spawn("test", |out| {
            writeln!(File::from(out), "hello")?;
            Ok(())
        })
        .unwrap();
        assert_eq!(ok.finish("test").unwrap(), "hello\n");
        let bad = spawn("test", |_| bail!("deliberate")).unwrap();
        let err = bad.finish("test").unwrap_err().to_string();
        assert!(
            err.contains("test child") && err.contains("failed"),
            "{err}"
        );
    }
}
