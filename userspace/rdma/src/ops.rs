//! The operations of an established connection: RDMA WRITE, RDMA READ,
//! ATOMIC WRITE and FLUSH, posted one by one or as a chain and waited for;
//! whether the peer is still there (RDMA CM's events); and what a
//! connection that failed leaves behind (nothing in flight).

use crate::conn::Shared;
use crate::device::Caps;
use crate::region::{register, Access, Persistence, Region, RemoteRegion};
use crate::sys;
use crate::{Error, Result};
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long one chain may wait for its completions: a base, and a second
/// for each MiB it moves (far slower than any link, soft-RoCE under
/// emulation included). A peer that is gone is noticed sooner, by RDMA
/// CM's events or the requester's retries running out; this catches a
/// QP that neither completes nor fails (soft-RoCE after its link went
/// down and up again).
const OP_TIMEOUT: Duration = Duration::from_secs(10);
const OP_TIMEOUT_PER_MIB: Duration = Duration::from_secs(1);
/// How long a failed connection's work requests may take to be flushed
/// back (the QP in the error state completes them at once).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Work requests in one chain: the send queue's depth.
pub const MAX_CHAIN: u32 = 32;

/// An established connection. The extended QP API is not safe to use
/// from two threads at once, so a connection is `Send` but not `Sync`:
/// one thread posts and polls at a time.
pub struct Connection {
    pub(crate) shared: Arc<Shared>,
    pub(crate) _one_thread: PhantomData<Cell<()>>,
}

impl Connection {
    pub fn caps(&self) -> Caps {
        self.shared.caps
    }

    /// Registers memory on the connection's protection domain.
    ///
    /// # Safety
    /// As [`crate::Endpoint::register`].
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
        self.chain(|c| c.write(local, offset, len, remote, remote_offset))
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
        self.chain(|c| c.read(local, offset, len, remote, remote_offset))
    }

    /// ATOMIC WRITE of `value` (8 bytes, placed whole) at `remote_offset`.
    pub fn atomic_write(
        &self,
        remote: &RemoteRegion,
        remote_offset: u64,
        value: u64,
    ) -> Result<()> {
        self.chain(|c| c.atomic_write(remote, remote_offset, value))
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
        self.chain(|c| c.flush(remote, remote_offset, len, persistence))
    }

    /// Posts the work requests `build` adds as one chain (one doorbell, at
    /// most [`MAX_CHAIN`]) and waits until all of them completed: the
    /// first failure is the error. A chain that fails or times out leaves
    /// the connection failed, with nothing of it still in flight.
    pub fn chain(&self, build: impl FnOnce(&mut Chain<'_>) -> Result<()>) -> Result<()> {
        self.check()?;
        let qpx = self.shared.qpx;
        let mut chain = Chain {
            conn: self,
            first: self.shared.next_wr.load(Ordering::Relaxed),
            ops: Vec::new(),
            fence: false,
            bytes: 0,
        };
        // SAFETY: one chain at a time on this QP (`Connection` is not Sync
        // and this method waits for the chain's completions).
        unsafe { sys::ibv_wr_start(qpx) };
        if let Err(e) = build(&mut chain) {
            // SAFETY: inside the wr_start above.
            unsafe { sys::ibv_wr_abort(qpx) };
            self.shared.next_wr.store(chain.first, Ordering::Relaxed);
            return Err(e);
        }
        let limit = OP_TIMEOUT + OP_TIMEOUT_PER_MIB * (chain.bytes >> 20) as u32;
        let (first, ops) = (chain.first, chain.ops);
        // SAFETY: inside the wr_start above.
        let ret = unsafe { sys::ibv_wr_complete(qpx) };
        if ret != 0 {
            self.shared.next_wr.store(first, Ordering::Relaxed);
            return Err(Error::ret("ibv_wr_complete", ret));
        }
        self.shared
            .next_wr
            .store(first + ops.len() as u64, Ordering::Relaxed);
        self.wait(first, &ops, limit)
    }

    /// Whether the connection still stands: Err if it failed, or if RDMA
    /// CM says the peer disconnected (its process ended or it closed the
    /// connection) or the device went away. Reads the events without
    /// blocking.
    pub fn check(&self) -> Result<()> {
        if let Some(why) = self.shared.failure() {
            return Err(Error::Broken(why));
        }
        match self.shared.next_event() {
            None => Ok(()),
            Some(why) => {
                self.shared.fail(why.clone());
                Err(Error::Broken(why))
            }
        }
    }

    /// Waits for the completions of the chain `first..first + ops.len()`.
    fn wait(&self, first: u64, ops: &[&'static str], limit: Duration) -> Result<()> {
        let started = Instant::now();
        let end = first + ops.len() as u64;
        let mut done = 0usize;
        let mut error = None;
        let mut spins = 0u32;
        let mut last_check = Instant::now();
        while done < ops.len() {
            match self.poll()? {
                Some(wc) if (first..end).contains(&wc.wr_id) => {
                    done += 1;
                    if wc.status != sys::ibv_wc_status::IBV_WC_SUCCESS && error.is_none() {
                        // SAFETY: returns a static string for any status.
                        let text =
                            unsafe { std::ffi::CStr::from_ptr(sys::ibv_wc_status_str(wc.status)) };
                        error = Some(Error::Completion {
                            op: ops[(wc.wr_id - first) as usize],
                            status: text.to_string_lossy().into_owned(),
                            code: wc.status,
                        });
                        // The QP is in the error state: the rest of the
                        // chain comes back flushed, at once.
                        self.shared.fail(error.as_ref().unwrap().to_string());
                    }
                    continue;
                }
                // Not of this chain: a chain before it that timed out.
                Some(_) => continue,
                None => {}
            }
            if error.is_some() && started.elapsed() > DRAIN_TIMEOUT {
                break;
            }
            if error.is_none() && started.elapsed() > limit {
                let op = ops[done.min(ops.len() - 1)];
                self.shared.fail(format!("{op} timed out"));
                self.drain(first, end, done);
                return Err(Error::TimedOut(op));
            }
            if error.is_none() && last_check.elapsed() > Duration::from_millis(10) {
                last_check = Instant::now();
                if let Some(why) = self.shared.next_event() {
                    self.shared.fail(why.clone());
                    self.drain(first, end, done);
                    return Err(Error::Broken(why));
                }
            }
            spins += 1;
            if spins > 1000 {
                std::thread::sleep(Duration::from_micros(20));
            } else {
                std::hint::spin_loop();
            }
        }
        match error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// After `fail` put the QP in the error state: takes back the chain's
    /// outstanding completions (flushed), so no work request still points
    /// at memory the caller may free.
    fn drain(&self, first: u64, end: u64, mut done: usize) {
        let started = Instant::now();
        while done < (end - first) as usize && started.elapsed() < DRAIN_TIMEOUT {
            match self.poll() {
                Ok(Some(wc)) if (first..end).contains(&wc.wr_id) => done += 1,
                Ok(Some(_)) => {}
                Ok(None) => std::thread::sleep(Duration::from_micros(100)),
                Err(_) => break,
            }
        }
    }

    fn poll(&self) -> Result<Option<sys::ibv_wc>> {
        // SAFETY: zero is valid for the C struct; one entry polled.
        let mut wc: sys::ibv_wc = unsafe { std::mem::zeroed() };
        let n = unsafe { sys::ibv_poll_cq(self.shared.cq, 1, &mut wc) };
        match n {
            n if n < 0 => Err(Error::ret("ibv_poll_cq", n)),
            0 => Ok(None),
            _ => Ok(Some(wc)),
        }
    }
}

/// Work requests being put together for one doorbell
/// ([`Connection::chain`]). Each is signaled; the chain's order is the
/// order on the wire, and RC keeps it (a READ or FLUSH is not passed by the
/// WRITEs after it, and does not pass those before it).
pub struct Chain<'a> {
    conn: &'a Connection,
    first: u64,
    ops: Vec<&'static str>,
    fence: bool,
    /// Bytes the chain moves (its time limit grows with them).
    bytes: u64,
}

impl Chain<'_> {
    /// The next operation starts only once every one before it completed
    /// (`IBV_SEND_FENCE`): a count placed only after the FLUSH of what it
    /// counts has been answered.
    pub fn fence(&mut self) {
        self.fence = true;
    }

    /// Starts the next work request: its id and flags.
    fn next(&mut self, op: &'static str) -> Result<*mut sys::ibv_qp_ex> {
        if self.ops.len() as u32 >= MAX_CHAIN {
            return Err(Error::Invalid(format!(
                "more than {MAX_CHAIN} operations in one chain"
            )));
        }
        let qpx = self.conn.shared.qpx;
        let mut flags = sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
        if std::mem::take(&mut self.fence) {
            flags |= sys::ibv_send_flags::IBV_SEND_FENCE.0;
        }
        // SAFETY: inside the chain's wr_start.
        unsafe {
            (*qpx).wr_id = self.first + self.ops.len() as u64;
            (*qpx).wr_flags = flags;
        }
        self.ops.push(op);
        Ok(qpx)
    }

    pub fn write(
        &mut self,
        local: &Region,
        offset: usize,
        len: usize,
        remote: &RemoteRegion,
        remote_offset: u64,
    ) -> Result<()> {
        self.transfer(false, local, offset, len, remote, remote_offset)
    }

    pub fn read(
        &mut self,
        local: &Region,
        offset: usize,
        len: usize,
        remote: &RemoteRegion,
        remote_offset: u64,
    ) -> Result<()> {
        self.transfer(true, local, offset, len, remote, remote_offset)
    }

    fn transfer(
        &mut self,
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
        let qpx = self.next(if read { "RDMA READ" } else { "RDMA WRITE" })?;
        self.bytes += len as u64;
        // SAFETY: inside the chain's wr_start on our QP.
        unsafe {
            if read {
                sys::ibv_wr_rdma_read(qpx, remote.rkey, raddr);
            } else {
                sys::ibv_wr_rdma_write(qpx, remote.rkey, raddr);
            }
            sys::ibv_wr_set_sge(qpx, lkey, laddr, len);
        }
        Ok(())
    }

    /// ATOMIC WRITE of `value` (8 bytes, placed whole) at `remote_offset`.
    pub fn atomic_write(
        &mut self,
        remote: &RemoteRegion,
        remote_offset: u64,
        value: u64,
    ) -> Result<()> {
        if !self.conn.shared.caps.atomic_write {
            return Err(Error::Unavailable("the device has no ATOMIC WRITE".into()));
        }
        let raddr = remote.span(remote_offset, 8)?;
        // SAFETY: the QP was created with ATOMIC WRITE (caps).
        let f = unsafe { (*self.conn.shared.qpx).wr_atomic_write }
            .ok_or_else(|| Error::Unavailable("libibverbs has no ATOMIC WRITE".into()))?;
        let qpx = self.next("ATOMIC WRITE")?;
        let bytes = value.to_le_bytes();
        // SAFETY: inside the chain's wr_start; the provider copies the 8
        // bytes while posting.
        unsafe { f(qpx, remote.rkey, raddr, bytes.as_ptr() as *const _) };
        Ok(())
    }

    /// FLUSH of `len` bytes at `remote_offset` to `persistence`.
    pub fn flush(
        &mut self,
        remote: &RemoteRegion,
        remote_offset: u64,
        len: u64,
        persistence: Persistence,
    ) -> Result<()> {
        let caps = self.conn.shared.caps;
        let (able, placement) = match persistence {
            Persistence::Global => (caps.flush_global, sys::IBV_FLUSH_GLOBAL),
            Persistence::Persistent => (caps.flush_persistent, sys::IBV_FLUSH_PERSISTENT),
        };
        if !able {
            return Err(Error::Unavailable(format!(
                "the device has no FLUSH to {persistence:?} placement"
            )));
        }
        let raddr = remote.span(remote_offset, len)?;
        // SAFETY: the QP was created with FLUSH (caps).
        let f = unsafe { (*self.conn.shared.qpx).wr_flush }
            .ok_or_else(|| Error::Unavailable("libibverbs has no FLUSH".into()))?;
        let qpx = self.next("FLUSH")?;
        // SAFETY: inside the chain's wr_start.
        unsafe {
            f(
                qpx,
                remote.rkey,
                raddr,
                len as usize,
                placement as u8,
                sys::IBV_FLUSH_RANGE as u8,
            )
        };
        Ok(())
    }
}
