//! Liveness the kernel guarantees: a member is alive exactly while it holds
//! its slot lock — not while some /proc entry with its pid exists.

mod common;

use common::*;
use sky_pvas::{Error, Space};
use std::time::{Duration, Instant};

/// A receive from `id` that must end with PeerGone within two seconds
/// (the waits re-check liveness every 50 ms).
fn recv_fails_promptly(me: &Space, id: u32) {
    let t = Instant::now();
    let mut buf = [0u8; 8];
    let r = me.recv(id, &mut buf);
    assert!(matches!(r, Err(Error::PeerGone(i)) if i == id), "{r:?}");
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t.elapsed()
    );
}

fn proc_state(pid: u32) -> Option<char> {
    sky_proc::Stat::of_process(pid).map(|s| s.state)
}

/// Member 1 started as `scx_sky pvas run` starts it: attaching from the
/// SKY_PVAS_* environment with the slot lock descriptor `lock_fd`.
fn launched_member(path: &std::path::Path, lock_fd: &str) -> Peer {
    let path = path.to_str().unwrap();
    peer(
        std::path::Path::new("-"),
        1,
        "hold",
        &[],
        &[
            ("SKY_PVAS_PATH", path),
            ("SKY_PVAS_ID", "1"),
            ("SKY_PVAS_LOCK_FD", lock_fd),
        ],
    )
}

/// A member killed but not yet reaped still has /proc/PID/stat with its
/// start time: it is dead all the same, and a waiting peer is told so.
#[test]
fn a_zombie_member_is_dead_to_its_peers() {
    let s = space("zombie", 2, 2);
    let me = Space::attach(&s.path, 2).unwrap();
    let holder = hold(&s.path, 1);
    let pid = holder.child.id();
    // SAFETY: plain kill(2); the child is not waited for, so it stays a zombie.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    let t = Instant::now();
    while proc_state(pid) != Some('Z') {
        assert!(t.elapsed() < Duration::from_secs(5), "no zombie");
        std::thread::sleep(Duration::from_millis(5));
    }
    recv_fails_promptly(&me, 1);
    assert!(!me.alive(1));
    assert_eq!(proc_state(pid), Some('Z'), "the test reaped its zombie");
    // Its slot can be taken at once, zombie or not.
    let _again = hold(&s.path, 1);
    drop(holder);
}

/// A member's child forked without exec inherits its descriptors, the
/// slot lock among them: the member's death must still be seen.
#[test]
fn a_forked_child_does_not_keep_a_dead_member_alive() {
    let s = space("fork-child", 2, 2);
    let me = Space::attach(&s.path, 2).unwrap();
    let mut holder = peer(&s.path, 1, "hold-forked", &[], &[]);
    let line = holder.line(Duration::from_secs(10)).unwrap_or_default();
    let child: i32 = line
        .strip_prefix("ok holding child=")
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("member 1 did not start: {line:?}"));
    assert!(me.alive(1));
    holder.kill();
    recv_fails_promptly(&me, 1);
    // The child is still running: it did not keep the lock.
    assert_eq!(proc_state(child as u32).map(|c| c != 'Z'), Some(true));
    // SAFETY: plain kill(2) of the grandchild we were told about.
    unsafe { libc::kill(child, libc::SIGKILL) };
}

/// `scx_sky pvas run`'s hand-over: the slot is held from the reservation
/// on, and the exec'd program attaches with the inherited lock.
#[test]
fn a_reserved_slot_is_held_until_the_program_attaches_with_it() {
    let s = space("reserve", 2, 2);
    let admin = Space::open(&s.path).unwrap();
    let fd = admin.reserve_for_exec(1).unwrap();
    // (From another process: this one maps the space already.)
    let taken = || {
        let p = peer(&s.path, 1, "hold", &[], &[]);
        p.line(Duration::from_secs(10)).unwrap_or_default()
    };
    assert_eq!(taken(), "error: member ID 1 is held by a live process");
    // The scheduler sees the joiner from the reservation on (it gangs the
    // process with the space before the program attaches).
    let (_, members) = sky_pvas::hints::read_members(&s.path).unwrap();
    let me = std::process::id();
    assert_eq!(
        members
            .iter()
            .map(|m| (m.id, m.pid, m.alive, m.pm_writer))
            .collect::<Vec<_>>(),
        [(1, me, true, false)]
    );
    let member = launched_member(&s.path, &fd.to_string());
    // The child has its copy; ours goes (the launcher exec'd in reality).
    // SAFETY: closing the descriptor reserve_for_exec gave us.
    unsafe { libc::close(fd) };
    assert_eq!(
        member.line(Duration::from_secs(10)).as_deref(),
        Some("ok holding")
    );
    assert!(admin.alive(1));
    assert_eq!(
        admin.verified_process(1).map(|p| p.pid()),
        Some(member.child.id())
    );
    assert_eq!(taken(), "error: member ID 1 is held by a live process");
    drop(member);
    let t = Instant::now();
    while admin.alive(1) {
        assert!(t.elapsed() < Duration::from_secs(5), "slot still held");
        std::thread::sleep(Duration::from_millis(5));
    }
    let _again = hold(&s.path, 1);
}

/// A wrong or forged SKY_PVAS_LOCK_FD is refused by name.
#[test]
fn a_bad_inherited_lock_descriptor_is_refused() {
    let s = space("bad-lock-fd", 2, 2);
    for (value, says) in [
        ("12x", "not a descriptor number"),
        ("999", "no such open descriptor"),
        ("0", "different file"),
    ] {
        let member = launched_member(&s.path, value);
        let line = member.line(Duration::from_secs(10)).unwrap_or_default();
        assert!(
            line.starts_with("error:") && line.contains(says),
            "{value}: {line}"
        );
    }
}

/// The seed's pvas_fork: a member's forked child joins under its own ID
/// through the mapping it inherited (same addresses, no exec), talks, and
/// leaves; the parent stays a member throughout.
#[test]
fn a_forked_child_joins_under_its_own_id_without_exec() {
    let s = space("pvas-fork", 3, 2);
    let me = Space::attach(&s.path, 3).unwrap();
    let parent = peer(&s.path, 1, "fork-member", &strs(&[3]), &[]);
    let mut buf = [0u8; 16];
    let n = me.recv(2, &mut buf).unwrap();
    assert_eq!(&buf[..n], b"child");
    let n = me.recv(1, &mut buf).unwrap();
    assert_eq!(&buf[..n], b"parent");
    assert_eq!(parent.finish(), ["ok forked"]);
    assert!(!me.alive(2), "the child's membership outlived it");
}
