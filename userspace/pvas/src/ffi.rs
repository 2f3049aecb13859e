//! The C ABI (include/sky_pvas.h). Functions return 0 or a count on
//! success and a negated errno on failure (NULL for constructors); the
//! message of the last failure on this thread is sky_pvas_last_error().
//! No Rust panic crosses the boundary.
//!
//! Safety, for every function here: pointers are NULL or valid for the
//! lengths given, strings are NUL-terminated, and handles come from this
//! library and are not used after they are freed (include/sky_pvas.h).
#![allow(clippy::missing_safety_doc)]

use crate::layout::EXPORT_WORDS;
use crate::pmq::remote::{self, Peer, Role};
use crate::pmq::{Mode, PmQueue, QueueSpec};
use crate::space::{path_for, CreateOptions};
use crate::{Error, Space};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::net::SocketAddrV4;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Duration;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(msg: String) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// Runs `f`, turning errors and panics into a negated errno.
fn guard(f: impl FnOnce() -> Result<i64, Error>) -> i64 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            set_error(e.to_string());
            -(e.errno() as i64)
        }
        Err(_) => {
            set_error("internal error (panic) in sky_pvas".into());
            -(libc::EIO as i64)
        }
    }
}

fn guard_ptr<T>(f: impl FnOnce() -> Result<*mut T, Error>) -> *mut T {
    let mut out = std::ptr::null_mut();
    guard(|| {
        out = f()?;
        Ok(0)
    });
    out
}

unsafe fn str_arg<'a>(p: *const c_char, what: &str) -> Result<&'a str, Error> {
    if p.is_null() {
        return Err(Error::Invalid(format!("{what} is NULL")));
    }
    CStr::from_ptr(p)
        .to_str()
        .map_err(|_| Error::Invalid(format!("{what} is not UTF-8")))
}

/// The caller's `len` bytes at `buf` (NULL only with `len` 0).
unsafe fn bytes_in<'a>(buf: *const c_void, len: usize) -> Result<&'a [u8], Error> {
    match (buf.is_null(), len) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(Error::Invalid("buffer is NULL".into())),
        (false, _) => Ok(std::slice::from_raw_parts(buf as *const u8, len)),
    }
}

/// The caller's `cap` writable bytes at `buf` (NULL only with `cap` 0).
unsafe fn bytes_out<'a>(buf: *mut c_void, cap: usize) -> Result<&'a mut [u8], Error> {
    match (buf.is_null(), cap) {
        (_, 0) => Ok(&mut []),
        (true, _) => Err(Error::Invalid("buffer is NULL".into())),
        (false, _) => Ok(std::slice::from_raw_parts_mut(buf as *mut u8, cap)),
    }
}

unsafe fn space<'a>(s: *const Space) -> Result<&'a Space, Error> {
    s.as_ref()
        .ok_or_else(|| Error::Invalid("space handle is NULL".into()))
}

/// What C sees as `sky_pvas_queue` (opaque).
pub struct QueueHandle {
    queue: PmQueue<'static>,
}

#[no_mangle]
pub extern "C" fn sky_pvas_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Creates a space named `name` in `dir` (NULL: /dev/shm) and returns a
/// handle on it that is not a member (sky_pvas_path_of gives its path;
/// sky_pvas_destroy_space or sky_pvas_detach ends it).
#[no_mangle]
pub unsafe extern "C" fn sky_pvas_create(
    name: *const c_char,
    dir: *const c_char,
    max_members: u32,
    segment_size: u64,
    group_access: c_int,
) -> *mut Space {
    guard_ptr(|| {
        let name = str_arg(name, "name")?;
        let mut opts = CreateOptions {
            max_members,
            segment_size,
            group_access: group_access != 0,
            ..Default::default()
        };
        if !dir.is_null() {
            opts.dir = PathBuf::from(str_arg(dir, "dir")?);
        }
        Ok(Box::into_raw(Box::new(Space::create(name, &opts)?)))
    })
}

/// Writes the path of `s`'s backing file, NUL-terminated, to `out`.
#[no_mangle]
pub unsafe extern "C" fn sky_pvas_path_of(s: *const Space, out: *mut c_char, cap: usize) -> c_int {
    guard(|| {
        let p = space(s)?.path().to_string_lossy().into_owned();
        write_c_string(&p, out, cap)
    }) as c_int
}

unsafe fn write_c_string(text: &str, out: *mut c_char, cap: usize) -> Result<i64, Error> {
    if out.is_null() || text.len() + 1 > cap {
        return Err(Error::Invalid(format!(
            "the buffer for {text:?} is NULL or smaller than {} bytes",
            text.len() + 1
        )));
    }
    std::ptr::copy_nonoverlapping(text.as_ptr(), out as *mut u8, text.len());
    *out.add(text.len()) = 0;
    Ok(0)
}

#[no_mangle]
pub unsafe extern "C" fn sky_pvas_path(
    dir: *const c_char,
    name: *const c_char,
    out: *mut c_char,
    cap: usize,
) -> c_int {
    guard(|| {
        let dir = if dir.is_null() {
            crate::space::DEFAULT_DIR
        } else {
            str_arg(dir, "dir")?
        };
        let p = path_for(Path::new(dir), str_arg(name, "name")?);
        write_c_string(&p.to_string_lossy(), out, cap)
    }) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn sky_pvas_attach(path: *const c_char, id: u32) -> *mut Space {
    guard_ptr(|| {
        Ok(Box::into_raw(Box::new(Space::attach(
            Path::new(str_arg(path, "path")?),
            id,
        )?)))
    })
}

#[no_mangle]
pub extern "C" fn sky_pvas_attach_env() -> *mut Space {
    guard_ptr(|| Ok(Box::into_raw(Box::new(Space::attach_from_env()?))))
}

/// Leaves the space and frees the handle (close its queues first).
#[no_mangle]
pub unsafe extern "C" fn sky_pvas_detach(s: *mut Space) {
    if !s.is_null() {
        drop(Box::from_raw(s));
    }
}

/// Joins as member `id` through the mapping of `s` this process has — in a
/// child forked by a member, the inherited one (the seed's pvas_fork).
#[no_mangle]
pub unsafe extern "C" fn sky_pvas_attach_inherited(s: *const Space, id: u32) -> *mut Space {
    guard_ptr(|| Ok(Box::into_raw(Box::new(space(s)?.attach_inherited(id)?))))
}

/// Destroys the space `s` belongs to (member or not) and frees `s`.
#[no_mangle]
pub unsafe extern "C" fn sky_pvas_destroy_space(s: *mut Space) -> c_int {
    if s.is_null() {
        return guard(|| Err(Error::Invalid("space handle is NULL".into()))) as c_int;
    }
    let owned = Box::from_raw(s);
    guard(move || owned.destroy().map(|()| 0)) as c_int
}

/// Bounds every blocking call on `s` to `ms` milliseconds (0: no bound).
#[no_mangle]
pub unsafe extern "C" fn sky_pvas_set_timeout(s: *const Space, ms: u64) -> c_int {
    guard(|| {
        let limit = (ms != 0).then(|| std::time::Duration::from_millis(ms));
        space(s)?.set_timeout(limit);
        Ok(0)
    }) as c_int
}

/// Tells the scheduler this member is memory-bound (`on` != 0) or not.
#[no_mangle]
pub unsafe extern "C" fn sky_pvas_set_memory_bound(s: *const Space, on: c_int) -> c_int {
    guard(|| {
        space(s)?.set_memory_bound(on != 0)?;
        Ok(0)
    }) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn sky_pvas_destroy(path: *const c_char) -> c_int {
    guard(|| {
        Space::open(Path::new(str_arg(path, "path")?))?.destroy()?;
        Ok(0)
    }) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn sky_pvas_alive(s: *const Space, id: u32) -> c_int {
    guard(|| {
        let sp = space(s)?;
        sp.segment(id)?;
        Ok(sp.alive(id) as i64)
    }) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn sky_pvas_id(s: *const Space) -> u32 {
    s.as_ref().map_or(0, Space::id)
}

#[no_mangle]
pub unsafe extern "C" fn sky_pvas_segment(s: *const Space, id: u32) -> *mut c_void {
    guard_ptr(|| Ok(space(s)?.segment(id)? as *mut c_void))
}

/// The EXPORT_WORDS words of member `id`'s export area.
#[no_mangle]
pub unsafe extern "C" fn sky_pvas_export_words(s: *const Space, id: u32) -> *mut u64 {
    const _: () = assert!(
        EXPORT_WORDS == 32,
        "keep SKY_PVAS_EXPORT_WORDS in sky_pvas.h in step"
    );
    guard_ptr(|| Ok(space(s)?.export(id)?.words.as_ptr() as *mut u64))
}

#[no_mangle]
pub unsafe extern "C" fn sky_pvas_alloc(s: *const Space, len: usize, align: usize) -> *mut c_void {
    guard_ptr(|| Ok(space(s)?.alloc(len, align)? as *mut c_void))
}

#[no_mangle]
pub unsafe extern "C" fn sky_pvas_set_eager_max(s: *const Space, bytes: usize) -> c_int {
    guard(|| space(s)?.set_eager_max(bytes).map(|_| 0)) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn sky_pvas_send(
    s: *const Space,
    to: u32,
    buf: *const c_void,
    len: usize,
) -> c_int {
    guard(|| {
        let data = bytes_in(buf, len)?;
        space(s)?.send(to, data).map(|_| 0)
    }) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn sky_pvas_recv(
    s: *const Space,
    from: u32,
    buf: *mut c_void,
    cap: usize,
) -> i64 {
    guard(|| {
        let out = bytes_out(buf, cap)?;
        Ok(space(s)?.recv(from, out)? as i64)
    })
}

fn queue_mode(mode: c_int) -> Result<Mode, Error> {
    match mode {
        0 => Ok(Mode::Push),
        1 => Ok(Mode::Pull),
        m => Err(Error::Invalid(format!(
            "queue mode {m} is neither PUSH (0) nor PULL (1)"
        ))),
    }
}

unsafe fn queue_spec(
    mode: c_int,
    sender: u32,
    receiver: u32,
    slot: u32,
    entry_size: u32,
    entry_count: u32,
) -> Result<QueueSpec, Error> {
    Ok(QueueSpec {
        mode: queue_mode(mode)?,
        sender,
        receiver,
        slot,
        entry_size,
        entry_count,
    })
}

/// `create`: the owner makes the queue area; else opens the owner's.
#[no_mangle]
pub unsafe extern "C" fn sky_pvas_queue_open(
    s: *const Space,
    create: c_int,
    mode: c_int,
    sender: u32,
    receiver: u32,
    slot: u32,
    entry_size: u32,
    entry_count: u32,
) -> *mut QueueHandle {
    guard_ptr(|| {
        // The C caller promises to close queues before detaching the space.
        let sp: &'static Space = &*(space(s)? as *const Space);
        let spec = queue_spec(mode, sender, receiver, slot, entry_size, entry_count)?;
        let queue = if create != 0 {
            PmQueue::create(sp, spec)?
        } else {
            PmQueue::open(sp, spec)?
        };
        Ok(Box::into_raw(Box::new(QueueHandle { queue })))
    })
}

/// A queue between machines over RDMA: `listen` non-zero waits for the
/// peer at `addr` ("IP:PORT", the IP naming the RDMA device), else
/// connects to it there; `area` is the owner's queue area (a Device DAX
/// namespace for persistence) or the pull receiver's state, NULL for a
/// push sender. `fresh` starts a new epoch at the owner.
#[no_mangle]
pub unsafe extern "C" fn sky_pvas_queue_connect(
    mode: c_int,
    role: c_int,
    listen: c_int,
    addr: *const c_char,
    area: *const c_char,
    fresh: c_int,
    entry_size: u32,
    entry_count: u32,
) -> *mut QueueHandle {
    guard_ptr(|| {
        let mode = queue_mode(mode)?;
        let role = match role {
            0 => Role::Sender,
            1 => Role::Receiver,
            r => {
                return Err(Error::Invalid(format!(
                    "queue role {r} is neither SENDER (0) nor RECEIVER (1)"
                )))
            }
        };
        let text = str_arg(addr, "peer address")?;
        let at: SocketAddrV4 = text
            .parse()
            .map_err(|_| Error::Invalid(format!("peer address {text:?} is not IPv4 IP:PORT")))?;
        let peer = if listen != 0 {
            Peer::Listen(at)
        } else {
            Peer::Connect(at)
        };
        let area = if area.is_null() {
            PathBuf::new()
        } else {
            PathBuf::from(str_arg(area, "queue area")?)
        };
        let spec = remote::Spec {
            mode,
            entry_size,
            entry_count,
            plain_counters: false,
        };
        if area.as_os_str().is_empty() && !(mode == Mode::Push && role == Role::Sender) {
            return Err(Error::Invalid(
                "only a push sender keeps no queue area or state: give its path".into(),
            ));
        }
        let queue = PmQueue::connect(spec, role, peer, &area, fresh != 0)?;
        Ok(Box::into_raw(Box::new(QueueHandle { queue })))
    })
}

/// Bounds every wait of a queue between machines for its peer (0: wait
/// while the peer is there). A local queue's waits follow its space's
/// (sky_pvas_set_timeout).
#[no_mangle]
pub unsafe extern "C" fn sky_pvas_queue_set_timeout(q: *const QueueHandle, ms: u64) -> c_int {
    guard(|| {
        let remote = queue(q)?.remote().ok_or_else(|| {
            Error::Invalid(
                "a local queue's waits follow its space's timeout (sky_pvas_set_timeout)".into(),
            )
        })?;
        remote.set_timeout((ms > 0).then(|| Duration::from_millis(ms)));
        Ok(0)
    }) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn sky_pvas_queue_close(q: *mut QueueHandle) {
    if !q.is_null() {
        drop(Box::from_raw(q));
    }
}

unsafe fn queue<'a>(q: *const QueueHandle) -> Result<&'a PmQueue<'static>, Error> {
    q.as_ref()
        .map(|q| &q.queue)
        .ok_or_else(|| Error::Invalid("queue handle is NULL".into()))
}

/// Returns the message's sequence number (from 1) once it is durable.
#[no_mangle]
pub unsafe extern "C" fn sky_pvas_enqueue(
    q: *const QueueHandle,
    buf: *const c_void,
    len: usize,
) -> i64 {
    guard(|| {
        let data = bytes_in(buf, len)?;
        Ok(queue(q)?.enqueue(data)? as i64)
    })
}

/// Where the queue stands (see PmQueue::position): messages durably in it
/// and consumed, from the first.
#[no_mangle]
pub unsafe extern "C" fn sky_pvas_queue_position(
    q: *const QueueHandle,
    enqueued: *mut u64,
    consumed: *mut u64,
) -> c_int {
    guard(|| {
        if enqueued.is_null() || consumed.is_null() {
            return Err(Error::Invalid("position outputs must not be NULL".into()));
        }
        let p = queue(q)?.position()?;
        *enqueued = p.enqueued;
        *consumed = p.consumed;
        Ok(0)
    }) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn sky_pvas_dequeue(
    q: *const QueueHandle,
    buf: *mut c_void,
    cap: usize,
) -> i64 {
    guard(|| {
        let out = bytes_out(buf, cap)?;
        Ok(queue(q)?.dequeue(out)? as i64)
    })
}

#[no_mangle]
pub unsafe extern "C" fn sky_pvas_flush(q: *const QueueHandle) -> c_int {
    guard(|| queue(q)?.flush().map(|_| 0)) as c_int
}
