//! The evaluation's scenarios: what each boots (topology, cache model),
//! which workload tests/vm/eval.sh runs for it, and which figures its
//! tables and plots show.

use super::figures::{Boot, Run};
use super::plot;
use super::render::{self, Column, Unit};
use super::roster::{Kind, Sched};
use super::targets;
use crate::cachesim::{self, CacheModel};
use crate::markdown::Table;
use crate::vm::CpuTopology;
use anyhow::Result;
use clap::ValueEnum;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// SKY-1's experiment: 2 processes per CPU on 4 CPUs, 4 KB arrays,
    /// short bursts and sleeps; placement from the observer, miss rates
    /// from the cache model (SKY-1's 512 KB direct-mapped cache of 16-byte
    /// lines, and its sweep from 8 KB).
    Sky1,
    /// Wake-up latency under a mixed load: a CPU hog per CPU and two
    /// ping-pong pairs; wakeup-to-running p50/p99/max from the observer.
    Latency,
    /// SKY-1's arrays, a hog per CPU and two ping-pong pairs at once:
    /// the arrays' placement and the pairs' wake-ups, each by group.
    Mixed,
    /// schbench-style requests (`sky-work schbench`) at half and nine
    /// tenths of the CPUs: wakeup and request latency, requests per second.
    Schbench,
    /// Scheduler overhead: a hackbench-style ping-pong storm's throughput,
    /// and what the BPF callbacks cost (the kernel's BPF statistics).
    Overhead,
    /// Seed 000: two PM writers and two compute tasks on 2 cores x 2
    /// threads; the share of PM-writer time beside a compute sibling.
    Smt,
    /// Seed 003: one memory-bound gang of 3 threads and 2 compute tasks on
    /// two sockets; All share, Dirty, LLC miss rate (cache model).
    Gangs1,
    /// The same with two gangs: only one fits a socket's LLC.
    Gangs2,
    /// The same with four gangs: more gangs than sockets.
    Gangs4,
    /// Seeds 004 and 002 on sky_pvas: one-copy against two-copy messaging
    /// and the persistent queue's push against pull, the two members
    /// placed by the scheduler, on emulated persistent memory (DAX).
    Pvas,
}

/// Fewer wakeups than this in a schbench run make no percentiles.
const SCHBENCH_MIN_WAKEUPS: f64 = 100.0;

/// SKY-1's arrays (`sky-work cache-loop`): work, and where they ran.
fn arrays_columns(prefix: &str, seconds: f64) -> Vec<Column> {
    vec![
        Column::new(
            &format!("{prefix}work"),
            Unit::PerSec,
            true,
            move |r: &Run| Some(r.workload("cache-loop", "passes")? / seconds),
        ),
        Column::new(
            &format!("{prefix}last-CPU share"),
            Unit::Share,
            false,
            |r: &Run| r.placement("cache-loop", "last_cpu_share"),
        ),
        Column::new(
            &format!("{prefix}migrations"),
            Unit::PerSec,
            true,
            move |r: &Run| Some(r.placement("cache-loop", "migrations")? / seconds),
        ),
    ]
}

/// Ping-pong pairs among hogs: the pairs' wake-ups and work, the hogs'.
fn pingpong_columns(prefix: &str) -> Vec<Column> {
    vec![
        Column::new(&format!("{prefix}wake p50"), Unit::Us, true, |r: &Run| {
            r.placement("pingpong", "wake_p50_us")
        }),
        Column::new(&format!("{prefix}wake p99"), Unit::Us, true, |r: &Run| {
            r.placement("pingpong", "wake_p99_us")
        }),
        Column::new("round trips", Unit::PerSec, true, |r: &Run| {
            r.workload("pingpong", "round_trips_per_s")
        }),
        Column::new("hog work", Unit::PerSec, true, |r: &Run| {
            r.workload("burn", "iterations_per_s")
        }),
    ]
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Sky1 => "sky1",
            Scenario::Latency => "latency",
            Scenario::Mixed => "mixed",
            Scenario::Schbench => "schbench",
            Scenario::Overhead => "overhead",
            Scenario::Smt => "smt",
            Scenario::Gangs1 => "gangs1",
            Scenario::Gangs2 => "gangs2",
            Scenario::Gangs4 => "gangs4",
            Scenario::Pvas => "pvas",
        }
    }

    /// tests/vm/eval.sh's workload (`wl_NAME`) and its EVAL_ARG.
    pub fn workload(self) -> (&'static str, Option<u32>) {
        match self {
            Scenario::Gangs1 => ("gangs", Some(1)),
            Scenario::Gangs2 => ("gangs", Some(2)),
            Scenario::Gangs4 => ("gangs", Some(4)),
            s => (s.name(), None),
        }
    }

    /// What scx_sky is told about the tasks, as a user would tell it
    /// (class rules by name); the anchors have no such input.
    pub fn sky_args(self) -> &'static str {
        match self {
            Scenario::Smt => "--class pm-writer=pm-writer --class cpu-*=compute",
            Scenario::Gangs1 | Scenario::Gangs2 | Scenario::Gangs4 => "--class mb-*=memory-bound",
            _ => "",
        }
    }

    /// Rows measured under EEVDF with a placement set by hand, as the
    /// seed's own comparison: gangs pinned All in one socket, or Partial
    /// (two walkers on one socket, the third on the other).
    pub fn references(self) -> &'static [Kind] {
        match self {
            Scenario::Gangs1 | Scenario::Gangs2 | Scenario::Gangs4 => {
                &[Kind::Pinned("all"), Kind::Pinned("partial")]
            }
            _ => &[],
        }
    }

    /// Emulated persistent memory the scenario's boot needs, in MiB.
    pub fn pmem_mb(self) -> Option<u32> {
        (self == Scenario::Pvas).then_some(1024)
    }

    /// How to read the scenario's tables.
    pub fn about_text(self) -> &'static str {
        match self {
            Scenario::Sky1 => {
                "SKY-1's experiment (seed 001): twice as many processes as CPUs, each \
                 computing over its own 4 KB array in 2 ms bursts with 0.2 ms sleeps, all \
                 started at once from one CPU and started anew every run. *work*: passes over \
                 the arrays per second (TCG: the one host thread's time-sharing, not cache \
                 speed); *last-CPU share*, *migrations* and *wake p99* (wakeup to running) \
                 come from the sched tracepoints, the same observer for every scheduler; \
                 *miss rate*: the cache model's user-space data misses over accesses, in \
                 SKY-1's simulated cache (512 KB direct-mapped per CPU, 16-byte lines, \
                 write-invalidate). The paper measured 9.25 % (conventional) against 5.64 % \
                 (SKY-1) with its tracer; compare the ratios, not the levels: the paper's \
                 baseline was a global queue without affinity (closest here: `-p vtime`), and \
                 EEVDF keeps tasks on their CPUs already."
            }
            Scenario::Latency => {
                "Wake-up latency under a mixed load: one CPU hog per CPU (started first) and \
                 two ping-pong pairs bouncing a byte over pipes, so every round trip wakes a \
                 task onto a busy machine. *wake p50/p99/max*: from the wakeup to the task \
                 running, for the ping-pong tasks, from the sched tracepoints; *round trips*: \
                 what the pairs got done; *hog work*: the hogs' iterations per second while \
                 the pairs ran (the price of preempting them)."
            }
            Scenario::Mixed => {
                "Cache affinity and wake-up latency at once: SKY-1's arrays (one process per \
                 CPU, 4 KB arrays, 2 ms bursts, 0.2 ms sleeps) beside a CPU hog per CPU and \
                 two ping-pong pairs, started hogs, arrays, pairs. Each figure is its own \
                 group's, from the sched tracepoints: the arrays' *last-CPU share* and \
                 *migrations* (what SKY-1 keeps), the pairs' *wake p50/p99* (what the \
                 latency path gives), and the work each group got done. No cache model: \
                 placement is judged, not cache speed."
            }
            Scenario::Schbench => {
                "schbench-style requests (`sky-work schbench`, written here: the figure kernel \
                 scheduler developers quote): 2 message threads post requests at a fixed rate \
                 to 8 workers each, which wake, compute 500 us of work (a fixed loop count, \
                 timed with every CPU computing) and sleep; the rate needs 50 % of every CPU, \
                 then 90 %. *wake p50/p99*: from a message thread waking a sleeping worker to \
                 the worker running, measured by the workers; *request p99*: from posting to the work done (waiting for a \
                 worker, and preemption, included); *requests*: done per second."
            }
            Scenario::Overhead => {
                "What scheduling costs: a hackbench-style storm, one ping-pong pair per CPU \
                 (every round trip two wakeups and two context switches). *round trips*: its \
                 throughput alone; *BPF ns/callback* and *BPF CPU*: from the kernel's BPF \
                 statistics (`run_time_ns`/`run_cnt` of the scheduler's struct_ops programs) \
                 during a second storm, as the average callback's time and the share of all \
                 CPUs' time spent in callbacks. EEVDF runs no BPF. TCG makes every instruction \
                 slow alike, so the ratios carry over better than the nanoseconds."
            }
            Scenario::Smt => {
                "Seed 000's placements: two persistent-memory writers (random 256-byte writes, \
                 each flushed and fenced; DRAM here) and two integer-division tasks on 2 cores \
                 x 2 SMT threads, started writer, compute, writer, compute (filling idle cores \
                 first leaves the second writer's sibling to chance), twice a run as new \
                 processes. *SMT cross share*: of the time a writer ran with a busy sibling, the share that sibling ran a \
                 compute task (the observer; 1.0 is the paper's smt-cross, 0 smt-parallel). \
                 scx_sky is told the classes by name (`--class pm-writer=pm-writer --class \
                 'cpu-*=compute'`); the anchors have no such input. TCG models no SMT \
                 contention, so the rates show time-sharing only; the paper's gain (smt-cross \
                 ~15 % faster than smt-parallel) needs real SMT and PM."
            }
            Scenario::Gangs1 | Scenario::Gangs2 | Scenario::Gangs4 => {
                "Seed 003: memory-bound gangs (3 threads each walking a shared 3 MiB buffer; \
                 one fits a socket's 4 MiB LLC, two do not) and 2 compute tasks started first, \
                 on 2 sockets x 2 cores x 2 threads. *All share*: of the time two or more of a \
                 gang's threads ran, the share they all ran in one socket (mean, and the worst \
                 gang); *Dirty*: the share of socket time a socket ran two gangs at once (both \
                 from the observer); *LLC miss rate*: the cache model's user-space LLC misses \
                 over LLC accesses (L1 32 KiB and L2 512 KiB per core, LLC 4 MiB per socket), \
                 the paper's All-versus-Partial share turned into misses. scx_sky is told \
                 `--class 'mb-*=memory-bound'`; the anchors have no such input. The rows \
                 *EEVDF, gangs pinned All* and *Partial* are the seed's own comparison: \
                 under EEVDF, each gang's walkers pinned to CPUs of one socket, or two on \
                 one socket and the third on the other (the compute tasks free)."
            }
            Scenario::Pvas => {
                "Seeds 004 and 002 on sky_pvas (`sky-pvas-bench --eval`), on the emulated \
                 NVDIMM as fsdax with ext4 mounted `-o dax`: two members of one space \
                 ping-pong messages, interleaved by size, one-copy split (both copy, what \
                 `CopyBy::Auto` does) against a two-copy shared-memory ring; then the \
                 persistent queue (4 entries), the receiver computing a matrix product \
                 between dequeues, pushed against pulled. The members are not pinned: where \
                 the scheduler puts them is what is judged (two spinning members on one CPU \
                 wait out time slices). *GB/s*: bytes over the whole time of the messages \
                 (not a percentile: slice waits count); *one-copy / ring* and *pull / push*: \
                 within each run; *wake p99*: the members' (observer). The paper's \
                 one-copy gain needs real memory bandwidth; TCG copies at a few GB/s."
            }
        }
    }

    pub fn topology(self) -> CpuTopology {
        match self {
            // SKY-1's machine: 4 CPUs, no SMT, one cache each.
            Scenario::Sky1 => CpuTopology {
                sockets: 1,
                cores: 4,
                threads: 1,
            },
            // Seed 000's machine: 2 cores x 2 threads.
            Scenario::Smt => CpuTopology {
                sockets: 1,
                cores: 2,
                threads: 2,
            },
            // Two LLCs of two SMT cores: every kind of move exists.
            _ => CpuTopology::default(),
        }
    }

    pub fn cache_model(self) -> Option<CacheModel> {
        match self {
            Scenario::Sky1 => Some("sky1".parse().expect("the sky1 preset parses")),
            Scenario::Gangs1 | Scenario::Gangs2 | Scenario::Gangs4 => {
                Some("modern".parse().expect("the modern preset parses"))
            }
            _ => None,
        }
    }

    /// With a cache model the guest runs ~25x slower; guest time then
    /// follows instructions (2^3 ns each), so a burst holds the same work
    /// whatever the host does.
    pub fn icount_shift(self) -> Option<u32> {
        self.cache_model().map(|_| 3)
    }

    pub fn default_runs(self) -> u32 {
        3
    }

    pub fn default_seconds(self) -> u32 {
        4
    }

    /// Guest seconds one run takes beyond its workload (observer, start;
    /// pvas: the benchmark's fixed work, ~0.4 s natively, ~40x in TCG).
    fn overhead_s(self) -> u64 {
        if self == Scenario::Pvas {
            60
        } else {
            20
        }
    }

    /// A bound on the boot's wall time only a hang exceeds.
    pub fn timeout_s(self, scheds: usize, runs: u32, seconds: u32) -> u64 {
        let per_run = u64::from(seconds) + self.overhead_s();
        // Slowed by the cache model even with icount: 3x is generous.
        let slow = if self.cache_model().is_some() { 3 } else { 1 };
        600 + scheds as u64 * (60 + u64::from(runs) * per_run * slow)
    }

    /// The figures of each run, as table columns.
    pub(super) fn columns(self, seconds: f64, cpus: f64) -> Vec<Column> {
        match self {
            Scenario::Sky1 => {
                let mut cols = arrays_columns("", seconds);
                cols.push(Column::new("wake p99", Unit::Us, false, |r: &Run| {
                    r.placement("cache-loop", "wake_p99_us")
                }));
                cols.push(Column::new(
                    "miss rate (512 KB)",
                    Unit::Share,
                    true,
                    |r: &Run| miss_rate(r, None),
                ));
                cols
            }
            Scenario::Latency => {
                let mut cols = pingpong_columns("");
                cols.insert(
                    2,
                    Column::new("wake max", Unit::Us, false, |r: &Run| {
                        r.placement("pingpong", "wake_max_us")
                    }),
                );
                cols
            }
            Scenario::Mixed => {
                let mut cols = arrays_columns("arrays ", seconds);
                cols.extend(pingpong_columns("ping-pong "));
                cols
            }
            Scenario::Schbench => {
                let mut cols = Vec::new();
                for (load, label) in [("0.50", "50 %"), ("0.90", "90 %")] {
                    // A run with next to no wakeups (workers that never
                    // slept: the machine could not keep up, as TCG at 90 %)
                    // has no wake figures to speak of.
                    let at = move |r: &Run, key: &str| {
                        let at_load =
                            |k: &str| r.number(&[("workload", "schbench"), ("load", load)], k);
                        if key.starts_with("wake_") && at_load("wakeups")? < SCHBENCH_MIN_WAKEUPS {
                            return None;
                        }
                        at_load(key)
                    };
                    for (key, name, unit) in [
                        ("wake_p50_us", "wake p50", Unit::Us),
                        ("wake_p99_us", "wake p99", Unit::Us),
                        ("request_p99_us", "request p99", Unit::Us),
                        ("rps", "requests", Unit::PerSec),
                    ] {
                        cols.push(Column::new(
                            &format!("{name} {label}"),
                            unit,
                            true,
                            move |r: &Run| at(r, key),
                        ));
                    }
                }
                cols
            }
            Scenario::Smt => vec![
                Column::new("SMT cross share", Unit::Share, false, |r: &Run| {
                    r.first("paired")
                }),
                Column::new("PM writes per writer", Unit::PerSec, true, |r: &Run| {
                    r.mean("pm-write", "writes_per_s")
                }),
                Column::new("compute per task", Unit::PerSec, true, |r: &Run| {
                    r.mean("compute", "rounds_per_s")
                }),
            ],
            Scenario::Gangs1 | Scenario::Gangs2 | Scenario::Gangs4 => vec![
                Column::new("All share", Unit::Share, false, |r: &Run| {
                    r.first("all_share")
                }),
                Column::new("worst gang", Unit::Share, false, |r: &Run| {
                    r.first("all_share_min")
                }),
                Column::new("Dirty", Unit::Share, false, |r: &Run| {
                    r.first("dirty_share")
                }),
                Column::new("LLC miss rate", Unit::Share, true, |r: &Run| {
                    let Some(cache) = &r.cache else {
                        return pmu_miss_rate(r);
                    };
                    let c = cache.total(|_| true, true);
                    cachesim::rate(c.llc_misses, c.l2_misses)
                }),
                Column::new("gang loads", Unit::PerSec, true, |r: &Run| {
                    r.sum("gang", "loads_per_s")
                }),
            ],
            Scenario::Pvas => {
                let mut cols = Vec::new();
                for (size, label) in PVAS_SIZES {
                    let msg = move |r: &Run, key: &str| {
                        r.number(&[("workload", "pvas-msg"), ("size", size)], key)
                    };
                    pvas_pair(
                        &mut cols,
                        [
                            format!("one-copy {label}"),
                            format!("one-copy / ring {label}"),
                        ],
                        msg,
                        ["one_copy_gbps", "one_copy_gbps", "ring_gbps"],
                    );
                }
                for (size, label) in PVAS_SIZES {
                    let queue = move |r: &Run, mode: &str| {
                        r.number(
                            &[("workload", "pvas-queue"), ("mode", mode), ("size", size)],
                            "gbps",
                        )
                    };
                    pvas_pair(
                        &mut cols,
                        [format!("push {label}"), format!("pull / push {label}")],
                        queue,
                        ["push", "pull", "push"],
                    );
                }
                cols.push(Column::new("wake p99", Unit::Us, false, |r: &Run| {
                    r.placement("sky-pvas-bench", "wake_p99_us")
                }));
                cols
            }
            Scenario::Overhead => vec![
                Column::new("round trips", Unit::PerSec, true, |r: &Run| {
                    r.workload("pingpong", "round_trips_per_s")
                }),
                Column::new("BPF ns/callback", Unit::Ns, false, |r: &Run| {
                    let calls = r.workload("bpf-cost", "callbacks")?;
                    (calls > 0.0).then_some(r.workload("bpf-cost", "bpf_ns")? / calls)
                }),
                Column::new("BPF CPU", Unit::Share, false, move |r: &Run| {
                    Some(r.workload("bpf-cost", "bpf_ns_per_s")? / (cpus * 1e9))
                }),
            ],
        }
    }

    /// The scenario's Markdown section, plots written into `dir`; its
    /// targets' verdicts are added to `verdicts`.
    pub fn report(
        self,
        boot: &Boot,
        roster: &[Sched],
        cache: Option<&cachesim::Report>,
        dir: &Path,
        verdicts: &mut Vec<targets::Verdict>,
    ) -> Result<String> {
        let header = |key: &str| boot.header.get(key).and_then(|s| s.parse().ok());
        let columns = self.columns(
            header("seconds").unwrap_or(1.0),
            header("cpus").unwrap_or(1.0),
        );
        let mut md = format!(
            "Per scheduler the mean of its valid runs; in brackets the ratio to EEVDF's mean.\n\n{}\n",
            render::summary(boot, roster, &columns).render()
        );
        let judged = targets::judge(self, boot, roster, &columns);
        if !judged.is_empty() {
            md += &format!("\nTargets:\n\n{}", targets::table(&judged).render());
        }
        verdicts.extend(judged);
        if let Some(report) = cache.filter(|r| !r.sweep().is_empty()) {
            md += &self.size_sweep(boot, roster, report, dir)?;
        }
        md += &self.ratio_plots(boot, roster, &columns, dir)?;
        md += &format!(
            "\nEvery run:\n\n{}",
            render::every_run(boot, roster, &columns).render()
        );
        Ok(md)
    }

    /// The cache-size sweep: mean miss rate per size and scheduler, as a
    /// table and a plot.
    fn size_sweep(
        self,
        boot: &Boot,
        roster: &[Sched],
        report: &cachesim::Report,
        dir: &Path,
    ) -> Result<String> {
        let sweep = report.sweep();
        let mut sizes: Vec<(String, Option<usize>)> = sweep
            .iter()
            .enumerate()
            .map(|(i, g)| (cachesim::size_label(g), Some(i)))
            .collect();
        sizes.push((cachesim::size_label(report.level("l1").unwrap_or("")), None));
        let mut head = vec!["scheduler"];
        head.extend(sizes.iter().map(|(l, _)| l.as_str()));
        let mut table = Table::new(&head);
        let mut series = Vec::new();
        for (i, s) in roster.iter().enumerate() {
            let runs = render::valid_runs(boot, i);
            let means: Vec<Option<f64>> = sizes
                .iter()
                .map(|(_, idx)| render::mean(&runs, |r| miss_rate(r, *idx)))
                .collect();
            let mut row = vec![s.label()];
            row.extend(
                means
                    .iter()
                    .map(|m| m.map_or("-".into(), |v| format!("{:.2}%", v * 100.0))),
            );
            table.row(row);
            if means.iter().any(Option::is_some) {
                series.push((
                    s.label(),
                    means.iter().map(|m| m.map(|v| v * 100.0)).collect(),
                ));
            }
        }
        let file = format!("{}-miss-rate-by-size.png", self.name());
        plot::lines(
            &dir.join(&file),
            "Miss rate by cache size (user-space data accesses)",
            "miss rate (%)",
            &sizes.iter().map(|(l, _)| l.clone()).collect::<Vec<_>>(),
            &series,
        )?;
        Ok(format!(
            "\nMiss rate by cache size (direct-mapped, 16-byte lines, per CPU; all \
             sizes see the same accesses):\n\n{}\n![miss rate by cache size]({file})\n",
            table.render()
        ))
    }

    /// A bar plot per ratio column: each scheduler's mean over EEVDF's.
    fn ratio_plots(
        self,
        boot: &Boot,
        roster: &[Sched],
        columns: &[Column],
        dir: &Path,
    ) -> Result<String> {
        let labels: Vec<String> = roster.iter().map(Sched::key).collect();
        let mut md = String::new();
        for c in columns.iter().filter(|c| c.ratio) {
            let base = c.mean(&render::valid_runs(boot, 0));
            let values: Vec<Option<f64>> = (0..roster.len())
                .map(|i| render::ratio(c.mean(&render::valid_runs(boot, i))?, base))
                .collect();
            let slug: String = c
                .name
                .chars()
                .map(|ch| if ch.is_ascii_alphanumeric() { ch } else { '-' })
                .collect();
            let file = format!("{}-{}.png", self.name(), slug.trim_matches('-'));
            plot::bars(
                &dir.join(&file),
                &format!("{}: ratio to EEVDF", c.name),
                "ratio",
                &labels,
                &values,
                Some(1.0),
            )?;
            md += &format!("\n![{} vs EEVDF]({file})\n", c.name);
        }
        Ok(md)
    }
}

/// sky-pvas-bench --eval's message sizes, as its lines say them.
const PVAS_SIZES: [(&str, &str); 2] = [("65536", "64 KiB"), ("1048576", "1 MiB")];

/// Two pvas columns: a throughput (`get` of keys[0]) with its ratio to
/// EEVDF's, and a ratio of two figures of the same run (keys[1] over
/// keys[2]).
fn pvas_pair(
    cols: &mut Vec<Column>,
    names: [String; 2],
    get: impl Fn(&Run, &str) -> Option<f64> + Copy + 'static,
    keys: [&'static str; 3],
) {
    cols.push(Column::new(&names[0], Unit::GBps, true, move |r: &Run| {
        get(r, keys[0])
    }));
    cols.push(Column::new(
        &names[1],
        Unit::Factor,
        false,
        move |r: &Run| render::ratio(get(r, keys[1])?, get(r, keys[2])),
    ));
}

/// Natively (`--native`), the PMU's: cache misses over cache references
/// of all CPUs during the run (`result perf ...`, eval.sh).
fn pmu_miss_rate(r: &Run) -> Option<f64> {
    let refs = r.number(&[("perf", "cache")], "cache_references")?;
    (refs > 0.0).then_some(r.number(&[("perf", "cache")], "cache_misses")? / refs)
}

/// The run's user-space data miss rate: at L1, or at sweep size `sweep`;
/// natively the PMU's.
fn miss_rate(r: &Run, sweep: Option<usize>) -> Option<f64> {
    let Some(cache) = &r.cache else {
        return sweep.is_none().then(|| pmu_miss_rate(r)).flatten();
    };
    let c = cache.total(|_| true, true);
    let misses = match sweep {
        None => c.l1_misses,
        Some(i) => *c.sweep_misses.get(i)?,
    };
    cachesim::rate(misses, c.accesses)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_boot_what_they_measure() {
        let s = Scenario::Sky1;
        assert_eq!(s.topology().cpus(), 4);
        assert_eq!(s.cache_model().unwrap().l1, "512K:16:1");
        assert_eq!(s.icount_shift(), Some(3));
        assert!(s.timeout_s(7, 3, 4) > 7 * 3 * 4);
        assert_eq!(Scenario::Latency.cache_model(), None);
        assert_eq!(Scenario::Gangs4.workload(), ("gangs", Some(4)));
        assert_eq!(Scenario::Smt.workload(), ("smt", None));
        assert_eq!(Scenario::Smt.topology().cpus(), 4);
        assert!(Scenario::Gangs2.sky_args().contains("memory-bound"));
        assert_eq!(Scenario::Overhead.icount_shift(), None);
        assert_eq!(Scenario::Pvas.pmem_mb(), Some(1024));
        assert_eq!(Scenario::Gangs1.references().len(), 2);
        assert!(Scenario::Sky1.references().is_empty());
        for s in <Scenario as ValueEnum>::value_variants() {
            assert!(!s.columns(1.0, 4.0).is_empty() && !s.about_text().is_empty());
        }
    }

    /// The figure of column `name` in the one run of `console`.
    fn figure(s: Scenario, console: &str, name: &str) -> Option<f64> {
        let boot = super::super::figures::parse(console, 1, None).unwrap();
        let col = s.columns(4.0, 8.0).into_iter().find(|c| c.name == name);
        (col.expect("a column of that name").get)(&boot.runs[0])
    }

    #[test]
    fn pvas_ratios_are_within_one_run() {
        let console = "eval-header scenario=pvas seconds=4 cpus=8\n\
            eval-run sched=0 run=1\n\
            result sched=0 run=1 workload=pvas-msg size=65536 one_copy_gbps=1.5 ring_gbps=0.5\n\
            result sched=0 run=1 workload=pvas-msg size=1048576 one_copy_gbps=2 ring_gbps=4\n\
            result sched=0 run=1 workload=pvas-queue mode=push size=65536 gbps=0.2\n\
            result sched=0 run=1 workload=pvas-queue mode=pull size=65536 gbps=0.3\n";
        let s = Scenario::Pvas;
        assert_eq!(figure(s, console, "one-copy 64 KiB"), Some(1.5));
        assert_eq!(figure(s, console, "one-copy / ring 64 KiB"), Some(3.0));
        assert_eq!(figure(s, console, "one-copy / ring 1 MiB"), Some(0.5));
        let pull = figure(s, console, "pull / push 64 KiB").unwrap();
        assert!((pull - 1.5).abs() < 1e-9, "{pull}");
        assert_eq!(
            figure(s, console, "pull / push 1 MiB"),
            None,
            "no queue lines"
        );
    }

    #[test]
    fn schbench_runs_without_wakeups_have_no_wake_figures() {
        let console = "eval-header scenario=schbench seconds=4 cpus=8\n\
            eval-run sched=0 run=1\n\
            result sched=0 run=1 workload=schbench load=0.50 rps=4403 wakeups=0 \
            wake_p50_us=0 wake_p99_us=0 request_p99_us=2208809\n\
            result sched=0 run=1 workload=schbench load=0.90 rps=3000 wakeups=100 \
            wake_p50_us=20 wake_p99_us=700 request_p99_us=9000\n";
        let s = Scenario::Schbench;
        assert_eq!(figure(s, console, "wake p99 50 %"), None);
        assert_eq!(figure(s, console, "requests 50 %"), Some(4403.0));
        assert_eq!(figure(s, console, "wake p99 90 %"), Some(700.0));
    }

    #[test]
    fn natively_the_miss_rates_are_the_pmus() {
        let console = "eval-header scenario=gangs seconds=4 cpus=8\n\
            eval-run sched=0 run=1\n\
            result sched=0 run=1 perf=cache cache_references=400 cache_misses=100\n";
        assert_eq!(
            figure(Scenario::Gangs2, console, "LLC miss rate"),
            Some(0.25)
        );
        assert_eq!(
            figure(Scenario::Sky1, console, "miss rate (512 KB)"),
            Some(0.25)
        );
        let unsupported = console.replace("=400", "=0").replace("=100", "=0");
        assert_eq!(
            figure(Scenario::Gangs2, &unsupported, "LLC miss rate"),
            None
        );
    }
}
