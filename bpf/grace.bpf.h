/* SPDX-License-Identifier: GPL-2.0 */
/*
 * grace.bpf.h - when may an idle CPU take a task that is warm on another?
 *
 * A warm task waits in the queue of the CPU it last ran on. Pure SKY-1
 * (affinity_grace_ns = 0) lets any idle CPU take it at once, which
 * migrates a task whose own CPU would have been free a moment later, and
 * each move unbalances another CPU, so moves chain. scx_sky instead leaves
 * it for its own CPU for affinity_grace_ns. After that it is fair game if
 * its CPU is overloaded (load.bpf.h: then moving it balances for good),
 * or once it has waited the patience (patience_ns: PATIENCE_SLICES slices,
 * set by the policy): its CPU is busy with something long, a hog whose
 * slices keep being renewed, a task of a higher class, a CPU in the middle
 * of going offline. (Leaving the patience to the starvation rescue alone
 * in busy domains kept more runs on the last CPU but let waits under CPU
 * hotplug reach 1-2.4 s: the patience stays.) A task waiting for an
 * offline CPU, or starving, may always be taken.
 *
 * This holds for tasks whose footprint went cold too: taking one costs no
 * cache, but moving it when its CPU is not overloaded only trades places
 * with another task later (the churn that costs pure SKY-1 its affinity).
 *
 * A short task (burst.bpf.h) has no grace: its footprint is small, and
 * a wait behind a hog costs it more than a cache refill.
 *
 * bound.bpf.h sets an alarm for the moment a grace runs out, so an idle
 * CPU is woken then to take the task: this is what makes the grace a
 * bound and not a hope.
 */
#ifndef __SKY_GRACE_BPF_H
#define __SKY_GRACE_BPF_H

#include "sky.bpf.h"
#include "topology.bpf.h"
#include "decay.bpf.h"
#include "burst.bpf.h"
#include "load.bpf.h"

/*
 * May a CPU other than @owner take @tctx's task, which waits in @owner's
 * queue? 0 if it may now, else the nanoseconds until it may.
 */
static __always_inline u64 sky_grace_left(const struct sky_task *tctx, s32 owner, u64 now)
{
	u64 queued = sky_queued_for(tctx, now);
	u64 grace = sky_cfg.affinity_grace_ns, patience = sky_cfg.patience_ns;

	if (!grace || !sky_cpu_is_online(owner) || queued >= sky_cfg.starve_ns ||
	    sky_is_short(tctx))
		return 0;
	if (queued < grace)
		return grace - queued;
	if (queued >= patience || sky_overloaded(owner))
		return 0;
	return patience - queued;
}

/*
 * May a CPU of another cache domain take @p, queued in its domain's queue?
 * At once if its LLC footprint is cold; else after the grace, like a warm
 * task. 0 if it may now, else the nanoseconds until it may.
 */
static __always_inline u64 sky_foreign_left(const struct task_struct *p,
					    const struct sky_task *tctx, u64 now)
{
	u64 queued = sky_queued_for(tctx, now), grace = sky_cfg.affinity_grace_ns;

	if (!sky_cfg.affinity || queued >= grace || sky_is_short(tctx) ||
	    sky_decay_of(p, tctx, now) == SKY_LLC_COLD)
		return 0;
	return grace - queued;
}

/*
 * How long until a CPU other than the one @p waits for may take it: @p
 * waits in the queue of CPU @owner, or (@owner < 0) of its domain.
 * 0 if it may now.
 */
static __always_inline u64 sky_take_left(const struct task_struct *p, const struct sky_task *tctx,
					 s32 owner, u64 now)
{
	return owner >= 0 ? sky_grace_left(tctx, owner, now) : sky_foreign_left(p, tctx, now);
}

#endif /* __SKY_GRACE_BPF_H */
