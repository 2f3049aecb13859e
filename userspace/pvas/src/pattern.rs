//! Deterministic message contents, so a receiver in another process can
//! check every byte without the data being sent twice.

/// Byte `i` of message `k`.
pub fn byte(k: u64, i: usize) -> u8 {
    (k.wrapping_mul(31) as usize ^ i.wrapping_mul(7) ^ (i >> 8)) as u8
}

pub fn fill(k: u64, buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = byte(k, i);
    }
}

/// Index of the first wrong byte, if any.
pub fn first_mismatch(k: u64, buf: &[u8]) -> Option<usize> {
    first_mismatch_after(k, buf, 0)
}

/// Index of the first wrong byte past the first `skip` (which the sender
/// overwrote: a time stamp), if any.
pub fn first_mismatch_after(k: u64, buf: &[u8], skip: usize) -> Option<usize> {
    (skip..buf.len()).find(|&i| buf[i] != byte(k, i))
}
