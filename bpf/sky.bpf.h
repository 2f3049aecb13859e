/* SPDX-License-Identifier: GPL-2.0 */
/*
 * sky.bpf.h - the one header every scx_sky BPF file includes: kernel and scx
 * headers, the shared interface, per-task state and the policy in force.
 * Each concern lives in its own file (topology, stats, vtime, sky1) and
 * main.bpf.c only wires them into the sched_ext ops table.
 */
#ifndef __SKY_BPF_H
#define __SKY_BPF_H

#include <scx/common.bpf.h>
#include "intf.h"

char _license[] SEC("license") = "GPL";

/* Per-task scheduling state, in task-local storage. */
struct sky_task {
	/* CPU the task last ran on; -1 before its first run. */
	s32 last_cpu;
	/* When the task went to sleep; 0 while it is runnable. */
	u64 slept_at_ns;
	/* Length of its most recent sleep. */
	u64 last_sleep_ns;
	/* When the task was queued; 0 while it is not waiting in a queue. */
	u64 queued_at_ns;
	/* The CPU whose count of waiting tasks includes this one, or -1. */
	s32 waiting_for;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sky_task);
} sky_tasks SEC(".maps");

/*
 * The policy in force. It lives in .bss so the daemon can rewrite it while
 * the scheduler runs; every decision reads it afresh.
 */
extern struct sky_config sky_cfg;

static __always_inline struct sky_task *sky_task_of(const struct task_struct *p)
{
	return bpf_task_storage_get(&sky_tasks, (struct task_struct *)p, 0, 0);
}

/*
 * How long the task slept before this wakeup: SKY-1's measure of how much of
 * its cached data other tasks have overwritten. Before ops.runnable has run
 * (i.e. in select_cpu) the sleep is still going on and is measured to now.
 */
static __always_inline u64 sky_sleep_ns(const struct sky_task *tctx, u64 now)
{
	if (tctx->slept_at_ns)
		return now > tctx->slept_at_ns ? now - tctx->slept_at_ns : 0;
	return tctx->last_sleep_ns;
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

#endif /* __SKY_BPF_H */
