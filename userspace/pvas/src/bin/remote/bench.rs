//! What sky-pvas-remote measures for the benchmark against perftest
//! (tests/vm/rdma-bench.sh): the paper's receiver, which computes a matrix
//! product sized to each message between dequeues, and the latency from
//! the start of an enqueue to the hand-over at the receiver.

/// The largest matrix side: under TCG a product of 128 x 128 doubles
/// takes tens of milliseconds; larger ones would measure the emulator's
/// arithmetic, not the queue.
const MAX_SIDE: usize = 128;

/// The side of the square matrix of doubles a message of `len` bytes
/// holds, at most `MAX_SIDE`.
fn side(len: usize) -> usize {
    ((len / 8) as f64)
        .sqrt()
        .floor()
        .clamp(1.0, MAX_SIDE as f64) as usize
}

/// Multiplies the message's matrix (its bytes, cycled, as small numbers)
/// by itself; returns a sum of the product, so the work is not optimised
/// away.
pub fn product(payload: &[u8]) -> f64 {
    let n = side(payload.len());
    let a: Vec<f64> = (0..n * n)
        .map(|i| payload[i % payload.len()] as f64 / 256.0)
        .collect();
    let mut sum = 0.0;
    for i in 0..n {
        for j in 0..n {
            sum += (0..n).map(|k| a[i * n + k] * a[k * n + j]).sum::<f64>();
        }
    }
    sum
}

/// Writes the enqueue's start time over the message's first 8 bytes.
pub fn stamp(msg: &mut [u8]) {
    msg[..8].copy_from_slice(&sky_proc::monotonic_ns().to_le_bytes());
}

/// Nanoseconds since the message's stamp.
pub fn since_stamp(payload: &[u8]) -> u64 {
    let at = u64::from_le_bytes(payload[..8].try_into().unwrap());
    sky_proc::monotonic_ns().saturating_sub(at)
}

/// (p50, p99) of `ns`, in microseconds.
pub fn quantiles_us(ns: &mut [u64]) -> (u64, u64) {
    if ns.is_empty() {
        return (0, 0);
    }
    ns.sort_unstable();
    let at = |q: f64| ns[((ns.len() - 1) as f64 * q).round() as usize] / 1000;
    (at(0.5), at(0.99))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sky_pvas::pattern;

    #[test]
    fn matrices_follow_the_message_up_to_the_cap() {
        assert_eq!(side(64), 2);
        assert_eq!(side(4096), 22);
        assert_eq!(side(65536), 90);
        assert_eq!(side(32 << 20), MAX_SIDE);
        assert_eq!(side(1), 1);
        // The identity-like case: all bytes 128 -> every entry 0.5, each
        // product entry n * 0.25, summed over n * n entries.
        let sum = product(&[128u8; 72]);
        assert!((sum - 3.0 * 3.0 * 3.0 * 0.25).abs() < 1e-9, "{sum}");
    }

    #[test]
    fn a_stamp_is_skipped_and_the_rest_checked() {
        let mut m = vec![0u8; 100];
        pattern::fill(7, &mut m);
        stamp(&mut m);
        assert!(pattern::first_mismatch_after(7, &m, 8).is_none());
        m[50] ^= 1;
        assert_eq!(pattern::first_mismatch_after(7, &m, 8), Some(50));
        assert!(since_stamp(&m) < 10_000_000_000);
        assert_eq!(quantiles_us(&mut [3000, 1000, 2000]), (2, 3));
    }
}
