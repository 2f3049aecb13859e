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
 *           none, take the highest-priority task.
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
static __always_inline s32 sky1_select_cpu(struct task_struct *p, s32 prev_cpu, bool *direct)
{
	struct sky_task *tctx = sky_task_of(p);
	enum sky_decay decay;
	s32 cpu;

	*direct = false;
	if (!tctx || !sky_task_is_free(p))
		return scx_bpf_select_cpu_dfl(p, prev_cpu, 0, direct);

	if (scx_bpf_test_and_clear_cpu_idle(prev_cpu)) {
		*direct = true;
		sky_stat_inc(SKY_STAT_DIRECT_HANDOFFS);
		return prev_cpu;
	}

	decay = sky1_decay(tctx, scx_bpf_now());
	if (decay == SKY_WARM)
		return prev_cpu;
	cpu = sky_claim_idle_in(sky_llc_cpus(sky_llc_of(prev_cpu)));
	if (cpu < 0 && decay == SKY_LLC_COLD)
		cpu = sky_claim_idle_in(p->cpus_ptr);
	if (cpu < 0)
		return prev_cpu;
	*direct = true;
	return cpu;
}

/*
 * Is @p a good pick for @cpu under SKY-1? Warm here, cold enough to move
 * within the domain, or waiting so long that fairness overrides affinity.
 */
static __always_inline bool sky1_wants(const struct task_struct *p, s32 cpu, u64 now,
				       enum sky_decay needed)
{
	struct sky_task *tctx = sky_task_of(p);

	if (!tctx)
		return true;
	if (tctx->queued_at_ns && now - tctx->queued_at_ns >= sky_cfg.starve_ns)
		return true;
	if (needed == SKY_WARM && tctx->last_cpu == cpu)
		return true;
	return sky1_decay(tctx, now) >= (needed == SKY_WARM ? SKY_CORE_COLD : needed);
}

/*
 * Walks up to walk_depth tasks of @dsq in priority order and moves the
 * first one @cpu wants to its local queue. @needed is SKY_WARM for the
 * CPU's own domain (last-CPU or core-cold tasks qualify) and SKY_LLC_COLD
 * for a foreign one. Returns true if a task was moved.
 */
static __always_inline bool sky1_walk(u64 dsq, s32 cpu, enum sky_decay needed)
{
	struct task_struct *p;
	u64 now = scx_bpf_now();
	u32 depth = sky_cfg.walk_depth, steps = 0;
	bool moved = false;

	if (depth > SKY_WALK_MAX)
		depth = SKY_WALK_MAX;
	bpf_for_each(scx_dsq, p, dsq, 0) {
		if (steps++ >= depth)
			break;
		if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr) || !sky1_wants(p, cpu, now, needed))
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

#endif /* __SKY_SKY1_BPF_H */
