//! Boots the test VM under qemu (TCG) and runs one command in it.

use crate::cachesim::CacheModel;
use crate::console::ConsoleFilter;
use crate::host_load::{HostLoad, HostLoadMeter};
use crate::initramfs::{self, Contents};
use crate::kernel::{self, Kernel, KernelChoice};
use crate::paths::{release_bin, workspace_root};
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// sockets x cores x threads, as qemu's -smp takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTopology {
    pub sockets: u32,
    pub cores: u32,
    pub threads: u32,
}

impl CpuTopology {
    pub fn cpus(&self) -> u32 {
        self.sockets * self.cores * self.threads
    }
}

impl std::fmt::Display for CpuTopology {
    /// As it is given: `SxCxT`.
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}x{}x{}", self.sockets, self.cores, self.threads)
    }
}

impl Default for CpuTopology {
    fn default() -> Self {
        CpuTopology {
            sockets: 2,
            cores: 2,
            threads: 2,
        }
    }
}

impl FromStr for CpuTopology {
    type Err = anyhow::Error;

    /// `SxCxT`, e.g. `2x2x2`.
    fn from_str(s: &str) -> Result<Self> {
        let parts: Vec<u32> = s
            .split('x')
            .map(|p| p.parse::<u32>())
            .collect::<Result<_, _>>()
            .map_err(|_| {
                anyhow::anyhow!("topology {s:?} is not SOCKETSxCORESxTHREADS, e.g. 2x2x2")
            })?;
        let [sockets, cores, threads] = parts[..] else {
            bail!("topology {s:?} is not SOCKETSxCORESxTHREADS, e.g. 2x2x2");
        };
        let topo = CpuTopology {
            sockets,
            cores,
            threads,
        };
        if parts.contains(&0) || topo.cpus() > 64 || threads > 2 {
            bail!(
                "topology {s:?}: each part must be at least 1, threads at most 2, CPUs at most 64"
            );
        }
        Ok(topo)
    }
}

#[derive(Debug, Clone)]
pub struct VmConfig {
    /// A kernel image to boot (else `kernel_version`, then the environment).
    pub kernel: Option<PathBuf>,
    /// A Debian kernel version or series, or `custom-<series>`.
    pub kernel_version: Option<String>,
    pub topology: CpuTopology,
    pub memory_mb: u32,
    pub timeout: Duration,
    /// Copy the guest console to our stdout as it arrives.
    pub echo: bool,
    /// Emulated persistent memory (qemu NVDIMM) of this many MiB, seen as
    /// /dev/pmem0 in the guest; its modules, mkfs.ext4 and Debian's ndctl
    /// (to make it an fsdax namespace: tests/vm/lib.sh pmem_dax_mount) are
    /// added.
    pub pmem_mb: Option<u32>,
    /// Soft-RoCE in the guest: the RDMA core, rxe, the connection manager
    /// and veth modules, iproute2's `ip` and `rdma`, and rdma-core with
    /// perftest (guest_tools::RDMA); tests/vm/lib.sh `rdma_pair` joins two
    /// network namespaces by a veth pair with an rxe device on each end.
    pub rdma: bool,
    /// More programs: (file on this machine, absolute path in the guest).
    pub extra_binaries: Vec<(PathBuf, PathBuf)>,
    /// Simulate caches (the sky_cachesim plugin, cachesim.rs); its counts
    /// come back in `VmOutcome::cache`.
    pub cache_model: Option<CacheModel>,
    /// `-icount shift=N`: guest time follows executed instructions (2^N ns
    /// each) instead of the host's clock, so a slower (instrumented) guest
    /// still sees the same work per time slice.
    pub icount_shift: Option<u32>,
    /// Boot Debian's systemd as PID 1 with the bus, polkit and the
    /// journal, scx_sky installed under /usr, and the scenario as a
    /// service (systemd_guest.rs).
    pub systemd: bool,
}

impl Default for VmConfig {
    fn default() -> Self {
        VmConfig {
            kernel: None,
            kernel_version: None,
            topology: CpuTopology::default(),
            memory_mb: 2048,
            timeout: Duration::from_secs(300),
            echo: true,
            pmem_mb: None,
            rdma: false,
            extra_binaries: Vec::new(),
            cache_model: None,
            icount_shift: None,
            systemd: false,
        }
    }
}

#[derive(Debug)]
pub struct VmOutcome {
    /// Exit status of the command inside the guest.
    pub status: i32,
    /// Everything the guest console printed.
    pub output: String,
    /// What the cache model wrote (cachesim::parse reads it), if one ran.
    pub cache: Option<String>,
    /// What the host took from the run (also the output's last line).
    pub host: HostLoad,
}

const EXIT_MARKER: &str = "SKY-VM-EXIT=";

/// The host priority qemu asks for (it gets it as root).
const QEMU_NICE: libc::c_int = -10;

/// How often the host's share of the run is read (the reads stop with
/// the exit marker: qemu's /proc entries go with it).
const HOST_SAMPLE: Duration = Duration::from_millis(100);

/// How long a guest may take to reach its init's first line. Under TCG
/// the firmware and kernel take 5-30 s, with the cache model or
/// `-icount` too; a guest still silent at this point hung before init (a
/// firmware or early-kernel hang of the emulator: one CI run of 16 VM
/// tests in a fresh clone printed nothing in 420 s, and the same test
/// passed in 19 s when run again), so it is booted again once.
const BOOT_LIMIT: Duration = Duration::from_secs(150);

/// A guest that never reached its init: the emulator's fault, not the
/// command's, so [`run`] boots it once more.
#[derive(Debug)]
pub struct GuestDidNotBoot {
    /// What firmware and kernel printed (the console filter drops it from
    /// the output).
    pub console: String,
    pub limit: Duration,
}

impl std::fmt::Display for GuestDidNotBoot {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "the guest did not reach its init within {} s (it hung while booting); \
             firmware and kernel printed:\n{}",
            self.limit.as_secs(),
            tail(&self.console, 30)
        )
    }
}

impl std::error::Error for GuestDidNotBoot {}

/// A guest stopped because another guest of its run failed.
#[derive(Debug)]
pub struct Stopped {
    /// What it printed until then.
    pub output: String,
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "stopped when another node failed; its last output:\n{}",
            tail(&self.output, 20)
        )
    }
}

impl std::error::Error for Stopped {}

/// The binaries every guest gets.
pub fn project_binaries() -> Result<Vec<PathBuf>> {
    [
        "scx_sky",
        "sky-work",
        "sky-tui-drive",
        "sky-pvas-bench",
        "sky-pvas-peer",
        "sky-pvas-remote",
    ]
    .iter()
    .map(|b| release_bin(b))
    .collect()
}

/// What emulated persistent memory needs in the guest: the NFIT driver
/// that finds the NVDIMM, the pmem block driver and ext4. An fsdax
/// namespace needs nothing more: the pfn (struct page) support it uses is
/// part of libnvdimm and DAX of the kernel itself (Debian:
/// CONFIG_NVDIMM_PFN=y, CONFIG_FS_DAX=y, CONFIG_DAX=y). dax_pmem and
/// device_dax serve devdax namespaces (/dev/daxX.Y), which no filesystem
/// mounts.
const PMEM_MODULES: [&str; 3] = ["nfit", "nd_pmem", "ext4"];
/// What a Device DAX namespace needs (/dev/daxX.Y): the queue between
/// machines keeps its RDMA-registered area there, so they come with RDMA.
const DEVDAX_MODULES: [&str; 2] = ["device_dax", "dax_pmem"];
const PMEM_TOOLS: [&str; 1] = ["/usr/sbin/mkfs.ext4"];

/// What soft-RoCE between two network namespaces needs (their
/// dependencies, udp tunnels and the CM's, come along).
/// sch_netem drops packets as a network would (the sender's transmit
/// succeeds): tests/vm/rdma-nodes.sh cuts the link with it.
const RDMA_MODULES: [&str; 5] = ["rdma_rxe", "ib_uverbs", "rdma_ucm", "veth", "sch_netem"];
/// iproute2's programs at their own paths (busybox's `ip` applet knows no
/// veth nor network namespaces, and there is no `rdma` nor `tc` applet;
/// `tc` cuts the link without taking it down).
const RDMA_TOOLS: [&str; 3] = ["/usr/sbin/ip", "/usr/bin/rdma", "/usr/sbin/tc"];

/// Boots a VM that runs `command` (busybox sh, as root, in /scenarios).
pub fn run(cfg: &VmConfig, command: &str) -> Result<VmOutcome> {
    let prepared = prepare(cfg, command, &[])?;
    once_more_if_hung("the guest", || {
        boot(cfg, &prepared, &Guest::default()).map(|out| vec![out])
    })
    .map(|mut outs| outs.remove(0))
}

/// Runs `boot` (the guests of one run), and once more if a guest hung
/// before init: the emulator's fault, not the command's. The second run's
/// outputs begin with a line that says so, as stderr does at once, so a
/// run that passes still shows the second boot.
pub(crate) fn once_more_if_hung(
    guests: &str,
    boot: impl Fn() -> Result<Vec<VmOutcome>>,
) -> Result<Vec<VmOutcome>> {
    match boot() {
        Err(hang) if hang.is::<GuestDidNotBoot>() => {
            eprintln!("sky-vm: {hang:#}\nsky-vm: booting {guests} once more");
            let mut outs = boot()?;
            for out in &mut outs {
                out.output.insert_str(
                    0,
                    "sky-vm: the first boot hung before init; this is the second\n",
                );
            }
            Ok(outs)
        }
        result => result,
    }
}

/// What every boot of a run shares: the kernel, the initramfs (removed
/// with this), the cache model's plugin.
pub(crate) struct Prepared {
    kernel: Kernel,
    initrd: PathBuf,
    dir: PathBuf,
    plugin: Option<PathBuf>,
}

impl Drop for Prepared {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.initrd);
    }
}

/// How one guest of a run differs from the others: nothing for a lone
/// VM; for the nodes of `cargo xtask vm --nodes` (nodes.rs), a name, a
/// link and a way to be stopped.
#[derive(Default)]
pub(crate) struct Guest {
    /// Tells this guest's files (its NVDIMM image) and console lines apart.
    pub name: Option<String>,
    /// More qemu arguments (the link's netdev and NIC).
    pub qemu_args: Vec<String>,
    /// More kernel command line (`SKY_NODE=N`, which the kernel hands to
    /// init as an environment variable).
    pub append: String,
    /// Set when another guest of the run failed: this one stops too.
    pub abort: Option<Arc<AtomicBool>>,
}

/// The kernel, its modules (with `more_modules`, e.g. a NIC's), the
/// programs and the initramfs that runs `command`.
pub(crate) fn prepare(cfg: &VmConfig, command: &str, more_modules: &[&str]) -> Result<Prepared> {
    let kernel = kernel::ensure(&KernelChoice::from_args(
        cfg.kernel.as_deref(),
        cfg.kernel_version.as_deref(),
    ))?;
    let mut binaries = project_binaries()?;
    let mut modules = Vec::new();
    let mut trees = Vec::new();
    if cfg.pmem_mb.is_some() {
        modules = crate::modules::resolve(&kernel, &PMEM_MODULES)?;
        for tool in PMEM_TOOLS {
            if !Path::new(tool).exists() {
                bail!("{tool} is missing: run scripts/setup.sh (e2fsprogs)");
            }
            binaries.push(PathBuf::from(tool));
        }
        trees.push(crate::guest_tools::ensure(&crate::guest_tools::NDCTL)?);
    }
    let mut placed = cfg.extra_binaries.clone();
    let mut names = more_modules.to_vec();
    if cfg.rdma {
        names.extend(RDMA_MODULES);
        if cfg.pmem_mb.is_some() {
            names.extend(DEVDAX_MODULES);
        }
        for tool in RDMA_TOOLS {
            if !Path::new(tool).exists() {
                bail!("{tool} is missing: run scripts/setup.sh (iproute2)");
            }
            placed.push((PathBuf::from(tool), PathBuf::from(tool)));
        }
        trees.push(crate::guest_tools::ensure(&crate::guest_tools::RDMA)?);
    }
    if !names.is_empty() {
        for ko in crate::modules::resolve(&kernel, &names)? {
            if !modules.contains(&ko) {
                modules.push(ko);
            }
        }
    }
    let dir = workspace_root().join("target/vm");
    std::fs::create_dir_all(&dir)?;
    let systemd_tree = match cfg.systemd {
        true => {
            placed.extend(crate::systemd_guest::programs());
            Some(crate::systemd_guest::tree(&dir)?)
        }
        false => None,
    };
    trees.extend(systemd_tree.clone());
    let plugin = match &cfg.cache_model {
        Some(_) => Some(crate::cachesim::build_plugin()?),
        None => None,
    };
    // One initramfs per process: tests may build several in parallel.
    let initrd = dir.join(format!("initramfs-{}.cpio", std::process::id()));
    initramfs::build(
        &Contents {
            binaries: &binaries,
            placed: &placed,
            trees: &trees,
            modules: &modules,
            kernel: &kernel,
            command,
        },
        &initrd,
    )?;
    if let Some(tree) = systemd_tree {
        let _ = std::fs::remove_dir_all(tree);
    }
    Ok(Prepared {
        kernel,
        initrd,
        dir,
        plugin,
    })
}

pub(crate) fn boot(cfg: &VmConfig, prepared: &Prepared, guest: &Guest) -> Result<VmOutcome> {
    let dir = &prepared.dir;
    let plugin = prepared.plugin.as_deref();
    let mut qemu = Command::new("qemu-system-x86_64");
    // Per process, and per guest of a run of several.
    let tag = match &guest.name {
        Some(name) => format!("{}-{name}", std::process::id()),
        None => std::process::id().to_string(),
    };
    let counts = dir.join(format!("cachesim-{tag}.txt"));
    if let (Some(model), Some(plugin)) = (&cfg.cache_model, plugin) {
        let _ = std::fs::remove_file(&counts);
        qemu.arg("-plugin")
            .arg(model.plugin_arg(plugin, cfg.topology, &counts));
    }
    if let Some(shift) = cfg.icount_shift {
        qemu.args(["-icount", &format!("shift={shift}")]);
    }
    let pmem_file = dir.join(format!("pmem-{tag}.img"));
    match cfg.pmem_mb {
        Some(mb) => {
            let _ = std::fs::remove_file(&pmem_file);
            qemu.args(["-machine", "pc,nvdimm=on"])
                .arg("-m")
                .arg(format!(
                    "{},slots=2,maxmem={}M",
                    cfg.memory_mb,
                    cfg.memory_mb + mb + 1024
                ))
                .arg("-object")
                .arg(format!(
                    "memory-backend-file,id=pm0,share=on,mem-path={},size={mb}M",
                    pmem_file.display()
                ))
                .args(["-device", "nvdimm,memdev=pm0,id=nv0"]);
        }
        None => {
            qemu.args(["-m", &cfg.memory_mb.to_string()]);
        }
    }
    let mut result = run_qemu(cfg, prepared, guest, qemu);
    let _ = std::fs::remove_file(&pmem_file);
    if let (Ok(out), Some(_)) = (&mut result, plugin) {
        out.cache = Some(
            std::fs::read_to_string(&counts)
                .with_context(|| format!("the cache model wrote no {}", counts.display()))?,
        );
        let _ = std::fs::remove_file(&counts);
    }
    result
}

fn run_qemu(
    cfg: &VmConfig,
    prepared: &Prepared,
    guest: &Guest,
    mut qemu: Command,
) -> Result<VmOutcome> {
    let t = cfg.topology;
    // no_timer_check and cryptomgr.notests skip boot-time self-checks a
    // VM has no use for: a second of each boot under TCG.
    let mut append = "console=ttyS0 panic=-1 oops=panic nokaslr mitigations=off quiet \
                      no_timer_check cryptomgr.notests"
        .to_string();
    if !guest.append.is_empty() {
        append = format!("{append} {}", guest.append);
    }
    qemu
        // Multi-threaded TCG crashes guests that toggle sched_ext repeatedly.
        .args(["-accel", "tcg,thread=single", "-nographic", "-no-reboot"])
        // No network but what a test joins itself (veth in the guest, or
        // the nodes' own link): no guest traffic can leave the machine.
        .args(["-nic", "none"])
        .args(&guest.qemu_args)
        // qemu64 is an AMD family without SMT support; as an Intel CPU the
        // guest sees SMT siblings without a warning.
        .args(["-cpu", "qemu64,vendor=GenuineIntel"])
        .args([
            "-smp",
            &format!(
                "{},sockets={},cores={},threads={}",
                t.cpus(),
                t.sockets,
                t.cores,
                t.threads
            ),
        ])
        .arg("-kernel")
        .arg(&prepared.kernel.vmlinuz)
        .arg("-initrd")
        .arg(&prepared.initrd)
        .arg("-append")
        .arg(append)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    watch(cfg, guest, qemu, BOOT_LIMIT)
}

/// Runs qemu to its end, the guest's console filtered into the output:
/// the command's status, or why there is none (no init within
/// `boot_limit`, the timeout, qemu's early end).
fn watch(
    cfg: &VmConfig,
    guest: &Guest,
    mut qemu: Command,
    boot_limit: Duration,
) -> Result<VmOutcome> {
    // The guest's clocks run on while the TCG thread waits for a host
    // CPU, so qemu goes before the host's other work where it may (root).
    // SAFETY: setpriority is async-signal-safe; its failure leaves qemu
    // at the inherited priority, which the host line then shows.
    unsafe {
        qemu.pre_exec(|| {
            libc::setpriority(libc::PRIO_PROCESS, 0, QEMU_NICE);
            Ok(())
        });
    }
    let mut child = qemu
        .spawn()
        .context("starting qemu-system-x86_64 (run scripts/setup.sh)")?;
    let mut host = HostLoadMeter::start(child.id());
    let mut sampled = Instant::now();

    let (tx, rx) = mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let tx_err = tx.clone();
    std::thread::spawn(move || forward_lines(stdout, tx));
    std::thread::spawn(move || forward_lines(stderr, tx_err));

    let started = Instant::now();
    let deadline = started + cfg.timeout;
    let mut output = String::new();
    let mut firmware = String::new();
    let mut status = None;
    let mut console = ConsoleFilter::default();
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(raw) => {
                if !console.guest_up() {
                    firmware.push_str(&raw);
                    firmware.push('\n');
                }
                if let Some(line) = console.line(&raw) {
                    if cfg.echo {
                        match &guest.name {
                            Some(name) => println!("{name}| {line}"),
                            None => println!("{line}"),
                        }
                    }
                    // Anywhere in the line: output without a final newline
                    // ends up in front of the marker.
                    if let Some((_, code)) = line.split_once(EXIT_MARKER) {
                        status = code.trim().parse().ok();
                    }
                    output.push_str(&line);
                    output.push('\n');
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if sampled.elapsed() >= HOST_SAMPLE && status.is_none() {
            host.sample();
            sampled = Instant::now();
        }
        if !console.guest_up() && started.elapsed() > boot_limit.min(cfg.timeout) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(GuestDidNotBoot {
                console: firmware,
                limit: boot_limit,
            }
            .into());
        }
        if guest
            .abort
            .as_ref()
            .is_some_and(|a| a.load(Ordering::Relaxed))
        {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Stopped {
                output: std::mem::take(&mut output),
            }
            .into());
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "the VM did not finish within {} s; its last output:\n{}",
                cfg.timeout.as_secs(),
                tail(&output, 30)
            );
        }
    }
    let qemu = child.wait()?;
    let host = host.finish();
    let host_line = format!("sky-vm: {host}");
    if cfg.echo {
        match &guest.name {
            Some(name) => println!("{name}| {host_line}"),
            None => println!("{host_line}"),
        }
    }
    output.push_str(&host_line);
    output.push('\n');
    match status {
        Some(status) => Ok(VmOutcome {
            status,
            output,
            cache: None,
            host,
        }),
        None => bail!(
            "the VM stopped ({qemu}) before the command finished (kernel panic or qemu error); its last output:\n{}",
            tail(&output, 40)
        ),
    }
}

fn forward_lines(stream: impl std::io::Read, tx: mpsc::Sender<String>) {
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    while matches!(reader.read_until(b'\n', &mut buf), Ok(n) if n > 0) {
        let line = String::from_utf8_lossy(&buf)
            .trim_end_matches(['\r', '\n'])
            .to_string();
        if tx.send(line).is_err() {
            return;
        }
        buf.clear();
    }
}

pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// `sh -c CMD` to run a scenario on this machine as the VM would: in
/// tests/vm, with the release binaries first on PATH.
pub fn native_command(cmd: &str) -> Result<Command> {
    if !host_has_sched_ext() {
        bail!("this kernel has no sched_ext (/sys/kernel/sched_ext is missing): drop --native");
    }
    let bin_dir = release_bin("scx_sky")?
        .parent()
        .context("release directory")?
        .to_path_buf();
    let path = std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))?;
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(cmd)
        .current_dir(workspace_root().join("tests/vm"))
        .env("PATH", path);
    Ok(c)
}

/// True when this machine's kernel can run sched_ext schedulers itself.
pub fn host_has_sched_ext() -> bool {
    Path::new("/sys/kernel/sched_ext").exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topologies_parse_and_are_checked() {
        let t: CpuTopology = "2x2x2".parse().unwrap();
        assert_eq!(t, CpuTopology::default());
        assert_eq!(t.cpus(), 8);
        assert_eq!("1x4x1".parse::<CpuTopology>().unwrap().cpus(), 4);
        assert_eq!("1x4x1".parse::<CpuTopology>().unwrap().to_string(), "1x4x1");
        for bad in ["2x2", "2x0x2", "axbxc", "1x1x4", "8x8x2", ""] {
            assert!(bad.parse::<CpuTopology>().is_err(), "{bad} accepted");
        }
    }

    /// A stand-in for qemu: `sh -c SCRIPT`.
    fn guest(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn quiet(timeout: Duration) -> VmConfig {
        VmConfig {
            timeout,
            echo: false,
            ..VmConfig::default()
        }
    }

    #[test]
    fn a_guest_silent_past_the_boot_limit_did_not_boot() {
        let cfg = quiet(Duration::from_secs(60));
        let err = watch(
            &cfg,
            &Guest::default(),
            guest("echo SeaBIOS 1.16; echo early kernel words; sleep 60"),
            Duration::from_millis(500),
        )
        .unwrap_err();
        let hang = err
            .downcast_ref::<GuestDidNotBoot>()
            .unwrap_or_else(|| panic!("not a boot hang: {err:#}"));
        assert!(hang.console.contains("early kernel words"), "{hang}");
    }

    #[test]
    fn a_guest_that_reached_init_is_held_to_the_timeout_only() {
        let cfg = quiet(Duration::from_secs(60));
        let out = watch(
            &cfg,
            &Guest::default(),
            guest("echo 'sky-vm: up, 8 CPUs'; sleep 1; echo 'SKY-VM-EXIT=3'"),
            Duration::from_millis(500),
        )
        .unwrap();
        assert_eq!(out.status, 3);
        let cfg = quiet(Duration::from_secs(1));
        let err = watch(
            &cfg,
            &Guest::default(),
            guest("echo 'sky-vm: up, 8 CPUs'; sleep 60"),
            Duration::from_secs(30),
        )
        .unwrap_err();
        assert!(err.downcast_ref::<GuestDidNotBoot>().is_none(), "{err:#}");
        assert!(format!("{err}").contains("did not finish"), "{err:#}");
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
    }
}
