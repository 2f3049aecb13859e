//! The 64-byte header of an owner's area, which is also the whole of a
//! pull receiver's state file (magic, epoch, entry size, entry count,
//! consumed count, each a u64), and the durable state read from an area
//! when a side opens: which entries it holds for good.

use super::area::Area;
use super::{Spec, MAX_COUNT};
use crate::persist::Site;
use crate::pmq::read_entry;
use crate::Result;

pub const HEADER: usize = 64;
const MAGIC: u64 = u64::from_le_bytes(*b"SKYRQ\0\0\x01");
const AT_MAGIC: usize = 0;
pub const AT_EPOCH: usize = 8;
const AT_SIZE: usize = 16;
const AT_COUNT: usize = 24;
pub const AT_CONSUMED: usize = 32;

pub fn word(area: &Area, at: usize) -> u64 {
    // SAFETY: an aligned word inside the area's header.
    unsafe { std::ptr::read_volatile(area.ptr().add(at) as *const u64) }
}

pub fn write_word(area: &Area, at: usize, value: u64) {
    // SAFETY: an aligned word inside the area's header, this side's alone.
    unsafe { std::ptr::write_volatile(area.ptr().add(at) as *mut u64, value) }
}

/// (epoch, consumed) of a header of this geometry, if there is one.
pub fn read_header(area: &Area, spec: &Spec) -> Option<(u64, u64)> {
    (word(area, AT_MAGIC) == MAGIC
        && word(area, AT_SIZE) == spec.entry_size as u64
        && word(area, AT_COUNT) == spec.entry_count as u64)
        .then(|| (word(area, AT_EPOCH), word(area, AT_CONSUMED)))
}

/// A header for `epoch`, nothing consumed, made durable before its magic.
pub fn init_header(area: &Area, spec: &Spec, epoch: u64) -> Result<()> {
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
pub fn init_header_once(area: &Area, spec: &Spec, epoch: u64) -> Result<()> {
    match read_header(area, spec) {
        Some((e, _)) if e == epoch => Ok(()),
        _ => init_header(area, spec, epoch),
    }
}

/// Makes `consumed` the durable consumed count.
pub fn commit_consumed(area: &Area, consumed: u64) -> Result<()> {
    write_word(area, AT_CONSUMED, consumed);
    area.persist(Site::Consumed, AT_CONSUMED, 8)
}

/// The messages durably in an owner's area: the unbroken run of complete
/// entries of `epoch`, each in its own slot, after `from` (the consumed
/// count), or, when that is not known (a pull sender opening), after the
/// oldest entry the ring still holds; at most a ring's worth.
pub fn durable_end(area: &Area, spec: &Spec, epoch: u64, from: Option<u64>) -> u64 {
    let slots = spec.entry_count as u64;
    let seq_in = |slot: u64| {
        let offset = spec.entry_offset(slot);
        // SAFETY: the slot lies inside the area.
        unsafe { read_entry(area.ptr().add(offset), epoch, spec.entry_size) }
            .map(|(seq, _)| seq)
            .filter(|&seq| (1..=MAX_COUNT).contains(&seq) && (seq - 1) % slots == slot)
    };
    let start = from.unwrap_or_else(|| (0..slots).filter_map(seq_in).min().map_or(0, |m| m - 1));
    let mut n = start;
    while n < start + slots && seq_in(n % slots) == Some(n + 1) {
        n += 1;
    }
    n
}

/// A new epoch: past the old and past any a recreated file could have
/// held (the clock's nanoseconds), so an epoch never repeats for a peer
/// that remembers one.
pub fn new_epoch(old: u64) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    old.saturating_add(1).max(now).min(MAX_COUNT)
}
