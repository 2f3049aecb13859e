//! Making stores durable on a space backed by persistent memory.
//!
//! - `FlushFence`: the file is mapped with MAP_SYNC (a DAX filesystem on
//!   persistent memory), so flushing the cache lines and a store fence make
//!   data durable without a system call.
//! - `Msync`: any other real file: msync(MS_SYNC) over the pages.
//! - `Volatile`: tmpfs (/dev/shm): nothing survives a power loss anyway;
//!   stores are already visible to every process and survive a crash of
//!   any of them, so only ordering is needed.

use std::sync::atomic::{fence, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersistMode {
    Volatile,
    Msync,
    FlushFence,
}

impl PersistMode {
    pub fn name(self) -> &'static str {
        match self {
            PersistMode::Volatile => "volatile",
            PersistMode::Msync => "msync",
            PersistMode::FlushFence => "flush+fence",
        }
    }

    /// Writes back the cache lines of [ptr, ptr+len) (no ordering yet).
    pub fn flush(self, ptr: *const u8, len: usize) {
        match self {
            PersistMode::Volatile => {}
            PersistMode::Msync => {
                let page = 4096usize;
                let start = (ptr as usize) & !(page - 1);
                let end = (ptr as usize + len).div_ceil(page) * page;
                // SAFETY: the range lies inside the space's mapping.
                unsafe { libc::msync(start as *mut libc::c_void, end - start, libc::MS_SYNC) };
            }
            PersistMode::FlushFence => flush_lines(ptr, len),
        }
    }

    /// Orders the flushes before any later store (the counter publish).
    pub fn fence(self) {
        match self {
            PersistMode::FlushFence => store_fence(),
            _ => fence(Ordering::SeqCst),
        }
    }

    pub fn persist(self, ptr: *const u8, len: usize) {
        self.flush(ptr, len);
        self.fence();
    }
}

#[cfg(target_arch = "x86_64")]
fn flush_lines(ptr: *const u8, len: usize) {
    let start = (ptr as usize) & !63;
    let end = ptr as usize + len;
    let mut line = start;
    while line < end {
        // SAFETY: clflush on an address inside our mapping; SSE2 is part
        // of the x86_64 baseline.
        unsafe { core::arch::x86_64::_mm_clflush(line as *const u8) };
        line += 64;
    }
}

#[cfg(target_arch = "x86_64")]
fn store_fence() {
    // SAFETY: sfence has no preconditions.
    unsafe { core::arch::x86_64::_mm_sfence() };
}

#[cfg(not(target_arch = "x86_64"))]
fn flush_lines(ptr: *const u8, len: usize) {
    PersistMode::Msync.flush(ptr, len);
}

#[cfg(not(target_arch = "x86_64"))]
fn store_fence() {
    fence(Ordering::SeqCst);
}
