//! A corrupt or hostile peer: every value read from shared memory is
//! checked. Members that write what no correct member writes — into the
//! member table, mailboxes, the queue directory and queue areas — get
//! errors, never out-of-bounds access, a panic or a wait without end; and a
//! fuzzer corrupts a live space's file and mapping at random (bounded:
//! PROPTEST_CASES, 256 by default).
//!
//! Needs the `fault-injection` feature (raw access to the layout).

mod common;

use common::*;
use proptest::prelude::*;
use sky_pvas::layout::*;
use sky_pvas::pmq::{Mode, PmQueue, QueueSpec};
use sky_pvas::{hints, testing, Error, Space};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Overwrites the pid/start-time label of member `id` in the file, as a
/// member in another pid namespace (or a buggy one) would leave it.
fn write_owner_word(path: &std::path::Path, id: u32, word: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    let at = HEADER_BYTES + id as usize * std::mem::size_of::<MemberSlot>();
    // (The file, not the mapping: this process is not a member.)
    f.write_all_at(&word.to_ne_bytes(), at as u64).unwrap();
}

/// A live member whose pid means nothing here (another pid namespace
/// writes its own pid) keeps its slot: nobody can take it over.
#[test]
fn a_member_whose_pid_is_not_visible_here_stays_a_member() {
    let s = space("pidns", 2, 2);
    let holder = hold(&s.path, 1);
    // No process has pid 0x3fff_fff0 (pid_max is at most 2^22).
    write_owner_word(&s.path, 1, (12345u64 << 32) | 0x3fff_fff0);
    let r = Space::attach(&s.path, 1);
    assert!(matches!(r, Err(Error::IdTaken(1))), "{:?}", r.err());
    let observer = Space::open(&s.path).unwrap();
    assert!(observer.alive(1));
    assert!(observer.members().iter().any(|m| m.id == 1 && m.alive));
    // The label is not proof enough to signal anyone.
    assert_eq!(observer.verified_process(1).map(|p| p.pid()), None);
    drop(holder);
}

/// The scheduler daemon reads member tables that their users can write:
/// a label naming a process that does not hold the slot (root's init, a
/// bystander, a pid nobody has) is not listed, and no space is ganged or
/// classed through it; the real holders are.
#[test]
fn the_scheduler_lists_only_members_the_kernel_proves() {
    let s = space("forged", 4, 2);
    let real = hold(&s.path, 1);
    let forged: Vec<_> = (2..=4).map(|id| hold(&s.path, id)).collect();
    let start = |pid: u32| -> u64 { sky_proc::Stat::of_process(pid).unwrap().start_time };
    let me = std::process::id();
    // Root's init, this test (alive, but holding no slot), nobody.
    write_owner_word(&s.path, 2, (start(1) << 32) | 1);
    write_owner_word(&s.path, 3, (start(me) << 32) | me as u64);
    write_owner_word(&s.path, 4, (1u64 << 32) | 0x3fff_fff0);
    let listed = hints::read_all()
        .into_iter()
        .find(|h| h.path == std::fs::canonicalize(&s.path).unwrap())
        .expect("the space is not listed");
    assert_eq!(listed.pids, vec![real.child.id()], "{listed:?}");
    // The labels stay what their members wrote: only the daemon's view
    // leaves them out.
    let (_, members) = hints::read_members(&s.path).unwrap();
    assert!(
        members.iter().any(|m| m.id == 2 && m.pid == 1),
        "{members:?}"
    );
    drop(forged);
}

/// A user's space lists only that user's processes: a label naming root's
/// process or another user's is left out even while a slot is really held
/// (by the user's own process, which then wrote someone else's pid), and
/// the user's real member is listed. Run as root (it makes processes of
/// uids 1000 and 65534); CI is.
#[test]
fn a_users_space_lists_only_that_users_proven_processes() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    // Not skipped when it cannot run: a skip would count as a pass.
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test makes processes of uids 1000 and 65534: run it as root \
         (`cargo xtask test` does)"
    );
    let (user, other) = (1000u32, 65534u32);
    let s = space("users", 3, 2);
    // The space becomes user 1000's: its file, and its entry in that
    // user's registry directory (moved from root's).
    std::fs::set_permissions(s.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(&s.path, Some(user), Some(user)).unwrap();
    let base = std::env::var_os("SKY_PVAS_REGISTRY").unwrap();
    let reg = |uid: u32| {
        let mut p = base.clone();
        p.push(format!("-{uid}"));
        std::path::PathBuf::from(p)
    };
    let users_reg = reg(user);
    let _ = std::fs::create_dir(&users_reg);
    std::fs::set_permissions(&users_reg, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&users_reg, Some(user), Some(user)).unwrap();
    let canonical = std::fs::canonicalize(&s.path).unwrap();
    let entry = std::fs::read_dir(reg(0))
        .unwrap()
        .filter_map(|e| e.ok())
        .find(|e| std::fs::read_link(e.path()).ok().as_deref() == Some(canonical.as_path()))
        .expect("the space's registry entry");
    std::fs::rename(entry.path(), users_reg.join(entry.file_name())).unwrap();
    // The peer as built can sit where the user cannot reach it (a clone
    // in root's 0700 home): a copy in a temporary directory it can.
    let reachable = tempfile::Builder::new()
        .prefix("sky-pvas-peer")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(reachable.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let peer = reachable.path().join("sky-pvas-peer");
    std::fs::copy(env!("CARGO_BIN_EXE_sky-pvas-peer"), &peer).unwrap();
    std::fs::set_permissions(&peer, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Members 1-3: the user's own processes, each holding its slot.
    let holder = |id: u32| {
        let mut cmd = std::process::Command::new(&peer);
        cmd.arg(&s.path).arg(id.to_string()).arg("hold");
        cmd.uid(user).gid(user);
        let p = member(cmd);
        assert_eq!(
            p.line(Duration::from_secs(10)).as_deref(),
            Some("ok holding")
        );
        p
    };
    let members: Vec<_> = (1..=3).map(holder).collect();
    // Bystanders: root's, and another user's.
    let mut roots = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let mut others = std::process::Command::new("sleep")
        .arg("30")
        .uid(other)
        .gid(other)
        .spawn()
        .unwrap();
    // Members 2 and 3 relabel themselves with the bystanders' pids.
    write_owner_word(&s.path, 2, roots.id() as u64);
    write_owner_word(&s.path, 3, others.id() as u64);
    let listed = hints::read_all()
        .into_iter()
        .find(|h| h.path == canonical)
        .expect("the user's space is not listed");
    assert_eq!(listed.id.uid, user);
    assert_eq!(listed.pids, vec![members[0].child.id()], "{listed:?}");
    let _ = roots.kill();
    let _ = others.kill();
    let _ = (roots.wait(), others.wait());
}

/// A sender that has not noticed this member restarted leaves a completed
/// message addressed to the previous incarnation: the new one does not
/// take it for its first message, and messaging with the real sender
/// starts from the first sequence number.
#[test]
fn a_restarted_member_never_meets_its_previous_incarnations_messages() {
    let s = space("restart-epoch", 2, 4);
    let before = Space::attach(&s.path, 1).unwrap();
    let old_epoch = before.generation();
    drop(before);
    let me = Space::attach(&s.path, 1).unwrap();
    assert_ne!(
        me.generation(),
        old_epoch,
        "a restart must start a new epoch"
    );
    // The stale sender's write, after our claim reset the mailbox.
    let mb = &testing::export(&me, 1).unwrap().mailboxes[2];
    // SAFETY: writing the eager buffer as a sender would; nobody reads it yet.
    unsafe { std::ptr::copy_nonoverlapping(b"stale".as_ptr(), mb.eager.get().cast::<u8>(), 5) };
    mb.done_len.store(5, Relaxed);
    mb.done_kind.store(KIND_EAGER, Relaxed);
    mb.done_seq.store(tagged_seq(old_epoch, 7), Release);
    let sender = peer(&s.path, 2, "send", &strs(&[1, 3, 4]), &[]);
    let mut buf = [0u8; 16];
    for (k, size) in [3usize, 4].into_iter().enumerate() {
        let n = me.recv(2, &mut buf).unwrap();
        assert_eq!(n, size, "message {k} is not the sender's");
        assert_eq!(sky_pvas::pattern::first_mismatch(k as u64, &buf[..n]), None);
    }
    assert_eq!(sender.finish(), ["ok sent=2"]);
}

/// A peer that writes what no correct member writes into this member's
/// mailbox: each receive is refused naming the peer, nothing is read out
/// of bounds, and the member goes on receiving.
#[test]
fn impossible_mailbox_values_from_a_peer_are_refused_not_trusted() {
    let s = space("hostile-mailbox", 2, 4);
    let me = Space::attach(&s.path, 1).unwrap();
    let _peer = hold(&s.path, 2);
    // Member 1's mailbox for messages from member 2, written as member 2.
    let mb = &testing::export(&me, 1).unwrap().mailboxes[2];
    let post = |seq: u64, kind: u32, len: u64| {
        mb.done_len.store(len, Relaxed);
        mb.done_kind.store(kind, Relaxed);
        mb.done_seq.store(tagged_seq(me.generation(), seq), Release);
    };
    let refused = |e: Error, part: &str| {
        assert!(matches!(e, Error::PeerCorrupt { id: 2, .. }), "{e}");
        assert!(e.to_string().contains(part), "{e}");
    };
    let mut outside = vec![0u8; 1 << 20];
    // An eager message longer than the eager buffer, into a buffer that
    // would take it: reading it would run past the mailbox.
    post(1, KIND_EAGER, EAGER_CAP as u64 + 1);
    refused(
        me.recv(2, &mut outside).unwrap_err(),
        &format!("eager message of {} bytes", EAGER_CAP + 1),
    );
    // A rendezvous "copied" past the buffer this member posted.
    let mut posted = me.alloc_bytes(64).unwrap();
    post(2, KIND_RENDEZVOUS, 1 << 30);
    refused(
        me.recv(2, &mut posted).unwrap_err(),
        "1073741824-byte message copied into a 64-byte buffer",
    );
    // A rendezvous into a buffer it never posted.
    post(3, KIND_RENDEZVOUS, 16);
    refused(me.recv(2, &mut outside).unwrap_err(), "it never posted");
    // A kind that does not exist.
    post(4, 99, 1);
    refused(me.recv(2, &mut outside).unwrap_err(), "message kind 99");
    // A sequence number at the top of the range.
    mb.consumed_seq.store(SEQ_MASK, Release);
    refused(
        me.recv(2, &mut outside).unwrap_err(),
        &format!("sequence number of {SEQ_MASK}"),
    );
    // An honest message after all that is received whole.
    mb.consumed_seq.store(4, Release);
    // SAFETY: writing the eager buffer as the sender would (nobody reads it now).
    unsafe { std::ptr::copy_nonoverlapping(b"hello".as_ptr(), mb.eager.get().cast::<u8>(), 5) };
    post(5, KIND_EAGER, 5);
    let mut small = [0u8; 16];
    assert_eq!(me.recv(2, &mut small).unwrap(), 5);
    assert_eq!(&small[..5], b"hello");
}

const SEGMENT: u64 = 2 << 20;

fn fuzz_spec(slot: u32) -> QueueSpec {
    QueueSpec {
        mode: Mode::Push,
        sender: 1,
        receiver: 2,
        slot,
        entry_size: 64,
        entry_count: 8,
    }
}

/// A space as a crash leaves it: member 1 (killed) sent three messages
/// into member 2's Push queue, member 2 took one and left. Its bytes.
fn golden() -> &'static Vec<u8> {
    static IMAGE: OnceLock<Vec<u8>> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let s = space("fuzz-golden", 2, 2);
        let me = Space::attach(&s.path, 2).unwrap();
        let q = PmQueue::create(&me, fuzz_spec(0)).unwrap();
        let mut sender = peer(
            &s.path,
            1,
            "queue-send",
            &strs(&["push", "2", "3", "64", "8"]),
            &[],
        );
        let mut buf = [0u8; 64];
        q.dequeue(&mut buf).unwrap();
        let t = Instant::now();
        while !sender.lines.try_iter().any(|l| l == "returned 2") {
            assert!(t.elapsed() < Duration::from_secs(10), "the sender stalled");
            std::thread::sleep(Duration::from_millis(1));
        }
        sender.kill();
        drop(me);
        std::fs::read(&s.path).unwrap()
    })
}

/// Byte ranges worth corrupting, small so the fuzzer hits what is read:
/// the header page and member table; each member's export-area head
/// (heap top, words, queue counters) and queue directory; the mailbox
/// headers between members 1 and 2 (eager buffers left out); the end of
/// member 2's segment, where its queue area lies.
fn regions() -> Vec<(u64, u64)> {
    let mailbox = |receiver: u64, sender: u64| {
        let at = std::mem::offset_of!(ExportArea, mailboxes)
            + sender as usize * std::mem::size_of::<Mailbox>();
        (
            receiver * SEGMENT + at as u64,
            std::mem::offset_of!(Mailbox, eager) as u64,
        )
    };
    let head = std::mem::offset_of!(ExportArea, mailboxes) as u64;
    vec![
        (0, 4096 + 3 * 64),
        (SEGMENT, head),
        (2 * SEGMENT, head),
        (SEGMENT + EXPORT_BYTES, DIR_BYTES),
        (2 * SEGMENT + EXPORT_BYTES, DIR_BYTES),
        mailbox(1, 2),
        mailbox(2, 1),
        (3 * SEGMENT - 4096, 4096),
    ]
}

fn corruption() -> impl Strategy<Value = Vec<(usize, u64, u8)>> {
    proptest::collection::vec((0usize..8, any::<u64>(), any::<u8>()), 0..24)
}

fn at(region: usize, offset: u64) -> u64 {
    let (start, len) = regions()[region];
    start + offset % len
}

/// Everything a member does with a space, none of it allowed to panic,
/// fault or wait longer than the timeout says.
fn exercise(path: &std::path::Path, post: &[(usize, u64, u8)]) {
    let _ = hints::read_members(path);
    let Ok(me) = Space::attach(path, 2) else {
        let _ = Space::open(path).map(|s| s.members());
        return;
    };
    me.set_timeout(Some(Duration::from_millis(10)));
    for &(region, offset, value) in post {
        // A peer writing into the live mapping.
        // SAFETY: inside the mapping (regions lie inside the space).
        unsafe {
            me.base()
                .add(at(region, offset) as usize)
                .write_volatile(value)
        };
    }
    let _ = me.members();
    let _ = me.alive(1);
    let _ = me.verified_process(1);
    let _ = PmQueue::recover(&me, fuzz_spec(0));
    if let Ok(q) = PmQueue::open(&me, fuzz_spec(0)) {
        let _ = q.position();
        let mut buf = [0u8; 64];
        for _ in 0..3 {
            let _ = q.dequeue(&mut buf);
        }
    }
    let _ = PmQueue::create(&me, fuzz_spec(1)).map(|q| q.position());
    let mut buf = [0u8; 128];
    let _ = me.recv(1, &mut buf);
    let _ = me.send(1, b"x");
    let _ = me.alloc(100, 64);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256),
        ..ProptestConfig::default()
    })]

    /// Random bytes in the file (before attach) and in the live mapping
    /// (after): every call returns, within its time limit.
    #[test]
    fn a_corrupted_space_yields_errors_not_faults(pre in corruption(), post in corruption()) {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let path = dir.path().join("fuzzed");
        let file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path).unwrap();
        file.write_all_at(golden(), 0).unwrap();
        for &(region, offset, value) in &pre {
            file.write_all_at(&[value], at(region, offset)).unwrap();
        }
        drop(file);
        let t = Instant::now();
        exercise(&path, &post);
        prop_assert!(t.elapsed() < Duration::from_secs(5), "took {:?}", t.elapsed());
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256),
        ..ProptestConfig::default()
    })]

    /// Plausible-looking but wrong mailbox words — addressed to this
    /// member's epoch so they are acted on — with receive buffers inside
    /// and outside the segment: every receive returns, nothing is read or
    /// written outside the buffers (a fault would kill the test).
    #[test]
    fn forged_mailbox_words_are_checked_before_use(
        seq in 0u64..4,
        len in prop_oneof![0u64..64, any::<u64>(), Just(EAGER_CAP as u64), Just(EAGER_CAP as u64 + 1)],
        kind in 0u32..5,
        in_segment in any::<bool>(),
        cap in 0usize..256,
    ) {
        let s = space("forged", 2, 4);
        let me = Space::attach(&s.path, 1).unwrap();
        me.set_timeout(Some(Duration::from_millis(10)));
        let _peer = hold(&s.path, 2);
        let mb = &testing::export(&me, 1).unwrap().mailboxes[2];
        mb.done_len.store(len, Relaxed);
        mb.done_kind.store(kind, Relaxed);
        mb.done_seq.store(tagged_seq(me.generation(), seq), Release);
        let mut outside = vec![0u8; cap];
        let t = Instant::now();
        let r = if in_segment {
            let mut buf = me.alloc_bytes(cap).unwrap();
            me.recv(2, &mut buf).map(|n| (n, cap))
        } else {
            me.recv(2, &mut outside).map(|n| (n, cap))
        };
        if let Ok((n, cap)) = r {
            // A length is only ever returned if it fits the buffer.
            prop_assert!(n <= cap, "{} bytes reported into {}", n, cap);
        }
        prop_assert!(t.elapsed() < Duration::from_secs(5));
    }
}
