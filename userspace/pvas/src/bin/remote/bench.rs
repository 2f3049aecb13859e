//! What sky-pvas-remote measures for the benchmark against perftest
//! (tests/vm/rdma-bench.sh): the paper's receiver, which computes a matrix
//! product sized to each message between dequeues, and the latency from
//! the start of an enqueue to the hand-over at the receiver.

use sky_pvas::pattern;

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

/// CLOCK_MONOTONIC in nanoseconds: one clock for both ends when they run
/// on one machine (network namespaces of one VM).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Writes the enqueue's start time over the message's first 8 bytes.
pub fn stamp(msg: &mut [u8]) {
    msg[..8].copy_from_slice(&now_ns().to_le_bytes());
}

/// Nanoseconds since the message's stamp.
pub fn since_stamp(payload: &[u8]) -> u64 {
    let at = u64::from_le_bytes(payload[..8].try_into().unwrap());
    now_ns().saturating_sub(at)
}

/// Whether message `k` arrived as sent: the pattern after `skip` bytes
/// (the stamp, when there is one).
pub fn intact(k: u64, payload: &[u8], skip: usize) -> bool {
    payload
        .iter()
        .enumerate()
        .skip(skip)
        .all(|(i, b)| *b == pattern::byte(k, i))
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
        assert!(intact(7, &m, 8));
        m[50] ^= 1;
        assert!(!intact(7, &m, 8));
        assert!(since_stamp(&m) < 10_000_000_000);
        assert_eq!(quantiles_us(&mut [3000, 1000, 2000]), (2, 3));
    }
}
