//! BPF map values as the C structs bpf/intf.h and the BPF headers declare
//! them (the bindings build.rs generates), read and written whole through
//! `plain`: no Rust code places a field's bytes by hand, so a field moved
//! in C reaches every reader with the next build, and a field added to a
//! written struct stops the build at its size assertion below until the
//! assertion (the no-padding proof) is brought up to date.

use crate::bpf::intf::{sky_gang_home, sky_task_counts, sky_task_row};
use crate::bpf::skel::types::sky_task;
use plain::Plain;

// SAFETY: each is a #[repr(C)] struct of integers and integer arrays:
// every bit pattern is a valid value (what Plain asks).
unsafe impl Plain for sky_gang_home {}
unsafe impl Plain for sky_task_counts {}
unsafe impl Plain for sky_task_row {}
unsafe impl Plain for sky_task {}

/// A value with no padding: all of its bytes are initialised, so they
/// may be handed to BPF (or compared) as they are.
///
/// # Safety
/// Only for types whose size is the sum of their fields' (asserted at
/// each impl).
pub unsafe trait Unpadded: Plain {}

// SAFETY: sizes asserted to be the fields' sum.
unsafe impl Unpadded for sky_gang_home {}
unsafe impl Unpadded for sky_task_row {}
const _: () = assert!(std::mem::size_of::<sky_gang_home>() == 4 + 4 + 8);
const _: () = assert!(
    std::mem::size_of::<sky_task_row>()
        == 4 * 4 + crate::bpf::intf::sky_consts_SKY_COMM_LEN as usize
);

/// A value of type `T` from the bytes a map lookup or an iterator gave
/// (they need not be aligned for `T`); None when they are too few.
pub fn read<T: Plain + Copy>(bytes: &[u8]) -> Option<T> {
    // SAFETY: all-zero bytes are a valid T (Plain).
    let mut value: T = unsafe { std::mem::zeroed() };
    plain::copy_from_bytes(&mut value, bytes).ok()?;
    Some(value)
}

/// Every value of type `T` in `bytes`, written back to back; None when
/// they are not whole values.
pub fn read_all<T: Plain + Copy>(bytes: &[u8]) -> Option<Vec<T>> {
    let size = std::mem::size_of::<T>();
    if !bytes.len().is_multiple_of(size) {
        return None;
    }
    bytes.chunks_exact(size).map(read).collect()
}

/// A value's bytes, as BPF reads them.
pub fn bytes<T: Unpadded>(value: &T) -> &[u8] {
    // SAFETY: no padding (Unpadded): every byte is initialised.
    unsafe { plain::as_bytes(value) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_short_bytes_are_refused() {
        let home = sky_gang_home {
            llc: 3,
            planned: 1,
            since_ns: 77,
        };
        let bytes = bytes(&home).to_vec();
        assert_eq!(bytes.len(), 16);
        // Unaligned, as a Vec<u8> at an odd offset is.
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&bytes);
        let back: sky_gang_home = read(&shifted[1..]).unwrap();
        assert_eq!((back.llc, back.planned, back.since_ns), (3, 1, 77));
        assert!(read::<sky_gang_home>(&bytes[..15]).is_none());
    }

    #[test]
    fn rows_written_back_to_back_are_read_whole_or_refused() {
        let row = |tid: u32| {
            let mut r: sky_task_row = read(&[0u8; 64]).unwrap();
            r.tid = tid;
            r.pid = 1;
            r.cpu = -1;
            r
        };
        let size = std::mem::size_of::<sky_task_row>();
        let mut bytes = Vec::new();
        for tid in [5, 6] {
            bytes.extend_from_slice(super::bytes(&row(tid)));
        }
        let rows: Vec<sky_task_row> = read_all(&bytes).unwrap();
        assert_eq!(rows.iter().map(|r| r.tid).collect::<Vec<_>>(), [5, 6]);
        assert_eq!(rows[1].cpu, -1);
        assert!(read_all::<sky_task_row>(&bytes[..size + 1]).is_none());
    }
}
