//! Command line of `scx_sky`.

use crate::bpf::intf;
use clap::builder::TypedValueParser as _;
use clap::{Args, CommandFactory, Parser, Subcommand};
use std::sync::OnceLock;

#[derive(Debug, Parser)]
#[command(
    name = "scx_sky",
    about = "sched_ext scheduler: SKY-1 cache affinity on cache-domain queues",
    long_about = "scx_sky keeps each task on the CPU whose caches still hold its data \
                  (SKY-1 last-CPU affinity with two-level decay thresholds) while never \
                  leaving a CPU idle when work waits. Run as root on a kernel with \
                  sched_ext (CONFIG_SCHED_CLASS_EXT=y); Ctrl-C or SIGTERM unloads it."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunOpts,
    /// Directory of the running scheduler's control socket (root-only;
    /// default /run/scx_sky). Named, `policy` uses it even when not root
    /// instead of the D-Bus service.
    #[arg(long, global = true, value_name = "DIR")]
    pub control_dir: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the policies a name finds, in lookup order: files in
    /// /etc/scx_sky/policies/, then the installed presets
    /// (share/scx_sky/policies/ beside the binary, /usr/share/scx_sky/policies/),
    /// then the ones compiled in from scheds/.
    Policies,
    /// Switch the running scheduler's policy, or show it, without a
    /// reload: root through its control socket, anyone else through its
    /// D-Bus service (org.scx.Sky; a switch by name, as polkit allows).
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Watch the running scheduler in the terminal: cache domains, cores
    /// and threads with what runs on each, the busiest tasks (s sorts),
    /// the policy and its generation (p switches to the next; root), and
    /// sparklines of last-CPU share, wait and moves. q quits.
    Top {
        /// Print one 80x24 screen as text (from three looks a second apart)
        /// instead of running interactively.
        #[arg(long)]
        snapshot: bool,
    },
    /// Read the running scheduler's statistics from its scx_stats socket:
    /// the totals since it attached, or with --watch what grew every
    /// SECS.
    Stats {
        /// Print the sample as JSON.
        #[arg(long, conflicts_with_all = ["openmetrics", "meta"])]
        json: bool,
        /// Print the totals as OpenMetrics text (for scraping).
        #[arg(long, conflicts_with_all = ["watch", "meta"])]
        openmetrics: bool,
        /// Print every statistic with its description (stats_meta).
        #[arg(long, conflicts_with = "watch")]
        meta: bool,
        /// Print what grew every SECS seconds until interrupted.
        #[arg(long, value_name = "SECS")]
        watch: Option<f64>,
    },
    /// The running scheduler's shared-cache gangs: each cache domain's
    /// state (empty, clean, dirty) and gangs, and each gang's members,
    /// whether it is memory-bound and why, its home and why it is there.
    Gangs {
        /// Only the gang of this process (or thread) ID.
        #[arg(long, value_name = "PID")]
        pid: Option<u32>,
        /// Print the answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Shared spaces: create, run a member, list, destroy.
    #[command(subcommand)]
    Pvas(PvasCommand),
    /// Replay a per-task counter stream through the task classifier and
    /// print every class change and the final classes: how a policy's
    /// `[classify]` thresholds judge recorded (or synthetic) counters,
    /// without a PMU or root.
    Classify {
        /// A CSV stream (see userspace/classify/src/replay.rs for the
        /// format) or the name of a shipped one: compute, pm-writer,
        /// memory-streamer, phase-change.
        #[arg(long, value_name = "FILE|NAME")]
        replay: String,
        /// Policy whose `[classify]` thresholds judge it: a preset name or
        /// a TOML file.
        #[arg(short, long, default_value = "sky1")]
        policy: String,
        /// Class hint, `[comm:|cgroup:|pid:]PATTERN=CLASS` (repeatable;
        /// classes: compute, pm-writer, memory-bound, unknown): a task whose
        /// name matches the glob gets the class whatever its counters say.
        /// Tried before the policy's `[[class_rule]]` tables.
        #[arg(long = "class", value_name = "RULE")]
        classes: Vec<String>,
    },
    /// Show the CPU topology and the decay thresholds derived from it.
    Topology {
        /// Cache refill rate per CPU, in MB/s (see --cache-fill-mbps).
        #[arg(long, default_value_t = 1000)]
        cache_fill_mbps: u64,
    },
    /// Print the completion script of SHELL, e.g.
    /// `scx_sky completions bash > /usr/share/bash-completion/completions/scx_sky`.
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Write the man pages (scx_sky.8, and scx_sky-COMMAND.8 for each
    /// subcommand) into DIR.
    Manpages {
        /// The directory to write them into (created if missing).
        dir: std::path::PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum PvasCommand {
    /// Create a space: one address range every member maps at the same
    /// address, cut into one segment per member ID.
    Create {
        /// Space name (letters, digits, '-', '_', '.').
        name: String,
        /// Most members (IDs 1..=N).
        #[arg(long, default_value_t = 8)]
        members: u32,
        /// Segment size per member, in MiB (a multiple of 2).
        #[arg(long, default_value_t = 32)]
        segment_mb: u64,
        /// Directory of the backing file, e.g. a DAX mount for persistent memory.
        #[arg(long, default_value = "/dev/shm")]
        dir: std::path::PathBuf,
        /// Let the file's group attach (mode 0660 instead of 0600).
        #[arg(long)]
        group: bool,
    },
    /// Run PROG as member ID of a space: the ID is reserved for this
    /// process, which then becomes PROG with SKY_PVAS_PATH and SKY_PVAS_ID
    /// set (PROG attaches with sky_pvas_attach_env()).
    Run {
        /// Space name.
        name: String,
        /// Member ID to run as.
        #[arg(long)]
        id: u32,
        #[arg(long, default_value = "/dev/shm")]
        dir: std::path::PathBuf,
        /// Program and arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// List spaces and their live members (PM writers marked).
    Ls,
    /// Destroy a space: members' waits fail, the backing file goes.
    Destroy {
        name: String,
        #[arg(long, default_value = "/dev/shm")]
        dir: std::path::PathBuf,
        /// Also send SIGTERM to live members.
        #[arg(long)]
        kill: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Switch to a policy by name or, as root, a policy file. The policy
    /// is validated whole before anything changes; a bad one is refused,
    /// naming the field, and the running policy stays.
    Set {
        /// Policy name (see `scx_sky policies`) or policy TOML file.
        policy: String,
    },
    /// The running policy, its generation and every knob.
    Get,
    /// The presets the running scheduler knows.
    List,
}

#[derive(Debug, Args)]
pub struct RunOpts {
    /// Policy: a preset name (sky1, vtime) or the path of a policy TOML file.
    #[arg(short, long, default_value = "sky1")]
    pub policy: String,

    /// Rate at which one running CPU pulls new data into its caches, in
    /// MB/s: the pressure rule counts run time x this rate; the sleep
    /// rule's thresholds are cache size / (sharing CPUs x this rate).
    #[arg(long, value_name = "MBPS", default_value_t = 1000)]
    pub cache_fill_mbps: u64,

    /// Every policy knob, as an option (sky_policy's knob list).
    #[command(flatten)]
    pub knobs: sky_policy::Overrides,

    /// Gang rule, `FORM[=HINT]` (repeatable): `cgroup:GLOB`, `space:GLOB`,
    /// `comm:GLOB` or `pid:N,N,...` makes a gang of the matching tasks
    /// (each cgroup, each space, all matching processes, those processes);
    /// HINT is `memory-bound`, `not-memory-bound` or `auto` (the default:
    /// memory-bound if a thread's class says so). Tried before the
    /// policy's `[[gang_rule]]` tables. With none matching, the threads of
    /// one process are a gang.
    #[arg(long = "gang", value_name = "RULE")]
    pub gang_rules: Vec<String>,

    /// The scx_stats socket the scheduler serves statistics on, and
    /// `stats`/`--monitor` read (default: the scx one,
    /// /var/run/scx/root/stats).
    #[arg(long, global = true, value_name = "PATH")]
    pub stats_socket: Option<std::path::PathBuf>,

    /// Do not load a scheduler: print the running one's statistics every
    /// SECS seconds, as the other scx schedulers' --monitor does, waiting
    /// for it to start (and to come back if it restarts).
    #[arg(long, value_name = "SECS")]
    pub monitor: Option<f64>,

    /// Log a statistics line every SECS seconds (0: none, only the totals
    /// at exit). `scx_sky stats` and `--monitor` read them on demand.
    #[arg(
        short = 'i',
        long = "stats",
        visible_alias = "stats-interval",
        value_name = "SECS",
        default_value_t = 0.0
    )]
    pub stats_interval: f64,

    /// Print every statistic and what it counts, and exit.
    #[arg(long)]
    pub help_stats: bool,

    /// What the log says: `info` (the default) gives the start, policy
    /// switches, warnings and a summary of class and gang changes at most
    /// once a minute; `debug` gives every class and gang change as it
    /// happens.
    #[arg(long, value_name = "LEVEL", default_value = "info",
          value_parser = clap::builder::PossibleValuesParser::new(LOG_LEVELS)
              .map(|level| level.parse::<log::LevelFilter>().unwrap_or(log::LevelFilter::Info)))]
    pub log_level: log::LevelFilter,

    /// Exit after this many seconds (0: run until interrupted).
    #[arg(long, value_name = "SECS", default_value_t = 0.0)]
    pub run_for: f64,

    /// Class hint, `[comm:|cgroup:|pid:]PATTERN=CLASS` (repeatable; classes:
    /// compute, pm-writer, memory-bound, unknown): tasks whose name,
    /// cgroup or pid match get the class, checked every 100 ms; tried
    /// before the policy's `[[class_rule]]` tables. Run time per class
    /// shows in the statistics.
    #[arg(long = "class", value_name = "RULE")]
    pub classes: Vec<String>,

    /// Where task classes are measured: `auto` opens the hardware PMU's
    /// counters (cycles, instructions, LLC misses, stall cycles, stores,
    /// as the CPU offers them) and classes every task from what it
    /// counts, or logs that there is no PMU and uses hints alone; `off`
    /// uses hints alone; `software` stands software events in for the
    /// hardware ones (clocks for cycles and instructions, page faults for
    /// LLC misses), to test the plumbing where there is no PMU: every busy
    /// task then looks like compute.
    #[arg(long, value_name = "SOURCE", default_value_t = sky_classify::pmu::PmuSource::Auto)]
    pub pmu: sky_classify::pmu::PmuSource,

    /// Write every task's PMU counts per 100 ms period to FILE as a
    /// counter stream, to judge again with other `[classify]` thresholds:
    /// `scx_sky classify --replay FILE -p tuned.toml`.
    #[arg(long, value_name = "FILE")]
    pub record_counters: Option<std::path::PathBuf>,

    /// Most threads the daemon can give a class at once (the class and
    /// counter maps' size). Beyond it, BPF's name hints still apply; the
    /// log says when the map fills and when it has room again.
    #[arg(long, value_name = "N", default_value_t = intf::sky_consts_SKY_CLASSED_MAX,
          value_parser = clap::value_parser!(u32).range(16..=1 << 22))]
    pub max_classed: u32,

    /// Most gangs with a home, and most processes in gangs of several (the
    /// gang maps' size); the log says when they fill.
    #[arg(long, value_name = "N", default_value_t = intf::sky_consts_SKY_GANGS_MAX,
          value_parser = clap::value_parser!(u32).range(4..=1 << 22))]
    pub max_ganged: u32,

    /// libbpf's open options, as the other scx schedulers take them.
    #[command(flatten)]
    pub libbpf: scx_utils::libbpf_clap_opts::LibbpfOpts,

    /// Size of the debug dump printed if the scheduler is ejected (0: default).
    #[arg(long, default_value_t = 0)]
    pub exit_dump_len: u32,

    /// Do not serve the policy on the system bus (`org.scx.Sky`: get,
    /// list, and switches polkit allows to users who are not root).
    #[arg(long)]
    pub no_dbus: bool,

    /// Log libbpf and verifier output (and everything `--log-level debug`
    /// logs).
    #[arg(short, long)]
    pub verbose: bool,

    /// Log what each BPF program cost the verifier as it loaded
    /// (instructions processed, total and peak states: veristat's
    /// figures), to compare builds and kernels.
    #[arg(long)]
    pub verifier_stats: bool,
}

impl Cli {
    /// `--control-dir`, or the default.
    pub fn control_dir(&self) -> &std::path::Path {
        self.control_dir
            .as_deref()
            .unwrap_or(std::path::Path::new(sky_control::SOCKET_DIR))
    }
}

/// `--log-level`'s choices (each a `log::LevelFilter` name).
const LOG_LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// The command line as parsed, completions and man pages are made from:
/// with the full version (as the scx schedulers give it: the package
/// version, the git revision built, the target).
pub fn command() -> clap::Command {
    Cli::command()
        .version(version())
        .after_long_help("`scx_sky --help-stats` lists the statistics and what each counts.")
}

/// `0.1.0-g1234abcd x86_64-unknown-linux-gnu`: scx_utils' full version of
/// this package's version and the revision build.rs found.
pub fn version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let revision = env!("SKY_GIT_REVISION");
        let semver = if revision.is_empty() {
            env!("CARGO_PKG_VERSION").to_string()
        } else {
            format!("{}-{revision}", env!("CARGO_PKG_VERSION"))
        };
        scx_utils::build_id::full_version(&semver)
    })
}

/// Seconds given on the command line, checked: clap parses the number but
/// not whether it is a usable duration.
pub fn seconds(name: &str, value: f64) -> anyhow::Result<std::time::Duration> {
    if !value.is_finite() || !(0.0..=1e9).contains(&value) {
        anyhow::bail!("--{name} must be a number of seconds from 0 to 1e9, got {value}");
    }
    Ok(std::time::Duration::from_secs_f64(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn every_option_is_documented() {
        let cmd = Cli::command();
        cmd.clone().debug_assert();
        for arg in cmd.get_arguments() {
            if ["help", "version"].contains(&arg.get_id().as_str()) {
                continue;
            }
            assert!(arg.get_help().is_some(), "--{} has no help", arg.get_id());
        }
    }

    #[test]
    fn options_parse_and_bad_values_are_named() {
        let cli = Cli::try_parse_from([
            "scx_sky",
            "-p",
            "vtime",
            "--decay-core-us",
            "300",
            "--decay",
            "sleep",
        ])
        .unwrap();
        assert_eq!(cli.run.policy, "vtime");
        assert_eq!(cli.run.knobs.decay_core_us, Some(300));
        assert_eq!(cli.run.knobs.decay, Some(sky_policy::DecayRule::Sleep));
        let err = Cli::try_parse_from(["scx_sky", "--decay", "clock"]).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("clock") && msg.contains("pressure"), "{msg}");
        assert!(cli.command.is_none());
        let err = Cli::try_parse_from(["scx_sky", "--walk-depth", "many"]).unwrap_err();
        assert!(err.to_string().contains("--walk-depth"), "{err}");
        assert!(matches!(
            Cli::try_parse_from(["scx_sky", "policies"])
                .unwrap()
                .command,
            Some(Command::Policies)
        ));
    }

    #[test]
    fn durations_are_checked() {
        assert_eq!(seconds("x", 1.5).unwrap().as_millis(), 1500);
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let e = seconds("stats-interval", bad).unwrap_err().to_string();
            assert!(e.contains("--stats-interval"), "{e}");
        }
    }
}
