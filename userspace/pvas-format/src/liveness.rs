//! Which members are alive, as the kernel sees it.
//!
//! A member holds an open-file-description (OFD) write lock on one byte of
//! the backing file per slot it holds. The kernel drops the lock when the
//! last descriptor of that open file goes — when the member closes it or
//! exits, before it becomes a zombie — so "the byte is locked" is exactly
//! "the member is alive", in any pid namespace, with no /proc polling and
//! no pid that could be recycled. The owner word in the member table is
//! only a label (the pid to show and signal), written by the member.
//!
//! Two ways a descriptor could outlive its member are closed here:
//! - exec: lock descriptors are close-on-exec, except the one
//!   `scx_sky pvas run` hands to the program it becomes;
//! - fork without exec: a child handler (pthread_atfork) points every lock
//!   descriptor of the child at /dev/null, so a forked child never keeps
//!   its parent's slots alive.

use crate::proc::Process;
use crate::{Error, Result};
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Once;

/// Lock bytes lie far past any space's end (spaces end below 2^42): the
/// locks never cover data, and no other tool locks there.
const LOCK_BASE: i64 = 1 << 50;

/// The lock byte of member slot `id`.
pub fn lock_offset(id: u32) -> i64 {
    LOCK_BASE + id as i64
}

fn flock(kind: libc::c_int, id: u32) -> libc::flock {
    // SAFETY: flock is plain data; zero is valid for every field.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = lock_offset(id);
    fl.l_len = 1;
    fl
}

/// Is slot `id` locked by an open file description other than the one
/// behind `probe`? Works on a read-only descriptor (F_OFD_GETLK checks no
/// access mode), so the scheduler daemon can ask without write access.
/// F_OFD_GETLK on a valid descriptor and range cannot fail; if it did,
/// the slot counts as not held.
pub fn slot_locked(probe: RawFd, id: u32) -> bool {
    let mut fl = flock(libc::F_WRLCK, id);
    // SAFETY: fcntl with a valid flock the kernel fills in.
    let asked = unsafe { libc::fcntl(probe, libc::F_OFD_GETLK, &mut fl) } == 0;
    asked && fl.l_type != libc::F_UNLCK as libc::c_short
}

/// The lock that makes this process member `id`: a private open file
/// description of the space file, write-locked on the slot's byte.
#[derive(Debug)]
pub struct SlotLock {
    file: File,
    id: u32,
    registered: usize,
}

impl SlotLock {
    /// Takes slot `id` of the space open as `space_file`, or fails with
    /// `IdTaken` if a live process holds it.
    pub fn take(space_file: &File, path: &Path, id: u32) -> Result<SlotLock> {
        // A new open file description of the same inode (reopening the
        // path could reach a different file if it was renamed meanwhile).
        let proc_path = crate::files::fd_path(space_file.as_raw_fd());
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&proc_path)
            .map_err(|e| Error::io(format!("reopening {}", path.display()), e))?;
        Self::lock(file, path, id)
    }

    /// Adopts a lock descriptor inherited across exec (`scx_sky pvas run`):
    /// it must be the same file and already hold slot `id`.
    pub fn adopt(fd: RawFd, space_file: &File, path: &Path, id: u32) -> Result<SlotLock> {
        use std::os::unix::fs::MetadataExt;
        let bad = |why: &str| {
            Error::Invalid(format!(
                "SKY_PVAS_LOCK_FD={fd} for member {id} of {}: {why}",
                path.display()
            ))
        };
        // SAFETY: fcntl(F_GETFD) only asks whether fd is open.
        if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            return Err(bad("no such open descriptor"));
        }
        // SAFETY: fd is open and from now on owned here (the launcher
        // handed it over and keeps no copy).
        let file = unsafe { File::from_raw_fd(fd) };
        let (a, b) = match (file.metadata(), space_file.metadata()) {
            (Ok(a), Ok(b)) => (a, b),
            _ => return Err(bad("cannot stat it")),
        };
        if (a.dev(), a.ino()) != (b.dev(), b.ino()) {
            // Not ours to close: leave it open, it was not a lock fd.
            std::mem::forget(file);
            return Err(bad("it is a different file"));
        }
        // Re-locking through the same open file description succeeds only
        // if the lock is this description's (or free): never steals.
        let lock = Self::lock(file, path, id)?;
        // SAFETY: F_SETFD on our own descriptor.
        unsafe { libc::fcntl(lock.file.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
        Ok(lock)
    }

    fn lock(file: File, path: &Path, id: u32) -> Result<SlotLock> {
        let fl = flock(libc::F_WRLCK, id);
        // SAFETY: fcntl on our descriptor with a valid flock.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EACCES) => Error::IdTaken(id),
                _ => Error::io(format!("locking member slot {id} of {}", path.display()), e),
            });
        }
        let registered = register_for_fork(file.as_raw_fd());
        Ok(SlotLock {
            file,
            id,
            registered,
        })
    }

    /// Hands the lock to the program this process is about to exec: the
    /// descriptor stays open across exec (and is no longer closed here).
    pub fn into_inheritable_fd(self) -> RawFd {
        let fd = self.file.as_raw_fd();
        // SAFETY: F_SETFD on our own descriptor.
        unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
        unregister_for_fork(self.registered);
        // The descriptor now belongs to the exec'd program: not closed here.
        std::mem::forget(self);
        fd
    }
}

impl Drop for SlotLock {
    fn drop(&mut self) {
        // Before the descriptor number can be reused by anyone else.
        unregister_for_fork(self.registered);
        // Unlock explicitly rather than by closing: a child being spawned
        // by another thread right now shares the open file description
        // until it execs, and would keep the slot locked that long. (In a
        // forked child this descriptor is /dev/null: nothing happens.)
        let fl = flock(libc::F_UNLCK, self.id);
        // SAFETY: fcntl on our descriptor with a valid flock.
        unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_OFD_SETLK, &fl) };
    }
}

/// Lock descriptors of this process, for the fork child handler. A fixed
/// table of atomics: the handler runs in a just-forked child, where taking
/// a lock another thread held at fork time would deadlock.
const MAX_LOCKS: usize = 256;
static LOCK_FDS: [AtomicI32; MAX_LOCKS] = [const { AtomicI32::new(-1) }; MAX_LOCKS];
const UNREGISTERED: usize = usize::MAX;

fn register_for_fork(fd: RawFd) -> usize {
    static ONCE: Once = Once::new();
    // SAFETY: registering a handler that only calls async-signal-safe
    // functions (open, dup2, close).
    ONCE.call_once(|| unsafe {
        libc::pthread_atfork(None, None, Some(forget_locks_in_child));
    });
    for (i, slot) in LOCK_FDS.iter().enumerate() {
        if slot
            .compare_exchange(-1, fd, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return i;
        }
    }
    // More than MAX_LOCKS memberships in one process: a forked child of it
    // would keep this one alive until it exits or execs.
    UNREGISTERED
}

fn unregister_for_fork(index: usize) {
    if let Some(slot) = LOCK_FDS.get(index) {
        slot.store(-1, Ordering::Release);
    }
}

/// Runs in the child after fork(): the child's copies of the lock
/// descriptors are pointed at /dev/null, so its parent's locks go when
/// the parent goes. The numbers stay valid: the child's `SlotLock`s close
/// /dev/null when they are dropped, never someone else's descriptor.
extern "C" fn forget_locks_in_child() {
    // SAFETY: open/dup2/close are async-signal-safe; the path is static.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if null < 0 {
            return;
        }
        for slot in LOCK_FDS.iter() {
            let fd = slot.load(Ordering::Acquire);
            if fd >= 0 {
                libc::dup3(null, fd, libc::O_CLOEXEC);
            }
        }
        libc::close(null);
    }
}

/// Process `pid`, held by a pidfd, if it holds the lock of slot `id` of
/// the file (dev, ino): the proof that a pid read from the member table —
/// which any member can write — really is that member, before
/// `destroy --kill` signals it or the scheduler acts on it. The pidfd is
/// taken first, so what is proven is the process it holds, and nothing
/// that reuses the pid later.
pub fn slot_holder(pid: u32, dev: u64, ino: u64, id: u32) -> Option<Process> {
    Process::open(pid).filter(|_| holds_slot(pid, dev, ino, id))
}

/// Does process `pid` hold the lock of slot `id` of the file (dev, ino)?
/// Read from /proc/PID/fdinfo (`sky_proc::fdinfo`), which needs the same
/// access as signalling the process does in practice (same user, or root).
fn holds_slot(pid: u32, dev: u64, ino: u64, id: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    let want = lock_offset(id).to_string();
    fds.filter_map(|e| e.ok()).any(|e| {
        let same_file = std::fs::metadata(e.path()).is_ok_and(|m| (m.dev(), m.ino()) == (dev, ino));
        same_file
            && std::fs::read_to_string(format!(
                "/proc/{pid}/fdinfo/{}",
                e.file_name().to_string_lossy()
            ))
            .is_ok_and(|info| sky_proc::fdinfo::holds_ofd_write_lock(&info, &want, &want))
    })
}
