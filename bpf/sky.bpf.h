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
	/* When the task last stopped running: its cache starts cooling here. */
	u64 last_ran_ns;
	/* When the task was queued; 0 while it is not waiting in a queue. */
	u64 queued_at_ns;
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

/* Time a task has been off CPU: how long its cached data had to decay. */
static __always_inline u64 sky_away_ns(const struct sky_task *tctx, u64 now)
{
	return tctx->last_ran_ns && now > tctx->last_ran_ns ? now - tctx->last_ran_ns : 0;
}

/* A task that may run on any CPU: the only kind SKY-1 moves around. */
static __always_inline bool sky_task_is_free(const struct task_struct *p)
{
	return p->nr_cpus_allowed >= scx_bpf_nr_cpu_ids();
}

#endif /* __SKY_BPF_H */
