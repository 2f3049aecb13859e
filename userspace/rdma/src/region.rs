//! Memory each side registers, and the peer's regions as its connection
//! data names them: what the NIC may reach, and with what access.

use crate::conn::Shared;
use crate::sys;
use crate::{Error, Result};
use std::sync::Arc;

/// What a region lets the peer do (`ibv_access_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access(pub(crate) u32);

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
    pub(crate) fn span(&self, offset: u64, len: u64) -> Result<u64> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(self.addr + offset),
            _ => Err(Error::Invalid(format!(
                "{len} bytes at {offset} do not fit the peer's region of {}",
                self.len
            ))),
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

    pub(crate) fn local(&self, offset: usize, len: usize) -> Result<(u32, u64)> {
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

pub(crate) fn register(
    shared: &Arc<Shared>,
    ptr: *mut u8,
    len: usize,
    access: Access,
) -> Result<Region> {
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
