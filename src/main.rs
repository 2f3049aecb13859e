//! scx_sky: parses the command line and hands off. The scheduler lives in
//! scheduler.rs, the subcommands in cmd/, the BPF side in bpf/.

mod bpf;
mod bss;
mod cli;
mod cmd;
mod control_thread;
mod counters;
mod feeds;
mod live_policy;
mod map_values;
mod pmu_cpus;
mod scheduler;
mod verifier_cost;
mod wakeup;

use anyhow::Result;
use clap::FromArgMatches;
use cli::Cli;
use scheduler::Scheduler;
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;

fn main() {
    let matches = cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let level = if cli.run.verbose {
        cli.run.log_level.max(log::LevelFilter::Debug)
    } else {
        cli.run.log_level
    };
    let _ = simplelog::TermLogger::init(
        level,
        simplelog::ConfigBuilder::new()
            .set_time_level(simplelog::LevelFilter::Error)
            .set_target_level(simplelog::LevelFilter::Off)
            .set_thread_level(simplelog::LevelFilter::Off)
            .build(),
        simplelog::TerminalMode::Stderr,
        simplelog::ColorChoice::Never,
    );
    if let Err(e) = dispatch(cli) {
        eprintln!("scx_sky: error: {e:#}");
        std::process::exit(1);
    }
}

fn dispatch(cli: Cli) -> Result<()> {
    if cli.run.help_stats {
        // From the shared header's descriptions and the stats catalog, so
        // the list cannot drift from what is counted and served.
        print!("{}", counters::describe());
        return Ok(());
    }
    let control_dir = cli.control_dir().to_path_buf();
    let dir_named = cli.control_dir.is_some();
    match cli.command {
        None => match cli.run.monitor {
            Some(secs) => cmd::stats::monitor(
                cli.run.stats_socket.as_deref(),
                cli::seconds("monitor", secs)?,
            ),
            None => run_scheduler(&cli.run, &control_dir),
        },
        Some(command) => cmd::run(command, &cli.run, &control_dir, dir_named),
    }
}

/// Loads the scheduler and keeps it running, reloading when the kernel
/// asks for a restart (e.g. a CPU came online in an unknown cache domain).
/// The control socket and the running policy outlive reloads; SIGHUP
/// re-reads the policy.
fn run_scheduler(opts: &cli::RunOpts, control_dir: &std::path::Path) -> Result<()> {
    let wakeup = wakeup::Wakeup::new()?;
    let shutdown = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        wakeup.on_signal(signal, shutdown.clone())?;
    }
    let reread = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    wakeup.on_signal(signal_hook::consts::SIGHUP, reread.clone())?;
    let live = live_policy::Switcher::new(scheduler::start_policy(opts)?);
    let mut open_object = MaybeUninit::uninit();
    // Bound once attached, kept across reloads, removed on the way out.
    let mut control = None;
    // Served while this function runs.
    let mut _dbus = None;
    loop {
        let mut sched = Scheduler::init(opts, &live, &wakeup, &mut open_object)?;
        if control.is_none() {
            control = control_thread::start(control_dir, live.clone(), wakeup.clone());
            if !opts.no_dbus {
                _dbus = control_thread::start_dbus(live.clone(), wakeup.clone());
            }
        }
        let exit = sched.run(&shutdown, &reread, &opts.policy)?;
        if shutdown.load(Ordering::Relaxed) || !exit.should_restart() {
            return Ok(());
        }
        log::info!("restarting at the kernel's request");
    }
}
