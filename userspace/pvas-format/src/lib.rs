//! The file of a scx_sky shared space as a reader outside it sees it: the
//! layout every member maps ([`layout`]), the member table with its
//! liveness locks ([`liveness`]), the checks that decide whether a file
//! or a path may be trusted ([`files`], [`mounts`], [`proc`]), and the
//! hints the scheduler reads from the spaces users registered
//! ([`hints`], [`registry`]). The scheduler depends on this crate alone;
//! `sky-pvas` builds spaces, messaging and the queue on top of it.

pub mod files;
pub mod hints;
pub mod layout;
pub mod liveness;
pub mod mounts;
pub mod proc;
pub mod registry;

#[cfg(test)]
mod fixture;

/// A member as the member table lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: u32,
    /// The pid the member wrote: a label, until proven (see
    /// `hints::read_all`, and `Space::verified_process` in sky-pvas).
    pub pid: u32,
    /// The whole label word: the pid and the low bits of its start time.
    pub owner_word: u64,
    /// Holds its slot lock: alive, as the kernel says.
    pub alive: bool,
    pub pm_writer: bool,
    /// Said it is memory-bound (`Space::set_memory_bound` in sky-pvas).
    pub memory_bound: bool,
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
    /// The other end of a queue between machines sent what no correct
    /// peer sends.
    #[error("the remote peer broke the queue's protocol: {0}")]
    RemoteCorrupt(String),
    /// An RDMA verb or connection failed (the peer gone, the link down,
    /// an access the peer's region does not grant, no RDMA here).
    #[error("RDMA: {0}")]
    Rdma(String),
}

impl Error {
    pub fn io(path: impl std::fmt::Display, source: std::io::Error) -> Self {
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
            Error::Corrupt(_) | Error::PeerCorrupt { .. } | Error::RemoteCorrupt(_) => {
                libc::EBADMSG
            }
            Error::Rdma(_) => libc::ECOMM,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
