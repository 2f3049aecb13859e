//! Membership over time: destroy tells members, dead members are detected
//! and reclaimed, and the scheduler's hints list the live gang.

mod common;

use common::*;
use sky_pvas::pmq::{Mode, PmQueue, QueueSpec};
use sky_pvas::{hints, Error, Space};
use std::time::{Duration, Instant};

#[test]
fn destroy_tells_members_and_removes_the_file() {
    let s = space("destroy", 2, 2);
    let holder = hold(&s.path, 1);
    Space::open(&s.path).unwrap().destroy().unwrap();
    assert_eq!(holder.finish(), ["ok destroyed"], "the member was not told");
    assert!(!s.path.exists(), "the backing file is still there");
    assert!(matches!(Space::attach(&s.path, 1), Err(Error::Io { .. })));
}

#[test]
fn a_dead_member_is_detected_reported_and_reclaimed() {
    let s = space("dead", 2, 2);
    let me = Space::attach(&s.path, 2).unwrap();
    let mut holder = hold(&s.path, 1);
    let pid = holder.child.id();
    assert!(me
        .members()
        .iter()
        .any(|m| m.id == 1 && m.pid == pid && m.alive));
    // A receive from it is under way when it dies: it fails, promptly.
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        holder.kill();
    });
    let t = Instant::now();
    let mut buf = [0u8; 8];
    assert!(matches!(me.recv(1, &mut buf), Err(Error::PeerGone(1))));
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    killer.join().unwrap();
    assert!(
        me.members().iter().all(|m| m.id != 1 || !m.alive),
        "a dead member is listed alive"
    );
    // A new process takes the slot over.
    let _again = hold(&s.path, 1);
}

#[test]
fn hints_list_members_and_pm_writers() {
    let s = space("hints", 3, 2);
    let name = s.name.clone();
    let me = Space::attach(&s.path, 2).unwrap();
    let spec = QueueSpec {
        mode: Mode::Push,
        sender: 1,
        receiver: 2,
        slot: 0,
        entry_size: 64,
        entry_count: 4,
    };
    let q = PmQueue::create(&me, spec).unwrap();
    let sender = peer(
        &s.path,
        1,
        "queue-send",
        &strs(&["push", "2", "3", "64", "4"]),
        &[],
    );
    let bystander = hold(&s.path, 3);
    assert_eq!(
        sender.line(Duration::from_secs(10)).as_deref(),
        Some("ok ready")
    );
    assert_eq!(
        sender.line(Duration::from_secs(10)).as_deref(),
        Some("returned 0")
    );
    let ours = hints::read_all()
        .into_iter()
        .find(|h| h.name == name)
        .expect("space not registered");
    let mut pids = ours.pids.clone();
    pids.sort_unstable();
    let mut want = vec![std::process::id(), sender.child.id(), bystander.child.id()];
    want.sort_unstable();
    assert_eq!(pids, want, "the gang is every live member");
    assert_eq!(
        ours.pm_writers,
        [sender.child.id()],
        "only the queue sender writes PM"
    );
    // A member says it is memory-bound: the space is, for the scheduler.
    assert!(!ours.memory_bound);
    me.set_memory_bound(true).unwrap();
    let ours = || {
        hints::read_all()
            .into_iter()
            .find(|h| h.name == name)
            .expect("space not registered")
    };
    assert!(ours().memory_bound);
    assert!(me.members().iter().any(|m| m.id == 2 && m.memory_bound));
    me.set_memory_bound(false).unwrap();
    assert!(!ours().memory_bound);
    let mut buf = [0u8; 64];
    for _ in 0..3 {
        q.dequeue(&mut buf).unwrap();
    }
    sender.finish();
}

/// Only a member may say it is memory-bound (of itself).
#[test]
fn a_handle_that_is_not_a_member_cannot_set_the_memory_bound_hint() {
    let s = space("mbflag", 2, 2);
    let opener = Space::open(&s.path).unwrap();
    assert!(matches!(
        opener.set_memory_bound(true),
        Err(Error::Invalid(_))
    ));
    assert!(opener.members().iter().all(|m| !m.memory_bound));
}

/// A blocking call on a live peer that never acts returns TimedOut once
/// the space's time limit passes, and the space stays usable.
#[test]
fn blocking_calls_honour_the_time_limit() {
    let s = space("timeout", 2, 2);
    let me = Space::attach(&s.path, 1).unwrap();
    let _silent = hold(&s.path, 2);
    me.set_timeout(Some(Duration::from_millis(100)));
    let t = Instant::now();
    let mut buf = [0u8; 8];
    assert!(matches!(me.recv(2, &mut buf), Err(Error::TimedOut)));
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(100) && took < Duration::from_secs(2),
        "{took:?}"
    );
    // Waiting for a queue its owner never creates is bounded the same way.
    let t = Instant::now();
    me.set_timeout(Some(Duration::from_millis(50)));
    let spec = QueueSpec {
        mode: Mode::Push,
        sender: 2,
        receiver: 1,
        slot: 0,
        entry_size: 8,
        entry_count: 2,
    };
    let pull = QueueSpec {
        mode: Mode::Pull,
        ..spec
    };
    assert!(matches!(PmQueue::open(&me, pull), Err(Error::TimedOut)));
    assert!(t.elapsed() < Duration::from_secs(2));
}

/// A member, not only an administrator, may destroy the space: its peers
/// are told and the file goes.
#[test]
fn a_member_may_destroy_the_space() {
    let s = space("member-destroy", 2, 2);
    let me = Space::attach(&s.path, 1).unwrap();
    let holder = hold(&s.path, 2);
    me.destroy().unwrap();
    assert_eq!(holder.finish(), ["ok destroyed"]);
    assert!(!s.path.exists());
}

/// A handle moves to another thread and works there (Space is Send; that
/// it is not Sync is a compile-fail doc test on Space).
#[test]
fn a_handle_moves_between_threads() {
    fn movable<T: Send>(t: T) -> T {
        t
    }
    let s = space("threads", 2, 2);
    let me = movable(Space::attach(&s.path, 1).unwrap());
    let receiver = peer(&s.path, 2, "recv", &strs(&[1, 5]), &[]);
    std::thread::spawn(move || {
        let mut msg = [0u8; 5];
        sky_pvas::pattern::fill(0, &mut msg);
        me.send(2, &msg).unwrap();
        me
    })
    .join()
    .unwrap();
    assert_eq!(receiver.finish(), ["ok received=1"]);
}
