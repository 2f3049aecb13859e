//! One-copy messaging between members (blocking, in order, per pair).
//!
//! Rendezvous (large messages): the receiver posts "clear to send" with the
//! address of its buffer in its own export area; the sender announces the
//! message ("ready to send"), waits for that, and copies straight into the
//! receiver's buffer: one copy. Because the receiver posts as soon as it
//! calls recv, a sender that arrives second finds the address waiting and
//! skips the round trip, as the PVAS paper proposes.
//!
//! Eager (small messages, up to `Space::eager_max`): the sender copies into
//! a bounce buffer in the receiver's mailbox without waiting, the receiver
//! copies out: two copies, but no handshake, which wins for small sizes.

use crate::layout::*;
use crate::layout::{tagged_seq as tagged, SEQ_BITS, SEQ_MASK};
use crate::wait::{wait_until, wake};
use crate::{Error, Result, Space};
use std::sync::atomic::{AtomicU64, Ordering};

/// The sequence number in `word` if it was addressed to `epoch`, else 0.
fn seq_for(word: &AtomicU64, epoch: u32) -> u64 {
    let w = word.load(Ordering::Acquire);
    if w >> SEQ_BITS == epoch as u64 & 0xffff {
        w & SEQ_MASK
    } else {
        0
    }
}

/// The sequence number after `now`, which a peer may have set to
/// anything: at the top of the range it is corrupt, not a wrap.
fn next_seq(now: u64, peer: u32) -> Result<u64> {
    Some(now + 1)
        .filter(|&n| n <= SEQ_MASK)
        .ok_or_else(|| Error::PeerCorrupt {
            id: peer,
            what: format!("a message sequence number of {now}"),
        })
}

impl Space {
    fn mailbox(&self, receiver: u32, sender: u32) -> Result<&Mailbox> {
        Ok(&self.export(receiver)?.mailboxes[sender as usize])
    }

    /// Sends `data` to member `to`; returns once it is in `to`'s memory.
    pub fn send(&self, to: u32, data: &[u8]) -> Result<()> {
        let me = self.my_export().map(|_| self.id())?;
        let mine = self.generation();
        let peer = self.peer(to)?;
        let mb = self.mailbox(to, me)?;
        let seq = next_seq(seq_for(&mb.done_seq, peer.generation), to)?;
        let len = data.len() as u64;
        if data.len() <= self.eager_max() {
            // The bounce buffer is free once the previous message was taken.
            wait_until(self, &mb.wake, Some(peer), None, || {
                seq_for(&mb.consumed_seq, mine) + 1 >= seq
            })?;
            // SAFETY: only this sender writes the eager buffer, the receiver
            // is done with it (consumed_seq), and data fits (set_eager_max
            // keeps eager_max within EAGER_CAP).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    data.as_ptr(),
                    mb.eager.get().cast::<u8>(),
                    data.len(),
                )
            };
            return self.complete(mb, tagged(peer.generation, seq), len, KIND_EAGER);
        }
        mb.rts_len.store(len, Ordering::Relaxed);
        mb.rts_seq
            .store(tagged(peer.generation, seq), Ordering::Release);
        wake(&mb.wake);
        wait_until(self, &mb.wake, Some(peer), None, || {
            seq_for(&mb.cts_seq, mine) >= seq
        })?;
        let addr = mb.cts_addr.load(Ordering::Relaxed);
        let cap = mb.cts_cap.load(Ordering::Relaxed);
        let done = tagged(peer.generation, seq);
        if cap < len || !self.in_segment(to, addr, len) {
            self.complete(mb, done, len, KIND_TOO_SMALL)?;
            return Err(Error::TooLarge { len, cap });
        }
        // SAFETY: [addr, addr+len) is inside the receiver's segment (checked
        // above) and was posted by the receiver for exactly this message.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len()) };
        self.complete(mb, done, len, KIND_RENDEZVOUS)
    }

    fn complete(&self, mb: &Mailbox, done: u64, len: u64, kind: u32) -> Result<()> {
        mb.done_len.store(len, Ordering::Relaxed);
        mb.done_kind.store(kind, Ordering::Relaxed);
        mb.done_seq.store(done, Ordering::Release);
        wake(&mb.wake);
        Ok(())
    }

    /// Receives the next message from member `from` into `buf` and returns
    /// its length. For messages above the eager size `buf` must lie in this
    /// member's segment (see [`Space::alloc_bytes`]): that is where the
    /// sender copies to.
    pub fn recv(&self, from: u32, buf: &mut [u8]) -> Result<usize> {
        let me = self.my_export().map(|_| self.id())?;
        self.check_id(from)?;
        let mine = self.generation();
        let mb = self.mailbox(me, from)?;
        // Our own count (a claim by the sender resets it): its epoch tag
        // only guards the sender against a stale one of ours.
        let seq = next_seq(mb.consumed_seq.load(Ordering::Acquire) & SEQ_MASK, from)?;
        let ready = || seq_for(&mb.done_seq, mine) >= seq;
        let addr = buf.as_mut_ptr() as u64;
        let in_space = self.in_segment(me, addr, buf.len() as u64);
        // The sender's epoch is needed to post: wait for it to join unless
        // the message is already complete (it may have sent and left).
        let sender = self.joined_peer(from, &mut { ready })?;
        let sender_epoch = match sender {
            Some(p) => p.generation,
            None => self.slot(from).generation.load(Ordering::Acquire),
        };
        if let Some(peer) = sender {
            mb.cts_addr
                .store(if in_space { addr } else { 0 }, Ordering::Relaxed);
            mb.cts_cap.store(
                if in_space { buf.len() as u64 } else { 0 },
                Ordering::Relaxed,
            );
            mb.cts_seq
                .store(tagged(peer.generation, seq), Ordering::Release);
            wake(&mb.wake);
            wait_until(self, &mb.wake, Some(peer), None, ready)?;
        }
        let len = mb.done_len.load(Ordering::Relaxed);
        let corrupt = |what: String| Error::PeerCorrupt { id: from, what };
        let result = match mb.done_kind.load(Ordering::Relaxed) {
            // Checked before any copy: a peer's word is not a length we trust.
            KIND_EAGER if len > EAGER_CAP as u64 => Err(corrupt(format!(
                "an eager message of {len} bytes (the buffer holds {EAGER_CAP})"
            ))),
            KIND_EAGER if len as usize > buf.len() => {
                // Leave it queued: a larger buffer can still take it.
                return Err(Error::TooLarge {
                    len,
                    cap: buf.len() as u64,
                });
            }
            KIND_EAGER => {
                // SAFETY: the sender finished writing (done_seq, Acquire);
                // len fits both the eager buffer and buf (checked above).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        mb.eager.get().cast::<u8>(),
                        buf.as_mut_ptr(),
                        len as usize,
                    )
                };
                Ok(len as usize)
            }
            // Only into a buffer this member posted, and no longer than it.
            KIND_RENDEZVOUS if !in_space || len > buf.len() as u64 => Err(corrupt(format!(
                "a {len}-byte message copied into a {}-byte buffer{}",
                buf.len(),
                if in_space { "" } else { " it never posted" }
            ))),
            KIND_RENDEZVOUS => Ok(len as usize),
            KIND_TOO_SMALL if !in_space => Err(Error::Invalid(format!(
                "a {len}-byte message needs a receive buffer inside member {me}'s segment (alloc_bytes)"
            ))),
            KIND_TOO_SMALL => Err(Error::TooLarge {
                len,
                cap: buf.len() as u64,
            }),
            kind => Err(corrupt(format!("message kind {kind}"))),
        };
        mb.consumed_seq
            .store(tagged(sender_epoch, seq), Ordering::Release);
        wake(&mb.wake);
        result
    }
}
