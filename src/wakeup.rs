//! What the run loop sleeps on: an eventfd that a statistics request and
//! SIGINT, SIGTERM and SIGHUP write to, so the loop answers at once and
//! otherwise wakes only every `LOOP_PERIOD` (scheduler.rs) for what has no
//! way to wake it (the kernel's exit request, a policy switched by the
//! control socket, CPUs coming online). A wait on crossbeam's channel with
//! a timeout spins (a CPU kept busy in a TCG guest) and a plain sleep
//! between looks makes every answer wait for the next look: poll(2) on an
//! eventfd does neither.

use anyhow::{Context, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub struct Wakeup {
    fd: OwnedFd,
}

impl Wakeup {
    pub fn new() -> Result<Arc<Wakeup>> {
        // SAFETY: eventfd takes no pointers; a negative result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context("creating the run loop's eventfd");
        }
        // SAFETY: fd was just created and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Arc::new(Wakeup { fd }))
    }

    /// Wakes the waiter (or its next wait). Async-signal-safe: one
    /// write(2) of eight bytes; a full counter (never, in practice) is a
    /// wake-up pending anyway.
    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes the eight bytes of `one` to an eventfd we own.
        unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Sleeps until woken or `timeout` passes; true if woken. Wake-ups
    /// before the call count: none is lost.
    pub fn wait(&self, timeout: Duration) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one pollfd, valid for the call.
        let ready = unsafe { libc::poll(&mut pfd, 1, ms) } > 0;
        if ready {
            let mut count: u64 = 0;
            // SAFETY: reads eight bytes into `count` (nonblocking).
            unsafe { libc::read(self.fd.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
        }
        ready
    }

    /// `signal` sets `flag` and wakes the waiter.
    pub fn on_signal(self: &Arc<Self>, signal: libc::c_int, flag: Arc<AtomicBool>) -> Result<()> {
        let me = self.clone();
        // SAFETY: the handler only stores to an atomic and calls write(2),
        // both async-signal-safe; it allocates nothing and takes no lock.
        unsafe {
            signal_hook::low_level::register(signal, move || {
                flag.store(true, Ordering::Relaxed);
                me.wake();
            })
        }
        .with_context(|| format!("installing the handler of signal {signal}"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_wake_ends_the_wait_at_once_and_is_not_lost_if_early() {
        let w = Wakeup::new().unwrap();
        let t = Instant::now();
        assert!(!w.wait(Duration::from_millis(30)), "nothing woke it");
        assert!(t.elapsed() >= Duration::from_millis(25));
        w.wake();
        w.wake();
        let t = Instant::now();
        assert!(w.wait(Duration::from_secs(5)), "woken before the wait");
        assert!(t.elapsed() < Duration::from_secs(1));
        assert!(!w.wait(Duration::ZERO), "both wakes drained by one wait");
        let waker = w.clone();
        let t = Instant::now();
        let th = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            waker.wake();
        });
        assert!(w.wait(Duration::from_secs(5)));
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        th.join().unwrap();
    }

    #[test]
    fn a_signal_sets_its_flag_and_wakes() {
        let w = Wakeup::new().unwrap();
        let flag = Arc::new(AtomicBool::new(false));
        w.on_signal(libc::SIGUSR2, flag.clone()).unwrap();
        // SAFETY: raise sends SIGUSR2 to this thread, handled above.
        unsafe { libc::raise(libc::SIGUSR2) };
        assert!(w.wait(Duration::from_secs(5)));
        assert!(flag.load(Ordering::Relaxed));
    }
}
