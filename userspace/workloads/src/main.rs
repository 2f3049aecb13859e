//! sky-work: the workloads scx_sky is tested and benchmarked with.

use anyhow::Result;
use clap::{Parser, Subcommand};
use sky_observer::{trace_waits, tracefs};
use sky_workloads::{
    cache_loop::CacheLoop, cache_phase, hostile::Hostile, pingpong::PingPong, share, stop, threads,
};
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    name = "sky-work",
    about = "Workloads for scx_sky tests and benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// SKY-1's workload: processes computing over small private arrays in
    /// bursts with short sleeps; prints work done and kernel-side counters
    /// (SIGINT/SIGTERM end it early, still printing).
    CacheLoop {
        /// Number of processes.
        #[arg(long, default_value_t = 8)]
        procs: usize,
        /// Array size per process, in KiB.
        #[arg(long, default_value_t = 4)]
        array_kb: usize,
        /// Compute burst length, in microseconds.
        #[arg(long, default_value_t = 2000)]
        burst_us: u64,
        /// Sleep between bursts, in microseconds.
        #[arg(long, default_value_t = 200)]
        sleep_us: u64,
        /// Run time, in seconds.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Bytes between the bytes a pass updates (a power of two).
        #[arg(long, default_value_t = 64)]
        stride: usize,
        /// Mark the run as one phase for the VM's cache model.
        #[arg(long)]
        mark_phase: bool,
    },
    /// Marks a phase for the VM's cache model (the sky_cachesim plugin of
    /// `cargo xtask vm --cache-model`); a no-op anywhere else.
    CachePhase {
        #[arg(value_enum)]
        marker: cache_phase::Marker,
    },
    /// The cache model's known answer: one CPU reading an array every
    /// STRIDE bytes, PASSES times, inside one marked phase.
    CacheSweep {
        /// Array size, in KiB.
        #[arg(long)]
        kb: usize,
        /// Bytes between loads: a power of two from 8 to 4096.
        #[arg(long, default_value_t = 64)]
        stride: usize,
        #[arg(long, default_value_t = 4)]
        passes: u32,
        /// The CPU it runs on.
        #[arg(long, default_value_t = 0)]
        cpu: usize,
        /// The CPU of the warm-up pass [default: --cpu].
        #[arg(long)]
        warm_cpu: Option<usize>,
    },
    /// The tracepoint observer's known answer: processes named obs-check
    /// that burst, sleep, yield and hop CPUs, then block; prints each
    /// one's kernel counters (/proc/PID/sched, schedstat) and `obs-check
    /// ready`, and releases them once the --hold file exists.
    ObserverCheck {
        #[arg(long, default_value_t = 6)]
        procs: usize,
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        #[arg(long)]
        hold: std::path::PathBuf,
    },
    /// A wakeup storm: pairs of processes bouncing one byte over pipes;
    /// prints round trips and kernel-side migrations and timeslices
    /// (SIGINT/SIGTERM end it early, still printing).
    Pingpong {
        /// Number of process pairs.
        #[arg(long, default_value_t = 4)]
        pairs: usize,
        /// Run time, in seconds.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
    },
    /// What the loaded sched_ext scheduler's BPF callbacks cost, from the
    /// kernel's BPF statistics (turned on while it watches): per callback,
    /// runs and average nanoseconds. Needs root. Run it beside a workload,
    /// not during a run whose throughput is judged: the statistics slow
    /// every callback a little.
    BpfCost {
        /// How long to watch, in seconds.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
    },
    /// Keep N CPUs busy until SECONDS pass or SIGINT/SIGTERM comes; prints
    /// the iterations and their rate over the time it ran.
    Burn {
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Longest run time, in seconds.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
    },
    /// A memory-bound gang: THREADS threads walking one shared buffer of
    /// MB MiB (a dependent random chain) for SECONDS. Start it through a
    /// link named `mb-NAME` so the gang observer knows its tasks.
    Gang {
        #[arg(long, default_value_t = 3)]
        threads: usize,
        #[arg(long, default_value_t = 8)]
        mb: usize,
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Pin walker t to CPU LIST[t % len] (comma-separated), for
        /// placements set by hand.
        #[arg(long, value_name = "LIST", value_delimiter = ',')]
        cpus: Vec<usize>,
    },
    /// Everything that makes scheduling hard at once (CPU hogs, more
    /// spinners pinned to one CPU than it can run, affinity, nice and
    /// class churn, yield spinners, a fork storm); prints per kind the
    /// least progress and the longest run-queue wait (kernel counters).
    Hostile {
        #[arg(long, default_value_t = 30.0)]
        seconds: f64,
        /// Spinners pinned to --pin-cpu.
        #[arg(long, default_value_t = 6)]
        pinned: usize,
        #[arg(long, default_value_t = 2)]
        pin_cpu: usize,
        /// Threads of each churning kind.
        #[arg(long, default_value_t = 2)]
        per_kind: usize,
    },
    /// Overload: THREADS threads each computing WORK_US and sleeping
    /// SLEEP_US in a loop, for SECONDS (named `sleeper`); prints loops done,
    /// the least and median thread's, and the longest a thread went
    /// without finishing a loop.
    Sleepers {
        #[arg(long, default_value_t = 2000)]
        threads: usize,
        #[arg(long, default_value_t = 20)]
        work_us: u64,
        #[arg(long, default_value_t = 5)]
        sleep_us: u64,
        #[arg(long, default_value_t = 20.0)]
        seconds: f64,
        /// Once every thread is made (parked), say `sleepers: parked` on
        /// stderr and release them only on SIGUSR1: a scenario makes each
        /// process's threads before any load, then starts them when it
        /// wants (a second process joining a load already running).
        #[arg(long)]
        release_on_sigusr1: bool,
    },
    /// schbench-style requests: MESSAGE_THREADS post requests at a rate
    /// that needs LOAD of the CPUs to WORKERS each, which wake and compute
    /// WORK_US; prints wakeup and request latency percentiles and
    /// requests per second.
    Schbench {
        #[arg(long, default_value_t = 2)]
        message_threads: usize,
        /// Workers per message thread.
        #[arg(long, default_value_t = 8)]
        workers: usize,
        #[arg(long, default_value_t = 500)]
        work_us: u64,
        /// Share of the CPUs the requests need (0.5: half of each).
        #[arg(long, default_value_t = 0.5)]
        load: f64,
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
    },
    /// COUNT threads sleeping for SECONDS (small stacks).
    IdleThreads {
        #[arg(long, default_value_t = 10_000)]
        count: usize,
        #[arg(long, default_value_t = 30.0)]
        seconds: f64,
    },
    /// ENTRIES registry entries of this user naming space files that do
    /// not exist.
    FillRegistry {
        #[arg(long, default_value_t = 10_000)]
        entries: usize,
    },
    /// The round trip of REQUESTS statistics requests to the running
    /// scx_sky, EVERY_MS apart; prints the median and the longest.
    StatsLatency {
        #[arg(long, default_value_t = 40)]
        requests: usize,
        #[arg(long, default_value_t = 50)]
        every_ms: u64,
    },
    /// The share of one CPU each thread of process PID took over SECONDS
    /// (by thread name, and all together), from the kernel's schedstat.
    DaemonCpu {
        #[arg(long)]
        pid: u32,
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
    },
    /// Sends SIGTERM to PID (scx_sky) and prints how long until sched_ext
    /// was disabled and until the process was gone.
    TermLatency {
        #[arg(long)]
        pid: u32,
    },
    /// A hostile member of a shared space: joins as member ID, says it is
    /// memory-bound, and labels its slot with process VICTIM's pid and
    /// start time; holds the slot for SECONDS (SIGINT/SIGTERM end it
    /// early), then prints what it wrote.
    Relabel {
        /// The space's backing file.
        space: std::path::PathBuf,
        #[arg(long)]
        id: u32,
        #[arg(long)]
        victim: u32,
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
    },
    /// Spinners of different nice levels pinned to one CPU; prints their
    /// CPU-time ratio beside the ratio of their weights.
    Share {
        /// Nice levels, comma-separated (first vs last is compared).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "0,5",
            allow_hyphen_values = true
        )]
        nices: Vec<i32>,
        #[arg(long, default_value_t = 1)]
        cpu: usize,
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// The first thread alternates its nice level with the next one
        /// this often (milliseconds) while it spins.
        #[arg(long)]
        renice_first_every_ms: Option<f64>,
    },
    /// Exact run-queue waits of every task, from the kernel's scheduler
    /// tracepoints (tracefs), until SIGINT/SIGTERM or --seconds: per task
    /// group the count, p50, p99 and longest wait, and waits still open
    /// at the end. The same observer for EEVDF and any sched_ext
    /// scheduler. Needs root. Fails if the trace lost events.
    TraceWaits {
        /// Longest run time, in seconds.
        #[arg(long, default_value_t = 600.0)]
        seconds: f64,
        /// Trace buffer per CPU, in MiB: holds the events the reader has
        /// not read yet (about 30 s of a busy CPU in 16 MiB).
        #[arg(long, default_value_t = 16)]
        buffer_mb: u64,
        /// Also print each task of this group (repeatable): switch-ins and
        /// -outs, migrations, run time, to hold against /proc/PID/sched.
        #[arg(long, value_name = "GROUP")]
        tasks: Vec<String>,
    },
    /// A persistent-memory writer (SMT pairing's stall-heavy kind): random
    /// 256 B writes into a shared file mapping, each flushed (clflush) and
    /// fenced; prints the writes done. The process is named `pm-writer`.
    PmWrite {
        /// File to write: on a DAX mount of /dev/pmem0 for persistent
        /// memory, anywhere else for DRAM.
        #[arg(long)]
        file: std::path::PathBuf,
        /// Size of the region written at random, in MiB.
        #[arg(long, default_value_t = 64)]
        size_mb: u64,
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
    },
    /// A compute task (SMT pairing's execution-unit-heavy kind): an
    /// integer-division loop, a cache-resident matrix multiply or a
    /// memory-streaming matrix add; prints the rounds done (SIGINT/SIGTERM
    /// end it early, still printing). The process is named `cpu-<kind>`.
    Compute {
        #[arg(long, value_enum, default_value = "idiv")]
        kind: sky_workloads::smt_pair::ComputeKind,
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
    },
    /// Switch the running scx_sky's policy as fast as its control socket
    /// answers, cycling through POLICIES, for SECONDS; prints the switches
    /// made, their rate and latency, and the refusals. Needs root.
    PolicyStorm {
        /// Comma-separated presets or policy files to cycle through.
        #[arg(long, default_value = "sky1,vtime,sky1-strict")]
        policies: String,
        #[arg(long, default_value_t = 30.0)]
        seconds: f64,
        /// The scheduler's control socket directory.
        #[arg(long, default_value = sky_control::SOCKET_DIR)]
        control_dir: std::path::PathBuf,
        /// Switches sent in one write before their answers are read, on
        /// one connection.
        #[arg(long, default_value_t = 256)]
        window: usize,
        /// A connection per switch, as separate `scx_sky policy set`
        /// commands make, instead of one for the whole storm.
        #[arg(long)]
        connect_each: bool,
    },
    /// Benchmark: time from a live `policy set` to scx_sky's first BPF
    /// decision under the new policy, one switch at a time.
    SwitchLatency {
        /// Comma-separated presets or policy files to cycle through.
        #[arg(long, default_value = "sky1,vtime,sky1-strict")]
        policies: String,
        #[arg(long, default_value_t = 1000)]
        switches: usize,
        #[arg(long, default_value = sky_control::SOCKET_DIR)]
        control_dir: std::path::PathBuf,
    },
    /// Benchmark: switch the way scx_loader does, stopping the scheduler
    /// and starting it again with the next policy; time to its first BPF
    /// decision and time tasks spent outside sched_ext. The scheduler's
    /// command line follows `--` (`--policy NAME` is appended); no other
    /// sched_ext scheduler may be running.
    RestartLatency {
        /// Comma-separated presets or policy files to cycle through.
        #[arg(long, default_value = "sky1,vtime,sky1-strict")]
        policies: String,
        #[arg(long, default_value_t = 100)]
        restarts: usize,
        #[arg(long, default_value = sky_control::SOCKET_DIR)]
        control_dir: std::path::PathBuf,
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Misbehave on scx_sky's control socket: garbage, a request over the
    /// size limit, a silent client, a half-closed one, an unknown verb;
    /// prints what each got back (`refused` when it was an error answer).
    ControlAbuse {
        #[arg(long, default_value = sky_control::SOCKET_DIR)]
        control_dir: std::path::PathBuf,
    },
    /// The RDMA verbs of the queue between machines across one
    /// connection (rdma_verbs.rs): `--listen ADDR:PORT` serves, `--connect
    /// ADDR:PORT` drives the exchange.
    RdmaVerbs {
        #[arg(long, conflicts_with = "connect", required_unless_present = "connect")]
        listen: Option<std::net::SocketAddrV4>,
        #[arg(long)]
        connect: Option<std::net::SocketAddrV4>,
        /// How long the server waits for the client's done marker.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
    },
    /// Start N threads at once, each spinning briefly, and wait for all.
    Burst {
        #[arg(long, default_value_t = 10_000)]
        count: usize,
        /// Spin per thread, in microseconds.
        #[arg(long, default_value_t = 100)]
        spin_us: u64,
    },
}

fn secs(v: f64) -> Result<Duration> {
    if !v.is_finite() || !(0.0..=1e7).contains(&v) {
        anyhow::bail!("--seconds must be between 0 and 1e7, got {v}");
    }
    Ok(Duration::from_secs_f64(v))
}

/// How long this (single-threaded) workload has run on a CPU since it got
/// its name, by the kernel's count: what a scheduler's run time for the
/// class a name hint gives is held against (under TCG the exec before the
/// name takes a good part of a second).
struct RunClock(u64);

impl RunClock {
    fn start() -> Result<Self> {
        Ok(RunClock(sky_proc::SchedStat::of_self()?.run_ns))
    }

    fn ms(&self) -> Result<u64> {
        let now = sky_proc::SchedStat::of_self()?.run_ns;
        Ok(now.saturating_sub(self.0) / 1_000_000)
    }
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        eprintln!("sky-work: error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::CacheLoop {
            procs,
            array_kb,
            burst_us,
            sleep_us,
            seconds,
            stride,
            mark_phase,
        } => {
            let cfg = CacheLoop {
                procs,
                array_bytes: array_kb.saturating_mul(1024),
                burst: Duration::from_micros(burst_us),
                sleep: Duration::from_micros(sleep_us),
                duration: secs(seconds)?,
                stride,
                mark_phase,
            };
            stop::on_signals()?;
            println!("{}", cfg.run()?.line());
        }
        Command::CachePhase { marker } => cache_phase::mark(marker),
        Command::ObserverCheck {
            procs,
            seconds,
            hold,
        } => sky_workloads::observer_check::ObserverCheck {
            procs,
            duration: secs(seconds)?,
            hold,
        }
        .run()?,
        Command::CacheSweep {
            kb,
            stride,
            passes,
            cpu,
            warm_cpu,
        } => {
            let sweep = cache_phase::Sweep {
                bytes: kb.saturating_mul(1024),
                stride,
                passes,
                cpu,
                warm_cpu,
            };
            println!("{}", sweep.run()?);
        }
        Command::Pingpong { pairs, seconds } => {
            let cfg = PingPong {
                pairs,
                duration: secs(seconds)?,
            };
            stop::on_signals()?;
            println!("{}", cfg.run()?.line());
        }
        Command::BpfCost { seconds } => {
            let costs = sky_workloads::bpf_cost::watch(secs(seconds)?)?;
            println!("{}", sky_workloads::bpf_cost::line(&costs, seconds));
        }
        Command::Gang {
            threads,
            mb,
            seconds,
            cpus,
        } => {
            // Started by `scx_sky pvas run`: a member of its space until it
            // exits, so the scheduler sees the space's processes as one gang.
            let member = std::env::var_os("SKY_PVAS_PATH")
                .map(|_| sky_pvas::Space::attach_from_env())
                .transpose()?;
            let run = secs(seconds)?;
            let loads = threads::shared_walk(threads, mb, run, &cpus)?;
            println!(
                "result workload=gang threads={threads} mb={mb} loads={loads} loads_per_s={:.0}",
                loads as f64 / run.as_secs_f64()
            );
            // The kernel lets the slot go with the process.
            std::mem::forget(member);
        }
        Command::Burn { threads, seconds } => {
            stop::on_signals()?;
            let burned = threads::burn(threads, secs(seconds)?, stop::flag()?)?;
            let ran = burned.elapsed.as_secs_f64();
            println!(
                "result workload=burn threads={threads} seconds={ran:.2} iterations={} \
                 iterations_per_s={:.0}",
                burned.iterations,
                burned.iterations as f64 / ran.max(1e-3)
            );
        }
        Command::Sleepers {
            threads,
            work_us,
            sleep_us,
            seconds,
            release_on_sigusr1,
        } => {
            let report = sky_workloads::sleepers::run(
                threads,
                Duration::from_micros(work_us),
                Duration::from_micros(sleep_us),
                release_on_sigusr1,
                secs(seconds)?,
            )?;
            println!("{}", report.line());
        }
        Command::Schbench {
            message_threads,
            workers,
            work_us,
            load,
            seconds,
        } => {
            let bench = sky_workloads::schbench::Schbench {
                message_threads,
                workers,
                work: Duration::from_micros(work_us),
                load,
                run: secs(seconds)?,
            };
            println!("{}", bench.run()?.line(load));
        }
        Command::IdleThreads { count, seconds } => {
            sky_workloads::daemon_probe::idle_threads(count, secs(seconds)?)?;
            println!("result workload=idle-threads count={count}");
        }
        Command::FillRegistry { entries } => {
            let dir = sky_workloads::daemon_probe::fill_registry(entries)?;
            println!(
                "result workload=fill-registry entries={entries} dir={}",
                dir.display()
            );
        }
        Command::StatsLatency { requests, every_ms } => {
            let mut times = sky_workloads::daemon_probe::stats_latency(
                requests,
                Duration::from_millis(every_ms),
            )?;
            times.sort();
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            println!(
                "result workload=stats-latency requests={} p50_ms={:.1} max_ms={:.1}",
                times.len(),
                ms(times[times.len() / 2]),
                ms(*times.last().unwrap_or(&Duration::ZERO))
            );
        }
        Command::DaemonCpu { pid, seconds } => {
            let shares = sky_workloads::daemon_probe::daemon_cpu(pid, secs(seconds)?)?;
            let fields: Vec<String> = shares
                .iter()
                .map(|(name, share)| format!("{}={share:.4}", name.replace([' ', '='], "_")))
                .collect();
            println!("result workload=daemon-cpu pid={pid} {}", fields.join(" "));
        }
        Command::TermLatency { pid } => {
            let t = sky_workloads::daemon_probe::term_latency(pid, Duration::from_secs(30))?;
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            println!(
                "result workload=term-latency detached_ms={:.1} disabled_ms={:.1} exit_ms={:.1}",
                ms(t.left_enabled),
                ms(t.disabled),
                ms(t.gone)
            );
        }
        Command::Relabel {
            space,
            id,
            victim,
            seconds,
        } => {
            stop::on_signals()?;
            let forged = sky_workloads::relabel::relabel(&space, id, victim, secs(seconds)?)?;
            println!("result workload=relabel id={id} victim={victim} label={forged:#x}");
        }
        Command::Hostile {
            seconds,
            pinned,
            pin_cpu,
            per_kind,
        } => {
            let h = Hostile {
                duration: secs(seconds)?,
                pinned,
                pin_cpu,
                per_kind,
            };
            let reports = h.run()?;
            for r in &reports {
                println!("{}", r.line());
            }
            let worst = reports.iter().map(|r| r.waits.max_ns).max().unwrap_or(0);
            let stalled = reports.iter().filter(|r| r.min_progress == 0).count();
            println!(
                "result workload=hostile kinds={} stalled_kinds={stalled} max_wait_us={}",
                reports.len(),
                worst / 1000
            );
        }
        Command::Share {
            nices,
            cpu,
            seconds,
            renice_first_every_ms,
        } => {
            let every = match renice_first_every_ms {
                Some(ms) if ms.is_finite() && ms > 0.0 && ms <= 1e6 => {
                    Some(Duration::from_secs_f64(ms / 1000.0))
                }
                Some(ms) => anyhow::bail!(
                    "--renice-first-every-ms must be above 0 and at most 1e6, got {ms}"
                ),
                None => None,
            };
            println!("{}", share::run(&nices, cpu, secs(seconds)?, every)?.line())
        }
        Command::TraceWaits {
            seconds,
            buffer_mb,
            tasks,
        } => trace_waits(secs(seconds)?, buffer_mb, &tasks)?,
        Command::PmWrite {
            file,
            size_mb,
            seconds,
        } => {
            let duration = secs(seconds)?;
            sky_workloads::set_comm("pm-writer")?;
            let named = RunClock::start()?;
            let writes = sky_workloads::smt_pair::pm_write(&file, size_mb, duration)?;
            println!(
                "result workload=pm-write size_mb={size_mb} writes={writes} writes_per_s={:.0} run_ms={}",
                writes as f64 / seconds.max(1e-9),
                named.ms()?
            );
        }
        Command::Compute { kind, seconds } => {
            let duration = secs(seconds)?;
            let name = format!("{kind:?}").to_lowercase();
            sky_workloads::set_comm(&format!("cpu-{name}"))?;
            stop::on_signals()?;
            let named = RunClock::start()?;
            let began = Instant::now();
            let rounds = sky_workloads::smt_pair::compute(kind, duration);
            println!(
                "result workload=compute kind={name} rounds={rounds} rounds_per_s={:.1} run_ms={}",
                rounds as f64 / began.elapsed().as_secs_f64().max(1e-9),
                named.ms()?
            );
        }
        Command::PolicyStorm {
            policies,
            seconds,
            control_dir,
            window,
            connect_each,
        } => println!(
            "{}",
            sky_workloads::control::storm(
                &policies,
                secs(seconds)?,
                &control_dir,
                window,
                connect_each
            )?
        ),
        Command::SwitchLatency {
            policies,
            switches,
            control_dir,
        } => println!(
            "{}",
            sky_workloads::switch_latency::live(&policies, switches, &control_dir)?
        ),
        Command::RestartLatency {
            policies,
            restarts,
            control_dir,
            cmd,
        } => println!(
            "{}",
            sky_workloads::switch_latency::restart(&policies, restarts, &control_dir, &cmd)?
        ),
        Command::ControlAbuse { control_dir } => {
            println!("{}", sky_workloads::control::abuse(&control_dir))
        }
        Command::RdmaVerbs {
            listen,
            connect,
            seconds,
        } => {
            let line = match (listen, connect) {
                (Some(addr), _) => {
                    sky_workloads::rdma_verbs::serve(addr, Duration::from_secs(seconds))?
                }
                (None, Some(addr)) => sky_workloads::rdma_verbs::drive(addr)?,
                (None, None) => anyhow::bail!("give --listen or --connect"),
            };
            println!("{line}");
        }
        Command::Burst { count, spin_us } => {
            let t = Instant::now();
            let ran = threads::burst(count, Duration::from_micros(spin_us))?;
            println!(
                "result workload=burst threads={ran} elapsed_ms={}",
                t.elapsed().as_millis()
            );
        }
    }
    Ok(())
}

fn trace_waits(limit: Duration, buffer_mb: u64, task_groups: &[String]) -> Result<()> {
    if !(1..=1024).contains(&buffer_mb) {
        anyhow::bail!("--buffer-mb must be between 1 and 1024, got {buffer_mb}");
    }
    stop::on_signals()?;
    let tracer = tracefs::Tracer::start(buffer_mb * 1024)?;
    eprintln!("sky-work: tracing scheduler events");
    let start = Instant::now();
    while start.elapsed() < limit && !stop::requested() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let book = tracer.finish()?;
    for line in book.lines() {
        println!("{line}");
    }
    for group in task_groups {
        for line in book.placement.task_lines(group) {
            println!("{line}");
        }
    }
    for (pid, comm, ns) in book.open_waits().into_iter().take(5) {
        println!(
            "result observer=trace open pid={pid} comm={comm} wait_us={}",
            ns / 1000
        );
    }
    trace_waits::complete(&book)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(args: &[&str]) -> String {
        let cli = Cli::try_parse_from(std::iter::once("sky-work").chain(args.iter().copied()))
            .expect("arguments parse");
        run(cli).expect_err("bad input accepted").to_string()
    }

    #[test]
    fn pingpong_refuses_bad_arguments_naming_the_option() {
        assert!(refusal(&["pingpong", "--pairs", "0"]).contains("--pairs"));
        assert!(refusal(&["pingpong", "--seconds", "0"]).contains("--seconds"));
        assert!(refusal(&["pingpong", "--seconds=-1"]).contains("--seconds"));
        let Err(err) = Cli::try_parse_from(["sky-work", "pingpong", "--pairs", "x"]) else {
            panic!("--pairs x accepted");
        };
        assert!(err.to_string().contains("--pairs"), "{err}");
    }
}
