//! The on-file (and in-memory: they are the same) layout of a space.
//!
//! ```text
//! base + 0 x seg      segment 0: control — Header, then the member table
//! base + i x seg      segment i (member ID i, 1..=max_members):
//!                       ExportArea (fixed size, found from the ID alone;
//!                         reset when a process claims the ID)
//!                       QueueDir (durable: survives restarts and power
//!                         loss; describes the persistent queues it owns)
//!                       the member's heap, bump allocated upwards, reset
//!                         with the membership ...
//!                       ... persistent queue areas, allocated downwards
//!                         from the segment's end, kept across restarts
//! ```
//! Every shared field is an atomic or plain bytes: the file is mapped by
//! processes that trust each other's code but not each other's timing.

use crate::{Error, Result};
use std::cell::UnsafeCell;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64};

pub const MAGIC: [u8; 8] = *b"SKYPVAS\0";
pub const LAYOUT_VERSION: u32 = 2;
/// Largest member ID; IDs run 1..=max_members.
pub const MAX_MEMBERS: u32 = 64;
/// Bytes of a mailbox's eager (bounce) buffer: the largest eager message.
pub const EAGER_CAP: usize = 16 * 1024;
/// Words in an export area that members publish for each other.
pub const EXPORT_WORDS: usize = 32;
/// Segments are a multiple of this (and so is the base address).
pub const SEGMENT_ALIGN: u64 = 2 << 20;
pub const MIN_SEGMENT: u64 = 2 << 20;
pub const MAX_SEGMENT: u64 = 64 << 30;
/// The control segment's header occupies the first page.
pub const HEADER_BYTES: usize = 4096;

/// Space states.
pub const SPACE_ACTIVE: u32 = 1;
pub const SPACE_DESTROYED: u32 = 2;

/// Member slot states (0: never claimed).
pub const SLOT_ACTIVE: u32 = 1;
pub const SLOT_LEFT: u32 = 2;
/// Claimed, shared state being reset: not yet a peer to talk to.
pub const SLOT_JOINING: u32 = 3;

/// Written once by the creator; readers check it before mapping.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderFixed {
    pub magic: [u8; 8],
    pub version: u32,
    pub max_members: u32,
    pub segment_size: u64,
    pub base: u64,
    pub total_size: u64,
    pub creator_pid: u32,
    pub _pad: u32,
    pub created_unix_ns: u64,
}

pub const FIXED_BYTES: usize = std::mem::size_of::<HeaderFixed>();

impl HeaderFixed {
    /// Bytes of the fixed header at the start of a space file.
    pub const BYTES: usize = FIXED_BYTES;
}

/// The live part of the header, after the fixed part.
#[repr(C)]
pub struct HeaderLive {
    pub state: AtomicU32,
    /// Bumped (and futex-woken) when the space is destroyed.
    pub wake: AtomicU32,
}

#[repr(C, align(64))]
pub struct MemberSlot {
    /// pid in the low 32 bits, the low 32 bits of its start time (clock
    /// ticks since boot) in the high ones: one word, so a claim is one
    /// compare-and-swap and a recycled pid is never taken for the member.
    pub owner: AtomicU64,
    pub state: AtomicU32,
    /// Set while the member writes to a persistent queue: a scheduler hint.
    pub pm_writer: AtomicU32,
    /// The membership's epoch: odd while a claim resets the slot's shared
    /// state, even (and new) once the member is active or has left.
    pub generation: AtomicU32,
    /// Scheduler hints the member sets about itself (`MEMBER_*` bits).
    pub hints: AtomicU32,
}

/// `MemberSlot::hints`: the member is memory-bound (its space should share
/// one last-level cache; the scheduler gangs it with its peers there).
pub const MEMBER_MEMORY_BOUND: u32 = 1;

/// One sender's channel into a receiver, in the receiver's export area.
#[repr(C, align(64))]
pub struct Mailbox {
    /// Receiver: "clear to send" message `cts_seq` into [cts_addr, +cts_cap).
    pub cts_seq: AtomicU64,
    pub cts_addr: AtomicU64,
    pub cts_cap: AtomicU64,
    /// Sender: "ready to send" message `rts_seq` of `rts_len` bytes.
    pub rts_seq: AtomicU64,
    pub rts_len: AtomicU64,
    /// Sender: message `done_seq` is complete, `done_len` bytes, via `done_kind`.
    pub done_seq: AtomicU64,
    pub done_len: AtomicU64,
    pub done_kind: AtomicU32,
    /// Futex word: bumped on every change either side makes.
    pub wake: AtomicU32,
    /// Receiver: has taken message `consumed_seq` (frees the eager buffer).
    pub consumed_seq: AtomicU64,
    /// Written by the sender, read by the receiver, never at once (the
    /// sequence numbers order them): interior mutability in shared memory.
    pub eager: UnsafeCell<[u8; EAGER_CAP]>,
}

/// Mailbox sequence words carry, above the sequence number, the epoch
/// (slot generation) of the member they are addressed to: a word written
/// by a previous incarnation of the peer, or to a previous incarnation of
/// this member, reads as "nothing yet" instead of a stale count.
pub const SEQ_BITS: u32 = 48;
pub const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

/// Sequence number `seq` addressed to the member whose epoch is `epoch`.
pub fn tagged_seq(epoch: u32, seq: u64) -> u64 {
    ((epoch as u64 & 0xffff) << SEQ_BITS) | seq
}

pub const KIND_EAGER: u32 = 1;
pub const KIND_RENDEZVOUS: u32 = 2;
/// The receiver's posted buffer was too small; nothing was copied.
pub const KIND_TOO_SMALL: u32 = 3;

/// One side's volatile view of a persistent queue, in its export area
/// (reset with the membership; rebuilt from the durable state by open).
#[repr(C, align(64))]
pub struct QueueCounters {
    /// The queue epoch `local` belongs to; 0: not open in this membership.
    pub epoch: AtomicU64,
    /// Sender: messages enqueued and published (written by the sender only).
    pub local: AtomicU64,
    /// Futex word: bumped when the other side may proceed.
    pub wake: AtomicU32,
}

/// Queue pairs a member can take part in, per direction.
pub const QUEUES_PER_MEMBER: usize = 8;

#[repr(C)]
pub struct ExportArea {
    pub magic: AtomicU64,
    pub owner_pid: AtomicU32,
    pub generation: AtomicU32,
    /// Offset of the first free heap byte from the segment start.
    pub heap_top: AtomicU64,
    /// Words members publish for each other (buffer addresses, roots...).
    pub words: [AtomicU64; EXPORT_WORDS],
    /// Queue counters, by queue slot: this member as sender, as receiver.
    pub send_queues: [QueueCounters; QUEUES_PER_MEMBER],
    pub recv_queues: [QueueCounters; QUEUES_PER_MEMBER],
    /// Mailboxes indexed by sender ID (index 0 unused).
    pub mailboxes: [Mailbox; MAX_MEMBERS as usize + 1],
}

pub const EXPORT_MAGIC: u64 = u64::from_le_bytes(*b"SKYEXPRT");
pub const EXPORT_BYTES: u64 = round_up(std::mem::size_of::<ExportArea>() as u64, 4096);

/// Where a persistent queue lives, in its owner's segment: one cache line,
/// written whole and then made durable, its checksum telling a complete
/// descriptor from a torn or foreign one. Indexed by (role, queue slot), so
/// a member that owns a Push queue and a Pull queue on the same slot keeps
/// two descriptors.
#[repr(C, align(64))]
pub struct QueueDesc {
    /// Bumped each time the owner creates the queue anew: entries and
    /// counters of an earlier epoch never count in this one.
    pub epoch: AtomicU64,
    /// Offset of the queue area from the segment start.
    pub offset: AtomicU64,
    pub entry_size: AtomicU32,
    pub entry_count: AtomicU32,
    pub sender: AtomicU32,
    pub receiver: AtomicU32,
    pub mode: AtomicU32,
    pub checksum: AtomicU32,
}

/// Queue slots per member and role (sender for Pull, receiver for Push).
pub const QUEUE_DESCS: usize = 2 * QUEUES_PER_MEMBER;

/// The durable page after the export area.
#[repr(C)]
pub struct QueueDir {
    pub descs: [QueueDesc; QUEUE_DESCS],
}

pub const DIR_BYTES: u64 = round_up(std::mem::size_of::<QueueDir>() as u64, 4096);
/// Offset of the first heap byte in a segment.
pub const HEAP_START: u64 = EXPORT_BYTES + DIR_BYTES;

pub const fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

/// Bytes the control segment needs for `max_members`.
pub fn control_bytes(max_members: u32) -> u64 {
    HEADER_BYTES as u64 + (max_members as u64 + 1) * std::mem::size_of::<MemberSlot>() as u64
}

impl HeaderFixed {
    pub fn new(
        max_members: u32,
        segment_size: u64,
        base: u64,
        creator_pid: u32,
        now_ns: u64,
    ) -> Self {
        HeaderFixed {
            magic: MAGIC,
            version: LAYOUT_VERSION,
            max_members,
            segment_size,
            base,
            total_size: segment_size * (max_members as u64 + 1),
            creator_pid,
            _pad: 0,
            created_unix_ns: now_ns,
        }
    }

    pub fn to_bytes(&self) -> [u8; FIXED_BYTES] {
        let mut out = [0u8; FIXED_BYTES];
        out[0..8].copy_from_slice(&self.magic);
        out[8..12].copy_from_slice(&self.version.to_le_bytes());
        out[12..16].copy_from_slice(&self.max_members.to_le_bytes());
        out[16..24].copy_from_slice(&self.segment_size.to_le_bytes());
        out[24..32].copy_from_slice(&self.base.to_le_bytes());
        out[32..40].copy_from_slice(&self.total_size.to_le_bytes());
        out[40..44].copy_from_slice(&self.creator_pid.to_le_bytes());
        out[48..56].copy_from_slice(&self.created_unix_ns.to_le_bytes());
        out
    }

    /// Parses and checks a header read from an untrusted file of
    /// `file_len` bytes. Every way it can be wrong has its own error.
    pub fn parse(bytes: &[u8], file_len: u64) -> Result<Self, Error> {
        if bytes.len() < FIXED_BYTES {
            return Err(Error::Truncated {
                needed: FIXED_BYTES as u64,
                found: bytes.len() as u64,
            });
        }
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
        let h = HeaderFixed {
            magic: bytes[0..8].try_into().unwrap(),
            version: u32_at(8),
            max_members: u32_at(12),
            segment_size: u64_at(16),
            base: u64_at(24),
            total_size: u64_at(32),
            creator_pid: u32_at(40),
            _pad: 0,
            created_unix_ns: u64_at(48),
        };
        if h.magic != MAGIC {
            return Err(Error::BadMagic);
        }
        if u32_at(44) != 0 {
            return Err(Error::BadHeader(
                "reserved header bytes are not zero".into(),
            ));
        }
        if h.version != LAYOUT_VERSION {
            return Err(Error::BadVersion {
                found: h.version,
                supported: LAYOUT_VERSION,
            });
        }
        if h.max_members == 0 || h.max_members > MAX_MEMBERS {
            return Err(Error::BadHeader(format!(
                "max_members {} outside 1..={MAX_MEMBERS}",
                h.max_members
            )));
        }
        check_segment_size(h.segment_size, h.max_members).map_err(Error::BadHeader)?;
        if h.base == 0 || !h.base.is_multiple_of(SEGMENT_ALIGN) || h.base >= (1 << 47) {
            return Err(Error::BadHeader(format!(
                "base {:#x} is not a usable address",
                h.base
            )));
        }
        let expected = h.segment_size * (h.max_members as u64 + 1);
        if h.total_size != expected {
            return Err(Error::BadHeader(format!(
                "size {} does not match {} segments of {}",
                h.total_size,
                h.max_members + 1,
                h.segment_size
            )));
        }
        if h.base
            .checked_add(h.total_size)
            .is_none_or(|end| end > 1 << 47)
        {
            return Err(Error::BadHeader(format!(
                "space at {:#x} runs past user addresses",
                h.base
            )));
        }
        if file_len < h.total_size {
            return Err(Error::Truncated {
                needed: h.total_size,
                found: file_len,
            });
        }
        Ok(h)
    }
}

/// A segment must hold its export area plus some heap, and the control
/// segment must hold the member table.
pub fn check_segment_size(segment_size: u64, max_members: u32) -> Result<(), String> {
    if !(MIN_SEGMENT..=MAX_SEGMENT).contains(&segment_size)
        || !segment_size.is_multiple_of(SEGMENT_ALIGN)
    {
        return Err(format!(
            "segment size {segment_size} must be a multiple of {SEGMENT_ALIGN} between {MIN_SEGMENT} and {MAX_SEGMENT}"
        ));
    }
    if segment_size < HEAP_START + 4096 || segment_size < control_bytes(max_members) {
        return Err(format!(
            "segment size {segment_size} is too small for the export area"
        ));
    }
    Ok(())
}

/// A split is cut into `SPLIT_PARTS` chunks (a multiple of 4 KiB each),
/// but no chunk is shorter than `SPLIT_CHUNK_MIN` or longer than
/// `SPLIT_CHUNK_MAX`: few claims, and a share small enough that the side
/// still running can take over the rest.
pub const SPLIT_CHUNK_MIN: u64 = 4 << 10;
pub const SPLIT_CHUNK_MAX: u64 = 1 << 20;
/// Set in `rts_len` when the sender published a split (a `SplitBlock`).
pub const RTS_SPLIT: u64 = 1 << 63;

/// The control block of a split copy. It lives in the mailbox's eager
/// buffer, which is free for exactly as long as a split needs it: the
/// sender writes it only after the receiver's clear-to-send for the
/// message (so the receiver has taken the previous one), the receiver
/// touches it only before it marks the message consumed, and the sender's
/// next write to the buffer waits for that.
#[repr(C)]
pub struct SplitBlock {
    /// Where the data starts (in the sender's segment).
    pub src: AtomicU64,
    /// Bytes per chunk; the last chunk holds the rest.
    pub chunk: AtomicU64,
    /// Chunks claimed: from the front in the low 32 bits, from the back in
    /// the high 32 bits. A claim succeeds while the two add up to less than
    /// the chunk count.
    pub cursor: AtomicU64,
    /// Bytes the receiver has copied (the sender waits for its share).
    pub copied: AtomicU64,
}

/// The block starts on a cache line of its own inside the eager buffer.
const BLOCK_AT: usize = (64 - std::mem::offset_of!(Mailbox, eager) % 64) % 64;
const _: () = assert!(BLOCK_AT.is_multiple_of(8));
const _: () = assert!(BLOCK_AT + std::mem::size_of::<SplitBlock>() <= EAGER_CAP);

impl SplitBlock {
    /// The split control block of mailbox `mb`.
    pub fn of(mb: &Mailbox) -> &SplitBlock {
        // SAFETY: the eager buffer is interior-mutable shared bytes, 8-aligned
        // at BLOCK_AT (the mailbox is 64-aligned), and large enough (checked
        // above); atomics are valid for any bit pattern. Who may touch it
        // when is ordered by the sequence words (see the type's doc).
        unsafe { &*(mb.eager.get().cast::<u8>().add(BLOCK_AT) as *const SplitBlock) }
    }
}

/// Backing files are named `<prefix><space name>`.
pub const FILE_PREFIX: &str = "scx_sky-pvas-";

/// The header of the space file `file` (at `path`), read with plain reads
/// and checked against the file's length: a short file is `Truncated`.
pub fn read_header_of(file: &File, path: &Path) -> Result<HeaderFixed> {
    let len = file
        .metadata()
        .map_err(|e| Error::io(path.display(), e))?
        .len();
    let mut buf = [0u8; FIXED_BYTES];
    let n = read_prefix(file, &mut buf).map_err(|e| Error::io(path.display(), e))?;
    HeaderFixed::parse(&buf[..n], len)
}

fn read_prefix(file: &File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], n as u64)? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}
