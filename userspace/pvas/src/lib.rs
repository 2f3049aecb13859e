//! PVAS-like shared spaces for scx_sky (see docs/pvas.md).
//!
//! A *space* is one virtual address range, backed by a file, mapped at the
//! same address in every member process, so a pointer into it means the
//! same thing everywhere. It is cut into fixed-size segments: member ID i
//! owns segment i, which starts with an export area any member can find
//! from the ID alone. On top of that: one-copy messaging ([`msg`]) and a
//! push/pull persistent-memory queue ([`pmq`]). The member table doubles as
//! the scheduler's gang and PM-writer hints ([`hints`]).

pub mod ffi;
mod files;
pub mod hints;
// The shared-memory layout is the crate's business; tests that play a
// hostile peer reach it through the test-only feature.
#[cfg(feature = "fault-injection")]
pub mod layout;
#[cfg(not(feature = "fault-injection"))]
mod layout;
mod liveness;
mod membership;
pub mod mounts;
pub mod msg;
pub mod pattern;
pub mod persist;
pub mod pmq;
pub mod proc;
pub mod registry;
pub mod space;
mod wait;

pub use layout::{HeaderFixed, EAGER_CAP, EXPORT_WORDS, MAX_MEMBERS};
pub use membership::Member;
pub use proc::Process;
pub use space::{CreateOptions, SharedBuf, Space};

/// Raw access to the shared structures, for tests that act as a corrupt or
/// hostile peer (feature `fault-injection` only).
#[cfg(feature = "fault-injection")]
pub mod testing {
    use crate::layout::{ExportArea, MemberSlot};
    use crate::{Result, Space};

    /// Member `id`'s export area, as any member (or a hostile one) sees it.
    pub fn export(space: &Space, id: u32) -> Result<&ExportArea> {
        space.export(id)
    }

    /// Member `id`'s slot in the member table.
    pub fn slot(space: &Space, id: u32) -> Result<&MemberSlot> {
        space.check_id(id)?;
        Ok(space.slot(id))
    }
}

/// Everything that can go wrong, each naming what was wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A file or directory that other users could have planted or can
    /// tamper with, or that is not the kind of file it should be.
    #[error("{path}: {why}")]
    Untrusted { path: String, why: String },
    #[error("not a scx_sky shared space (bad magic)")]
    BadMagic,
    #[error("space layout version {found}, this build reads version {supported}")]
    BadVersion { found: u32, supported: u32 },
    #[error("corrupt space header: {0}")]
    BadHeader(String),
    #[error("space file is truncated: {found} bytes, the header needs {needed}")]
    Truncated { needed: u64, found: u64 },
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("address range {base:#x}+{len:#x} is already in use in this process")]
    AddressInUse { base: u64, len: u64 },
    #[error("member ID {0} is held by a live process")]
    IdTaken(u32),
    #[error("member {0} is not attached")]
    NotAttached(u32),
    #[error("member {0} died or left")]
    PeerGone(u32),
    #[error("the space was destroyed")]
    Destroyed,
    #[error("message of {len} bytes does not fit: {cap} bytes at most")]
    TooLarge { len: u64, cap: u64 },
    #[error("segment {id} heap is full: {wanted} bytes wanted, {left} left")]
    OutOfSpace { id: u32, wanted: u64, left: u64 },
    #[error("timed out")]
    TimedOut,
    #[error("queue entry {0} is torn or corrupt")]
    Corrupt(u64),
    /// A peer (buggy, hostile, or a file corrupted on disk) left values in
    /// shared memory that no correct member writes.
    #[error("member {id} left impossible values in shared memory: {what}")]
    PeerCorrupt { id: u32, what: String },
}

impl Error {
    pub(crate) fn io(path: impl std::fmt::Display, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_string(),
            source,
        }
    }

    /// The errno-style code the C ABI returns (negated).
    pub fn errno(&self) -> i32 {
        match self {
            Error::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
            Error::Untrusted { .. } => libc::EPERM,
            Error::BadMagic
            | Error::BadVersion { .. }
            | Error::BadHeader(_)
            | Error::Truncated { .. } => libc::EBADF,
            Error::Invalid(_) => libc::EINVAL,
            Error::AddressInUse { .. } => libc::EADDRINUSE,
            Error::IdTaken(_) => libc::EBUSY,
            Error::NotAttached(_) => libc::ENOENT,
            Error::PeerGone(_) => libc::EPIPE,
            Error::Destroyed => libc::ESHUTDOWN,
            Error::TooLarge { .. } => libc::EMSGSIZE,
            Error::OutOfSpace { .. } => libc::ENOMEM,
            Error::TimedOut => libc::ETIMEDOUT,
            Error::Corrupt(_) | Error::PeerCorrupt { .. } => libc::EBADMSG,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
