//! The two kinds of task SMT pairing is about (seed 000, docs/seeds.md): a
//! persistent-memory writer, whose flushed stores stall its core, and
//! compute tasks that keep the core's execution units busy. One process
//! each, named by kind (`pm-writer`, `cpu-idiv`, ...), so class hints and
//! the tracepoint observer can tell them apart.

use anyhow::{bail, Context, Result};
use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

/// The paper's write size: persistent memory's write granularity.
pub const PM_WRITE_BYTES: usize = 256;
const LINE: usize = 64;

/// How long between clock reads in the loops: checking the time is a
/// syscall-free vDSO call, but not free.
const CHECK_EVERY: u64 = 1024;

/// Random 256 B writes into a file mapped shared (a DAX mount of
/// /dev/pmem0 in the VM, or any file on DRAM), each written back to
/// memory line by line (`clflush`) and ordered by a fence, as
/// `pmem_memmove_persist` does. Returns the writes done.
pub fn pm_write(file: &Path, size_mb: u64, duration: Duration) -> Result<u64> {
    if !(1..=65536).contains(&size_mb) {
        bail!("--size-mb must be 1..=65536, got {size_mb}");
    }
    let len = (size_mb as usize) << 20;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(file)
        .with_context(|| format!("opening {}", file.display()))?;
    // Allocated, not sparse: a full file system must fail here, not with
    // SIGBUS at the first store into a hole.
    // SAFETY: plain syscall on a descriptor we own.
    let err = unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, len as libc::off_t) };
    if err != 0 {
        bail!(
            "allocating {size_mb} MiB for {}: {}",
            file.display(),
            std::io::Error::from_raw_os_error(err)
        );
    }
    // SAFETY: a fresh shared mapping of a file we hold open, of its length.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    if base == libc::MAP_FAILED {
        bail!(
            "mapping {}: {}",
            file.display(),
            std::io::Error::last_os_error()
        );
    }
    let base = base as *mut u8;
    let slots = (len / PM_WRITE_BYTES) as u64;
    let payload = [0xa5u8; PM_WRITE_BYTES];
    let (start, mut writes, mut x) = (Instant::now(), 0u64, 0x9e37_79b9_7f4a_7c15u64);
    loop {
        if writes % CHECK_EVERY == 0 && start.elapsed() >= duration {
            break;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let offset = (x % slots) as usize * PM_WRITE_BYTES;
        // SAFETY: offset + 256 <= len, inside the mapping.
        unsafe {
            let dst = base.add(offset);
            std::ptr::copy_nonoverlapping(payload.as_ptr(), dst, PM_WRITE_BYTES);
            persist(dst, PM_WRITE_BYTES);
        }
        writes += 1;
    }
    // SAFETY: the mapping made above.
    unsafe { libc::munmap(base.cast(), len) };
    Ok(writes)
}

/// Writes `len` bytes at `p` back to memory and orders them.
///
/// # Safety
/// `p..p + len` must be mapped.
unsafe fn persist(p: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_clflush, _mm_sfence};
        let mut line = p as usize & !(LINE - 1);
        while line < p as usize + len {
            _mm_clflush(line as *const u8);
            line += LINE;
        }
        _mm_sfence();
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (p, len, LINE);
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }
}

/// The paper's compute tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ComputeKind {
    /// Integer division in registers, no memory access.
    Idiv,
    /// 64x64 matrix multiply: cache-resident.
    Matmul,
    /// 1024x1024 matrix add: streams 24 MiB, more memory-bound.
    Matadd,
}

/// Runs one compute kind for `duration` (its set-up included); returns
/// the rounds done (a round: 4096 divisions, one multiply, or one add of
/// the matrices), at least one, however late the set-up ends.
pub fn compute(kind: ComputeKind, duration: Duration) -> u64 {
    let start = Instant::now();
    match kind {
        ComputeKind::Idiv => {
            let mut x = std::hint::black_box(0xdead_beef_u64);
            rounds_until(start, duration, &mut || {
                for i in 1..=4096u64 {
                    x = std::hint::black_box(x / (i | 1) + 0x1234_5678_9abc);
                }
            })
        }
        ComputeKind::Matmul => {
            const N: usize = 64;
            let a = vec![1.000_1f64; N * N];
            let b = vec![0.999_9f64; N * N];
            let mut c = vec![0f64; N * N];
            rounds_until(start, duration, &mut || {
                for i in 0..N {
                    for k in 0..N {
                        let aik = a[i * N + k];
                        for j in 0..N {
                            c[i * N + j] += aik * b[k * N + j];
                        }
                    }
                }
                std::hint::black_box(&mut c);
            })
        }
        ComputeKind::Matadd => {
            const N: usize = 1024;
            let a = vec![1.0f64; N * N];
            let b = vec![2.0f64; N * N];
            let mut c = vec![0f64; N * N];
            rounds_until(start, duration, &mut || {
                for ((c, a), b) in c.iter_mut().zip(&a).zip(&b) {
                    *c = a + b;
                }
                std::hint::black_box(&mut c);
            })
        }
    }
}

/// Runs `round` until `duration` has passed since `start`, at least once;
/// returns how many times it ran.
fn rounds_until(start: Instant, duration: Duration, round: &mut dyn FnMut()) -> u64 {
    let mut rounds = 0u64;
    loop {
        round();
        rounds += 1;
        if start.elapsed() >= duration || crate::stop::requested() {
            return rounds;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pm_writes_land_in_the_file_and_bad_sizes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pm");
        let writes = pm_write(&file, 1, Duration::from_millis(50)).unwrap();
        assert!(writes > 0);
        let data = std::fs::read(&file).unwrap();
        assert_eq!(data.len(), 1 << 20);
        let written = data.chunks(PM_WRITE_BYTES).filter(|c| c[0] == 0xa5).count();
        assert!(
            written > 0 && written as u64 <= writes,
            "{written} of {writes}"
        );
        let e = pm_write(&file, 0, Duration::ZERO).unwrap_err().to_string();
        assert!(e.contains("--size-mb"), "{e}");
        let e = pm_write(Path::new("/nonexistent/dir/pm"), 1, Duration::ZERO).unwrap_err();
        assert!(format!("{e:#}").contains("/nonexistent/dir/pm"));
    }

    #[test]
    fn every_compute_kind_does_rounds() {
        for kind in [ComputeKind::Idiv, ComputeKind::Matmul, ComputeKind::Matadd] {
            assert!(compute(kind, Duration::from_millis(30)) > 0, "{kind:?}");
        }
    }
}
