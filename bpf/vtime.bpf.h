/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vtime.bpf.h - task priority as weighted virtual time, and time slices.
 *
 * A task's vtime advances by the time it actually ran (timestamps taken in
 * ops.running and ops.stopping, so a slice refilled while the task keeps
 * its CPU is charged too) divided by its weight (nice). Queues are ordered
 * by vtime.
 *
 * Each queue has its own vtime clock, because vtime runs at a different
 * pace on each CPU: a CPU running a nice 19 task moves its clock 60 times
 * faster than one running nice 0 tasks. (One global clock let a task
 * waking on a CPU of slow vtime land seconds behind a task that kept
 * running there, which then kept the CPU for seconds.) A CPU's clock is
 * the vtime of the tasks it starts, moving at most a slice per start so a
 * task started out of order (rescued, or handed over directly) cannot
 * throw it forward; a domain queue's clock moves at the mean pace of its
 * CPUs' clocks (the CPUs add to it without a lock: a step lost now and
 * then only nudges the order of the domain queue). A task's place is its
 * lag: its vtime minus the clock of the queue it is in. It keeps its lag,
 * but at most a sleeper credit behind (so a sleeper can neither
 * monopolise the CPU on wakeup nor be starved by tasks that never sleep);
 * moving to another queue it keeps no lag ahead, so a task from a CPU of
 * fast vtime is not made to wait. Under overload (load.bpf.h) there is no
 * credit: a round is longer than any credit, and each waking sleeper would
 * come in ahead of tasks that waited most of it.
 *
 * A queue's key for a task is its vtime plus its burst term (burst.bpf.h:
 * a short sleeper sorts ahead of a hog); the term rides in dsq_vtime only
 * while the task is queued (key_extra) and comes off when it starts, so it
 * never accumulates into the task's vtime.
 *
 * Slices shrink while tasks wait for the CPU, so that a CPU with many
 * runnable tasks (e.g. all pinned to it) still cycles through them within
 * the wait bound; never below slice_min_ns.
 */
#ifndef __SKY_VTIME_BPF_H
#define __SKY_VTIME_BPF_H

#include "sky.bpf.h"
#include "topology.bpf.h"
#include "load.bpf.h"
#include "burst.bpf.h"

static u64 sky_cpu_vclock[SKY_MAX_CPUS];
static u64 sky_llc_vclock[SKY_MAX_LLCS];

/* The queue a task's vtime is measured against: CPU @cpu's. */
static __always_inline s32 sky_vframe_cpu(s32 cpu)
{
	return cpu;
}

/* ... or domain @llc's. */
static __always_inline s32 sky_vframe_llc(u32 llc)
{
	return -1 - (s32)(llc & (SKY_MAX_LLCS - 1));
}

static __always_inline u64 *sky_vclock(s32 frame)
{
	if (frame >= 0)
		return &sky_cpu_vclock[sky_cpu_idx(frame)];
	return &sky_llc_vclock[(u32)(-1 - frame) & (SKY_MAX_LLCS - 1)];
}

/* How far @vtime is ahead of (> 0) or behind @frame's clock. */
static __always_inline s64 sky_vlag(u64 vtime, s32 frame)
{
	return (s64)(vtime - *sky_vclock(frame));
}

/* @p's vtime: what dsq_vtime holds, without the key's burst term. */
static __always_inline u64 sky_vtime_of(const struct task_struct *p, const struct sky_task *tctx)
{
	return p->scx.dsq_vtime - (tctx ? tctx->key_extra : 0);
}

/*
 * A lag measured against queue @from's clock, as it counts in a queue of
 * @to: bounded as the header comment says.
 */
static __always_inline s64 sky_lag_carried(s64 lag, s32 from, s32 to)
{
	/*
	 * Under overload a credit lets each waking sleeper in ahead of tasks
	 * that have waited longer: no credit then, the queue is a round.
	 */
	s64 behind = sky_bound_grown() ? 0 : -(s64)sky_cfg.sleeper_credit_ns;

	if (lag < behind)
		lag = behind;
	if (lag > 0 && from != to)
		lag = 0;
	return lag;
}

/* @p's lag in a queue of @frame: the lag it has in its own, carried over. */
static __always_inline s64 sky_lag_in(const struct task_struct *p, const struct sky_task *tctx,
				      s32 frame)
{
	return sky_lag_carried(sky_vlag(sky_vtime_of(p, tctx), tctx->vframe), tctx->vframe, frame);
}

/* @p's vtime measured against @frame's clock from now on. */
static __always_inline u64 sky_vtime_in(const struct task_struct *p, struct sky_task *tctx,
					s32 frame)
{
	s64 lag;

	if (!tctx)
		return *sky_vclock(frame);
	lag = sky_lag_in(p, tctx, frame);
	tctx->vframe = frame;
	return *sky_vclock(frame) + lag;
}

/*
 * @p's key for a place in a queue of @frame: its vtime there plus its
 * burst term, which is recorded; the caller stores the key.
 */
static __always_inline u64 sky_queue_key(const struct task_struct *p, struct sky_task *tctx,
					 s32 frame)
{
	u64 vtime = sky_vtime_in(p, tctx, frame);

	if (!tctx)
		return vtime;
	tctx->key_extra = sky_burst_term(p, tctx);
	return vtime + tctx->key_extra;
}

/*
 * Each CPU's share of the rescue queue (every CPU serves it), as the last
 * bound scan counted it (bound.bpf.h), so that a slice costs no count of
 * its own.
 */
static u64 sky_rescued_per_cpu;

/*
 * Tasks waiting for @cpu: its own queue, its share of its domain's, and
 * its share of the rescue queue.
 */
static __always_inline u64 sky_waiting_for(s32 cpu)
{
	u32 llc = sky_llc_of(cpu);
	s32 own = scx_bpf_dsq_nr_queued(sky_cpu_dsq(cpu));
	s32 shared = scx_bpf_dsq_nr_queued(sky_llc_dsq(llc));
	u32 size = sky_llc_size(llc);

	return (own > 0 ? own : 0) + (shared > 0 ? shared : 0) / (size ?: 1) + sky_rescued_per_cpu;
}

/* The slice for a task starting on @cpu. */
static __always_inline u64 sky_slice_for(s32 cpu)
{
	u64 slice = sky_cfg.slice_ns / (1 + sky_waiting_for(cpu));

	return slice > sky_cfg.slice_min_ns ? slice : sky_cfg.slice_min_ns;
}

/*
 * @p starts on @cpu: its vtime is measured against @cpu's clock from now
 * on, and the clocks move (see the header comment).
 */
static __always_inline void sky_vtime_started(struct task_struct *p, struct sky_task *tctx, s32 cpu,
					      u64 now)
{
	u64 *clock = sky_vclock(sky_vframe_cpu(cpu)), vtime = p->scx.dsq_vtime, step;
	u32 llc = sky_llc_of(cpu), size = sky_llc_size(llc);

	if (tctx) {
		vtime = tctx->vframe == sky_vframe_cpu(cpu)
				? sky_vtime_of(p, tctx)
				: sky_vtime_in(p, tctx, sky_vframe_cpu(cpu));
		tctx->key_extra = 0;
		if (vtime != p->scx.dsq_vtime)
			scx_bpf_task_set_dsq_vtime(p, vtime);
	}
	if ((s64)(vtime - *clock) > 0) {
		step = vtime - *clock;
		if (step > sky_cfg.slice_ns)
			step = sky_cfg.slice_ns;
		*clock += step;
		*sky_vclock(sky_vframe_llc(llc)) += step / (size ?: 1);
	}
	if (tctx)
		tctx->started_at_ns = now;
}

/* How long @p has run since it started; 0 if it is not running. */
static __always_inline u64 sky_ran_ns(const struct sky_task *tctx, u64 now)
{
	return tctx && tctx->started_at_ns && now > tctx->started_at_ns ? now - tctx->started_at_ns
									: 0;
}

/* @p's vtime as if it were charged for its run up to @now. */
static __always_inline u64 sky_vtime_live(const struct task_struct *p, const struct sky_task *tctx,
					  u64 now)
{
	return p->scx.dsq_vtime + sky_ran_ns(tctx, now) * 100 / (p->scx.weight ?: 1);
}

/*
 * The key of @p running on @cpu, as a lag in @cpu's frame: its live vtime
 * plus its burst term, to hold against queued tasks' keys (their lags).
 */
static __always_inline s64 sky_running_lag(const struct task_struct *p, const struct sky_task *tctx,
					   s32 cpu, u64 now)
{
	return sky_vlag(sky_vtime_live(p, tctx, now) + sky_burst_term(p, tctx),
			sky_vframe_cpu(cpu));
}

/* Queues @p in domain @llc's queue by its key there. */
static __always_inline void sky_queue_in_llc(struct task_struct *p, struct sky_task *tctx, u32 llc,
					     u64 enq_flags)
{
	scx_bpf_dsq_insert_vtime(p, sky_llc_dsq(llc), sky_cfg.slice_ns,
				 sky_queue_key(p, tctx, sky_vframe_llc(llc)), enq_flags);
}

/*
 * Charges @p for the time it ran since it started, scaled by its weight;
 * returns that time.
 */
static __always_inline u64 sky_vtime_charge(struct task_struct *p, struct sky_task *tctx, u64 now)
{
	u64 ran = sky_ran_ns(tctx, now);

	if (!tctx || !ran)
		return 0;
	scx_bpf_task_set_dsq_vtime(p, sky_vtime_live(p, tctx, now));
	tctx->started_at_ns = 0;
	return ran;
}

/* A task new to scx_sky (or back from another class) starts level. */
static __always_inline void sky_vtime_enable(struct task_struct *p, struct sky_task *tctx)
{
	s32 frame = sky_vframe_cpu(scx_bpf_task_cpu(p));

	if (tctx) {
		tctx->vframe = frame;
		tctx->key_extra = 0;
	}
	scx_bpf_task_set_dsq_vtime(p, *sky_vclock(frame));
}

#endif /* __SKY_VTIME_BPF_H */
