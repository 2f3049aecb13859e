//! Whom a queue's waits depend on: the membership of the other side that
//! opened this queue epoch, not whichever process holds that member ID.
//!
//! A member ID changes hands: a finished process leaves, a new one claims
//! the ID and opens the queue. A wait bound to the holder it happened to
//! see would fail when that holder leaves, even though it never took part
//! in the queue (the receiver would abort with the new sender on its way).
//! So a wait is bound to the other side only once that side's current
//! membership has opened this epoch (its counters, in its export area,
//! carry the epoch; a claim zeroes them); then its death or leaving is
//! `PeerGone`. Until then a holder that leaves fails nothing: the wait
//! goes on while a live process holds the ID, and for `JOIN_WAIT` after
//! none does (`NotAttached`). A holder that dies holding the ID (its slot
//! still active, its lock gone) is `PeerGone` at once, opened or not, as
//! for messages. No member blocks forever on another.

use super::local::LocalQueue;
use crate::layout::QueueCounters;
use crate::membership::JOIN_WAIT;
use crate::wait::{wait_until, Peer};
use crate::{Error, Result};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How often a wait for the other side to open the queue re-checks who
/// holds its ID (opening wakes the wait at once; this only notices a
/// holder going or coming).
const RECHECK: Duration = Duration::from_millis(50);

impl LocalQueue<'_> {
    /// Waits until `ready()` holds on `word`, which member `side` makes
    /// true once it has opened this queue; `counters` are that side's.
    pub(super) fn wait_for_side(
        &self,
        side: u32,
        counters: &QueueCounters,
        word: &AtomicU32,
        ready: impl FnMut() -> bool,
    ) -> Result<()> {
        let epoch = self.epoch;
        wait_for(
            self.space,
            side,
            word,
            |p| opened(self.space, p, counters, epoch),
            ready,
        )
    }
}

/// Waits until `ready()` holds on `word`, which member `side` makes true.
/// `opened(peer)` says whether that membership of `side` has joined what
/// is waited for; only then is the wait bound to it.
pub(super) fn wait_for(
    space: &crate::Space,
    side: u32,
    word: &AtomicU32,
    opened: impl Fn(Peer) -> bool,
    mut ready: impl FnMut() -> bool,
) -> Result<()> {
    let deadline = space.timeout().map(|t| Instant::now() + t);
    let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let mut unheld_since: Option<Instant> = None;
    loop {
        if ready() {
            return Ok(());
        }
        if space.destroyed() {
            return Err(Error::Destroyed);
        }
        match space.active_peer(side) {
            Some(peer) if opened(peer) => {
                return match left() {
                    Some(t) if t.is_zero() => Err(Error::TimedOut),
                    t => wait_until(space, word, Some(peer), t, ready),
                }
            }
            // Died holding the ID (active, its lock gone): whatever it was
            // to do here, it will not do as itself.
            Some(_) if !space.alive(side) => return Err(Error::PeerGone(side)),
            _ => {}
        }
        if space.alive(side) {
            unheld_since = None;
        } else if unheld_since.get_or_insert_with(Instant::now).elapsed() >= JOIN_WAIT {
            return Err(Error::NotAttached(side));
        }
        let nap = match left() {
            Some(t) if t.is_zero() => return Err(Error::TimedOut),
            Some(t) => t.min(RECHECK),
            None => RECHECK,
        };
        match wait_until(space, word, None, Some(nap), &mut ready) {
            Err(Error::TimedOut) => {}
            done => return done,
        }
    }
}

/// Has membership `p` opened the queue of `epoch`? Its counters are read
/// between two reads of its generation, so they are that membership's
/// (a claim zeroes them while the generation is odd).
fn opened(space: &crate::Space, p: Peer, counters: &QueueCounters, epoch: u64) -> bool {
    let joined = counters.epoch.load(Ordering::Acquire) == epoch;
    joined && space.slot(p.id).generation.load(Ordering::Acquire) == p.generation
}
