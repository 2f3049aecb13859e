//! The persistent queue between machines, as seed 002 builds it over RDMA:
//! the same entries, epochs and exactly-once promise as the local queue,
//! with the protocol's two ways of moving an entry.
//!
//! - **Push**: the queue area is the receiver's. The sender RDMA-WRITEs
//!   each entry into it, FLUSHes it (to persistence when the area is on
//!   Device DAX and the device can, else to global visibility) and, once
//!   the FLUSH is answered (a fenced work request), places its count into
//!   the receiver's counter word by ATOMIC WRITE (a tagged plain WRITE on
//!   devices without it: [`counter`]): one chain of three work
//!   requests, one doorbell; `enqueue` returns when the chain completed.
//!   The receiver takes entries only up to that count, each from a private
//!   copy checked whole (sequence number, checksum), and places its
//!   consumed count, once durable, into the sender's counter word.
//! - **Pull**: the queue area is the sender's. The sender writes and
//!   persists each entry locally, then places its count into the
//!   receiver's counter word; the receiver RDMA-READs the entry, hands it
//!   over, makes its consumed count durable (its own state file) and places
//!   it into the sender's counter word.
//!
//! Least exposure: the owner registers only its ring (never the header),
//! with remote write (push) or remote read (pull) and nothing else; each
//! side's counter is one 8-byte word the peer may write. Every value a peer
//! can write (its hello, a counter, an entry) is checked before it counts:
//! a count past what is possible is `RemoteCorrupt`, a torn or foreign
//! entry is never handed over. A server checks a client's hello before it
//! accepts, and rejects one that does not fit with the reason.
//!
//! **Resume.** When either side reconnects (after a crash or restart of
//! its process, or a lost link), the hellos carry the durable state: the
//! owner's epoch, the push receiver's durable entries, the pull sender's,
//! the pull receiver's consumed count (which counts only in the owner's
//! epoch). A sender learns from `position().enqueued` how many messages
//! are in for good and re-sends after them; a receiver continues after its
//! durable consumed count, so with `dequeue_with` every message is applied
//! exactly once. A side learns that its peer left from RDMA CM (the peer's
//! process ended or closed) or from a keep-alive that fails (the link).

mod area;
mod counter;
mod header;
mod hello;
#[cfg(feature = "fault-injection")]
mod hostile;
mod transfer;

pub use area::Area;
pub use counter::Placement;

use crate::persist::PersistMode;
use crate::pmq::{check_geometry, stride, Mode};
use crate::{Error, Result};
use header::{
    durable_end, init_header, new_epoch, read_header, word, AT_CONSUMED, AT_EPOCH, HEADER,
};
use hello::{Grants, Hello, Reach};
use sky_rdma::{Access, Caps, Connection, Endpoint, Listener, Region, RemoteRegion};
use std::cell::{Cell, RefCell};
use std::net::SocketAddrV4;
use std::path::Path;
use std::sync::atomic::AtomicU64;
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
    /// Place counts by plain WRITE even where both devices can ATOMIC
    /// WRITE (for a device that advertises it and mishandles it, and to
    /// test the fallback). Either side asking decides for both.
    pub plain_counters: bool,
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
    /// RDMA FLUSH to global visibility: in the receiver's memory system,
    /// as durable as what that memory is (`Medium`).
    FlushGlobal,
    /// An RDMA READ after the WRITE (the responder answers only once the
    /// write is placed): where FLUSH is missing.
    ReadAfterWrite,
}

/// What the owner's area is on: how much a placed entry survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Medium {
    /// tmpfs or DRAM: the owner's process may die, its machine may not.
    #[default]
    Volatile,
    /// A file in the page cache: survives the owner's process; its
    /// machine only once written back (a push receiver's entries are
    /// taken from memory, never written back before they are consumed).
    PageCache,
    /// Persistent memory (Device DAX): survives the owner's machine once
    /// flushed to persistence.
    Pmem,
}

impl Medium {
    fn of(area: &Area) -> Medium {
        match area.persist {
            PersistMode::Volatile => Medium::Volatile,
            PersistMode::Msync => Medium::PageCache,
            _ => Medium::Pmem,
        }
    }
}

/// The most entries a push sender writes in one chain: each takes a WRITE
/// and a FLUSH, and the chain has room for 32 work requests.
const MAX_BATCH: usize = 8;
/// What a push sender's stage may hold for batches: large entries gain
/// nothing from sharing a doorbell.
const BATCH_BYTES: usize = 16 << 20;

/// Entries per chain for a push sender of `spec`: at most half the ring,
/// so the receiver takes one half while the other is written.
fn batch_for(spec: &Spec) -> usize {
    MAX_BATCH
        .min((spec.entry_count as usize / 2).max(1))
        .min((BATCH_BYTES / spec.stride()).max(1))
}

/// Counts past this are a peer's garbage (2^62 messages never happen),
/// and leave room for arithmetic on them.
const MAX_COUNT: u64 = 1 << 62;

/// How often a waiting side re-places its count: a keep-alive, so a link
/// that went away is noticed (RC has no keep-alive of its own).
const KEEPALIVE: Duration = Duration::from_secs(1);

/// The counter word before the peer's first placement.
const NOT_PLACED: u64 = u64::MAX;

/// One end of a queue between machines. Used from one thread at a time
/// (it is neither Send nor Sync).
///
/// Fields drop in declaration order: the registrations go (the NIC can no
/// longer reach the memory) before the memory they cover.
pub struct RemoteQueue {
    _local_mr: Option<Region>,
    stage_mr: Region,
    _counter_mr: Region,
    out_mr: Region,
    spec: Spec,
    role: Role,
    epoch: u64,
    conn: Connection,
    /// The owner's area, or the pull receiver's state file (the push
    /// sender keeps nothing durable: the receiver's area says it all).
    local: Option<Area>,
    /// A private copy of the entry in flight: written by this side (an
    /// entry to push), by this side from its own area (an entry pushed to
    /// it, copied before it is checked) or by the NIC (an entry pulled).
    _stage: Vec<u8>,
    stage_ptr: *mut u8,
    /// The most messages one `enqueue_many` takes: what a push sender's
    /// stage holds (one chain), a pull sender's ring; 1 for a receiver.
    batch: usize,
    /// The count last placed into the peer's word.
    told: Cell<u64>,
    /// The word the peer places its count into; NOT_PLACED until it does.
    counter: Box<AtomicU64>,
    /// How counts are placed, both ways.
    placement: Placement,
    /// The word this side places by plain WRITE (the WRITE's source).
    out_word: Box<AtomicU64>,
    /// The last count read whole from the peer's word.
    last_good: Cell<u64>,
    /// A word that carried no count, and since when (torn words pass).
    bad_word: Cell<Option<(u64, Instant)>>,
    /// The least the peer's count can be: from its hello, or, for a push
    /// receiver, the entries its own area held when it opened.
    counter_floor: u64,
    peer_area: Option<RemoteRegion>,
    peer_counter: RemoteRegion,
    durability: Durability,
    medium: Medium,
    /// Sender: messages in for good. Receiver: messages consumed for good.
    count: Cell<u64>,
    /// Why the connection can no longer be trusted to tell the peer this
    /// side's count (what is committed here stays committed).
    broken: RefCell<Option<String>>,
    timeout: Cell<Option<Duration>>,
}

/// What this side holds durably before it connects.
struct Held {
    epoch: u64,
    /// Sender: messages in for good. Receiver: consumed for good.
    count: u64,
    /// What the hello says: the same, but for the push receiver, which
    /// tells how many entries its area holds (the sender resumes after).
    told: u64,
}

/// What both sides' durable states agree on.
struct Agreed {
    epoch: u64,
    count: u64,
    counter_floor: u64,
}

impl RemoteQueue {
    /// Opens this side of the queue and connects to the other. `path`: the
    /// owner's area, or the pull receiver's state (ignored for a push
    /// sender). `fresh`: the owner starts a new epoch (its old messages
    /// never count again); otherwise it continues the one on file.
    ///
    /// A listening side waits for a client whose hello fits this queue;
    /// others are rejected with the reason (they see it as
    /// `Rdma("the peer refused ...")`) and logged.
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
        let held = match &local {
            Some(area) => held(area, &spec, owner, role, fresh, path)?,
            None => Held {
                epoch: 0,
                count: 0,
                told: 0,
            },
        };
        let listener = match peer {
            Peer::Listen(addr) => Some(Listener::bind(addr).map_err(rdma)?),
            Peer::Connect(_) => None,
        };
        // A server checks the client's hello before anything is
        // registered or accepted, and waits for the next on a misfit.
        let endpoint = match (&listener, peer) {
            (Some(l), _) => loop {
                let e = l.request().map_err(rdma)?;
                let fits = Hello::from_peer(e.request_data(), &spec, role)
                    .and_then(|h| agree(&spec, role, &held, &h));
                match fits {
                    Ok(_) => break e,
                    Err(why) => {
                        log::warn!("refused a queue peer: {why}");
                        if let Err(e) = e.reject(&why.to_string()) {
                            log::warn!("could not tell it: {e}");
                        }
                    }
                }
            },
            (None, Peer::Connect(addr)) => Endpoint::resolve(addr).map_err(rdma)?,
            (None, Peer::Listen(_)) => unreachable!("a listener was made"),
        };
        let caps = endpoint.caps();
        let counter = Box::new(AtomicU64::new(NOT_PLACED));
        let atomic_counters = caps.atomic_write && !spec.plain_counters;
        let counter_access = match atomic_counters {
            true => Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC,
            false => Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        };
        // SAFETY: each registered buffer lives in the queue, which drops
        // the regions before the memory (field order).
        let counter_mr =
            unsafe { endpoint.register(counter.as_ptr() as *mut u8, 8, counter_access) }
                .map_err(rdma)?;
        let out_word = Box::new(AtomicU64::new(0));
        let out_mr =
            unsafe { endpoint.register(out_word.as_ptr() as *mut u8, 8, Access::LOCAL_WRITE) }
                .map_err(rdma)?;
        // A push sender stages a batch; a pull sender writes its own area.
        let (batch, staged) = match (owner, role) {
            (false, Role::Sender) => (batch_for(&spec), batch_for(&spec)),
            (true, Role::Sender) => (spec.entry_count as usize, 1),
            _ => (1, 1),
        };
        let mut stage = vec![0u8; spec.stride() * staged];
        let stage_ptr = stage.as_mut_ptr();
        let stage_mr = unsafe { endpoint.register(stage_ptr, stage.len(), Access::LOCAL_WRITE) }
            .map_err(rdma)?;
        let (local_mr, grants) = match (&local, owner) {
            (Some(area), true) => {
                let (mr, grants) = register_ring(&endpoint, area, &spec, caps, path)?;
                (Some(mr), grants)
            }
            _ => (None, Grants::default()),
        };
        let reach = |r: RemoteRegion| Reach {
            addr: r.addr,
            rkey: r.rkey,
        };
        let mine = Hello {
            mode: spec.mode,
            role,
            entry_size: spec.entry_size,
            entry_count: spec.entry_count,
            epoch: held.epoch,
            count: held.told,
            area: local_mr
                .as_ref()
                .map(|r| reach(r.remote()))
                .unwrap_or_default(),
            counter: reach(counter_mr.remote()),
            grants,
            atomic_counters,
        };
        let (conn, data) = endpoint.connect(&mine.to_bytes()).map_err(rdma)?;
        // No one listens once the queue has its peer: a client that comes
        // while this connection stands (its own reconnect, after a break
        // this side has not noticed yet) is refused at once instead of
        // waiting in a backlog no one serves, and tries again.
        drop(listener);
        let theirs = Hello::from_peer(&data, &spec, role)?;
        let agreed = agree(&spec, role, &held, &theirs)?;
        let region = |r: Reach, len: usize| {
            RemoteRegion::new(r.addr, r.rkey, len as u64)
                .map_err(|e| Error::RemoteCorrupt(e.to_string()))
        };
        let peer_area = (!owner)
            .then(|| region(theirs.area, spec.area_bytes() - HEADER))
            .transpose()?;
        let peer_counter = region(theirs.counter, 8)?;
        let durability = durability(&spec, role, caps, theirs.grants)?;
        let placement = match atomic_counters && theirs.atomic_counters {
            true => Placement::AtomicWrite,
            false => Placement::TaggedWrite,
        };
        let medium = match &local {
            Some(area) if owner => Medium::of(area),
            _ => theirs.grants.medium,
        };
        let q = RemoteQueue {
            spec,
            role,
            epoch: agreed.epoch,
            conn,
            local,
            _local_mr: local_mr,
            _stage: stage,
            stage_ptr,
            batch,
            told: Cell::new(0),
            stage_mr,
            counter,
            placement,
            out_word,
            out_mr,
            last_good: Cell::new(0),
            bad_word: Cell::new(None),
            _counter_mr: counter_mr,
            counter_floor: agreed.counter_floor,
            peer_area,
            peer_counter,
            durability,
            medium,
            count: Cell::new(agreed.count),
            broken: RefCell::new(None),
            timeout: Cell::new(None),
        };
        if role == Role::Receiver {
            // The sender learns where this side stands (push: it has only
            // this word to go by, and sends no FLUSH before it is placed).
            q.place_count()?;
        }
        Ok(q)
    }

    /// How pushed entries are made durable (the sender's view).
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// The most messages one `enqueue_many` takes (a push sender's move in
    /// one chain).
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// How counts are placed in each side's counter word.
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// What the owner's area is on.
    pub fn medium(&self) -> Medium {
        self.medium
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Bounds every wait for the peer (None: wait while it is there, which
    /// RDMA CM's events and the keep-alive tell).
    pub fn set_timeout(&self, limit: Option<Duration>) {
        self.timeout.set(limit);
    }
}

/// This side's durable state, from its area or state file.
fn held(
    area: &Area,
    spec: &Spec,
    owner: bool,
    role: Role,
    fresh: bool,
    path: &Path,
) -> Result<Held> {
    let on_file = read_header(area, spec);
    if !owner {
        // A pull receiver's consumed count, in the epoch it belongs to.
        return Ok(match on_file.filter(|&(_, c)| c <= MAX_COUNT) {
            Some((epoch, consumed)) => Held {
                epoch,
                count: consumed,
                told: consumed,
            },
            None => Held {
                epoch: 0,
                count: 0,
                told: 0,
            },
        });
    }
    let epoch = match on_file {
        Some((e, _)) if !fresh => e,
        Some((e, _)) => new_epoch(e),
        None => new_epoch(word(area, AT_EPOCH).min(MAX_COUNT)),
    };
    if fresh || on_file.is_none() {
        init_header(area, spec, epoch)?;
    }
    Ok(match role {
        // Entries a sender wrote into this area count only a ring's worth
        // past what is consumed.
        Role::Receiver => {
            let consumed = word(area, AT_CONSUMED);
            if consumed > MAX_COUNT {
                return Err(Error::Invalid(format!(
                    "{}: a consumed count of {consumed}: not a queue area",
                    path.display()
                )));
            }
            Held {
                epoch,
                count: consumed,
                told: durable_end(area, spec, epoch, Some(consumed)),
            }
        }
        Role::Sender => {
            let end = durable_end(area, spec, epoch, None);
            Held {
                epoch,
                count: end,
                told: end,
            }
        }
    })
}

/// Whether the peer's hello fits this side's durable state, and what they
/// agree on: the owner's epoch, this side's count, the least the peer's
/// count can be.
fn agree(spec: &Spec, role: Role, held: &Held, theirs: &Hello) -> Result<Agreed> {
    let owner = role == spec.owner();
    let (mut epoch, mut count) = (held.epoch, held.count);
    // A count counts only in the owner's epoch.
    if !owner {
        if epoch != theirs.epoch {
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
    let slots = spec.entry_count as u64;
    let counter_floor = match (spec.mode, role) {
        // The sender resumes after what the receiver's area holds.
        (Mode::Push, Role::Sender) => {
            count = peer_count;
            0
        }
        // The entries this side's area held when it opened are there.
        (Mode::Push, Role::Receiver) => held.told,
        (Mode::Pull, Role::Sender) if peer_count > count => {
            return Err(peer_corrupt(format!(
                "a consumed count of {peer_count}, past the {count} messages in the queue"
            )))
        }
        (Mode::Pull, Role::Receiver) if peer_count < count || peer_count - count > slots => {
            return Err(peer_corrupt(format!(
                "{peer_count} messages in a queue of {slots} where {count} are consumed"
            )))
        }
        _ => peer_count,
    };
    Ok(Agreed {
        epoch,
        count,
        counter_floor,
    })
}

/// Registers the owner's ring (never the header) with what the peer
/// needs: remote write and the FLUSHes this device can serve (push; remote
/// read too where it serves none, for the sender's READ-after-WRITE),
/// remote read (pull). Returns the region and what it grants.
fn register_ring(
    endpoint: &Endpoint,
    area: &Area,
    spec: &Spec,
    caps: Caps,
    path: &Path,
) -> Result<(Region, Grants)> {
    let mut grants = Grants {
        medium: Medium::of(area),
        ..Grants::default()
    };
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
    // SAFETY: the area stays mapped while the queue lives; the ring starts
    // after the header, inside it.
    let ring = unsafe { area.ptr().add(HEADER) };
    let mr = unsafe { endpoint.register(ring, spec.area_bytes() - HEADER, access) }.map_err(|e| {
        let on_fsdax = !area.devdax && Medium::of(area) == Medium::Pmem;
        Error::Rdma(if on_fsdax {
            format!(
                "{}: {e}: pages of a DAX filesystem cannot be pinned for RDMA; put the area on a Device DAX namespace (ndctl create-namespace -m devdax)",
                path.display()
            )
        } else {
            format!("{}: {e}", path.display())
        })
    })?;
    Ok((mr, grants))
}

/// What the owner grants and this device can do, both.
fn durability(spec: &Spec, role: Role, caps: Caps, g: Grants) -> Result<Durability> {
    Ok(if g.flush_persistent && caps.flush_persistent {
        Durability::FlushPersistent
    } else if g.flush_global && caps.flush_global {
        Durability::FlushGlobal
    } else if g.readable || spec.mode == Mode::Pull || role == Role::Receiver {
        Durability::ReadAfterWrite
    } else {
        return Err(Error::Rdma(
            "no way to make entries durable at the receiver: it grants a FLUSH this device cannot send, and no read".into(),
        ));
    })
}

fn rdma(e: sky_rdma::Error) -> Error {
    Error::Rdma(e.to_string())
}

fn peer_corrupt(what: String) -> Error {
    Error::RemoteCorrupt(what)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(mode: Mode) -> Spec {
        Spec {
            mode,
            entry_size: 64,
            entry_count: 16,
            plain_counters: false,
        }
    }

    fn hello(mode: Mode, role: Role, epoch: u64, count: u64) -> Hello {
        Hello {
            mode,
            role,
            entry_size: 64,
            entry_count: 16,
            epoch,
            count,
            area: Reach {
                addr: 0x1000,
                rkey: 1,
            },
            counter: Reach {
                addr: 0x2000,
                rkey: 2,
            },
            grants: Grants::default(),
            atomic_counters: true,
        }
    }

    fn held(epoch: u64, count: u64, told: u64) -> Held {
        Held { epoch, count, told }
    }

    #[test]
    fn a_push_sender_resumes_after_what_the_receivers_area_holds() {
        let s = spec(Mode::Push);
        let a = agree(
            &s,
            Role::Sender,
            &held(0, 0, 0),
            &hello(Mode::Push, Role::Receiver, 9, 37),
        )
        .unwrap();
        assert_eq!((a.epoch, a.count, a.counter_floor), (9, 37, 0));
        // The receiver counts its own durable entries as sent.
        let r = agree(
            &s,
            Role::Receiver,
            &held(9, 30, 37),
            &hello(Mode::Push, Role::Sender, 0, 0),
        )
        .unwrap();
        assert_eq!((r.epoch, r.count, r.counter_floor), (9, 30, 37));
    }

    #[test]
    fn a_count_from_another_epoch_counts_for_nothing() {
        let s = spec(Mode::Pull);
        // The pull receiver's consumed count belongs to epoch 4; the
        // sender's area is now in epoch 5.
        let a = agree(
            &s,
            Role::Receiver,
            &held(4, 20, 20),
            &hello(Mode::Pull, Role::Sender, 5, 3),
        )
        .unwrap();
        assert_eq!((a.epoch, a.count, a.counter_floor), (5, 0, 3));
        // The sender ignores a consumed count of an epoch it no longer has.
        let b = agree(
            &s,
            Role::Sender,
            &held(5, 3, 3),
            &hello(Mode::Pull, Role::Receiver, 4, 20),
        )
        .unwrap();
        assert_eq!((b.count, b.counter_floor), (3, 0));
    }

    #[test]
    fn impossible_counts_from_a_peer_are_refused_by_name() {
        let s = spec(Mode::Pull);
        let e = |r: Result<Agreed>| r.err().expect("refused").to_string();
        let past = agree(
            &s,
            Role::Sender,
            &held(5, 3, 3),
            &hello(Mode::Pull, Role::Receiver, 5, 4),
        );
        assert!(e(past).contains("a consumed count of 4, past the 3 messages"));
        let over_ring = agree(
            &s,
            Role::Receiver,
            &held(5, 2, 2),
            &hello(Mode::Pull, Role::Sender, 5, 19),
        );
        assert!(e(over_ring).contains("19 messages in a queue of 16 where 2 are consumed"));
        let behind = agree(
            &s,
            Role::Receiver,
            &held(5, 9, 9),
            &hello(Mode::Pull, Role::Sender, 5, 8),
        );
        assert!(e(behind).contains("8 messages in a queue of 16 where 9 are consumed"));
        let huge = agree(
            &spec(Mode::Push),
            Role::Sender,
            &held(0, 0, 0),
            &hello(Mode::Push, Role::Receiver, 1, MAX_COUNT + 1),
        );
        assert!(e(huge).contains("a count of"));
    }

    #[test]
    fn a_sender_without_a_flush_the_owner_grants_has_no_durable_push() {
        let s = spec(Mode::Push);
        let caps = Caps {
            flush_global: true,
            flush_persistent: false,
            atomic_write: true,
        };
        let both = Grants {
            flush_persistent: true,
            flush_global: true,
            ..Grants::default()
        };
        assert_eq!(
            durability(&s, Role::Sender, caps, both).unwrap(),
            Durability::FlushGlobal
        );
        let only_persistent = Grants {
            flush_persistent: true,
            ..Grants::default()
        };
        let e = durability(&s, Role::Sender, caps, only_persistent).unwrap_err();
        assert!(
            e.to_string().contains("no way to make entries durable"),
            "{e}"
        );
        let readable = Grants {
            readable: true,
            ..Grants::default()
        };
        assert_eq!(
            durability(&s, Role::Sender, caps, readable).unwrap(),
            Durability::ReadAfterWrite
        );
    }
}
