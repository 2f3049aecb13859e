//! Gang and PM-writer hints for the scheduler daemon.
//!
//! The documented place: each user has a registry directory
//! `/dev/shm/scx_sky-spaces-<uid>` (mode 0700) in which every space that
//! user creates registers itself as a symlink to its backing file (which
//! may live on any filesystem), named after the file's full path. The
//! backing file's member table lists each member's pid and whether it
//! writes to a persistent queue. [`read_all`] (run by the root scheduler
//! daemon) reads every user's registry, trusting nothing a user could not
//! have made or that could hang it.

use crate::files::{self, Trust};
use crate::layout::{
    HeaderFixed, MemberSlot, FILE_PREFIX, HEADER_BYTES, MEMBER_MEMORY_BOUND, SLOT_ACTIVE,
    SLOT_JOINING,
};
use crate::liveness;
use crate::mounts::Mount;
use crate::proc::Process;
use crate::Member;
use crate::{Error, Result};
use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString};
use std::fmt::Write as _;
use std::mem::{offset_of, size_of};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::FileExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Users' registry directories are this followed by `-<uid>`.
pub const REGISTRY_DIR: &str = "/dev/shm/scx_sky-spaces";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpaceHints {
    pub name: String,
    pub path: PathBuf,
    /// Who the space belongs to and which file it is: spaces of the same
    /// name (two users' `job`) are told apart by this.
    pub id: SpaceId,
    pub header: HeaderFixed,
    /// Every slot in use as its label says, and whether the kernel proves
    /// that label (see [`read_all`]): what `scx_sky pvas ls` shows.
    pub members: Vec<(Member, bool)>,
    /// Live members' pids, each proven: one gang.
    pub pids: Vec<u32>,
    /// Those of them writing to a persistent queue.
    pub pm_writers: Vec<u32>,
    /// A live member said it is memory-bound (`Space::set_memory_bound`).
    pub memory_bound: bool,
}

/// A registry entry as `scx_sky pvas ls` shows it: a space, or why its
/// file was not read.
#[derive(Debug)]
pub enum Listed {
    Space(Box<SpaceHints>),
    Refused { path: PathBuf, why: String },
}

/// A space's identity: the user whose registry lists it and its backing
/// file (device and inode), as the kernel reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpaceId {
    pub uid: u32,
    pub dev: u64,
    pub ino: u64,
}

/// The registry base: users' directories are `<base>-<uid>` beside it.
pub fn registry_base() -> PathBuf {
    std::env::var_os("SKY_PVAS_REGISTRY").map_or_else(|| PathBuf::from(REGISTRY_DIR), PathBuf::from)
}

pub fn user_registry(base: &Path, uid: u32) -> PathBuf {
    let mut s = base.as_os_str().to_os_string();
    s.push(format!("-{uid}"));
    PathBuf::from(s)
}

/// This user's registry directory (it may not exist yet).
pub fn my_registry_dir() -> PathBuf {
    user_registry(&registry_base(), euid())
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// The name of `path`'s registry entry: its full path with every byte but
/// ASCII letters, digits, '-', '_' and '.' written `%XX` (so two paths never
/// share a name, and the name reads back to the path). Beyond NAME_MAX, a
/// 128-bit FNV-1a hash of the path after '#' (which the first form never
/// starts with); unregister checks the link's target before removing it.
pub fn entry_name(path: &Path) -> OsString {
    let bytes = path.as_os_str().as_bytes();
    let mut name = String::with_capacity(bytes.len() * 3);
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.') {
            name.push(b as char);
        } else {
            let _ = write!(name, "%{b:02X}");
        }
    }
    if name.len() > 255 {
        let hash = bytes
            .iter()
            .fold(0x6c62_272e_07bb_0142_62b8_2175_6295_c58du128, |h, &b| {
                (h ^ b as u128).wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b)
            });
        name = format!("#{hash:032x}");
    }
    name.into()
}

/// `path` with its directory resolved (symlinks, `..`, relative): the key
/// of its registry entry. Works after the file itself is gone.
fn canonical(path: &Path) -> Option<PathBuf> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Some(std::fs::canonicalize(dir).ok()?.join(path.file_name()?))
}

/// `name` as a C string, None if it holds a NUL.
fn c(name: &OsStr) -> Option<CString> {
    files::c_name(name).ok()
}

/// This user's registry directory, created (0700) if missing; refused if
/// anyone else could have put entries in it.
fn my_registry(create: bool) -> Result<OwnedFd> {
    let base = registry_base();
    let dir = user_registry(&base, euid());
    let mut created = false;
    if create {
        if let Some(parent) = base.parent().filter(|p| !p.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(parent);
        }
        let path = c(dir.as_os_str()).ok_or_else(|| Error::Invalid("NUL in path".into()))?;
        // SAFETY: path is NUL-terminated.
        created = unsafe { libc::mkdir(path.as_ptr(), 0o700) } == 0;
    }
    let fd = files::open_registry_dir(&dir, euid())?;
    if created {
        // The umask may have taken bits we need (never added any).
        // SAFETY: fchmod on our own fd.
        unsafe { libc::fchmod(fd.as_raw_fd(), 0o700) };
    }
    Ok(fd)
}

/// The target of symlink `name` in directory `dir`.
pub fn read_link_at(dir: &OwnedFd, name: &OsStr) -> Option<PathBuf> {
    let name = c(name)?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: readlinkat writes at most buf.len() bytes into buf.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 || n as usize >= buf.len() {
        return None;
    }
    buf.truncate(n as usize);
    Some(PathBuf::from(OsString::from_vec(buf)))
}

fn unlink_at(dir: &OwnedFd, name: &CString) {
    // SAFETY: name is NUL-terminated.
    unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) };
}

/// Best effort: a space works without its registry entry; it is only
/// invisible to the scheduler and `scx_sky pvas ls`.
pub fn register(path: &Path) {
    let (Ok(dir), Some(target)) = (my_registry(true), canonical(path)) else {
        return;
    };
    let (Some(name), Some(to)) = (c(&entry_name(&target)), c(target.as_os_str())) else {
        return;
    };
    // A stale entry of a space that was never destroyed is replaced.
    unlink_at(&dir, &name);
    // SAFETY: both are NUL-terminated.
    unsafe { libc::symlinkat(to.as_ptr(), dir.as_raw_fd(), name.as_ptr()) };
}

/// Removes this space's entry, and no other space's.
pub fn unregister(path: &Path) {
    let (Ok(dir), Some(target)) = (my_registry(false), canonical(path)) else {
        return;
    };
    let key = entry_name(&target);
    if read_link_at(&dir, &key).as_deref() == Some(&target) {
        if let Some(name) = c(&key) {
            unlink_at(&dir, &name);
        }
    }
}

/// Every registered space that can still be opened, with its live members.
///
/// Reads `<base>-<uid>` for every uid, but only a directory that uid owns
/// and nobody else can write to, and in it only symlinks named for their
/// target whose target is a regular file of that uid (or root) that gives
/// other users nothing. Nothing is opened in a way that could block.
///
/// The pid in a member slot is a label its user wrote (with `dd`, if it
/// likes): a member is listed only if the kernel proves the label —
/// `/proc/PID/fdinfo` shows that process holding the slot's lock on this
/// very file — and the process is the registry's user's, the file
/// owner's or root's. Proofs are kept while the slot's label stays.
pub fn read_all() -> Vec<SpaceHints> {
    list()
        .into_iter()
        .filter_map(|l| match l {
            Listed::Space(s) => Some(*s),
            Listed::Refused { .. } => None,
        })
        .collect()
}

/// [`read_all`], with the entries whose files were refused and why.
pub fn list() -> Vec<Listed> {
    let mut registry = crate::registry::Registry::polled();
    registry.refresh();
    let mut out = registry.read();
    let key = |l: &Listed| match l {
        Listed::Space(s) => (s.name.clone(), s.path.clone()),
        Listed::Refused { path, .. } => (String::new(), path.clone()),
    };
    out.sort_by_key(key);
    out
}

/// The space at `path`, listed in `uid`'s registry: its members, each
/// label proven or not.
pub fn read_space(uid: u32, path: &Path, trust: &Trust, mounts: &[Mount]) -> Result<SpaceHints> {
    let (file, header, members) = read_members_as(path, Some((trust, mounts)))?;
    let meta = file.metadata().map_err(|e| Error::io(path.display(), e))?;
    let id = SpaceId {
        uid,
        dev: meta.dev(),
        ino: meta.ino(),
    };
    let owners = [uid, meta.uid(), 0];
    let members: Vec<(Member, bool)> = members
        .into_iter()
        .map(|m| {
            let ok = m.alive && proven(&id, &m, &owners);
            (m, ok)
        })
        .collect();
    let live = || members.iter().filter(|(_, ok)| *ok).map(|(m, _)| m);
    let file_name = path.file_name().unwrap_or_default().to_string_lossy();
    let name = file_name.strip_prefix(FILE_PREFIX).unwrap_or(&file_name);
    Ok(SpaceHints {
        name: name.to_string(),
        path: path.to_path_buf(),
        id,
        header,
        pids: live().map(|m| m.pid).collect(),
        pm_writers: live().filter(|m| m.pm_writer).map(|m| m.pid).collect(),
        memory_bound: live().any(|m| m.memory_bound),
        members,
    })
}

/// Reads a space's header and member table with plain reads, without
/// mapping it (the scheduler daemon must not map members' address ranges).
/// Only a regular file is read (not through a final symlink), opened
/// without blocking: a FIFO or device squatting a registry entry must not
/// hang the scheduler daemon. Anyone's file is read: this only shows.
pub fn read_members(path: &Path) -> Result<(HeaderFixed, Vec<Member>)> {
    read_members_as(path, None).map(|(_, header, members)| (header, members))
}

/// Proofs of member labels: (space, slot, the slot's owner word) -> the
/// proven process, held by a pidfd (None: the label was refused). Proving
/// walks /proc/PID/fd, and the listing runs every few tens of ms; the
/// pidfd says when the proven process is gone, so a pid reused by another
/// process never inherits its proof.
type Proofs = HashMap<(SpaceId, u32, u64), Option<Process>>;

static PROOFS: Mutex<Option<Proofs>> = Mutex::new(None);

/// Proofs kept before they are all dropped and made again.
const MAX_PROOFS: usize = 1 << 14;

/// Is member `m`'s label proven (see [`read_all`])? `owners`: the uids
/// whose processes may be members.
fn proven(space: &SpaceId, m: &Member, owners: &[u32]) -> bool {
    let key = (*space, m.id, m.owner_word);
    let mut proofs = PROOFS.lock().unwrap_or_else(|e| e.into_inner());
    let proofs = proofs.get_or_insert_with(HashMap::new);
    match proofs.get(&key) {
        Some(None) => return false,
        Some(Some(process)) if !process.exited() => return true,
        _ => {}
    }
    let process = liveness::slot_holder(m.pid, space.dev, space.ino, m.id)
        .filter(|_| crate::proc::real_uid(m.pid).is_some_and(|u| owners.contains(&u)));
    let ok = process.is_some();
    // A label that changes is a new key; old keys go when many pile up.
    if proofs.len() >= MAX_PROOFS {
        proofs.clear();
    }
    proofs.insert(key, process);
    ok
}

/// `read_members`, and if `trust` is given, only of a file it trusts,
/// looked up as `files::open_space_file_on_mount` does.
fn read_members_as(
    path: &Path,
    trust: Option<(&Trust, &[Mount])>,
) -> Result<(std::fs::File, HeaderFixed, Vec<Member>)> {
    let file = match trust {
        Some((t, mounts)) => files::open_space_file_on_mount(mounts, path, t)?,
        None => files::open_regular(path, false)?.0,
    };
    let header = crate::layout::read_header_of(&file, path)?;
    let slot_size = size_of::<MemberSlot>();
    let mut table = vec![0u8; (header.max_members as usize + 1) * slot_size];
    file.read_exact_at(&mut table, HEADER_BYTES as u64)
        .map_err(|e| Error::io(path.display(), e))?;
    let word = |id: usize, off: usize, n: usize| -> u64 {
        let at = id * slot_size + off;
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&table[at..at + n]);
        u64::from_ne_bytes(b)
    };
    let members = (1..=header.max_members as usize)
        .filter_map(|id| {
            let owner = word(id, offset_of!(MemberSlot, owner), 8);
            let state = word(id, offset_of!(MemberSlot, state), 4) as u32;
            // A joining member (its slot reserved by `scx_sky pvas run`
            // before exec, or mid-claim) counts: it names its process.
            (owner != 0 && (state == SLOT_ACTIVE || state == SLOT_JOINING)).then(|| Member {
                id: id as u32,
                pid: owner as u32,
                owner_word: owner,
                alive: liveness::slot_locked(std::os::fd::AsRawFd::as_raw_fd(&file), id as u32),
                // A joiner's flag is still its predecessor's.
                pm_writer: state == SLOT_ACTIVE
                    && word(id, offset_of!(MemberSlot, pm_writer), 4) != 0,
                memory_bound: state == SLOT_ACTIVE
                    && word(id, offset_of!(MemberSlot, hints), 4) as u32 & MEMBER_MEMORY_BOUND != 0,
            })
        })
        .collect();
    Ok((file, header, members))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entry names tell every two paths apart and fit in a directory entry.
    #[test]
    fn entry_names_are_distinct_and_fit() {
        let name = |p: &str| entry_name(Path::new(p)).into_string().unwrap();
        assert_eq!(
            name("/dev/shm/scx_sky-pvas-a.b"),
            "%2Fdev%2Fshm%2Fscx_sky-pvas-a.b"
        );
        // '%' is escaped too: no path's name is another's.
        assert_eq!(name("/a/b"), "%2Fa%2Fb");
        assert_eq!(name("/a%2Fb"), "%2Fa%252Fb");
        assert_eq!(name("/a b\n"), "%2Fa%20b%0A");
        let long = |c: char| format!("/{}", c.to_string().repeat(300));
        let (x, y) = (name(&long('x')), name(&long('y')));
        assert!(x.starts_with('#') && x.len() == 33, "{x}");
        assert_ne!(x, y);
        let longest_escaped = format!("/{}", "x".repeat(252));
        assert_eq!(name(&longest_escaped).len(), 255);
        assert!(name(&format!("/{}", "x".repeat(253))).starts_with('#'));
    }

    #[test]
    fn the_key_of_a_removed_file_is_still_known() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        let real = std::fs::canonicalize(dir.path()).unwrap().join("f");
        assert_eq!(canonical(&file), Some(real.clone()));
        let via = dir.path().join("sub/../f");
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert_eq!(canonical(&via), Some(real));
    }

    /// A member whose lock the kernel shows is listed only if its process
    /// belongs to one of the space's users; a proof goes with its process.
    #[test]
    fn a_proof_needs_the_slot_lock_and_an_owner_of_the_space() {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let mut space = crate::fixture::TestSpace::create(dir.path(), "proof", 2);
        space.join(1);
        let path = space.path.clone();
        let meta = std::fs::metadata(&path).unwrap();
        let id = |ino_offset: u64| SpaceId {
            uid: meta.uid(),
            dev: meta.dev(),
            ino: meta.ino() + ino_offset,
        };
        let (_, members) = read_members(&path).unwrap();
        let member = members.into_iter().find(|m| m.id == 1).unwrap();
        assert!(proven(&id(0), &member, &[meta.uid()]));
        // This process is none of the space's users (another key: a new
        // proof is made).
        let other_user = meta.uid().wrapping_add(1);
        let shifted = Member {
            owner_word: member.owner_word ^ (1 << 63),
            ..member.clone()
        };
        assert!(!proven(&id(0), &shifted, &[other_user]));
        // Another file: this process holds no lock there.
        assert!(!proven(&id(1), &member, &[meta.uid()]));
        drop(space);
    }

    #[test]
    fn a_fifo_or_directory_in_place_of_a_space_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: c is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Opening a FIFO for reading blocks without O_NONBLOCK: this
        // returns only because the open does not wait for a writer.
        let e = read_members(&fifo).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let e = read_members(dir.path()).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
    }
}
