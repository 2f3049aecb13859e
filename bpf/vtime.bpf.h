/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vtime.bpf.h - task priority as weighted virtual time, and time slices.
 *
 * A task's vtime advances by the time it actually ran (timestamps taken in
 * ops.running and ops.stopping, so a slice refilled while the task keeps
 * its CPU is charged too) divided by its weight (nice). Queues are ordered
 * by vtime, and a sleeper's credit is capped so it can neither monopolise a
 * CPU on wakeup nor be starved by tasks that never sleep.
 *
 * Slices shrink while tasks wait for the CPU, so that a CPU with many
 * runnable tasks (e.g. all pinned to it) still cycles through them within
 * the wait bound; never below slice_min_ns.
 */
#ifndef __SKY_VTIME_BPF_H
#define __SKY_VTIME_BPF_H

#include "sky.bpf.h"
#include "topology.bpf.h"

/* The vtime of the most recently started task: "now" in vtime. */
static u64 sky_vtime_now;

static __always_inline u64 sky_vtime_for_queue(const struct task_struct *p)
{
	u64 credit = sky_cfg.sleeper_credit_ns;
	u64 floor = sky_vtime_now > credit ? sky_vtime_now - credit : 0;

	return p->scx.dsq_vtime > floor ? p->scx.dsq_vtime : floor;
}

/* Tasks waiting for @cpu: its own queue and its share of its domain's. */
static __always_inline u64 sky_waiting_for(s32 cpu)
{
	u32 llc = sky_llc_of(cpu);
	s32 own = scx_bpf_dsq_nr_queued(sky_cpu_dsq(cpu));
	s32 shared = scx_bpf_dsq_nr_queued(sky_llc_dsq(llc));
	u32 size = sky_llc_size(llc);

	return (own > 0 ? own : 0) + (shared > 0 ? shared : 0) / (size ?: 1);
}

/* The slice for a task starting on @cpu. */
static __always_inline u64 sky_slice_for(s32 cpu)
{
	u64 slice = sky_cfg.slice_ns / (1 + sky_waiting_for(cpu));

	return slice > sky_cfg.slice_min_ns ? slice : sky_cfg.slice_min_ns;
}

static __always_inline void sky_vtime_started(struct task_struct *p, struct sky_task *tctx,
					      u64 now)
{
	if ((s64)(p->scx.dsq_vtime - sky_vtime_now) > 0)
		sky_vtime_now = p->scx.dsq_vtime;
	if (tctx)
		tctx->started_at_ns = now;
}

/* How long @p has run since it started; 0 if it is not running. */
static __always_inline u64 sky_ran_ns(const struct sky_task *tctx, u64 now)
{
	return tctx && tctx->started_at_ns && now > tctx->started_at_ns ?
		       now - tctx->started_at_ns : 0;
}

/* @p's vtime as if it were charged for its run up to @now. */
static __always_inline u64 sky_vtime_live(const struct task_struct *p,
					  const struct sky_task *tctx, u64 now)
{
	return p->scx.dsq_vtime + sky_ran_ns(tctx, now) * 100 / (p->scx.weight ?: 1);
}

/*
 * Charges @p for the time it ran since it started, scaled by its weight;
 * returns that time.
 */
static __always_inline u64 sky_vtime_charge(struct task_struct *p, struct sky_task *tctx,
					    u64 now)
{
	u64 ran = sky_ran_ns(tctx, now);

	if (!tctx || !ran)
		return 0;
	scx_bpf_task_set_dsq_vtime(p, sky_vtime_live(p, tctx, now));
	tctx->started_at_ns = 0;
	return ran;
}

static __always_inline void sky_vtime_enable(struct task_struct *p)
{
	scx_bpf_task_set_dsq_vtime(p, sky_vtime_now);
}

#endif /* __SKY_VTIME_BPF_H */
