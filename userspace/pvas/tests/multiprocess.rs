//! Members in separate processes (fork/exec of sky-pvas-peer) sharing one
//! space: pointers, export areas, one-copy transfers, the queue.

mod common;

use common::*;
use std::time::Duration;

#[test]
fn pointers_are_valid_in_every_member() {
    let s = space("pointers", 3, 4);
    let owner = peer(&s.path, 1, "export-list", &strs(&[1000, 2]), &[]);
    let walker = peer(&s.path, 2, "walk-list", &strs(&[1]), &[]);
    let walked = walker.finish();
    assert_eq!(
        walked,
        ["ok len=1000 sum=500500"],
        "the walker saw another list"
    );
    let owned = owner.finish();
    assert!(owned[0].starts_with("ok head=0x"), "{owned:?}");
}

#[test]
fn one_copy_transfers_are_byte_exact_from_1_byte_to_64_mib() {
    let sizes = [
        1usize,
        7,
        64,
        4095,
        8192,
        8193,
        65536,
        1 << 20,
        16 << 20,
        64 << 20,
    ];
    let s = space("transfers", 2, 80);
    let recv = peer(
        &s.path,
        2,
        "recv",
        &[vec!["1".to_string()], strs(&sizes)].concat(),
        &[],
    );
    let send = peer(
        &s.path,
        1,
        "send",
        &[vec!["2".to_string()], strs(&sizes)].concat(),
        &[],
    );
    assert_eq!(send.finish(), [format!("ok sent={}", sizes.len())]);
    assert_eq!(recv.finish(), [format!("ok received={}", sizes.len())]);
}

fn queue_roundtrip(mode: &str, messages: u64) {
    let s = space(&format!("queue-{mode}"), 2, 4);
    // 4 entries of 256 B: the sender is blocked on "full" most of the time.
    let args = |peer: u32| {
        strs(&[
            mode.to_string(),
            peer.to_string(),
            messages.to_string(),
            "256".into(),
            "4".into(),
        ])
    };
    let recv = peer(&s.path, 2, "queue-recv", &args(1), &[]);
    let send = peer(&s.path, 1, "queue-send", &args(2), &[]);
    let sent = send.finish();
    assert_eq!(sent.last().unwrap(), "ok flushed");
    assert_eq!(
        sent.iter().filter(|l| l.starts_with("returned ")).count() as u64,
        messages
    );
    assert_eq!(
        recv.finish().last().unwrap(),
        &format!("ok dequeued={messages}")
    );
}

#[test]
fn push_queue_delivers_in_order_under_contention() {
    queue_roundtrip("push", 20_000);
}

#[test]
fn pull_queue_delivers_in_order_under_contention() {
    queue_roundtrip("pull", 20_000);
}

#[test]
fn enqueue_blocks_while_full_and_flush_waits_for_the_receiver() {
    let s = space("blocking", 2, 4);
    // Pull: the sender owns the area and can start alone.
    let args = |peer: u32| {
        strs(&[
            "pull".to_string(),
            peer.to_string(),
            "10".into(),
            "64".into(),
            "4".into(),
        ])
    };
    // A receiver that opened the queue and takes nothing.
    let send = peer(&s.path, 1, "queue-send", &args(2), &[]);
    let holder = queue_holder(&s.path, 2, "queue-hold-recv", &args(1));
    let early = send.lines_for(Duration::from_millis(1000));
    let returned: Vec<_> = early
        .iter()
        .filter(|l| l.starts_with("returned "))
        .collect();
    assert_eq!(
        returned.len(),
        4,
        "4 entries: the 5th enqueue must block: {early:?}"
    );
    let mut holder = holder;
    holder.kill();
    // The sender notices its receiver died instead of blocking forever.
    let status = {
        let mut send = send;
        send.child.wait().unwrap()
    };
    assert!(!status.success(), "enqueue to a dead receiver must fail");

    // Flush: with room in the queue, enqueues return at once, but flush
    // waits until a receiver has taken them all.
    let s = space("flush", 2, 4);
    let args = |peer: u32| {
        strs(&[
            "pull".to_string(),
            peer.to_string(),
            "5".into(),
            "64".into(),
            "8".into(),
        ])
    };
    let send = peer(&s.path, 1, "queue-send", &args(2), &[]);
    let holder = queue_holder(&s.path, 2, "queue-hold-recv", &args(1));
    let early = send.lines_for(Duration::from_millis(1000));
    assert_eq!(
        early.iter().filter(|l| l.starts_with("returned ")).count(),
        5,
        "{early:?}"
    );
    assert!(
        !early.iter().any(|l| l == "ok flushed"),
        "flush returned before anything was dequeued"
    );
    let mut holder = holder;
    holder.kill();
    let mut send = send;
    let _ = send.child.wait();
    // A real receiver lets the same flush finish.
    let s = space("flush-ok", 2, 4);
    let recv = peer(&s.path, 2, "queue-recv", &args(1), &[]);
    let send = peer(&s.path, 1, "queue-send", &args(2), &[]);
    assert_eq!(send.finish().last().unwrap(), "ok flushed");
    recv.finish();
}

#[test]
fn dequeue_blocks_while_empty() {
    let s = space("empty", 2, 4);
    let args = |peer: u32| {
        strs(&[
            "push".to_string(),
            peer.to_string(),
            "3".into(),
            "64".into(),
            "4".into(),
        ])
    };
    let recv = peer(&s.path, 2, "queue-recv", &args(1), &[]);
    // The sender opened the queue and sends nothing.
    let holder = queue_holder(&s.path, 1, "queue-hold-send", &args(2));
    let early = recv.lines_for(Duration::from_millis(1000));
    assert_eq!(early, ["ok ready"], "dequeue returned from an empty queue");
    let mut holder = holder;
    holder.kill();
    let mut recv = recv;
    assert!(
        !recv.child.wait().unwrap().success(),
        "dequeue from a dead sender must fail"
    );
}

/// A member that opened the queue as `role` says (queue-hold-send or
/// queue-hold-recv) and then holds its ID: the queue's peer, whose death
/// fails the other side's wait.
fn queue_holder(path: &std::path::Path, id: u32, role: &str, args: &[String]) -> Peer {
    let p = peer(path, id, role, args, &[]);
    assert_eq!(
        p.line(Duration::from_secs(10)).as_deref(),
        Some("ok ready"),
        "member {id} did not open the queue"
    );
    p
}
