//! The queue between processes of one machine, in a shared space.
//!
//! The queue area lives in the owner's segment (Push: the receiver's, so
//! the sender writes remote memory at enqueue, overlapping the receiver's
//! work; Pull: the sender's). The area and its descriptor are durable
//! (see [`durable`](super::durable)). Each side publishes its count in its
//! export area (DRAM in the paper's design: lctr), tagged with the queue
//! epoch, and only once what it counts is durable: the sender after the
//! entry, the receiver after the consumed count (in the area header). The
//! other side reads it (rctr), so an entry is never reused before its
//! consumption is durable. Each count has one writer.
//!
//! **Epochs and resume.** `create` starts a new epoch: the entries and
//! counts of earlier epochs never count again (the entry checksum binds
//! the epoch). `open` continues the current epoch from its durable state —
//! after the owner created it, or after a crash or restart of either side
//! or a power loss: the sender learns how many messages are durably in
//! (`position().enqueued`; it re-sends from there), the receiver continues
//! after the durable consumed count. Every message is dequeued exactly
//! once (see `dequeue_with` for handing over without loss).

use super::durable::{self, AreaHeader, Desc, AREA_HEADER, AREA_MAGIC};
use super::{read_entry, write_entry, Position, QueueSpec, ENTRY_HEADER};
use crate::layout::QueueCounters;
use crate::persist::Site;
use crate::wait::wake;
use crate::{Error, Result, Space};
use std::cell::Cell;
use std::sync::atomic::Ordering;

pub(super) struct LocalQueue<'a> {
    pub(super) space: &'a Space,
    pub(super) spec: QueueSpec,
    area: *mut u8,
    pub(super) epoch: u64,
    /// Receiver: messages known to be durably in the queue when it was
    /// opened (the sender may be gone and not publish them again).
    /// Sender: the durable consumed count when it was opened (the receiver
    /// may be gone and not publish it again).
    durable_at_open: Cell<u64>,
}

#[cfg(feature = "fault-injection")]
use crate::persist::sim::crash_point;
#[cfg(not(feature = "fault-injection"))]
fn crash_point(_: &str, _: u64) {}

impl<'a> LocalQueue<'a> {
    /// Creates the queue anew — empty, in a new epoch — in the calling
    /// member's segment (it must be the owner: the receiver for Push, the
    /// sender for Pull). A queue created before with the same geometry
    /// keeps its area (its old messages are discarded); to continue one,
    /// use [`LocalQueue::open`].
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
        let q = LocalQueue {
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
            super::peer::wait_for(space, owner, wake_word, |_| false, published)?;
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
        let q = LocalQueue {
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
}
