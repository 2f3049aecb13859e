//! The registry of spaces as the scheduler daemon follows it: users'
//! directories `<base>-<uid>` of symlinks to their spaces' files
//! (`hints::register`). Any user may fill theirs, so what the daemon does
//! with it is bounded: it lists a directory again only when inotify says
//! it changed (not on every loop), reads at most [`MAX_PER_USER`] spaces of
//! a user and [`MAX_SPACES`] in all, and opens a space's file only on a
//! local filesystem, with no symlink on its path and without crossing a
//! mount (`mounts`).

use crate::files::{self, Trust};
use crate::hints::{self, Listed, SpaceHints};
use crate::mounts;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{CString, OsStr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Most spaces of one user the daemon reads: beyond, they are listed as
/// refused, the first by name kept.
pub const MAX_PER_USER: usize = 64;
/// Most spaces the daemon reads in all, users in uid order.
pub const MAX_SPACES: usize = 1024;
/// Most entries of a user looked at when the directory is listed: those
/// whose file is gone (spaces never destroyed) are passed over there, so
/// they do not crowd live spaces out of the cap.
pub const MAX_EXAMINED: usize = 4096;

/// One user's registry as last listed.
#[derive(Debug, Default)]
struct UserEntries {
    /// Targets of the entries kept, in name order.
    targets: Vec<PathBuf>,
    /// Entries beyond MAX_PER_USER (or MAX_EXAMINED), not read.
    over: usize,
}

pub struct Registry {
    base: PathBuf,
    /// None: inotify is unavailable, and every refresh lists everything.
    inotify: Option<OwnedFd>,
    /// Watch descriptor -> the uid whose directory it watches; None for
    /// the directory the users' directories are in.
    watches: HashMap<i32, Option<u32>>,
    users: BTreeMap<u32, UserEntries>,
    /// Everything must be listed again (at start, after an overflow).
    stale: bool,
    /// [`Registry::over_caps`] when [`Registry::over_caps_news`] last
    /// told it.
    over_told: Vec<(u32, usize)>,
    mounts: mounts::MountTable,
}

impl Registry {
    /// The registry, watched by inotify where it can be (else listed on
    /// every refresh, as `scx_sky pvas ls` does once).
    pub fn watched() -> Registry {
        Self::watched_at(hints::registry_base())
    }

    fn watched_at(base: PathBuf) -> Registry {
        // SAFETY: no pointers; the fd returned is ours alone.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        let mut r = Registry::polled_at(base);
        // SAFETY: a new descriptor from the kernel.
        r.inotify = (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) });
        r
    }

    /// The registry, listed whole at every refresh.
    pub fn polled() -> Registry {
        Self::polled_at(hints::registry_base())
    }

    fn polled_at(base: PathBuf) -> Registry {
        Registry {
            base,
            inotify: None,
            watches: HashMap::new(),
            users: BTreeMap::new(),
            stale: true,
            over_told: Vec::new(),
            mounts: mounts::MountTable::new(),
        }
    }

    /// Is the registry followed by inotify (false: listed every refresh)?
    pub fn is_watched(&self) -> bool {
        self.inotify.is_some()
    }

    /// Lists what changed since the last refresh (everything, if not
    /// watched); returns whether any entry came or went.
    pub fn refresh(&mut self) -> bool {
        let mut dirty: Vec<u32> = Vec::new();
        if self.inotify.is_none() || self.drain_events(&mut dirty) {
            self.stale = true;
        }
        if self.stale {
            self.stale = false;
            return self.list_all();
        }
        dirty.sort_unstable();
        dirty.dedup();
        if dirty.is_empty() {
            return false;
        }
        let mounts = self.mounts.current();
        let mut changed = false;
        for uid in dirty {
            changed |= self.list_user(uid, &mounts);
        }
        changed
    }

    /// The users' directories' parent, and their names' prefix.
    fn parent_and_prefix(&self) -> Option<(PathBuf, Vec<u8>)> {
        let parent = self.base.parent()?;
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        let mut prefix = self.base.file_name()?.as_bytes().to_vec();
        prefix.push(b'-');
        Some((parent.to_path_buf(), prefix))
    }

    /// The uid a directory name `<stem>-<uid>` names (one spelling per
    /// uid: "+5" or "05" would list 5's twice).
    fn uid_of(prefix: &[u8], name: &OsStr) -> Option<u32> {
        let digits = std::str::from_utf8(name.as_bytes().strip_prefix(prefix)?).ok()?;
        let uid: u32 = digits.parse().ok()?;
        (uid.to_string() == digits).then_some(uid)
    }

    fn list_all(&mut self) -> bool {
        let before: Vec<(u32, Vec<PathBuf>)> = self.snapshot();
        self.users.clear();
        let Some((parent, prefix)) = self.parent_and_prefix() else {
            return !before.is_empty();
        };
        self.watch(&parent, None);
        let uids: Vec<u32> = std::fs::read_dir(&parent)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter_map(|e| Self::uid_of(&prefix, &e.file_name()))
                    .collect()
            })
            .unwrap_or_default();
        let mounts = self.mounts.current();
        for uid in uids {
            self.list_user(uid, &mounts);
        }
        before != self.snapshot()
    }

    fn snapshot(&self) -> Vec<(u32, Vec<PathBuf>)> {
        self.users
            .iter()
            .map(|(uid, u)| (*uid, u.targets.clone()))
            .collect()
    }

    /// Lists `uid`'s directory again (and watches it); returns whether its
    /// entries changed.
    fn list_user(&mut self, uid: u32, mounts: &[mounts::Mount]) -> bool {
        let dir = hints::user_registry(&self.base, uid);
        let listed = files::open_registry_dir(&dir, uid).ok().map(|fd| {
            self.watch(&files::fd_path(fd.as_raw_fd()), Some(uid));
            read_entries(&fd, mounts)
        });
        let old = self.users.remove(&uid);
        let changed = old.as_ref().map(|u| &u.targets) != listed.as_ref().map(|u| &u.targets);
        if let Some(entries) = listed {
            self.users.insert(uid, entries);
        }
        changed
    }

    fn watch(&mut self, path: &Path, uid: Option<u32>) {
        let Some(fd) = &self.inotify else {
            return;
        };
        let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
            return;
        };
        let mask = libc::IN_CREATE
            | libc::IN_DELETE
            | libc::IN_MOVED_FROM
            | libc::IN_MOVED_TO
            | libc::IN_DELETE_SELF
            | libc::IN_ONLYDIR;
        // SAFETY: c is NUL-terminated.
        let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), c.as_ptr(), mask) };
        if wd >= 0 {
            self.watches.insert(wd, uid);
        }
    }

    /// Reads the events queued; pushes the uids whose directories changed.
    /// Returns true if everything must be listed again (overflow).
    fn drain_events(&mut self, dirty: &mut Vec<u32>) -> bool {
        let Some(fd) = &self.inotify else {
            return true;
        };
        let prefix = self.parent_and_prefix().map(|(_, p)| p).unwrap_or_default();
        let mut buf = vec![0u8; 64 << 10];
        let mut overflow = false;
        loop {
            // SAFETY: read writes at most buf.len() bytes into buf.
            let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            let mut at = 0usize;
            let header = std::mem::size_of::<libc::inotify_event>();
            while at + header <= n as usize {
                // SAFETY: the kernel wrote a whole event here; read
                // unaligned, as the buffer is plain bytes.
                let ev: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
                let name_end = (at + header + ev.len as usize).min(n as usize);
                let name = &buf[at + header..name_end];
                let name = OsStr::from_bytes(name.split(|&b| b == 0).next().unwrap_or(&[]));
                at = name_end;
                if ev.mask & libc::IN_Q_OVERFLOW != 0 {
                    overflow = true;
                    continue;
                }
                match self.watches.get(&ev.wd).copied() {
                    // The parent: a user's directory came or went.
                    Some(None) => dirty.extend(Self::uid_of(&prefix, name)),
                    Some(Some(uid)) => dirty.push(uid),
                    None => {}
                }
                if ev.mask & libc::IN_IGNORED != 0 {
                    match self.watches.remove(&ev.wd) {
                        Some(None) => overflow = true,
                        Some(Some(uid)) => dirty.push(uid),
                        None => {}
                    }
                }
            }
        }
        overflow
    }

    /// Each user's entries read within the caps, and how many beyond them
    /// are not (users in uid order: the total cap falls on the last).
    fn capped(&self) -> impl Iterator<Item = (u32, &[PathBuf], usize)> {
        let mut left = MAX_SPACES;
        self.users.iter().map(move |(uid, u)| {
            let kept = u.targets.len().min(left);
            left -= kept;
            (*uid, &u.targets[..kept], u.over + u.targets.len() - kept)
        })
    }

    /// Users' entries beyond the per-user cap, and beyond the total.
    pub fn over_caps(&self) -> Vec<(u32, usize)> {
        self.capped()
            .filter(|(_, _, over)| *over > 0)
            .map(|(uid, _, over)| (uid, over))
            .collect()
    }

    /// A line to log when the users over the caps changed (and some are):
    /// told once per change, not on every refresh.
    pub fn over_caps_news(&mut self) -> Option<String> {
        let over = self.over_caps();
        if over == self.over_told {
            return None;
        }
        let users: Vec<String> = over
            .iter()
            .map(|(uid, n)| format!("uid {uid}: {n}"))
            .collect();
        self.over_told = over;
        (!users.is_empty()).then(|| {
            format!(
                "shared-space registry: entries not read (at most {MAX_PER_USER} a user, \
                 {MAX_SPACES} in all): {}",
                users.join(", ")
            )
        })
    }

    /// The spaces listed (within the caps), their member tables read now;
    /// and, for `pvas ls`, the entries refused and why.
    pub fn read(&self) -> Vec<Listed> {
        let mounts = self.mounts.current();
        let mut out = Vec::new();
        for (uid, kept, over) in self.capped() {
            let trust = Trust::user(uid);
            for path in kept {
                out.push(match hints::read_space(uid, path, &trust, &mounts) {
                    Ok(space) => Listed::Space(Box::new(space)),
                    Err(e) => Listed::Refused {
                        path: path.clone(),
                        why: e.to_string(),
                    },
                });
            }
            if over > 0 {
                out.push(Listed::Refused {
                    path: hints::user_registry(&self.base, uid),
                    why: format!(
                        "{over} more entries not read (at most {MAX_PER_USER} spaces of a user \
                         and {MAX_SPACES} in all are)"
                    ),
                });
            }
        }
        out
    }

    /// The spaces [`Registry::read`] could read.
    pub fn spaces(&self) -> Vec<SpaceHints> {
        self.read()
            .into_iter()
            .filter_map(|l| match l {
                Listed::Space(s) => Some(*s),
                Listed::Refused { .. } => None,
            })
            .collect()
    }
}

/// A user's entries: symlinks named for their absolute targets (anything
/// else is skipped: a FIFO's readlink fails, nothing is opened), in name
/// order, of the first MAX_EXAMINED those whose file is there, up to
/// MAX_PER_USER.
fn read_entries(dir: &OwnedFd, mounts: &[mounts::Mount]) -> UserEntries {
    // Listed through the descriptor checked, not the path (which its user
    // could swap meanwhile).
    let Ok(entries) = std::fs::read_dir(files::fd_path(dir.as_raw_fd())) else {
        return UserEntries::default();
    };
    let mut named: Vec<(std::ffi::OsString, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let path = hints::read_link_at(dir, &e.file_name())?;
            (path.is_absolute() && hints::entry_name(&path) == e.file_name())
                .then(|| (e.file_name(), path))
        })
        .collect();
    named.sort();
    let unexamined = named.len().saturating_sub(MAX_EXAMINED);
    named.truncate(MAX_EXAMINED);
    let mut there: Vec<PathBuf> = named
        .into_iter()
        .map(|(_, p)| p)
        .filter(|p| files::exists_on_mount(mounts, p))
        .collect();
    let over = there.len().saturating_sub(MAX_PER_USER) + unexamined;
    there.truncate(MAX_PER_USER);
    UserEntries {
        targets: there,
        over,
    }
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
