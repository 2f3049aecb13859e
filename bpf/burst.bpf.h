/* SPDX-License-Identifier: GPL-2.0 */
/*
 * burst.bpf.h - how long a task runs each time it wakes, and so whether it
 * is short: the tasks the latency path (latency.bpf.h) serves first.
 *
 * A task's burst is its run time from becoming runnable to sleeping again
 * (bpfland's "awake time"), averaged over its wakeups; its wake gap is the
 * average time between wakeups. A task is short while its bursts stay
 * under latency_burst_ns and it runs at most half the time between its
 * wakeups: a task that runs just under the limit and sleeps 10 us is
 * busy, not short, however it slices its work. It turns short only once
 * its average burst is under three quarters of the limit (hysteresis), and
 * stops being short the moment one burst runs over a slice (a hog, within
 * its first slice). One long burst counts in the average as at most twice
 * the limit: a short task that a stall kept running for milliseconds (a
 * vCPU the host did not run, an interrupt storm) stays short, where a
 * sample of its full length kept it out of the latency path for five
 * wakeups or more (in the latency scenario under TCG, 55 % of wakeups
 * were of short tasks; with the bound, 90 %).
 *
 * The same figure orders the queues (vtime.bpf.h): a queued task's key is
 * its vtime plus its burst (its run so far, if longer) at most a slice, so
 * a task that ran 20 us since it woke sorts ahead of a hog that ran a
 * whole slice, and nice weights still scale both.
 *
 * latency_burst_ns = 0 turns all of this off (sky1-strict: the paper's
 * algorithm).
 */
#ifndef __SKY_BURST_BPF_H
#define __SKY_BURST_BPF_H

#include "sky.bpf.h"
#include "load.bpf.h"

/* Is the latency path on? */
static __always_inline bool sky_lat_on(void)
{
	return sky_cfg.latency_burst_ns != 0;
}

/* An average that moves a quarter of the way to each new @sample. */
static __always_inline u64 sky_ewma(u64 avg, u64 sample)
{
	return avg ? (avg * 3 + sample) / 4 : sample;
}

/* @tctx's task became runnable at @now: a new burst begins. */
static __always_inline void sky_burst_woke(struct sky_task *tctx, u64 now)
{
	if (tctx->woke_at_ns && now > tctx->woke_at_ns)
		tctx->wake_gap_ns = sky_ewma(tctx->wake_gap_ns, now - tctx->woke_at_ns);
	tctx->woke_at_ns = now;
	tctx->awake_ns = 0;
}

/* @tctx's task ran @ran_ns: a burst over a slice ends its shortness at once. */
static __always_inline void sky_burst_ran(struct sky_task *tctx, u64 ran_ns)
{
	tctx->awake_ns += ran_ns;
	if (tctx->awake_ns > sky_cfg.slice_ns)
		tctx->short_task = 0;
}

/* @tctx's task went to sleep: its burst ended; is it short now? */
static __always_inline void sky_burst_slept(struct sky_task *tctx)
{
	u64 limit = sky_cfg.latency_burst_ns, burst = tctx->awake_ns;

	/* One long burst moves the average by at most a quarter of 2 x the limit. */
	if (burst > limit * 2)
		burst = limit * 2;
	burst = tctx->burst_ns = sky_ewma(tctx->burst_ns, burst);
	if (!limit || burst > limit || burst * 2 > tctx->wake_gap_ns)
		tctx->short_task = 0;
	else if (burst * 4 <= limit * 3)
		tctx->short_task = 1;
}

/* Is @tctx's task short (and the latency path on)? */
static __always_inline bool sky_is_short(const struct sky_task *tctx)
{
	return tctx && tctx->short_task && sky_lat_on();
}

/*
 * The burst term of @p's queue key: its burst, or its run since it woke if
 * longer, at most a slice, in vtime (scaled by its weight). 0 with the
 * latency path off, and under overload.
 */
static __always_inline u64 sky_burst_term(const struct task_struct *p, const struct sky_task *tctx)
{
	u64 burst;

	/* Under overload every task takes its turn (load.bpf.h). */
	if (!tctx || !sky_lat_on() || sky_bound_grown())
		return 0;
	burst = tctx->awake_ns > tctx->burst_ns ? tctx->awake_ns : tctx->burst_ns;
	if (burst > sky_cfg.slice_ns)
		burst = sky_cfg.slice_ns;
	return burst * 100 / (p->scx.weight ?: 1);
}

#endif /* __SKY_BURST_BPF_H */
