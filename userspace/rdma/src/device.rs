//! What the RDMA devices here can do, as the queue between machines needs
//! to know before it picks how to make an entry durable.

use crate::sys;
use crate::{Error, Result};
use std::ffi::CStr;

/// `ib_uverbs_device_cap_flags` of the kernel's uapi
/// (include/uapi/rdma/ib_user_ioctl_verbs.h), reported in
/// `device_cap_flags_ex`; the binding's allowlist leaves them out.
const DEVICE_FLUSH_GLOBAL: u64 = 1 << 38;
const DEVICE_FLUSH_PERSISTENT: u64 = 1 << 39;
const DEVICE_ATOMIC_WRITE: u64 = 1 << 40;

/// The capabilities the queue between machines uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Caps {
    /// RDMA FLUSH to global visibility (the responder's memory system).
    pub flush_global: bool,
    /// RDMA FLUSH to the persistence domain (needs the region on
    /// persistent memory: Device DAX).
    pub flush_persistent: bool,
    /// ATOMIC WRITE: 8 bytes placed whole at the responder.
    pub atomic_write: bool,
}

impl Caps {
    pub fn from_flags(flags_ex: u64) -> Caps {
        Caps {
            flush_global: flags_ex & DEVICE_FLUSH_GLOBAL != 0,
            flush_persistent: flags_ex & DEVICE_FLUSH_PERSISTENT != 0,
            atomic_write: flags_ex & DEVICE_ATOMIC_WRITE != 0,
        }
    }

    /// Of an open device context.
    ///
    /// # Safety
    /// `context` is an open device context.
    pub(crate) unsafe fn of(context: *mut sys::ibv_context) -> Result<Caps> {
        // SAFETY: zero is a valid value of these plain C structs.
        let mut attr: sys::ibv_device_attr_ex = std::mem::zeroed();
        let input: sys::ibv_query_device_ex_input = std::mem::zeroed();
        let ret = sys::ibv_query_device_ex(context, &input, &mut attr);
        if ret != 0 {
            return Err(Error::ret("ibv_query_device_ex", ret));
        }
        Ok(Caps::from_flags(attr.device_cap_flags_ex))
    }
}

impl std::fmt::Display for Caps {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let yes = |b: bool| if b { "yes" } else { "no" };
        write!(
            f,
            "flush_global={} flush_persistent={} atomic_write={}",
            yes(self.flush_global),
            yes(self.flush_persistent),
            yes(self.atomic_write)
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    pub caps: Caps,
}

/// Every RDMA device this machine has, with its capabilities.
pub fn devices() -> Result<Vec<DeviceInfo>> {
    let mut n = 0;
    // SAFETY: n is a valid out pointer; the list is freed below.
    let list = unsafe { sys::ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Err(Error::Unavailable(format!(
            "ibv_get_device_list: {} (is rdma-core installed, and an RDMA device or rxe link set up?)",
            std::io::Error::last_os_error()
        )));
    }
    let mut out = Vec::new();
    let mut result = Ok(());
    for i in 0..n.max(0) as usize {
        // SAFETY: the list holds n devices.
        let device = unsafe { *list.add(i) };
        // SAFETY: a listed device has a NUL-terminated name.
        let name = unsafe { CStr::from_ptr(sys::ibv_get_device_name(device)) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: a listed device may be opened; closed below.
        let context = unsafe { sys::ibv_open_device(device) };
        if context.is_null() {
            result = Err(Error::last("ibv_open_device"));
            break;
        }
        // SAFETY: context is open.
        let caps = unsafe { Caps::of(context) };
        // SAFETY: opened above, used no more.
        unsafe { sys::ibv_close_device(context) };
        match caps {
            Ok(caps) => out.push(DeviceInfo { name, caps }),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    // SAFETY: the list came from ibv_get_device_list.
    unsafe { sys::ibv_free_device_list(list) };
    result.map(|_| out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_bits_are_the_kernels() {
        let rxe = Caps::from_flags((1 << 38) | (1 << 39) | (1 << 40) | 0xff);
        assert!(rxe.flush_global && rxe.flush_persistent && rxe.atomic_write);
        assert_eq!(
            Caps::from_flags(1 << 39).to_string(),
            "flush_global=no flush_persistent=yes atomic_write=no"
        );
        assert_eq!(Caps::from_flags(0), Caps::default());
    }
}
