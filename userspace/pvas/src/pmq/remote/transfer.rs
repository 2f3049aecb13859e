//! Moving entries: `enqueue`, `dequeue_with`, `flush` and the waits
//! between them, on a queue `open` connected.

use super::header::{commit_consumed, init_header_once, HEADER};
use super::{peer_corrupt, rdma, Durability, Placement, RemoteQueue, Role, KEEPALIVE, NOT_PLACED};
use crate::persist::Site;
use crate::pmq::{into_buf, read_entry, write_entry, Position, ENTRY_HEADER};
use crate::{Error, Result};
use sky_rdma::{Chain, Persistence, RemoteRegion};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long a counter word may carry no count before it is the peer's
/// garbage rather than a write in flight.
const TORN_FOR: Duration = Duration::from_millis(100);

impl RemoteQueue {
    /// The peer's count as its word shows it, never below its floor. A
    /// tagged word is taken only whole and read the same twice
    /// ([`Placement`]); until then the last count read whole stands.
    pub(super) fn peer_count(&self) -> Result<u64> {
        let word = self.counter.load(Ordering::Acquire);
        if word == NOT_PLACED {
            return Ok(self.counter_floor);
        }
        // A tagged word counts only if a second load finds it unchanged.
        let settled = match self.placement {
            Placement::AtomicWrite => true,
            Placement::TaggedWrite => self.counter.load(Ordering::Acquire) == word,
        };
        let whole = self.placement.decode(word).filter(|_| settled);
        let count = match whole {
            Some(c) => {
                self.bad_word.set(None);
                self.last_good.set(c);
                c
            }
            None => {
                match self.bad_word.get() {
                    Some((w, since)) if w == word && since.elapsed() > TORN_FOR => {
                        return Err(peer_corrupt(format!(
                            "a counter word {word:#x} that carries no count"
                        )))
                    }
                    Some((w, _)) if w == word => {}
                    _ => self.bad_word.set(Some((word, Instant::now()))),
                }
                self.last_good.get()
            }
        };
        Ok(count.max(self.counter_floor))
    }

    /// The word that carries `count` into the peer's counter.
    fn word_for(&self, count: u64) -> Result<u64> {
        self.placement.encode(count).ok_or_else(|| {
            Error::Invalid(format!(
                "count {count} is past what a tagged counter word carries (2^48 - 1)"
            ))
        })
    }

    /// Adds the placement of `word` into the peer's counter to `c`.
    fn put_word(&self, c: &mut Chain<'_>, word: u64) -> sky_rdma::Result<()> {
        match self.placement {
            Placement::AtomicWrite => c.atomic_write(&self.peer_counter, 0, word),
            Placement::TaggedWrite => {
                // The chain is waited for: the source stays put meanwhile.
                self.out_word.store(word, Ordering::Release);
                c.write(&self.out_mr, 0, 8, &self.peer_counter, 0)
            }
        }
    }

    /// Refuses work once the peer could not be told a committed count.
    fn check_broken(&self) -> Result<()> {
        match &*self.broken.borrow() {
            Some(why) => Err(Error::Rdma(format!(
                "the connection broke ({why}); what was committed stays: open the queue again"
            ))),
            None => Ok(()),
        }
    }

    /// Tells the peer this side's committed count; a failure leaves the
    /// commit standing (the next hello carries the count) and the queue
    /// refusing further work.
    fn tell_count(&self) {
        if let Err(e) = self.place_count() {
            *self.broken.borrow_mut() = Some(e.to_string());
        }
    }

    /// Places this side's count into the peer's counter word.
    pub(super) fn place_count(&self) -> Result<()> {
        let count = self.count.get();
        let word = self.word_for(count)?;
        self.conn.chain(|c| self.put_word(c, word)).map_err(rdma)?;
        self.told.set(count);
        Ok(())
    }

    /// Waits until `ready` holds: while the peer is there (RDMA CM has not
    /// said it left, the keep-alive still reaches it), and at most the
    /// timeout if one is set.
    fn wait(&self, what: &str, mut ready: impl FnMut() -> Result<bool>) -> Result<()> {
        let started = Instant::now();
        let mut beat = Instant::now();
        let mut spins = 0u32;
        while !ready()? {
            spins += 1;
            if spins <= 2000 {
                std::hint::spin_loop();
                continue;
            }
            std::thread::sleep(Duration::from_micros(50));
            if !spins.is_multiple_of(20) {
                continue;
            }
            if let Some(limit) = self.timeout.get() {
                if started.elapsed() > limit {
                    return Err(Error::Rdma(format!(
                        "no word from the peer in {:.1} s while waiting for {what}",
                        limit.as_secs_f64()
                    )));
                }
            }
            self.conn
                .check()
                .map_err(|e| Error::Rdma(format!("while waiting for {what}: {e}")))?;
            if beat.elapsed() > KEEPALIVE {
                beat = Instant::now();
                self.place_count()
                    .map_err(|e| Error::Rdma(format!("while waiting for {what}: {e}")))?;
            }
        }
        Ok(())
    }

    /// Enqueues `msg`, waiting while the queue is full; returns its
    /// sequence number once it is durable at the queue's owner. An error
    /// from the connection leaves it unknown whether `msg` went in: open
    /// the queue again and see `position().enqueued`.
    pub fn enqueue(&self, msg: &[u8]) -> Result<u64> {
        self.enqueue_many(&[msg])
    }

    /// Enqueues `msgs` in order, waiting for room for all of them; returns
    /// the last one's sequence number once all are durable at the owner.
    /// A push sender moves them in one chain (one doorbell, one wait: the
    /// entries' WRITEs and FLUSHes, then the count), at most `batch()` at
    /// a time; a pull sender places its count once for all of them.
    pub fn enqueue_many(&self, msgs: &[&[u8]]) -> Result<u64> {
        self.require(Role::Sender)?;
        self.check_broken()?;
        let slots = self.spec.entry_count as u64;
        let most = self.batch;
        if msgs.is_empty() || msgs.len() > most {
            return Err(Error::Invalid(format!(
                "{} messages at once: this end enqueues 1 to {most} per call",
                msgs.len()
            )));
        }
        if let Some(msg) = msgs
            .iter()
            .find(|m| m.len() > self.spec.entry_size as usize)
        {
            return Err(Error::TooLarge {
                len: msg.len() as u64,
                cap: self.spec.entry_size as u64,
            });
        }
        let sent = self.count.get();
        let k = msgs.len() as u64;
        if self.local.is_none() {
            // The receiver places its count once it has opened its QP to
            // FLUSH: no FLUSH goes before that.
            self.wait("the receiver to be ready", || {
                Ok(self.counter.load(Ordering::Acquire) != NOT_PLACED)
            })?;
        }
        self.wait("room in the queue", || {
            let consumed = self.peer_count()?;
            match sent.checked_sub(consumed) {
                Some(used) => Ok(used + k <= slots),
                None => Err(peer_corrupt(format!(
                    "a consumed count of {consumed}, past the {sent} messages sent"
                ))),
            }
        })?;
        let last = sent + k;
        let word = self.word_for(last)?;
        let entry = |i: usize| {
            let index = sent + i as u64;
            (index + 1, self.spec.entry_offset(index))
        };
        match (&self.local, &self.peer_area) {
            // Pull: the entries are written and made durable here.
            (Some(area), _) => {
                for (i, msg) in msgs.iter().enumerate() {
                    let (seq, offset) = entry(i);
                    // SAFETY: the slot is free (room was waited for) and
                    // inside the area.
                    unsafe { write_entry(area.ptr().add(offset), self.epoch, seq, msg) };
                    area.persist(Site::Entry, offset, ENTRY_HEADER as usize + msg.len())?;
                }
                self.count.set(last);
                self.tell_count();
            }
            // Push: into the receiver's area, made durable there, then
            // counted there: one chain.
            (None, Some(remote)) => {
                let stride = self.spec.stride();
                for (i, msg) in msgs.iter().enumerate() {
                    // SAFETY: the stage holds `batch` whole entries.
                    unsafe {
                        write_entry(self.stage_ptr.add(i * stride), self.epoch, entry(i).0, msg)
                    };
                }
                let at = |i: usize| (entry(i).1 - HEADER) as u64;
                let len = |i: usize| ENTRY_HEADER as usize + msgs[i].len();
                self.conn
                    .chain(|c| {
                        for i in 0..msgs.len() {
                            c.write(&self.stage_mr, i * stride, len(i), remote, at(i))?;
                        }
                        match self.durability {
                            Durability::FlushPersistent | Durability::FlushGlobal => {
                                for i in 0..msgs.len() {
                                    self.flush_entry(c, remote, at(i), len(i) as u64)?;
                                }
                            }
                            // Reads are not passed by the writes before
                            // them (RC): the answer means they are placed.
                            Durability::ReadAfterWrite => {
                                c.read(&self.stage_mr, 0, 8, remote, at(msgs.len() - 1))?
                            }
                        }
                        // The count only once the FLUSHes (or READ) are
                        // answered: the receiver never sees a count before
                        // the entries it counts are placed.
                        c.fence();
                        self.put_word(c, word)
                    })
                    .map_err(rdma)?;
                self.count.set(last);
            }
            (None, None) => unreachable!("a push sender always has the receiver's area"),
        }
        Ok(last)
    }

    fn flush_entry(
        &self,
        c: &mut Chain<'_>,
        remote: &RemoteRegion,
        at: u64,
        len: u64,
    ) -> sky_rdma::Result<()> {
        let to = match self.durability {
            Durability::FlushPersistent => Persistence::Persistent,
            _ => Persistence::Global,
        };
        c.flush(remote, at, len, to)
    }

    /// Dequeues the next message by handing `(sequence number, payload)` to
    /// `take`; it is consumed for good only if `take` succeeds.
    pub fn dequeue_with<T>(&self, take: impl FnOnce(u64, &[u8]) -> Result<T>) -> Result<T> {
        self.require(Role::Receiver)?;
        self.check_broken()?;
        let consumed = self.count.get();
        let next = consumed + 1;
        let offset = self.spec.entry_offset(consumed);
        let slots = self.spec.entry_count as u64;
        let area = self.local.as_ref().expect("a receiver keeps durable state");
        self.wait("the next message", || {
            let sent = self.peer_count()?;
            if sent > consumed + slots {
                return Err(peer_corrupt(format!(
                    "{sent} messages sent into a queue of {slots} where {consumed} are consumed"
                )));
            }
            Ok(sent > consumed)
        })?;
        // A private copy, checked whole: the sender (or its NIC) cannot
        // change it between the check and the hand-over.
        let len = ENTRY_HEADER as usize + self.spec.entry_size as usize;
        let whose = match &self.peer_area {
            None => {
                // SAFETY: the slot lies inside the area, the stage holds a
                // whole entry; the two never overlap.
                unsafe {
                    std::ptr::copy_nonoverlapping(area.ptr().add(offset), self.stage_ptr, len)
                };
                "this side's area"
            }
            Some(remote) => {
                self.conn
                    .read(&self.stage_mr, 0, len, remote, (offset - HEADER) as u64)
                    .map_err(rdma)?;
                "the sender's area"
            }
        };
        // SAFETY: the stage holds the entry just copied.
        let (seq, payload) =
            unsafe { read_entry(self.stage_ptr, self.epoch, self.spec.entry_size) }
                .filter(|(s, _)| *s == next)
                .ok_or_else(|| {
                    peer_corrupt(format!(
                        "entry {next} in {whose}, counted by the sender, is torn or foreign"
                    ))
                })?;
        let value = take(seq, payload)?;
        if self.peer_area.is_some() {
            init_header_once(area, &self.spec, self.epoch)?;
        }
        commit_consumed(area, seq)?;
        self.count.set(next);
        // The sender waits on this count only for room or in flush: tell it
        // when nothing more is counted (it may be waiting for either), or
        // half a ring after the count last told (it may wait for room), not
        // after every message (a round trip each).
        let more = self.peer_count().is_ok_and(|sent| sent > next);
        if !more || next - self.told.get() >= (slots / 2).max(1) {
            self.tell_count();
        }
        Ok(value)
    }

    /// Dequeues the next message into `buf`; returns its length.
    pub fn dequeue(&self, buf: &mut [u8]) -> Result<usize> {
        self.dequeue_with(into_buf(buf))
    }

    /// Waits until the receiver has consumed everything enqueued so far.
    pub fn flush(&self) -> Result<()> {
        self.require(Role::Sender)?;
        let sent = self.count.get();
        self.wait("the receiver to catch up", || match self.peer_count()? {
            consumed if consumed > sent => Err(peer_corrupt(format!(
                "a consumed count of {consumed}, past the {sent} messages sent"
            ))),
            consumed => Ok(consumed == sent),
        })
    }

    /// Where the queue stands, from this side.
    pub fn position(&self) -> Result<Position> {
        let (enqueued, consumed) = match self.role {
            Role::Sender => (self.count.get(), self.peer_count()?.min(self.count.get())),
            Role::Receiver => (self.peer_count()?.max(self.count.get()), self.count.get()),
        };
        Ok(Position {
            epoch: self.epoch,
            enqueued,
            consumed,
        })
    }

    fn require(&self, role: Role) -> Result<()> {
        if self.role != role {
            return Err(Error::Invalid(format!(
                "this side is the queue's {:?}, not its {role:?}",
                self.role
            )));
        }
        Ok(())
    }
}
