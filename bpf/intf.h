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
	SKY_MAX_CPUS		= 1024,
	SKY_MAX_LLCS		= 128,
	/* The per-LLC queues are user DSQs numbered from here. */
	SKY_DSQ_LLC_BASE	= 0x1000,
	/* Marks a CPU whose cache domain was unknown when the daemon started. */
	SKY_LLC_UNKNOWN		= 0xffffffff,
	/* Hard cap on the dispatch walk, whatever the policy asks for. */
	SKY_WALK_MAX		= 32,
};

/*
 * Per-CPU event counters. Keep the comment on each line: it becomes the
 * description shown by `scx_sky` and documented in the README.
 */
enum sky_stat_idx {
	SKY_STAT_DISPATCHES,		/* tasks handed to a CPU to run */
	SKY_STAT_LAST_CPU_HITS,		/* tasks that ran on the CPU they last ran on */
	SKY_STAT_MOVES_IN_LLC,		/* tasks moved to another CPU of the same cache domain */
	SKY_STAT_MOVES_ACROSS_LLC,	/* tasks moved to another cache domain */
	SKY_STAT_DIRECT_HANDOFFS,	/* wakeups handed straight to their idle previous CPU */
	SKY_STAT_DECAYED_MOVES,		/* moves of tasks whose cache footprint had decayed */
	SKY_STAT_WALK_STEPS,		/* queued tasks inspected by dispatch walks */
	SKY_STAT_WALKS,			/* dispatch walks over a cache-domain queue */
	SKY_STAT_STEALS,		/* tasks taken from another cache domain's queue */
	SKY_STAT_STARVATION_RESCUES,	/* tasks taken out of order because they waited too long */
	SKY_STAT_GRACE_EXPIRED,		/* warm tasks taken by another CPU after the affinity grace */
	SKY_STAT_GRACE_KICKS,		/* idle CPUs woken because a task's affinity grace ran out */
	SKY_STAT_IDLE_WITH_WAITERS,	/* CPUs that went idle while a task waited past the bound */
	SKY_STAT_WAIT_NS,		/* total nanoseconds tasks spent queued */
	SKY_STAT_HOTPLUG_EVENTS,	/* CPUs that went online or offline */
	SKY_NR_STATS,
};

/*
 * The policy: every knob BPF reads on each decision. The daemon writes it
 * once before attaching and again whenever the policy changes; no reload.
 */
struct sky_config {
	/* 1: SKY-1 last-CPU affinity; 0: plain weighted vtime (baseline). */
	u32 affinity;
	/* Max queued tasks a dispatch inspects looking for a cache-warm one. */
	u32 walk_depth;
	/* Off-CPU time after which the private (L2) cache is assumed cold. */
	u64 decay_core_ns;
	/* Off-CPU time after which the shared last-level cache is assumed cold. */
	u64 decay_llc_ns;
	/* Time slice given to each dispatched task. */
	u64 slice_ns;
	/* Most vtime credit a task can bank while sleeping. */
	u64 sleeper_credit_ns;
	/*
	 * How long an idle CPU leaves a warm task queued for the CPU it last
	 * ran on before taking it itself. 0 is pure SKY-1: idle CPUs take any
	 * task at once.
	 */
	u64 affinity_grace_ns;
	/* A task queued this long is run next by any CPU that can take it. */
	u64 starve_ns;
	/* Generation, bumped on each policy change (shown in stats). */
	u64 generation;
};

#endif /* __SKY_INTF_H */
