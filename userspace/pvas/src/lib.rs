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
mod membership;
pub mod msg;
pub mod pattern;
pub mod persist;
pub mod pmq;
pub mod space;
mod wait;

// The file's format, the trust checks and the hint reader are
// sky-pvas-format's (the scheduler needs only those). The shared-memory
// layout is this crate's business; tests that play a hostile peer reach
// it through the test-only feature.
#[cfg(feature = "fault-injection")]
pub use sky_pvas_format::layout;
#[cfg(not(feature = "fault-injection"))]
use sky_pvas_format::layout;
use sky_pvas_format::{files, liveness};
pub use sky_pvas_format::{hints, mounts, proc, registry, Error, Member, Result};

pub use layout::{HeaderFixed, EAGER_CAP, EXPORT_WORDS, MAX_MEMBERS};
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
