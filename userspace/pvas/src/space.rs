//! Creating, attaching to and destroying a shared space.

use crate::layout::*;
use crate::liveness::SlotLock;
use crate::persist::PersistMode;
use crate::proc;
use crate::wait;
use crate::{files, hints, Error, Result};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Where spaces live unless told otherwise.
pub const DEFAULT_DIR: &str = "/dev/shm";
/// Spaces are placed in this otherwise unused part of the x86-64 user
/// address space (32-80 TiB), where neither the heap, PIE binaries nor
/// top-down mmap allocations land.
const PLACEMENT_START: u64 = 0x2000_0000_0000;
const PLACEMENT_END: u64 = 0x5000_0000_0000;

#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// Directory of the backing file (e.g. a DAX filesystem for PM).
    pub dir: PathBuf,
    pub max_members: u32,
    pub segment_size: u64,
    /// Fixed base address; by default one is derived from the name.
    pub base: Option<u64>,
    /// Mode 0660 instead of 0600: members of the file's group may attach
    /// (where only the group can write to `dir`, or if root owns the file:
    /// see docs/pvas.md).
    pub group_access: bool,
}

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions {
            dir: PathBuf::from(DEFAULT_DIR),
            max_members: 8,
            segment_size: 32 << 20,
            base: None,
            group_access: false,
        }
    }
}

/// A mapped space. `id` is this process's member ID, 0 if it only
/// administers the space (create, list, destroy) without being a member.
///
/// Threads: a `Space` (and the queues opened on it) is `Send` but not
/// `Sync` — one thread at a time, and it may move between threads. For
/// several threads, give each its own member ID with
/// [`Space::attach_inherited`].
///
/// ```compile_fail
/// fn shared_between_threads<T: Sync>() {}
/// shared_between_threads::<sky_pvas::Space>();
/// ```
pub struct Space {
    pub(crate) path: PathBuf,
    pub(crate) header: HeaderFixed,
    map: Arc<Mapping>,
    pub(crate) id: u32,
    /// This membership's epoch: the slot generation it claimed.
    pub(crate) generation: u32,
    /// The kernel-held proof of membership (see `liveness`).
    pub(crate) lock: Option<SlotLock>,
    /// The process that claimed the slot: a forked child's copy of the
    /// handle is not the member.
    pub(crate) holder_pid: u32,
    persist: PersistMode,
    eager_max: std::cell::Cell<usize>,
    /// Longest a blocking call waits (None: until its peer acts or goes).
    timeout: std::cell::Cell<Option<std::time::Duration>>,
    pub(crate) file: File,
}

/// The space's mapping in this process, shared by every handle that uses
/// it (`attach_inherited`), unmapped when the last one goes.
struct Mapping {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is process-wide memory; every access to shared
// fields goes through atomics.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what map_over mapped, once.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

pub fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "space name {name:?}: use 1-64 letters, digits, '-', '_' or '.', not starting with '.'"
        )))
    }
}

pub fn path_for(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{FILE_PREFIX}{name}"))
}

fn now_unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// A base derived from the name, so unrelated spaces rarely collide.
fn default_base(name: &str, total: u64, attempt: u64) -> u64 {
    let stride = round_up(total, 1 << 30);
    let slots = ((PLACEMENT_END - PLACEMENT_START) / stride).max(1);
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    PLACEMENT_START + ((hash.wrapping_add(attempt)) % slots) * stride
}

impl Space {
    /// Creates a space and its backing file. The file appears under its
    /// final name only once fully reserved and initialised, so a failed
    /// create leaves nothing behind. The creator is not a member.
    pub fn create(name: &str, opts: &CreateOptions) -> Result<Space> {
        validate_name(name)?;
        if opts.max_members == 0 || opts.max_members > MAX_MEMBERS {
            return Err(Error::Invalid(format!(
                "max members {} outside 1..={MAX_MEMBERS}",
                opts.max_members
            )));
        }
        check_segment_size(opts.segment_size, opts.max_members).map_err(Error::Invalid)?;
        let total = opts.segment_size * (opts.max_members as u64 + 1);
        let path = path_for(&opts.dir, name);
        let mode = if opts.group_access { 0o660 } else { 0o600 };
        // Unnamed until published (or under a random name nobody could
        // have planted anything at), and gone if dropped on an error.
        let tmp = files::TempFile::create(&opts.dir, &format!(".{FILE_PREFIX}{name}."), mode)
            .map_err(|e| Error::io(opts.dir.display(), e))?;
        let file = tmp.file();
        // Reserve every byte now: a full tmpfs fails here, not as a SIGBUS
        // in some member later.
        // SAFETY: fallocate on a file we own.
        if unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, total as libc::off_t) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(Error::io(
                format!("reserving {total} bytes for {}", path.display()),
                e,
            ));
        }
        // The range is reserved here and held until the file is mapped
        // over it: another thread choosing the same base meanwhile moves on.
        let reserved = match opts.base {
            Some(b) => Reservation::take(b, total)?,
            None => (0..16)
                .find_map(|a| Reservation::take(default_base(name, total, a), total).ok())
                .ok_or(Error::AddressInUse {
                    base: default_base(name, total, 0),
                    len: total,
                })?,
        };
        let base = reserved.base as u64;
        let header = HeaderFixed::new(
            opts.max_members,
            opts.segment_size,
            base,
            proc::my_pid(),
            now_unix_ns(),
        );
        // Validate what we are about to write exactly as attach will.
        HeaderFixed::parse(&header.to_bytes(), total).map_err(|e| Error::Invalid(e.to_string()))?;
        file.write_all_at(&header.to_bytes(), 0)
            .and_then(|_| file.write_all_at(&SPACE_ACTIVE.to_le_bytes(), FIXED_BYTES as u64))
            .and_then(|_| file.sync_all())
            .map_err(|e| Error::io(path.display(), e))?;
        // Publish under the final name; fails if the name exists.
        let file = tmp
            .publish(&path)
            .map_err(|e| Error::io(path.display(), e))?;
        hints::register(&path);
        Self::map_reserved(path, file, header, reserved)
    }

    /// Maps an existing space without joining it (for tools).
    pub fn open(path: &Path) -> Result<Space> {
        let (file, header) = Self::read_header(path)?;
        Self::map(path.to_path_buf(), file, header)
    }

    /// Maps a space and joins it as member `id`. A slot left by a dead
    /// process is reclaimed; one held by a live process is refused.
    pub fn attach(path: &Path, id: u32) -> Result<Space> {
        Self::attach_with(path, id, None)
    }

    fn attach_with(path: &Path, id: u32, inherited_lock: Option<i32>) -> Result<Space> {
        let (file, header) = Self::read_header(path)?;
        check_id(id, header.max_members)?;
        let mut space = Self::map(path.to_path_buf(), file, header)?;
        if space.destroyed() {
            return Err(Error::Destroyed);
        }
        let lock = match inherited_lock {
            Some(fd) => SlotLock::adopt(fd, &space.file, path, id)?,
            None => SlotLock::take(&space.file, path, id)?,
        };
        space.claim(id, lock);
        Ok(space)
    }

    /// Attaches as `SKY_PVAS_ID` to `SKY_PVAS_PATH`, holding the slot lock
    /// passed as `SKY_PVAS_LOCK_FD`, as set by `scx_sky pvas run`.
    pub fn attach_from_env() -> Result<Space> {
        let path = std::env::var_os("SKY_PVAS_PATH").ok_or_else(|| {
            Error::Invalid("SKY_PVAS_PATH is not set (start with scx_sky pvas run)".into())
        })?;
        let id = std::env::var("SKY_PVAS_ID")
            .ok()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| Error::Invalid("SKY_PVAS_ID is not set to a member ID".into()))?;
        let lock = match std::env::var("SKY_PVAS_LOCK_FD") {
            Err(_) => None,
            Ok(v) => Some(v.parse().map_err(|_| {
                Error::Invalid(format!("SKY_PVAS_LOCK_FD={v:?} is not a descriptor number"))
            })?),
        };
        Self::attach_with(Path::new(&path), id, lock)
    }

    /// Opens and parses a space's file, refusing one that is not a regular
    /// file, or that someone else could have planted or can read or write
    /// (see `files::space_file_refusal`).
    fn read_header(path: &Path) -> Result<(File, HeaderFixed)> {
        let file = files::open_space_file(path, true, &files::Trust::me())?;
        let header = read_header_of(&file, path)?;
        Ok((file, header))
    }

    fn map(path: PathBuf, file: File, header: HeaderFixed) -> Result<Space> {
        let reserved = Reservation::take(header.base, header.total_size)?;
        Self::map_reserved(path, file, header, reserved)
    }

    fn map_reserved(
        path: PathBuf,
        file: File,
        header: HeaderFixed,
        reserved: Reservation,
    ) -> Result<Space> {
        #[allow(unused_mut)]
        let (base, mut persist) = map_over(reserved, &file, &path)?;
        // Tests exercise every persistence path on tmpfs, and simulate
        // power loss; none of it is in a normal build.
        #[cfg(feature = "fault-injection")]
        {
            match std::env::var("SKY_PVAS_PERSIST").as_deref() {
                Ok("volatile") => persist = PersistMode::Volatile,
                Ok("msync") => persist = PersistMode::Msync,
                Ok("flush") => persist = PersistMode::Flush(crate::persist::best_flush()),
                _ => {}
            }
            if crate::persist::sim::attach(base, header.total_size as usize) {
                persist = PersistMode::Simulated;
            }
        }
        Ok(Space {
            path,
            header,
            map: Arc::new(Mapping {
                base,
                len: header.total_size as usize,
            }),
            id: 0,
            generation: 0,
            lock: None,
            holder_pid: 0,
            persist,
            eager_max: std::cell::Cell::new(8 * 1024),
            timeout: std::cell::Cell::new(None),
            file,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn id(&self) -> u32 {
        self.id
    }

    pub fn header(&self) -> &HeaderFixed {
        &self.header
    }

    pub fn persist_mode(&self) -> PersistMode {
        self.persist
    }

    /// Overrides the persistence mode detected at attach (e.g. to exercise
    /// msync on tmpfs).
    pub fn set_persist_mode(&mut self, mode: PersistMode) {
        self.persist = mode;
    }

    pub fn base(&self) -> *mut u8 {
        self.map.base
    }

    /// Another handle on this process's mapping of the space, not (yet) a
    /// member: `attach_inherited` claims an ID with it.
    pub(crate) fn share_mapping(&self) -> Result<Space> {
        Ok(Space {
            path: self.path.clone(),
            header: self.header,
            map: Arc::clone(&self.map),
            id: 0,
            generation: 0,
            lock: None,
            holder_pid: 0,
            persist: self.persist,
            eager_max: std::cell::Cell::new(self.eager_max.get()),
            timeout: std::cell::Cell::new(self.timeout.get()),
            file: self
                .file
                .try_clone()
                .map_err(|e| Error::io(self.path.display(), e))?,
        })
    }

    pub(crate) fn live(&self) -> &HeaderLive {
        // SAFETY: the control segment starts with HeaderFixed then, at
        // FIXED_BYTES (8-aligned), HeaderLive; both inside the mapping.
        unsafe { &*(self.map.base.add(FIXED_BYTES) as *const HeaderLive) }
    }

    pub(crate) fn slot(&self, id: u32) -> &MemberSlot {
        assert!(
            id >= 1 && id <= self.header.max_members,
            "member ID {id} out of range"
        );
        // SAFETY: the member table follows the header page; id is in range.
        unsafe { &*(self.map.base.add(HEADER_BYTES) as *const MemberSlot).add(id as usize) }
    }

    /// Start of member `id`'s segment: the same address in every member.
    pub fn segment(&self, id: u32) -> Result<*mut u8> {
        self.check_id(id)?;
        // SAFETY: id <= max_members, so the segment lies inside the mapping.
        Ok(unsafe {
            self.map
                .base
                .add((id as u64 * self.header.segment_size) as usize)
        })
    }

    pub(crate) fn check_id(&self, id: u32) -> Result<()> {
        check_id(id, self.header.max_members)
    }

    /// Export word `index` (0..EXPORT_WORDS) of member `id`: words members
    /// publish for each other (buffer addresses, list heads...). Any member
    /// may write any word: a value read here is a claim, not a fact.
    pub fn export_word(&self, id: u32, index: usize) -> Result<&std::sync::atomic::AtomicU64> {
        self.export(id)?
            .words
            .get(index)
            .ok_or_else(|| Error::Invalid(format!("export word {index} outside 0..{EXPORT_WORDS}")))
    }

    /// Member `id`'s export area, found from the ID alone.
    pub(crate) fn export(&self, id: u32) -> Result<&ExportArea> {
        // SAFETY: every segment starts with an ExportArea (zero is a valid
        // value for all its atomics and bytes).
        Ok(unsafe { &*(self.segment(id)? as *const ExportArea) })
    }

    pub(crate) fn my_export(&self) -> Result<&ExportArea> {
        if self.id == 0 {
            return Err(Error::Invalid("this handle is not a member".into()));
        }
        self.export(self.id)
    }

    /// Does `addr..addr+len` lie inside member `id`'s heap?
    pub fn in_segment(&self, id: u32, addr: u64, len: u64) -> bool {
        let Ok(seg) = self.segment(id) else {
            return false;
        };
        let start = seg as u64 + HEAP_START;
        let end = seg as u64 + self.header.segment_size;
        addr >= start && addr.checked_add(len).is_some_and(|e| e <= end)
    }

    /// Allocates `len` zeroed bytes aligned to `align` in this member's
    /// own segment, below its persistent queue areas; never freed (the
    /// heap goes with the membership).
    pub fn alloc(&self, len: usize, align: usize) -> Result<*mut u8> {
        let area = self.my_export()?;
        if !align.is_power_of_two() {
            return Err(Error::Invalid(format!(
                "alignment {align} is not a power of two"
            )));
        }
        let size = crate::pmq::durable_floor(self, self.id)?;
        let mut top = area.heap_top.load(Ordering::Relaxed);
        loop {
            // heap_top is in shared memory: any value must be survivable.
            let end = top
                .checked_next_multiple_of(align as u64)
                .and_then(|start| Some((start, start.checked_add(len as u64)?)))
                .filter(|&(start, e)| start >= HEAP_START && e <= size);
            let Some((start, end)) = end else {
                return Err(Error::OutOfSpace {
                    id: self.id,
                    wanted: len as u64,
                    left: size.saturating_sub(top),
                });
            };
            match area
                .heap_top
                .compare_exchange(top, end, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    // SAFETY: [start, end) is inside our segment, ours alone
                    // (a previous member's bytes may still be there).
                    unsafe {
                        let p = self.segment(self.id)?.add(start as usize);
                        std::ptr::write_bytes(p, 0, len);
                        return Ok(p);
                    }
                }
                Err(now) => top = now,
            }
        }
    }

    /// A zeroed byte buffer in this member's segment (one-copy receives
    /// must land in one). The buffer is a handle, not a `&mut [u8]` from
    /// `&self`: one owner in this process, borrowed mutably by whoever
    /// writes it, a receive included (peers write it only then).
    pub fn alloc_bytes(&self, len: usize) -> Result<SharedBuf<'_>> {
        let ptr = self.alloc(len.max(1), 64)?;
        Ok(SharedBuf {
            ptr,
            len,
            _space: std::marker::PhantomData,
        })
    }

    /// Leaves the space: the slot is freed for another process.
    pub fn detach(self) {
        drop(self);
    }

    pub fn destroyed(&self) -> bool {
        self.live().state.load(Ordering::Acquire) == SPACE_DESTROYED
    }

    /// Destroys the space: every member's waits fail with
    /// `Error::Destroyed`, and the backing file and registry entry go.
    /// Members keep their mapping (and memory) until they detach.
    pub fn destroy(self) -> Result<()> {
        let live = self.live();
        live.state.store(SPACE_DESTROYED, Ordering::Release);
        wait::wake(&live.wake);
        for id in 1..=self.header.max_members {
            let area = self.export(id)?;
            for mb in area.mailboxes.iter() {
                wait::wake(&mb.wake);
            }
            for q in area.send_queues.iter().chain(area.recv_queues.iter()) {
                wait::wake(&q.wake);
            }
        }
        std::fs::remove_file(&self.path).map_err(|e| Error::io(self.path.display(), e))?;
        hints::unregister(&self.path);
        Ok(())
    }

    /// Largest message sent through the eager bounce buffer; larger ones
    /// use the one-copy rendezvous.
    pub fn set_eager_max(&self, bytes: usize) -> Result<()> {
        if bytes > EAGER_CAP {
            return Err(Error::Invalid(format!(
                "eager size {bytes} exceeds the {EAGER_CAP}-byte buffer"
            )));
        }
        self.eager_max.set(bytes);
        Ok(())
    }

    pub fn eager_max(&self) -> usize {
        self.eager_max.get()
    }

    /// Bounds every blocking call (send, recv, enqueue, dequeue, flush,
    /// open): past `limit` it fails with `TimedOut`, leaving the call
    /// undone. None (the default) waits as long as the peer is alive.
    pub fn set_timeout(&self, limit: Option<std::time::Duration>) {
        self.timeout.set(limit);
    }

    pub fn timeout(&self) -> Option<std::time::Duration> {
        self.timeout.get()
    }
}

impl Drop for Space {
    fn drop(&mut self) {
        self.release();
        // The mapping goes with its last handle (Arc<Mapping>).
    }
}

fn check_id(id: u32, max_members: u32) -> Result<()> {
    if id == 0 || id > max_members {
        return Err(Error::Invalid(format!(
            "member ID {id} outside 1..={max_members}"
        )));
    }
    Ok(())
}

/// The space's address range, claimed in this process with an anonymous
/// MAP_FIXED_NOREPLACE mapping until the file is mapped over it.
///
/// Reserving first also makes MAP_SYNC possible: MAP_SHARED_VALIDATE
/// refuses MAP_FIXED_NOREPLACE (EOPNOTSUPP, it is not a legacy flag), so
/// asking for MAP_SYNC and "no replace" at once would silently lose
/// MAP_SYNC on every DAX mount; the file is mapped over our own claim with
/// MAP_FIXED instead.
struct Reservation {
    base: *mut libc::c_void,
    len: usize,
}

impl Reservation {
    fn take(base: u64, len: u64) -> Result<Reservation> {
        // SAFETY: an anonymous reservation that replaces nothing.
        let p = unsafe {
            libc::mmap(
                base as *mut libc::c_void,
                len as usize,
                libc::PROT_NONE,
                libc::MAP_PRIVATE
                    | libc::MAP_ANONYMOUS
                    | libc::MAP_NORESERVE
                    | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EEXIST) {
                return Err(Error::AddressInUse { base, len });
            }
            return Err(Error::io(format!("reserving {base:#x}+{len:#x}"), e));
        }
        let r = Reservation {
            base: p,
            len: len as usize,
        };
        if p as u64 != base {
            // A kernel without MAP_FIXED_NOREPLACE took the address as a
            // hint (the reservation is dropped, and unmapped, here).
            return Err(Error::AddressInUse { base, len });
        }
        Ok(r)
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // SAFETY: our own reservation (not yet replaced by the file).
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// Maps the file over `reserved`, with MAP_SYNC where the filesystem is
/// DAX, and picks the persistence mode to match.
fn map_over(reserved: Reservation, file: &File, path: &Path) -> Result<(*mut u8, PersistMode)> {
    let fd = file.as_raw_fd();

    // SAFETY: replaces only our own reservation, with the file.
    let over = |flags| unsafe {
        libc::mmap(
            reserved.base,
            reserved.len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags | libc::MAP_FIXED,
            fd,
            0,
        )
    };
    let (p, mode) = crate::persist::map_durably(file, over);
    if p == libc::MAP_FAILED {
        // The reservation is still in place and unmapped when dropped.
        return Err(Error::io(
            format!("mapping {}", path.display()),
            std::io::Error::last_os_error(),
        ));
    }
    // The file replaced the reservation: it is the Mapping's to unmap now.
    std::mem::forget(reserved);
    Ok((p as *mut u8, mode))
}

/// Bytes in this member's segment, from [`Space::alloc_bytes`]; valid as
/// long as the `Space` is (the lifetime ties them).
pub struct SharedBuf<'a> {
    ptr: *mut u8,
    len: usize,
    _space: std::marker::PhantomData<&'a Space>,
}

impl std::ops::Deref for SharedBuf<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: our own allocation inside the mapping, alive for 'a.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl std::ops::DerefMut for SharedBuf<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for deref; &mut self makes this the only borrow in
        // this process, and peers write only into a buffer posted by a
        // receive, which holds that borrow.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}
