//! Which end of which queue, and where its peer is: the options
//! sky-pvas-remote and the test-only sky-pvas-hostile share.

use clap::{Args, ValueEnum};
use sky_pvas::pmq::remote::{Peer, Role, Spec};
use sky_pvas::pmq::{Mode, PmQueue};
use sky_pvas::Error;
use std::net::SocketAddrV4;
use std::path::PathBuf;

#[derive(Args)]
pub struct End {
    /// This end of the queue.
    #[arg(value_enum)]
    pub role: Side,
    /// push: the sender writes into the receiver's area; pull: the
    /// receiver reads from the sender's.
    #[arg(long, value_enum)]
    pub mode: ModeArg,
    /// Wait for the peer to connect at this address (its IP names the RDMA
    /// device)...
    #[arg(long, conflicts_with = "connect", required_unless_present = "connect")]
    pub listen: Option<SocketAddrV4>,
    /// ...or connect to it there.
    #[arg(long)]
    pub connect: Option<SocketAddrV4>,
    /// The owner's queue area (push receiver, pull sender) or the pull
    /// receiver's state: a file, or a Device DAX namespace (/dev/daxX.Y).
    #[arg(long, default_value = "/dev/shm/sky-pvas-remote")]
    pub area: PathBuf,
    #[arg(long, default_value_t = 4096)]
    pub entry_size: u32,
    #[arg(long, default_value_t = 64)]
    pub entries: u32,
    /// Place counts by plain (tagged) WRITE even where both devices can
    /// ATOMIC WRITE: for a device that mishandles it, and to test the
    /// fallback. Either end asking decides for both.
    #[arg(long)]
    pub plain_counters: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Side {
    Send,
    Recv,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ModeArg {
    Push,
    Pull,
}

impl End {
    pub fn role(&self) -> Role {
        match self.role {
            Side::Send => Role::Sender,
            Side::Recv => Role::Receiver,
        }
    }

    fn spec(&self) -> Spec {
        Spec {
            mode: match self.mode {
                ModeArg::Push => Mode::Push,
                ModeArg::Pull => Mode::Pull,
            },
            entry_size: self.entry_size,
            entry_count: self.entries,
            plain_counters: self.plain_counters,
        }
    }

    fn peer(&self) -> Peer {
        match (self.listen, self.connect) {
            (Some(a), _) => Peer::Listen(a),
            (None, Some(a)) => Peer::Connect(a),
            (None, None) => unreachable!("clap requires one"),
        }
    }

    /// Opens this end and connects to the peer, as any application would
    /// (`PmQueue::connect`); `fresh`: the owner starts a new epoch.
    pub fn connect(&self, fresh: bool) -> Result<PmQueue<'static>, Error> {
        PmQueue::connect(self.spec(), self.role(), self.peer(), &self.area, fresh)
    }
}
