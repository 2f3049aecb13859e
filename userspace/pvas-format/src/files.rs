//! Files other users may have planted.
//!
//! Spaces and the registry live in shared directories (/dev/shm is
//! writable by everyone), so whatever is at a path may be another user's:
//! a world-writable file squatting a space's name would let its owner read
//! and inject every message, a symlink could lead anywhere, and a FIFO
//! blocks whoever opens it for reading. Everything here opens without
//! following a final symlink and without blocking, then decides on what
//! `fstat` says about the file actually opened, not on the path.

use crate::{Error, Result};
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What `fstat` says about a file, as far as trusting it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// The `S_IFMT` bits of `st_mode`.
    pub kind: u32,
    pub uid: u32,
    pub gid: u32,
    /// The permission bits of `st_mode` (`0o7777`).
    pub mode: u32,
}

impl Facts {
    fn from_stat(st: &libc::stat) -> Facts {
        Facts {
            kind: st.st_mode & libc::S_IFMT,
            uid: st.st_uid,
            gid: st.st_gid,
            mode: st.st_mode & 0o7777,
        }
    }

    pub fn of(fd: RawFd) -> io::Result<Facts> {
        // SAFETY: fstat fills a struct we own.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Facts::from_stat(&st))
    }

    /// `name` in directory `dir`, a symlink itself rather than its target.
    fn of_entry(dir: RawFd, name: &CString) -> io::Result<Facts> {
        // SAFETY: fstatat fills a struct we own; name is NUL-terminated.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Facts::from_stat(&st))
    }
}

/// Whose files a reader trusts: its own (`uid`), root's, and, if `groups`
/// is not empty, files shared with one of those groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trust {
    pub uid: u32,
    pub groups: Vec<u32>,
}

impl Trust {
    /// This process: its effective uid, effective gid and supplementary
    /// groups.
    pub fn me() -> Trust {
        // SAFETY: plain getters; getgroups writes at most `n` entries.
        let uid = unsafe { libc::geteuid() };
        let mut groups = vec![unsafe { libc::getegid() }];
        let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
        if n > 0 {
            let mut more = vec![0; n as usize];
            let got = unsafe { libc::getgroups(n, more.as_mut_ptr()) };
            more.truncate(got.max(0) as usize);
            groups.extend(more);
        }
        Trust { uid, groups }
    }

    /// Files of `uid` (or root) only: what the scheduler daemon trusts in
    /// that user's registry.
    pub fn user(uid: u32) -> Trust {
        Trust {
            uid,
            groups: Vec::new(),
        }
    }
}

/// Why a file of this kind is not a space, or None for a regular file.
fn kind_refusal(kind: u32) -> Option<String> {
    match kind {
        libc::S_IFREG => None,
        libc::S_IFLNK => Some("is a symlink".into()),
        k => Some(format!("is {}, not a regular file", kind_name(k))),
    }
}

fn kind_name(kind: u32) -> &'static str {
    match kind {
        libc::S_IFREG => "a regular file",
        libc::S_IFDIR => "a directory",
        libc::S_IFLNK => "a symlink",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFSOCK => "a socket",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        _ => "not a file of a known kind",
    }
}

/// Why a space's backing file must not be used, or None if it may.
///
/// A space is a regular file that gives other users nothing (spaces are
/// created 0600 or 0660). It is owned by `trust.uid` or root, or else it
/// is shared with one of `trust.groups` from a directory (`dir`) that
/// users outside could not have written it into: what `--group` makes.
pub fn space_file_refusal(f: &Facts, trust: &Trust, dir: Option<&Facts>) -> Option<String> {
    if let Some(why) = kind_refusal(f.kind) {
        return Some(why);
    }
    if f.mode & 0o006 != 0 {
        return Some(format!(
            "mode {:04o} lets other users read or write it",
            f.mode
        ));
    }
    if f.mode & 0o007 != 0 {
        return Some(format!("mode {:04o} gives other users access", f.mode));
    }
    if f.uid == trust.uid || f.uid == 0 {
        return None;
    }
    let not_yours = format!(
        "owned by uid {}, not you (uid {}) or root",
        f.uid, trust.uid
    );
    if !trust.groups.contains(&f.gid) {
        return Some(not_yours);
    }
    match dir {
        Some(d) if d.mode & 0o002 == 0 => None,
        _ => Some(format!(
            "{not_yours}, and shared with your group {} from a directory any user can write to",
            f.gid
        )),
    }
}

/// Why a per-user registry directory must not be read or written, or None.
/// Only its user (`uid`) may have put entries there.
pub fn registry_dir_refusal(f: &Facts, uid: u32) -> Option<String> {
    if f.kind != libc::S_IFDIR {
        return Some(format!("is {}, not a directory", kind_name(f.kind)));
    }
    if f.uid != uid {
        return Some(format!("owned by uid {}, not uid {uid}", f.uid));
    }
    if f.mode & 0o022 != 0 {
        return Some(format!("mode {:04o} lets other users write to it", f.mode));
    }
    None
}

fn untrusted(path: &Path, why: String) -> Error {
    Error::Untrusted {
        path: path.display().to_string(),
        why,
    }
}

pub fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::ErrorKind::InvalidInput.into())
}

/// Opens the directory holding `path` and returns it with `path`'s last
/// component, so the file is then found relative to the directory checked.
fn split(path: &Path) -> Result<(OwnedFd, CString)> {
    let name = path
        .file_name()
        .ok_or_else(|| untrusted(path, "does not name a file".into()))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = open_at(
        libc::AT_FDCWD,
        &c_name(parent.as_os_str()).map_err(|e| Error::io(path.display(), e))?,
        libc::O_RDONLY | libc::O_DIRECTORY,
    )
    .map_err(|e| Error::io(path.display(), e))?;
    Ok((dir, c_name(name).map_err(|e| Error::io(path.display(), e))?))
}

/// `openat` that neither blocks (on a FIFO), nor makes a terminal ours,
/// nor leaks into exec'd programs. Callers add O_NOFOLLOW where a final
/// symlink must not be followed.
fn open_at(dir: RawFd, name: &CString, flags: libc::c_int) -> io::Result<OwnedFd> {
    let flags = flags | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;
    // SAFETY: name is NUL-terminated; the fd returned is ours alone.
    let fd = unsafe { libc::openat(dir, name.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens the regular file at `path` (read-only, or read-write if `write`)
/// and returns it with its own and its directory's facts. A symlink,
/// FIFO, device, socket or directory is refused before it is opened (so a
/// device is never opened at all), and again after, should it have been
/// swapped in between.
pub fn open_regular(path: &Path, write: bool) -> Result<(File, Facts, Facts)> {
    let (dir, name) = split(path)?;
    open_regular_in(dir, &name, path, write)
}

/// [`open_regular`] of `name` in directory `dir` (which holds `path`).
fn open_regular_in(
    dir: OwnedFd,
    name: &CString,
    path: &Path,
    write: bool,
) -> Result<(File, Facts, Facts)> {
    let dir_facts = Facts::of(dir.as_raw_fd()).map_err(|e| Error::io(path.display(), e))?;
    let before =
        Facts::of_entry(dir.as_raw_fd(), name).map_err(|e| Error::io(path.display(), e))?;
    let refuse_kind = |f: &Facts| match kind_refusal(f.kind) {
        None => Ok(()),
        Some(why) => Err(untrusted(path, why)),
    };
    refuse_kind(&before)?;
    let access = if write { libc::O_RDWR } else { libc::O_RDONLY };
    let fd = match open_at(dir.as_raw_fd(), name, access | libc::O_NOFOLLOW) {
        Ok(fd) => fd,
        // Swapped for a symlink since the check above.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(untrusted(path, "is a symlink".into()))
        }
        Err(e) => return Err(Error::io(path.display(), e)),
    };
    let facts = Facts::of(fd.as_raw_fd()).map_err(|e| Error::io(path.display(), e))?;
    refuse_kind(&facts)?;
    Ok((File::from(fd), facts, dir_facts))
}

/// Opens a space's backing file for `trust`, refusing (with the path and
/// the reason) any file `space_file_refusal` refuses.
pub fn open_space_file(path: &Path, write: bool, trust: &Trust) -> Result<File> {
    trusted_space_file(path, open_regular(path, write)?, trust)
}

/// The file [`open_regular`] opened, if `trust` trusts it as a space.
fn trusted_space_file(
    path: &Path,
    (file, facts, dir): (File, Facts, Facts),
    trust: &Trust,
) -> Result<File> {
    match space_file_refusal(&facts, trust, Some(&dir)) {
        None => Ok(file),
        Some(why) => Err(untrusted(path, why)),
    }
}

/// [`open_space_file`] (read-only) for the scheduler daemon: the
/// directory is looked up on a local filesystem with no symlink on the way
/// and without crossing a mount (`mounts::open_dir_on_mount`), so that no
/// user's FUSE or network mount can stall it.
pub fn open_space_file_on_mount(
    mounts: &[crate::mounts::Mount],
    path: &Path,
    trust: &Trust,
) -> Result<File> {
    let (dir, name) =
        split_on_mount(mounts, path).map_err(|e| match (e.kind(), e.raw_os_error()) {
            (io::ErrorKind::PermissionDenied, None) => untrusted(path, e.to_string()),
            (_, Some(libc::ELOOP)) => untrusted(path, "has a symlink on its path".into()),
            (_, Some(libc::EXDEV)) => untrusted(path, "has a mount on its path".into()),
            _ => Error::io(path.display(), e),
        })?;
    trusted_space_file(path, open_regular_in(dir, &name, path, false)?, trust)
}

/// [`split`] for the scheduler daemon: the directory opened by
/// `mounts::open_dir_on_mount` (a refusal is a PermissionDenied error
/// without an OS error code).
fn split_on_mount(mounts: &[crate::mounts::Mount], path: &Path) -> io::Result<(OwnedFd, CString)> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::PermissionDenied, "does not name a file"))?;
    let dir = crate::mounts::open_dir_on_mount(mounts, path.parent().unwrap_or(Path::new("/")))?;
    Ok((dir, c_name(name)?))
}

/// Is there anything at `path` (not following a final symlink), looked
/// up as [`open_space_file_on_mount`] would? A path it would refuse
/// counts as there (so that the refusal is shown, not hidden).
pub fn exists_on_mount(mounts: &[crate::mounts::Mount], path: &Path) -> bool {
    let gone = |e: io::Error| matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR));
    match split_on_mount(mounts, path) {
        Ok((dir, name)) => {
            Facts::of_entry(dir.as_raw_fd(), &name).map_or_else(|e| !gone(e), |_| true)
        }
        Err(e) => !gone(e),
    }
}

/// Opens the registry directory at `path` that only `uid` may write to,
/// refusing a symlink or a directory `registry_dir_refusal` refuses.
pub fn open_registry_dir(path: &Path, uid: u32) -> Result<OwnedFd> {
    let c = c_name(path.as_os_str()).map_err(|e| Error::io(path.display(), e))?;
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    let fd = match open_at(libc::AT_FDCWD, &c, flags) {
        Ok(fd) => fd,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
            let why = match std::fs::symlink_metadata(path) {
                Ok(m) if m.file_type().is_symlink() => "is a symlink".into(),
                _ => "is not a directory".into(),
            };
            return Err(untrusted(path, why));
        }
        Err(e) => return Err(Error::io(path.display(), e)),
    };
    let facts = Facts::of(fd.as_raw_fd()).map_err(|e| Error::io(path.display(), e))?;
    match registry_dir_refusal(&facts, uid) {
        None => Ok(fd),
        Some(why) => Err(untrusted(path, why)),
    }
}

/// `/proc/self/fd/N`: a name for the very file `fd` is open on.
pub fn fd_path(fd: RawFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{fd}"))
}

/// A new file that has no final name until `publish`, and is gone again
/// if dropped unpublished: a failed create leaves nothing behind.
pub struct TempFile {
    file: Option<File>,
    /// The random name the file was created under where the filesystem
    /// has no O_TMPFILE; None for a file that never had a name.
    name: Option<PathBuf>,
}

impl TempFile {
    /// A file with exactly `mode` (whatever the umask) in `dir`: unnamed
    /// (O_TMPFILE) where the filesystem supports it, else under a random
    /// name starting with `prefix`, created exclusively.
    pub fn create(dir: &Path, prefix: &str, mode: u32) -> io::Result<TempFile> {
        let c = c_name(dir.as_os_str())?;
        let flags = libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC;
        // SAFETY: c is NUL-terminated; the fd returned is ours alone.
        let fd = unsafe { libc::open(c.as_ptr(), flags, mode as libc::c_uint) };
        let tmp = if fd >= 0 {
            TempFile {
                file: Some(unsafe { File::from_raw_fd(fd) }),
                name: None,
            }
        } else {
            let e = io::Error::last_os_error();
            // Not supported by the filesystem (or the kernel).
            if !matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
            ) {
                return Err(e);
            }
            Self::create_named(dir, prefix, mode)?
        };
        // SAFETY: fchmod on our own fd.
        if unsafe { libc::fchmod(tmp.file().as_raw_fd(), mode) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(tmp)
    }

    /// A file under `dir/<prefix><16 random hex digits>`, created with
    /// O_EXCL | O_NOFOLLOW: nobody can have planted anything at that name.
    fn create_named(dir: &Path, prefix: &str, mode: u32) -> io::Result<TempFile> {
        let dir_fd = open_at(
            libc::AT_FDCWD,
            &c_name(dir.as_os_str())?,
            libc::O_RDONLY | libc::O_DIRECTORY,
        )?;
        for _ in 0..16 {
            let name = format!("{prefix}{:016x}", random_u64()?);
            let c = c_name(OsStr::new(&name))?;
            let flags =
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
            // SAFETY: c is NUL-terminated; the fd returned is ours alone.
            let fd = unsafe { libc::openat(dir_fd.as_raw_fd(), c.as_ptr(), flags, mode) };
            if fd >= 0 {
                return Ok(TempFile {
                    file: Some(unsafe { File::from_raw_fd(fd) }),
                    name: Some(dir.join(name)),
                });
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(e);
            }
        }
        Err(io::ErrorKind::AlreadyExists.into())
    }

    pub fn file(&self) -> &File {
        self.file.as_ref().expect("not yet published")
    }

    /// Gives the file its final name `path`, failing if the name exists.
    /// The link is made to the open file itself, not to whatever its
    /// temporary name may meanwhile point at.
    pub fn publish(mut self, path: &Path) -> io::Result<File> {
        let fd = self.file().as_raw_fd();
        let to = c_name(path.as_os_str())?;
        let from = c_name(fd_path(fd).as_os_str())?;
        let link = |from_dir: RawFd, from: &std::ffi::CStr, flags: libc::c_int| {
            // SAFETY: both names are NUL-terminated.
            let rc = unsafe {
                libc::linkat(from_dir, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), flags)
            };
            if rc == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        };
        match link(libc::AT_FDCWD, &from, libc::AT_SYMLINK_FOLLOW) {
            // No /proc: AT_EMPTY_PATH works where the caller may use it
            // (CAP_DAC_READ_SEARCH).
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) && !fd_path(fd).exists() => {
                link(fd, c"", libc::AT_EMPTY_PATH)
            }
            done => done,
        }?;
        self.remove_name();
        Ok(self.file.take().expect("not yet published"))
    }

    /// Removes the temporary name, if it still names our file.
    fn remove_name(&mut self) {
        let (Some(name), Some(file)) = (self.name.take(), self.file.as_ref()) else {
            return;
        };
        use std::os::unix::fs::MetadataExt;
        let same = match (std::fs::symlink_metadata(&name), file.metadata()) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        };
        if same {
            let _ = std::fs::remove_file(&name);
        }
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        self.remove_name();
    }
}

fn random_u64() -> io::Result<u64> {
    let mut b = [0u8; 8];
    loop {
        // SAFETY: getrandom writes at most b.len() bytes into b.
        let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
        if n == b.len() as isize {
            return Ok(u64::from_ne_bytes(b));
        }
        let e = io::Error::last_os_error();
        if n >= 0 || e.kind() != io::ErrorKind::Interrupted {
            return Err(if n >= 0 {
                io::ErrorKind::UnexpectedEof.into()
            } else {
                e
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(uid: u32, gid: u32, mode: u32) -> Facts {
        Facts {
            kind: libc::S_IFREG,
            uid,
            gid,
            mode,
        }
    }

    fn dir(mode: u32) -> Facts {
        Facts {
            kind: libc::S_IFDIR,
            uid: 0,
            gid: 0,
            mode,
        }
    }

    /// Whoever runs the tests: the owner rules for any caller.
    #[test]
    fn space_files_are_trusted_from_their_caller_root_or_a_shared_group() {
        let me = Trust {
            uid: 1000,
            groups: vec![1000, 27],
        };
        let private = dir(0o700);
        let refusal = |f: Facts, d: Facts| space_file_refusal(&f, &me, Some(&d));
        assert_eq!(refusal(file(1000, 1000, 0o600), private), None);
        assert_eq!(refusal(file(0, 0, 0o600), dir(0o1777)), None);
        assert_eq!(refusal(file(1000, 5, 0o660), dir(0o1777)), None);
        assert_eq!(
            refusal(file(1001, 1001, 0o600), private).as_deref(),
            Some("owned by uid 1001, not you (uid 1000) or root")
        );
        // Group-shared with one of our groups, from a directory only the
        // group can write to.
        assert_eq!(refusal(file(1001, 27, 0o660), dir(0o2770)), None);
        assert!(refusal(file(1001, 27, 0o660), dir(0o1777))
            .unwrap()
            .ends_with("shared with your group 27 from a directory any user can write to"));
        assert!(refusal(file(1001, 4, 0o660), dir(0o2770))
            .unwrap()
            .starts_with("owned by uid 1001"));
        // Modes and kinds come first, whoever owns the file.
        assert_eq!(
            refusal(file(1000, 1000, 0o666), private).as_deref(),
            Some("mode 0666 lets other users read or write it")
        );
        assert_eq!(
            refusal(file(0, 0, 0o601), private).as_deref(),
            Some("mode 0601 gives other users access")
        );
        let fifo = Facts {
            kind: libc::S_IFIFO,
            ..file(1000, 1000, 0o600)
        };
        assert_eq!(
            refusal(fifo, private).as_deref(),
            Some("is a FIFO, not a regular file")
        );
        // The daemon's view of a user's registry: that user or root only.
        let daemon = Trust::user(1000);
        assert_eq!(
            space_file_refusal(&file(1000, 1000, 0o660), &daemon, None),
            None
        );
        assert!(space_file_refusal(&file(1001, 1000, 0o660), &daemon, None).is_some());
    }

    #[test]
    fn registry_directories_are_their_users_alone() {
        let d = |uid, mode| Facts {
            kind: libc::S_IFDIR,
            uid,
            gid: uid,
            mode,
        };
        assert_eq!(registry_dir_refusal(&d(1000, 0o700), 1000), None);
        assert_eq!(registry_dir_refusal(&d(1000, 0o755), 1000), None);
        assert_eq!(
            registry_dir_refusal(&d(1001, 0o700), 1000).as_deref(),
            Some("owned by uid 1001, not uid 1000")
        );
        assert_eq!(
            registry_dir_refusal(&d(1000, 0o770), 1000).as_deref(),
            Some("mode 0770 lets other users write to it")
        );
        assert_eq!(
            registry_dir_refusal(&d(1000, 0o1777), 1000).as_deref(),
            Some("mode 1777 lets other users write to it")
        );
        let link = Facts {
            kind: libc::S_IFLNK,
            ..d(1000, 0o777)
        };
        assert!(registry_dir_refusal(&link, 1000).is_some());
    }

    /// Where O_TMPFILE is missing: a fresh random name each time, exactly
    /// the mode asked for, published by linking the open file, and gone
    /// with the TempFile if not published.
    #[test]
    fn named_temporary_files_are_unpredictable_and_cleaned_up() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let a = TempFile::create_named(d.path(), ".t-", 0o600).unwrap();
        let b = TempFile::create_named(d.path(), ".t-", 0o600).unwrap();
        let (an, bn) = (a.name.clone().unwrap(), b.name.clone().unwrap());
        assert_ne!(an, bn);
        let suffix = an.file_name().unwrap().to_str().unwrap()[3..].to_string();
        assert_eq!(suffix.len(), 16, "{an:?}");
        assert!(suffix.bytes().all(|c| c.is_ascii_hexdigit()), "{an:?}");
        drop(b);
        assert!(!bn.exists(), "an unpublished file was left behind");
        // Whatever now sits at the temporary name (where the directory lets
        // others rename ours away) is neither linked nor removed: the open
        // file is linked.
        std::fs::rename(&an, an.with_extension("moved")).unwrap();
        std::fs::write(&an, b"planted").unwrap();
        a.file().set_len(7).unwrap();
        let fin = d.path().join("final");
        let f = a.publish(&fin).unwrap();
        assert_eq!(std::fs::read(&an).unwrap(), b"planted");
        assert_eq!(std::fs::read(&fin).unwrap(), [0u8; 7]);
        drop(f);
        let mode = std::fs::metadata(&fin).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // An existing final name is not replaced.
        let c = TempFile::create(d.path(), ".t-", 0o600).unwrap();
        assert_eq!(
            c.publish(&fin).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
    }

    #[test]
    fn tmpfs_temporary_files_never_have_a_name() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        // 0660 is 0640 under the usual umask (022).
        let t = TempFile::create(d.path(), ".t-", 0o660).unwrap();
        assert!(t.name.is_none(), "/dev/shm has O_TMPFILE");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
        use std::os::unix::fs::PermissionsExt;
        let mode = t.file().metadata().unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o660, "the umask changed the mode");
        drop(t);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }
}
