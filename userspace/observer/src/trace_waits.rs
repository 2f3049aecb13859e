//! Exact run-queue waits from the kernel's scheduler tracepoints
//! (`sched_wakeup`, `sched_wakeup_new`, `sched_switch`, read through
//! tracefs): a task waits from the moment it becomes runnable (woken, new,
//! or switched out while still runnable) until it is switched in. The same
//! observer measures EEVDF and any sched_ext scheduler, and, unlike the
//! schedstat counters a task reads about itself, it sees every single wait
//! of every task, including one that never ends (reported as open).

use crate::cpu_runs::{CpuRuns, Meanwhile};
use crate::gang_share::GangShare;
use crate::group_of;
use crate::partners::Partners;
use crate::placement::Placement;
use crate::slow_wakes::{SlowWakes, Woken};
use crate::smt_share::SmtShare;
use anyhow::{bail, Result};
use std::collections::{HashMap, HashSet};

/// One scheduler tracepoint line, as far as waits need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<'a> {
    Switch {
        ts_ns: u64,
        cpu: u32,
        prev_pid: u32,
        prev_comm: &'a str,
        prev_runnable: bool,
        next_pid: u32,
        next_comm: &'a str,
        next_prio: i32,
    },
    Wakeup {
        ts_ns: u64,
        /// Where the wakeup ran: the waker's CPU.
        cpu: u32,
        pid: u32,
        comm: &'a str,
        /// The CPU the kernel woke it for (older formats may lack it).
        target_cpu: Option<u32>,
        /// The task that ran the wakeup (the waker, when the wakeup ran
        /// on its CPU).
        waker_pid: Option<u32>,
    },
    /// `sched_migrate_task`: the kernel moved a task's CPU (possibly to
    /// the same one).
    Migrate {
        ts_ns: u64,
        pid: u32,
        comm: &'a str,
        orig_cpu: u32,
        dest_cpu: u32,
    },
    /// A timer interrupt (x86 `local_timer_entry`): a busy CPU has one
    /// every tick, so their absence on every CPU means the machine stood
    /// still.
    Tick { ts_ns: u64 },
    /// A reschedule IPI sent to @cpu (`ipi_send_cpu` without a callback).
    ReschedSent { ts_ns: u64, cpu: u32 },
    /// @cpu took a reschedule IPI (x86 `reschedule_entry`).
    ReschedTaken { ts_ns: u64, cpu: u32 },
    /// The task running on @cpu renamed itself (exec, `PR_SET_NAME`):
    /// `task_rename`, which fires only for the current task.
    Rename { ts_ns: u64, cpu: u32, comm: &'a str },
    /// A line a script wrote to trace_marker.
    Marker { ts_ns: u64, text: &'a str },
    /// trace_pipe's `CPU:N [LOST M EVENTS]`: the buffer overflowed.
    Lost(u64),
}

/// Markers a script writes to trace_marker around a CPU going offline or
/// online: waits that overlap such a window are told apart, since the
/// whole machine stops while a CPU leaves.
pub const HOTPLUG_BEGIN: &str = "sky-hotplug-begin";
pub const HOTPLUG_END: &str = "sky-hotplug-end";

/// Parses one line of trace_pipe text (`comm-pid [cpu] flags ts: event:
/// fields`); `None` for lines about other events. Comms may hold spaces
/// and dashes, so fields are found by their names, the timestamp and CPU
/// as the last tokens before the event name.
pub fn parse_line(line: &str) -> Option<Event<'_>> {
    if let Some(rest) = line.split_once(" [LOST ").map(|(_, r)| r) {
        return Some(Event::Lost(rest.split_whitespace().next()?.parse().ok()?));
    }
    const NAMES: [(&str, &str); 9] = [
        (": task_rename: ", "task_rename"),
        (": sched_migrate_task: ", "sched_migrate_task"),
        (": sched_switch: ", "sched_switch"),
        (": sched_wakeup_new: ", "sched_wakeup_new"),
        (": sched_wakeup: ", "sched_wakeup"),
        (": tracing_mark_write: ", "tracing_mark_write"),
        (": local_timer_entry: ", "local_timer_entry"),
        (": ipi_send_cpu: ", "ipi_send_cpu"),
        (": reschedule_entry: ", "reschedule_entry"),
    ];
    let (head, event, fields) = NAMES.iter().find_map(|(pattern, name)| {
        let (head, fields) = line.split_once(pattern)?;
        Some((head, *name, fields))
    })?;
    let mut tokens = head.split_whitespace().rev();
    let ts_ns = parse_ts(tokens.next()?)?;
    let cpu = tokens
        .find_map(|t| t.strip_prefix('[')?.strip_suffix(']'))?
        .parse()
        .ok()?;
    match event {
        "local_timer_entry" => return Some(Event::Tick { ts_ns }),
        "reschedule_entry" => return Some(Event::ReschedTaken { ts_ns, cpu }),
        "ipi_send_cpu" if field(fields, "callback=")? == "0x0" => {
            return Some(Event::ReschedSent {
                ts_ns,
                cpu: field(fields, "cpu=")?.parse().ok()?,
            })
        }
        "ipi_send_cpu" => return None,
        _ => {}
    }
    if event == "task_rename" {
        // Newer kernels print no pid (the task is always the current one).
        return Some(Event::Rename {
            ts_ns,
            cpu,
            comm: between(fields, "newcomm=", " oom_score_adj=")?,
        });
    }
    if event == "tracing_mark_write" {
        return Some(Event::Marker {
            ts_ns,
            text: fields.trim(),
        });
    }
    if event == "sched_migrate_task" {
        return Some(Event::Migrate {
            ts_ns,
            pid: field(fields, " pid=")?.parse().ok()?,
            comm: between(fields, "comm=", " pid=")?,
            orig_cpu: field(fields, "orig_cpu=")?.parse().ok()?,
            dest_cpu: field(fields, "dest_cpu=")?.parse().ok()?,
        });
    }
    if event == "sched_switch" {
        let (prev, next) = fields.split_once(" ==> ")?;
        let state = field(prev, "prev_state=")?;
        Some(Event::Switch {
            ts_ns,
            cpu,
            prev_pid: field(prev, "prev_pid=")?.parse().ok()?,
            prev_comm: between(prev, "prev_comm=", " prev_pid=")?,
            prev_runnable: state.starts_with('R'),
            next_pid: field(next, "next_pid=")?.parse().ok()?,
            next_comm: between(next, "next_comm=", " next_pid=")?,
            next_prio: field(next, "next_prio=")?.parse().ok()?,
        })
    } else {
        Some(Event::Wakeup {
            ts_ns,
            cpu,
            pid: field(fields, " pid=")?.parse().ok()?,
            comm: between(fields, "comm=", " pid=")?,
            target_cpu: field(fields, "target_cpu=").and_then(|t| t.parse().ok()),
            // `comm-pid` just before the CPU: the task the wakeup ran in.
            waker_pid: tokens
                .next()
                .and_then(|t| t.rsplit_once('-'))
                .and_then(|(_, pid)| pid.parse().ok()),
        })
    }
}

/// `12345.678901` seconds (any number of decimals) in nanoseconds.
fn parse_ts(token: &str) -> Option<u64> {
    let (secs, frac) = token.trim_end_matches(':').split_once('.')?;
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let scale = 10u64.pow(9 - frac.len() as u32);
    secs.parse::<u64>()
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(frac.parse::<u64>().ok()? * scale)
}

/// The value after the last `key` (up to the next space).
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let at = text.rfind(key)? + key.len();
    text[at..].split_whitespace().next()
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = text.find(start)? + start.len();
    let to = text.rfind(end)?;
    (from <= to).then(|| &text[from..to])
}

/// The waits of one group of tasks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupWaits {
    pub waits_us: Vec<u64>,
    pub worst_pid: u32,
    max_us: u64,
    /// The longest wait that overlapped no hotplug window.
    pub max_clear_us: u64,
}

impl GroupWaits {
    fn add(&mut self, pid: u32, wait_ns: u64, during_hotplug: bool) {
        if wait_ns / 1000 > self.max_us || self.waits_us.is_empty() {
            self.worst_pid = pid;
            self.max_us = self.max_us.max(wait_ns / 1000);
        }
        if !during_hotplug {
            self.max_clear_us = self.max_clear_us.max(wait_ns / 1000);
        }
        self.waits_us.push(wait_ns / 1000);
    }

    pub fn max_us(&self) -> u64 {
        self.max_us
    }

    /// The `q` quantile (0..=1), nearest rank.
    pub fn quantile_us(&self, q: f64) -> u64 {
        crate::percentile(&mut self.waits_us.clone(), q * 100.0)
    }
}

/// One finished wait, for the list of the longest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    pub pid: u32,
    pub comm: String,
    pub since_ns: u64,
    pub wait_ns: u64,
    pub cpu: u32,
    /// Where the wait began: the CPU the task was preempted on, or the
    /// one its wakeup targeted (`woken`); `moved_to`, the CPU the kernel
    /// last migrated it to while it waited. A long wait that ends on a
    /// CPU it was never queued for came from a queue no scheduler scan
    /// saw (the kernel's global fallback queue, say).
    pub from_cpu: Option<u32>,
    pub woken: bool,
    pub moved_to: Option<u32>,
    pub during_hotplug: bool,
    /// Time inside the wait in which no CPU traced anything for over
    /// `GAP_NS`: the whole machine stood still (a VM's host thread
    /// descheduled, an emulator pause), which no scheduler can help.
    pub machine_gap_ns: u64,
    /// What the CPU it ended on ran meanwhile.
    pub meanwhile: Meanwhile,
}

const WORST_KEPT: usize = 10;
/// A silence of every CPU this long counts as the machine standing still:
/// with timer interrupts traced, every busy CPU reports each 4 ms tick
/// (HZ=250; a 1000 Hz kernel ticks more often), and an idle machine has no
/// waits for a gap to lengthen. Without them (not x86) a gap can also be
/// CPUs running without a switch, so it is an upper bound.
const GAP_NS: u64 = 5_000_000;

/// A task that is runnable and not running: since when, its name, whether
/// the wait is certain (see `cpus_expected`), where a wakeup that began it
/// came from, and the partners' idle clock when it began.
#[derive(Debug)]
struct Runnable {
    since_ns: u64,
    comm: String,
    certain: bool,
    from_cpu: Option<u32>,
    woken: Option<Woken>,
    moved_to: Option<u32>,
    idle_mark: u64,
}

/// Follows the events and files every finished wait under its task's
/// group. Waits of tasks switched in at a real-time priority (< 100) are
/// counted apart: their class, not the scheduler under test, ran them.
#[derive(Debug, Default)]
pub struct WaitBook {
    /// pid -> its wait so far.
    runnable_since: HashMap<u32, Runnable>,
    /// CPUs online when tracing began. Until each has switched once, a
    /// wakeup of a task never seen switching may be of one already
    /// running there (it started before the trace): such a wait, if it
    /// never ends, is not reported open. 0: every wait is certain.
    pub cpus_expected: usize,
    cpus_switched: HashSet<u32>,
    /// pids seen in a switch, in or out.
    seen: HashSet<u32>,
    /// pid -> the CPU it runs on and since when (a pid runs on one CPU at
    /// a time, so a switch-in elsewhere replaces an entry a hotplugged CPU
    /// left behind).
    running: HashMap<u32, (u32, u64)>,
    pub groups: HashMap<String, GroupWaits>,
    /// The longest waits, longest first (at most `WORST_KEPT`).
    pub worst: Vec<Wait>,
    hotplug_open: bool,
    last_hotplug_end_ns: u64,
    /// Silences of every CPU: (end, length), in trace order.
    gaps: Vec<(u64, u64)>,
    /// The first reschedule IPI sent to each CPU and not yet taken.
    resched_sent: HashMap<u32, u64>,
    /// How long reschedule IPIs (kicks, preemptions, wakeups of idle
    /// CPUs) took to reach their CPU: the machine's part of a wakeup's
    /// latency, which a scheduler cannot shorten (under TCG, the time until
    /// the emulator turns to that vCPU).
    pub resched: GroupWaits,
    /// What each CPU ran lately (for the longest waits).
    cpu_runs: CpuRuns,
    /// What PM writers' SMT siblings ran (empty without sibling pairs).
    pub smt: SmtShare,
    /// Whether gangs ran in one cache domain (empty without domains).
    pub gangs: GangShare,
    /// Where tasks ran: last-CPU share, migrations, wake-up latency.
    pub placement: Placement,
    /// What the slow wakeups had in common.
    pub slow_wakes: SlowWakes,
    /// Tasks of one group waiting behind each other while a CPU idled.
    pub partners: Partners,
    pub rt_waits: u64,
    pub lost_events: u64,
    pub events: u64,
    pub last_ts_ns: u64,
}

impl WaitBook {
    /// A book for a trace that starts with `cpus` CPUs online.
    pub fn expecting(cpus: usize) -> Self {
        WaitBook {
            cpus_expected: cpus,
            ..Default::default()
        }
    }

    pub fn feed(&mut self, event: Event<'_>) {
        self.events += 1;
        let ts = match event {
            Event::Switch { ts_ns, .. }
            | Event::Wakeup { ts_ns, .. }
            | Event::Migrate { ts_ns, .. }
            | Event::Tick { ts_ns }
            | Event::ReschedSent { ts_ns, .. }
            | Event::ReschedTaken { ts_ns, .. }
            | Event::Rename { ts_ns, .. }
            | Event::Marker { ts_ns, .. } => ts_ns,
            Event::Lost(_) => self.last_ts_ns,
        };
        self.smt.advance(ts);
        self.gangs.advance(ts);
        self.partners.advance(ts);
        if self.last_ts_ns > 0 && ts > self.last_ts_ns + GAP_NS {
            self.gaps.push((ts, ts - self.last_ts_ns));
        }
        self.last_ts_ns = self.last_ts_ns.max(ts);
        match event {
            Event::Lost(n) => self.lost_events += n,
            Event::Tick { .. } => {}
            Event::Rename { cpu, comm, .. } => {
                self.smt.renamed(cpu, comm);
                self.gangs.renamed(cpu, comm);
            }
            Event::ReschedSent { ts_ns, cpu } => {
                self.slow_wakes.resched_sent(cpu, ts_ns);
                self.resched_sent.entry(cpu).or_insert(ts_ns);
            }
            Event::ReschedTaken { ts_ns, cpu } => {
                if let Some(sent) = self.resched_sent.remove(&cpu) {
                    self.resched.add(0, ts_ns.saturating_sub(sent), false);
                }
            }
            Event::Marker { ts_ns, text } => {
                if text == HOTPLUG_BEGIN {
                    self.hotplug_open = true;
                } else if text == HOTPLUG_END {
                    self.hotplug_open = false;
                    self.last_hotplug_end_ns = ts_ns;
                }
            }
            Event::Wakeup {
                ts_ns,
                cpu,
                pid,
                comm,
                target_cpu,
                waker_pid,
            } => {
                // A task woken while it still runs (it had not gone to
                // sleep yet) does not start waiting.
                if pid != 0 && !self.running.contains_key(&pid) {
                    let certain =
                        self.seen.contains(&pid) || self.cpus_switched.len() >= self.cpus_expected;
                    let woken = Woken {
                        waker_cpu: cpu,
                        target_cpu,
                        waker_pid,
                        target_starts: target_cpu.map_or(0, |t| self.slow_wakes.started_on(t)),
                    };
                    let idle_mark = self.partners.idle_mark();
                    self.runnable_since.entry(pid).or_insert_with(|| Runnable {
                        since_ns: ts_ns,
                        comm: comm.to_string(),
                        certain,
                        from_cpu: target_cpu,
                        woken: Some(woken),
                        moved_to: None,
                        idle_mark,
                    });
                }
            }
            Event::Migrate {
                pid,
                comm,
                orig_cpu,
                dest_cpu,
                ..
            } => {
                if let Some(r) = self.runnable_since.get_mut(&pid) {
                    r.moved_to = Some(dest_cpu);
                }
                self.placement.migrated(pid, comm, orig_cpu, dest_cpu)
            }
            Event::Switch {
                ts_ns,
                cpu,
                prev_pid,
                prev_comm,
                prev_runnable,
                next_pid,
                next_comm,
                next_prio,
            } => {
                self.cpus_switched.insert(cpu);
                self.seen.insert(prev_pid);
                self.seen.insert(next_pid);
                self.runnable_since.remove(&prev_pid);
                let ran = self
                    .running
                    .remove(&prev_pid)
                    .map(|(_, since)| ts_ns.saturating_sub(since));
                self.placement.switched_out(prev_pid, prev_comm, ran);
                if prev_runnable && prev_pid != 0 {
                    let idle_mark = self.partners.idle_mark();
                    self.runnable_since.insert(
                        prev_pid,
                        Runnable {
                            since_ns: ts_ns,
                            comm: prev_comm.to_string(),
                            certain: true,
                            from_cpu: Some(cpu),
                            woken: None,
                            moved_to: None,
                            idle_mark,
                        },
                    );
                }
                self.placement.switched_in(cpu, next_pid, next_comm);
                self.slow_wakes.switched(cpu);
                if next_pid != 0 {
                    self.running.insert(next_pid, (cpu, ts_ns));
                }
                self.smt.switched(cpu, next_pid, next_comm);
                self.gangs.switched(cpu, next_pid, next_comm);
                self.partners.switched(cpu, next_pid);
                if let Some(Runnable {
                    since_ns: since,
                    from_cpu,
                    woken,
                    moved_to,
                    idle_mark,
                    ..
                }) = self.runnable_since.remove(&next_pid)
                {
                    if next_prio < 100 {
                        self.rt_waits += 1;
                    } else {
                        let was_woken = woken.is_some();
                        if let Some(woken) = woken {
                            self.placement
                                .woke_and_waited(next_comm, ts_ns.saturating_sub(since));
                            self.slow_wakes.ran(
                                woken,
                                next_comm,
                                cpu,
                                (prev_pid, prev_comm),
                                since,
                                ts_ns,
                            );
                        }
                        self.partners.waited(
                            next_comm,
                            (prev_pid, prev_comm),
                            since,
                            idle_mark,
                            ts_ns,
                        );
                        let wait_ns = ts_ns.saturating_sub(since);
                        let meanwhile = if self.among_worst(wait_ns) {
                            self.cpu_runs.during(cpu, since, ts_ns)
                        } else {
                            Meanwhile::default()
                        };
                        self.file(Wait {
                            pid: next_pid,
                            comm: next_comm.to_string(),
                            since_ns: since,
                            wait_ns,
                            cpu,
                            from_cpu,
                            woken: was_woken,
                            moved_to,
                            during_hotplug: self.hotplug_open || self.last_hotplug_end_ns >= since,
                            machine_gap_ns: self.gaps_since(since),
                            meanwhile,
                        });
                    }
                }
                self.cpu_runs.switched_in(cpu, ts_ns, next_comm);
            }
        }
    }

    /// How long the machine stood still since @since (gaps end at or
    /// before the current event).
    fn gaps_since(&self, since: u64) -> u64 {
        self.gaps
            .iter()
            .rev()
            .take_while(|(end, _)| *end > since)
            .map(|(end, len)| (*len).min(end - since))
            .sum()
    }

    /// Would a wait this long enter the list of the longest?
    fn among_worst(&self, wait_ns: u64) -> bool {
        self.worst.len() < WORST_KEPT || self.worst.last().is_some_and(|w| w.wait_ns < wait_ns)
    }

    fn file(&mut self, wait: Wait) {
        self.groups
            .entry(group_of(&wait.comm).to_string())
            .or_default()
            .add(wait.pid, wait.wait_ns, wait.during_hotplug);
        let at = self.worst.partition_point(|w| w.wait_ns >= wait.wait_ns);
        if at < WORST_KEPT {
            self.worst.insert(at, wait);
            self.worst.truncate(WORST_KEPT);
        }
    }

    /// The waits still running when tracing stopped, longest first:
    /// (pid, comm if known, ns so far). A task that never ran again shows
    /// here, not in the groups.
    pub fn open_waits(&self) -> Vec<(u32, &str, u64)> {
        let mut open: Vec<_> = self
            .runnable_since
            .iter()
            .filter(|(_, r)| r.certain)
            .map(|(&pid, r)| {
                (
                    pid,
                    r.comm.as_str(),
                    self.last_ts_ns.saturating_sub(r.since_ns),
                )
            })
            .collect();
        open.sort_by_key(|o| std::cmp::Reverse(o.2));
        open
    }

    /// Result lines: one per group (largest wait first), then the total.
    pub fn lines(&self) -> Vec<String> {
        let mut groups: Vec<_> = self.groups.iter().collect();
        groups.sort_by(|a, b| b.1.max_us().cmp(&a.1.max_us()).then(a.0.cmp(b.0)));
        let mut out: Vec<String> = groups
            .iter()
            .map(|(name, g)| {
                let (run_p10, run_p90, tasks) = self.placement.run_spread(name);
                format!(
                    "result observer=trace group={name} waits={} p50_wait_us={} \
                     p99_wait_us={} max_wait_us={} max_clear_wait_us={} worst_pid={} \
                     tasks={tasks} run_p10_ms={} run_p90_ms={}",
                    g.waits_us.len(),
                    g.quantile_us(0.5),
                    g.quantile_us(0.99),
                    g.max_us(),
                    g.max_clear_us,
                    g.worst_pid,
                    run_p10 / 1_000_000,
                    run_p90 / 1_000_000
                )
            })
            .collect();
        out.extend(self.worst.iter().map(|w| {
            format!(
                "result observer=trace worst pid={} comm={} wait_us={} at_s={:.6} cpu={} \
                 began={} from_cpu={} moved_to={} during_hotplug={} machine_gap_us={} \
                 cpu_switches={} cpu_longest_run_us={} cpu_longest_by={}",
                w.pid,
                w.comm.replace(' ', "_"),
                w.wait_ns / 1000,
                w.since_ns as f64 / 1e9,
                w.cpu,
                if w.woken { "woken" } else { "preempted" },
                cpu_or_dash(w.from_cpu),
                cpu_or_dash(w.moved_to),
                u8::from(w.during_hotplug),
                w.machine_gap_ns / 1000,
                w.meanwhile.switches,
                w.meanwhile.longest_run_ns / 1000,
                if w.meanwhile.longest_by.is_empty() {
                    "-".to_string()
                } else {
                    w.meanwhile.longest_by.replace(' ', "_")
                }
            )
        }));
        let waits: usize = self.groups.values().map(|g| g.waits_us.len()).sum();
        let max = self.groups.values().map(|g| g.max_us()).max().unwrap_or(0);
        let clear = self.groups.values().map(|g| g.max_clear_us).max();
        let open = self.open_waits();
        let open_max = open.first().map(|o| o.2 / 1000).unwrap_or(0);
        out.extend(self.placement.lines());
        out.extend(self.slow_wakes.lines());
        out.extend(
            self.partners
                .lines(|g| self.placement.groups.get(g).map_or(0, |p| p.run_ns)),
        );
        out.extend(self.smt.line());
        out.extend(self.gangs.line());
        out.push(format!(
            "result observer=trace resched_ipis={} p50_ipi_us={} p99_ipi_us={} max_ipi_us={}",
            self.resched.waits_us.len(),
            self.resched.quantile_us(0.5),
            self.resched.quantile_us(0.99),
            self.resched.max_us()
        ));
        out.push(format!(
            "result observer=trace total events={} waits={waits} rt_waits={} \
             lost_events={} max_wait_us={max} max_clear_wait_us={} open_waits={} \
             open_max_us={open_max}",
            self.events,
            self.rt_waits,
            self.lost_events,
            clear.unwrap_or(0),
            open.len()
        ));
        out
    }
}

fn cpu_or_dash(cpu: Option<u32>) -> String {
    cpu.map_or_else(|| "-".into(), |c| c.to_string())
}

/// Builds a book from trace_pipe text (tests, recorded traces).
pub fn book_from_text(text: &str) -> WaitBook {
    let mut book = WaitBook::default();
    for event in text.lines().filter_map(parse_line) {
        book.feed(event);
    }
    book
}

/// Refuses a book whose trace lost events: its waits could be invented
/// (a missed switch-in leaves a task "waiting") or missed.
pub fn complete(book: &WaitBook) -> Result<()> {
    if book.lost_events > 0 {
        bail!(
            "the trace lost {} events (buffer too small or the reader starved); \
             its waits cannot be trusted",
            book.lost_events
        );
    }
    if book.events == 0 {
        bail!("the trace saw no scheduler events (is tracefs working?)");
    }
    Ok(())
}

#[cfg(test)]
#[path = "trace_waits_tests.rs"]
mod tests;
