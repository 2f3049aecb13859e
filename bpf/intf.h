/* SPDX-License-Identifier: GPL-2.0 */
/*
 * intf.h - everything shared between the scx_sky BPF scheduler and its Rust
 * daemon. Rust gets these definitions through bindgen; the build script also
 * parses enum sky_stat_idx so the statistic names exist in exactly one place.
 *
 * Every name carries a sky_/SKY_ prefix: vmlinux.h is included alongside and
 * unprefixed names collide with kernel ones.
 */
#ifndef __SKY_INTF_H
#define __SKY_INTF_H

#ifndef __VMLINUX_H__
typedef unsigned char u8;
typedef unsigned int u32;
typedef int s32;
typedef unsigned long long u64;
#endif

enum sky_consts {
	SKY_MAX_CPUS = 1024,
	SKY_MAX_LLCS = 128,
	/* The per-LLC queues are user DSQs numbered from here... */
	SKY_DSQ_LLC_BASE = 0x1000,
	/* ...each CPU's queue of tasks warm on it from here... */
	SKY_DSQ_CPU_BASE = 0x2000,
	/* ...and tasks that waited past the bound sit here, served first. */
	SKY_DSQ_RESCUE = 0x3000,
	/* Marks a CPU whose cache domain was unknown when the daemon started. */
	SKY_LLC_UNKNOWN = 0xffffffff,
	/* Hard cap on the queued tasks one steal walk inspects. */
	SKY_WALK_MAX = 32,
	/*
	 * Hard cap on the tasks of one queue the timers' starvation scan
	 * inspects: beyond any real queue (the scan runs outside every
	 * run-queue lock, so it sees every task of a queue, in vtime order).
	 */
	SKY_SCAN_MAX = 1 << 20,
	/*
	 * Most tasks a dispatching CPU inspects in its catch-up scan, under
	 * its run-queue lock (bound.bpf.h).
	 */
	SKY_CATCH_UP_MAX = 128,
	/* Most tasks the daemon can give a class at once. */
	SKY_CLASSED_MAX = 65536,
	/* Most class hints by task name that BPF applies itself. */
	SKY_COMM_RULES_MAX = 16,
	/* A task name's bytes, its NUL included (TASK_COMM_LEN). */
	SKY_COMM_LEN = 16,
	/*
	 * Policy slots (a power of two): the daemon writes a free one and
	 * publishes it; a slot is written again only this many switches
	 * later and at least 16 ms after it stopped being live (sky.bpf.h),
	 * so this many switches may come at once (about 30 KiB of .bss).
	 */
	SKY_CFG_SLOTS = 256,
	/*
	 * Buckets of a task's wait histogram (struct sky_wait_hist): 0 for
	 * waits under 1 us, then four per power of two of microseconds up to
	 * about 2 s; the last holds everything longer.
	 */
	SKY_WAIT_BUCKETS = 88,
	SKY_WAIT_SUB_SHIFT = 2,
	/* Most processes in gangs of several, and most gangs with a home. */
	SKY_GANGS_MAX = 65536,
};

/*
 * A gang's key in BPF's maps (gang.bpf.h): a process that is a gang of its
 * own is keyed by its process ID (below 2^32); a gang of several processes
 * (a shared space, a cgroup, a rule) by this base plus the daemon's gang ID.
 */
#define SKY_GANG_SHARED_BASE (1ULL << 32)

/* Where a gang's threads run (value of sky_gang_homes). */
struct sky_gang_home {
	/* Its home cache domain; SKY_LLC_UNKNOWN: none, do not claim one. */
	u32 llc;
	/* 1: the daemon's planner chose it; 0: BPF chose it provisionally. */
	u32 planned;
	/* When it was chosen (bpf_ktime_get_ns() / CLOCK_MONOTONIC). */
	u64 since_ns;
};

/*
 * One thread as the daemon's task listing gives it (tasks.bpf.h): the
 * iterator writes these back to back.
 */
struct sky_task_row {
	u32 tid;
	/* Its process (thread group). */
	u32 pid;
	/* The CPU it runs on, or last ran on. */
	s32 cpu;
	/* 1: running or waiting for a CPU (/proc's state R). */
	u32 runnable;
	char comm[SKY_COMM_LEN];
};

/*
 * How long a task waited in scx_sky's queues before each run, counted per
 * bucket since it first ran: the daemon reads it by pidfd for `scx_sky
 * top`'s per-task wait p99. A wait of us microseconds (us >= 1, msb =
 * its top bit) lands in bucket 1 + msb * 4 + the two bits below the top
 * one.
 */
struct sky_wait_hist {
	u32 counts[SKY_WAIT_BUCKETS];
};

/*
 * A task's class, from the daemon (userspace/classify): PMU counters or
 * hints. The order is Rust's sky_classify::Class; a test checks it.
 */
enum sky_class {
	SKY_CLASS_UNKNOWN = 0,
	SKY_CLASS_COMPUTE = 1,
	SKY_CLASS_PM_WRITER = 2,
	SKY_CLASS_MEMORY_BOUND = 3,
	SKY_NR_CLASSES,
};

/*
 * The PMU counters the daemon opens on each CPU (userspace/classify/src/
 * pmu.rs), by slot; a slot the CPU does not offer stays unopened. The
 * order is Rust's sky_classify::pmu::Counter; a test checks it.
 */
enum sky_pmu_counter {
	SKY_PMU_CYCLES = 0,
	SKY_PMU_INSTRUCTIONS = 1,
	SKY_PMU_LLC_MISSES = 2,
	SKY_PMU_STALL_CYCLES = 3,
	SKY_PMU_STORES = 4,
	SKY_NR_PMU,
};

/*
 * What the PMU counted while one task ran, summed since it was first seen
 * (bpf/pmu.bpf.h); the daemon takes differences. Keyed by thread ID: the
 * start time tells a reused ID from the task that had it.
 */
struct sky_task_counts {
	u64 start_time;
	u64 count[SKY_NR_PMU];
};

/* How a hint's pattern matches a task name (a glob of these shapes only). */
enum sky_comm_shape {
	SKY_COMM_EXACT = 0, /* name */
	SKY_COMM_PREFIX = 1, /* name* */
	SKY_COMM_SUFFIX = 2, /* *name */
	SKY_COMM_CONTAINS = 3, /* *name* */
};

/*
 * A class hint by task name, which BPF applies the moment a task is named
 * (exec, PR_SET_NAME), before the daemon's next look gives it a class.
 */
struct sky_comm_rule {
	char pattern[SKY_COMM_LEN];
	/* Bytes of pattern used (1-15). */
	u32 len;
	/* enum sky_comm_shape */
	u32 shape;
	/* enum sky_class */
	u32 class;
};

/* How a task's cache footprint is judged cold (sky_config.decay). */
enum sky_decay_rule {
	/* SKY-1 as published: by how long the task slept. */
	SKY_DECAY_SLEEP = 0,
	/* By what other tasks ran on its cache since it left. */
	SKY_DECAY_PRESSURE = 1,
};

/*
 * Per-CPU event counters. Keep the comment on each line: it becomes the
 * description shown by `scx_sky` and documented in the README.
 */
enum sky_stat_idx {
	SKY_STAT_DISPATCHES, /* tasks handed to a CPU to run */
	SKY_STAT_LAST_CPU_HITS, /* tasks that ran on the CPU they last ran on */
	SKY_STAT_MOVES_IN_LLC, /* tasks moved to another CPU of the same cache domain */
	SKY_STAT_MOVES_ACROSS_LLC, /* tasks moved to another cache domain */
	SKY_STAT_DIRECT_HANDOFFS, /* wakeups handed straight to their idle previous CPU */
	SKY_STAT_SYNC_HANDOFFS, /* synchronous wakeups queued on the waker's CPU */
	SKY_STAT_DECAYED_MOVES, /* moves of tasks whose cache footprint had decayed */
	SKY_STAT_WARM_QUEUED, /* tasks queued for the CPU whose cache they are warm in */
	SKY_STAT_COLD_QUEUED, /* tasks queued with a cold footprint and no idle CPU to take them */
	SKY_STAT_STEALS_IN_LLC, /* warm tasks taken by an idle CPU of the same domain */
	SKY_STAT_STEALS, /* tasks taken from another cache domain's queue */
	SKY_STAT_GRACE_KICKS, /* idle CPUs woken because a task's affinity grace ran out */
	SKY_STAT_STARVATION_RESCUES, /* tasks moved to the front because they waited too long */
	SKY_STAT_IDLE_WITH_WAITERS, /* CPUs that went idle while a task they could run waited past the bound */
	SKY_STAT_ALARM_RESTARTS, /* bound alarms started again because they were a period overdue */
	SKY_STAT_WATCH_SCANS, /* scans the watch timer made because the alarm had not run for a period */
	SKY_STAT_DISPATCH_SCANS, /* scans a CPU made in dispatch because both timers were late */
	SKY_STAT_DISPATCH_LOCAL_SCANS, /* such scans of only the queues that CPU serves: too many tasks queued to scan all */
	SKY_STAT_LEFT_TO_OTHERS, /* kicks and alarms left to other CPUs by a CPU going offline */
	SKY_STAT_KERNEL_FIRST, /* kernel threads served first because the bound had grown under overload */
	SKY_STAT_BUSY_STEALS, /* tasks a busy CPU with an empty queue took from a sibling at its slice end */
	SKY_STAT_LATE_RUNS, /* runs that began after more than starve_ms plus a slice in scx_sky's queues */
	SKY_STAT_WAIT_NS, /* total nanoseconds tasks spent queued */
	/* Run time by class: keep these four in enum sky_class order. */
	SKY_STAT_RAN_NS_UNKNOWN, /* nanoseconds tasks of no known class ran */
	SKY_STAT_RAN_NS_COMPUTE, /* nanoseconds compute tasks ran */
	SKY_STAT_RAN_NS_PM_WRITER, /* nanoseconds persistent-memory writers ran */
	SKY_STAT_RAN_NS_MEMORY_BOUND, /* nanoseconds memory-bound tasks ran */
	SKY_STAT_PM_BESIDE_COMPUTE_NS, /* nanoseconds a PM writer ran beside a compute task on its core */
	SKY_STAT_PM_BESIDE_PM_WRITER_NS, /* nanoseconds a PM writer ran beside another PM writer */
	SKY_STAT_PM_BESIDE_IDLE_NS, /* nanoseconds a PM writer ran beside an idle sibling */
	SKY_STAT_PM_BESIDE_OTHER_NS, /* nanoseconds a PM writer ran beside any other task */
	SKY_STAT_SMT_PLACEMENTS, /* tasks placed on an idle CPU for its sibling's class (SMT pairing) */
	SKY_STAT_SMT_MOVES, /* tasks moved at slice end to run beside their SMT mate */
	SKY_STAT_PMU_CHARGES, /* context switches whose PMU counts were charged to a task */
	SKY_STAT_PMU_READ_ERRORS, /* PMU counters that could not be read at a context switch */
	SKY_STAT_MEASURED_FILL_BYTES, /* bytes of cache pressure measured as LLC misses x line size */
	SKY_STAT_HOTPLUG_EVENTS, /* CPUs that went online or offline */
	SKY_STAT_GANG_HOME_NS, /* nanoseconds threads of memory-bound gangs ran in their home domain */
	SKY_STAT_GANG_AWAY_NS, /* nanoseconds threads of memory-bound gangs ran outside their home domain */
	SKY_STAT_GANG_PROVISIONAL, /* homes BPF chose for new memory-bound processes before the planner saw them */
	SKY_STAT_GANG_SPILLS, /* gang threads another domain took after they waited gang_spill_ns at home */
	SKY_STAT_GANG_EVICTIONS, /* tasks of no gang moved off a home domain to make room for its gang */
	SKY_STAT_GANG_RETURNS, /* gang threads moved back to their home domain once it had room */
	SKY_STAT_WAKEUPS, /* tasks that woke up */
	SKY_STAT_SHORT_WAKEUPS, /* wakeups of tasks short then (burst.bpf.h): the latency path's work */
	SKY_STAT_LAT_IDLE_CLAIMS, /* short wakeups placed on an idle CPU near their busy last CPU, grace waived */
	SKY_STAT_LAT_PREEMPTS, /* short wakeups that kicked a batch task's CPU to take them (SCX_KICK_PREEMPT) */
	SKY_STAT_LAT_SHARED, /* short wakeups queued in their domain's queue: no CPU near idle or preemptible */
	SKY_STAT_LAT_GANG_DEFERS, /* short wakeups kept off a domain whose homed gang threads wait for its CPUs */
	SKY_STAT_LAT_TICK_ENDS, /* batch slices ended at a tick because a short task waited ahead of them */
	SKY_STAT_SYNC_QUEUED, /* synchronous wakeups of short tasks queued in their waker's domain for its CPU to take */
	SKY_STAT_SYNC_REFUSED, /* synchronous wakeups not stacked on the waker's CPU: that waker runs on after them */
	SKY_STAT_SHORT_STEALS, /* short tasks taken from another CPU's queue without waiting out the grace */
	SKY_STAT_YIELDS, /* yields that gave the CPU to a queued task */
	SKY_STAT_PARTNER_SPLITS, /* wakeups placed on an idle CPU near their last CPU because a partner ran there */
	SKY_STAT_PARTNER_STEALS, /* tasks taken from a CPU that ran their partner without waiting out the grace */
	SKY_NR_STATS,
};

/*
 * The policy: every knob BPF reads on each decision. The daemon writes it
 * into a free slot before attaching and on every switch, then publishes
 * the slot (sky.bpf.h); no reload.
 */
struct sky_config {
	/* 1: SKY-1 last-CPU affinity; 0: plain weighted vtime (baseline). */
	u32 affinity;
	/* How a footprint decays: enum sky_decay_rule. */
	u32 decay;
	/* Max queued tasks of another domain a steal inspects. */
	u32 walk_depth;
	/* 1: a synchronous wakeup may run on the waker's CPU (shared data). */
	u32 wake_sync;
	/*
	 * 1: SMT pairing (smt.bpf.h) places PM writers beside compute tasks
	 * and moves them at slice end; needs classes and SMT.
	 */
	u32 smt_pairing;
	/*
	 * 1: gangs (gang.bpf.h): memory-bound gangs' threads stay in their
	 * home cache domain, one gang per domain while domains are spare.
	 */
	u32 gangs;
	/* Sleep rule: off-CPU time after which the private (L2) cache is cold. */
	u64 decay_core_ns;
	/* Sleep rule: off-CPU time after which the last-level cache is cold. */
	u64 decay_llc_ns;
	/* Pressure rule: bytes others pulled into a CPU's share of the core cache. */
	u64 decay_core_bytes;
	/* Pressure rule: bytes others pulled into the LLC. */
	u64 decay_llc_bytes;
	/* Pressure rule: bytes a CPU pulls into its caches per ms of run time. */
	u64 fill_bytes_per_ms;
	/* Longest time slice; shorter while tasks wait for the CPU. */
	u64 slice_ns;
	/* Shortest time slice, however many tasks wait. */
	u64 slice_min_ns;
	/* Most vtime credit a task can bank while sleeping. */
	u64 sleeper_credit_ns;
	/*
	 * How long an idle CPU leaves a warm task queued for the CPU it last
	 * ran on before taking it itself. 0 is pure SKY-1: idle CPUs take any
	 * task at once.
	 */
	u64 affinity_grace_ns;
	/*
	 * After this long any idle CPU may take a task waiting for a busy CPU,
	 * whatever the loads say (its CPU is busy with something long).
	 */
	u64 patience_ns;
	/*
	 * How long a gang thread waits at home (no CPU free there) before
	 * another domain's CPU may take it; below the starvation rescue.
	 */
	u64 gang_spill_ns;
	/* Every queued task runs within this (plus scheduling latency). */
	u64 starve_ns;
	/*
	 * The latency path (burst.bpf.h, latency.bpf.h): a task whose runs
	 * per wakeup stay under this is short, sorts ahead, claims idle CPUs
	 * near and may preempt; 0: off.
	 */
	u64 latency_burst_ns;
	/* A task runs this long before a short wakee may preempt it. */
	u64 latency_min_run_ns;
	/* Generation, bumped on each policy change (shown in stats). */
	u64 generation;
	/*
	 * The class hints by task name BPF applies itself (class.bpf.h), in
	 * the daemon's order: the command line's, then the policy's.
	 */
	struct sky_comm_rule comm_rules[SKY_COMM_RULES_MAX];
	u32 nr_comm_rules;
	/*
	 * 1: a class can say memory-bound (a hint does, or the PMU counts),
	 * so a new process's class is looked up for a provisional gang home.
	 */
	u32 gang_by_class;
};

#endif /* __SKY_INTF_H */
