//! Where a registered space's file may be opened from by the scheduler
//! daemon (root) without being steered or stalled by its user: the path
//! holds no symlink anywhere (`RESOLVE_NO_SYMLINKS`), it lies on a local
//! filesystem, and resolution never leaves the mount it was checked on
//! (`RESOLVE_NO_XDEV` below that mount's root). A user can mount FUSE at a
//! path of theirs, and a FUSE or network filesystem can make any lookup
//! in it wait forever: such paths are refused before anything in them is
//! looked up.

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Filesystems whose lookups never wait on a user's process or the
/// network. Anything else (fuse, nfs, cifs, 9p, ceph, ...) is refused.
const LOCAL_FILESYSTEMS: &[&str] = &[
    "tmpfs",
    "ramfs",
    "hugetlbfs",
    "ext2",
    "ext3",
    "ext4",
    "xfs",
    "btrfs",
    "f2fs",
    "overlay",
    "zfs",
    "bcachefs",
];

pub use sky_proc::mountinfo::{parse as parse_mountinfo, Mount};

/// The mounts of this process's mount namespace, read now.
pub fn mounts() -> io::Result<Vec<Mount>> {
    Ok(parse_mountinfo(&std::fs::read_to_string(
        "/proc/self/mountinfo",
    )?))
}

/// The mount table for a caller that looks often (the daemon, at every
/// look at the spaces): read again only when it changed. The kernel
/// reports a change of the namespace's mounts to poll() on an open
/// mountinfo as POLLPRI (proc(5)), and that poll consumes the report, so
/// a look costs one poll, not a read and a parse (under TCG that read,
/// every 20 ms, was a tenth of the feeds worker's time while a space was
/// watched). A change between the poll and the read is reported again at
/// the next poll.
pub struct MountTable {
    /// None: mountinfo could not be opened; every look reads it.
    file: Option<std::fs::File>,
    cached: std::sync::Mutex<Option<std::sync::Arc<Vec<Mount>>>>,
}

impl MountTable {
    pub fn new() -> MountTable {
        MountTable {
            file: std::fs::File::open("/proc/self/mountinfo").ok(),
            cached: std::sync::Mutex::new(None),
        }
    }

    /// The mounts now (empty if they cannot be read: every path is then
    /// refused).
    pub fn current(&self) -> std::sync::Arc<Vec<Mount>> {
        use std::io::{Read, Seek};
        let Some(file) = &self.file else {
            return std::sync::Arc::new(mounts().unwrap_or_default());
        };
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        let mut poll = libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(file),
            events: libc::POLLPRI,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no waiting.
        let failed = unsafe { libc::poll(&mut poll, 1, 0) } < 0;
        let changed = failed || poll.revents & (libc::POLLPRI | libc::POLLERR) != 0;
        if let (Some(table), false) = (cached.as_ref(), changed) {
            return table.clone();
        }
        let mut text = String::new();
        let mut reader = file;
        let table = match reader
            .seek(io::SeekFrom::Start(0))
            .and_then(|_| reader.read_to_string(&mut text))
        {
            Ok(_) => std::sync::Arc::new(parse_mountinfo(&text)),
            Err(_) => return std::sync::Arc::new(mounts().unwrap_or_default()),
        };
        *cached = Some(table.clone());
        table
    }
}

impl Default for MountTable {
    fn default() -> Self {
        Self::new()
    }
}

/// The mount `path` (absolute, without `.` or `..`) lies on: the last
/// listed whose mount point is the longest prefix of it, by components
/// (the last, since a later mount over the same point hides the earlier).
pub fn mount_of<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    mounts
        .iter()
        .enumerate()
        .filter(|(_, m)| path.starts_with(&m.point))
        .max_by_key(|(i, m)| (m.point.components().count(), *i))
        .map(|(_, m)| m)
}

/// Why the daemon will not look up `path` (absolute), if it will not.
pub fn refusal(mounts: &[Mount], path: &Path) -> Option<String> {
    local_mount(mounts, path).err()
}

/// The local mount `path` lies on, or why the daemon will not look it up.
fn local_mount<'a>(mounts: &'a [Mount], path: &Path) -> Result<&'a Mount, String> {
    if !path.is_absolute()
        || path.components().any(|c| {
            !matches!(
                c,
                std::path::Component::RootDir | std::path::Component::Normal(_)
            )
        })
    {
        return Err("is not an absolute path without . or ..".into());
    }
    let Some(mount) = mount_of(mounts, path) else {
        return Err("is on no mount listed in /proc/self/mountinfo".into());
    };
    if !LOCAL_FILESYSTEMS.contains(&mount.fstype.as_str()) {
        return Err(format!(
            "is on a {} filesystem (mounted at {}), whose lookups can wait on a user's \
             process or the network: the scheduler reads spaces on local filesystems only",
            mount.fstype,
            mount.point.display()
        ));
    }
    Ok(mount)
}

/// Opens directory `dir` (absolute, checked by [`refusal`]): its mount's
/// root with no symlink on the way, then the rest beneath it, neither
/// following a symlink nor crossing into another mount (one mounted since
/// the mount table was read fails with EXDEV).
pub fn open_dir_on_mount(mounts: &[Mount], dir: &Path) -> io::Result<OwnedFd> {
    let mount = local_mount(mounts, dir).map_err(|why| {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{}: {why}", dir.display()),
        )
    })?;
    let flags = (libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NONBLOCK) as u64;
    let root = openat2(
        libc::AT_FDCWD,
        mount.point.as_os_str().as_bytes(),
        flags,
        libc::RESOLVE_NO_SYMLINKS,
    )?;
    let rest = dir.strip_prefix(&mount.point).unwrap_or(Path::new(""));
    let rest = if rest.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rest
    };
    openat2(
        std::os::fd::AsRawFd::as_raw_fd(&root),
        rest.as_os_str().as_bytes(),
        flags,
        libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_XDEV | libc::RESOLVE_BENEATH,
    )
}

/// Why spaces cannot be opened here, if openat2 is refused outright: a
/// seccomp filter answers ENOSYS for it (systemd's `RestrictSUIDSGID=yes`
/// does, since it cannot inspect openat2's flags); every kernel scx_sky
/// runs on has it. Without it no space is opened, so the daemon says so
/// once instead of ignoring every space in silence.
pub fn openat2_refused() -> Option<String> {
    let flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    match openat2(libc::AT_FDCWD, b"/", flags, libc::RESOLVE_NO_SYMLINKS) {
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => Some(format!(
            "openat2 is refused ({e}; a seccomp filter such as systemd's RestrictSUIDSGID=yes \
             does this): shared spaces cannot be opened without following a user's symlinks, \
             so their members are not treated as gangs"
        )),
        _ => None,
    }
}

fn openat2(dir: RawFd, path: &[u8], flags: u64, resolve: u64) -> io::Result<OwnedFd> {
    let path = CString::new(path).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: open_how is plain data; zeroed is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags;
    how.resolve = resolve;
    // SAFETY: path is NUL-terminated and how lives across the call; the
    // fd returned is ours alone.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor from the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openat2_is_usable_where_the_tests_run() {
        assert_eq!(openat2_refused(), None);
    }

    const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:21 / /dev/shm rw,nosuid shared:2 - tmpfs shm rw
24 22 0:22 / /home/alice/my\\040fuse rw,nosuid - fuse.sshfs alice@h: rw
25 22 0:23 / /mnt/nfs rw master:3 - nfs4 srv:/x rw
26 22 0:24 / /mnt/pmem rw - ext4 /dev/pmem0 rw,dax=always
bad line
";

    #[test]
    fn a_path_lies_on_its_longest_mount_point_by_components() {
        let m = parse_mountinfo(MOUNTINFO);
        assert_eq!(m.len(), 5);
        assert_eq!(
            mount_of(&m, Path::new("/dev/shm/x")).unwrap().fstype,
            "tmpfs"
        );
        assert_eq!(mount_of(&m, Path::new("/dev/shmx")).unwrap().fstype, "ext4");
    }

    #[test]
    fn fuse_and_network_paths_are_refused_local_ones_kept() {
        let m = parse_mountinfo(MOUNTINFO);
        assert_eq!(refusal(&m, Path::new("/dev/shm/scx_sky-pvas-a")), None);
        assert_eq!(refusal(&m, Path::new("/mnt/pmem/scx_sky-pvas-q")), None);
        let why = refusal(&m, Path::new("/home/alice/my fuse/s")).unwrap();
        assert!(why.contains("fuse.sshfs") && why.contains("local"), "{why}");
        assert!(refusal(&m, Path::new("/mnt/nfs/deep/s"))
            .unwrap()
            .contains("nfs4"));
        assert!(refusal(&m, Path::new("/dev/shm/../etc/x")).is_some());
        assert!(refusal(&m, Path::new("relative")).is_some());
    }

    /// The cached table follows a mount coming and going (needs root to
    /// mount, as the daemon that uses it runs).
    #[test]
    fn the_mount_table_is_read_again_when_a_mount_comes_or_goes() {
        let dir = tempfile::tempdir().unwrap();
        let point = std::fs::canonicalize(dir.path()).unwrap();
        let table = MountTable::new();
        let has = |t: &MountTable| t.current().iter().any(|m| m.point == point);
        assert!(!has(&table));
        let c = |s: &str| CString::new(s).unwrap();
        let target = CString::new(point.as_os_str().as_bytes()).unwrap();
        // SAFETY: valid C strings; no data argument.
        let rc = unsafe {
            libc::mount(
                c("sky-test").as_ptr(),
                target.as_ptr(),
                c("tmpfs").as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        assert_eq!(
            rc,
            0,
            "mounting a tmpfs at {point:?} failed ({}): this test needs root",
            io::Error::last_os_error()
        );
        let seen = has(&table);
        // SAFETY: as above.
        let rc = unsafe { libc::umount(target.as_ptr()) };
        assert!(seen, "a new mount was not seen");
        assert_eq!(rc, 0, "umount: {}", io::Error::last_os_error());
        assert!(!has(&table), "a mount gone was still seen");
        assert!(!has(&table), "and not on a look with no change either");
    }

    /// Resolution refuses a symlink in any component, which a plain open
    /// of the directory would have followed.
    #[test]
    fn a_symlink_anywhere_in_the_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let m = mounts().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        if refusal(&m, &base).is_some() {
            // A scratch directory on a filesystem the daemon refuses (a
            // build inside FUSE): the refusal itself is tested above.
            eprintln!("scratch dir not on a local filesystem: {base:?}");
            assert!(open_dir_on_mount(&m, &base.join("real")).is_err());
            return;
        }
        assert!(open_dir_on_mount(&m, &base.join("real")).is_ok());
        let e = open_dir_on_mount(&m, &base.join("link")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
    }
}
