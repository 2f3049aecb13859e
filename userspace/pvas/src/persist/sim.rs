//! Simulated power loss, for tests only (cargo feature `fault-injection`).
//!
//! Every process of a test run maps the space as usual (tmpfs), but its
//! persistence goes through here: a flush copies the cache lines it covers
//! into a private pending list, a fence writes the pending lines into a
//! *shadow image* file — the only "persistent memory" there is. Stores
//! nobody flushed and fenced never reach it, which is the strictest thing
//! hardware may do. Every flush and every fence is a numbered *step*,
//! counted across all processes in a shared control file; at step
//! `crash_at` the power fails: from then on no process's step completes
//! (each dies at its next one), and the lines a dying process had flushed
//! but not fenced reach the image or not as the run's `variant` says —
//! none, all, or only the last flush's (a fence left out lets later lines
//! land without earlier ones). Hardware may also write any dirty line back
//! early, flushed or not: at the failure, lines the mapping holds other
//! than the image reach it as the run's `unflushed` says — none, all, or
//! every other one. The shadow image is then the file a rebooted machine
//! finds.
//!
//! A run can also leave out one site's flush or fence (`drop`), to show
//! the power-loss test catches every one of them.
//!
//! `SKY_PVAS_SIM=CONTROL:SHADOW` turns it on for a process;
//! `SKY_PVAS_CRASH_AT=POINT:SEQ` kills the process at a named point of
//! enqueue number SEQ (payload, flush, fence, publish).

use super::Site;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// What reaches the image of the lines a process flushed but did not fence
/// when the power fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfenced {
    None = 0,
    All = 1,
    LastFlush = 2,
}

/// What reaches the image, at the power failure, of the lines that differ
/// from it (stores nobody made durable, which a cache may have written
/// back early): none, all, or those of even or of odd line index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unflushed {
    None = 0,
    All = 1,
    Even = 2,
    Odd = 3,
}

impl Unflushed {
    fn lands(code: u32, line: usize) -> bool {
        match code {
            1 => true,
            2 => line.is_multiple_of(2),
            3 => !line.is_multiple_of(2),
            _ => false,
        }
    }
}

/// The outcomes a power-loss run can meet at the failure: each unfenced
/// outcome with no early write-back, and each early write-back with no
/// unfenced line landing.
pub const OUTCOMES: [(Unfenced, Unflushed); 6] = [
    (Unfenced::None, Unflushed::None),
    (Unfenced::All, Unflushed::None),
    (Unfenced::LastFlush, Unflushed::None),
    (Unfenced::None, Unflushed::All),
    (Unfenced::None, Unflushed::Even),
    (Unfenced::None, Unflushed::Odd),
];

/// A flush or fence left out of one site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    pub site: Site,
    pub fence: bool,
}

#[repr(C)]
struct Control {
    step: AtomicU64,
    crash_at: AtomicU64,
    failed: AtomicU32,
    unfenced: AtomicU32,
    /// 1 + site index * 2 + (1 if fence), 0 for none.
    dropped: AtomicU32,
    unflushed: AtomicU32,
}

const CONTROL_BYTES: usize = 64;

/// Writes a control file for one run: the power fails at step `crash_at`
/// (never for u64::MAX).
pub fn write_control(
    path: &std::path::Path,
    crash_at: u64,
    (unfenced, unflushed): (Unfenced, Unflushed),
    dropped: Option<Dropped>,
) -> std::io::Result<()> {
    let mut b = [0u8; CONTROL_BYTES];
    b[8..16].copy_from_slice(&crash_at.to_ne_bytes());
    b[20..24].copy_from_slice(&(unfenced as u32).to_ne_bytes());
    b[24..28].copy_from_slice(&drop_code(dropped).to_ne_bytes());
    b[28..32].copy_from_slice(&(unflushed as u32).to_ne_bytes());
    std::fs::write(path, b)
}

/// (steps taken, did the power fail) of a run.
pub fn read_control(path: &std::path::Path) -> std::io::Result<(u64, bool)> {
    let b = std::fs::read(path)?;
    if b.len() < CONTROL_BYTES {
        return Err(std::io::Error::other("short control file"));
    }
    let step = u64::from_ne_bytes(b[0..8].try_into().unwrap());
    let failed = u32::from_ne_bytes(b[16..20].try_into().unwrap());
    Ok((step, failed != 0))
}

fn drop_code(dropped: Option<Dropped>) -> u32 {
    dropped.map_or(0, |d| {
        let site = Site::ALL.iter().position(|&s| s == d.site).unwrap() as u32;
        1 + site * 2 + d.fence as u32
    })
}

struct Sim {
    control: &'static Control,
    shadow: File,
    base: AtomicUsize,
    len: AtomicUsize,
    /// (offset in the space, line bytes, flush number) flushed, not fenced.
    pending: Mutex<Vec<(u64, [u8; 64], u64)>>,
    flushes: AtomicU64,
}

fn sim() -> Option<&'static Sim> {
    static SIM: OnceLock<Option<Sim>> = OnceLock::new();
    SIM.get_or_init(|| {
        let spec = std::env::var("SKY_PVAS_SIM").ok()?;
        let (control, shadow) = spec.split_once(':')?;
        let cf = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(control)
            .ok()?;
        // SAFETY: a shared mapping of the whole (64-byte) control file,
        // never unmapped: it lives as long as the process.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                CONTROL_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&cf),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        let shadow = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(shadow)
            .ok()?;
        Some(Sim {
            // SAFETY: mapped above, 64 bytes, Control is 40 and 8-aligned.
            control: unsafe { &*(p as *const Control) },
            shadow,
            base: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            pending: Mutex::new(Vec::new()),
            flushes: AtomicU64::new(0),
        })
    })
    .as_ref()
}

/// Is the simulation on for this process? Called at map time with the
/// space's mapping (one simulated space per process).
pub fn attach(base: *mut u8, len: usize) -> bool {
    match sim() {
        Some(s) => {
            s.base.store(base as usize, Ordering::Relaxed);
            s.len.store(len, Ordering::Relaxed);
            true
        }
        None => false,
    }
}

impl Sim {
    /// One step; the power fails at `crash_at`, and after it nothing more
    /// happens in this process.
    fn step(&self) {
        if self.control.failed.load(Ordering::Acquire) != 0 {
            self.die();
        }
        let n = self.control.step.fetch_add(1, Ordering::AcqRel) + 1;
        if n == self.control.crash_at.load(Ordering::Relaxed) {
            self.control.failed.store(1, Ordering::Release);
            self.write_back_early();
            self.die();
        }
    }

    /// At the failure (once, by the process it strikes): the lines the
    /// mapping holds other than the image reach it as `unflushed` says.
    /// Another process's stores made before this scan count as made
    /// before the failure; any later one never lands (it dies at its next
    /// step).
    fn write_back_early(&self) {
        let code = self.control.unflushed.load(Ordering::Relaxed);
        let (base, len) = (
            self.base.load(Ordering::Relaxed),
            self.len.load(Ordering::Relaxed),
        );
        if code == 0 || base == 0 {
            return;
        }
        let mut image = vec![0u8; len];
        self.shadow
            .read_exact_at(&mut image, 0)
            .expect("reading the simulated persistent image");
        for (i, was) in image.chunks(64).enumerate() {
            // SAFETY: line i lies inside the space's mapping (len bytes).
            let now =
                unsafe { std::slice::from_raw_parts((base + i * 64) as *const u8, was.len()) };
            if now != was && Unflushed::lands(code, i) {
                let _ = self.shadow.write_all_at(now, (i * 64) as u64);
            }
        }
    }

    fn die(&self) -> ! {
        let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let last = pending.iter().map(|p| p.2).max();
        let lands = |flush: u64| match self.control.unfenced.load(Ordering::Relaxed) {
            1 => true,
            2 => Some(flush) == last,
            _ => false,
        };
        for (off, line, flush) in pending.iter() {
            if lands(*flush) {
                let _ = self.shadow.write_all_at(line, *off);
            }
        }
        // SAFETY: the simulated power failure: this process stops here.
        unsafe { libc::raise(libc::SIGKILL) };
        unreachable!("SIGKILL returned");
    }

    fn dropped(&self, site: Site, fence: bool) -> bool {
        self.control.dropped.load(Ordering::Relaxed) == drop_code(Some(Dropped { site, fence }))
    }
}

pub(super) fn flush(site: Site, ptr: *const u8, len: usize) {
    let Some(s) = sim() else { return };
    s.step();
    if s.dropped(site, false) {
        return;
    }
    let base = s.base.load(Ordering::Relaxed);
    let flush = s.flushes.fetch_add(1, Ordering::Relaxed);
    let mut pending = s.pending.lock().unwrap_or_else(|e| e.into_inner());
    let mut line = (ptr as usize) & !63;
    while line < ptr as usize + len {
        let mut bytes = [0u8; 64];
        // SAFETY: a line inside the space's mapping (the flushed range).
        unsafe { std::ptr::copy_nonoverlapping(line as *const u8, bytes.as_mut_ptr(), 64) };
        pending.push(((line - base) as u64, bytes, flush));
        line += 64;
    }
}

pub(super) fn fence(site: Site) {
    let Some(s) = sim() else { return };
    s.step();
    if s.dropped(site, true) {
        return;
    }
    let mut pending = s.pending.lock().unwrap_or_else(|e| e.into_inner());
    for (off, line, _) in pending.drain(..) {
        // The image is a test's scratch file: a failed write is a failed
        // test, loudly.
        s.shadow
            .write_all_at(&line, off)
            .expect("writing the simulated persistent image");
    }
}

/// Kills the process at POINT of enqueue number `seq` if
/// `SKY_PVAS_CRASH_AT=POINT:SEQ` says so.
pub fn crash_point(name: &str, seq: u64) {
    static AT: OnceLock<Option<(String, u64)>> = OnceLock::new();
    let at = AT.get_or_init(|| {
        let spec = std::env::var("SKY_PVAS_CRASH_AT").ok()?;
        let (p, n) = spec.split_once(':')?;
        Some((p.to_string(), n.parse().ok()?))
    });
    if at.as_ref().is_some_and(|(p, n)| p == name && *n == seq) {
        // SAFETY: raising SIGKILL on ourselves: the point of the test.
        unsafe { libc::raise(libc::SIGKILL) };
    }
}
