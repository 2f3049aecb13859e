//! The test bed's two machines (`cargo xtask vm --nodes 2`): two guests,
//! each its own qemu (so its own host thread under TCG), its own emulated
//! NVDIMM and RDMA device, joined by one virtual Ethernet link and nothing
//! else. Both run the same command; each finds its number in `SKY_NODE`
//! (tests/vm/lib.sh `rdma_node` gives node N the address 10.77.0.N).
//!
//! The link is QEMU's dgram netdev over two Unix datagram sockets, one
//! bound by each qemu, the other's as its remote: no port to collide with
//! another run, no frame that can leave the machine. Each guest sees a
//! virtio-net NIC (eth0).

use crate::vm::{self, Guest, GuestDidNotBoot, Prepared, Stopped, VmConfig, VmOutcome};
use anyhow::{bail, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How many guests one link joins.
pub const NODES: u32 = 2;

/// The guest's NIC: the virtio PCI transport (built into Debian's
/// kernels, where modules::resolve skips it) and the virtio-net driver
/// (a module, with its failover dependencies).
const LINK_MODULES: [&str; 2] = ["virtio_pci", "virtio_net"];

/// Boots `nodes` guests on one link, each running `command`; their
/// outcomes in node order. A guest that exits non-zero or fails stops the
/// other (it would wait for its peer at the next barrier): the error then
/// says what each did. A guest that hung before init boots both again once.
pub fn run(cfg: &VmConfig, nodes: u32, command: &str) -> Result<Vec<VmOutcome>> {
    if nodes != NODES {
        bail!("--nodes {nodes}: a link joins exactly {NODES} guests (without --nodes, one VM)");
    }
    if cfg.cache_model.is_some() || cfg.icount_shift.is_some() {
        bail!("the cache model and -icount time one guest: not with --nodes");
    }
    let prepared = vm::prepare(cfg, command, &LINK_MODULES)?;
    let sockets = std::env::temp_dir().join(format!("sky-nodes-{}", std::process::id()));
    std::fs::create_dir_all(&sockets)?;
    let result = vm::once_more_if_hung("both nodes", || boot_all(cfg, &prepared, &sockets));
    let _ = std::fs::remove_dir_all(&sockets);
    result
}

/// Node `n`'s socket of the link.
fn socket(dir: &Path, n: u32) -> PathBuf {
    dir.join(format!("node{n}.sock"))
}

/// Node `n` of the two: its name, its end of the link, its number for init.
fn guest(n: u32, dir: &Path, abort: &Arc<AtomicBool>) -> Guest {
    let peer = NODES + 1 - n;
    Guest {
        name: Some(format!("node{n}")),
        qemu_args: vec![
            "-netdev".into(),
            format!(
                "dgram,id=link,local.type=unix,local.path={},remote.type=unix,remote.path={}",
                socket(dir, n).display(),
                socket(dir, peer).display()
            ),
            "-device".into(),
            format!("virtio-net-pci,netdev=link,mac=52:54:00:77:00:{n:02x}"),
        ],
        append: format!("SKY_NODE={n}"),
        abort: Some(abort.clone()),
    }
}

fn boot_all(cfg: &VmConfig, prepared: &Prepared, dir: &Path) -> Result<Vec<VmOutcome>> {
    let abort = Arc::new(AtomicBool::new(false));
    let guests: Vec<Guest> = (1..=NODES).map(|n| guest(n, dir, &abort)).collect();
    for n in 1..=NODES {
        // qemu binds its own socket: one left by a killed run is in the way.
        let _ = std::fs::remove_file(socket(dir, n));
    }
    let results: Vec<Result<VmOutcome>> = std::thread::scope(|s| {
        let handles: Vec<_> = guests
            .iter()
            .map(|g| {
                let abort = &abort;
                s.spawn(move || {
                    let out = vm::boot(cfg, prepared, g);
                    if !matches!(&out, Ok(o) if o.status == 0) {
                        abort.store(true, Ordering::Relaxed);
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("the thread watching it panicked")))
            })
            .collect()
    });
    combine(results)
}

/// All outcomes when every guest ran to its end with status 0; else an
/// error that says what each did (a boot hang alone, so that it is retried).
fn combine(results: Vec<Result<VmOutcome>>) -> Result<Vec<VmOutcome>> {
    if results.iter().all(|r| matches!(r, Ok(o) if o.status == 0)) {
        return Ok(results.into_iter().map(Result::unwrap).collect());
    }
    let mut why = String::new();
    let mut hang = None;
    for (i, r) in results.into_iter().enumerate() {
        let n = i + 1;
        match r {
            Ok(o) => {
                let _ = writeln!(
                    why,
                    "node{n} exited {}; its last output:\n{}",
                    o.status,
                    vm::tail(&o.output, 40)
                );
            }
            Err(e) if e.is::<GuestDidNotBoot>() => {
                let _ = writeln!(why, "node{n}: {e:#}");
                hang = Some(e);
            }
            Err(e) if e.is::<Stopped>() => {
                let _ = writeln!(why, "node{n} {e:#}");
            }
            Err(e) => {
                let _ = writeln!(why, "node{n} failed: {e:#}");
            }
        }
    }
    match hang {
        Some(e) => Err(e),
        None => bail!("{}", why.trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(status: i32, output: &str) -> VmOutcome {
        VmOutcome {
            status,
            output: output.into(),
            cache: None,
            host: Default::default(),
        }
    }

    #[test]
    fn both_nodes_must_end_with_status_zero() {
        let outs = combine(vec![Ok(outcome(0, "a")), Ok(outcome(0, "b"))]).unwrap();
        assert_eq!(outs.len(), 2);
        assert_eq!(outs[1].output, "b");
        let err = combine(vec![
            Ok(outcome(3, "node one's last words")),
            Err(Stopped {
                output: "waiting at a barrier".into(),
            }
            .into()),
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("node1 exited 3"), "{err}");
        assert!(err.contains("node one's last words"), "{err}");
        assert!(
            err.contains("node2 stopped when another node failed"),
            "{err}"
        );
        assert!(err.contains("waiting at a barrier"), "{err}");
    }

    #[test]
    fn a_boot_hang_is_returned_as_itself_to_be_retried() {
        let err = combine(vec![
            Err(Stopped {
                output: String::new(),
            }
            .into()),
            Err(GuestDidNotBoot {
                console: "SeaBIOS".into(),
                limit: std::time::Duration::from_secs(150),
            }
            .into()),
        ])
        .unwrap_err();
        assert!(err.is::<GuestDidNotBoot>(), "{err:#}");
    }

    #[test]
    fn each_node_binds_its_socket_and_sends_to_the_other() {
        let abort = Arc::new(AtomicBool::new(false));
        let g = guest(2, Path::new("/tmp/x"), &abort);
        let netdev = &g.qemu_args[1];
        assert!(netdev.contains("local.path=/tmp/x/node2.sock"), "{netdev}");
        assert!(netdev.contains("remote.path=/tmp/x/node1.sock"), "{netdev}");
        assert!(g.qemu_args[3].ends_with("mac=52:54:00:77:00:02"));
        assert_eq!(g.append, "SKY_NODE=2");
    }
}
