//! The persistent queue between machines, as seed 002 builds it over RDMA:
//! the same entries, epochs and exactly-once promise as the local queue,
//! with the protocol's two ways of moving an entry.
//!
//! - **Push**: the queue area is the receiver's. The sender RDMA-WRITEs
//!   each entry into it and FLUSHes it (to persistence when the area is on
//!   Device DAX and the device can, else to global visibility); `enqueue`
//!   returns once the flush completed. The receiver finds entries in its
//!   own memory (sequence number and checksum), and places its consumed
//!   count, once durable, into the sender's counter word by ATOMIC WRITE.
//! - **Pull**: the queue area is the sender's. The sender writes and
//!   persists each entry locally, then places its count into the
//!   receiver's counter word; the receiver RDMA-READs the entry, hands it
//!   over, makes its consumed count durable (its own state file) and places
//!   it into the sender's counter word.
//!
//! Least exposure: the owner registers only its area, with remote write
//! (push) or remote read (pull) and nothing else; each side's counter is
//! one 8-byte word the peer may write. Every value a peer can write (its
//! hello, a counter, an entry) is checked before it counts: a count past
//! what is possible is `PeerCorrupt`, a torn or foreign entry is never
//! handed over.
//!
//! **Resume.** When either side reconnects (after a crash or restart of
//! its process, or a lost link), the hellos carry the durable state: the
//! owner's epoch, the push receiver's durable entries, the pull sender's,
//! the pull receiver's consumed count (which counts only in the owner's
//! epoch). A sender learns from `position().enqueued` how many messages
//! are in for good and re-sends after them; a receiver continues after its
//! durable consumed count, so with `dequeue_with` every message is applied
//! exactly once.

mod area;
mod hello;

pub use area::Area;

use crate::persist::Site;
use crate::pmq::{
    check_geometry, into_buf, read_entry, stride, write_entry, Mode, Position, ENTRY_HEADER,
};
use crate::{Error, Result};
use hello::{Grants, Hello, Reach};
use sky_rdma::{Access, Connection, Endpoint, Listener, Persistence, Region, RemoteRegion};
use std::cell::Cell;
use std::net::SocketAddrV4;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Sender,
    Receiver,
}

/// A queue's geometry and mode; both sides give the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    pub mode: Mode,
    pub entry_size: u32,
    pub entry_count: u32,
}

impl Spec {
    fn validate(&self) -> Result<()> {
        check_geometry(self.entry_size, self.entry_count)
    }

    /// Which side keeps the queue area.
    pub fn owner(&self) -> Role {
        match self.mode {
            Mode::Push => Role::Receiver,
            Mode::Pull => Role::Sender,
        }
    }

    fn stride(&self) -> usize {
        stride(self.entry_size) as usize
    }

    /// Where message `index` (from 0) sits in the owner's area.
    fn entry_offset(&self, index: u64) -> usize {
        HEADER + (index % self.entry_count as u64) as usize * self.stride()
    }

    /// The owner's area: the header, then the ring of entries.
    pub fn area_bytes(&self) -> usize {
        HEADER + self.entry_count as usize * self.stride()
    }
}

/// Header of an area, and the whole of a pull receiver's state file:
/// magic, epoch, entry size, entry count, consumed count (the receiver's;
/// zero in a pull sender's area), each a u64.
const HEADER: usize = 64;
const MAGIC: u64 = u64::from_le_bytes(*b"SKYRQ\0\0\x01");
const AT_MAGIC: usize = 0;
const AT_EPOCH: usize = 8;
const AT_SIZE: usize = 16;
const AT_COUNT: usize = 24;
const AT_CONSUMED: usize = 32;

/// Where to find the peer.
#[derive(Debug, Clone, Copy)]
pub enum Peer {
    /// Wait for it to connect here.
    Listen(SocketAddrV4),
    /// Connect to it there.
    Connect(SocketAddrV4),
}

/// How an entry pushed into the peer's memory is made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// RDMA FLUSH to the persistence domain (Device DAX at the receiver).
    FlushPersistent,
    /// RDMA FLUSH to global visibility: durable where the receiver's
    /// memory is (eADR or ADR platforms whose NIC writes bypass caches).
    FlushGlobal,
    /// An RDMA READ after the WRITE (the responder answers only once the
    /// write is placed): where FLUSH is missing.
    ReadAfterWrite,
}

/// Counts past this are a peer's garbage (2^62 messages never happen),
/// and leave room for arithmetic on them.
const MAX_COUNT: u64 = 1 << 62;

/// How long a side waits for its peer before giving up.
pub const PEER_WAIT: Duration = Duration::from_secs(60);

/// Fields drop in declaration order: the registrations go (the NIC can
/// no longer reach the memory) before the memory they cover.
pub struct RemoteQueue {
    _local_mr: Option<Region>,
    stage_mr: Region,
    _counter_mr: Region,
    spec: Spec,
    role: Role,
    epoch: u64,
    conn: Connection,
    /// The owner's area, or the pull receiver's state file (the push
    /// sender keeps nothing durable: the receiver's area says it all).
    local: Option<Area>,
    /// A staging buffer for the entry in flight (non-owners), written by
    /// this side and by the NIC through `stage_ptr`.
    _stage: Vec<u8>,
    stage_ptr: *mut u8,
    /// The word the peer places its count into; NOT_PLACED until it does.
    counter: Box<AtomicU64>,
    /// What the peer's hello said its count was (its word may not have
    /// been written yet).
    counter_floor: u64,
    peer_area: Option<RemoteRegion>,
    peer_counter: Option<RemoteRegion>,
    durability: Durability,
    /// Sender: messages in for good. Receiver: messages consumed for good.
    count: Cell<u64>,
    /// Why the connection can no longer be trusted to tell the peer this
    /// side's count (what is committed here stays committed).
    broken: std::cell::RefCell<Option<String>>,
    /// The server's listening id, kept while its connection lives.
    _listener: Option<Listener>,
}

/// The counter word before the peer's first placement.
const NOT_PLACED: u64 = u64::MAX;

impl RemoteQueue {
    /// Opens this side of the queue and connects to the other. `path`: the
    /// owner's area, or the pull receiver's state (ignored for a push
    /// sender). `fresh`: the owner starts a new epoch (its old messages
    /// never count again); otherwise it continues the one on file.
    pub fn open(
        spec: Spec,
        role: Role,
        peer: Peer,
        path: &Path,
        fresh: bool,
    ) -> Result<RemoteQueue> {
        spec.validate()?;
        let owner = role == spec.owner();
        let local = match (owner, role) {
            (true, _) => Some(Area::open(path, spec.area_bytes())?),
            (false, Role::Receiver) => Some(Area::open(path, HEADER)?),
            (false, Role::Sender) => None,
        };
        // This side's count, and the one its hello gives: the same but for
        // the push receiver, which tells the sender how many messages its
        // area holds (the sender resumes after them) and keeps its
        // consumed count.
        let (mut epoch, mut count, mut told) = (0, 0, 0);
        if let Some(area) = &local {
            let on_file = read_header(area, &spec);
            if owner {
                // A new epoch is past the old and past any a recreated
                // file could have held (the clock's nanoseconds), so an
                // epoch never repeats for a peer that remembers one.
                let new_epoch = |old: u64| old.saturating_add(1).max(now_ns()).min(MAX_COUNT);
                epoch = match on_file {
                    Some((e, _)) if !fresh => e,
                    Some((e, _)) => new_epoch(e),
                    None => new_epoch(word(area, AT_EPOCH).min(MAX_COUNT)),
                };
                if fresh || on_file.is_none() {
                    init_header(area, &spec, epoch)?;
                }
                (count, told) = match role {
                    // Entries a sender wrote into this area count only a
                    // ring's worth past what is consumed.
                    Role::Receiver => {
                        let consumed = word(area, AT_CONSUMED);
                        if consumed > MAX_COUNT {
                            return Err(Error::Invalid(format!(
                                "{}: a consumed count of {consumed}: not a queue area",
                                path.display()
                            )));
                        }
                        (consumed, durable_end(area, &spec, epoch, Some(consumed)))
                    }
                    Role::Sender => {
                        let end = durable_end(area, &spec, epoch, None);
                        (end, end)
                    }
                };
            } else if let Some((e, consumed)) = on_file.filter(|&(_, c)| c <= MAX_COUNT) {
                (epoch, count, told) = (e, consumed, consumed);
            }
        }
        let listener = match peer {
            Peer::Listen(addr) => Some(Listener::bind(addr).map_err(rdma)?),
            Peer::Connect(_) => None,
        };
        let endpoint = match (&listener, peer) {
            (Some(l), _) => l.request(),
            (None, Peer::Connect(addr)) => Endpoint::resolve(addr),
            (None, Peer::Listen(_)) => unreachable!("a listener was made"),
        }
        .map_err(rdma)?;
        let caps = endpoint.caps();
        let counter = Box::new(AtomicU64::new(NOT_PLACED));
        // SAFETY: each registered buffer lives in the queue, which drops
        // the regions first (field order does not matter: the region only
        // keeps the registration, and the memory outlives it in `self`).
        let counter_mr = unsafe {
            endpoint.register(
                counter.as_ptr() as *mut u8,
                8,
                Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC,
            )
        }
        .map_err(rdma)?;
        let mut stage = vec![0u8; if owner { 64 } else { spec.stride() }];
        let stage_ptr = stage.as_mut_ptr();
        let stage_mr = unsafe { endpoint.register(stage_ptr, stage.len(), Access::LOCAL_WRITE) }
            .map_err(rdma)?;
        // Only the ring is registered (never the header), with what the
        // peer needs: remote write and the FLUSHes this device can serve
        // (push; remote read too where it serves none, for the sender's
        // READ-after-WRITE), remote read (pull).
        let mut grants = Grants::default();
        let local_mr = match (&local, owner) {
            (Some(area), true) => {
                let mut access = Access::LOCAL_WRITE;
                if spec.mode == Mode::Push {
                    access = access | Access::REMOTE_WRITE;
                    if caps.flush_global {
                        access = access | Access::FLUSH_GLOBAL;
                        grants.flush_global = true;
                    }
                    if caps.flush_persistent && area.devdax {
                        access = access | Access::FLUSH_PERSISTENT;
                        grants.flush_persistent = true;
                    }
                    if !grants.flush_global && !grants.flush_persistent {
                        access = access | Access::REMOTE_READ;
                        grants.readable = true;
                    }
                } else {
                    access = access | Access::REMOTE_READ;
                    grants.readable = true;
                }
                // SAFETY: the area stays mapped while the queue lives; the
                // ring starts after the header, inside it.
                let ring = unsafe { area.ptr().add(HEADER) };
                Some(
                    unsafe { endpoint.register(ring, spec.area_bytes() - HEADER, access) }
                        .map_err(rdma)?,
                )
            }
            _ => None,
        };
        let mine = Hello {
            mode: spec.mode,
            role,
            entry_size: spec.entry_size,
            entry_count: spec.entry_count,
            epoch,
            count: told,
            area: local_mr
                .as_ref()
                .map(|r| {
                    let r = r.remote();
                    Reach {
                        addr: r.addr,
                        rkey: r.rkey,
                    }
                })
                .unwrap_or_default(),
            counter: {
                let r = counter_mr.remote();
                Reach {
                    addr: r.addr,
                    rkey: r.rkey,
                }
            },
            grants,
        };
        let (conn, data) = endpoint.connect(&mine.to_bytes()).map_err(rdma)?;
        let theirs = Hello::from_peer(&data, &spec, role)?;
        let reach = |r: Reach, len: usize| {
            RemoteRegion::new(r.addr, r.rkey, len as u64)
                .map_err(|e| Error::RemoteCorrupt(e.to_string()))
        };
        let peer_area = (!owner)
            .then(|| reach(theirs.area, spec.area_bytes() - HEADER))
            .transpose()?;
        let peer_counter = Some(reach(theirs.counter, 8)?);
        // A count counts only in the owner's epoch.
        if !owner {
            if local.is_some() && epoch != theirs.epoch {
                count = 0;
            }
            epoch = theirs.epoch;
        }
        let peer_count = if owner && theirs.epoch != epoch {
            0
        } else {
            theirs.count
        };
        if peer_count > MAX_COUNT {
            return Err(peer_corrupt(format!("a count of {peer_count}")));
        }
        let counter_floor = match (spec.mode, role) {
            // The sender resumes after what the receiver's area holds.
            (Mode::Push, Role::Sender) => {
                count = peer_count;
                0
            }
            (Mode::Pull, Role::Sender) if peer_count > count => {
                return Err(peer_corrupt(format!(
                    "a consumed count of {peer_count}, past the {count} messages in the queue"
                )))
            }
            (Mode::Pull, Role::Receiver)
                if peer_count < count || peer_count - count > spec.entry_count as u64 =>
            {
                return Err(peer_corrupt(format!(
                    "{peer_count} messages in a queue of {} where {count} are consumed",
                    spec.entry_count
                )))
            }
            _ => peer_count,
        };
        // What the owner grants and this device can do, both.
        let g = theirs.grants;
        let durability = if g.flush_persistent && caps.flush_persistent {
            Durability::FlushPersistent
        } else if g.flush_global && caps.flush_global {
            Durability::FlushGlobal
        } else if g.readable || spec.mode == Mode::Pull || role == Role::Receiver {
            Durability::ReadAfterWrite
        } else {
            return Err(Error::Rdma(
                "no way to make entries durable at the receiver: it grants a FLUSH this device cannot send, and no read".into(),
            ));
        };
        let q = RemoteQueue {
            spec,
            role,
            epoch,
            conn,
            local,
            _local_mr: local_mr,
            _stage: stage,
            stage_ptr,
            stage_mr,
            counter,
            _counter_mr: counter_mr,
            counter_floor,
            peer_area,
            peer_counter,
            durability,
            count: Cell::new(count),
            broken: std::cell::RefCell::new(None),
            _listener: listener,
        };
        if role == Role::Receiver {
            // The sender learns where this side stands (push: it has only
            // this word to go by).
            q.place_count()?;
        }
        Ok(q)
    }

    /// How pushed entries are made durable (the sender's view).
    pub fn durability(&self) -> Durability {
        self.durability
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The peer's count as its word shows it, never below its hello's.
    fn peer_count(&self) -> u64 {
        match self.counter.load(Ordering::Acquire) {
            NOT_PLACED => self.counter_floor,
            w => w.max(self.counter_floor),
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
    fn place_count(&self) -> Result<()> {
        match &self.peer_counter {
            Some(word) => self
                .conn
                .atomic_write(word, 0, self.count.get())
                .map_err(rdma),
            None => Ok(()),
        }
    }

    /// Waits until `ready` holds, at most PEER_WAIT.
    fn wait(&self, what: &str, mut ready: impl FnMut() -> Result<bool>) -> Result<()> {
        let started = Instant::now();
        let mut spins = 0u32;
        while !ready()? {
            if started.elapsed() > PEER_WAIT {
                return Err(Error::Rdma(format!(
                    "no word from the peer in {} s while waiting for {what}",
                    PEER_WAIT.as_secs()
                )));
            }
            spins += 1;
            if spins > 2000 {
                std::thread::sleep(Duration::from_micros(50));
            } else {
                std::hint::spin_loop();
            }
        }
        Ok(())
    }

    /// Enqueues `msg`, waiting while the queue is full; returns its
    /// sequence number once it is durable at the queue's owner.
    pub fn enqueue(&self, msg: &[u8]) -> Result<u64> {
        self.require(Role::Sender)?;
        self.check_broken()?;
        if msg.len() > self.spec.entry_size as usize {
            return Err(Error::TooLarge {
                len: msg.len() as u64,
                cap: self.spec.entry_size as u64,
            });
        }
        let sent = self.count.get();
        let slots = self.spec.entry_count as u64;
        if self.local.is_none() {
            // The receiver places its count once it has opened its QP to
            // FLUSH: no FLUSH goes before that.
            self.wait("the receiver to be ready", || {
                Ok(self.counter.load(Ordering::Acquire) != NOT_PLACED)
            })?;
        }
        self.wait("room in the queue", || {
            let consumed = self.peer_count();
            match sent.checked_sub(consumed) {
                Some(used) => Ok(used < slots),
                None => Err(peer_corrupt(format!(
                    "a consumed count of {consumed}, past the {sent} messages sent"
                ))),
            }
        })?;
        let seq = sent + 1;
        let offset = self.offset(sent);
        let len = ENTRY_HEADER as usize + msg.len();
        match (&self.local, &self.peer_area) {
            // Pull: the entry is written and made durable here.
            (Some(area), _) => {
                // SAFETY: the entry slot is free (consumed) and inside the area.
                unsafe { write_entry(area.ptr().add(offset), self.epoch, seq, msg) };
                area.persist(Site::Entry, offset, len)?;
                self.count.set(seq);
                self.tell_count();
            }
            // Push: into the receiver's area, then made durable there.
            (None, Some(remote)) => {
                // SAFETY: the stage holds a whole entry (stride bytes).
                unsafe { write_entry(self.stage_ptr, self.epoch, seq, msg) };
                let at = offset - HEADER;
                self.conn
                    .write(&self.stage_mr, 0, len, remote, at as u64)
                    .map_err(rdma)?;
                self.make_durable(remote, at, len)?;
                self.count.set(seq);
            }
            (None, None) => unreachable!("a push sender always has the receiver's area"),
        }
        Ok(seq)
    }

    fn make_durable(&self, remote: &RemoteRegion, offset: usize, len: usize) -> Result<()> {
        let r = match self.durability {
            Durability::FlushPersistent => {
                self.conn
                    .flush(remote, offset as u64, len as u64, Persistence::Persistent)
            }
            Durability::FlushGlobal => {
                self.conn
                    .flush(remote, offset as u64, len as u64, Persistence::Global)
            }
            // Reads are not passed by the writes before them (RC): the
            // answer means those writes are placed.
            Durability::ReadAfterWrite => {
                self.conn.read(&self.stage_mr, 0, 8, remote, offset as u64)
            }
        };
        r.map_err(rdma)
    }

    /// Dequeues the next message by handing `(sequence number, payload)` to
    /// `take`; it is consumed for good only if `take` succeeds.
    pub fn dequeue_with<T>(&self, take: impl FnOnce(u64, &[u8]) -> Result<T>) -> Result<T> {
        self.require(Role::Receiver)?;
        self.check_broken()?;
        let consumed = self.count.get();
        let next = consumed + 1;
        let offset = self.offset(consumed);
        let area = self.local.as_ref().expect("a receiver keeps durable state");
        let value = match &self.peer_area {
            // Push: the entry arrives in this side's own area.
            None => {
                // SAFETY: the slot lies inside the area, alive with self.
                let entry = || unsafe {
                    read_entry(area.ptr().add(offset), self.epoch, self.spec.entry_size)
                };
                self.wait("the next message", || {
                    Ok(entry().is_some_and(|(s, _)| s == next))
                })?;
                let (seq, payload) = entry().ok_or(Error::Corrupt(next))?;
                let value = take(seq, payload)?;
                write_word(area, AT_CONSUMED, seq);
                area.persist(Site::Consumed, AT_CONSUMED, 8)?;
                value
            }
            // Pull: read it from the sender's area.
            Some(remote) => {
                let slots = self.spec.entry_count as u64;
                self.wait("the next message", || {
                    let sent = self.peer_count();
                    if sent > consumed + slots {
                        return Err(peer_corrupt(format!(
                            "{sent} messages sent into a queue of {slots} where {consumed} are consumed"
                        )));
                    }
                    Ok(sent > consumed)
                })?;
                let len = ENTRY_HEADER as usize + self.spec.entry_size as usize;
                self.conn
                    .read(&self.stage_mr, 0, len, remote, (offset - HEADER) as u64)
                    .map_err(rdma)?;
                // SAFETY: the stage holds the entry just read.
                let (seq, payload) =
                    unsafe { read_entry(self.stage_ptr, self.epoch, self.spec.entry_size) }
                        .filter(|(s, _)| *s == next)
                        .ok_or_else(|| {
                            peer_corrupt(format!(
                                "entry {next} in the sender's area is torn or foreign"
                            ))
                        })?;
                let value = take(seq, payload)?;
                init_word_once(area, &self.spec, self.epoch)?;
                write_word(area, AT_CONSUMED, seq);
                area.persist(Site::Consumed, AT_CONSUMED, 8)?;
                value
            }
        };
        self.count.set(next);
        self.tell_count();
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
        self.wait("the receiver to catch up", || Ok(self.peer_count() >= sent))
    }

    /// Where the queue stands, from this side.
    pub fn position(&self) -> Position {
        let (enqueued, consumed) = match self.role {
            Role::Sender => (self.count.get(), self.peer_count().min(self.count.get())),
            Role::Receiver => (self.peer_count().max(self.count.get()), self.count.get()),
        };
        Position {
            epoch: self.epoch,
            enqueued,
            consumed,
        }
    }

    fn offset(&self, index: u64) -> usize {
        self.spec.entry_offset(index)
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

fn rdma(e: sky_rdma::Error) -> Error {
    Error::Rdma(e.to_string())
}

fn peer_corrupt(what: String) -> Error {
    Error::RemoteCorrupt(what)
}

fn word(area: &Area, at: usize) -> u64 {
    // SAFETY: an aligned word inside the area's header.
    unsafe { std::ptr::read_volatile(area.ptr().add(at) as *const u64) }
}

fn write_word(area: &Area, at: usize, value: u64) {
    // SAFETY: an aligned word inside the area's header, this side's alone.
    unsafe { std::ptr::write_volatile(area.ptr().add(at) as *mut u64, value) }
}

/// (epoch, consumed) of a header of this geometry, if there is one.
fn read_header(area: &Area, spec: &Spec) -> Option<(u64, u64)> {
    (word(area, AT_MAGIC) == MAGIC
        && word(area, AT_SIZE) == spec.entry_size as u64
        && word(area, AT_COUNT) == spec.entry_count as u64)
        .then(|| (word(area, AT_EPOCH), word(area, AT_CONSUMED)))
}

/// A header for `epoch`, nothing consumed, made durable before its magic.
fn init_header(area: &Area, spec: &Spec, epoch: u64) -> Result<()> {
    write_word(area, AT_MAGIC, 0);
    write_word(area, AT_EPOCH, epoch);
    write_word(area, AT_SIZE, spec.entry_size as u64);
    write_word(area, AT_COUNT, spec.entry_count as u64);
    write_word(area, AT_CONSUMED, 0);
    area.persist(Site::AreaHeader, 0, HEADER)?;
    write_word(area, AT_MAGIC, MAGIC);
    area.persist(Site::AreaHeader, 0, 8)
}

/// The pull receiver's state file follows the owner's epoch: rewritten
/// (nothing consumed) when it holds another.
fn init_word_once(area: &Area, spec: &Spec, epoch: u64) -> Result<()> {
    match read_header(area, spec) {
        Some((e, _)) if e == epoch => Ok(()),
        _ => init_header(area, spec, epoch),
    }
}

/// The messages durably in an owner's area: the unbroken run of complete
/// entries of `epoch`, each in its own slot, after `from` (the consumed
/// count), or, when that is not known (a pull sender opening), after the
/// oldest entry the ring still holds; at most a ring's worth.
fn durable_end(area: &Area, spec: &Spec, epoch: u64, from: Option<u64>) -> u64 {
    let slots = spec.entry_count as u64;
    let seq_in = |slot: u64| {
        let offset = spec.entry_offset(slot);
        // SAFETY: the slot lies inside the area.
        unsafe { read_entry(area.ptr().add(offset), epoch, spec.entry_size) }
            .map(|(seq, _)| seq)
            .filter(|&seq| (seq - 1) % slots == slot && seq <= MAX_COUNT)
    };
    let start = from.unwrap_or_else(|| (0..slots).filter_map(seq_in).min().map_or(0, |m| m - 1));
    let mut n = start;
    while n < start + slots && seq_in(n % slots) == Some(n + 1) {
        n += 1;
    }
    n
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}
