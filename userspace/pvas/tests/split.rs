//! Split one-copy transfers (both sides copy): byte-exact at odd sizes,
//! every byte copied by exactly one side, hostile values refused from
//! either side, and a sender killed mid-copy never leaves its receiver
//! hanging or holding a torn message it was told is complete.

mod common;

use common::*;
use sky_pvas::layout::{tagged_seq, Mailbox, SplitBlock, HEAP_START, RTS_SPLIT, SEQ_MASK};
use sky_pvas::msg::{CopyBy, SPLIT_MIN};
use sky_pvas::{pattern, testing, Error, Space};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The `copied=a,b,c` list of a peer's last line.
fn copied_list(line: &str) -> Vec<usize> {
    let list = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("copied="))
        .unwrap_or_else(|| panic!("no copied= in {line:?}"));
    list.split(',').map(|n| n.parse().unwrap()).collect()
}

/// Receives message k = 0.. of `sizes` from `from`, checks every byte,
/// and returns the bytes this side copied of each.
fn receive_all(me: &Space, from: u32, sizes: &[usize]) -> Vec<usize> {
    let mut buf = me.alloc_bytes(*sizes.iter().max().unwrap()).unwrap();
    sizes
        .iter()
        .enumerate()
        .map(|(k, &size)| {
            let r = me.recv_with(from, &mut buf).unwrap();
            assert_eq!(r.len, size, "message {k}");
            if let Some(at) = pattern::first_mismatch(k as u64, &buf[..size]) {
                panic!("message {k} ({size} B) differs at byte {at}");
            }
            r.copied_here
        })
        .collect()
}

/// Runs `body` in a thread and fails the test if it takes over `secs`
/// seconds: a refusal that turns into a wait must fail, not hang.
fn within(secs: u64, body: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        body();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("still waiting after {secs} s"),
    }
}

/// Pins the calling thread (and threads it starts) to one CPU and returns
/// another for a peer (`SKY_PVAS_PEER_CPU`), so both sides of a split can
/// run at once: left alone, a loaded scheduler may put them on one CPU,
/// where the receiver never gets to copy. None with a single CPU.
fn apart() -> Option<String> {
    // SAFETY: cpu_set_t is plain data; the kernel fills it in.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: a valid set of the size given.
    assert_eq!(unsafe { libc::sched_getaffinity(0, size, &mut set) }, 0);
    let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        // SAFETY: c is below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect();
    if cpus.len() < 2 {
        eprintln!("one CPU: not checking that the receiver takes part");
        return None;
    }
    // SAFETY: as above.
    let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: cpus[0] is below CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpus[0], &mut one) };
    // SAFETY: a valid set of the size given; pins this thread only.
    assert_eq!(unsafe { libc::sched_setaffinity(0, size, &one) }, 0);
    Some(cpus[1].to_string())
}

fn peer_env(cpu: &Option<String>) -> Vec<(&str, &str)> {
    cpu.iter()
        .map(|c| ("SKY_PVAS_PEER_CPU", c.as_str()))
        .collect()
}

/// Sizes around the threshold and the chunking, and the largest.
fn odd_sizes() -> Vec<usize> {
    vec![
        SPLIT_MIN + 1,
        SPLIT_MIN + 4096,
        3 * 4096 + 1,
        16 * 4096 - 1,
        100_003,
        (1 << 20) + 7,
        (3 << 20) - 5,
        64 << 20,
    ]
}

/// Both ends of the chunk list (member 1 takes the front, member 2 the
/// back) and both modes that split: every message whole, every byte
/// copied by exactly one side, and the receiver really took part.
#[test]
fn split_transfers_are_byte_exact_and_every_byte_is_copied_once() {
    let sizes = odd_sizes();
    let cpu = apart();
    for (sender, receiver, mode) in [(1u32, 2u32, "auto"), (2, 1, "both")] {
        let s = space(&format!("split-exact-{mode}"), 2, 80);
        let send = peer(
            &s.path,
            sender,
            "send-split",
            &[
                strs(&[receiver.to_string(), mode.to_string()]),
                strs(&sizes),
            ]
            .concat(),
            &peer_env(&cpu),
        );
        let me = Space::attach(&s.path, receiver).unwrap();
        let here = receive_all(&me, sender, &sizes);
        let lines = send.finish();
        let there = copied_list(lines.last().unwrap());
        for (k, &size) in sizes.iter().enumerate() {
            assert_eq!(
                here[k] + there[k],
                size,
                "{mode}: message {k} ({size} B): the receiver copied {}, the sender {}",
                here[k],
                there[k]
            );
        }
        assert!(
            cpu.is_none() || here.iter().sum::<usize>() > 0,
            "{mode}: the receiver never copied a byte: {here:?}"
        );
    }
}

/// This process sending: a split into a peer's buffer, the sender alone
/// when asked to, and the sender alone for data outside its segment
/// (which the receiver cannot read), whatever the mode.
#[test]
fn only_data_in_the_senders_segment_is_split() {
    let s = space("split-modes", 2, 80);
    let sizes = [64usize << 20, 1 << 20, 1 << 20, 100_003];
    let cpu = apart();
    let recv = peer(
        &s.path,
        2,
        "recv-split",
        &strs(&[vec![1], sizes.to_vec()].concat()),
        &peer_env(&cpu),
    );
    let me = Space::attach(&s.path, 1).unwrap();
    let mut data = me.alloc_bytes(64 << 20).unwrap();
    let mut outside = vec![0u8; 100_003];
    let mut mine = Vec::new();
    pattern::fill(0, &mut data[..sizes[0]]);
    mine.push(me.send_with(2, &data[..sizes[0]], CopyBy::Auto).unwrap());
    pattern::fill(1, &mut data[..sizes[1]]);
    mine.push(me.send_with(2, &data[..sizes[1]], CopyBy::Sender).unwrap());
    pattern::fill(2, &mut data[..sizes[2]]);
    mine.push(me.send_with(2, &data[..sizes[2]], CopyBy::Both).unwrap());
    pattern::fill(3, &mut outside);
    mine.push(me.send_with(2, &outside, CopyBy::Both).unwrap());
    let lines = recv.finish();
    let theirs = copied_list(lines.last().unwrap());
    for k in 0..sizes.len() {
        assert_eq!(mine[k] + theirs[k], sizes[k], "message {k}");
    }
    assert_eq!(theirs[1], 0, "CopyBy::Sender was split");
    assert_eq!(theirs[3], 0, "data outside the segment was split");
    assert!(
        cpu.is_none() || theirs[0] + theirs[2] > 0,
        "the receiver never took part: {theirs:?}"
    );
}

/// A sender (here: this test, writing member 2's words) that publishes a
/// split no correct member publishes: each receive is refused naming the
/// peer before anything is copied, nothing is read out of bounds, and the
/// member goes on receiving.
#[test]
fn a_hostile_senders_split_is_refused_not_trusted() {
    let s = space("split-hostile-sender", 2, 4);
    // Held outside the worker, so a failed test does not leave it running.
    let _peer = hold(&s.path, 2);
    let path = s.path.clone();
    within(30, move || hostile_sender(&path));
}

fn hostile_sender(path: &std::path::Path) {
    let me = Space::attach(path, 1).unwrap();
    let mb = &testing::export(&me, 1).unwrap().mailboxes[2];
    let block = SplitBlock::of(mb);
    let seg2 = me.segment(2).unwrap() as u64;
    let heap2 = seg2 + HEAP_START;
    let end2 = seg2 + me.header().segment_size;
    let mut posted = me.alloc_bytes(64 << 10).unwrap();
    posted.fill(0xaa);
    let mut seq = 0;
    let mut announce = |src: u64, len: u64, chunk: u64, cursor: u64| {
        seq += 1;
        block.src.store(src, Relaxed);
        block.chunk.store(chunk, Relaxed);
        block.cursor.store(cursor, Relaxed);
        block.copied.store(0, Relaxed);
        mb.rts_len.store(len | RTS_SPLIT, Relaxed);
        mb.rts_seq.store(tagged_seq(me.generation(), seq), Release);
    };
    let refused = |e: Error, part: &str| {
        assert!(matches!(e, Error::PeerCorrupt { id: 2, .. }), "{e}");
        assert!(e.to_string().contains(part), "{e}");
    };
    let k32 = 32 << 10;
    // Sources outside the sender's segment: in ours, past its end, unmapped.
    announce(posted.as_ptr() as u64 + 4096, k32, 4096, 0);
    refused(
        me.recv(2, &mut posted).unwrap_err(),
        "outside member 2's segment",
    );
    announce(end2 - 4096, k32, 4096, 0);
    refused(
        me.recv(2, &mut posted).unwrap_err(),
        "outside member 2's segment",
    );
    announce(0x10, k32, 4096, 0);
    refused(
        me.recv(2, &mut posted).unwrap_err(),
        "outside member 2's segment",
    );
    announce(u64::MAX - 100, k32, 4096, 0);
    refused(
        me.recv(2, &mut posted).unwrap_err(),
        "outside member 2's segment",
    );
    // Impossible cursors: claims this member (the front) never made, and
    // more claims from the back than there are chunks.
    announce(heap2, k32, 4096, 3);
    refused(me.recv(2, &mut posted).unwrap_err(), "split cursor");
    announce(heap2, k32, 4096, 20 << 32);
    refused(me.recv(2, &mut posted).unwrap_err(), "split cursor");
    announce(heap2, k32, 4096, u64::MAX);
    refused(me.recv(2, &mut posted).unwrap_err(), "split cursor");
    // Chunks too small to be real (and a zero that would divide by zero).
    announce(heap2, k32, 0, 0);
    refused(
        me.recv(2, &mut posted).unwrap_err(),
        "split chunks of 0 bytes",
    );
    announce(heap2, k32, 100, 0);
    refused(
        me.recv(2, &mut posted).unwrap_err(),
        "split chunks of 100 bytes",
    );
    // Longer than the posted buffer, or into one never posted.
    announce(heap2, 1 << 20, 4096, 0);
    refused(
        me.recv(2, &mut posted).unwrap_err(),
        "1048576-byte split copy into a 65536-byte buffer",
    );
    let mut outside = vec![0u8; 64 << 10];
    announce(heap2, k32, 4096, 0);
    refused(me.recv(2, &mut outside).unwrap_err(), "never posted");
    assert!(
        posted.iter().all(|&b| b == 0xaa),
        "a refused split wrote into the buffer"
    );
    // An honest eager message after all that is received whole.
    // SAFETY: writing the eager buffer as the sender would (nobody reads it now).
    unsafe { std::ptr::copy_nonoverlapping(b"hello".as_ptr(), mb.eager.get().cast::<u8>(), 5) };
    mb.done_len.store(5, Relaxed);
    mb.done_kind.store(sky_pvas::layout::KIND_EAGER, Relaxed);
    mb.done_seq
        .store(tagged_seq(me.generation(), seq + 1), Release);
    let mut small = [0u8; 16];
    assert_eq!(me.recv(2, &mut small).unwrap(), 5);
    assert_eq!(&small[..5], b"hello");
}

/// A receiver (here: a thread of this test, writing member 2's words)
/// that tampers with a split under way: the sender refuses an impossible
/// cursor, and a receiver claiming to have copied more than its share.
#[test]
fn a_hostile_receiver_cannot_make_a_split_sender_trust_it() {
    let len: usize = 16 << 20;
    for case in ["cursor", "copied"] {
        let s = space(&format!("split-hostile-receiver-{case}"), 2, 20);
        let _peer = hold(&s.path, 2);
        let path = s.path.clone();
        within(60, move || hostile_receiver(&path, case, len));
    }
}

fn hostile_receiver(path: &std::path::Path, case: &'static str, len: usize) {
    {
        let me = Space::attach(path, 1).unwrap();
        let data = me.alloc_bytes(len).unwrap();
        let mb = &testing::export(&me, 2).unwrap().mailboxes[1];
        let dst = me.segment(2).unwrap() as u64 + HEAP_START;
        let mut outcome = None;
        // The sender may be through before the tampering starts: then the
        // message went through whole, and we try again.
        for _ in 0..50 {
            let seq = (mb.done_seq.load(Acquire) & SEQ_MASK) + 1;
            // Clear to send into member 2's heap, as member 2 would post it.
            mb.cts_addr.store(dst, Relaxed);
            mb.cts_cap.store(len as u64, Relaxed);
            mb.cts_seq.store(tagged_seq(me.generation(), seq), Release);
            let at = mb as *const Mailbox as usize;
            let hostile = std::thread::spawn(move || {
                // SAFETY: the mailbox lies in the space, mapped for the
                // whole test (the thread is joined before it is unmapped).
                let mb = unsafe { &*(at as *const Mailbox) };
                let t = Instant::now();
                while mb.rts_seq.load(Acquire) & SEQ_MASK != seq
                    || mb.rts_len.load(Relaxed) & RTS_SPLIT == 0
                {
                    assert!(t.elapsed() < Duration::from_secs(10), "no split announced");
                    std::hint::spin_loop();
                }
                let block = SplitBlock::of(mb);
                if case == "cursor" {
                    block.cursor.store(u64::MAX, Relaxed);
                } else {
                    // Claim one chunk from our end (the back), as member 2
                    // may, then report more than it holds.
                    let chunk = block.chunk.load(Relaxed);
                    let n = (len as u64).div_ceil(chunk);
                    let was = block.cursor.fetch_add(1 << 32, Relaxed);
                    if (was & 0xffff_ffff) + (was >> 32) < n {
                        block.copied.store(chunk + 1, Release);
                    }
                }
            });
            let r = me.send_with(2, &data, CopyBy::Both);
            hostile.join().unwrap();
            if let Err(e) = r {
                outcome = Some(e);
                break;
            }
        }
        let e = outcome.unwrap_or_else(|| panic!("{case}: the tampering never came in time"));
        assert!(matches!(e, Error::PeerCorrupt { id: 2, .. }), "{case}: {e}");
        let says = if case == "cursor" {
            "split cursor"
        } else {
            "bytes copied of a"
        };
        assert!(e.to_string().contains(says), "{case}: {e}");
    }
}

/// A sender killed at a random point of a stream of split messages: the
/// receiver ends with PeerGone, promptly, and every message it was told
/// is complete is whole.
#[test]
fn receivers_survive_senders_killed_mid_split() {
    let size: usize = 8 << 20;
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let (mut shared, mut mid_split) = (0, 0);
    // The receiving thread inherits this thread's CPU.
    let cpu = apart();
    for i in 0..16 {
        let s = space(&format!("split-kill-{i}"), 2, 20);
        let mut sender = peer(
            &s.path,
            1,
            "send-split-stream",
            &strs(&[2, 100_000, size]),
            &peer_env(&cpu),
        );
        assert_eq!(
            sender.line(Duration::from_secs(10)).as_deref(),
            Some("ok ready")
        );
        let path = s.path.clone();
        let (streaming_tx, streaming) = mpsc::channel();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let me = Space::attach(&path, 2).unwrap();
            let mut buf = me.alloc_bytes(size).unwrap();
            let (mut k, mut shared) = (0u64, 0);
            let end = loop {
                match me.recv_with(1, &mut buf) {
                    Ok(r) => {
                        // Message k is pattern k % 2. Every 251st byte: a
                        // chunk not copied (the previous message, or zeros)
                        // differs at all of them.
                        let torn = r.len != size
                            || (0..size)
                                .step_by(251)
                                .any(|i| buf[i] != pattern::byte(k % 2, i));
                        if torn {
                            break Err(format!("message {k} reported complete but torn"));
                        }
                        if k == 0 {
                            let _ = streaming_tx.send(());
                        }
                        k += 1;
                        shared += r.copied_here;
                    }
                    Err(e) => break Ok(e),
                }
            };
            // Was the last message announced as a split and never completed?
            let mb = &testing::export(&me, 2).unwrap().mailboxes[1];
            let next = k + 1;
            let mid_split = mb.rts_seq.load(Acquire) & SEQ_MASK == next
                && mb.rts_len.load(Relaxed) & RTS_SPLIT != 0
                && mb.done_seq.load(Acquire) & SEQ_MASK < next;
            let _ = tx.send((end, k, shared, mid_split));
        });
        // Killed once the stream runs: mostly in the middle of a split.
        if streaming.recv_timeout(Duration::from_secs(10)).is_err() {
            let ended = rx.recv_timeout(Duration::from_secs(30));
            panic!("the receiver stopped before the stream ran: {ended:?}");
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_micros(rng % 10_000));
        sender.kill();
        let (end, got, share, in_split) = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the receiver hung after its sender was killed");
        match end {
            Ok(Error::PeerGone(1)) => {}
            other => panic!("receive ended with {other:?} after {got} messages"),
        }
        shared += share;
        mid_split += in_split as u32;
    }
    assert!(
        cpu.is_none() || shared > 0,
        "the receiver never took part in a split"
    );
    assert!(
        mid_split > 0,
        "no sender was killed in the middle of a split"
    );
}
