//! kill -9 at random points: survivors never block forever, the queue's
//! invariants hold, dead members' slots are reclaimed. Over 1000 kills.

mod common;

use common::*;
use sky_pvas::pattern;
use sky_pvas::pmq::{Mode, PmQueue, QueueSpec};
use sky_pvas::{Error, Space};
use std::time::{Duration, Instant};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

const ENTRY: u32 = 64;
const ENTRIES: u32 = 8;

/// The length the peer's queue-send uses for message k.
fn len_of(k: u64) -> usize {
    1 + (k as usize * 13) % ENTRY as usize
}

fn spec(mode: Mode) -> QueueSpec {
    QueueSpec {
        mode,
        sender: 1,
        receiver: 2,
        slot: 0,
        entry_size: ENTRY,
        entry_count: ENTRIES,
    }
}

fn mode_name(mode: Mode) -> String {
    if mode == Mode::Push { "push" } else { "pull" }.to_string()
}

fn send_args(mode: Mode, messages: u64) -> Vec<String> {
    strs(&[
        mode_name(mode),
        "2".into(),
        messages.to_string(),
        ENTRY.to_string(),
        ENTRIES.to_string(),
    ])
}

/// Checks that `msg` is message number `k` of the peer's sequence.
fn assert_message(k: u64, msg: &[u8]) {
    assert_eq!(msg.len(), len_of(k), "message {k} has the wrong length");
    assert_eq!(
        pattern::first_mismatch(k, msg),
        None,
        "message {k} is damaged"
    );
}

/// Drains what a dead sender left: every message comes out in order, then
/// the dequeue fails with PeerGone (it must not block).
fn drain_after_death(q: &PmQueue, mut next: u64) -> u64 {
    let mut buf = vec![0u8; ENTRY as usize];
    let t = Instant::now();
    loop {
        match q.dequeue(&mut buf) {
            Ok(n) => {
                assert_message(next, &buf[..n]);
                next += 1;
            }
            Err(Error::PeerGone(1)) => return next,
            Err(e) => panic!("dequeue after the sender died: {e}"),
        }
        assert!(t.elapsed() < Duration::from_secs(10), "drain did not end");
    }
}

fn one_random_kill(worker: u64, iter: u64, rng: &mut Rng) {
    let mode = if rng.next().is_multiple_of(2) {
        Mode::Push
    } else {
        Mode::Pull
    };
    let s = space(&format!("kill{worker}-{iter}"), 2, 2);
    let me = Space::attach(&s.path, 2).unwrap();
    let created = (mode == Mode::Push).then(|| PmQueue::create(&me, spec(mode)).unwrap());
    let mut sender = peer(&s.path, 1, "queue-send", &send_args(mode, 1 << 40), &[]);
    assert_eq!(
        sender.line(Duration::from_secs(10)).as_deref(),
        Some("ok ready")
    );
    let q = created.unwrap_or_else(|| PmQueue::open(&me, spec(mode)).unwrap());
    // Take some messages while the sender runs, then kill it at a random
    // moment: mid-enqueue, blocked on full, or between enqueues.
    let mut buf = vec![0u8; ENTRY as usize];
    let mut next = 0;
    for _ in 0..rng.next() % 40 {
        let n = q.dequeue(&mut buf).unwrap();
        assert_message(next, &buf[..n]);
        next += 1;
    }
    std::thread::sleep(Duration::from_micros(rng.next() % 2000));
    sender.kill();
    let returned = sender
        .lines
        .try_iter()
        .filter(|l| l.starts_with("returned "))
        .count() as u64;
    // Recovery sees exactly the unconsumed tail, none torn, none twice...
    let recovered = PmQueue::recover(&me, spec(mode)).unwrap();
    for (j, msg) in recovered.iter().enumerate() {
        assert_message(next + j as u64, msg);
    }
    assert!(
        next + recovered.len() as u64 >= returned,
        "{returned} enqueues returned but only {} messages survive",
        next + recovered.len() as u64
    );
    // ...and the live queue agrees with recovery, except that recovery
    // may also hold the one message that became durable but was never
    // published (the sender died between its fence and its publish).
    let end = drain_after_death(&q, next);
    let total = next + recovered.len() as u64;
    assert!(
        end == total || end + 1 == total,
        "live queue ends at {end}, recovery at {total}"
    );
    // The dead sender's slot is free for a new process.
    if iter.is_multiple_of(10) {
        let _holder = hold(&s.path, 1);
        assert!(me.members().iter().any(|m| m.id == 1 && m.alive));
    }
}

#[test]
fn a_thousand_random_kills_keep_the_queue_whole() {
    const WORKERS: u64 = 4;
    const PER_WORKER: u64 = 250;
    let handles: Vec<_> = (0..WORKERS)
        .map(|w| {
            std::thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (w + 1));
                for i in 0..PER_WORKER {
                    one_random_kill(w, i, &mut rng);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a crash-test worker failed");
    }
}

/// Kill the sender between payload store, flush, fence and counter publish
/// of message `n`, with each persistence mode; then consume part of what
/// is left and recover the rest. The kill points exist only with the
/// `fault-injection` feature (`cargo xtask test` runs this with it).
#[cfg(feature = "fault-injection")]
#[test]
fn kills_between_persist_steps_lose_and_repeat_nothing() {
    let mut rng = Rng(42);
    for persist in ["volatile", "msync", "flush"] {
        for point in ["payload", "flush", "fence", "publish"] {
            for n in 1..=ENTRIES as u64 {
                let s = space(&format!("points-{persist}-{point}-{n}"), 2, 2);
                let me = Space::attach(&s.path, 2).unwrap();
                let crash = format!("{point}:{n}");
                let env = [
                    ("SKY_PVAS_CRASH_AT", crash.as_str()),
                    ("SKY_PVAS_PERSIST", persist),
                ];
                let mut sender = peer(&s.path, 1, "queue-send", &send_args(Mode::Pull, 100), &env);
                let status = sender.child.wait().unwrap();
                assert!(!status.success(), "the sender should have died at {crash}");
                let returned = sender
                    .lines
                    .iter()
                    .filter(|l| l.starts_with("returned "))
                    .count() as u64;
                assert_eq!(returned, n - 1, "enqueues before {crash} return");
                let q = PmQueue::open(&me, spec(Mode::Pull)).unwrap();
                // Consume some, then recover the rest.
                let mut buf = vec![0u8; ENTRY as usize];
                let taken = rng.next() % n;
                for k in 0..taken {
                    let len = q.dequeue(&mut buf).unwrap();
                    assert_message(k, &buf[..len]);
                }
                let recovered = PmQueue::recover(&me, spec(Mode::Pull)).unwrap();
                for (j, msg) in recovered.iter().enumerate() {
                    assert_message(taken + j as u64, msg);
                }
                let total = taken + recovered.len() as u64;
                // Published means enqueued: message n must then survive.
                let lo = if point == "publish" { n } else { n - 1 };
                assert!(
                    (lo..=n).contains(&total),
                    "{persist} {crash}: {total} messages survive, expected {lo}..={n}"
                );
            }
        }
    }
}

/// A sender killed mid-copy of a large one-copy message never leaves the
/// receiver blocked.
#[test]
fn receivers_survive_senders_killed_mid_transfer() {
    let mut rng = Rng(7);
    let big = (8usize << 20).to_string();
    for i in 0..30 {
        let s = space(&format!("midcopy-{i}"), 2, 12);
        let me = Space::attach(&s.path, 2).unwrap();
        let mut buf = me.alloc_bytes(8 << 20).unwrap();
        let sizes: Vec<String> = std::iter::repeat_n(big.clone(), 1000).collect();
        let mut sender = peer(&s.path, 1, "send", &[vec!["2".into()], sizes].concat(), &[]);
        let joined = Instant::now();
        while !me.members().iter().any(|m| m.id == 1) {
            assert!(
                joined.elapsed() < Duration::from_secs(10),
                "the sender never attached"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let kill_after = Duration::from_micros(rng.next() % 20_000);
        let killer = std::thread::spawn(move || {
            std::thread::sleep(kill_after);
            sender.kill();
        });
        let t = Instant::now();
        let mut got = 0;
        let end = loop {
            match me.recv(1, &mut buf) {
                Ok(n) => {
                    assert_eq!(n, 8 << 20);
                    got += 1;
                }
                Err(e) => break e,
            }
        };
        killer.join().unwrap();
        assert!(
            matches!(end, Error::PeerGone(1)),
            "recv ended with {end:?} after {got} messages"
        );
        assert!(t.elapsed() < Duration::from_secs(30));
    }
}
