//! One reliable connection (RC) made by RDMA CM: the verbs objects it
//! owns, the two ends that make it, and what RDMA CM says about the peer
//! once it stands.
//!
//! Both ends go through an [`Endpoint`]: the client's from
//! [`Endpoint::resolve`], the server's from [`Listener::request`]. Regions
//! are registered on the endpoint before it connects, so the connection
//! data each side sends (RDMA CM private data) can name them.

use crate::device::Caps;
use crate::ops::Connection;
use crate::region::{register, Access, Region};
use crate::sys;
use crate::{Error, Result};
use std::marker::PhantomData;
use std::net::SocketAddrV4;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

/// The verbs objects of one connection, released in order when the last
/// user (the connection or a region) goes.
pub(crate) struct Shared {
    id: *mut sys::rdma_cm_id,
    pub(crate) pd: *mut sys::ibv_pd,
    pub(crate) cq: *mut sys::ibv_cq,
    pub(crate) qpx: *mut sys::ibv_qp_ex,
    pub(crate) caps: Caps,
    rd_atomic: u8,
    pub(crate) next_wr: AtomicU64,
    /// Why the connection no longer stands (its QP is in the error state).
    failed: Mutex<Option<String>>,
    /// The event channel the id moved to for connecting (null while it is
    /// synchronous); destroyed after the id.
    channel: std::cell::Cell<*mut sys::rdma_event_channel>,
}

// SAFETY: registering and deregistering memory may happen on any thread;
// posting and polling, which may not, only through `Connection`, which is
// not Sync.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    pub(crate) fn failure(&self) -> Option<String> {
        self.failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Marks the connection failed, first reason kept, and moves the QP to
    /// the error state: whatever is still posted completes at once,
    /// flushed, and nothing new goes out.
    pub(crate) fn fail(&self, why: String) {
        let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        if failed.is_some() {
            return;
        }
        *failed = Some(why);
        // SAFETY: the QP exists while `self` does; zero is valid for the
        // C struct.
        unsafe {
            let mut attr: sys::ibv_qp_attr = std::mem::zeroed();
            attr.qp_state = sys::ibv_qp_state::IBV_QPS_ERR;
            sys::ibv_modify_qp(
                (*self.id).qp,
                &mut attr,
                sys::ibv_qp_attr_mask::IBV_QP_STATE.0 as i32,
            );
        }
    }

    /// The next RDMA CM event on this connection that ends it, if one is
    /// waiting (never blocks): the peer disconnected (its process ended,
    /// or it closed), or the device went away. Other events are taken and
    /// acknowledged.
    pub(crate) fn next_event(&self) -> Option<String> {
        // SAFETY: the id's own channel (its synchronous one, or the one
        // it moved to for connecting).
        let channel = unsafe { (*self.id).channel };
        // SAFETY: as above.
        while let Ok(Some((kind, _, _))) = unsafe { take_event(channel, 0) } {
            match kind {
                sys::rdma_cm_event_type::RDMA_CM_EVENT_DISCONNECTED => {
                    return Some("the peer disconnected".into())
                }
                sys::rdma_cm_event_type::RDMA_CM_EVENT_DEVICE_REMOVAL => {
                    return Some("the RDMA device was removed".into())
                }
                _ => continue,
            }
        }
        None
    }
}

/// One RDMA CM event from `channel` if one comes within `ms`
/// milliseconds: its type, status and private data, copied before it is
/// acknowledged.
///
/// # Safety
/// `channel` is null or an id's live event channel.
unsafe fn take_event(
    channel: *mut sys::rdma_event_channel,
    ms: i32,
) -> Result<Option<(u32, i32, Vec<u8>)>> {
    if channel.is_null() {
        return Ok(None);
    }
    let mut pfd = libc::pollfd {
        fd: (*channel).fd,
        events: libc::POLLIN,
        revents: 0,
    };
    if libc::poll(&mut pfd, 1, ms) != 1 || pfd.revents & libc::POLLIN == 0 {
        return Ok(None);
    }
    let mut event = std::ptr::null_mut();
    if sys::rdma_get_cm_event(channel, &mut event) != 0 || event.is_null() {
        return Err(Error::last("rdma_get_cm_event"));
    }
    let out = ((*event).event, (*event).status, private_data(event));
    sys::rdma_ack_cm_event(event);
    Ok(Some(out))
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: each object was created by this struct, is destroyed
        // once, QP before CQ before PD before the id; no work request is in
        // flight (every chain is waited for or drained).
        unsafe {
            // No rdma_disconnect: on a synchronous id it waits for the
            // peer's reply, up to a minute from a peer that is not reading
            // its events; destroying the id sends the disconnect request
            // without waiting, and the peer learns of it from its events.
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
            let channel = self.channel.get();
            if !channel.is_null() {
                sys::rdma_destroy_event_channel(channel);
            }
        }
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
            failed: Mutex::new(None),
            channel: std::cell::Cell::new(std::ptr::null_mut()),
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
        // On an event channel of its own, read with a time limit: a
        // synchronous id would wait as long as RDMA CM retries (a minute
        // for a peer that does not answer, as after a link went down).
        self.make_async()?;
        // SAFETY: id has its QP and its own channel; both calls return at
        // once, the outcome comes as an event.
        let ret = unsafe {
            if self.passive {
                sys::rdma_accept(id, &mut param)
            } else {
                sys::rdma_connect(id, &mut param)
            }
        };
        let verb = if self.passive {
            "rdma_accept"
        } else {
            "rdma_connect"
        };
        if ret != 0 {
            return Err(Error::ret(verb, ret));
        }
        let started = std::time::Instant::now();
        let theirs = loop {
            let left = CONNECT_TIMEOUT.saturating_sub(started.elapsed());
            let Some((event, status, data)) = self.next_connect_event(left)? else {
                return Err(Error::TimedOut(verb));
            };
            use sys::rdma_cm_event_type as ev;
            match event {
                ev::RDMA_CM_EVENT_ESTABLISHED => break data,
                ev::RDMA_CM_EVENT_REJECTED => {
                    // The CM pads a reject's data with zeros.
                    let data = &data[..data.iter().position(|&b| b == 0).unwrap_or(data.len())];
                    return Err(Error::Refused(if data.is_empty() {
                        format!("no reason given (status {status}: nothing listens there?)")
                    } else {
                        String::from_utf8_lossy(data).into_owned()
                    }));
                }
                ev::RDMA_CM_EVENT_UNREACHABLE
                | ev::RDMA_CM_EVENT_CONNECT_ERROR
                | ev::RDMA_CM_EVENT_DISCONNECTED
                | ev::RDMA_CM_EVENT_DEVICE_REMOVAL => {
                    return Err(Error::Broken(format!(
                        "{verb}: RDMA CM event {event} (status {status})"
                    )))
                }
                _ => continue,
            }
        };
        // The server's accept data came with the established event; the
        // client's request data came with its request.
        let peer = if self.passive {
            self.request_data.clone()
        } else {
            theirs
        };
        allow_flush(&self.shared)?;
        Ok((
            Connection {
                shared: self.shared,
                _one_thread: PhantomData,
            },
            peer,
        ))
    }

    /// Moves the id from its synchronous channel to one this side reads
    /// itself, with time limits.
    fn make_async(&self) -> Result<()> {
        // SAFETY: a synchronous id; the new channel is kept in `shared`
        // and destroyed after the id.
        unsafe {
            let channel = sys::rdma_create_event_channel();
            if channel.is_null() {
                return Err(Error::last("rdma_create_event_channel"));
            }
            if sys::rdma_migrate_id(self.shared.id, channel) != 0 {
                let e = Error::last("rdma_migrate_id");
                sys::rdma_destroy_event_channel(channel);
                return Err(e);
            }
            self.shared.channel.set(channel);
        }
        Ok(())
    }

    /// The next event on the id's channel within `limit`: its type, status
    /// and private data (None: none came).
    fn next_connect_event(
        &self,
        limit: std::time::Duration,
    ) -> Result<Option<(u32, i32, Vec<u8>)>> {
        let ms = limit.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: the id's own channel, made by `make_async`.
        unsafe { take_event(self.shared.channel.get(), ms) }
    }

    /// Refuses a client's request (the server's endpoint only), telling it
    /// `why` (at most 148 bytes go: the rest is cut).
    pub fn reject(self, why: &str) -> Result<()> {
        if !self.passive {
            return Err(Error::Invalid("only a server rejects".into()));
        }
        let bytes = &why.as_bytes()[..why.len().min(REJECT_DATA)];
        // SAFETY: a requested id, not yet accepted; bytes outlive the call.
        let ret = unsafe {
            sys::rdma_reject(
                self.shared.id,
                bytes.as_ptr() as *const _,
                bytes.len() as u8,
            )
        };
        if ret != 0 {
            return Err(Error::ret("rdma_reject", ret));
        }
        Ok(())
    }
}

/// How long connecting or accepting may take before this side gives up
/// (and the caller tries again).
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Private data a reject carries over InfiniBand's CM (REJ).
const REJECT_DATA: usize = 148;

/// The private data of the id's last event.
///
/// # Safety
/// `id` is a synchronous id.
unsafe fn event_data(id: *mut sys::rdma_cm_id) -> Vec<u8> {
    private_data((*id).event)
}

/// The private data an event carries (none for a null event).
///
/// # Safety
/// `event` is null or a live, unacknowledged event.
unsafe fn private_data(event: *mut sys::rdma_cm_event) -> Vec<u8> {
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
