/* SPDX-License-Identifier: GPL-2.0 */
/*
 * load.bpf.h - how many tasks each CPU has to run, on average, and so
 * whether moving a task off its CPU balances anything.
 *
 * A busy machine's CPUs go idle for moments: all of a CPU's tasks happen to
 * sleep at once, or TCG's jitter stretches a gap. Taking another CPU's
 * waiting task then looks free, but the idle CPU's own tasks come back a
 * moment later and find it busy, so one of them moves, and moves chain:
 * with three tasks per CPU, that cost SKY-1 a quarter of its last-CPU
 * runs. EEVDF avoids the same trap by comparing load averages, not
 * instantaneous idleness (and by not searching for idle CPUs at wakeup
 * when the cache domain is busy). scx_sky does the same:
 *
 * - each CPU's load is a moving average of the tasks it had to run (the
 *   running one plus those queued for it), sampled by the bound timer,
 *   which runs whenever anything waits (bound.bpf.h), over a time constant
 *   of half starve_ns;
 * - an idle CPU takes a task waiting for another CPU (after the grace)
 *   only if that CPU is overloaded: its load exceeds the domain's average
 *   by a whole task (half a task where the domain has room to spare);
 * - a cold task claims an idle CPU at wakeup only where the domain is not
 *   busy (under one task per CPU) or its own CPU is overloaded.
 *
 * The wait bound does not depend on this: the patience (grace.bpf.h) and
 * the starvation rescue move a task whatever the loads say.
 */
#ifndef __SKY_LOAD_BPF_H
#define __SKY_LOAD_BPF_H

#include "sky.bpf.h"
#include "topology.bpf.h"

/* Fixed point: one task always runnable. */
#define SKY_LOAD_ONE 1024

/* Each CPU's load, its domain's average, and when they were last sampled. */
static u32 sky_cpu_load[SKY_MAX_CPUS];
static u32 sky_llc_load[SKY_MAX_LLCS];
/*
 * When the last sample, which is the last bound scan, began: each scan
 * claims its turn by moving this (bound.bpf.h, sky_bound_claim_scan).
 */
static u64 sky_load_sampled_at;
/*
 * Tasks each CPU started (its own slot only, from ops.running), and what
 * the last sample found: starts in all, CPUs online, tasks queued in all
 * of scx_sky's queues. For the wait bound under overload (bound.bpf.h).
 */
static u64 sky_cpu_starts[SKY_MAX_CPUS];
static u64 sky_sampled_starts;
static u32 sky_sampled_online;
static u64 sky_sampled_queued;
/*
 * The bound in force: starve_ns, unless more tasks are runnable than it
 * serves. Then waits cannot all stay under it however tasks are ordered,
 * and a bound held anyway turns every task into a rescue, so the rescue
 * queue becomes the scheduler (FIFO, a preempting kick per task, no
 * affinity). Instead the bound grows to twice a round: the time all
 * runnable tasks take to run once each on the CPUs online, runnable x the
 * time a CPU spends per task / CPUs. That time is a minimum slice at
 * least, or what the CPUs measure (sky_cpu_starts, above: under TCG a
 * switch alone can take longer than slice_min_ns). Twice, because the
 * queues are not equally long. At most sky_bound_max_ns. The queues serve the
 * tasks in vtime order with slices shrunk to slice_min_ns (vtime.bpf.h),
 * and with no sleeper credit or burst term: round-robin within each
 * queue, last-CPU affinity kept. Followed by every scan (sky_bound_follow,
 * bound.bpf.h). Kept here, beside the load it follows, because queue
 * order (vtime.bpf.h, burst.bpf.h) depends on it too.
 */
static u64 sky_bound_load_ns;

/* More tasks are runnable than starve_ns serves: the bound has grown. */
static __always_inline bool sky_bound_grown(void)
{
	return sky_bound_load_ns > sky_cfg.starve_ns;
}

/* Scratch for the domain sums, written by the sampler only. */
static u32 sky_llc_load_sum[SKY_MAX_LLCS];
static u32 sky_llc_load_cpus[SKY_MAX_LLCS];

/* A task starts on @cpu (ops.running). */
static __always_inline void sky_load_started(s32 cpu)
{
	sky_cpu_starts[sky_cpu_idx(cpu)]++;
}

static __always_inline u32 sky_load_of(s32 cpu)
{
	return sky_cpu_load[sky_cpu_idx(cpu)];
}

static __always_inline u32 sky_llc_load_of(u32 llc)
{
	return sky_llc_load[llc & (SKY_MAX_LLCS - 1)];
}

/* Tasks @cpu has to run right now: the running one and the queued ones. */
static __always_inline u32 sky_cpu_runnable(s32 cpu, const struct cpumask *idle)
{
	s32 queued = scx_bpf_dsq_nr_queued(sky_cpu_dsq(cpu)) +
		     scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | cpu);

	return (queued > 0 ? queued : 0) + !bpf_cpumask_test_cpu(cpu, idle);
}

/*
 * Folds the present into every CPU's average, weighing it by the time
 * since the last sample (@dt) over the time constant (all of it after a
 * longer gap), then recomputes the domain averages; counts starts, CPUs
 * online and tasks queued. Called from the bound scans only
 * (bound.bpf.h), which claim their turn, so each average has one writer
 * at a time. Global: verified once (the timer callback's own
 * body is near the verifier's jump-sequence limit).
 */
__noinline int sky_load_sample(u64 dt)
{
	u64 tau = sky_cfg.starve_ns / 2 ?: 1;
	u32 weight = dt >= tau ? SKY_LOAD_ONE : dt * SKY_LOAD_ONE / tau;
	const struct cpumask *idle;
	u64 starts = 0, queued = 0;
	u32 cpu, llc, online = 0;
	s32 n;

	bpf_for(llc, 0, sky_nr_llcs) {
		sky_llc_load_sum[llc & (SKY_MAX_LLCS - 1)] = 0;
		sky_llc_load_cpus[llc & (SKY_MAX_LLCS - 1)] = 0;
		n = scx_bpf_dsq_nr_queued(sky_llc_dsq(llc));
		queued += n > 0 ? n : 0;
	}
	idle = scx_bpf_get_idle_cpumask();
	bpf_for(cpu, 0, sky_nr_cpus) {
		u32 *load = &sky_cpu_load[sky_cpu_idx(cpu)], l = sky_llc_of(cpu);
		u64 sample;

		starts += sky_cpu_starts[sky_cpu_idx(cpu)];
		n = scx_bpf_dsq_nr_queued(sky_cpu_dsq(cpu));
		queued += n > 0 ? n : 0;
		if (!sky_cpu_is_online(cpu)) {
			*load = 0;
			continue;
		}
		online++;
		sample = sky_cpu_runnable(cpu, idle) * SKY_LOAD_ONE;
		/* Unsigned steps: BPF before ISA v4 has no signed division. */
		if (sample >= *load)
			*load += (sample - *load) * weight / SKY_LOAD_ONE;
		else
			*load -= (*load - sample) * weight / SKY_LOAD_ONE;
		if (l < sky_nr_llcs) {
			sky_llc_load_sum[l & (SKY_MAX_LLCS - 1)] += *load;
			sky_llc_load_cpus[l & (SKY_MAX_LLCS - 1)]++;
		}
	}
	scx_bpf_put_idle_cpumask(idle);
	n = scx_bpf_dsq_nr_queued(SKY_DSQ_RESCUE);
	sky_sampled_queued = queued + (n > 0 ? n : 0);
	sky_sampled_starts = starts;
	sky_sampled_online = online;
	bpf_for(llc, 0, sky_nr_llcs) {
		u32 i = llc & (SKY_MAX_LLCS - 1), n = sky_llc_load_cpus[i];

		sky_llc_load[i] = n ? sky_llc_load_sum[i] / n : 0;
	}
	return 0;
}

/* Does domain @llc have at least one task per CPU to run, on average? */
static __always_inline bool sky_llc_busy(u32 llc)
{
	return sky_llc_load_of(llc) >= SKY_LOAD_ONE;
}

/*
 * Is @cpu overloaded: carrying more than its domain's average by half a
 * task where the domain has room to spare, by a whole task where it is
 * busy (there the averages of equally loaded CPUs wander that far)? Only
 * then does an idle CPU taking one of its waiting tasks balance for good.
 */
static __always_inline bool sky_overloaded(s32 cpu)
{
	u32 llc = sky_llc_of(cpu), domain = sky_llc_load_of(llc);
	u32 margin = sky_llc_busy(llc) ? SKY_LOAD_ONE : SKY_LOAD_ONE / 2;

	return sky_load_of(cpu) >= domain + margin;
}

/*
 * May a cold task whose CPU @cpu is busy claim an idle CPU at wakeup?
 * Where the domain has room to spare, yes: its cache is gone, the move
 * costs nothing. Where the domain is busy, only off an overloaded CPU:
 * the idle CPU's own tasks are about to come back (EEVDF, likewise, stops
 * searching for idle CPUs at wakeup when the domain is busy).
 */
static __always_inline bool sky_may_claim_idle(s32 cpu)
{
	return !sky_llc_busy(sky_llc_of(cpu)) || sky_overloaded(cpu);
}

#endif /* __SKY_LOAD_BPF_H */
