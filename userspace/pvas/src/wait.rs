//! Waiting on shared memory: spin briefly (the peer is usually a few
//! hundred nanoseconds away), then sleep on a futex in the shared mapping.
//! Every sleep is bounded so a dead peer or a destroyed space is noticed:
//! no member ever blocks forever on another.

use crate::{Error, Result, Space};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const SPIN_ROUNDS: u32 = 4000;
/// How often a sleeping waiter re-checks its peer's liveness.
const CHECK_EVERY: Duration = Duration::from_millis(50);

/// Who is expected to make the condition true: if that member dies or
/// leaves (its slot generation changes), the wait fails.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer {
    pub id: u32,
    pub generation: u32,
}

/// Bit 0 of a wait word: somebody may be asleep on it. The rest counts
/// changes (in steps of 2), so a waker makes the wake system call only
/// when a waiter announced itself: spinning waiters cost nothing.
const SLEEPER: u32 = 1;

pub(crate) fn wake(word: &AtomicU32) {
    if word.fetch_add(2, Ordering::AcqRel) & SLEEPER == 0 {
        return;
    }
    word.fetch_and(!SLEEPER, Ordering::AcqRel);
    // SAFETY: futex on a valid, aligned u32 inside the shared mapping.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            0,
            0,
            0,
        );
    }
}

fn futex_wait(word: &AtomicU32, seen: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: as in wake(); a shared (non-private) futex because the word
    // is mapped by several processes.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            seen,
            &ts as *const _,
            0,
            0,
        );
    }
}

/// Waits until `ready()` holds. `word` is bumped by whoever changes the
/// state `ready` reads.
pub(crate) fn wait_until(
    space: &Space,
    word: &AtomicU32,
    peer: Option<Peer>,
    timeout: Option<Duration>,
    mut ready: impl FnMut() -> bool,
) -> Result<()> {
    for _ in 0..SPIN_ROUNDS {
        if ready() {
            return Ok(());
        }
        std::hint::spin_loop();
    }
    let deadline = timeout.or(space.timeout()).map(|t| Instant::now() + t);
    loop {
        // Announce the sleeper, then look again: a change made before the
        // announcement is seen now, one made after it wakes us.
        let seen = word.fetch_or(SLEEPER, Ordering::AcqRel) | SLEEPER;
        if ready() {
            return Ok(());
        }
        if space.destroyed() {
            return Err(Error::Destroyed);
        }
        if let Some(p) = peer {
            if !space.peer_is(p) {
                return Err(Error::PeerGone(p.id));
            }
        }
        let mut nap = CHECK_EVERY;
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::TimedOut);
            }
            nap = nap.min(left);
        }
        futex_wait(word, seen, nap);
    }
}
