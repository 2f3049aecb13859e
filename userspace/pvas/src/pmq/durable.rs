//! Where persistent queues live, durably: a descriptor per (role, slot) in
//! the owner's queue directory, and queue areas allocated downwards from
//! the end of the owner's segment. Neither is reset when a process claims
//! the ID, so a restarted member — or a machine after a power loss — finds
//! its queues where they were.
//!
//! Everything here is read back from memory a peer (or a damaged file) may
//! have written: every offset, size and count is checked before use.

use super::{Mode, QueueSpec};
use crate::layout::{QueueDesc, QueueDir, EXPORT_BYTES, HEAP_START, QUEUES_PER_MEMBER};
use crate::persist::Site;
use crate::{Error, Result, Space};
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) const AREA_MAGIC: u64 = u64::from_le_bytes(*b"SKYPMQ02");

/// The durable header at the start of a queue area.
#[repr(C, align(64))]
pub(super) struct AreaHeader {
    pub magic: AtomicU64,
    pub epoch: AtomicU64,
    pub entry_size: AtomicU64,
    pub entry_count: AtomicU64,
    /// Messages dequeued for good: recovery and resume start after it.
    pub consumed: AtomicU64,
}

pub(super) const AREA_HEADER: u64 = 64;

/// A queue descriptor's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Desc {
    pub epoch: u64,
    pub offset: u64,
    pub entry_size: u32,
    pub entry_count: u32,
    pub sender: u32,
    pub receiver: u32,
    pub mode: u32,
}

fn mode_code(mode: Mode) -> u32 {
    match mode {
        Mode::Push => 1,
        Mode::Pull => 2,
    }
}

impl Desc {
    pub fn for_spec(spec: &QueueSpec, epoch: u64, offset: u64) -> Desc {
        Desc {
            epoch,
            offset,
            entry_size: spec.entry_size,
            entry_count: spec.entry_count,
            sender: spec.sender,
            receiver: spec.receiver,
            mode: mode_code(spec.mode),
        }
    }

    pub fn matches(&self, spec: &QueueSpec) -> bool {
        (
            self.entry_size,
            self.entry_count,
            self.sender,
            self.receiver,
            self.mode,
        ) == (
            spec.entry_size,
            spec.entry_count,
            spec.sender,
            spec.receiver,
            mode_code(spec.mode),
        )
    }

    fn checksum(&self) -> u32 {
        let words = [
            self.epoch,
            self.offset,
            self.entry_size as u64,
            self.entry_count as u64,
            self.sender as u64,
            self.receiver as u64,
            self.mode as u64,
        ];
        // Zero is what a never-written descriptor holds.
        super::fnv1a(words.iter().flat_map(|w| w.to_le_bytes())) | 1
    }
}

/// Byte size of a queue area for `spec`.
pub(super) fn area_bytes(spec: &QueueSpec) -> u64 {
    AREA_HEADER + spec.stride() * spec.entry_count as u64
}

/// Descriptor index: the owner's role and the queue slot.
pub(super) fn desc_index(spec: &QueueSpec) -> usize {
    match spec.mode {
        Mode::Push => spec.slot as usize,
        Mode::Pull => QUEUES_PER_MEMBER + spec.slot as usize,
    }
}

fn dir(space: &Space, id: u32) -> Result<&QueueDir> {
    // SAFETY: the queue directory follows the export area in every segment
    // (page aligned, inside it: check_segment_size guarantees the room);
    // zero is a valid value for all its atomics.
    Ok(unsafe { &*(space.segment(id)?.add(EXPORT_BYTES as usize) as *const QueueDir) })
}

fn slot_of(space: &Space, owner: u32, index: usize) -> Result<&QueueDesc> {
    Ok(&dir(space, owner)?.descs[index])
}

/// The descriptor at `index` of `owner`'s directory if it is complete and
/// its own checksum vouches for it; the raw epoch word either way (a new
/// epoch must exceed even a torn descriptor's).
pub(super) fn read_desc(space: &Space, owner: u32, index: usize) -> Result<(Option<Desc>, u64)> {
    let d = slot_of(space, owner, index)?;
    let desc = Desc {
        epoch: d.epoch.load(Ordering::Acquire),
        offset: d.offset.load(Ordering::Relaxed),
        entry_size: d.entry_size.load(Ordering::Relaxed),
        entry_count: d.entry_count.load(Ordering::Relaxed),
        sender: d.sender.load(Ordering::Relaxed),
        receiver: d.receiver.load(Ordering::Relaxed),
        mode: d.mode.load(Ordering::Relaxed),
    };
    let sum = d.checksum.load(Ordering::Acquire);
    let valid = sum != 0 && sum == desc.checksum();
    Ok((valid.then_some(desc), desc.epoch))
}

/// Writes the descriptor (one cache line) and makes it durable. Until the
/// checksum matches, readers see no queue there.
pub(super) fn write_desc(space: &Space, owner: u32, index: usize, desc: &Desc) -> Result<()> {
    let d = slot_of(space, owner, index)?;
    d.checksum.store(0, Ordering::Release);
    d.epoch.store(desc.epoch, Ordering::Relaxed);
    d.offset.store(desc.offset, Ordering::Relaxed);
    d.entry_size.store(desc.entry_size, Ordering::Relaxed);
    d.entry_count.store(desc.entry_count, Ordering::Relaxed);
    d.sender.store(desc.sender, Ordering::Relaxed);
    d.receiver.store(desc.receiver, Ordering::Relaxed);
    d.mode.store(desc.mode, Ordering::Relaxed);
    d.checksum.store(desc.checksum(), Ordering::Release);
    space.persist_mode().persist(
        Site::Descriptor,
        d as *const QueueDesc as *const u8,
        std::mem::size_of::<QueueDesc>(),
    )
}

/// Is `offset..offset+bytes` a possible area in a segment: aligned, past
/// the heap start, inside the segment?
fn area_fits(space: &Space, offset: u64, bytes: u64) -> bool {
    offset.is_multiple_of(64)
        && offset >= HEAP_START
        && offset
            .checked_add(bytes)
            .is_some_and(|end| end <= space.header().segment_size)
}

/// The lowest byte any queue area of member `id` uses: the heap must stay
/// below it. Offsets that could not be areas (damage) are ignored here and
/// refused when the queue is opened.
pub fn durable_floor(space: &Space, id: u32) -> Result<u64> {
    let size = space.header().segment_size;
    Ok(dir(space, id)?
        .descs
        .iter()
        .map(|d| d.offset.load(Ordering::Acquire))
        .filter(|&o| o != 0 && area_fits(space, o, 0))
        .fold(size, u64::min))
}

/// Room for a new area of `bytes` below the lowest existing one and above
/// this member's heap.
pub(super) fn allocate_area(space: &Space, bytes: u64) -> Result<u64> {
    let id = space.id();
    let floor = durable_floor(space, id)?;
    let heap_top = space.export(id)?.heap_top.load(Ordering::Acquire);
    floor
        .checked_sub(bytes)
        .map(|o| o & !63)
        .filter(|&o| o >= heap_top.max(HEAP_START))
        .ok_or(Error::OutOfSpace {
            id,
            wanted: bytes,
            left: floor.saturating_sub(heap_top),
        })
}

/// The area a descriptor points at, checked against the segment.
pub(super) fn area_ptr(
    space: &Space,
    owner: u32,
    desc: &Desc,
    spec: &QueueSpec,
) -> Result<*mut u8> {
    let bytes = area_bytes(spec);
    if !area_fits(space, desc.offset, bytes) {
        return Err(Error::PeerCorrupt {
            id: owner,
            what: format!(
                "a queue area at offset {:#x} of {bytes} bytes (not 64-aligned or outside its segment)",
                desc.offset
            ),
        });
    }
    // SAFETY: inside the owner's segment (checked just above).
    Ok(unsafe { space.segment(owner)?.add(desc.offset as usize) })
}
