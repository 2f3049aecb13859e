//! What each side of a queue between machines says when it connects
//! (RDMA CM connection data, 56 bytes: what a client may send): the
//! queue's geometry, the epoch and count this side holds durably, and the
//! regions the peer may reach. Read from the peer, so every field is
//! checked before it is used.

use super::{Medium, Role, Spec};
use crate::pmq::Mode;
use crate::{Error, Result};

const MAGIC: [u8; 4] = *b"SKYQ";
/// 2: the push sender places its count after each entry, and the owner
/// says what its area is on (grants, bits 3-4). 3: each side says whether
/// it places counts by ATOMIC WRITE (bit 5); tagged plain WRITEs if not.
const VERSION: u8 = 3;
pub const BYTES: usize = 56;

/// A region of the peer: its address and key (its length follows from the
/// geometry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reach {
    pub addr: u64,
    pub rkey: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    pub mode: Mode,
    pub role: Role,
    pub entry_size: u32,
    pub entry_count: u32,
    /// The owner's: its area's epoch. The other side's: the epoch its
    /// count belongs to (0: none).
    pub epoch: u64,
    /// The receiver's: the consumed count, durable. The owner sender's
    /// (pull): the messages durably in its area.
    pub count: u64,
    /// The owner's queue area (zero from the other side).
    pub area: Reach,
    /// The 8-byte word the peer places its count into.
    pub counter: Reach,
    /// What the owner's area lets the peer do to make an entry durable.
    pub grants: Grants,
    /// This side places counts by ATOMIC WRITE, and its counter word takes
    /// them (both sides must say so; else tagged plain WRITEs).
    pub atomic_counters: bool,
}

/// What the owner grants on its area, beyond what the mode needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Grants {
    /// FLUSH to persistence (the area is on Device DAX).
    pub flush_persistent: bool,
    /// FLUSH to global visibility.
    pub flush_global: bool,
    /// Remote read (pull; push where the owner serves no FLUSH).
    pub readable: bool,
    /// What the owner's area is on (how durable a placed entry is there).
    pub medium: Medium,
}

impl Hello {
    pub fn to_bytes(self) -> [u8; BYTES] {
        let mut b = [0u8; BYTES];
        b[..4].copy_from_slice(&MAGIC);
        b[4] = VERSION;
        b[5] = match self.mode {
            Mode::Push => 0,
            Mode::Pull => 1,
        };
        b[6] = match self.role {
            Role::Sender => 0,
            Role::Receiver => 1,
        };
        b[7] = self.grants.flush_persistent as u8
            | (self.grants.flush_global as u8) << 1
            | (self.grants.readable as u8) << 2
            | (match self.grants.medium {
                Medium::Volatile => 0,
                Medium::PageCache => 1,
                Medium::Pmem => 2,
            }) << 3
            | (self.atomic_counters as u8) << 5;
        b[8..12].copy_from_slice(&self.entry_size.to_le_bytes());
        b[12..16].copy_from_slice(&self.entry_count.to_le_bytes());
        b[16..24].copy_from_slice(&self.epoch.to_le_bytes());
        b[24..32].copy_from_slice(&self.count.to_le_bytes());
        b[32..40].copy_from_slice(&self.area.addr.to_le_bytes());
        b[40..44].copy_from_slice(&self.area.rkey.to_le_bytes());
        b[44..52].copy_from_slice(&self.counter.addr.to_le_bytes());
        b[52..56].copy_from_slice(&self.counter.rkey.to_le_bytes());
        b
    }

    /// The peer's hello, checked against this side's `spec` and role: the
    /// same queue, the other end of it.
    pub fn from_peer(b: &[u8], spec: &Spec, me: Role) -> Result<Hello> {
        let bad = |what: String| Error::Invalid(format!("the peer's hello: {what}"));
        if b.len() < BYTES {
            return Err(bad(format!("{} bytes, {BYTES} expected", b.len())));
        }
        if b[..4] != MAGIC {
            return Err(bad("not a sky-pvas queue peer (bad magic)".into()));
        }
        if b[4] != VERSION {
            return Err(bad(format!(
                "version {}, this build speaks {VERSION}",
                b[4]
            )));
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        let mode = match b[5] {
            0 => Mode::Push,
            1 => Mode::Pull,
            m => return Err(bad(format!("mode {m}"))),
        };
        let role = match b[6] {
            0 => Role::Sender,
            1 => Role::Receiver,
            r => return Err(bad(format!("role {r}"))),
        };
        let h = Hello {
            mode,
            role,
            entry_size: u32_at(8),
            entry_count: u32_at(12),
            epoch: u64_at(16),
            count: u64_at(24),
            area: Reach {
                addr: u64_at(32),
                rkey: u32_at(40),
            },
            counter: Reach {
                addr: u64_at(44),
                rkey: u32_at(52),
            },
            grants: Grants {
                flush_persistent: b[7] & 1 != 0,
                flush_global: b[7] & 2 != 0,
                readable: b[7] & 4 != 0,
                medium: match (b[7] >> 3) & 3 {
                    0 => Medium::Volatile,
                    1 => Medium::PageCache,
                    2 => Medium::Pmem,
                    _ => return Err(bad(format!("flags {:#x}", b[7]))),
                },
            },
            atomic_counters: b[7] & 0x20 != 0,
        };
        if b[7] >> 6 != 0 {
            return Err(bad(format!("flags {:#x}", b[7])));
        }
        if h.mode != spec.mode {
            return Err(bad(format!(
                "a {:?} queue, this side runs {:?}",
                h.mode, spec.mode
            )));
        }
        if h.role == me {
            return Err(bad(format!("both sides are the {me:?}")));
        }
        if (h.entry_size, h.entry_count) != (spec.entry_size, spec.entry_count) {
            return Err(bad(format!(
                "{} entries of {} bytes, this side has {} of {}",
                h.entry_count, h.entry_size, spec.entry_count, spec.entry_size
            )));
        }
        let owner = h.role == spec.owner();
        if owner && h.area.addr == 0 {
            return Err(bad("the queue's owner offers no area".into()));
        }
        if h.counter.addr == 0 {
            return Err(bad("no counter word".into()));
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(mode: Mode) -> Spec {
        Spec {
            mode,
            entry_size: 4096,
            entry_count: 16,
            plain_counters: false,
        }
    }

    fn hello() -> Hello {
        Hello {
            mode: Mode::Push,
            role: Role::Receiver,
            entry_size: 4096,
            entry_count: 16,
            epoch: 3,
            count: 41,
            area: Reach {
                addr: 0x7f00_0000_0000,
                rkey: 9,
            },
            counter: Reach {
                addr: 0x10,
                rkey: 5,
            },
            grants: Grants {
                flush_persistent: true,
                flush_global: true,
                readable: false,
                medium: Medium::Pmem,
            },
            atomic_counters: true,
        }
    }

    #[test]
    fn a_hello_reads_back_as_written() {
        let h = hello();
        let back = Hello::from_peer(&h.to_bytes(), &spec(Mode::Push), Role::Sender).unwrap();
        assert_eq!(back, h);
    }

    #[test]
    fn a_hello_for_another_queue_or_side_is_refused_by_name() {
        let b = hello().to_bytes();
        let e = |bytes: &[u8], s: Spec, me: Role| {
            Hello::from_peer(bytes, &s, me).unwrap_err().to_string()
        };
        assert!(e(&b, spec(Mode::Pull), Role::Sender).contains("a Push queue"));
        assert!(e(&b, spec(Mode::Push), Role::Receiver).contains("both sides are the Receiver"));
        let mut other = spec(Mode::Push);
        other.entry_count = 8;
        assert!(e(&b, other, Role::Sender).contains("16 entries of 4096 bytes"));
        let mut garbage = b;
        garbage[0] = b'X';
        assert!(e(&garbage, spec(Mode::Push), Role::Sender).contains("bad magic"));
        assert!(e(&b[..20], spec(Mode::Push), Role::Sender).contains("20 bytes"));
        let mut mode = b;
        mode[5] = 7;
        assert!(e(&mode, spec(Mode::Push), Role::Sender).contains("mode 7"));
        let mut flags = b;
        flags[7] = 0xff;
        assert!(e(&flags, spec(Mode::Push), Role::Sender).contains("flags 0xff"));
        let mut high = b;
        high[7] |= 0x40;
        assert!(e(&high, spec(Mode::Push), Role::Sender).contains("flags 0x"));
        let mut old = b;
        old[4] = 2;
        assert!(e(&old, spec(Mode::Push), Role::Sender).contains("version 2"));
        let mut no_area = hello();
        no_area.area = Reach::default();
        assert!(e(&no_area.to_bytes(), spec(Mode::Push), Role::Sender).contains("offers no area"));
    }
}
