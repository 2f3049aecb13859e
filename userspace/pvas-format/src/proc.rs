//! Process identity: a pid plus its start time, so a recycled pid is never
//! mistaken for the member that died.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Start time of `pid` in clock ticks since boot (/proc/PID/stat field 22),
/// or None if there is no such process.
pub fn start_time(pid: u32) -> Option<u64> {
    sky_proc::Stat::of_process(pid).map(|s| s.start_time)
}

/// A member's label in the member table: pid in the low 32 bits, the low
/// 32 bits of its start time in the high.
pub fn owner_word(pid: u32, start: u64) -> u64 {
    (start << 32) | pid as u64
}

pub use sky_proc::real_uid;

/// A process held by a pidfd: a signal sent through it reaches that
/// process or none, never one that reused its pid, and it says when the
/// process has exited.
#[derive(Debug)]
pub struct Process {
    pid: u32,
    fd: OwnedFd,
}

impl Process {
    /// The process that has `pid` now, if any.
    pub fn open(pid: u32) -> Option<Process> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        // SAFETY: a descriptor the kernel just gave us, owned from here.
        (fd >= 0).then(|| Process {
            pid,
            fd: unsafe { OwnedFd::from_raw_fd(fd as i32) },
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Has it exited? (A pidfd polls readable then.)
    pub fn exited(&self) -> bool {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        unsafe { libc::poll(&mut p, 1, 0) != 0 }
    }

    /// Sends `signal` to it (ESRCH once it has exited).
    pub fn signal(&self, signal: i32) -> std::io::Result<()> {
        // SAFETY: pidfd_send_signal with our pidfd and no siginfo.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.fd.as_raw_fd(),
                signal,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

pub fn my_pid() -> u32 {
    std::process::id()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_start_time_is_known_and_stable() {
        let me = my_pid();
        let t = start_time(me).unwrap();
        assert_eq!(start_time(me), Some(t));
        assert_eq!(start_time(u32::MAX - 1), None);
    }

    #[test]
    fn a_held_process_is_signalled_and_seen_to_exit() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let p = Process::open(child.id()).unwrap();
        assert!(!p.exited());
        p.signal(libc::SIGTERM).unwrap();
        child.wait().unwrap();
        assert!(p.exited());
        // Reaped: the pid may be anyone's now, the pidfd still is its.
        assert!(p.signal(libc::SIGTERM).is_err());
        assert!(Process::open(u32::MAX - 1).is_none());
    }

    #[test]
    fn own_real_uid_is_the_one_the_kernel_gives() {
        // SAFETY: getuid has no preconditions.
        assert_eq!(real_uid(my_pid()), Some(unsafe { libc::getuid() }));
        assert_eq!(real_uid(u32::MAX - 1), None);
    }
}
