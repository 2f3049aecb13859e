/* SPDX-License-Identifier: GPL-2.0 */
/*
 * sky.bpf.h - the one header every scx_sky BPF file includes: kernel and scx
 * headers, the shared interface, per-task state and the policy in force.
 * Each concern lives in its own file and main.bpf.c only wires them into
 * the sched_ext ops table:
 *
 *   topology.bpf.h  cache domains, CPU online state, idle-CPU claims
 *   stats.bpf.h     per-CPU counters
 *   burst.bpf.h     run time per wakeup: which tasks are short
 *   vtime.bpf.h     weighted virtual time, queue keys and slices
 *   decay.bpf.h     when a task's cache footprint is cold (sleep / pressure)
 *   load.bpf.h      per-CPU load averages: does a move balance anything?
 *   grace.bpf.h     when an idle CPU may take a task warm on another CPU
 *   queues.bpf.h    queues and dispatch; SKY-1: which queue a task waits in
 *   bound.bpf.h     the wait bound: grace alarms and starvation rescue
 *   latency.bpf.h   short wakees: idle CPUs near, preemption, sync stacks, yield
 *   class.bpf.h     task classes the daemon gives (compute, pm-writer, ...)
 *   smt.bpf.h       SMT pairing: PM writers beside compute tasks
 *   gang.bpf.h      shared-cache gangs: memory-bound gangs kept at home
 *   pmu.bpf.h       PMU counts charged to the task that ran (for classes)
 *   dump.bpf.h      what the kernel prints when it ejects the scheduler
 *   tasks.bpf.h     the daemon's listing of every thread (not scheduling)
 */
#ifndef __SKY_BPF_H
#define __SKY_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"

/* Per-task scheduling state, in task-local storage. */
struct sky_task {
	/* CPU the task last ran on; -1 before its first run. */
	s32 last_cpu;
	/* 1 if its footprint was cold when it was last placed (for statistics). */
	u32 cold;
	/* CPU an SMT pairing move takes it to at its next enqueue; -1 none. */
	s32 smt_target;
	/* The queue its vtime is measured against (vtime.bpf.h). */
	s32 vframe;
	/* CPU a gang move takes it to at its next enqueue; -1 none (gang.bpf.h). */
	s32 gang_target;
	/* Cache domain whose queue it waits in for its gang's home; -1 none. */
	s32 gang_waiting_llc;
	/* When the task went to sleep; 0 while it is runnable. */
	u64 slept_at_ns;
	/* Length of its most recent sleep. */
	u64 last_sleep_ns;
	/* When the task was queued; 0 while it is not waiting in a queue. */
	u64 queued_at_ns;
	/* When it last started running: its run time is charged from this. */
	u64 started_at_ns;
	/* When its run on the CPU began: a restore (main.bpf.c) continues it. */
	u64 run_began_ns;
	/* Cache pressure on last_cpu and on its LLC when the task left them. */
	u64 left_cpu_pressure;
	u64 left_llc_pressure;
	/* No SMT pairing move for it before this (smt.bpf.h). */
	u64 smt_held_until;
	/* Run time since it last became runnable (burst.bpf.h). */
	u64 awake_ns;
	/* Average run time per wakeup, and average time between wakeups. */
	u64 burst_ns;
	u64 wake_gap_ns;
	/* When it last became runnable. */
	u64 woke_at_ns;
	/* The burst term its queue key carries on top of its vtime (vtime.bpf.h). */
	u64 key_extra;
	/* When it last woke a task synchronously; 0 once it slept or ran on. */
	u64 sync_woke_at_ns;
	/* How surely it sleeps right after a synchronous wakeup (latency.bpf.h). */
	u32 sync_trust;
	/* 1: short (burst.bpf.h). */
	u8 short_task;
	/* 1: it yielded; the next dispatch gives its CPU to a queued task. */
	u8 yielded;
	/*
	 * 1: it stopped on its CPU without sleeping and has not been queued
	 * since: if it runs now, the kernel restored it after changing its
	 * nice, class or affinity (main.bpf.c, sky_running).
	 */
	u8 restoring;
	/* Its waits before each run (stats.bpf.h). */
	struct sky_wait_hist waits;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sky_task);
} sky_tasks SEC(".maps");

/*
 * The policy in force, switched at runtime without a reload. The daemon
 * writes a whole policy into a free slot of sky_cfgs (.bss) and then
 * publishes its index in sky_cfg_live, so a published slot is always
 * complete. Each callback and timer pins the slot it reads at entry
 * (SKY_CFG_PIN(): per CPU) and puts back, when it returns, the slot the
 * CPU had pinned before. Where callbacks nest on one CPU (cpu_release's
 * re-enqueue calls enqueue; a timer may fire inside a sleepable callback)
 * the inner one decides under the newest policy and the outer one goes on
 * under the slot it pinned: so one decision never mixes two policies.
 * A slot is written again only SKY_CFG_SLOTS switches later and no sooner
 * than 16 ms after it stopped being live (a callback pins a slot only
 * while it is live): a callback would have to run for 16 ms to see its
 * slot change under it.
 */
extern struct sky_config sky_cfgs[SKY_CFG_SLOTS];
extern volatile u32 sky_cfg_live;
extern u32 sky_cfg_pinned[SKY_MAX_CPUS];
/*
 * When each slot was first pinned (bpf_ktime_get_ns()), 0 until then: the
 * daemon clears a slot's entry before publishing it, so a switch's latency
 * (request to first decision under the new policy) is measured here, in
 * the scheduler, not guessed from outside.
 */
extern u64 sky_cfg_first_use_ns[SKY_CFG_SLOTS];

static __always_inline u32 sky_this_cpu_slot(void)
{
	return bpf_get_smp_processor_id() & (SKY_MAX_CPUS - 1);
}

/*
 * Pins the published policy for the callback this CPU is running; returns
 * the slot pinned before, for sky_cfg_unpin(). Use SKY_CFG_PIN().
 */
static __always_inline u32 sky_cfg_pin(void)
{
	u32 live = sky_cfg_live & (SKY_CFG_SLOTS - 1), cpu = sky_this_cpu_slot();
	u32 outer = sky_cfg_pinned[cpu];

	sky_cfg_pinned[cpu] = live;
	/* One read of a line every CPU shares; one write per switch. */
	if (!sky_cfg_first_use_ns[live])
		__sync_val_compare_and_swap(&sky_cfg_first_use_ns[live], 0, bpf_ktime_get_ns());
	return outer;
}

/* Gives the CPU back the slot an outer callback had pinned. */
static __always_inline void sky_cfg_unpin(u32 *outer)
{
	sky_cfg_pinned[sky_this_cpu_slot()] = *outer;
}

/*
 * First statement of every callback and timer that reads the policy: pins
 * it for the callback's whole run and unpins on every return path.
 */
#define SKY_CFG_PIN() \
	u32 __sky_cfg_outer __attribute__((cleanup(sky_cfg_unpin), unused)) = sky_cfg_pin()

/* The policy this CPU's callback pinned. */
#define sky_cfg (sky_cfgs[sky_cfg_pinned[sky_this_cpu_slot()] & (SKY_CFG_SLOTS - 1)])

static __always_inline struct sky_task *sky_task_of(const struct task_struct *p)
{
	return bpf_task_storage_get(&sky_tasks, (struct task_struct *)p, 0, 0);
}

/* How long the task has been waiting in a queue; 0 if it is not queued. */
static __always_inline u64 sky_queued_for(const struct sky_task *tctx, u64 now)
{
	return tctx->queued_at_ns && now > tctx->queued_at_ns ? now - tctx->queued_at_ns : 0;
}

/* A task that may run on any CPU: the only kind SKY-1 moves around. */
static __always_inline bool sky_task_is_free(const struct task_struct *p)
{
	return p->nr_cpus_allowed >= scx_bpf_nr_cpu_ids();
}

/*
 * The head (next to run) of @dsq without taking it, or NULL. Valid only
 * for reading inside the current callback.
 */
static __always_inline struct task_struct *sky_peek(u64 dsq)
{
	if (scx_bpf_dsq_nr_queued(dsq) <= 0)
		return NULL;
	return __COMPAT_scx_bpf_dsq_peek(dsq);
}

/*
 * Step @n of a walk over a queue: its next task, or NULL past the queue's
 * end or the policy's walk_depth (the loop itself is bounded by
 * SKY_WALK_MAX for the verifier).
 */
static __always_inline struct task_struct *sky_walk_next(struct bpf_iter_scx_dsq *it, u32 n)
{
	if (n >= sky_cfg.walk_depth)
		return NULL;
	return bpf_iter_scx_dsq_next(it);
}

#endif /* __SKY_BPF_H */
