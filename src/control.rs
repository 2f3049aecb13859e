//! Wires the control socket (userspace/control) to the running scheduler:
//! a thread answers clients and hands each request to the scheduler's run
//! loop, which applies it between two looks at the maps.

use log::{info, warn};
use sky_control::{Request, Server};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::time::Duration;

/// A request and where its answer goes.
pub type Ask = (Request, SyncSender<Result<String, String>>);

/// How long a client waits for the run loop (busy reloading, say).
const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// Listens in `dir` on a thread of its own until `stop`; the requests come
/// out of the returned receiver. Without a socket (not root, a squatted
/// directory) scx_sky runs on with one warning: switching is then
/// possible only by restarting it.
pub fn start(dir: &Path, stop: Arc<AtomicBool>) -> Option<Receiver<Ask>> {
    let server = match Server::bind(dir) {
        Ok(s) => s,
        Err(e) => {
            warn!("no control socket ({e:#}): policies cannot be switched at runtime");
            return None;
        }
    };
    info!("control socket {}", server.path().display());
    let (tx, rx) = mpsc::sync_channel::<Ask>(1);
    let spawned = std::thread::Builder::new()
        .name("sky-control".into())
        .spawn(move || {
            server.serve(&stop, |req| {
                let (reply_tx, reply_rx) = mpsc::sync_channel(1);
                tx.send((req, reply_tx))
                    .map_err(|_| "scx_sky is shutting down".to_string())?;
                reply_rx
                    .recv_timeout(ANSWER_WAIT)
                    .map_err(|_| "scx_sky did not answer in time (reloading?)".to_string())?
            })
        });
    match spawned {
        Ok(_) => Some(rx),
        Err(e) => {
            warn!("no control thread ({e}): policies cannot be switched at runtime");
            None
        }
    }
}
