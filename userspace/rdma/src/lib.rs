//! RDMA verbs for the persistent queue between machines (seed 002): a
//! reliable connection made by RDMA CM over an IP address, memory
//! regions registered with the least access they need, and the four
//! operations the queue is made of: RDMA WRITE, RDMA READ, ATOMIC WRITE (an
//! 8-byte counter placed whole) and FLUSH (what was written made visible,
//! or persistent, at the responder).
//!
//! Built on `rdma-mummy-sys`: rdma-core's own headers (with FLUSH and
//! ATOMIC WRITE, which Debian 12's rdma-core 44 lacks) and a static shim
//! that loads libibverbs and librdmacm when first called, so a machine
//! without rdma-core runs everything else and gets [`Error::Unavailable`]
//! here. (`sideway`, the maintained safe binding, has no FLUSH nor ATOMIC
//! WRITE and keeps its extended QP private; docs/pvas.md.)

mod conn;
mod device;
mod ops;
mod region;

use rdma_mummy_sys as sys;

pub use conn::{Endpoint, Listener};
pub use device::{devices, Caps, DeviceInfo};
pub use ops::{Chain, Connection, MAX_CHAIN};
pub use region::{Access, Persistence, Region, RemoteRegion};

/// Everything that can go wrong, each naming the verb and why.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// libibverbs or librdmacm could not be loaded, or lists no device.
    #[error("RDMA is not available here: {0}")]
    Unavailable(String),
    /// A verb failed.
    #[error("{verb}: {source}")]
    Verb {
        verb: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// A work request completed with an error (a remote access error when
    /// the peer's region does not grant what was asked, say).
    #[error("{op} completed with {status} (status {code})")]
    Completion {
        op: &'static str,
        status: String,
        code: u32,
    },
    /// What the peer sent when connecting is not what this side expects.
    #[error("the peer's connection data: {0}")]
    Peer(String),
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("{0} timed out")]
    TimedOut(&'static str),
    /// The connection no longer stands: the peer left, a work request
    /// failed or timed out. Nothing of it is in flight; connect again.
    #[error("the connection is broken: {0}")]
    Broken(String),
    /// The server refused to connect, with its reason.
    #[error("the peer refused the connection: {0}")]
    Refused(String),
}

impl Error {
    /// The last OS error, for `verb`.
    fn last(verb: &'static str) -> Error {
        Error::Verb {
            verb,
            source: std::io::Error::last_os_error(),
        }
    }

    /// A verb's nonzero return (an errno, or -1 with errno set).
    fn ret(verb: &'static str, ret: i32) -> Error {
        if ret > 0 {
            Error::Verb {
                verb,
                source: std::io::Error::from_raw_os_error(ret),
            }
        } else {
            Error::last(verb)
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
