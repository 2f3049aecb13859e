//! A hostile end of the queue, for tests only (the `fault-injection`
//! feature; the `sky-pvas-hostile` program): it follows the handshake,
//! then writes garbage wherever its peer lets it write, and tries what its
//! peer's regions do not grant. The honest end must refuse with a clear
//! error and lose nothing it holds durably.

use super::header::HEADER;
use super::{rdma, RemoteQueue, Role, MAX_COUNT};
use crate::{Error, Result};

/// xorshift64: reproducible garbage from a seed.
struct Garbage(u64);

impl Garbage {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

impl RemoteQueue {
    /// `rounds` rounds of garbage from `seed`: random bytes at random
    /// places of the peer's ring (a push sender's reach), then counts the
    /// protocol forbids placed into the peer's counter word (past the
    /// ring, far past it, backwards). The last count is one a push
    /// receiver could believe, over garbage (it then finds garbage where it
    /// expects an entry), or, to a pull sender, a consumed count past
    /// anything it sent. Returns the writes that went through, and why the
    /// rest did not when the peer hung up first (as an honest peer does on
    /// the first garbage it sees).
    pub fn scribble(&self, seed: u64, rounds: u32) -> Result<(u32, Option<String>)> {
        let mut done = 0;
        match self.scribble_until_refused(seed, rounds, &mut done) {
            Ok(()) => Ok((done, None)),
            Err(Error::Rdma(why)) if done > 0 => Ok((done, Some(why))),
            Err(e) => Err(e),
        }
    }

    fn scribble_until_refused(&self, seed: u64, rounds: u32, done: &mut u32) -> Result<()> {
        let mut g = Garbage(seed | 1);
        let stride = self.spec.stride();
        let slots = self.spec.entry_count as u64;
        if let (Role::Sender, Some(ring)) = (self.role, &self.peer_area) {
            for _ in 0..rounds {
                // SAFETY: the stage holds stride bytes.
                let stage = unsafe { std::slice::from_raw_parts_mut(self.stage_ptr, stride) };
                for b in stage.iter_mut() {
                    *b = g.next() as u8;
                }
                let ring_len = self.spec.area_bytes() - HEADER;
                let len = 1 + (g.next() as usize) % stride;
                let at = (g.next() as usize) % (ring_len - len + 1);
                self.conn
                    .write(&self.stage_mr, 0, len, ring, at as u64)
                    .map_err(rdma)?;
                *done += 1;
            }
            // Every slot's first bytes: no entry is left whole.
            for slot in 0..slots {
                let at = slot as usize * stride;
                self.conn
                    .write(&self.stage_mr, 0, 64.min(stride), ring, at as u64)
                    .map_err(rdma)?;
                *done += 1;
            }
        }
        let now = self.peer_count()?;
        let mut placed = vec![g.next(), MAX_COUNT + 1, now + slots + 1, u64::MAX - 1, 0];
        placed.extend((0..rounds).map(|_| g.next() % (now + 4 * slots + 1)));
        placed.push(match self.role {
            // One entry past where the receiver is: over garbage.
            Role::Sender => now + 1,
            // Past anything the sender can have sent.
            Role::Receiver => MAX_COUNT + 1,
        });
        for &value in &placed {
            self.conn
                .atomic_write(&self.peer_counter, 0, value)
                .map_err(rdma)?;
            *done += 1;
        }
        Ok(())
    }

    /// Tries what the owner's ring does not grant this side: a READ of a
    /// push receiver's (it grants writes and FLUSH), a WRITE into a pull
    /// sender's (it grants reads). Returns the error the peer's NIC
    /// answered with, or an error if it was let through.
    pub fn reach_beyond_grant(&self) -> Result<String> {
        let ring = self
            .peer_area
            .as_ref()
            .ok_or_else(|| Error::Invalid("this side owns the area".into()))?;
        let r = match self.role {
            Role::Sender => self.conn.read(&self.stage_mr, 0, 8, ring, 0),
            Role::Receiver => self.conn.write(&self.stage_mr, 0, 8, ring, 0),
        };
        match r {
            Err(e) => Ok(e.to_string()),
            Ok(()) => Err(Error::Invalid(format!(
                "the peer's ring let the {:?} {}",
                self.role,
                match self.role {
                    Role::Sender => "read it",
                    Role::Receiver => "write it",
                }
            ))),
        }
    }
}
