//! The one-to-one, one-direction message queue of the persistent-memory
//! paper: fixed-size entries, a fixed count, and the four counters lctr_s,
//! rctr_s (sender) and lctr_t, rctr_t (receiver).
//!
//! - enqueue: wait while full; write the entry (sequence number, length,
//!   checksum, payload), make it durable, then lctr_s += 1 and publish it
//!   to the receiver's rctr_t.
//! - dequeue: wait while empty (rctr_t == lctr_t); copy the entry out,
//!   make the consumed count durable, then lctr_t += 1 and publish it to
//!   the sender's rctr_s.
//! - flush: wait until rctr_s == lctr_s.
//!
//! Push keeps the queue area in the receiver's segment (the sender writes
//! remote memory at enqueue, overlapping the receiver's work); Pull keeps
//! it in the sender's (the receiver reads remote memory at dequeue). The
//! counters live in the export areas (DRAM in the paper's design); only the
//! entries and the consumed count need to be durable, which is what
//! [`PmQueue::recover`] reads after a crash.

use crate::layout::{QueueCounters, QUEUES_PER_MEMBER};
use crate::wait::{wait_until, wake};
use crate::{Error, Result, Space};
use std::sync::atomic::{AtomicU64, Ordering};

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
    /// Which of the sender's/receiver's queue counter slots to use.
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
        if self.slot as usize >= QUEUES_PER_MEMBER {
            return Err(Error::Invalid(format!(
                "queue slot {} outside 0..{QUEUES_PER_MEMBER}",
                self.slot
            )));
        }
        if self.entry_size == 0
            || self.entry_size > 64 << 20
            || self.entry_count == 0
            || self.entry_count > 1 << 20
        {
            return Err(Error::Invalid(format!(
                "entry size {} (1..=64 MiB) or count {} (1..=1Mi) out of range",
                self.entry_size, self.entry_count
            )));
        }
        Ok(())
    }

    fn stride(&self) -> u64 {
        (ENTRY_HEADER + self.entry_size as u64).div_ceil(64) * 64
    }
}

/// Export word (of the owner) holding the queue area's address, by slot.
const AREA_WORD_BASE: usize = 16;
const AREA_MAGIC: u64 = u64::from_le_bytes(*b"SKYPMQ01");
/// Entry header: sequence number (u64), length (u32), checksum (u32).
const ENTRY_HEADER: u64 = 16;

#[repr(C, align(64))]
struct AreaHeader {
    magic: AtomicU64,
    entry_size: AtomicU64,
    entry_count: AtomicU64,
    /// Durable count of messages dequeued: recovery starts after it.
    consumed: AtomicU64,
}

const AREA_HEADER: u64 = 64;

pub struct PmQueue<'a> {
    space: &'a Space,
    spec: QueueSpec,
    area: *mut u8,
}

/// Where a crash test kills the sender mid-enqueue:
/// `SKY_PVAS_CRASH_AT=POINT:SEQ` dies at POINT (payload, flush, fence or
/// publish) of the enqueue of message number SEQ (from 1).
fn crash_point(name: &str, seq: u64) {
    let Ok(spec) = std::env::var("SKY_PVAS_CRASH_AT") else {
        return;
    };
    if spec
        .split_once(':')
        .is_some_and(|(p, n)| p == name && n.parse() == Ok(seq))
    {
        // SAFETY: raising SIGKILL on ourselves: the point of the test.
        unsafe { libc::raise(libc::SIGKILL) };
    }
}

fn checksum(seq: u64, payload: &[u8]) -> u32 {
    // FNV-1a over the sequence number and payload: enough to tell a torn
    // or stale entry from a complete one.
    let mut h: u32 = 0x811c_9dc5;
    for b in seq.to_le_bytes().iter().chain(payload) {
        h = (h ^ *b as u32).wrapping_mul(0x0100_0193);
    }
    h
}

impl<'a> PmQueue<'a> {
    /// Creates the queue area in the calling member's segment (it must be
    /// the owner: the receiver for Push, the sender for Pull) and publishes
    /// it in its export area.
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
        let bytes = AREA_HEADER + spec.stride() * spec.entry_count as u64;
        let area = space.alloc(bytes as usize, 64)?;
        let q = PmQueue { space, spec, area };
        let h = q.header();
        h.entry_size
            .store(spec.entry_size as u64, Ordering::Relaxed);
        h.entry_count
            .store(spec.entry_count as u64, Ordering::Relaxed);
        h.consumed.store(0, Ordering::Relaxed);
        h.magic.store(AREA_MAGIC, Ordering::Release);
        space.persist_mode().persist(area, AREA_HEADER as usize);
        let owner = space.export(spec.owner())?;
        owner.words[AREA_WORD_BASE + spec.slot as usize].store(area as u64, Ordering::Release);
        wake(&owner.recv_queues[spec.slot as usize].wake);
        Ok(q)
    }

    /// Opens a queue created by its owner, waiting for the owner to publish
    /// it if need be.
    pub fn open(space: &'a Space, spec: QueueSpec) -> Result<Self> {
        spec.validate()?;
        let owner = space.export(spec.owner())?;
        let word = &owner.words[AREA_WORD_BASE + spec.slot as usize];
        space.wait_on(
            spec.owner(),
            &owner.recv_queues[spec.slot as usize].wake,
            || word.load(Ordering::Acquire) != 0,
        )?;
        let area = word.load(Ordering::Acquire) as *mut u8;
        Self::from_area(space, spec, area)
    }

    fn from_area(space: &'a Space, spec: QueueSpec, area: *mut u8) -> Result<Self> {
        let bytes = AREA_HEADER + spec.stride() * spec.entry_count as u64;
        if !space.in_segment(spec.owner(), area as u64, bytes) {
            return Err(Error::Invalid(
                "published queue area lies outside its owner's segment".into(),
            ));
        }
        let q = PmQueue { space, spec, area };
        let h = q.header();
        if h.magic.load(Ordering::Acquire) != AREA_MAGIC
            || h.entry_size.load(Ordering::Relaxed) != spec.entry_size as u64
            || h.entry_count.load(Ordering::Relaxed) != spec.entry_count as u64
        {
            return Err(Error::Invalid(
                "queue area does not match the requested entry size and count".into(),
            ));
        }
        Ok(q)
    }

    fn header(&self) -> &AreaHeader {
        // SAFETY: the area starts with an AreaHeader, 64-aligned.
        unsafe { &*(self.area as *const AreaHeader) }
    }

    fn entry(&self, index: u64) -> *mut u8 {
        let i = index % self.spec.entry_count as u64;
        // SAFETY: i < entry_count, inside the allocated area.
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

    /// Enqueues `msg`, blocking while the queue is full.
    pub fn enqueue(&self, msg: &[u8]) -> Result<()> {
        self.require(self.spec.sender)?;
        if msg.len() > self.spec.entry_size as usize {
            return Err(Error::TooLarge {
                len: msg.len() as u64,
                cap: self.spec.entry_size as u64,
            });
        }
        let receiver = self.space.peer(self.spec.receiver)?;
        let (s, t) = (self.sender_counters()?, self.receiver_counters()?);
        let count = self.spec.entry_count as u64;
        wait_until(self.space, &s.wake, Some(receiver), None, || {
            s.local.load(Ordering::Relaxed) - s.remote.load(Ordering::Acquire) < count
        })?;
        let n = s.local.load(Ordering::Relaxed);
        let seq = n + 1;
        let e = self.entry(n);
        // SAFETY: entry n is free (the receiver consumed it, rctr_s), and
        // only this sender writes entries.
        unsafe {
            std::ptr::copy_nonoverlapping(msg.as_ptr(), e.add(ENTRY_HEADER as usize), msg.len());
            std::ptr::write_unaligned(e.add(8) as *mut u32, msg.len() as u32);
            std::ptr::write_unaligned(e.add(12) as *mut u32, checksum(seq, msg));
            std::ptr::write_unaligned(e as *mut u64, seq);
        }
        crash_point("payload", seq);
        let persist = self.space.persist_mode();
        persist.flush(e, (ENTRY_HEADER as usize) + msg.len());
        crash_point("flush", seq);
        persist.fence();
        crash_point("fence", seq);
        s.local.store(seq, Ordering::Relaxed);
        t.remote.store(seq, Ordering::Release);
        wake(&t.wake);
        crash_point("publish", seq);
        Ok(())
    }

    /// Dequeues the next message into `buf`, blocking while the queue is
    /// empty. Returns its length.
    pub fn dequeue(&self, buf: &mut [u8]) -> Result<usize> {
        self.require(self.spec.receiver)?;
        let (s, t) = (self.sender_counters()?, self.receiver_counters()?);
        self.space.wait_on(self.spec.sender, &t.wake, || {
            t.remote.load(Ordering::Acquire) > t.local.load(Ordering::Relaxed)
        })?;
        let n = t.local.load(Ordering::Relaxed);
        let (seq, payload) = self.read_entry(n).ok_or(Error::Corrupt(n + 1))?;
        if seq != n + 1 {
            return Err(Error::Corrupt(n + 1));
        }
        if payload.len() > buf.len() {
            return Err(Error::TooLarge {
                len: payload.len() as u64,
                cap: buf.len() as u64,
            });
        }
        buf[..payload.len()].copy_from_slice(payload);
        let h = self.header();
        h.consumed.store(seq, Ordering::Release);
        self.space
            .persist_mode()
            .persist(&h.consumed as *const _ as *const u8, 8);
        t.local.store(seq, Ordering::Relaxed);
        s.remote.store(seq, Ordering::Release);
        wake(&s.wake);
        Ok(payload.len())
    }

    /// Waits until the receiver has taken everything enqueued so far.
    pub fn flush(&self) -> Result<()> {
        self.require(self.spec.sender)?;
        let s = self.sender_counters()?;
        self.space.wait_on(self.spec.receiver, &s.wake, || {
            s.remote.load(Ordering::Acquire) == s.local.load(Ordering::Relaxed)
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

    /// (sequence number, payload) of entry `index` if it is complete.
    fn read_entry(&self, index: u64) -> Option<(u64, &[u8])> {
        let e = self.entry(index);
        // SAFETY: reads inside the entry; the length is bounds-checked
        // before the payload slice is formed.
        unsafe {
            let seq = std::ptr::read_unaligned(e as *const u64);
            let len = std::ptr::read_unaligned(e.add(8) as *const u32) as usize;
            let sum = std::ptr::read_unaligned(e.add(12) as *const u32);
            if seq == 0 || len > self.spec.entry_size as usize {
                return None;
            }
            let payload = std::slice::from_raw_parts(e.add(ENTRY_HEADER as usize), len);
            (checksum(seq, payload) == sum).then_some((seq, payload))
        }
    }

    /// After a crash: the messages durable in the queue area and not yet
    /// consumed, in order. Every message whose enqueue returned is there,
    /// none torn, none twice (a message whose dequeue returned is not).
    /// The message in flight at the crash may appear if it became durable.
    pub fn recover(space: &'a Space, spec: QueueSpec) -> Result<Vec<Vec<u8>>> {
        spec.validate()?;
        let word = &space.export(spec.owner())?.words[AREA_WORD_BASE + spec.slot as usize];
        let area = word.load(Ordering::Acquire) as *mut u8;
        if area.is_null() {
            return Ok(Vec::new());
        }
        let q = Self::from_area(space, spec, area)?;
        let consumed = q.header().consumed.load(Ordering::Acquire);
        let mut found: Vec<(u64, Vec<u8>)> = (0..spec.entry_count as u64)
            .filter_map(|i| q.read_entry(i))
            .filter(|(seq, _)| *seq > consumed)
            .map(|(seq, p)| (seq, p.to_vec()))
            .collect();
        found.sort_by_key(|(seq, _)| *seq);
        // Only the unbroken run after `consumed` is the queue's content.
        Ok(found
            .into_iter()
            .zip(consumed + 1..)
            .take_while(|((seq, _), want)| seq == want)
            .map(|((_, payload), _)| payload)
            .collect())
    }

    pub fn spec(&self) -> QueueSpec {
        self.spec
    }
}

#[cfg(test)]
mod tests {
    use super::checksum;

    #[test]
    fn checksums_bind_sequence_and_payload() {
        assert_ne!(checksum(1, b"abc"), checksum(2, b"abc"));
        assert_ne!(checksum(1, b"abc"), checksum(1, b"abd"));
        assert_eq!(checksum(7, b""), checksum(7, b""));
    }
}
