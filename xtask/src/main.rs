//! `cargo xtask`: set-up, the VM test bed, the test suite and benchmarks.

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use xtask::bench::BenchArgs;
use xtask::cachesim::{self, CacheModel};
use xtask::eval::EvalArgs;
use xtask::kernel::{self, KernelChoice};
use xtask::matrix::{self, Which};
use xtask::paths::{run, workspace_root};
use xtask::vm::{self, CpuTopology, VmConfig};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "scx_sky test bed, tests and benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install the toolchain, qemu and busybox (scripts/setup.sh; root).
    Setup,
    /// Download (or find in the cache) a sched_ext kernel; print its path.
    Kernel {
        /// A version (6.16.12+deb13-amd64), a series (6.16: its newest with
        /// sched_ext) or a build (custom-6.12); default: the newest.
        #[arg(long)]
        kernel_version: Option<String>,
    },
    /// List the kernels apt offers and what is known of their sched_ext.
    Kernels {
        /// Download every kernel not yet known to find out (hundreds of MB).
        #[arg(long)]
        probe: bool,
    },
    /// Boot several kernels in turn, run the smoke scenario (load + sky1)
    /// in each, print a table; fails if any kernel fails.
    Matrix {
        #[command(flatten)]
        which: MatrixArgs,
        /// Guest CPUs as SOCKETSxCORESxTHREADS (SKY-1's set-up: 2x1x2).
        #[arg(long, default_value = "2x1x2")]
        topology: CpuTopology,
        /// Give up on one VM after this many seconds.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
    },
    /// Build a small kernel from Debian's linux-source-<series> package
    /// (e.g. 6.12 LTS, which Debian builds without sched_ext) and cache it
    /// as custom-<series>; installs the build packages it needs.
    KernelBuild {
        /// The series to build, e.g. 6.12.
        #[arg(long)]
        series: String,
        /// Parallel make jobs (run at nice 19).
        #[arg(long, default_value_t = 2)]
        jobs: u32,
    },
    /// Build and boot the VM, run a scenario or command, return its status.
    Vm {
        #[command(flatten)]
        vm: VmArgs,
        /// Scenario from tests/vm/ (without .sh), e.g. demo, load, sky1.
        #[arg(long, conflicts_with = "command")]
        scenario: Option<String>,
        /// Run on this machine instead of in a VM (needs a sched_ext kernel
        /// and root).
        #[arg(long)]
        native: bool,
        /// Emulated persistent memory (qemu NVDIMM) of this many MiB as
        /// /dev/pmem0, with ndctl and mkfs.ext4 (lib.sh pmem_dax_mount).
        #[arg(long, conflicts_with = "native")]
        pmem_mb: Option<u32>,
        /// Soft-RoCE in the guest (rxe, rdma-core, perftest; lib.sh
        /// rdma_pair).
        #[arg(long, conflicts_with = "native")]
        rdma: bool,
        /// Boot Debian's systemd as PID 1, with the system bus, polkitd,
        /// the journal and scx_sky installed under /usr; the command runs
        /// as a service (xtask/src/systemd_guest.rs).
        #[arg(long, conflicts_with = "native")]
        systemd: bool,
        /// Boot this many guests (2) on one virtual link, each with its
        /// own qemu, NVDIMM (--pmem-mb) and NIC (eth0, 10.77.0.N with
        /// lib.sh rdma_node); each runs the command with SKY_NODE=N. Two
        /// TCG guests take both of a 2-core host's cores.
        #[arg(long, default_value_t = 1, conflicts_with_all = ["native", "cache_model", "icount"])]
        nodes: u32,
        /// Simulate caches (the sky_cachesim QEMU plugin): a preset (sky1,
        /// modern) or L1/L2/LLC, each SIZE:LINE:ASSOC or off, e.g.
        /// 8K:16:1. Phases the guest marks (`sky-work cache-phase`) are
        /// counted and printed when the VM stops.
        #[arg(long, conflicts_with = "native")]
        cache_model: Option<CacheModel>,
        /// Guest time follows executed instructions, 2^SHIFT ns each
        /// (qemu -icount), so the plugin's slowdown does not shrink the
        /// work done per time slice.
        #[arg(long, value_name = "SHIFT", conflicts_with = "native",
              value_parser = clap::value_parser!(u32).range(0..=10))]
        icount: Option<u32>,
        /// Shell command to run in the guest instead of a scenario.
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// The main job: scx_sky natively on a sched_ext host (arguments are
    /// passed on), else the SKY-1 demo with its stats in the VM.
    Run {
        #[command(flatten)]
        vm: VmArgs,
        /// Arguments for scx_sky when running natively.
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Everything CI runs: set-up, format, lint, unit and VM tests.
    Test(TestArgs),
    /// The flake finder's table (as `test --repeat` prints it) from the
    /// run logs it left, target/repeat/run-K.log, in the order given: runs
    /// of one commit from more than one sitting make one table.
    Flakes {
        #[arg(required = true)]
        logs: Vec<PathBuf>,
    },
    /// Build (as you) and install scx_sky: the binaries, the presets,
    /// libsky_pvas with its header and pkg-config file, completions, man
    /// pages, the systemd unit and /etc/default/scx_sky (kept if there).
    /// Where you cannot write, the copy runs under sudo.
    Install {
        /// Installation prefix.
        #[arg(long, default_value = "/usr/local")]
        prefix: PathBuf,
        /// Stage the tree under this directory instead of / (a package's
        /// build root).
        #[arg(long)]
        destdir: Option<PathBuf>,
        /// Copy what is already built; do not run cargo.
        #[arg(long)]
        no_build: bool,
    },
    /// Shared-space transports and the persistent queue, on this machine.
    BenchPvas {
        /// Directory for the space (e.g. a DAX mount for persistent memory).
        #[arg(long, default_value = "/dev/shm")]
        dir: PathBuf,
        /// Run in the VM on emulated persistent memory (qemu NVDIMM) instead.
        #[arg(long)]
        pmem_vm: bool,
        #[command(flatten)]
        vm: VmArgs,
    },
    /// The queue between machines against perftest on one soft-RoCE link
    /// (seed 002's experiment scaled to the VM): push and pull from 64 B
    /// to 32 MiB with the receiver computing between dequeues, and the
    /// 64-byte latency; Markdown tables of ratios.
    BenchRdma {
        /// Message sizes in bytes, comma-separated.
        #[arg(long, default_value = xtask::rdma_bench::SIZES)]
        sizes: String,
        /// MiB each point may move: 100 iterations, fewer for large
        /// messages (at least 5).
        #[arg(long, default_value_t = 32)]
        budget_mib: u32,
        /// What the receiver does between dequeues: `1` computes a matrix
        /// product sized to the message (the paper's receiver), `0` only
        /// dequeues (the queue's own cost); `1,0` runs both.
        #[arg(long, default_value = "1,0", value_parser = ["1", "0", "1,0"])]
        compute: String,
        /// Write the tables into docs/results.md (their own section).
        #[arg(long)]
        update_docs: bool,
        #[command(flatten)]
        vm: VmArgs,
    },
    /// SKY-1 workload swept over sleep, array size and load, and a wakeup
    /// storm, under EEVDF then each scx_sky variant, one VM boot per
    /// topology; prints a table per topology.
    Bench(BenchArgs),
    /// The evaluation: scenarios from the papers under EEVDF, scx_bpfland,
    /// scx_cosmos, scx_lavd and scx_sky's presets, one boot each, judged by
    /// the tracepoint observer and the cache model; Markdown tables and
    /// PNG plots (docs/evaluation.md).
    Eval(EvalArgs),
}

#[derive(Args, Clone)]
struct TestArgs {
    /// Only the VM tests (after the set-up and the build): no format,
    /// lint or unit tests.
    #[arg(long)]
    vm_only: bool,
    /// Run the VM tests this many times in a row and print each test's
    /// passes out of them and the spread of every figure it judges
    /// (target/repeat/flakes.md; each run's log beside it).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: Option<u32>,
    /// Only the VM tests whose names contain one of these.
    #[arg(last = true)]
    filters: Vec<String>,
}

#[derive(Args, Clone)]
#[group(required = true, multiple = false)]
struct MatrixArgs {
    /// The newest kernel with sched_ext of every series.
    #[arg(long)]
    all: bool,
    /// These versions or series, comma-separated (e.g. 6.16,7.3).
    #[arg(long, value_delimiter = ',')]
    versions: Vec<String>,
    /// The oldest and the newest Debian kernel with sched_ext.
    #[arg(long)]
    oldest_newest: bool,
}

impl MatrixArgs {
    fn which(&self) -> Which {
        if self.all {
            Which::All
        } else if self.oldest_newest {
            Which::OldestNewest
        } else {
            Which::Versions(self.versions.clone())
        }
    }
}

#[derive(Args, Clone)]
struct VmArgs {
    /// Boot this kernel image instead of a downloaded one.
    #[arg(long, conflicts_with = "kernel_version")]
    kernel: Option<PathBuf>,
    /// Boot this kernel: a version (6.16.12+deb13-amd64), a series (6.16:
    /// its newest with sched_ext) or a build (custom-6.12). Default: the
    /// newest with sched_ext, or $SKY_KERNEL_VERSION.
    #[arg(long)]
    kernel_version: Option<String>,
    /// Guest CPUs as SOCKETSxCORESxTHREADS [default: 2x2x2; for run's
    /// demo 2x1x2, SKY-1's set-up].
    #[arg(long)]
    topology: Option<CpuTopology>,
    /// Guest memory in MiB.
    #[arg(long, default_value_t = 2048)]
    memory_mb: u32,
    /// Give up on the VM after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
}

impl VmArgs {
    fn config(&self) -> VmConfig {
        VmConfig {
            kernel: self.kernel.clone(),
            kernel_version: self.kernel_version.clone(),
            topology: self.topology.unwrap_or_default(),
            memory_mb: self.memory_mb,
            timeout: Duration::from_secs(self.timeout),
            echo: true,
            ..VmConfig::default()
        }
    }
}

fn main() {
    if let Err(e) = dispatch(Cli::parse().command) {
        eprintln!("xtask: error: {e:#}");
        std::process::exit(1);
    }
}

fn dispatch(cmd: Cmd) -> Result<()> {
    match cmd {
        Cmd::Setup => setup(),
        Cmd::Kernel { kernel_version } => {
            let k = kernel::ensure(&KernelChoice::from_args(None, kernel_version.as_deref()))?;
            println!("{} {}", k.version, k.vmlinuz.display());
            Ok(())
        }
        Cmd::Kernels { probe } => kernel::list(probe),
        Cmd::Matrix {
            which,
            topology,
            timeout,
        } => {
            setup()?;
            build()?;
            let cfg = VmConfig {
                topology,
                timeout: Duration::from_secs(timeout),
                ..VmConfig::default()
            };
            matrix(&which.which(), &cfg)
        }
        Cmd::KernelBuild { series, jobs } => {
            let k = xtask::kbuild::build(&series, jobs)?;
            println!("{} {}", k.version, k.vmlinuz.display());
            Ok(())
        }
        Cmd::Vm {
            vm,
            scenario,
            native,
            pmem_mb,
            rdma,
            systemd,
            nodes,
            cache_model,
            icount,
            command,
        } => {
            setup()?;
            build()?;
            let cmd = match scenario {
                Some(name) => scenario_command(&name)?,
                None if command.is_empty() => bail!("give --scenario NAME or -- COMMAND"),
                None => command.join(" "),
            };
            if native {
                exit_with(run_native(&cmd)?)
            } else {
                let cfg = VmConfig {
                    pmem_mb,
                    rdma,
                    systemd,
                    cache_model,
                    icount_shift: icount,
                    ..vm.config()
                };
                if nodes != 1 {
                    // Every node exited 0, or this is an error naming each.
                    xtask::nodes::run(&cfg, nodes, &cmd)?;
                    return Ok(());
                }
                let out = vm::run(&cfg, &cmd)?;
                if let Some(text) = &out.cache {
                    println!("{}", cachesim::summary(&cachesim::parse(text)?));
                }
                exit_with(out.status)
            }
        }
        Cmd::Run { vm, args } => {
            setup()?;
            build()?;
            if vm::host_has_sched_ext() {
                let bin = xtask::paths::release_bin("scx_sky")?;
                let status = Command::new(bin).args(&args).status()?;
                exit_with(status.code().unwrap_or(1))
            } else {
                eprintln!("xtask: this kernel has no sched_ext; running the demo in the VM");
                // SKY-1's set-up (two cache domains of an SMT pair, two
                // processes per CPU) is where placement differs visibly.
                let cfg = VmConfig {
                    topology: vm.topology.unwrap_or("2x1x2".parse()?),
                    ..vm.config()
                };
                exit_with(vm::run(&cfg, &scenario_command("demo")?)?.status)
            }
        }
        Cmd::Test(args) => test(&args),
        Cmd::Flakes { logs } => {
            let tally = xtask::repeat::Tally::of_logs(&logs)?;
            println!("{}", tally.table(logs.len() as u32));
            Ok(())
        }
        Cmd::Install {
            prefix,
            destdir,
            no_build,
        } => install(prefix, destdir, no_build),
        Cmd::BenchPvas {
            pmem_vm: true, vm, ..
        } => {
            setup()?;
            build()?;
            let cfg = VmConfig {
                pmem_mb: Some(1024),
                ..vm.config()
            };
            exit_with(vm::run(&cfg, &scenario_command("pvas-pmem")?)?.status)
        }
        Cmd::BenchPvas { dir, .. } => {
            build()?;
            let bin = xtask::paths::release_bin("sky-pvas-bench")?;
            exit_with(Command::new(bin).arg(dir).status()?.code().unwrap_or(1))
        }
        Cmd::BenchRdma {
            sizes,
            budget_mib,
            compute,
            update_docs,
            vm,
        } => {
            if sizes
                .split(',')
                .any(|s| s.parse::<u32>().map_or(true, |b| b < 8))
            {
                bail!("--sizes {sizes:?}: byte counts of at least 8, comma-separated");
            }
            setup()?;
            build()?;
            let cfg = VmConfig {
                rdma: true,
                topology: vm.topology.unwrap_or("1x2x1".parse()?),
                // Both receivers over eight sizes: about 12 minutes.
                timeout: Duration::from_secs(vm.timeout.max(1800)),
                ..vm.config()
            };
            let command = format!(
                "{} {sizes} {budget_mib} {compute}",
                scenario_command("rdma-bench")?
            );
            let out = vm::run(&cfg, &command)?;
            let tables = xtask::rdma_bench::tables(&out.output)?;
            println!("{tables}");
            if update_docs && out.status == 0 {
                xtask::rdma_bench::update_docs(&format!(
                    "{}\n{tables}",
                    xtask::rdma_bench::provenance(&out.output)
                ))?;
            }
            exit_with(out.status)
        }
        Cmd::Eval(args) => {
            setup()?;
            build()?;
            xtask::eval::run(&args)
        }
        Cmd::Bench(args) => {
            // Refuse bad options before the set-up and build.
            args.plan()?;
            setup()?;
            build()?;
            xtask::bench::run(&args)
        }
    }
}

/// `cargo xtask install`: builds as the calling user, copies as whoever
/// may write there (sudo, if not this user).
fn install(prefix: PathBuf, destdir: Option<PathBuf>, no_build: bool) -> Result<()> {
    use xtask::install;
    let layout = install::Layout::new(destdir.clone(), prefix.clone())?;
    if !no_build {
        // A fresh machine has no clang or libelf yet.
        run_setup(&["--build"])?;
        install::build()?;
    }
    if !install::writable(&layout) {
        // cargo is often the user's alone (rustup): build first, then
        // copy with this same program as root.
        let mut sudo = Command::new("sudo");
        sudo.arg("--preserve-env=CARGO_TARGET_DIR")
            .arg(std::env::current_exe()?)
            .args(["install", "--no-build", "--prefix"])
            .arg(&prefix);
        if let Some(d) = &destdir {
            sudo.arg("--destdir").arg(d);
        }
        eprintln!(
            "xtask: cannot write under {}; copying with sudo",
            layout.staged("").display()
        );
        return run(&mut sudo);
    }
    let written = install::install(&layout)?;
    for path in &written {
        println!("{}", path.display());
    }
    eprintln!(
        "xtask: installed {} files under {}",
        written.len(),
        layout.staged("").display()
    );
    Ok(())
}

/// Runs a scenario command on this machine, as the VM would.
fn run_native(cmd: &str) -> Result<i32> {
    let status = vm::native_command(cmd)?.status().context("starting sh")?;
    Ok(status.code().unwrap_or(1))
}

fn exit_with(status: i32) -> Result<()> {
    if status != 0 {
        std::process::exit(status);
    }
    Ok(())
}

fn scenario_command(name: &str) -> Result<String> {
    let path = workspace_root().join("tests/vm").join(format!("{name}.sh"));
    if name.contains('/') || !path.is_file() {
        bail!("no scenario {name:?}: tests/vm/{name}.sh does not exist");
    }
    Ok(format!("sh ./{name}.sh"))
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(workspace_root());
    c
}

/// Runs scripts/setup.sh unless everything it installs is already there.
fn setup() -> Result<()> {
    run_setup(&[])
}

/// scripts/setup.sh with `args` (`--build`: what building needs alone).
fn run_setup(args: &[&str]) -> Result<()> {
    let script = workspace_root().join("scripts/setup.sh");
    run(Command::new("bash").arg(&script).args(args))
        .with_context(|| format!("scripts/setup.sh {} failed", args.join(" ")))
}

fn build() -> Result<()> {
    run(cargo().args([
        "build",
        "--release",
        "-p",
        "scx_sky",
        "-p",
        "sky-workloads",
        "-p",
        "sky-tui-drive",
        "-p",
        "sky-pvas",
    ]))
}

/// The BPF C against bpf/.clang-format (kernel style), as `cargo fmt
/// --check` holds the Rust.
fn check_bpf_format() -> Result<()> {
    let bpf = workspace_root().join("bpf");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&bpf)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("c" | "h")))
        .collect();
    files.sort();
    run(Command::new("clang-format-19")
        .args(["--dry-run", "--Werror", "--style=file"])
        .args(&files))
    .context("the BPF C is not in the kernel style of bpf/.clang-format: run clang-format-19 -i bpf/*.[ch]")
}

fn test(args: &TestArgs) -> Result<()> {
    setup()?;
    if !args.vm_only {
        checks_and_unit_tests()?;
    }
    build()?;
    // The VM tests one at a time: the machine has 2 cores. Among them the
    // evaluation's CI slice (tests/eval.rs) and the oldest kernel's smoke
    // (tests/vm.rs).
    xtask::vm_tests::run(&xtask::vm_tests::Run {
        repeat: args.repeat,
        filters: args.filters.clone(),
    })
}

/// Formatting, lints and every test that needs no VM.
fn checks_and_unit_tests() -> Result<()> {
    run(cargo().args(["fmt", "--all", "--", "--check"]))
        .context("code is not formatted: run cargo fmt")?;
    check_bpf_format()?;
    run(cargo()
        .args(["clippy", "--release", "--workspace", "--all-targets"])
        .args(["--", "-D", "warnings"]))?;
    // The fault injection is sky-pvas's own: only its code changes with it.
    run(cargo()
        .args(["clippy", "--release", "-p", "sky-pvas", "--all-targets"])
        .args(["--features", "fault-injection", "--", "-D", "warnings"]))?;
    // Unit tests (everything outside the kernel) in parallel...
    run(cargo().args(["test", "--release", "--workspace"]))?;
    // ...and the shared-space tests built with the test-only fault
    // injection (simulated power loss, kill points, a hostile peer's raw
    // writes and the fuzzer, bounded by PROPTEST_CASES): the library's own
    // and those that use it; the rest ran above on the code users get.
    let mut fault_tests = cargo();
    fault_tests.args(["test", "--release", "-p", "sky-pvas"]);
    fault_tests.args(["--features", "fault-injection", "--lib"]);
    for name in xtask::pvas::FAULT_INJECTION_TESTS {
        fault_tests.args(["--test", name]);
    }
    run(&mut fault_tests)
}

/// Boots each chosen kernel with the smoke scenario; fails if any fails.
fn matrix(which: &Which, cfg: &VmConfig) -> Result<()> {
    let kernels = matrix::choose(which)?;
    let results = matrix::run(&kernels, cfg);
    matrix::print_table(&results);
    let failed = results.iter().filter(|r| !r.passed()).count();
    if failed > 0 {
        bail!(
            "{failed} of {} kernels failed the smoke test",
            results.len()
        );
    }
    Ok(())
}
