//! Wires the control socket (userspace/control) to the running scheduler:
//! each client's thread switches through the shared [`Switcher`], straight
//! into BPF's memory, without waiting for the run loop.

use crate::live_policy::Switcher;
use log::{info, warn};
use sky_control::Server;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Listens in `dir` on a thread of its own until `stop`. Without a socket
/// (not root, a squatted directory) scx_sky runs on with one warning:
/// switching is then possible only by restarting it.
pub fn start(dir: &Path, stop: Arc<AtomicBool>, live: Switcher) {
    let server = match Server::bind(dir) {
        Ok(s) => s,
        Err(e) => {
            warn!("no control socket ({e:#}): policies cannot be switched at runtime");
            return;
        }
    };
    info!("control socket {}", server.path().display());
    let spawned = std::thread::Builder::new()
        .name("sky-control".into())
        .spawn(move || server.serve(&stop, move |req| live.answer(req)));
    if let Err(e) = spawned {
        warn!("no control thread ({e}): policies cannot be switched at runtime");
    }
}
