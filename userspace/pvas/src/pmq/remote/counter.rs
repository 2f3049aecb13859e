//! How a side's count travels into the peer's 8-byte counter word.
//!
//! ATOMIC WRITE places the word whole: the count itself is the word. A
//! device without it places the word with a plain RDMA WRITE, which the
//! verbs do not promise to place whole (a responder may copy it byte by
//! byte), so a reader could see half of the old count and half of the new.
//! There the word carries the count (48 bits: 2^48 messages) and a 16-bit
//! tag computed from it. A reader takes a tagged word only if the tag
//! matches and a second load finds the same word: a torn word exists only
//! while a write is in flight (nanoseconds), and passes both only if it
//! also matches the tag by chance (1 in 65 536). One that fails is read
//! again; a word that keeps failing is the peer's garbage, refused by
//! name. A count that passes is still checked as any count is (never past
//! what the peer can have done). ATOMIC WRITE has none of this residue:
//! the queue uses it wherever both devices can.

/// How counts are placed on this connection: both sides use ATOMIC WRITE
/// only if both say they can.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    AtomicWrite,
    TaggedWrite,
}

/// The largest count a tagged word can carry.
pub const TAGGED_MAX: u64 = (1 << 48) - 1;

fn tag(count: u64) -> u64 {
    // A multiplicative hash's top bits: every bit of the count moves them,
    // so a mix of two counts' halves fails it but for 1 in 65 536.
    count.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 48
}

impl Placement {
    /// The word that says `count`; None if this placement cannot carry it.
    pub fn encode(self, count: u64) -> Option<u64> {
        match self {
            Placement::AtomicWrite => Some(count),
            Placement::TaggedWrite => (count <= TAGGED_MAX).then(|| count << 16 | tag(count)),
        }
    }

    /// The count `word` says; None for a word no whole write left (torn,
    /// or garbage).
    pub fn decode(self, word: u64) -> Option<u64> {
        match self {
            Placement::AtomicWrite => Some(word),
            Placement::TaggedWrite => {
                let count = word >> 16;
                (word & 0xffff == tag(count)).then_some(count)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_back_as_placed() {
        for p in [Placement::AtomicWrite, Placement::TaggedWrite] {
            for count in [0, 1, 2, 80, 4095, 1 << 32, TAGGED_MAX] {
                assert_eq!(
                    p.decode(p.encode(count).unwrap()),
                    Some(count),
                    "{p:?} {count}"
                );
            }
        }
        assert_eq!(Placement::TaggedWrite.encode(TAGGED_MAX + 1), None);
        assert_eq!(Placement::AtomicWrite.encode(u64::MAX), Some(u64::MAX));
    }

    /// Mixes of two neighbouring counts' bytes, as a byte-wise copy could
    /// leave them, pass for a count about as often as chance allows.
    #[test]
    fn a_torn_tagged_word_rarely_passes() {
        let p = Placement::TaggedWrite;
        let (mut mixes, mut passed) = (0u64, 0u64);
        for old in (0..5000u64).chain([0xff_ffff, 0xffff_ffff, 1 << 40]) {
            let (a, b) = (p.encode(old).unwrap(), p.encode(old + 1).unwrap());
            for mask in 1..255u64 {
                let bytes: u64 = (0..8)
                    .filter(|i| mask & (1 << i) != 0)
                    .map(|i| 0xffu64 << (8 * i))
                    .sum();
                let torn = (a & !bytes) | (b & bytes);
                if torn != a && torn != b {
                    mixes += 1;
                    passed += u64::from(p.decode(torn).is_some());
                }
            }
        }
        assert!(mixes > 100_000, "{mixes}");
        // Chance is 1 in 65 536: at most 4 in 65 536 here.
        assert!(
            passed * 65_536 <= 4 * mixes,
            "{passed} of {mixes} torn words passed"
        );
    }

    #[test]
    fn garbage_rarely_passes_for_a_count() {
        let p = Placement::TaggedWrite;
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let passed = (0..100_000)
            .filter(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                p.decode(x).is_some()
            })
            .count();
        // 1 in 65 536 expected: about 1.5 of 100 000.
        assert!(passed <= 10, "{passed}");
        assert_eq!(p.decode(u64::MAX), None, "the unplaced word is no count");
    }
}
