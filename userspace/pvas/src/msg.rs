//! One-copy messaging between members (blocking, in order, per pair).
//!
//! Rendezvous (large messages): the receiver posts "clear to send" with the
//! address of its buffer in its own export area; the sender announces the
//! message ("ready to send"), waits for that, and copies straight into the
//! receiver's buffer: one copy. Because the receiver posts as soon as it
//! calls recv, a sender that arrives second finds the address waiting and
//! skips the round trip, as the PVAS paper proposes.
//!
//! Split (the paper's "both sides copy", for large rendezvous messages
//! whose data lies in the sender's own segment, where the receiver can
//! read it): once the sender has the receiver's buffer, it publishes its
//! source with the ready-to-send, and both copy at once, each claiming
//! chunks from its own end of the message through one atomic cursor (the
//! member with the lower ID from the front), so a slow side never holds
//! the other back; the message is complete when both are done.
//!
//! Waits spin well past what a futex wake-up costs before they sleep,
//! yielding the CPU as they go (see `SPIN_MIN`), and check that the peer
//! is alive only before sleeping: no system call per message.
//!
//! Eager (small messages, up to `Space::eager_max`): the sender copies into
//! a bounce buffer in the receiver's mailbox without waiting, the receiver
//! copies out: two copies, but no handshake, which wins for small sizes.

use crate::layout::*;
use crate::layout::{tagged_seq as tagged, SEQ_BITS, SEQ_MASK};
use crate::wait::{wait_until, wake, Peer};
use crate::{Error, Result, Space};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Rendezvous messages at least this long are split ([`CopyBy::Auto`])
/// when their data lies in the sender's segment.
pub const SPLIT_MIN: usize = 8 << 10;
/// A split is cut into `SPLIT_PARTS` chunks (see SPLIT_CHUNK_MIN/MAX).
const SPLIT_PARTS: u64 = 16;

/// Who copies a rendezvous message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CopyBy {
    /// Both sides from [`SPLIT_MIN`] bytes on, the sender alone below.
    #[default]
    Auto,
    /// The sender alone, whatever the size.
    Sender,
    /// Both sides, whatever the size.
    Both,
}

/// What one receive did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// The message's length.
    pub len: usize,
    /// Bytes this member copied into its buffer itself: all of an eager
    /// message, its share of a split one, none of a sender-copied one.
    pub copied_here: usize,
}

/// The end of a split's chunk list a member claims from: the lower ID
/// takes the front. Fixed per pair, not per direction, so in an exchange
/// each side copies the part of each buffer it touched last time, still in
/// its own cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Front,
    Back,
}

impl End {
    fn of(me: u32, peer: u32) -> End {
        if me <= peer {
            End::Front
        } else {
            End::Back
        }
    }
}

/// Claims the next chunk from `end`; `claims` is how many this side has
/// claimed before. Only this side moves its half of the cursor, so any
/// other value there, or more claims than chunks (each side makes at most
/// one failing claim), is a peer's doing.
fn claim(cursor: &AtomicU64, end: End, claims: u64, n: u64, peer: u32) -> Result<Option<u64>> {
    let step = if end == End::Front { 1 } else { 1 << 32 };
    let was = cursor.fetch_add(step, Ordering::Relaxed);
    let (front, back) = (was & 0xffff_ffff, was >> 32);
    let own = if end == End::Front { front } else { back };
    if own != claims || front + back > n + 1 {
        return Err(Error::PeerCorrupt {
            id: peer,
            what: format!(
                "a split cursor at {front} front + {back} back claims of {n} chunks ({claims} claimed here)"
            ),
        });
    }
    Ok((front + back < n).then_some(if end == End::Front {
        front
    } else {
        n - 1 - back
    }))
}

/// Chunk size for a split of `len` bytes.
fn split_chunk(len: u64) -> u64 {
    round_up(len.div_ceil(SPLIT_PARTS), 4096).clamp(SPLIT_CHUNK_MIN, SPLIT_CHUNK_MAX)
}

/// How long a message wait spins before it sleeps. Waking a sleeper costs
/// a system call and a trip through the scheduler: 73–125 us on the
/// 2-core build machine (a VM), more than the 40 us `wait_until` spins.
/// If a wait gives up sooner than the other side can be woken, the other
/// side's next wait does too and every message pays a wake-up from then on
/// (seen there: one-copy at 16 KiB 20x slower than the ring).
const SPIN_MIN: Duration = Duration::from_micros(500);
/// Spinning past this yields the CPU now and then (about every 2.5 us): if
/// the member waited for shares this CPU (the scheduler tends to put a
/// woken task next to its waker), it runs at once instead of after our
/// spin; if not, a yield is a cheap system call. Measured there with both
/// members on one CPU: 51 us per message with a 50 us threshold.
const YIELD_AFTER: Duration = Duration::from_micros(5);

/// How long to spin before sleeping while `bytes` are being copied
/// elsewhere: 1 ns per byte, at least `SPIN_MIN`, at most 1 ms (beyond
/// that a wake-up is noise).
fn spin_budget(bytes: u64) -> Duration {
    Duration::from_nanos(bytes.min(1_000_000)).max(SPIN_MIN)
}

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

    /// Spins up to `budget` for `ready` (yielding now and then after
    /// `YIELD_AFTER`), then waits as usual: spins a little more, then
    /// sleeps, checking that `peer` is alive.
    fn wait_spinning(
        &self,
        mb: &Mailbox,
        peer: Peer,
        budget: Duration,
        mut ready: impl FnMut() -> bool,
    ) -> Result<()> {
        let start = Instant::now();
        let mut spins = 0u32;
        while !ready() {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(256) {
                let spun = start.elapsed();
                if spun >= budget {
                    return wait_until(self, &mb.wake, Some(peer), None, ready);
                }
                if spun >= YIELD_AFTER {
                    std::thread::yield_now();
                }
            }
            std::hint::spin_loop();
        }
        Ok(())
    }

    /// Sends `data` to member `to`; returns once it is in `to`'s memory.
    pub fn send(&self, to: u32, data: &[u8]) -> Result<()> {
        self.send_with(to, data, CopyBy::Auto).map(|_| ())
    }

    /// Sends `data` to member `to`, copied as `by` says, and returns the
    /// bytes this member copied itself. Only data inside this member's
    /// segment (see [`Space::alloc_bytes`]) can be split: the receiver can
    /// read nothing else; other data is copied by the sender alone.
    pub fn send_with(&self, to: u32, data: &[u8], by: CopyBy) -> Result<usize> {
        let me = self.my_export().map(|_| self.id())?;
        self.check_id(to)?;
        let mine = self.generation();
        let peer = match self.active_peer(to) {
            Some(p) => p,
            None => self.peer(to)?,
        };
        let mb = self.mailbox(to, me)?;
        let seq = next_seq(seq_for(&mb.done_seq, peer.generation), to)?;
        let len = data.len() as u64;
        if data.len() <= self.eager_max() {
            // The bounce buffer is free once the previous message was taken.
            self.wait_spinning(mb, peer, SPIN_MIN, || {
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
            self.complete(mb, tagged(peer.generation, seq), len, KIND_EAGER)?;
            return Ok(data.len());
        }
        let split = match by {
            CopyBy::Auto => data.len() >= SPLIT_MIN,
            CopyBy::Sender => false,
            CopyBy::Both => true,
        } && !data.is_empty()
            && self.in_segment(me, data.as_ptr() as u64, len);
        if !split {
            // A split announces itself with its source, once it may.
            mb.rts_len.store(len, Ordering::Relaxed);
            mb.rts_seq
                .store(tagged(peer.generation, seq), Ordering::Release);
            wake(&mb.wake);
        }
        self.wait_spinning(mb, peer, SPIN_MIN, || seq_for(&mb.cts_seq, mine) >= seq)?;
        let addr = mb.cts_addr.load(Ordering::Relaxed);
        let cap = mb.cts_cap.load(Ordering::Relaxed);
        let done = tagged(peer.generation, seq);
        if cap < len || !self.in_segment(to, addr, len) {
            self.complete(mb, done, len, KIND_TOO_SMALL)?;
            return Err(Error::TooLarge { len, cap });
        }
        let copied = if split {
            self.send_split(mb, peer, seq, data, addr as *mut u8)?
        } else {
            // SAFETY: [addr, addr+len) is inside the receiver's segment
            // (checked above) and was posted by the receiver for exactly
            // this message.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len()) };
            data.len()
        };
        self.complete(mb, done, len, KIND_RENDEZVOUS)?;
        Ok(copied)
    }

    /// The sender's side of a split: publish the source, copy chunks from
    /// our end, wait for the receiver's share. Returns our share.
    fn send_split(
        &self,
        mb: &Mailbox,
        peer: Peer,
        seq: u64,
        data: &[u8],
        dst: *mut u8,
    ) -> Result<usize> {
        let len = data.len() as u64;
        let chunk = split_chunk(len);
        let n = len.div_ceil(chunk);
        let block = SplitBlock::of(mb);
        block.src.store(data.as_ptr() as u64, Ordering::Relaxed);
        block.chunk.store(chunk, Ordering::Relaxed);
        block.cursor.store(0, Ordering::Relaxed);
        block.copied.store(0, Ordering::Relaxed);
        mb.rts_len.store(len | RTS_SPLIT, Ordering::Relaxed);
        mb.rts_seq
            .store(tagged(peer.generation, seq), Ordering::Release);
        wake(&mb.wake);
        let end = End::of(self.id(), peer.id);
        let (mut claims, mut ours) = (0, 0u64);
        while let Some(i) = claim(&block.cursor, end, claims, n, peer.id)? {
            let start = i * chunk;
            let size = chunk.min(len - start);
            // SAFETY: chunk i lies within the message (i < n), so within
            // data and within the receiver's posted buffer (checked by the
            // caller); the cursor gives each chunk to one side only.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    data.as_ptr().add(start as usize),
                    dst.add(start as usize),
                    size as usize,
                )
            };
            claims += 1;
            ours += size;
        }
        // Every chunk is claimed: the receiver's share is the rest.
        let theirs = len - ours;
        self.wait_spinning(mb, peer, spin_budget(chunk), || {
            block.copied.load(Ordering::Acquire) >= theirs
        })?;
        let copied = block.copied.load(Ordering::Acquire);
        if copied != theirs {
            return Err(Error::PeerCorrupt {
                id: peer.id,
                what: format!("{copied} bytes copied of a {theirs}-byte share of a split"),
            });
        }
        Ok(ours as usize)
    }

    fn complete(&self, mb: &Mailbox, done: u64, len: u64, kind: u32) -> Result<()> {
        mb.done_len.store(len, Ordering::Relaxed);
        mb.done_kind.store(kind, Ordering::Relaxed);
        mb.done_seq.store(done, Ordering::Release);
        wake(&mb.wake);
        Ok(())
    }

    /// Has member `from` announced (ready to send) or completed its next
    /// message to this member? Does not receive it.
    pub fn announced(&self, from: u32) -> Result<bool> {
        let me = self.my_export().map(|_| self.id())?;
        self.check_id(from)?;
        let mb = self.mailbox(me, from)?;
        let next = (mb.consumed_seq.load(Ordering::Acquire) & SEQ_MASK) + 1;
        let mine = self.generation();
        Ok(seq_for(&mb.rts_seq, mine) >= next || seq_for(&mb.done_seq, mine) >= next)
    }

    /// Receives the next message from member `from` into `buf` and returns
    /// its length. For messages above the eager size `buf` must lie in this
    /// member's segment (see [`Space::alloc_bytes`]): that is where the
    /// sender copies to.
    pub fn recv(&self, from: u32, buf: &mut [u8]) -> Result<usize> {
        self.recv_with(from, buf).map(|r| r.len)
    }

    /// Like [`Space::recv`], and says how much of the message this member
    /// copied itself (its share of a split).
    pub fn recv_with(&self, from: u32, buf: &mut [u8]) -> Result<Received> {
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
        let sender = match self.active_peer(from) {
            Some(p) => Some(p),
            None => self.joined_peer(from, &mut { ready })?,
        };
        let sender_epoch = match sender {
            Some(p) => p.generation,
            None => self.slot(from).generation.load(Ordering::Acquire),
        };
        let mut copied_here = 0;
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
            let announced = || seq_for(&mb.rts_seq, mine) == seq;
            self.wait_spinning(mb, peer, SPIN_MIN, || ready() || announced())?;
            if !ready() {
                // Announced: the length is only a hint of how long to spin,
                // unless this is a split, whose every value is checked.
                let rts = mb.rts_len.load(Ordering::Relaxed);
                let mut outstanding = rts & !RTS_SPLIT;
                if rts & RTS_SPLIT != 0 {
                    match self.recv_split(mb, from, buf, in_space, outstanding) {
                        Ok((ours, chunk)) => {
                            copied_here = ours as usize;
                            outstanding = chunk;
                        }
                        Err(e) => {
                            self.consume(mb, sender_epoch, seq);
                            return Err(e);
                        }
                    }
                }
                self.wait_spinning(mb, peer, spin_budget(outstanding), ready)?;
            }
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
                copied_here = len as usize;
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
        self.consume(mb, sender_epoch, seq);
        result.map(|len| Received { len, copied_here })
    }

    fn consume(&self, mb: &Mailbox, sender_epoch: u32, seq: u64) {
        mb.consumed_seq
            .store(tagged(sender_epoch, seq), Ordering::Release);
        wake(&mb.wake);
    }

    /// The receiver's side of a split of `len` bytes: check what the
    /// sender published, copy chunks from our end into `buf`. Returns our
    /// share and the chunk size.
    fn recv_split(
        &self,
        mb: &Mailbox,
        from: u32,
        buf: &mut [u8],
        in_space: bool,
        len: u64,
    ) -> Result<(u64, u64)> {
        let corrupt = |what: String| Error::PeerCorrupt { id: from, what };
        let block = SplitBlock::of(mb);
        let src = block.src.load(Ordering::Relaxed);
        let chunk = block.chunk.load(Ordering::Relaxed);
        if len == 0 || !in_space || len > buf.len() as u64 {
            return Err(corrupt(format!(
                "a {len}-byte split copy into a {}-byte buffer{}",
                buf.len(),
                if in_space { "" } else { " it never posted" }
            )));
        }
        if !self.in_segment(from, src, len) {
            return Err(corrupt(format!(
                "a split source {src:#x}+{len:#x} outside member {from}'s segment"
            )));
        }
        if chunk < SPLIT_CHUNK_MIN {
            return Err(corrupt(format!("split chunks of {chunk} bytes")));
        }
        let n = len.div_ceil(chunk);
        let end = End::of(self.id(), from);
        let (mut claims, mut ours) = (0, 0u64);
        while let Some(i) = claim(&block.cursor, end, claims, n, from)? {
            let start = i * chunk;
            let size = chunk.min(len - start);
            // SAFETY: chunk i lies within [0, len); the source range is in
            // the sender's segment and len fits buf (both checked above);
            // the cursor gives each chunk to one side only.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (src + start) as *const u8,
                    buf.as_mut_ptr().add(start as usize),
                    size as usize,
                )
            };
            claims += 1;
            ours += size;
            block.copied.store(ours, Ordering::Release);
        }
        wake(&mb.wake);
        Ok((ours, chunk))
    }
}
