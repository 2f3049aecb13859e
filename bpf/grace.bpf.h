/* SPDX-License-Identifier: GPL-2.0 */
/*
 * grace.bpf.h - the bound on how long affinity may keep a task waiting.
 *
 * Pure SKY-1 lets an idle CPU take any queued task at once, which migrates
 * a warm task whose own CPU would have been free a moment later. scx_sky
 * instead leaves a warm task queued for its last CPU for at most
 * affinity_grace_ns while another CPU is idle. This timer makes the bound
 * hold: when it fires it wakes an idle CPU for every task whose grace ran
 * out, and that CPU's dispatch takes the task. The timer is armed only
 * while some CPU is idle next to a waiting task, so an idle machine sees no
 * periodic wakeups.
 *
 * Not every task past its grace is fair game: if it is the only task
 * waiting for its CPU, that CPU runs it as soon as its current task stops
 * (within a slice), so taking it would only start a chain of moves; it is
 * taken only after two slices, when something is wrong with its CPU. A task
 * queued behind another task of the same CPU is taken: that CPU is
 * overloaded, and the move balances it for good.
 */
#ifndef __SKY_GRACE_BPF_H
#define __SKY_GRACE_BPF_H

#include "sky.bpf.h"
#include "stats.bpf.h"
#include "topology.bpf.h"

struct sky_grace_timer {
	struct bpf_timer timer;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct sky_grace_timer);
} sky_grace_timer SEC(".maps");

/* 1 while the timer is pending: arming again would only push it back. */
static u32 sky_grace_armed;

/* Per CPU: queued tasks that last ran there (and so wait for it). */
static u32 sky_own_waiting[SKY_MAX_CPUS];

static __always_inline u32 *sky_own_waiting_of(s32 cpu)
{
	return &sky_own_waiting[(u32)cpu & (SKY_MAX_CPUS - 1)];
}

/* Called when @tctx's task is queued (true) or starts running (false). */
static __always_inline void sky_own_waiting_track(struct sky_task *tctx, bool queued)
{
	if (tctx->waiting_for >= 0)
		__sync_fetch_and_sub(sky_own_waiting_of(tctx->waiting_for), 1);
	tctx->waiting_for = queued ? tctx->last_cpu : -1;
	if (tctx->waiting_for >= 0)
		__sync_fetch_and_add(sky_own_waiting_of(tctx->waiting_for), 1);
}

/*
 * May a CPU other than its last take this queued task? Returns 0 if so,
 * else how long until it may (0 is never returned for "not yet").
 */
static __always_inline u64 sky_grace_left(const struct sky_task *tctx, u64 now)
{
	u64 queued = sky_queued_for(tctx, now);
	u64 grace = sky_cfg.affinity_grace_ns, patience = 2 * sky_cfg.slice_ns;

	/* No grace is pure SKY-1: any CPU may take any task at once. */
	if (!grace)
		return 0;
	if (queued < grace)
		return grace - queued;
	if (queued >= patience || tctx->last_cpu < 0 ||
	    *sky_own_waiting_of(tctx->last_cpu) >= 2)
		return 0;
	return patience - queued;
}

static __always_inline void sky_grace_arm(u64 delay_ns)
{
	u32 zero = 0;
	struct sky_grace_timer *t;

	if (!__sync_bool_compare_and_swap(&sky_grace_armed, 0, 1))
		return;
	t = bpf_map_lookup_elem(&sky_grace_timer, &zero);
	if (!t || bpf_timer_start(&t->timer, delay_ns ?: 1, 0))
		sky_grace_armed = 0;
}

/* Wakes an idle CPU that may run @p, preferring its cache domain. */
static __always_inline bool sky_kick_idle_for(const struct task_struct *p)
{
	s32 cpu = sky_claim_idle_near(p, scx_bpf_task_cpu(p), true);

	if (cpu < 0)
		return false;
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	return true;
}

static int sky_grace_timerfn(void *map, int *key, struct bpf_timer *timer)
{
	u64 now = scx_bpf_now(), next = (u64)-1, left;
	struct task_struct *p;
	struct sky_task *tctx;
	u32 llc, steps;

	sky_grace_armed = 0;
	bpf_for(llc, 0, nr_llcs) {
		u64 dsq = sky_llc_dsq(llc);

		if (scx_bpf_dsq_nr_queued(dsq) <= 0)
			continue;
		steps = 0;
		bpf_for_each(scx_dsq, p, dsq, 0) {
			if (steps++ >= SKY_WALK_MAX)
				break;
			tctx = sky_task_of(p);
			if (!tctx)
				continue;
			left = sky_grace_left(tctx, now);
			if (left && left < next)
				next = left;
			else if (!left && sky_kick_idle_for(p))
				sky_stat_inc(SKY_STAT_GRACE_KICKS);
		}
	}
	if (next != (u64)-1)
		sky_grace_arm(next);
	return 0;
}

static __always_inline s32 sky_grace_init(void)
{
	u32 zero = 0;
	struct sky_grace_timer *t = bpf_map_lookup_elem(&sky_grace_timer, &zero);

	if (!t)
		return -ENOENT;
	bpf_timer_init(&t->timer, &sky_grace_timer, CLOCK_MONOTONIC);
	bpf_timer_set_callback(&t->timer, sky_grace_timerfn);
	return 0;
}

#endif /* __SKY_GRACE_BPF_H */
