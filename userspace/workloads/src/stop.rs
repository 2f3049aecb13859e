//! Ending a workload early: SIGINT or SIGTERM sets a flag instead of
//! killing the process, and the workload stops at its next look and still
//! reports what it did up to then. The flag lives in a shared anonymous
//! mapping made before any fork, so the processes a workload forks (the
//! SKY-1 loop's, the ping-pong pairs) see it set by the signal their
//! parent took, as a scenario sends it to the one PID it knows.

use anyhow::{bail, Result};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

static FLAG: AtomicPtr<AtomicBool> = AtomicPtr::new(std::ptr::null_mut());

extern "C" fn set(_: libc::c_int) {
    let flag = FLAG.load(Ordering::Relaxed);
    if !flag.is_null() {
        // SAFETY: a live mapping (never unmapped); an atomic store is
        // async-signal-safe.
        unsafe { (*flag).store(true, Ordering::Relaxed) };
    }
}

/// The flag, mapped once and shared with every process forked after.
pub fn flag() -> Result<&'static AtomicBool> {
    let mut flag = FLAG.load(Ordering::Acquire);
    if flag.is_null() {
        // SAFETY: a fresh anonymous mapping of one page, checked below.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                std::mem::size_of::<AtomicBool>(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if page == libc::MAP_FAILED {
            bail!("mapping the stop flag: {}", std::io::Error::last_os_error());
        }
        flag = page.cast();
        // A second caller's mapping is dropped in favour of the first.
        if let Err(first) = FLAG.compare_exchange(
            std::ptr::null_mut(),
            flag,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: our own mapping, never published.
            unsafe { libc::munmap(page, std::mem::size_of::<AtomicBool>()) };
            flag = first;
        }
    }
    // SAFETY: mapped above (zeroed: false) and never unmapped.
    Ok(unsafe { &*flag })
}

/// SIGINT and SIGTERM set the flag from now on.
pub fn on_signals() -> Result<()> {
    flag()?;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { libc::signal(sig, set as *const () as libc::sighandler_t) };
    }
    Ok(())
}

/// Whether a stop was asked for (false before `on_signals`).
pub fn requested() -> bool {
    let flag = FLAG.load(Ordering::Relaxed);
    // SAFETY: a live mapping once published.
    !flag.is_null() && unsafe { (*flag).load(Ordering::Relaxed) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_to_the_parent_stops_a_forked_child_too() {
        on_signals().unwrap();
        assert!(!requested());
        let child = crate::child::spawn("stop test", |out| {
            let start = std::time::Instant::now();
            while !requested() {
                if start.elapsed() > std::time::Duration::from_secs(20) {
                    bail!("never saw the stop");
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            std::io::Write::write_all(&mut std::fs::File::from(out), b"stopped")?;
            Ok(())
        })
        .unwrap();
        // SAFETY: a signal to this very thread, taken before raise returns.
        unsafe { libc::raise(libc::SIGTERM) };
        assert!(requested());
        assert_eq!(child.finish("stop test").unwrap(), "stopped");
        flag().unwrap().store(false, Ordering::Relaxed);
    }
}
