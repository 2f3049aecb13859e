//! Wires the control socket (userspace/control) and the D-Bus service
//! (userspace/dbus) to the running scheduler: each request switches
//! through the shared [`Switcher`], straight into BPF's memory, without
//! waiting for the run loop, and wakes it.

use crate::live_policy::Switcher;
use crate::wakeup::Wakeup;
use log::{info, warn};
use sky_control::Server;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// The control socket's thread; dropping it stops the thread, and the
/// server removes its socket (and the directory it made): every way out
/// of the daemon short of SIGKILL leaves nothing behind.
pub struct Control {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Control {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Listens in `dir` on a thread of its own until the returned handle is
/// dropped. Called once scx_sky is attached: only the scheduler the kernel
/// runs owns the socket (a second instance refuses before it gets here).
/// Without a socket (not root, a squatted directory, another scx_sky
/// answering) scx_sky runs on with one warning: switching is then
/// possible only by restarting it. Each request wakes the run loop.
pub fn start(dir: &Path, live: Switcher, wakeup: Arc<Wakeup>) -> Option<Control> {
    let server = match Server::bind(dir) {
        Ok(s) => s,
        Err(e) => {
            warn!("no control socket ({e:#}): policies cannot be switched at runtime");
            return None;
        }
    };
    info!("control socket {}", server.path().display());
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let spawned = std::thread::Builder::new()
        .name("sky-control".into())
        .spawn(move || {
            server.serve(&stopped, move |req| {
                let answer = live.answer(req);
                // The run loop hands a new policy's hints and gang rules
                // to the feeds worker.
                wakeup.wake();
                answer
            })
        });
    match spawned {
        Ok(thread) => Some(Control {
            stop,
            thread: Some(thread),
        }),
        Err(e) => {
            warn!("no control thread ({e}): policies cannot be switched at runtime");
            None
        }
    }
}

/// Serves the live policy on the system bus (`org.scx.Sky`, switches as
/// polkit allows), answering as the control socket does. Without a system
/// bus (a minimal system, the VM), one line says so and scx_sky runs on.
pub fn start_dbus(live: Switcher, wakeup: Arc<Wakeup>) -> Option<sky_dbus::Served> {
    let handler: sky_dbus::Handler = Arc::new(move |req| {
        let answer = live.answer(req);
        wakeup.wake();
        answer
    });
    match sky_dbus::serve(&sky_dbus::Bus::System, handler) {
        Ok(served) => {
            info!("D-Bus: serving {} on the system bus", sky_dbus::BUS_NAME);
            Some(served)
        }
        Err(e) => {
            info!("no D-Bus service ({e:#}): only root switches policies (the control socket)");
            None
        }
    }
}
