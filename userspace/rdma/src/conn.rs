//! One reliable connection (RC) made by RDMA CM, the regions registered on
//! it, and the operations the queue is made of, each waited for.
//!
//! Both ends go through an [`Endpoint`]: the client's from
//! [`Endpoint::resolve`], the server's from [`Listener::request`]. Regions
//! are registered on the endpoint before it connects, so the connection
//! data each side sends (RDMA CM private data) can name them.

use crate::device::Caps;
use crate::sys;
use crate::{Error, Result};
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a region lets the peer do (`ibv_access_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access(u32);

impl Access {
    /// The local side writes into it (reads land there).
    pub const LOCAL_WRITE: Access = Access(sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0);
    pub const REMOTE_WRITE: Access = Access(sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0);
    pub const REMOTE_READ: Access = Access(sys::ibv_access_flags::IBV_ACCESS_REMOTE_READ.0);
    /// ATOMIC WRITE into it.
    pub const REMOTE_ATOMIC: Access = Access(sys::ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC.0);
    pub const FLUSH_GLOBAL: Access = Access(sys::ibv_access_flags::IBV_ACCESS_FLUSH_GLOBAL.0);
    /// Registering it fails unless the memory is persistent (Device DAX).
    pub const FLUSH_PERSISTENT: Access =
        Access(sys::ibv_access_flags::IBV_ACCESS_FLUSH_PERSISTENT.0);
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, other: Access) -> Access {
        Access(self.0 | other.0)
    }
}

/// How far a FLUSH makes what was written reach at the responder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// Visible to the responder's CPUs (out of the NIC's buffers).
    Global,
    /// In the persistence domain: survives a power loss.
    Persistent,
}

/// A region of the peer, as its connection data names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteRegion {
    pub addr: u64,
    pub rkey: u32,
    pub len: u64,
}

impl RemoteRegion {
    pub const BYTES: usize = 20;

    pub fn to_bytes(self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        b[..8].copy_from_slice(&self.addr.to_le_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_le_bytes());
        b[12..].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    /// A region a peer named: checked, as anything a peer sends.
    pub fn new(addr: u64, rkey: u32, len: u64) -> Result<RemoteRegion> {
        if addr.checked_add(len).is_none() {
            return Err(Error::Peer(format!(
                "a region of {len} bytes at {addr:#x} wraps around"
            )));
        }
        Ok(RemoteRegion { addr, rkey, len })
    }

    /// Read from a peer's bytes: checked, as anything a peer sends.
    pub fn from_bytes(b: &[u8]) -> Result<RemoteRegion> {
        if b.len() < Self::BYTES {
            return Err(Error::Peer(format!(
                "{} bytes where a region takes {}",
                b.len(),
                Self::BYTES
            )));
        }
        RemoteRegion::new(
            u64::from_le_bytes(b[..8].try_into().unwrap()),
            u32::from_le_bytes(b[8..12].try_into().unwrap()),
            u64::from_le_bytes(b[12..20].try_into().unwrap()),
        )
    }

    /// `[offset, offset + len)` inside the region, or why not.
    fn span(&self, offset: u64, len: u64) -> Result<u64> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(self.addr + offset),
            _ => Err(Error::Invalid(format!(
                "{len} bytes at {offset} do not fit the peer's region of {}",
                self.len
            ))),
        }
    }
}

/// The verbs objects of one connection, released in order when the last
/// user (the connection or a region) goes.
struct Shared {
    id: *mut sys::rdma_cm_id,
    pd: *mut sys::ibv_pd,
    cq: *mut sys::ibv_cq,
    qpx: *mut sys::ibv_qp_ex,
    caps: Caps,
    rd_atomic: u8,
    next_wr: AtomicU64,
    connected: std::sync::atomic::AtomicBool,
}

// SAFETY: verbs objects may be used from any thread; posting and polling
// are serialised by `Connection`'s &mut-free design (one op at a time, see
// `wait`), as libibverbs requires per QP for the extended API.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: each object was created by this struct, is destroyed
        // once, QP before CQ before PD before the id.
        unsafe {
            if self.connected.load(Ordering::Relaxed) {
                sys::rdma_disconnect(self.id);
            }
            if !(*self.id).qp.is_null() {
                sys::rdma_destroy_qp(self.id);
            }
            if !self.cq.is_null() {
                sys::ibv_destroy_cq(self.cq);
            }
            if !self.pd.is_null() {
                sys::ibv_dealloc_pd(self.pd);
            }
            sys::rdma_destroy_id(self.id);
        }
    }
}

/// A registered region of this side's memory.
pub struct Region {
    mr: *mut sys::ibv_mr,
    _owner: Arc<Shared>,
}

// SAFETY: an MR handle is usable from any thread.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Region {
    /// What the peer needs to reach it.
    pub fn remote(&self) -> RemoteRegion {
        // SAFETY: mr is a live registration.
        let mr = unsafe { &*self.mr };
        RemoteRegion {
            addr: mr.addr as u64,
            rkey: mr.rkey,
            len: mr.length as u64,
        }
    }

    fn local(&self, offset: usize, len: usize) -> Result<(u32, u64)> {
        // SAFETY: mr is a live registration.
        let mr = unsafe { &*self.mr };
        match offset.checked_add(len) {
            Some(end) if end <= mr.length => Ok((mr.lkey, mr.addr as u64 + offset as u64)),
            _ => Err(Error::Invalid(format!(
                "{len} bytes at {offset} do not fit a local region of {}",
                mr.length
            ))),
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: registered by `register`, deregistered once.
        unsafe { sys::ibv_dereg_mr(self.mr) };
    }
}

/// A connection being made: the QP exists, regions can be registered.
pub struct Endpoint {
    shared: Arc<Shared>,
    /// The server's: what the client sent with its request.
    request_data: Vec<u8>,
    passive: bool,
}

/// How long address and route resolution may take.
const RESOLVE_MS: i32 = 5000;
/// How long one operation may wait for its completion.
const OP_TIMEOUT: Duration = Duration::from_secs(30);

fn sockaddr(addr: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*addr.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

fn new_id() -> Result<*mut sys::rdma_cm_id> {
    let mut id = std::ptr::null_mut();
    // SAFETY: a synchronous id (no event channel): the CM calls below block.
    let ret = unsafe {
        sys::rdma_create_id(
            std::ptr::null_mut(),
            &mut id,
            std::ptr::null_mut(),
            sys::rdma_port_space::RDMA_PS_TCP,
        )
    };
    if ret != 0 || id.is_null() {
        let e = std::io::Error::last_os_error();
        return Err(Error::Unavailable(format!("rdma_create_id: {e}")));
    }
    Ok(id)
}

impl Endpoint {
    /// The client's end, towards `server`.
    pub fn resolve(server: SocketAddrV4) -> Result<Endpoint> {
        let id = new_id()?;
        let mut dst = sockaddr(server);
        // SAFETY: id is a fresh synchronous id, dst a valid address.
        let ret = unsafe {
            sys::rdma_resolve_addr(
                id,
                std::ptr::null_mut(),
                &mut dst as *mut _ as *mut _,
                RESOLVE_MS,
            )
        };
        if ret != 0 {
            let e = Error::ret("rdma_resolve_addr", ret);
            // SAFETY: nothing else holds the id.
            unsafe { sys::rdma_destroy_id(id) };
            return Err(e);
        }
        // SAFETY: the address is resolved.
        let ret = unsafe { sys::rdma_resolve_route(id, RESOLVE_MS) };
        if ret != 0 {
            let e = Error::ret("rdma_resolve_route", ret);
            // SAFETY: nothing else holds the id.
            unsafe { sys::rdma_destroy_id(id) };
            return Err(e);
        }
        Self::on(id, Vec::new(), false)
    }

    /// The protection domain, completion queue and extended QP on a
    /// resolved (or requested) id.
    fn on(id: *mut sys::rdma_cm_id, request_data: Vec<u8>, passive: bool) -> Result<Endpoint> {
        let mut shared = Shared {
            id,
            pd: std::ptr::null_mut(),
            cq: std::ptr::null_mut(),
            qpx: std::ptr::null_mut(),
            caps: Caps::default(),
            rd_atomic: 1,
            next_wr: AtomicU64::new(1),
            connected: false.into(),
        };
        // SAFETY: the id is resolved, so it has a device context; every
        // object made is kept in `shared`, whose Drop releases it.
        unsafe {
            let context = (*id).verbs;
            let mut attr: sys::ibv_device_attr_ex = std::mem::zeroed();
            let input: sys::ibv_query_device_ex_input = std::mem::zeroed();
            let ret = sys::ibv_query_device_ex(context, &input, &mut attr);
            if ret != 0 {
                return Err(Error::ret("ibv_query_device_ex", ret));
            }
            shared.caps = Caps::from_flags(attr.device_cap_flags_ex);
            let rd = attr
                .orig_attr
                .max_qp_rd_atom
                .min(attr.orig_attr.max_qp_init_rd_atom)
                .clamp(1, 16);
            shared.rd_atomic = rd as u8;
            shared.pd = sys::ibv_alloc_pd(context);
            if shared.pd.is_null() {
                return Err(Error::last("ibv_alloc_pd"));
            }
            shared.cq =
                sys::ibv_create_cq(context, 64, std::ptr::null_mut(), std::ptr::null_mut(), 0);
            if shared.cq.is_null() {
                return Err(Error::last("ibv_create_cq"));
            }
            let mut ops = sys::ibv_qp_create_send_ops_flags::IBV_QP_EX_WITH_RDMA_WRITE
                | sys::ibv_qp_create_send_ops_flags::IBV_QP_EX_WITH_RDMA_READ;
            if shared.caps.flush_global || shared.caps.flush_persistent {
                ops |= sys::ibv_qp_create_send_ops_flags::IBV_QP_EX_WITH_FLUSH;
            }
            if shared.caps.atomic_write {
                ops |= sys::ibv_qp_create_send_ops_flags::IBV_QP_EX_WITH_ATOMIC_WRITE;
            }
            let mut init: sys::ibv_qp_init_attr_ex = std::mem::zeroed();
            init.send_cq = shared.cq;
            init.recv_cq = shared.cq;
            init.qp_type = sys::ibv_qp_type::IBV_QPT_RC;
            init.cap.max_send_wr = 32;
            init.cap.max_recv_wr = 1;
            init.cap.max_send_sge = 1;
            init.cap.max_recv_sge = 1;
            init.pd = shared.pd;
            init.comp_mask = (sys::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD
                | sys::ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
                .0;
            init.send_ops_flags = ops.0 as u64;
            let ret = sys::rdma_create_qp_ex(id, &mut init);
            if ret != 0 {
                return Err(Error::ret("rdma_create_qp_ex", ret));
            }
            shared.qpx = sys::ibv_qp_to_qp_ex((*id).qp);
            if shared.qpx.is_null() {
                return Err(Error::Invalid("the QP has no extended interface".into()));
            }
        }
        Ok(Endpoint {
            shared: Arc::new(shared),
            request_data,
            passive,
        })
    }

    /// What the device this endpoint uses can do.
    pub fn caps(&self) -> Caps {
        self.shared.caps
    }

    /// The client's connection data (the server's endpoint only).
    pub fn request_data(&self) -> &[u8] {
        &self.request_data
    }

    /// Registers `len` bytes at `ptr` with `access`.
    ///
    /// # Safety
    /// The memory stays mapped, and is not freed, while the region lives;
    /// the peer may write it at any time if `access` lets it.
    pub unsafe fn register(&self, ptr: *mut u8, len: usize, access: Access) -> Result<Region> {
        register(&self.shared, ptr, len, access)
    }

    /// Connects (client) or accepts (server), sending `data` (at most 56
    /// bytes from a client, 196 from a server, as RDMA CM carries them).
    /// Returns the connection and what the peer sent.
    pub fn connect(self, data: &[u8]) -> Result<(Connection, Vec<u8>)> {
        let cap = if self.passive { 196 } else { 56 };
        if data.len() > cap {
            return Err(Error::Invalid(format!(
                "{} bytes of connection data, {cap} at most",
                data.len()
            )));
        }
        // SAFETY: zero is valid for the C struct; data outlives the call.
        let mut param: sys::rdma_conn_param = unsafe { std::mem::zeroed() };
        param.private_data = data.as_ptr() as *const _;
        param.private_data_len = data.len() as u8;
        param.responder_resources = self.shared.rd_atomic;
        param.initiator_depth = self.shared.rd_atomic;
        param.retry_count = 7;
        param.rnr_retry_count = 7;
        let id = self.shared.id;
        // SAFETY: id has its QP; both calls block until established or
        // refused (synchronous id).
        let ret = unsafe {
            if self.passive {
                sys::rdma_accept(id, &mut param)
            } else {
                sys::rdma_connect(id, &mut param)
            }
        };
        if ret != 0 {
            return Err(Error::ret(
                if self.passive {
                    "rdma_accept"
                } else {
                    "rdma_connect"
                },
                ret,
            ));
        }
        self.shared.connected.store(true, Ordering::Relaxed);
        // The server's accept data came with the established event.
        let peer = if self.passive {
            self.request_data.clone()
        } else {
            // SAFETY: a synchronous id keeps its last event until the next call.
            unsafe { event_data(id) }
        };
        allow_flush(&self.shared)?;
        Ok((
            Connection {
                shared: self.shared,
            },
            peer,
        ))
    }
}

/// The private data of the id's last event.
///
/// # Safety
/// `id` is a synchronous id.
unsafe fn event_data(id: *mut sys::rdma_cm_id) -> Vec<u8> {
    let event = (*id).event;
    if event.is_null() {
        return Vec::new();
    }
    let conn = (*event).param.conn;
    if conn.private_data.is_null() {
        return Vec::new();
    }
    std::slice::from_raw_parts(
        conn.private_data as *const u8,
        conn.private_data_len as usize,
    )
    .to_vec()
}

/// RDMA CM opens a connected QP to remote WRITE, READ and atomics only;
/// FLUSH needs the QP's access to include it too (else the responder
/// answers "remote invalid request"). The regions still decide what each
/// may do.
fn allow_flush(shared: &Shared) -> Result<()> {
    if !(shared.caps.flush_global || shared.caps.flush_persistent) {
        return Ok(());
    }
    // SAFETY: the QP is connected (RTS); zero is valid for the C structs.
    unsafe {
        let qp = (*shared.id).qp;
        let mut attr: sys::ibv_qp_attr = std::mem::zeroed();
        let mut init: sys::ibv_qp_init_attr = std::mem::zeroed();
        let mask = sys::ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS.0 as i32;
        let ret = sys::ibv_query_qp(qp, &mut attr, mask, &mut init);
        if ret != 0 {
            return Err(Error::ret("ibv_query_qp", ret));
        }
        if shared.caps.flush_global {
            attr.qp_access_flags |= Access::FLUSH_GLOBAL.0;
        }
        if shared.caps.flush_persistent {
            attr.qp_access_flags |= Access::FLUSH_PERSISTENT.0;
        }
        let ret = sys::ibv_modify_qp(qp, &mut attr, mask);
        if ret != 0 {
            return Err(Error::ret("ibv_modify_qp (flush access)", ret));
        }
    }
    Ok(())
}

fn register(shared: &Arc<Shared>, ptr: *mut u8, len: usize, access: Access) -> Result<Region> {
    // SAFETY: the caller keeps the memory mapped while the region lives.
    let mr = unsafe { sys::ibv_reg_mr(shared.pd, ptr as *mut _, len, access.0 as i32) };
    if mr.is_null() {
        return Err(Error::last("ibv_reg_mr"));
    }
    Ok(Region {
        mr,
        _owner: shared.clone(),
    })
}

/// The server's listening id.
pub struct Listener {
    id: *mut sys::rdma_cm_id,
}

// SAFETY: a listening id may be used from any thread.
unsafe impl Send for Listener {}

impl Listener {
    /// Listens on `addr` (its IP names the device).
    pub fn bind(addr: SocketAddrV4) -> Result<Listener> {
        let id = new_id()?;
        let listener = Listener { id };
        let mut sa = sockaddr(addr);
        // SAFETY: a fresh id and a valid address.
        let ret = unsafe { sys::rdma_bind_addr(id, &mut sa as *mut _ as *mut _) };
        if ret != 0 {
            return Err(Error::ret("rdma_bind_addr", ret));
        }
        // SAFETY: bound above.
        let ret = unsafe { sys::rdma_listen(id, 8) };
        if ret != 0 {
            return Err(Error::ret("rdma_listen", ret));
        }
        Ok(listener)
    }

    /// Waits for the next connection request; its endpoint, with what the
    /// client sent.
    pub fn request(&self) -> Result<Endpoint> {
        let mut id = std::ptr::null_mut();
        // SAFETY: a listening synchronous id; blocks for a request.
        let ret = unsafe { sys::rdma_get_request(self.id, &mut id) };
        if ret != 0 || id.is_null() {
            return Err(Error::ret("rdma_get_request", ret));
        }
        // SAFETY: the request's id holds its connect event.
        let data = unsafe { event_data(id) };
        Endpoint::on(id, data, true)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // SAFETY: created by `bind`, destroyed once.
        unsafe { sys::rdma_destroy_id(self.id) };
    }
}

/// An established connection: one operation at a time, each waited for.
pub struct Connection {
    shared: Arc<Shared>,
}

impl Connection {
    pub fn caps(&self) -> Caps {
        self.shared.caps
    }

    /// Registers memory on the connection's protection domain.
    ///
    /// # Safety
    /// As [`Endpoint::register`].
    pub unsafe fn register(&self, ptr: *mut u8, len: usize, access: Access) -> Result<Region> {
        register(&self.shared, ptr, len, access)
    }

    /// RDMA WRITE of `len` bytes at `offset` in `local` to `remote_offset`
    /// in the peer's `remote`.
    pub fn write(
        &self,
        local: &Region,
        offset: usize,
        len: usize,
        remote: &RemoteRegion,
        remote_offset: u64,
    ) -> Result<()> {
        self.transfer(false, local, offset, len, remote, remote_offset)
    }

    /// RDMA READ of `len` bytes at `remote_offset` in the peer's `remote`
    /// into `offset` in `local`.
    pub fn read(
        &self,
        local: &Region,
        offset: usize,
        len: usize,
        remote: &RemoteRegion,
        remote_offset: u64,
    ) -> Result<()> {
        self.transfer(true, local, offset, len, remote, remote_offset)
    }

    fn transfer(
        &self,
        read: bool,
        local: &Region,
        offset: usize,
        len: usize,
        remote: &RemoteRegion,
        remote_offset: u64,
    ) -> Result<()> {
        let (lkey, laddr) = local.local(offset, len)?;
        let raddr = remote.span(remote_offset, len as u64)?;
        let len = u32::try_from(len)
            .map_err(|_| Error::Invalid(format!("{len} bytes in one operation")))?;
        let op = if read { "RDMA READ" } else { "RDMA WRITE" };
        self.post(op, |qpx| {
            // SAFETY: inside wr_start/wr_complete on our QP.
            unsafe {
                if read {
                    sys::ibv_wr_rdma_read(qpx, remote.rkey, raddr);
                } else {
                    sys::ibv_wr_rdma_write(qpx, remote.rkey, raddr);
                }
                sys::ibv_wr_set_sge(qpx, lkey, laddr, len);
            }
            Ok(())
        })
    }

    /// ATOMIC WRITE of `value` (8 bytes, placed whole) at `remote_offset`.
    pub fn atomic_write(
        &self,
        remote: &RemoteRegion,
        remote_offset: u64,
        value: u64,
    ) -> Result<()> {
        if !self.shared.caps.atomic_write {
            return Err(Error::Unavailable("the device has no ATOMIC WRITE".into()));
        }
        let raddr = remote.span(remote_offset, 8)?;
        let bytes = value.to_le_bytes();
        self.post("ATOMIC WRITE", |qpx| {
            // SAFETY: the QP was created with ATOMIC WRITE (caps); the
            // provider copies the 8 bytes while posting.
            unsafe {
                let f = (*qpx)
                    .wr_atomic_write
                    .ok_or_else(|| Error::Unavailable("libibverbs has no ATOMIC WRITE".into()))?;
                f(qpx, remote.rkey, raddr, bytes.as_ptr() as *const _);
            }
            Ok(())
        })
    }

    /// FLUSH of `len` bytes at `remote_offset`: every write before it
    /// reaches `persistence` at the peer when this returns.
    pub fn flush(
        &self,
        remote: &RemoteRegion,
        remote_offset: u64,
        len: u64,
        persistence: Persistence,
    ) -> Result<()> {
        let (able, placement) = match persistence {
            Persistence::Global => (self.shared.caps.flush_global, sys::IBV_FLUSH_GLOBAL),
            Persistence::Persistent => {
                (self.shared.caps.flush_persistent, sys::IBV_FLUSH_PERSISTENT)
            }
        };
        if !able {
            return Err(Error::Unavailable(format!(
                "the device has no FLUSH to {persistence:?} placement"
            )));
        }
        let raddr = remote.span(remote_offset, len)?;
        self.post("FLUSH", |qpx| {
            // SAFETY: the QP was created with FLUSH (caps).
            unsafe {
                let f = (*qpx)
                    .wr_flush
                    .ok_or_else(|| Error::Unavailable("libibverbs has no FLUSH".into()))?;
                f(
                    qpx,
                    remote.rkey,
                    raddr,
                    len as usize,
                    placement as u8,
                    sys::IBV_FLUSH_RANGE as u8,
                );
            }
            Ok(())
        })
    }

    /// Posts one signaled work request that `build` describes, and waits
    /// for its completion.
    fn post(
        &self,
        op: &'static str,
        build: impl FnOnce(*mut sys::ibv_qp_ex) -> Result<()>,
    ) -> Result<()> {
        let qpx = self.shared.qpx;
        let wr_id = self.shared.next_wr.fetch_add(1, Ordering::Relaxed);
        // SAFETY: one post at a time on this QP (this &self method is the
        // only poster and waits for its completion before returning).
        unsafe {
            sys::ibv_wr_start(qpx);
            (*qpx).wr_id = wr_id;
            (*qpx).wr_flags = sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
            if let Err(e) = build(qpx) {
                sys::ibv_wr_abort(qpx);
                return Err(e);
            }
            let ret = sys::ibv_wr_complete(qpx);
            if ret != 0 {
                return Err(Error::ret("ibv_wr_complete", ret));
            }
        }
        self.wait(op, wr_id)
    }

    /// Polls the completion queue for `wr_id`'s completion.
    fn wait(&self, op: &'static str, wr_id: u64) -> Result<()> {
        let started = Instant::now();
        let mut spins = 0u32;
        loop {
            // SAFETY: zero is valid for the C struct; one entry polled.
            let mut wc: sys::ibv_wc = unsafe { std::mem::zeroed() };
            let n = unsafe { sys::ibv_poll_cq(self.shared.cq, 1, &mut wc) };
            if n < 0 {
                return Err(Error::ret("ibv_poll_cq", n));
            }
            if n == 1 {
                if wc.status != sys::ibv_wc_status::IBV_WC_SUCCESS {
                    // SAFETY: returns a static string for any status.
                    let text =
                        unsafe { std::ffi::CStr::from_ptr(sys::ibv_wc_status_str(wc.status)) };
                    return Err(Error::Completion {
                        op,
                        status: text.to_string_lossy().into_owned(),
                        code: wc.status,
                    });
                }
                if wc.wr_id == wr_id {
                    return Ok(());
                }
                continue;
            }
            if started.elapsed() > OP_TIMEOUT {
                return Err(Error::TimedOut(op));
            }
            spins += 1;
            if spins > 1000 {
                std::thread::sleep(Duration::from_micros(20));
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peers_region_is_checked_and_its_spans_bounded() {
        let r = RemoteRegion {
            addr: 0x1000,
            rkey: 7,
            len: 4096,
        };
        assert_eq!(RemoteRegion::from_bytes(&r.to_bytes()).unwrap(), r);
        assert!(RemoteRegion::from_bytes(&r.to_bytes()[..19]).is_err());
        let wraps = RemoteRegion {
            addr: u64::MAX - 1,
            rkey: 1,
            len: 16,
        };
        let e = RemoteRegion::from_bytes(&wraps.to_bytes()).unwrap_err();
        assert!(e.to_string().contains("wraps around"), "{e}");
        assert_eq!(r.span(4088, 8).unwrap(), 0x1000 + 4088);
        assert!(r.span(4089, 8).is_err());
        assert!(r.span(u64::MAX, 2).is_err());
    }
}
