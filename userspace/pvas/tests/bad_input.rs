//! Bad input: foreign, truncated and corrupt files, impossible sizes,
//! wrong IDs, misuse. Every case is a clear error, never a panic, and a
//! failed create leaves nothing behind.

mod common;

use common::*;
use proptest::prelude::*;
use sky_pvas::pmq::{Mode, PmQueue, QueueSpec};
use sky_pvas::{CreateOptions, Error, HeaderFixed, Space};
use std::os::unix::fs::PermissionsExt;

/// Writes a file as a space's creator would: mode 0600, whatever the
/// umask (a file others can read is refused before its contents are).
fn write_private(path: &std::path::Path, data: &[u8]) {
    std::fs::write(path, data).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn patched(path: &std::path::Path, offset: usize, bytes: &[u8]) -> std::path::PathBuf {
    let mut data = std::fs::read(path).unwrap();
    data[offset..offset + bytes.len()].copy_from_slice(bytes);
    let out = path.with_extension("patched");
    write_private(&out, &data);
    out
}

#[test]
fn foreign_truncated_and_corrupt_files_are_refused_by_name() {
    let s = space("bad-files", 2, 2);
    let dir = s.dir.path();

    let foreign = dir.join("foreign");
    write_private(&foreign, &[0x5a; 8192]);
    assert!(matches!(Space::attach(&foreign, 1), Err(Error::BadMagic)));

    let empty = dir.join("empty");
    write_private(&empty, b"");
    assert!(matches!(
        Space::attach(&empty, 1),
        Err(Error::Truncated { .. })
    ));

    let short = dir.join("short");
    let data = std::fs::read(&s.path).unwrap();
    write_private(&short, &data[..data.len() / 2]);
    let e = Space::attach(&short, 1).err().unwrap();
    assert!(matches!(e, Error::Truncated { .. }), "{e}");
    assert!(e.to_string().contains("truncated"), "{e}");

    let e = Space::attach(&patched(&s.path, 8, &9u32.to_le_bytes()), 1)
        .err()
        .unwrap();
    assert!(matches!(e, Error::BadVersion { found: 9, .. }), "{e}");

    let e = Space::attach(&patched(&s.path, 24, &0x1234u64.to_le_bytes()), 1)
        .err()
        .unwrap();
    assert!(e.to_string().contains("base"), "{e}");

    let e = Space::attach(&patched(&s.path, 16, &(3u64 << 20).to_le_bytes()), 1)
        .err()
        .unwrap();
    assert!(e.to_string().contains("segment size"), "{e}");

    let e = Space::attach(&dir.join("missing"), 1).err().unwrap();
    assert!(e.to_string().contains("missing"), "{e}");
}

#[test]
fn impossible_requests_are_refused() {
    let s = space("bad-requests", 2, 2);
    assert!(matches!(Space::attach(&s.path, 0), Err(Error::Invalid(_))));
    assert!(matches!(Space::attach(&s.path, 3), Err(Error::Invalid(_))));
    for name in ["", ".hidden", "a/b", "with space", &"x".repeat(65)] {
        assert!(
            Space::create(name, &CreateOptions::default()).is_err(),
            "{name:?} accepted"
        );
    }
    let opts = |segment_size, max_members| CreateOptions {
        dir: s.dir.path().to_path_buf(),
        segment_size,
        max_members,
        ..Default::default()
    };
    assert!(Space::create("odd-size", &opts((2 << 20) + 1, 2)).is_err());
    assert!(Space::create("too-many", &opts(2 << 20, 65)).is_err());
    // A name that exists is not overwritten.
    let name = s.name.clone();
    let e = Space::create(&name, &opts(2 << 20, 2)).err().unwrap();
    assert!(e.to_string().contains("exists"), "{e}");
}

#[test]
fn a_full_tmpfs_fails_at_create_and_leaves_nothing() {
    let s = space("full", 2, 2);
    let opts = CreateOptions {
        dir: s.dir.path().to_path_buf(),
        max_members: 64,
        // 65 segments of 16 GiB: far beyond any test machine's /dev/shm.
        segment_size: 16 << 30,
        ..Default::default()
    };
    let e = Space::create("huge", &opts).err().unwrap();
    assert!(e.to_string().contains("reserving"), "{e}");
    let left: Vec<_> = std::fs::read_dir(s.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "a failed create left files behind: {left:?}");
}

#[test]
fn files_are_private_unless_group_sharing_is_asked_for() {
    let s = space("modes", 2, 2);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&s.path), 0o600);
    let opts = CreateOptions {
        dir: s.dir.path().to_path_buf(),
        max_members: 2,
        segment_size: 2 << 20,
        group_access: true,
        ..Default::default()
    };
    let g = Space::create(&format!("group-{}", std::process::id()), &opts).unwrap();
    assert_eq!(mode(g.path()), 0o660);
    g.destroy().unwrap();
}

#[test]
fn misuse_gets_clear_errors() {
    let s = space("misuse", 2, 4);
    let me = Space::attach(&s.path, 1).unwrap();
    // Mapping the same range twice in one process is detected.
    let e = Space::attach(&s.path, 2).err().unwrap();
    assert!(matches!(e, Error::AddressInUse { .. }), "{e}");
    // The same ID cannot be held twice.
    let mut other = peer(&s.path, 1, "hold", &[], &[]);
    assert!(!other.child.wait().unwrap().success());
    let said: Vec<String> = other.lines.iter().collect();
    assert_eq!(said, ["error: member ID 1 is held by a live process"]);
    // Oversized queue messages and foreign receive buffers.
    let spec = QueueSpec {
        mode: Mode::Pull,
        sender: 1,
        receiver: 2,
        slot: 0,
        entry_size: 16,
        entry_count: 2,
    };
    let q = PmQueue::create(&me, spec).unwrap();
    let _holder = hold(&s.path, 2);
    let e = q.enqueue(&[0u8; 17]).err().unwrap();
    assert_eq!(
        e.to_string(),
        "message of 17 bytes does not fit: 16 bytes at most"
    );
    assert!(me.alloc(usize::MAX / 2, 8).is_err());
    assert!(me.set_eager_max(1 << 20).is_err());
    let wrong_owner = QueueSpec {
        slot: 1,
        mode: Mode::Push,
        ..spec
    };
    assert!(PmQueue::create(&me, wrong_owner)
        .err()
        .unwrap()
        .to_string()
        .contains("belongs to member 2"));
}

/// A forked child that drops its copy of the parent's space does not end
/// the parent's membership (only the slot's holder may).
#[test]
fn a_forked_child_dropping_its_copy_leaves_the_parent_a_member() {
    let s = space("fork-drop", 2, 4);
    let me = Space::attach(&s.path, 1).unwrap();
    let ids = |sp: &Space| sp.members().iter().map(|m| m.id).collect::<Vec<_>>();
    assert_eq!(ids(&me), [1]);
    // SAFETY: the child only drops the space and exits (no allocation
    // beyond what the drop does, no other thread's locks taken).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        drop(me);
        // SAFETY: ends the child without running the test harness's exit.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    assert_eq!(
        ids(&me),
        [1],
        "the child's drop ended the parent's membership"
    );
    // The holder's own detach still ends it.
    let path = s.path.clone();
    me.detach();
    let observer = Space::open(&path).unwrap();
    assert!(ids(&observer).is_empty());
}

/// The message an open of `path` is refused with (each call maps and
/// unmaps, so one process can open several copies of one space).
fn refusal(path: &std::path::Path) -> String {
    match Space::open(path) {
        Ok(_) => panic!("{} was opened", path.display()),
        Err(e) => e.to_string(),
    }
}

/// A copy of `s`'s file at `dir/name` with `mode`.
fn copy_with_mode(
    s: &TestSpace,
    dir: &std::path::Path,
    name: &str,
    mode: u32,
) -> std::path::PathBuf {
    let copy = dir.join(name);
    std::fs::copy(&s.path, &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(mode)).unwrap();
    copy
}

fn chown(path: &std::path::Path, uid: u32, gid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
}

fn assert_root(why: &str) {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    assert_eq!(uid, 0, "this test runs as root (to {why}); it is uid {uid}");
}

/// A space file other users can read or write (planted with mode 0666 by
/// a squatter, say) is refused: attaching would hand them every message.
#[test]
fn files_others_can_read_or_write_are_refused() {
    let s = space("open-mode", 2, 2);
    let dir = s.dir.path();
    for mode in [0o666, 0o644, 0o604, 0o602] {
        let copy = copy_with_mode(&s, dir, &format!("mode-{mode:o}"), mode);
        let e = refusal(&copy);
        assert!(e.contains(&copy.display().to_string()), "{e}");
        assert!(
            e.contains(&format!(
                "mode {mode:04o} lets other users read or write it"
            )),
            "{e}"
        );
        let e = Space::attach(&copy, 1).err().expect("attached");
        assert_eq!(e.errno(), libc::EPERM, "{e}");
    }
    let e = refusal(&copy_with_mode(&s, dir, "mode-601", 0o601));
    assert!(e.contains("mode 0601 gives other users access"), "{e}");
    // The modes create makes are accepted.
    for mode in [0o600, 0o660] {
        Space::open(&copy_with_mode(&s, dir, &format!("ok-{mode:o}"), mode)).unwrap();
    }
}

/// Only a regular file is a space, and a symlink is not followed: it could
/// lead anywhere, to a file the caller never meant to share.
#[test]
fn symlinks_fifos_directories_and_devices_are_refused_at_once() {
    let s = space("open-kind", 2, 2);
    let dir = s.dir.path();
    let link = dir.join("link");
    std::os::unix::fs::symlink(&s.path, &link).unwrap();
    let e = refusal(&link);
    assert!(
        e.ends_with(&format!("{}: is a symlink", link.display())),
        "{e}"
    );

    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: c is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let subdir = dir.join("subdir");
    std::fs::create_dir(&subdir).unwrap();
    let cases = [
        (fifo, "is a FIFO, not a regular file"),
        (subdir, "is a directory, not a regular file"),
        (
            "/dev/null".into(),
            "is a character device, not a regular file",
        ),
    ];
    for (path, why) in cases {
        // Opening a FIFO for reading blocks until a writer comes: the
        // check must not open it like that.
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        std::thread::spawn(move || tx.send(refusal(&p)));
        let e = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("opening {} hangs", path.display()));
        assert!(e.contains(&format!("{}: {why}", path.display())), "{e}");
    }
}

/// A file owned by another user is refused (it may have been planted
/// under the space's name); a group-shared one is accepted from a
/// directory only members of the group can write to.
#[test]
fn files_owned_by_other_users_are_refused_unless_shared_with_a_group() {
    assert_root("create files owned by another uid");
    let s = space("open-owner", 2, 2);
    let dir = s.dir.path();
    let theirs = copy_with_mode(&s, dir, "theirs", 0o600);
    chown(&theirs, 1234, 1234);
    let e = refusal(&theirs);
    assert!(
        e.ends_with(&format!(
            "{}: owned by uid 1234, not you (uid 0) or root",
            theirs.display()
        )),
        "{e}"
    );
    // Group-shared with a group of ours (root's group 0), in a directory
    // others cannot write to: accepted.
    let shared = copy_with_mode(&s, dir, "shared", 0o660);
    chown(&shared, 1234, 0);
    Space::open(&shared).unwrap();
    // The same in a directory anyone can write to (where anyone could have
    // planted it): refused.
    let open_dir = dir.join("open");
    std::fs::create_dir(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let planted = copy_with_mode(&s, &open_dir, "planted", 0o660);
    chown(&planted, 1234, 0);
    let e = refusal(&planted);
    assert!(e.contains("owned by uid 1234"), "{e}");
    assert!(e.contains("any user can write to"), "{e}");
}

/// The temporary file of a create has no name anyone can predict: a
/// squatter at the name a create would once have used neither stops it
/// nor has a file written through its symlink.
#[test]
fn a_squatted_temporary_name_neither_stops_nor_redirects_a_create() {
    let s = space("tmp-squat", 2, 2);
    let dir = s.dir.path();
    let name = format!("squatted-{}", std::process::id());
    let decoy = dir.join("decoy");
    let old_tmp = dir.join(format!(".scx_sky-pvas-{name}.{}", std::process::id()));
    std::os::unix::fs::symlink(&decoy, &old_tmp).unwrap();
    let opts = CreateOptions {
        dir: dir.to_path_buf(),
        max_members: 2,
        segment_size: 2 << 20,
        ..Default::default()
    };
    let created = Space::create(&name, &opts).unwrap();
    assert!(
        !decoy.exists(),
        "create wrote through the squatter's symlink"
    );
    assert_eq!(std::fs::read_link(&old_tmp).unwrap(), decoy);
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut want = vec![
        old_tmp.file_name().unwrap().to_str().unwrap().to_string(),
        s.path.file_name().unwrap().to_str().unwrap().to_string(),
        format!("scx_sky-pvas-{name}"),
    ];
    want.sort();
    assert_eq!(names, want, "create left a temporary file behind");
    created.destroy().unwrap();
}

proptest! {
    /// The header parser takes arbitrary bytes without panicking.
    #[test]
    fn header_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128), len in any::<u64>()) {
        let _ = HeaderFixed::parse(&bytes, len);
    }

    /// Every field past the magic set at random, and the file cut short at
    /// random: a header is accepted only if it is consistent and the file
    /// holds all of it; anything else is a header error.
    #[test]
    fn headers_past_the_magic_and_short_files_are_checked(
        version in prop_oneof![Just(2u32), any::<u32>()],
        members in prop_oneof![1u32..=64, any::<u32>()],
        segment_mb in prop_oneof![(1u64..64).prop_map(|m| m * 2), any::<u64>().prop_map(|v| v >> 20)],
        base in prop_oneof![(1u64..0x3fff).prop_map(|b| b << 30), any::<u64>()],
        total in prop_oneof![Just(None), any::<u64>().prop_map(Some)],
        file_len in any::<u64>(),
    ) {
        let mut h = HeaderFixed::new(members, segment_mb << 20, base, 1, 2);
        h.version = version;
        if let Some(t) = total {
            h.total_size = t;
        }
        match HeaderFixed::parse(&h.to_bytes(), file_len) {
            Ok(p) => {
                prop_assert_eq!(p.to_bytes(), h.to_bytes());
                prop_assert!((1..=64).contains(&p.max_members));
                prop_assert_eq!(p.total_size, p.segment_size * (p.max_members as u64 + 1));
                prop_assert!(file_len >= p.total_size, "a {}-byte file accepted for {}", file_len, p.total_size);
                prop_assert!(p.base % (2 << 20) == 0 && p.base + p.total_size <= 1 << 47);
            }
            Err(e) => prop_assert!(
                matches!(e, Error::BadVersion { .. } | Error::BadHeader(_) | Error::Truncated { .. }),
                "{}",
                e
            ),
        }
    }

    /// Any single-byte change to a valid header is refused, or yields a
    /// header that is valid in its own right and read back exactly.
    #[test]
    fn corrupted_headers_are_caught(offset in 0usize..HeaderFixed::BYTES, value in any::<u8>()) {
        let h = HeaderFixed::new(4, 4 << 20, 0x2000_0000_0000, 1, 2);
        let mut bytes = h.to_bytes();
        prop_assume!(bytes[offset] != value);
        bytes[offset] = value;
        match HeaderFixed::parse(&bytes, u64::MAX) {
            Ok(parsed) => {
                prop_assert_eq!(parsed.to_bytes(), bytes);
                prop_assert_eq!(parsed.total_size, parsed.segment_size * (parsed.max_members as u64 + 1));
                prop_assert_eq!(parsed.base % (2 << 20), 0);
            }
            // Refused as a header error, not some other failure.
            Err(e) => prop_assert!(
                matches!(
                    e,
                    Error::BadMagic | Error::BadVersion { .. } | Error::BadHeader(_) | Error::Truncated { .. }
                ),
                "{}",
                e
            ),
        }
    }
}

/// The C API's queue between machines refuses a bad mode, role, address
/// or missing area by name before it touches the network, and a timeout
/// meant for it on a local queue.
#[test]
fn a_bad_remote_queue_request_through_the_c_api_is_named() {
    use sky_pvas::ffi::*;
    use std::ffi::{CStr, CString};
    let last = || {
        unsafe { CStr::from_ptr(sky_pvas_last_error()) }
            .to_string_lossy()
            .into_owned()
    };
    let addr = CString::new("10.0.0.1:7000").unwrap();
    let area = CString::new("/tmp/nowhere").unwrap();
    let cases: [(i32, i32, *const i8, *const i8, &str); 5] = [
        (
            7,
            0,
            addr.as_ptr(),
            area.as_ptr(),
            "queue mode 7 is neither PUSH (0) nor PULL (1)",
        ),
        (
            0,
            5,
            addr.as_ptr(),
            area.as_ptr(),
            "queue role 5 is neither SENDER (0) nor RECEIVER (1)",
        ),
        (
            0,
            0,
            area.as_ptr(),
            area.as_ptr(),
            "peer address \"/tmp/nowhere\" is not IPv4 IP:PORT",
        ),
        (
            0,
            0,
            std::ptr::null(),
            area.as_ptr(),
            "peer address is NULL",
        ),
        (
            1,
            1,
            addr.as_ptr(),
            std::ptr::null(),
            "only a push sender keeps no queue area",
        ),
    ];
    for (mode, role, at, area, why) in cases {
        // SAFETY: the strings are NUL-terminated or NULL.
        let q = unsafe { sky_pvas_queue_connect(mode, role, 0, at, area, 0, 64, 4) };
        assert!(q.is_null(), "{why}");
        assert!(last().contains(why), "{:?} does not say {why:?}", last());
    }
    let s = space("c-timeout", 2, 2);
    let path = CString::new(s.path.to_str().unwrap()).unwrap();
    // SAFETY: a valid path; the queue is closed before the space.
    unsafe {
        let space = sky_pvas_attach(path.as_ptr(), 2);
        assert!(!space.is_null(), "{}", last());
        let q = sky_pvas_queue_open(space, 1, 0, 1, 2, 0, 64, 4);
        assert!(!q.is_null(), "{}", last());
        assert!(sky_pvas_queue_set_timeout(q, 1000) < 0);
        assert!(last().contains("follow its space's timeout"), "{}", last());
        sky_pvas_queue_close(q);
        sky_pvas_detach(space);
    }
}
