//! The baselines one-copy is measured against: a two-copy shared-memory
//! ring and process_vm_writev.

use super::Res;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) const RING: usize = 1 << 20;

/// A two-copy single-producer/single-consumer byte ring in shared memory.
#[repr(C)]
pub(super) struct Ring {
    pub(super) head: AtomicU64,
    pub(super) tail: AtomicU64,
    pub(super) data: [u8; RING],
}

impl Ring {
    pub(super) fn send(&self, mut data: &[u8]) {
        while !data.is_empty() {
            let head = self.head.load(Ordering::Relaxed);
            let free = RING - (head - self.tail.load(Ordering::Acquire)) as usize;
            if free == 0 {
                std::hint::spin_loop();
                continue;
            }
            let at = head as usize % RING;
            let n = data.len().min(free).min(RING - at);
            // SAFETY: [at, at+n) is free ring space owned by the producer.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    data.as_ptr(),
                    (self.data.as_ptr() as *mut u8).add(at),
                    n,
                )
            };
            self.head.store(head + n as u64, Ordering::Release);
            data = &data[n..];
        }
    }

    pub(super) fn recv(&self, out: &mut [u8]) {
        let mut done = 0;
        while done < out.len() {
            let tail = self.tail.load(Ordering::Relaxed);
            let avail = (self.head.load(Ordering::Acquire) - tail) as usize;
            if avail == 0 {
                std::hint::spin_loop();
                continue;
            }
            let at = tail as usize % RING;
            let n = (out.len() - done).min(avail).min(RING - at);
            out[done..done + n].copy_from_slice(&self.data[at..at + n]);
            self.tail.store(tail + n as u64, Ordering::Release);
            done += n;
        }
    }
}

/// Two rings (one each way) in a shared file mapping.
pub(super) fn rings(path: &Path, create: bool) -> Res<&'static [Ring; 2]> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .open(path)?;
    f.set_len(std::mem::size_of::<[Ring; 2]>() as u64)?;
    use std::os::fd::AsRawFd;
    // SAFETY: a fresh shared mapping of a file sized for two rings.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            std::mem::size_of::<[Ring; 2]>(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    anyhow::ensure!(p != libc::MAP_FAILED, "mapping the ring file failed");
    Ok(unsafe { &*(p as *const [Ring; 2]) })
}

pub(super) fn vm_write(pid: i32, local: &[u8], remote: u64) -> Res<()> {
    let mut done = 0;
    while done < local.len() {
        let l = libc::iovec {
            iov_base: local[done..].as_ptr() as *mut _,
            iov_len: local.len() - done,
        };
        let r = libc::iovec {
            iov_base: (remote + done as u64) as *mut _,
            iov_len: local.len() - done,
        };
        // SAFETY: iovecs describe our buffer and the peer's posted buffer.
        let n = unsafe { libc::process_vm_writev(pid, &l, 1, &r, 1, 0) };
        anyhow::ensure!(
            n > 0,
            "process_vm_writev: {}",
            std::io::Error::last_os_error()
        );
        done += n as usize;
    }
    Ok(())
}
