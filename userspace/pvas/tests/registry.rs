//! The registry the scheduler daemon (root) reads: one private directory
//! per user, entries keyed by the space's full path, and nothing in it
//! trusted that its user could not have made or that could hang a reader.

mod common;

use common::*;
use sky_pvas::hints::{self, SpaceHints};
use sky_pvas::{CreateOptions, Space};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The tests here change the one registry every test of this process
/// shares (its modes, its owner): one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

fn assert_root(why: &str) {
    assert_eq!(euid(), 0, "this test runs as root (to {why})");
}

/// This user's registry directory (common::space set the base).
fn my_registry() -> PathBuf {
    let base = std::env::var("SKY_PVAS_REGISTRY").unwrap();
    PathBuf::from(format!("{base}-{}", euid()))
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), None).unwrap();
}

/// read_all, failing the test instead of hanging it.
fn read_all() -> Vec<SpaceHints> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(hints::read_all()));
    rx.recv_timeout(Duration::from_secs(10))
        .expect("read_all hangs")
}

/// How many times the space at `path` is listed.
fn listed(path: &Path) -> usize {
    let want = std::fs::canonicalize(path.parent().unwrap())
        .unwrap()
        .join(path.file_name().unwrap());
    read_all().iter().filter(|h| h.path == want).count()
}

#[test]
fn each_user_has_a_private_registry_directory() {
    let _one = serial();
    let s = space("reg-private", 2, 2);
    assert_eq!(listed(&s.path), 1);
    let dir = my_registry();
    let meta = std::fs::symlink_metadata(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    assert!(meta.is_dir(), "{} is not a directory", dir.display());
    assert_eq!(meta.uid(), euid());
    assert_eq!(meta.mode() & 0o7777, 0o700, "{}", dir.display());
}

/// Two spaces of one name in two directories are two entries; destroying
/// one removes its entry only.
#[test]
fn same_named_spaces_in_two_directories_are_listed_and_removed_apart() {
    let _one = serial();
    let a = space("twin", 2, 2);
    let other_dir = tempfile::Builder::new()
        .prefix("sky-pvas-test")
        .tempdir_in("/dev/shm")
        .unwrap();
    let opts = CreateOptions {
        dir: other_dir.path().to_path_buf(),
        max_members: 2,
        segment_size: 2 << 20,
        ..Default::default()
    };
    let b = Space::create(&a.name, &opts).unwrap();
    let b_path = b.path().to_path_buf();
    let named: Vec<_> = read_all()
        .into_iter()
        .filter(|h| h.name == a.name)
        .collect();
    assert_eq!(named.len(), 2, "{named:?}");
    assert_eq!((listed(&a.path), listed(&b_path)), (1, 1));
    b.destroy().unwrap();
    assert_eq!(
        (listed(&a.path), listed(&b_path)),
        (1, 0),
        "destroying one space of the name unlisted the other"
    );
    Space::open(&a.path).unwrap().destroy().unwrap();
    assert_eq!(listed(&a.path), 0);
}

/// A registry directory its user could not vouch for is not read, and a
/// space is not registered into it.
#[test]
fn registry_directories_that_are_not_safe_are_ignored() {
    let _one = serial();
    assert_root("give a directory to another uid");
    let s = space("reg-unsafe", 2, 2);
    let dir = my_registry();
    assert_eq!(listed(&s.path), 1);

    // Others may write to it: not read, and nothing registered into it.
    set_mode(&dir, 0o777);
    assert_eq!(listed(&s.path), 0, "read a world-writable registry");
    let late = space("reg-late", 2, 2);
    set_mode(&dir, 0o700);
    assert_eq!(listed(&s.path), 1);
    assert_eq!(listed(&late.path), 0, "registered into an unsafe directory");

    set_mode(&dir, 0o720);
    assert_eq!(listed(&s.path), 0, "read a group-writable registry");
    set_mode(&dir, 0o700);

    // Owned by another user than its name says.
    chown(&dir, 1234);
    assert_eq!(listed(&s.path), 0, "read a registry owned by someone else");
    chown(&dir, euid());
    assert_eq!(listed(&s.path), 1);

    // A symlink to a directory that would otherwise pass.
    let real = dir.with_extension("real");
    std::fs::rename(&dir, &real).unwrap();
    std::os::unix::fs::symlink(&real, &dir).unwrap();
    let listed_through_symlink = listed(&s.path);
    std::fs::remove_file(&dir).unwrap();
    std::fs::rename(&real, &dir).unwrap();
    assert_eq!(listed_through_symlink, 0, "followed a registry symlink");
    assert_eq!(listed(&s.path), 1);

    // Another uid's registry directory is read only if that uid owns it:
    // a copy of ours named for uid 1234 but owned by us lists nothing.
    let base = std::env::var("SKY_PVAS_REGISTRY").unwrap();
    let foreign = PathBuf::from(format!("{base}-1234"));
    std::fs::create_dir(&foreign).unwrap();
    set_mode(&foreign, 0o700);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        let target = std::fs::read_link(entry.path()).unwrap();
        std::os::unix::fs::symlink(target, foreign.join(entry.file_name())).unwrap();
    }
    let twice = listed(&s.path);
    std::fs::remove_dir_all(&foreign).unwrap();
    assert_eq!(twice, 1, "read uid 1234's registry owned by uid {}", euid());
}

/// Entries whose targets are not private regular files of the registry's
/// user (or root) are not listed, and none of them hangs the reader.
#[test]
fn unsafe_targets_and_fifos_in_the_registry_are_skipped_without_hanging() {
    let _one = serial();
    assert_root("give a file to another uid");
    let s = space("reg-targets", 2, 2);
    assert_eq!(listed(&s.path), 1);

    set_mode(&s.path, 0o666);
    assert_eq!(listed(&s.path), 0, "listed a world-writable space");
    set_mode(&s.path, 0o600);
    chown(&s.path, 1234);
    assert_eq!(listed(&s.path), 0, "listed another user's space");
    chown(&s.path, euid());
    assert_eq!(listed(&s.path), 1);

    // A FIFO as an entry, and a FIFO where a registered space was: opening
    // either for reading the ordinary way blocks until a writer comes.
    let entry = my_registry().join("fifo");
    mkfifo(&entry);
    let held = s.path.with_extension("held");
    std::fs::rename(&s.path, &held).unwrap();
    mkfifo(&s.path);
    let listed_fifo = listed(&s.path);
    std::fs::remove_file(&entry).unwrap();
    std::fs::remove_file(&s.path).unwrap();
    std::fs::rename(&held, &s.path).unwrap();
    assert_eq!(listed_fifo, 0);
    assert_eq!(listed(&s.path), 1);
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: c is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "{path:?}");
}
