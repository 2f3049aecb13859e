//! The durable memory one side of a queue between machines keeps: the
//! owner's queue area, or the pull receiver's consumed count. A regular
//! file (tmpfs: volatile; any other filesystem: msync; a DAX mount:
//! MAP_SYNC and cache-line flushes), or a Device DAX namespace
//! (`/dev/daxX.Y`: persistent memory RDMA may pin, which fsdax pages are
//! not: only there can a region be registered for FLUSH to persistence).

use crate::persist::{PersistMode, Site};
use crate::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// Device DAX maps in units of its alignment (2 MiB by default).
const DEVDAX_ALIGN: usize = 2 << 20;

pub struct Area {
    ptr: *mut u8,
    len: usize,
    pub persist: PersistMode,
    /// On Device DAX (registrable for FLUSH to persistence).
    pub devdax: bool,
    _file: File,
}

// SAFETY: the mapping is plain shared memory; who writes where is the
// queue's protocol (one writer per field).
unsafe impl Send for Area {}

impl Area {
    /// Maps `len` bytes of `path`, creating a regular file of that size if
    /// there is none. A file of another size is refused (a queue of
    /// another geometry), never truncated.
    pub fn open(path: &Path, len: usize) -> Result<Area> {
        let io = |e| Error::io(path.display(), e);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(!path.exists())
            .truncate(false)
            .open(path)
            .map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        let devdax = meta.file_type().is_char_device();
        let map_len = if devdax {
            len.div_ceil(DEVDAX_ALIGN) * DEVDAX_ALIGN
        } else if meta.len() == 0 {
            file.set_len(len as u64).map_err(io)?;
            len
        } else if meta.len() == len as u64 {
            len
        } else {
            return Err(Error::Invalid(format!(
                "{}: {} bytes, a queue of this geometry keeps {len}: another queue's file?",
                path.display(),
                meta.len()
            )));
        };
        let fd = file.as_raw_fd();
        let map = |flags: i32| {
            // SAFETY: a fresh shared mapping of our open file.
            unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    map_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    flags,
                    fd,
                    0,
                )
            }
        };
        let (ptr, persist) = if devdax {
            (map(libc::MAP_SHARED), PersistMode::for_dax(meta.rdev()))
        } else {
            crate::persist::map_durably(&file, map)
        };
        if ptr == libc::MAP_FAILED {
            return Err(io(std::io::Error::last_os_error()));
        }
        Ok(Area {
            ptr: ptr as *mut u8,
            len: map_len,
            persist,
            devdax,
            _file: file,
        })
    }

    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Makes `[offset, offset + len)` durable.
    pub fn persist(&self, site: Site, offset: usize, len: usize) -> Result<()> {
        debug_assert!(offset + len <= self.len);
        // SAFETY: inside the mapping.
        self.persist
            .persist(site, unsafe { self.ptr.add(offset) }, len)
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: mapped by `open`, unmapped once.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}
