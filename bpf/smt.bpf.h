/* SPDX-License-Identifier: GPL-2.0 */
/*
 * smt.bpf.h - SMT pairing (seed 000, docs/seeds.md): a persistent-memory writer stalls
 * on its stores and flushes, so the core it runs on has execution units to
 * spare; a compute task on the other hardware thread uses them. Two PM
 * writers on one core both stall, two compute tasks fight for the same
 * units. So a PM writer's mate is a compute task and a compute task's
 * mate is a PM writer.
 *
 * What each CPU runs is kept by class (sky_cpu_kind), and from it:
 * - placement: a task that pairs goes to an idle CPU beside its mate if
 *   there is one, and never beside its own class while an idle CPU that
 *   is not exists (sky_smt_place, at wakeup and enqueue);
 * - repair at slice end: a task alone on its CPU never comes back to the
 *   scheduler by itself, so when its slice ends beside anything but its
 *   mate, and another core has its mate beside an idle CPU or beside a
 *   lone task not of its class, it moves there (sky_smt_wants_move and
 *   sky_smt_move); the task it displaces is placed like any other, which
 *   finds the CPU just left. A move holds both cores for a while and the
 *   task for longer, so moves do not chase each other.
 * - accounting: how long PM writers ran beside each kind of sibling
 *   (pm_beside_* statistics).
 *
 * On only where the machine has SMT (sky_smt_accounting); placement and
 * repair also need the policy's smt_pairing.
 */
#ifndef __SKY_SMT_BPF_H
#define __SKY_SMT_BPF_H

#include "sky.bpf.h"
#include "stats.bpf.h"
#include "topology.bpf.h"
#include "class.bpf.h"

/* Each CPU's SMT sibling, -1 for none; written by the daemon. */
const volatile s32 sky_cpu_sibling[SKY_MAX_CPUS];
const volatile u32 sky_smt_accounting;

/* What a CPU runs: an enum sky_class value, or one of these. */
enum sky_smt_kind {
	SKY_SMT_IDLE = SKY_NR_CLASSES,
	SKY_SMT_OTHER,
};

static u8 sky_cpu_kind[SKY_MAX_CPUS];
/* Since when the CPU's time is not yet counted. */
static u64 sky_cpu_counted_to[SKY_MAX_CPUS];

/* The pm_beside_* statistic for a sibling running @kind. */
static __always_inline u32 sky_beside_stat(u8 kind)
{
	switch (kind) {
	case SKY_CLASS_COMPUTE:
		return SKY_STAT_PM_BESIDE_COMPUTE_NS;
	case SKY_CLASS_PM_WRITER:
		return SKY_STAT_PM_BESIDE_PM_WRITER_NS;
	case SKY_SMT_IDLE:
		return SKY_STAT_PM_BESIDE_IDLE_NS;
	default:
		return SKY_STAT_PM_BESIDE_OTHER_NS;
	}
}

/*
 * Counts @cpu's time up to @now under what its sibling runs, if @cpu runs
 * a PM writer. Either sibling may count a CPU's time when it changes what
 * it runs: the interval is claimed by compare-and-swap, so none is counted
 * twice.
 */
static __always_inline void sky_smt_count(s32 cpu, u64 now)
{
	u32 i = sky_cpu_idx(cpu);
	u64 from = sky_cpu_counted_to[i];
	s32 sib = sky_cpu_sibling[i];

	if ((s64)(now - from) <= 0 ||
	    __sync_val_compare_and_swap(&sky_cpu_counted_to[i], from, now) != from)
		return;
	if (from && sib >= 0 && sky_cpu_kind[i] == SKY_CLASS_PM_WRITER)
		sky_stat_add(sky_beside_stat(sky_cpu_kind[sky_cpu_idx(sib)]), now - from);
}

/* @cpu runs @kind from @now on. */
static __always_inline void sky_smt_set(s32 cpu, u8 kind, u64 now)
{
	s32 sib;

	if (!sky_smt_accounting)
		return;
	sib = sky_cpu_sibling[sky_cpu_idx(cpu)];
	sky_smt_count(cpu, now);
	if (sib >= 0)
		sky_smt_count(sib, now);
	sky_cpu_kind[sky_cpu_idx(cpu)] = kind;
}

/* @p starts on @cpu. */
static __always_inline void sky_smt_started(s32 cpu, const struct task_struct *p, u64 now)
{
	if (sky_smt_accounting)
		sky_smt_set(cpu, sky_class_of(p), now);
}

/*
 * @p runs on @cpu (a tick): what the CPU runs is @p's class as it is now.
 * A process that names itself after it started and then runs without a
 * break gets its class here (the time not yet counted goes to the new
 * class: at most a tick too early).
 */
static __always_inline void sky_smt_restate(s32 cpu, const struct task_struct *p)
{
	if (sky_smt_accounting)
		sky_cpu_kind[sky_cpu_idx(cpu)] = sky_class_of(p);
}

/*
 * A task of @class (as it is now) stops on @cpu: its time since the last
 * count goes to that class, and the CPU runs another class's task, or
 * none, until the next of ours starts.
 */
static __always_inline void sky_smt_stopped(s32 cpu, u32 class, u64 now)
{
	if (!sky_smt_accounting)
		return;
	sky_cpu_kind[sky_cpu_idx(cpu)] = class;
	sky_smt_set(cpu, SKY_SMT_OTHER, now);
}

/*
 * @cpu leaves idle: for another class's task, or for ours, whose running
 * callback sets its class (whichever of the two callbacks comes first).
 */
static __always_inline void sky_smt_left_idle(s32 cpu, u64 now)
{
	if (sky_cpu_kind[sky_cpu_idx(cpu)] == SKY_SMT_IDLE)
		sky_smt_set(cpu, SKY_SMT_OTHER, now);
}

/* Placement and repair are on: SMT, and the policy wants it. */
static __always_inline bool sky_smt_pairing(void)
{
	return sky_smt_accounting && sky_cfg.smt_pairing;
}

/* Does a task of @class have a mate? */
static __always_inline bool sky_smt_pairs(u32 class)
{
	return class == SKY_CLASS_PM_WRITER || class == SKY_CLASS_COMPUTE;
}

/* The class a task of @class (one that pairs) wants beside it. */
static __always_inline u32 sky_smt_mate(u32 class)
{
	return class == SKY_CLASS_PM_WRITER ? SKY_CLASS_COMPUTE : SKY_CLASS_PM_WRITER;
}

/* What @cpu's sibling runs; SKY_SMT_OTHER for a CPU without one. */
static __always_inline u8 sky_sibling_kind(s32 cpu)
{
	s32 sib = sky_cpu_sibling[sky_cpu_idx(cpu)];

	return sib >= 0 ? sky_cpu_kind[sky_cpu_idx(sib)] : SKY_SMT_OTHER;
}

/* How well @cpu suits a task of @class: 2 beside its mate, 0 beside its own class, else 1. */
static __always_inline u32 sky_smt_fit(s32 cpu, u32 class)
{
	u8 kind = sky_sibling_kind(cpu);

	return kind == sky_smt_mate(class) ? 2 : kind == class ? 0 : 1;
}

/*
 * Does what @cpu runs sit beside its SMT mate (pairing on, a PM writer
 * beside a compute task or the reverse)? Such a pair is not split for
 * latency: no short task preempts it or takes its CPU at a slice end.
 */
static __always_inline bool sky_smt_beside_mate(s32 cpu)
{
	u8 kind = sky_cpu_kind[sky_cpu_idx(cpu)];

	return sky_smt_pairing() && sky_smt_pairs(kind) && sky_smt_fit(cpu, kind) == 2;
}

/* Nothing waits for @cpu: what it runs is alone there. */
static __always_inline bool sky_cpu_lone(s32 cpu)
{
	return scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | cpu) <= 0 &&
	       scx_bpf_dsq_nr_queued(sky_cpu_dsq(cpu)) <= 0;
}

/*
 * The idle CPU that suits a task of @class best (sky_smt_fit), @near's
 * cache domain first among equals; -1 if none is idle. Only for tasks that
 * may run anywhere, so no cpumask is needed. Global: its loop is verified
 * once, not at every call site.
 */
__noinline s32 sky_smt_best_idle(u32 class, s32 near)
{
	const struct cpumask *idle = scx_bpf_get_idle_cpumask();
	u32 fit, rank, best_rank = 0, llc = sky_llc_of(near);
	s32 cpu, best = -1;

	bpf_for(cpu, 0, sky_nr_cpus) {
		if (!bpf_cpumask_test_cpu(cpu, idle) || !sky_cpu_is_online(cpu))
			continue;
		fit = sky_smt_fit(cpu, class);
		rank = 1 + 2 * fit + (sky_llc_of(cpu) == llc);
		if (rank > best_rank) {
			best_rank = rank;
			best = cpu;
		}
	}
	scx_bpf_put_idle_cpumask(idle);
	return best;
}

/*
 * Pairing's placement of @p, which would otherwise go to (or wait for)
 * @prev: an idle CPU beside its mate, @prev first; or, if @prev sits
 * beside a task of @p's own class, an idle CPU that does not. Returns the
 * CPU, claimed, or -1 to leave the choice to SKY-1 (affinity breaks the
 * ties pairing leaves).
 */
static __always_inline s32 sky_smt_place(struct task_struct *p, s32 prev)
{
	u32 class, prev_fit;
	s32 cpu;

	if (!sky_smt_pairing() || !sky_task_is_free(p))
		return -1;
	class = sky_class_of(p);
	if (!sky_smt_pairs(class))
		return -1;
	prev_fit = sky_smt_fit(prev, class);
	if (prev_fit == 2 && sky_cpu_is_online(prev) && scx_bpf_test_and_clear_cpu_idle(prev))
		return prev;
	cpu = sky_smt_best_idle(class, prev);
	if (cpu < 0 || cpu == prev)
		return -1;
	if (sky_smt_fit(cpu, class) != 2 && (prev_fit || !sky_smt_fit(cpu, class)))
		return -1;
	if (!scx_bpf_test_and_clear_cpu_idle(cpu))
		return -1;
	sky_stat_inc(SKY_STAT_SMT_PLACEMENTS);
	return cpu;
}

/*
 * A pairing move holds both cores it touches, and the task it moves, for
 * this many slices: no other move may involve them meanwhile (moves
 * decided at once from the same view would undo each other).
 */
#define SKY_SMT_HOLD_SLICES 2

/* Until when a core (its lower-numbered CPU's slot) is held by a move. */
static u64 sky_core_held_until[SKY_MAX_CPUS];

static __always_inline u32 sky_core_of(s32 cpu)
{
	s32 sib = sky_cpu_sibling[sky_cpu_idx(cpu)];

	return sky_cpu_idx(sib >= 0 && sib < cpu ? sib : cpu);
}

/* Holds @cpu's core until @until unless it is held already. */
static __always_inline bool sky_smt_hold(s32 cpu, u64 now, u64 until)
{
	u32 core = sky_core_of(cpu);
	u64 held = sky_core_held_until[core];

	if ((s64)(held - now) > 0)
		return false;
	return __sync_val_compare_and_swap(&sky_core_held_until[core], held, until) == held;
}

/*
 * Where a task of @class alone on @cpu would pair better, best first: a
 * CPU of another core beside its mate that is idle; or runs a lone task of
 * the mate's class (a swap that mends both cores); or a lone task of no
 * class that pairs (one core mended). Beside its own class (@fit 0), also
 * an idle CPU beside anything but its own class (while a mate is away,
 * e.g. restarting: better beside idle than beside a rival). -1 if none.
 * Global, as sky_smt_best_idle.
 */
__noinline s32 sky_smt_partner(u32 class, s32 cpu, u32 fit)
{
	u32 mate = sky_smt_mate(class), llc = sky_llc_of(cpu), rank, best_rank = 0;
	s32 sib = sky_cpu_sibling[sky_cpu_idx(cpu)], d, best = -1;
	u8 kind, beside;

	bpf_for(d, 0, sky_nr_cpus) {
		if (d == cpu || d == sib || !sky_cpu_is_online(d))
			continue;
		kind = sky_cpu_kind[sky_cpu_idx(d)];
		beside = sky_sibling_kind(d);
		if (beside == mate && kind == SKY_SMT_IDLE)
			rank = 4;
		else if (beside == mate && kind == mate && sky_cpu_lone(d))
			rank = 3;
		else if (beside == mate && kind < SKY_NR_CLASSES && kind != class &&
			 sky_cpu_lone(d))
			rank = 2;
		else if (!fit && beside != class && kind == SKY_SMT_IDLE)
			rank = 1;
		else
			continue;
		rank = 2 * rank + (sky_llc_of(d) == llc);
		if (rank > best_rank) {
			best_rank = rank;
			best = d;
		}
	}
	return best;
}

/*
 * @p's slice ends on @cpu and nothing else waits there. Returns true if
 * it should move for pairing: its target is recorded, and the caller
 * leaves its slice at zero so that the kernel hands it to ops.enqueue
 * (SCX_ENQ_LAST), where sky_smt_move moves it.
 */
static __always_inline bool sky_smt_wants_move(s32 cpu, struct task_struct *p, u64 now)
{
	u64 until = now + SKY_SMT_HOLD_SLICES * sky_cfg.slice_ns;
	struct sky_task *tctx;
	u32 class, fit;
	s32 d;

	if (!sky_smt_pairing() || !sky_task_is_free(p) ||
	    scx_bpf_dsq_nr_queued(sky_llc_dsq(sky_llc_of(cpu))) > 0 || !sky_cpu_lone(cpu))
		return false;
	tctx = sky_task_of(p);
	class = sky_class_of(p);
	if (!tctx || !sky_smt_pairs(class) || (s64)(now - tctx->smt_held_until) < 0)
		return false;
	fit = sky_smt_fit(cpu, class);
	if (fit == 2)
		return false;
	d = sky_smt_partner(class, cpu, fit);
	if (d < 0 || !sky_smt_hold(cpu, now, until))
		return false;
	if (!sky_smt_hold(d, now, until)) {
		sky_core_held_until[sky_core_of(cpu)] = now;
		return false;
	}
	tctx->smt_target = d;
	tctx->smt_held_until = until;
	return true;
}

/*
 * Is @d still a better place than @cpu for @p, of @class? Claims it if it
 * is idle; sets *@preempt if it runs a lone task to displace.
 */
static __always_inline bool sky_smt_target_holds(s32 d, s32 cpu, u32 class, bool *preempt)
{
	u32 fit = sky_smt_fit(d, class);
	u8 kind = sky_cpu_kind[sky_cpu_idx(d)];

	if (!sky_cpu_is_online(d) || fit <= sky_smt_fit(cpu, class))
		return false;
	if (scx_bpf_test_and_clear_cpu_idle(d))
		return true;
	*preempt = true;
	return fit == 2 && kind < SKY_NR_CLASSES && kind != class && sky_cpu_lone(d);
}

/*
 * @p, left without a slice on @cpu by sky_smt_wants_move, reaches
 * ops.enqueue: it goes to its target if that is still better (an idle CPU
 * is woken, a lone task is preempted and placed anew), else to the best
 * idle CPU if that is better than @cpu. False if neither is; the caller
 * then keeps @p where it is.
 */
static __always_inline bool sky_smt_move(struct task_struct *p, struct sky_task *tctx, s32 cpu,
					 u64 enq_flags)
{
	s32 d = tctx ? tctx->smt_target : -1;
	u32 class = sky_class_of(p);
	bool preempt = false;

	if (d < 0 || !sky_smt_pairs(class))
		return false;
	tctx->smt_target = -1;
	if (!sky_smt_target_holds(d, cpu, class, &preempt)) {
		d = sky_smt_best_idle(class, cpu);
		preempt = false;
		if (d < 0 || sky_smt_fit(d, class) <= sky_smt_fit(cpu, class) ||
		    !scx_bpf_test_and_clear_cpu_idle(d))
			return false;
	}
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | d, sky_cfg.slice_ns, enq_flags);
	scx_bpf_kick_cpu(d, preempt ? SCX_KICK_PREEMPT : SCX_KICK_IDLE);
	sky_stat_inc(SKY_STAT_SMT_MOVES);
	return true;
}

#endif /* __SKY_SMT_BPF_H */
