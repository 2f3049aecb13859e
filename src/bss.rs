//! A mapping of the loaded scheduler's .bss of our own, for the threads
//! that write into it beside the run loop (policy switches, the feeds
//! worker) without borrowing the skeleton.

use crate::bpf::skel::types::bss;
use anyhow::{bail, ensure, Result};
use libbpf_rs::MapCore;
use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;

/// The kernel keeps the map alive while it is mapped, whatever happens to
/// the skeleton.
pub struct BssMapping {
    ptr: NonNull<bss>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; each owner uses it from one
// thread at a time (the switcher under its lock, the feeds worker alone).
unsafe impl Send for BssMapping {}

impl BssMapping {
    pub fn new(map: &libbpf_rs::MapMut) -> Result<Self> {
        let size = map.value_size() as usize;
        ensure!(
            size >= std::mem::size_of::<bss>(),
            "the BPF .bss is {size} bytes, smaller than its {} byte layout",
            std::mem::size_of::<bss>()
        );
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .unwrap_or(4096)
            .max(1);
        let len = size.div_ceil(page) * page;
        // SAFETY: a fresh shared mapping of the map's fd; checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.as_fd().as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            bail!(
                "mapping the BPF .bss for runtime switches: {}",
                std::io::Error::last_os_error()
            );
        }
        let ptr = NonNull::new(ptr.cast::<bss>())
            .ok_or_else(|| anyhow::anyhow!("mapping the BPF .bss gave a null address"))?;
        Ok(BssMapping { ptr, len })
    }

    pub fn bss(&mut self) -> &mut bss {
        // SAFETY: mapped, at least size_of::<bss>() long, page-aligned,
        // and only reached through &mut self.
        unsafe { self.ptr.as_mut() }
    }
}

impl Drop for BssMapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new(), unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
