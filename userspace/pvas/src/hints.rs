//! Gang and PM-writer hints for the scheduler daemon.
//!
//! The documented place: every space registers itself as a symlink
//! `/dev/shm/scx_sky-spaces/<name>` -> its backing file (which may live on
//! any filesystem). The backing file's member table lists each member's pid
//! and whether it writes to a persistent queue. [`read_all`] reads them.

use crate::layout::{HeaderFixed, MemberSlot, FIXED_BYTES, HEADER_BYTES, SLOT_ACTIVE};
use crate::liveness;
use crate::space::Member;
use crate::{Error, Result};
use std::mem::{offset_of, size_of};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub const REGISTRY_DIR: &str = "/dev/shm/scx_sky-spaces";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpaceHints {
    pub name: String,
    pub path: PathBuf,
    /// Live members' pids: one gang.
    pub pids: Vec<u32>,
    /// Those of them writing to a persistent queue.
    pub pm_writers: Vec<u32>,
}

fn registry() -> PathBuf {
    std::env::var_os("SKY_PVAS_REGISTRY").map_or_else(|| PathBuf::from(REGISTRY_DIR), PathBuf::from)
}

/// Best effort: a space works without its registry entry; it is only
/// invisible to the scheduler and `scx_sky pvas ls`.
pub(crate) fn register(name: &str, path: &Path) {
    let dir = registry();
    let _ = std::fs::create_dir_all(&dir);
    let link = dir.join(name);
    let _ = std::fs::remove_file(&link);
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let _ = std::os::unix::fs::symlink(target, link);
}

pub(crate) fn unregister(name: &str) {
    if !name.is_empty() {
        let _ = std::fs::remove_file(registry().join(name));
    }
}

/// Every registered space that can still be opened, with its live members.
pub fn read_all() -> Vec<SpaceHints> {
    let Ok(entries) = std::fs::read_dir(registry()) else {
        return Vec::new();
    };
    let mut out: Vec<SpaceHints> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = std::fs::read_link(e.path()).ok()?;
            let (_, members) = read_members(&path).ok()?;
            let members: Vec<_> = members.into_iter().filter(|m| m.alive).collect();
            Some(SpaceHints {
                name,
                path,
                pids: members.iter().map(|m| m.pid).collect(),
                pm_writers: members
                    .iter()
                    .filter(|m| m.pm_writer)
                    .map(|m| m.pid)
                    .collect(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Reads a space's header and member table with plain reads, without
/// mapping it (the scheduler daemon must not map members' address ranges).
/// Only a regular file is read, opened without blocking: a FIFO or device
/// squatting a registry entry must not hang the scheduler daemon.
pub fn read_members(path: &Path) -> Result<(HeaderFixed, Vec<Member>)> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| Error::io(path.display(), e))?;
    let meta = file.metadata().map_err(|e| Error::io(path.display(), e))?;
    if !meta.is_file() {
        return Err(Error::io(
            path.display(),
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
        ));
    }
    let len = meta.len();
    let mut head = [0u8; FIXED_BYTES];
    file.read_exact_at(&mut head, 0)
        .map_err(|e| Error::io(path.display(), e))?;
    let header = HeaderFixed::parse(&head, len)?;
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
            (owner != 0 && state == SLOT_ACTIVE).then(|| Member {
                id: id as u32,
                pid: owner as u32,
                alive: liveness::slot_locked(std::os::fd::AsRawFd::as_raw_fd(&file), id as u32)
                    .unwrap_or(false),
                pm_writer: word(id, offset_of!(MemberSlot, pm_writer), 4) != 0,
            })
        })
        .collect();
    Ok((header, members))
}

#[cfg(test)]
mod tests {
    use super::*;

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
