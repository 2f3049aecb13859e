//! Making stores durable on a space backed by persistent memory.
//!
//! The method is chosen once, at map time, from what the platform says:
//! - `Flush(kind)`: the file is mapped with MAP_SYNC (a DAX filesystem on
//!   persistent memory): write the cache lines back with the best
//!   instruction the CPU has (clwb, which keeps the line cached, else
//!   clflushopt, else clflush) and order them with a store fence.
//! - `FenceOnly`: MAP_SYNC, and the region's persistence domain includes
//!   the CPU caches (eADR: `persistence_domain` is `cpu_cache` in sysfs):
//!   the caches are flushed on power failure, only ordering is needed.
//! - `Msync`: any other real file: msync(MS_SYNC) over the pages, and its
//!   result checked (a failed write-back is an error, not silence).
//! - `Volatile`: tmpfs (/dev/shm): nothing survives a power loss anyway;
//!   stores survive the crash of any process, so only ordering is needed.
//!
//! With the `fault-injection` feature (tests only) there is one more,
//! `Simulated`: see [`sim`].

use crate::{Error, Result};
use std::sync::atomic::{fence, Ordering};

#[cfg(feature = "fault-injection")]
pub mod sim;

/// The cache-line write-back instruction in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushKind {
    Clwb,
    Clflushopt,
    Clflush,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersistMode {
    Volatile,
    Msync,
    Flush(FlushKind),
    FenceOnly,
    #[cfg(feature = "fault-injection")]
    Simulated,
}

/// The places that make something durable, named so a power-loss test can
/// leave one of them out and show that it matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// A queue area's header (geometry, epoch, consumed count) at create.
    AreaHeader,
    /// A queue descriptor in the owner's durable directory.
    Descriptor,
    /// An enqueued entry, before its counter is published.
    Entry,
    /// The consumed count, before a dequeue returns.
    Consumed,
}

impl Site {
    pub const ALL: [Site; 4] = [
        Site::AreaHeader,
        Site::Descriptor,
        Site::Entry,
        Site::Consumed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Site::AreaHeader => "area-header",
            Site::Descriptor => "descriptor",
            Site::Entry => "entry",
            Site::Consumed => "consumed",
        }
    }
}

impl PersistMode {
    pub fn name(self) -> &'static str {
        match self {
            PersistMode::Volatile => "volatile",
            PersistMode::Msync => "msync",
            PersistMode::Flush(FlushKind::Clwb) => "flush+fence (clwb)",
            PersistMode::Flush(FlushKind::Clflushopt) => "flush+fence (clflushopt)",
            PersistMode::Flush(FlushKind::Clflush) => "flush+fence (clflush)",
            PersistMode::FenceOnly => "fence only (eADR)",
            #[cfg(feature = "fault-injection")]
            PersistMode::Simulated => "simulated power loss",
        }
    }

    /// The mode for a MAP_SYNC mapping of a file on device `dev`.
    pub fn for_dax(dev: u64) -> PersistMode {
        if cpu_caches_are_persistent(dev) {
            PersistMode::FenceOnly
        } else {
            PersistMode::Flush(best_flush())
        }
    }

    /// Writes back the cache lines of [ptr, ptr+len) (no ordering yet).
    #[cfg_attr(not(feature = "fault-injection"), allow(unused_variables))]
    pub fn flush(self, site: Site, ptr: *const u8, len: usize) -> Result<()> {
        match self {
            PersistMode::Volatile | PersistMode::FenceOnly => Ok(()),
            PersistMode::Msync => msync(ptr, len),
            PersistMode::Flush(kind) => {
                flush_lines(kind, ptr, len);
                Ok(())
            }
            #[cfg(feature = "fault-injection")]
            PersistMode::Simulated => {
                sim::flush(site, ptr, len);
                Ok(())
            }
        }
    }

    /// Orders the flushes before any later store (the counter publish).
    #[cfg_attr(not(feature = "fault-injection"), allow(unused_variables))]
    pub fn fence(self, site: Site) {
        match self {
            PersistMode::Flush(_) | PersistMode::FenceOnly => store_fence(),
            #[cfg(feature = "fault-injection")]
            PersistMode::Simulated => sim::fence(site),
            _ => fence(Ordering::SeqCst),
        }
    }

    pub fn persist(self, site: Site, ptr: *const u8, len: usize) -> Result<()> {
        self.flush(site, ptr, len)?;
        self.fence(site);
        Ok(())
    }
}

const TMPFS_MAGIC: i64 = 0x0102_1994;

/// Maps `file` through `map` (given the mmap flags to use) the way its
/// stores can be made durable, and says how: plain shared on tmpfs
/// (volatile), MAP_SYNC where the filesystem is DAX, else plain shared
/// with msync. Returns MAP_FAILED from `map` as it came.
pub fn map_durably(
    file: &std::fs::File,
    map: impl Fn(i32) -> *mut libc::c_void,
) -> (*mut libc::c_void, PersistMode) {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    // SAFETY: zero is valid for the C struct; fstatfs fills it.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    let on_tmpfs =
        unsafe { libc::fstatfs(file.as_raw_fd(), &mut fs) } == 0 && fs.f_type as i64 == TMPFS_MAGIC;
    if on_tmpfs {
        return (map(libc::MAP_SHARED), PersistMode::Volatile);
    }
    match map(libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC) {
        p if p != libc::MAP_FAILED => {
            let dev = file.metadata().map(|m| m.dev()).unwrap_or(0);
            (p, PersistMode::for_dax(dev))
        }
        _ => (map(libc::MAP_SHARED), PersistMode::Msync),
    }
}

fn msync(ptr: *const u8, len: usize) -> Result<()> {
    let page = 4096usize;
    let start = (ptr as usize) & !(page - 1);
    let end = (ptr as usize + len).div_ceil(page) * page;
    // SAFETY: the range lies inside the space's mapping.
    if unsafe { libc::msync(start as *mut libc::c_void, end - start, libc::MS_SYNC) } != 0 {
        return Err(Error::io(
            format!("msync of {:#x}+{:#x}", start, end - start),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// clwb > clflushopt > clflush, as the CPU offers them.
pub fn best_flush() -> FlushKind {
    if cpu_has(FlushKind::Clwb) {
        FlushKind::Clwb
    } else if cpu_has(FlushKind::Clflushopt) {
        FlushKind::Clflushopt
    } else {
        FlushKind::Clflush
    }
}

/// CPUID leaf 7 (EBX bit 24: clwb, bit 23: clflushopt); std's feature
/// detection does not know these two.
fn cpu_has(kind: FlushKind) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // Leaf 7 reads as zeros ("no") on CPUs whose maximum leaf is lower.
        let ebx = core::arch::x86_64::__cpuid_count(7, 0).ebx;
        match kind {
            FlushKind::Clwb => ebx & (1 << 24) != 0,
            FlushKind::Clflushopt => ebx & (1 << 23) != 0,
            FlushKind::Clflush => true,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        kind == FlushKind::Clflush
    }
}

/// Does the platform flush CPU caches to persistent memory on power
/// failure (eADR) for the region behind block device `dev`? Linux tells
/// in the nvdimm region's `persistence_domain` ("cpu_cache"); anything
/// unreadable counts as no, which only costs flushes.
fn cpu_caches_are_persistent(dev: u64) -> bool {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let Ok(mut dir) = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")) else {
        return false;
    };
    while dir.pop() {
        if let Ok(domain) = std::fs::read_to_string(dir.join("persistence_domain")) {
            return domain.trim() == "cpu_cache";
        }
        if dir == std::path::Path::new("/sys/devices") {
            break;
        }
    }
    false
}

#[cfg(target_arch = "x86_64")]
fn flush_lines(kind: FlushKind, ptr: *const u8, len: usize) {
    let start = (ptr as usize) & !63;
    let end = ptr as usize + len;
    let mut line = start;
    while line < end {
        let p = line as *const u8;
        // SAFETY: each instruction writes back one line of our mapping; the
        // CPU has it (best_flush checked), and clflush is x86_64 baseline.
        unsafe {
            match kind {
                FlushKind::Clwb => core::arch::asm!("clwb [{0}]", in(reg) p, options(nostack)),
                FlushKind::Clflushopt => {
                    core::arch::asm!("clflushopt [{0}]", in(reg) p, options(nostack))
                }
                FlushKind::Clflush => core::arch::x86_64::_mm_clflush(p),
            }
        }
        line += 64;
    }
}

#[cfg(target_arch = "x86_64")]
fn store_fence() {
    // SAFETY: sfence has no preconditions.
    unsafe { core::arch::x86_64::_mm_sfence() };
}

#[cfg(not(target_arch = "x86_64"))]
fn flush_lines(_kind: FlushKind, ptr: *const u8, len: usize) {
    let _ = msync(ptr, len);
}

#[cfg(not(target_arch = "x86_64"))]
fn store_fence() {
    fence(Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flush_instruction_the_cpu_reports_runs() {
        let buf = vec![7u8; 4096];
        let kinds = [FlushKind::Clwb, FlushKind::Clflushopt, FlushKind::Clflush];
        for kind in kinds.into_iter().filter(|&k| cpu_has(k)) {
            PersistMode::Flush(kind)
                .persist(Site::Entry, buf.as_ptr(), buf.len())
                .unwrap();
        }
        assert_eq!(buf.iter().map(|&b| b as usize).sum::<usize>(), 7 * 4096);
        // The best is one the CPU has, and none it has is better.
        let best = best_flush();
        assert!(cpu_has(best));
        let rank = |k| kinds.iter().position(|&x| x == k).unwrap();
        assert!(kinds.iter().all(|&k| !cpu_has(k) || rank(k) >= rank(best)));
    }

    #[test]
    fn a_failed_msync_is_an_error() {
        // Not mapped: msync fails with ENOMEM.
        let e = msync(0x1000 as *const u8, 64).unwrap_err().to_string();
        assert!(e.contains("msync of 0x1000"), "{e}");
    }

    #[test]
    fn a_plain_disk_is_not_taken_for_eadr() {
        // Whatever backs the root filesystem here has no nvdimm region.
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata("/").unwrap().dev();
        assert!(!cpu_caches_are_persistent(dev));
    }
}
