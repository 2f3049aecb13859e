//! A persistent queue across the restart of one side while the other keeps
//! running: the restarted side opens the queue again and both continue
//! exactly once — no counter underflow, no wait without end, nothing lost
//! or repeated.

mod common;

use common::*;
use sky_pvas::pmq::{Mode, PmQueue, QueueSpec};
use sky_pvas::{pattern, Error, Space};
use std::time::{Duration, Instant};

const TOTAL: u64 = 40;

/// The peer's durable-send roles: sender 1, receiver 2, 4 x 256 bytes.
fn spec() -> QueueSpec {
    QueueSpec {
        mode: Mode::Push,
        sender: 1,
        receiver: 2,
        slot: 0,
        entry_size: 256,
        entry_count: 4,
    }
}

fn durable_len(seq: u64) -> usize {
    1 + (seq as usize * 37) % 255
}

/// Dequeues message `seq`, waiting across a sender's restart.
fn take(q: &PmQueue, seq: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match q.dequeue_with(|got, payload| {
            assert_eq!(got, seq, "out of order");
            assert_eq!(payload.len(), durable_len(seq), "message {seq}");
            assert_eq!(pattern::first_mismatch(seq, payload), None, "message {seq}");
            Ok(())
        }) {
            Ok(()) => return,
            Err(Error::PeerGone(1) | Error::NotAttached(1)) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(e) => panic!("message {seq}: {e}"),
        }
    }
}

#[test]
fn the_receiver_restarts_and_both_continue_exactly_once() {
    let s = space("restart-receiver", 2, 2);
    let args = strs(&["push", &TOTAL.to_string(), "first", "retry"]);
    let mut me = Space::attach(&s.path, 2).unwrap();
    let mut q = PmQueue::create(&me, spec()).unwrap();
    let sender = peer(&s.path, 1, "durable-send", &args, &[]);
    for seq in 1..=10 {
        take(&q, seq);
    }
    // The receiver goes (its sender is blocked on a full queue meanwhile)
    // and a new process — here, a new membership — takes its place.
    drop(me);
    me = Space::attach(&s.path, 2).unwrap();
    q = PmQueue::open(&me, spec()).unwrap();
    let p = q.position().unwrap();
    assert_eq!(p.consumed, 10, "the consumed count did not survive");
    for seq in 11..=TOTAL {
        take(&q, seq);
    }
    let lines = sender.finish();
    assert_eq!(
        lines.last().map(String::as_str),
        Some("ok done"),
        "{lines:?}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("sent ")).count() as u64,
        TOTAL
    );
}

#[test]
fn the_sender_restarts_and_both_continue_exactly_once() {
    let s = space("restart-sender", 2, 2);
    let me = Space::attach(&s.path, 2).unwrap();
    let q = PmQueue::create(&me, spec()).unwrap();
    let first = strs(&["push", &TOTAL.to_string(), "first"]);
    let mut sender = peer(&s.path, 1, "durable-send", &first, &[]);
    for seq in 1..=6 {
        take(&q, seq);
    }
    // Killed at whatever point of an enqueue it is in.
    sender.kill();
    let sent: Vec<String> = sender.lines.try_iter().collect();
    let resume = strs(&["push", &TOTAL.to_string(), "resume"]);
    let again = peer(&s.path, 1, "durable-send", &resume, &[]);
    for seq in 7..=TOTAL {
        take(&q, seq);
    }
    let lines = again.finish();
    let (enqueued, _) = lines
        .iter()
        .find_map(|l| l.strip_prefix("position enqueued="))
        .and_then(|r| r.split_once(" consumed="))
        .expect("the new sender reported no position");
    let enqueued: u64 = enqueued.parse().unwrap();
    let acknowledged = sent.iter().filter(|l| l.starts_with("sent ")).count() as u64;
    assert!(
        enqueued >= acknowledged,
        "{acknowledged} enqueues returned before the kill, the queue held {enqueued}"
    );
    assert_eq!(
        lines.last().map(String::as_str),
        Some("ok done"),
        "{lines:?}"
    );
    assert_eq!(q.position().unwrap().consumed, TOTAL);
}

/// A member ID changes hands while the queue's receiver waits: the holder
/// that never opened the queue leaves (as a finished process does), and a
/// new process takes the ID and opens the queue as its sender. The
/// receiver's dequeue, begun while the old holder was still there, must
/// get the new sender's messages: the old holder was never the queue's
/// peer. (Under load this was `sky-pvas --test c_abi` failing: the C
/// member's dequeue ended with "member 1 died or left".)
#[test]
fn a_dequeue_outlives_a_holder_of_the_sender_id_that_never_opened_the_queue() {
    let s = space("id-changes-hands", 2, 2);
    let old_holder = Space::attach(&s.path, 1).unwrap();
    let receiver = peer(
        &s.path,
        2,
        "queue-recv",
        &strs(&["push", "1", "3", "64", "4"]),
        &[],
    );
    assert_eq!(
        receiver.line(Duration::from_secs(10)).as_deref(),
        Some("ok ready")
    );
    // Long enough for the dequeue to be asleep, bound to whoever it binds.
    std::thread::sleep(Duration::from_millis(300));
    drop(old_holder);
    let early = receiver.lines_for(Duration::from_millis(200));
    assert!(
        early.is_empty(),
        "the receiver gave up when a holder that never opened the queue left: {early:?}"
    );
    let new_holder = Space::attach(&s.path, 1).unwrap();
    let spec = QueueSpec {
        entry_size: 64,
        ..spec()
    };
    let q = PmQueue::open(&new_holder, spec).unwrap();
    let mut buf = [0u8; 64];
    for k in 0..3u64 {
        let len = 1 + (k as usize * 13) % 64;
        pattern::fill(k, &mut buf[..len]);
        q.enqueue(&buf[..len]).unwrap();
    }
    q.flush().unwrap();
    let lines = receiver.finish();
    assert_eq!(lines.last().map(String::as_str), Some("ok dequeued=3"));
}
