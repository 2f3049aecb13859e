//! The one-to-one, one-direction persistent message queue of the
//! persistent-memory paper: fixed-size entries in a ring, a sender and a
//! receiver, and durable state that survives either side's crash or
//! restart and a power loss.
//!
//! - enqueue: wait while full; write the entry (sequence number, length,
//!   checksum over the queue epoch, sequence number and payload), make it
//!   durable, then publish the sender's count.
//! - dequeue: wait while empty; hand the entry over; make the consumed
//!   count durable, then tell the sender.
//! - flush: wait until the receiver has consumed everything enqueued.
//!
//! Push keeps the queue area on the receiver's side, Pull on the
//! sender's. One [`PmQueue`] API, two transports chosen at open:
//! [`PmQueue::create`]/[`PmQueue::open`] between processes of one machine,
//! in a shared space ([`local`]); [`PmQueue::connect`] between machines
//! over RDMA ([`remote`]). Both keep the same epochs, resume and
//! exactly-once promise (see `dequeue_with`).

mod durable;
mod local;
mod peer;
pub mod remote;

pub use durable::durable_floor;

use crate::{Error, Result, Space};
use local::LocalQueue;
use remote::{Peer, RemoteQueue, Role};
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Push,
    Pull,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSpec {
    pub mode: Mode,
    pub sender: u32,
    pub receiver: u32,
    /// Which of the sender's/receiver's queue slots to use.
    pub slot: u32,
    pub entry_size: u32,
    pub entry_count: u32,
}

impl QueueSpec {
    /// The member whose segment holds the queue area.
    pub fn owner(&self) -> u32 {
        match self.mode {
            Mode::Push => self.receiver,
            Mode::Pull => self.sender,
        }
    }

    fn validate(&self) -> Result<()> {
        if self.sender == self.receiver {
            return Err(Error::Invalid("a queue needs two different members".into()));
        }
        if self.slot as usize >= crate::layout::QUEUES_PER_MEMBER {
            return Err(Error::Invalid(format!(
                "queue slot {} outside 0..{}",
                self.slot,
                crate::layout::QUEUES_PER_MEMBER
            )));
        }
        check_geometry(self.entry_size, self.entry_count)
    }

    fn stride(&self) -> u64 {
        stride(self.entry_size)
    }
}

/// Entries of 1 B to 64 MiB, 1 to 1 Mi of them: a queue's geometry, local
/// or between machines.
pub(crate) fn check_geometry(entry_size: u32, entry_count: u32) -> Result<()> {
    if entry_size == 0 || entry_size > 64 << 20 || entry_count == 0 || entry_count > 1 << 20 {
        return Err(Error::Invalid(format!(
            "entry size {entry_size} (1..=64 MiB) or count {entry_count} (1..=1Mi) out of range"
        )));
    }
    Ok(())
}

/// Bytes from one entry to the next: header and payload, whole cache lines.
pub(crate) fn stride(entry_size: u32) -> u64 {
    (ENTRY_HEADER + entry_size as u64).div_ceil(64) * 64
}

/// Entry header: sequence number (u64), length (u32), checksum (u32).
pub(crate) const ENTRY_HEADER: u64 = 16;

/// How far the queue has come, as one side sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The queue epoch.
    pub epoch: u64,
    /// Messages in the queue for good, from the first: a resumed sender
    /// re-sends its messages after this one.
    pub enqueued: u64,
    /// Messages dequeued for good: a resumed receiver gets the next one.
    pub consumed: u64,
}

/// 32-bit FNV-1a: enough to tell a torn, stale or foreign record from a
/// complete one (queue entries and descriptors).
fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u32 {
    bytes.into_iter().fold(0x811c_9dc5, |h: u32, b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    })
}

/// An entry's checksum, over the epoch, sequence number and payload: an
/// entry of an earlier epoch never checks out in this one.
fn checksum(epoch: u64, seq: u64, payload: &[u8]) -> u32 {
    fnv1a(
        epoch
            .to_le_bytes()
            .into_iter()
            .chain(seq.to_le_bytes())
            .chain(payload.iter().copied()),
    )
}

/// Writes the entry for message `seq` carrying `msg` at `e`: payload,
/// length and checksum, then the sequence number, which makes it count.
///
/// # Safety
/// `e` points at an entry slot with room for `ENTRY_HEADER + msg.len()`
/// bytes that no one else writes now.
pub(crate) unsafe fn write_entry(e: *mut u8, epoch: u64, seq: u64, msg: &[u8]) {
    std::ptr::copy_nonoverlapping(msg.as_ptr(), e.add(ENTRY_HEADER as usize), msg.len());
    std::ptr::write_unaligned(e.add(8) as *mut u32, msg.len() as u32);
    std::ptr::write_unaligned(e.add(12) as *mut u32, checksum(epoch, seq, msg));
    std::ptr::write_unaligned(e as *mut u64, seq);
}

/// (sequence number, payload) of the entry at `e` if it is complete and of
/// `epoch`, its length at most `entry_size`.
///
/// # Safety
/// `e` points at an entry slot of `ENTRY_HEADER + entry_size` readable
/// bytes that live as long as the returned payload.
pub(crate) unsafe fn read_entry<'e>(
    e: *const u8,
    epoch: u64,
    entry_size: u32,
) -> Option<(u64, &'e [u8])> {
    let seq = std::ptr::read_unaligned(e as *const u64);
    let len = std::ptr::read_unaligned(e.add(8) as *const u32) as usize;
    let sum = std::ptr::read_unaligned(e.add(12) as *const u32);
    if seq == 0 || len > entry_size as usize {
        return None;
    }
    let payload = std::slice::from_raw_parts(e.add(ENTRY_HEADER as usize), len);
    (checksum(epoch, seq, payload) == sum).then_some((seq, payload))
}

/// The `take` of a plain dequeue: the payload copied into `buf`, its
/// length returned.
pub(crate) fn into_buf(buf: &mut [u8]) -> impl FnOnce(u64, &[u8]) -> Result<usize> + '_ {
    move |_, payload| {
        if payload.len() > buf.len() {
            return Err(Error::TooLarge {
                len: payload.len() as u64,
                cap: buf.len() as u64,
            });
        }
        buf[..payload.len()].copy_from_slice(payload);
        Ok(payload.len())
    }
}

/// One end of a queue: between processes of one machine or between
/// machines, chosen when it is opened; the same calls and promises after.
pub struct PmQueue<'a>(End<'a>);

enum End<'a> {
    Local(LocalQueue<'a>),
    Remote(Box<RemoteQueue>),
}

impl<'a> PmQueue<'a> {
    /// Creates the queue anew — empty, in a new epoch — in the calling
    /// member's segment of `space` (it must be the owner: the receiver for
    /// Push, the sender for Pull). A queue created before with the same
    /// geometry keeps its area (its old messages are discarded); to
    /// continue one, use [`PmQueue::open`].
    pub fn create(space: &'a Space, spec: QueueSpec) -> Result<Self> {
        LocalQueue::create(space, spec).map(|q| PmQueue(End::Local(q)))
    }

    /// Opens the queue its owner created in `space` and continues it where
    /// its durable state says: the first open by the non-owner, and the
    /// resume after a crash, restart or power loss of either side (the
    /// owner included). Waits for the owner to create it if need be.
    pub fn open(space: &'a Space, spec: QueueSpec) -> Result<Self> {
        LocalQueue::open(space, spec).map(|q| PmQueue(End::Local(q)))
    }

    /// Opens this side of a queue between machines and connects to the
    /// other over RDMA (see [`RemoteQueue::open`]): `path` is the owner's
    /// area (Device DAX for persistence) or the pull receiver's state, and
    /// is ignored for a push sender; `fresh` starts a new epoch at the
    /// owner, otherwise both sides go on from their durable state.
    pub fn connect(
        spec: remote::Spec,
        role: Role,
        peer: Peer,
        path: &Path,
        fresh: bool,
    ) -> Result<PmQueue<'static>> {
        RemoteQueue::open(spec, role, peer, path, fresh).map(|q| PmQueue(End::Remote(Box::new(q))))
    }

    /// The messages durably in a local queue and not yet consumed, in
    /// order, read without joining it (for tools and tests): every message
    /// whose enqueue returned, none torn, none twice; the one in flight at
    /// a crash if it became durable.
    pub fn recover(space: &'a Space, spec: QueueSpec) -> Result<Vec<Vec<u8>>> {
        LocalQueue::recover(space, spec)
    }

    /// Enqueues `msg`, blocking while the queue is full; returns its
    /// sequence number once it is durable.
    pub fn enqueue(&self, msg: &[u8]) -> Result<u64> {
        match &self.0 {
            End::Local(q) => q.enqueue(msg),
            End::Remote(q) => q.enqueue(msg),
        }
    }

    /// Enqueues `msgs` in order, blocking while the queue is full; returns
    /// the last one's sequence number once all are durable. Between
    /// machines a push sender moves them in one chain, at most
    /// `remote().batch()` at a time; a local queue takes any number.
    pub fn enqueue_many(&self, msgs: &[&[u8]]) -> Result<u64> {
        match &self.0 {
            End::Local(q) => {
                let mut last = Err(Error::Invalid("no messages to enqueue".into()));
                for msg in msgs {
                    last = Ok(q.enqueue(msg)?);
                }
                last
            }
            End::Remote(q) => q.enqueue_many(msgs),
        }
    }

    /// Dequeues the next message into `buf`, blocking while the queue is
    /// empty; returns its length. The message is consumed for good when
    /// this returns (a crash inside it may deliver it again on resume, a
    /// crash after it never does).
    pub fn dequeue(&self, buf: &mut [u8]) -> Result<usize> {
        self.dequeue_with(into_buf(buf))
    }

    /// Dequeues the next message by handing `(sequence number, payload)` to
    /// `take`, and consumes it for good only if `take` succeeds: a crash or
    /// error before that leaves it in the queue. An application that makes
    /// its own effect durable with the sequence number inside `take`
    /// applies every message exactly once across crashes of either side.
    pub fn dequeue_with<T>(&self, take: impl FnOnce(u64, &[u8]) -> Result<T>) -> Result<T> {
        match &self.0 {
            End::Local(q) => q.dequeue_with(take),
            End::Remote(q) => q.dequeue_with(take),
        }
    }

    /// Waits until the receiver has consumed everything enqueued so far.
    pub fn flush(&self) -> Result<()> {
        match &self.0 {
            End::Local(q) => q.flush(),
            End::Remote(q) => q.flush(),
        }
    }

    /// Where the queue stands, from this side.
    pub fn position(&self) -> Result<Position> {
        match &self.0 {
            End::Local(q) => q.position(),
            End::Remote(q) => q.position(),
        }
    }

    /// The local queue's members and slot (None between machines).
    pub fn local_spec(&self) -> Option<QueueSpec> {
        match &self.0 {
            End::Local(q) => Some(q.spec),
            End::Remote(_) => None,
        }
    }

    /// The end between machines, for what only it has: how entries are
    /// made durable, the owner's medium, a bound on waits for the peer.
    pub fn remote(&self) -> Option<&RemoteQueue> {
        match &self.0 {
            End::Local(_) => None,
            End::Remote(q) => Some(q),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{checksum, fnv1a};

    #[test]
    fn checksums_bind_epoch_sequence_and_payload() {
        assert_ne!(checksum(1, 1, b"abc"), checksum(1, 2, b"abc"));
        assert_ne!(checksum(1, 1, b"abc"), checksum(2, 1, b"abc"));
        assert_ne!(checksum(1, 1, b"abc"), checksum(1, 1, b"abd"));
        // Against values computed independently (32-bit FNV-1a of the
        // little-endian epoch and sequence number, then the payload).
        assert_eq!(checksum(3, 7, b""), 0xcadd_bfa1);
        assert_eq!(fnv1a(*b""), 0x811c_9dc5);
        assert_eq!(fnv1a(*b"foobar"), 0xbf9c_f968);
    }
}
