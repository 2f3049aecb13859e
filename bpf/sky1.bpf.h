/* SPDX-License-Identifier: GPL-2.0 */
/*
 * sky1.bpf.h - SKY-1 cache affinity (Hitachi, see docs/design.md): run a
 * task on the CPU whose caches most likely still hold its data, the CPU it
 * last ran on, without ever letting a CPU idle while work waits.
 *
 * Wakeup:   previous CPU idle -> hand the task to it directly; otherwise
 *           queue it on its cache domain's queue.
 * Dispatch: walk the domain queue in priority order (bounded) and take the
 *           first task that last ran here or whose cache has decayed; if
 *           none, take the highest-priority task - at once in pure SKY-1,
 *           or once it has waited affinity_grace_ns (grace.bpf.h).
 * Decay:    two levels. Asleep longer than decay_core_ns, the private L2
 *           is cold: the task may move inside its LLC. Longer than
 *           decay_llc_ns, the LLC is cold too: it may move anywhere.
 *
 * As in the paper, decay is measured by sleep time: a task preempted and
 * queued is still taken to be warm on its last CPU.
 */
#ifndef __SKY_SKY1_BPF_H
#define __SKY_SKY1_BPF_H

#include "sky.bpf.h"
#include "stats.bpf.h"
#include "topology.bpf.h"
#include "grace.bpf.h"

enum sky_decay {
	SKY_WARM,		/* cache still warm: stay on the last CPU */
	SKY_CORE_COLD,		/* private cache cold: any CPU of the LLC */
	SKY_LLC_COLD,		/* everything cold: any CPU */
};

static __always_inline enum sky_decay sky1_decay(const struct sky_task *tctx, u64 now)
{
	u64 slept = sky_sleep_ns(tctx, now);

	if (tctx->last_cpu < 0 || slept >= sky_cfg.decay_llc_ns)
		return SKY_LLC_COLD;
	if (slept >= sky_cfg.decay_core_ns)
		return SKY_CORE_COLD;
	return SKY_WARM;
}

/*
 * Wakeup placement. Returns the CPU to run on and sets *direct when the
 * task was handed to an idle CPU (it then skips the queues).
 */
static __always_inline s32 sky1_select_cpu(struct task_struct *p, s32 prev_cpu, u64 wake_flags,
					   bool *direct)
{
	struct sky_task *tctx = sky_task_of(p);
	enum sky_decay decay;
	s32 cpu;

	*direct = false;
	if (!tctx || !sky_task_is_free(p))
		return scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, direct);

	if (scx_bpf_test_and_clear_cpu_idle(prev_cpu)) {
		*direct = true;
		sky_stat_inc(SKY_STAT_DIRECT_HANDOFFS);
		return prev_cpu;
	}

	decay = sky1_decay(tctx, scx_bpf_now());
	if (decay == SKY_WARM)
		return prev_cpu;
	cpu = sky_claim_idle_near(p, prev_cpu, decay == SKY_LLC_COLD);
	if (cpu < 0)
		return prev_cpu;
	*direct = true;
	return cpu;
}

/* What a dispatch walk is looking for, in the order dispatch tries them. */
enum sky_pick {
	SKY_PICK_HERE,		/* own domain: last ran here, or core cache cold */
	SKY_PICK_FOREIGN,	/* another domain: LLC cold */
	SKY_PICK_EXPIRED,	/* any domain: affinity grace ran out */
};

/*
 * Does @cpu want @p under @pick? A task that waited starve_ns always
 * qualifies: fairness overrides affinity.
 */
static __always_inline bool sky1_wants(const struct task_struct *p, s32 cpu, u64 now,
				       enum sky_pick pick)
{
	struct sky_task *tctx = sky_task_of(p);
	u64 queued;

	if (!tctx)
		return true;
	queued = sky_queued_for(tctx, now);
	if (queued >= sky_cfg.starve_ns)
		return true;
	switch (pick) {
	case SKY_PICK_HERE:
		return tctx->last_cpu == cpu || sky1_decay(tctx, now) >= SKY_CORE_COLD;
	case SKY_PICK_FOREIGN:
		return sky1_decay(tctx, now) == SKY_LLC_COLD;
	default:
		return !sky_grace_left(tctx, now);
	}
}

/*
 * Walks up to walk_depth tasks of @dsq in priority order and moves the
 * first one @cpu wants to its local queue. Returns true if a task moved.
 * A global function: the verifier checks it once, not at every call site.
 */
__hidden int sky1_walk(u64 dsq, s32 cpu, u32 pick)
{
	struct task_struct *p;
	u64 now = scx_bpf_now();
	u32 depth = sky_cfg.walk_depth, steps = 0;
	bool moved = false;

	if (scx_bpf_dsq_nr_queued(dsq) <= 0)
		return false;
	if (depth > SKY_WALK_MAX)
		depth = SKY_WALK_MAX;
	bpf_for_each(scx_dsq, p, dsq, 0) {
		if (steps++ >= depth)
			break;
		if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr) ||
		    !sky1_wants(p, cpu, now, pick))
			continue;
		if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0)) {
			moved = true;
			break;
		}
	}
	sky_stat_inc(SKY_STAT_WALKS);
	sky_stat_add(SKY_STAT_WALK_STEPS, steps);
	return moved;
}

/* Walks every domain but @own, nearest first. */
static __always_inline bool sky1_walk_others(s32 cpu, u32 own, enum sky_pick pick)
{
	u32 i;

	bpf_for(i, 1, nr_llcs) {
		if (sky1_walk(sky_llc_dsq((own + i) % nr_llcs), cpu, pick)) {
			sky_stat_inc(SKY_STAT_STEALS);
			return true;
		}
	}
	return false;
}

/*
 * SKY-1 dispatch for @cpu in domain @own: a warm or core-cold task of its
 * own domain, else an LLC-cold task of another, else (after the grace) the
 * highest-priority task anywhere. If it leaves tasks waiting for their own
 * CPUs, the grace timer makes sure none waits much past its grace.
 */
static __always_inline bool sky1_dispatch(s32 cpu, u32 own)
{
	u64 dsq = sky_llc_dsq(own);

	if (sky1_walk(dsq, cpu, SKY_PICK_HERE) || sky1_walk_others(cpu, own, SKY_PICK_FOREIGN))
		return true;
	if (sky1_walk(dsq, cpu, SKY_PICK_EXPIRED) || sky1_walk_others(cpu, own, SKY_PICK_EXPIRED)) {
		sky_stat_inc(SKY_STAT_GRACE_EXPIRED);
		return true;
	}
	if (scx_bpf_dsq_nr_queued(dsq) > 0)
		sky_grace_arm(sky_cfg.affinity_grace_ns);
	return false;
}

/*
 * After queueing @p behind a busy previous CPU: wake an idle CPU for it at
 * once if it may move (its cache decayed, or no grace), else let the grace
 * timer do so only if its own CPU does not get to it in time.
 */
static __always_inline void sky1_queued(const struct task_struct *p)
{
	struct sky_task *tctx = sky_task_of(p);

	if (!tctx || !sky_cfg.affinity_grace_ns ||
	    sky1_decay(tctx, scx_bpf_now()) != SKY_WARM) {
		sky_kick_idle_for(p);
		return;
	}
	sky_grace_arm(sky_cfg.affinity_grace_ns);
}

#endif /* __SKY_SKY1_BPF_H */
