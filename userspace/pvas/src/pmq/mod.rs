//! The one-to-one, one-direction persistent message queue of the
//! persistent-memory paper: fixed-size entries in a ring, a sender and a
//! receiver, and durable state that survives either side's crash or
//! restart and a power loss.
//!
//! - enqueue: wait while full; write the entry (sequence number, length,
//!   checksum over the queue epoch, sequence number and payload), make it
//!   durable, then publish the sender's count.
//! - dequeue: wait while empty; hand the entry over; make the consumed
//!   count (in the area header) durable, then wake the sender.
//! - flush: wait until the receiver has consumed everything enqueued.
//!
//! Push keeps the queue area in the receiver's segment (the sender writes
//! remote memory at enqueue, overlapping the receiver's work); Pull keeps
//! it in the sender's. The area and its descriptor are durable (see
//! [`durable`]). Each side publishes its count in its export area (DRAM in
//! the paper's design: lctr), tagged with the queue epoch, and only once
//! what it counts is durable: the sender after the entry, the receiver
//! after the consumed count. The other side reads it (rctr), so an entry
//! is never reused before its consumption is durable. Each count has one
//! writer.
//!
//! **Epochs and resume.** `create` starts a new epoch: the entries and
//! counts of earlier epochs never count again (the entry checksum binds
//! the epoch). `open` continues the current epoch from its durable state —
//! after the owner created it, or after a crash or restart of either side
//! or a power loss: the sender learns how many messages are durably in
//! (`position().enqueued`; it re-sends from there), the receiver continues
//! after the durable consumed count. Every message is dequeued exactly
//! once (see `dequeue_with` for handing over without loss).

mod durable;
mod peer;
pub mod remote;

pub use durable::durable_floor;

use crate::layout::QueueCounters;
use crate::persist::Site;
use crate::wait::wake;
use crate::{Error, Result, Space};
use durable::{AreaHeader, Desc, AREA_HEADER, AREA_MAGIC};
use std::cell::Cell;
use std::sync::atomic::Ordering;

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

pub struct PmQueue<'a> {
    space: &'a Space,
    spec: QueueSpec,
    area: *mut u8,
    epoch: u64,
    /// Receiver: messages known to be durably in the queue when it was
    /// opened (the sender may be gone and not publish them again).
    /// Sender: the durable consumed count when it was opened (the receiver
    /// may be gone and not publish it again).
    durable_at_open: Cell<u64>,
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

#[cfg(feature = "fault-injection")]
use crate::persist::sim::crash_point;
#[cfg(not(feature = "fault-injection"))]
fn crash_point(_: &str, _: u64) {}

impl<'a> PmQueue<'a> {
    /// Creates the queue anew — empty, in a new epoch — in the calling
    /// member's segment (it must be the owner: the receiver for Push, the
    /// sender for Pull). A queue created before with the same geometry
    /// keeps its area (its old messages are discarded); to continue one,
    /// use [`PmQueue::open`].
    pub fn create(space: &'a Space, spec: QueueSpec) -> Result<Self> {
        spec.validate()?;
        if space.id() != spec.owner() {
            return Err(Error::Invalid(format!(
                "member {} cannot create a {:?} queue: its area belongs to member {}",
                space.id(),
                spec.mode,
                spec.owner()
            )));
        }
        let index = durable::desc_index(&spec);
        let (old, old_epoch) = durable::read_desc(space, space.id(), index)?;
        let bytes = durable::area_bytes(&spec);
        let offset = match old {
            Some(d)
                if d.matches(&spec) && durable::area_ptr(space, space.id(), &d, &spec).is_ok() =>
            {
                d.offset
            }
            _ => durable::allocate_area(space, bytes)?,
        };
        let epoch = old_epoch.checked_add(1).ok_or_else(|| {
            Error::Invalid("queue epoch exhausted: use another queue slot".into())
        })?;
        let desc = Desc::for_spec(&spec, epoch, offset);
        let area = durable::area_ptr(space, space.id(), &desc, &spec)?;
        let q = PmQueue {
            space,
            spec,
            area,
            epoch,
            durable_at_open: Cell::new(0),
        };
        // The area first, durable, then the descriptor that points at it:
        // a descriptor never names an area of another epoch.
        let h = q.header();
        h.magic.store(0, Ordering::Release);
        h.epoch.store(epoch, Ordering::Relaxed);
        h.entry_size
            .store(spec.entry_size as u64, Ordering::Relaxed);
        h.entry_count
            .store(spec.entry_count as u64, Ordering::Relaxed);
        h.consumed.store(0, Ordering::Relaxed);
        h.magic.store(AREA_MAGIC, Ordering::Release);
        space
            .persist_mode()
            .persist(Site::AreaHeader, area, AREA_HEADER as usize)?;
        durable::write_desc(space, space.id(), index, &desc)?;
        q.join(true)?;
        Ok(q)
    }

    /// Opens the queue its owner created and continues it where its
    /// durable state says: the first open by the non-owner, and the resume
    /// after a crash, restart or power loss of either side (the owner
    /// included). Waits for the owner to create it if need be.
    pub fn open(space: &'a Space, spec: QueueSpec) -> Result<Self> {
        spec.validate()?;
        if space.id() != spec.sender && space.id() != spec.receiver {
            return Err(Error::Invalid(format!(
                "member {} is neither the sender nor the receiver of this queue",
                space.id()
            )));
        }
        let owner = spec.owner();
        let index = durable::desc_index(&spec);
        let desc = if owner == space.id() {
            durable::read_desc(space, owner, index)?.0.ok_or_else(|| {
                Error::Invalid(format!(
                    "member {owner} has no {:?} queue in slot {} to resume: create it",
                    spec.mode, spec.slot
                ))
            })?
        } else {
            let wake_word = &space.export(owner)?.recv_queues[spec.slot as usize].wake;
            let published = || matches!(durable::read_desc(space, owner, index), Ok((Some(_), _)));
            // Whichever membership of the owner creates it: none is bound.
            peer::wait_for(space, owner, wake_word, |_| false, published)?;
            durable::read_desc(space, owner, index)?
                .0
                .ok_or(Error::PeerGone(owner))?
        };
        Self::from_desc(space, spec, &desc)?.joined()
    }

    fn joined(self) -> Result<Self> {
        self.join(false)?;
        Ok(self)
    }

    fn from_desc(space: &'a Space, spec: QueueSpec, desc: &Desc) -> Result<Self> {
        if !desc.matches(&spec) {
            return Err(Error::Invalid(format!(
                "member {}'s queue in slot {} was created as {} x {} bytes from {} to {}, not as asked",
                spec.owner(),
                spec.slot,
                desc.entry_count,
                desc.entry_size,
                desc.sender,
                desc.receiver
            )));
        }
        let area = durable::area_ptr(space, spec.owner(), desc, &spec)?;
        let q = PmQueue {
            space,
            spec,
            area,
            epoch: desc.epoch,
            durable_at_open: Cell::new(0),
        };
        let h = q.header();
        if h.magic.load(Ordering::Acquire) != AREA_MAGIC
            || h.epoch.load(Ordering::Relaxed) != desc.epoch
            || h.entry_size.load(Ordering::Relaxed) != spec.entry_size as u64
            || h.entry_count.load(Ordering::Relaxed) != spec.entry_count as u64
        {
            return Err(Error::PeerCorrupt {
                id: spec.owner(),
                what: format!(
                    "queue area of epoch {} does not match its descriptor",
                    desc.epoch
                ),
            });
        }
        Ok(q)
    }

    /// This side's volatile state, rebuilt from the durable state. After a
    /// crash of a process (not of the machine) the last consumed count or
    /// entry may be complete in memory but not yet durable: whatever this
    /// side is about to count on, it makes durable first.
    /// (`create` has just made a fresh, empty state durable: nothing to do.)
    fn join(&self, fresh: bool) -> Result<()> {
        let me = self.space.id();
        let persist = self.space.persist_mode();
        let consumed = self.consumed();
        if !fresh {
            persist.persist(Site::Consumed, self.area, AREA_HEADER as usize)?;
        }
        let durable = self.durable_run()?;
        if me == self.spec.sender {
            if !fresh && durable > consumed {
                for n in consumed..durable {
                    persist.flush(Site::Entry, self.entry(n), self.spec.stride() as usize)?;
                }
                persist.fence(Site::Entry);
            }
            self.durable_at_open.set(consumed);
            let s = self.sender_counters()?;
            s.local.store(durable, Ordering::Release);
            s.epoch.store(self.epoch, Ordering::Release);
            wake(&self.receiver_counters()?.wake);
        } else if me == self.spec.receiver {
            self.durable_at_open.set(durable);
            let t = self.receiver_counters()?;
            t.local.store(consumed, Ordering::Release);
            t.epoch.store(self.epoch, Ordering::Release);
            wake(&self.sender_counters()?.wake);
        }
        if me == self.spec.owner() {
            wake(&self.space.export(me)?.recv_queues[self.spec.slot as usize].wake);
        }
        Ok(())
    }

    fn header(&self) -> &AreaHeader {
        // SAFETY: the area starts with an AreaHeader, 64-aligned (checked
        // by area_ptr).
        unsafe { &*(self.area as *const AreaHeader) }
    }

    fn entry(&self, index: u64) -> *mut u8 {
        let i = index % self.spec.entry_count as u64;
        // SAFETY: i < entry_count, inside the area (area_ptr checked its size).
        unsafe {
            self.area
                .add((AREA_HEADER + i * self.spec.stride()) as usize)
        }
    }

    fn sender_counters(&self) -> Result<&QueueCounters> {
        Ok(&self.space.export(self.spec.sender)?.send_queues[self.spec.slot as usize])
    }

    fn receiver_counters(&self) -> Result<&QueueCounters> {
        Ok(&self.space.export(self.spec.receiver)?.recv_queues[self.spec.slot as usize])
    }

    /// The consumed count in the area header: the receiver's own position
    /// (durable by the time anyone else learns of it).
    fn consumed(&self) -> u64 {
        self.header().consumed.load(Ordering::Acquire)
    }

    /// A side's published count if it is for this epoch.
    fn published(&self, counters: &QueueCounters) -> Option<u64> {
        (counters.epoch.load(Ordering::Acquire) == self.epoch)
            .then(|| counters.local.load(Ordering::Acquire))
    }

    /// The sender's view of the durable consumed count: the receiver's
    /// published count, or, while it has not published in this epoch, what
    /// was durable when the sender opened the queue.
    fn consumed_durably(&self) -> Result<u64> {
        Ok(self
            .published(self.receiver_counters()?)
            .unwrap_or(self.durable_at_open.get()))
    }

    /// The receiver's view of the messages durably enqueued.
    fn enqueued_durably(&self) -> Result<u64> {
        Ok(self
            .published(self.sender_counters()?)
            .unwrap_or(0)
            .max(self.durable_at_open.get()))
    }

    /// Messages durably in the queue: the unbroken run of complete entries
    /// of this epoch after the consumed count.
    fn durable_run(&self) -> Result<u64> {
        let mut n = self.consumed();
        let limit = n.saturating_add(self.spec.entry_count as u64);
        while n < limit && self.read_entry(n).is_some_and(|(seq, _)| seq == n + 1) {
            n += 1;
        }
        Ok(n)
    }

    /// Refuses work on a queue its owner has since created anew.
    fn check_epoch(&self) -> Result<()> {
        let (desc, raw) = durable::read_desc(
            self.space,
            self.spec.owner(),
            durable::desc_index(&self.spec),
        )?;
        match desc {
            Some(d) if d.epoch == self.epoch => Ok(()),
            _ => Err(Error::Invalid(format!(
                "the queue was created anew (epoch {raw}, this handle has {}): open it again",
                self.epoch
            ))),
        }
    }

    /// Enqueues `msg`, blocking while the queue is full; returns its
    /// sequence number once it is durable.
    pub fn enqueue(&self, msg: &[u8]) -> Result<u64> {
        self.require(self.spec.sender)?;
        if msg.len() > self.spec.entry_size as usize {
            return Err(Error::TooLarge {
                len: msg.len() as u64,
                cap: self.spec.entry_size as u64,
            });
        }
        self.check_epoch()?;
        let (s, t) = (self.sender_counters()?, self.receiver_counters()?);
        let count = self.spec.entry_count as u64;
        let mut corrupt = None;
        self.wait_for_side(self.spec.receiver, t, &s.wake, || {
            let sent = s.local.load(Ordering::Relaxed);
            let consumed = self.consumed_durably().unwrap_or(sent);
            match sent.checked_sub(consumed) {
                Some(used) => used < count,
                None => {
                    corrupt = Some(consumed);
                    true
                }
            }
        })?;
        let n = s.local.load(Ordering::Relaxed);
        if let Some(consumed) = corrupt {
            return Err(Error::PeerCorrupt {
                id: self.spec.receiver,
                what: format!("a consumed count of {consumed}, past the {n} messages sent"),
            });
        }
        let seq = n + 1;
        let e = self.entry(n);
        // SAFETY: entry n is free (the receiver consumed it), only this
        // sender writes entries, and msg fits (checked above).
        unsafe { write_entry(e, self.epoch, seq, msg) };
        crash_point("payload", seq);
        let persist = self.space.persist_mode();
        persist.flush(Site::Entry, e, ENTRY_HEADER as usize + msg.len())?;
        crash_point("flush", seq);
        persist.fence(Site::Entry);
        crash_point("fence", seq);
        s.local.store(seq, Ordering::Release);
        wake(&t.wake);
        crash_point("publish", seq);
        Ok(seq)
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
        self.require(self.spec.receiver)?;
        self.check_epoch()?;
        let s = self.sender_counters()?;
        let t = self.receiver_counters()?;
        let consumed = self.consumed();
        let available = || self.enqueued_durably().unwrap_or(0) > consumed;
        self.wait_for_side(self.spec.sender, s, &t.wake, available)?;
        // The consumed count may have been written by a peer (Pull keeps the
        // area in the sender's segment): no arithmetic on it may overflow.
        let next = consumed.checked_add(1).ok_or_else(|| Error::PeerCorrupt {
            id: self.spec.owner(),
            what: format!("a consumed count of {consumed}"),
        })?;
        let (seq, payload) = self.read_entry(consumed).ok_or(Error::Corrupt(next))?;
        if seq != next {
            return Err(Error::Corrupt(next));
        }
        let value = take(seq, payload)?;
        let h = self.header();
        h.consumed.store(seq, Ordering::Release);
        self.space.persist_mode().persist(
            Site::Consumed,
            &h.consumed as *const _ as *const u8,
            8,
        )?;
        // Only now may the sender reuse the entry.
        t.local.store(seq, Ordering::Release);
        wake(&s.wake);
        Ok(value)
    }

    /// Waits until the receiver has consumed everything enqueued so far.
    pub fn flush(&self) -> Result<()> {
        self.require(self.spec.sender)?;
        let s = self.sender_counters()?;
        let t = self.receiver_counters()?;
        self.wait_for_side(self.spec.receiver, t, &s.wake, || {
            self.consumed_durably().unwrap_or(0) >= s.local.load(Ordering::Relaxed)
        })
    }

    /// Where the queue stands, from this side.
    pub fn position(&self) -> Result<Position> {
        let (enqueued, consumed) = if self.space.id() == self.spec.sender {
            let s = self.sender_counters()?;
            (s.local.load(Ordering::Acquire), self.consumed_durably()?)
        } else {
            let consumed = self.consumed();
            (self.enqueued_durably()?.max(consumed), consumed)
        };
        Ok(Position {
            epoch: self.epoch,
            enqueued,
            consumed,
        })
    }

    fn require(&self, id: u32) -> Result<()> {
        if self.space.id() != id {
            return Err(Error::Invalid(format!(
                "member {} is not this queue's {}",
                self.space.id(),
                if id == self.spec.sender {
                    "sender"
                } else {
                    "receiver"
                }
            )));
        }
        if id == self.spec.sender {
            self.space.set_pm_writer(true);
        }
        Ok(())
    }

    /// (sequence number, payload) of the entry for message `index` (from
    /// 0) if it is complete and of this epoch.
    fn read_entry(&self, index: u64) -> Option<(u64, &[u8])> {
        // SAFETY: the entry lies inside the area (area_ptr checked its
        // size), which lives as long as self.
        unsafe { read_entry(self.entry(index), self.epoch, self.spec.entry_size) }
    }

    /// The messages durably in the queue and not yet consumed, in order,
    /// read without joining it (for tools and tests): every message whose
    /// enqueue returned, none torn, none twice; the one in flight at a
    /// crash if it became durable.
    pub fn recover(space: &'a Space, spec: QueueSpec) -> Result<Vec<Vec<u8>>> {
        spec.validate()?;
        let (desc, _) = durable::read_desc(space, spec.owner(), durable::desc_index(&spec))?;
        let Some(desc) = desc else {
            return Ok(Vec::new());
        };
        let q = Self::from_desc(space, spec, &desc)?;
        let end = q.durable_run()?;
        Ok((q.consumed()..end)
            .filter_map(|i| q.read_entry(i).map(|(_, p)| p.to_vec()))
            .collect())
    }

    pub fn spec(&self) -> QueueSpec {
        self.spec
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
