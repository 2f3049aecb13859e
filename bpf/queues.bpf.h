/* SPDX-License-Identifier: GPL-2.0 */
/*
 * queues.bpf.h - the queues every policy's tasks wait in, and dispatch
 * from them; with affinity on (SKY-1, seed 001 in docs/seeds.md), where a
 * waking task goes: to the CPU whose caches most likely still hold its
 * data, the CPU it last ran on, without letting a CPU idle while work
 * waits. The vtime baseline uses the same queues and dispatch.
 *
 * Queues: each CPU has a queue of the tasks warm on it; each cache domain
 * (LLC) a queue of tasks whose private cache went cold, which any of its
 * CPUs takes. Both are ordered by vtime, and a CPU runs the earlier of its
 * own queue's head and its domain queue's head: affinity never costs
 * fairness inside a CPU's share of work.
 *
 * Wakeup:   previous CPU idle -> hand the task to it directly. Otherwise,
 *           by the decay of its footprint (decay.bpf.h): warm -> wait in
 *           the previous CPU's queue; core-cold -> an idle CPU of the same
 *           domain; LLC-cold -> any idle CPU; with none idle, a cold task
 *           waits in its previous CPU's queue too.
 *           A synchronous wakeup (the waker is about to sleep, e.g. a pipe
 *           round trip) goes to the waker's CPU when nothing else waits
 *           there: the data the task needs is in that CPU's cache.
 *           A short task (burst.bpf.h) takes the latency path instead of
 *           waiting (latency.bpf.h): an idle CPU near, else its domain's
 *           queue and a preempted CPU; a short wakee of such a waker
 *           waits for the waker's CPU in that CPU's domain queue. A task
 *           whose previous CPU runs its partner (partners.bpf.h) takes an
 *           idle CPU near too.
 * Dispatch: the rescue queue; own and domain queue by vtime; a sibling's
 *           task whose grace ran out (grace.bpf.h) or whose CPU runs its
 *           partner; another domain's task
 *           that is LLC-cold or waited out its grace. A busy CPU with an
 *           empty queue takes a sibling's task at its slice end on the
 *           same terms (sky_queue_balance_at_slice_end).
 */
#ifndef __SKY_SKY1_BPF_H
#define __SKY_SKY1_BPF_H

#include "sky.bpf.h"
#include "stats.bpf.h"
#include "topology.bpf.h"
#include "vtime.bpf.h"
#include "decay.bpf.h"
#include "load.bpf.h"
#include "grace.bpf.h"
#include "bound.bpf.h"
#include "gang.bpf.h"
#include "latency.bpf.h"
#include "partners.bpf.h"

/*
 * A synchronous wakeup's target: the waker's CPU if @p may run there and
 * may stack there (latency.bpf.h: by what waits there, and whether the
 * waker sleeps right after its synchronous wakeups), else -1.
 */
static __always_inline s32 sky_queue_sync_target(const struct task_struct *p,
						 const struct sky_task *tctx,
						 const struct sky_task *waker, u64 wake_flags)
{
	s32 cpu = bpf_get_smp_processor_id();

	if (!sky_cfg.wake_sync || !(wake_flags & SCX_WAKE_SYNC) || !sky_cpu_usable(p, cpu))
		return -1;
	return sky_lat_may_stack(tctx, waker, cpu) ? cpu : -1;
}

/*
 * Wakeup placement. Returns the CPU to run on and sets *direct when the
 * task goes straight to that CPU's local queue (a short wakee of a sync
 * waker is queued here already: sky_lat_sync_queue). @waker: the waker's
 * state from sky_lat_sync_woke (NULL if not a synchronous wakeup).
 */
static __always_inline s32 sky_queue_select_cpu(struct task_struct *p, s32 prev_cpu, u64 wake_flags,
						const struct sky_task *waker, bool *direct)
{
	struct sky_task *tctx = sky_task_of(p);
	enum sky_decay decay;
	s32 cpu;

	*direct = false;
	if (!tctx)
		return prev_cpu;
	tctx->cold = 0;
	cpu = sky_queue_sync_target(p, tctx, waker, wake_flags);
	if (cpu >= 0) {
		if (sky_lat_sync_queue(p, tctx, cpu))
			return cpu;
		*direct = true;
		sky_stat_inc(SKY_STAT_SYNC_HANDOFFS);
		return cpu;
	}
	if (sky_cpu_usable(p, prev_cpu) && scx_bpf_test_and_clear_cpu_idle(prev_cpu)) {
		*direct = true;
		sky_stat_inc(SKY_STAT_DIRECT_HANDOFFS);
		return prev_cpu;
	}
	cpu = sky_lat_select(p, tctx, prev_cpu);
	if (cpu < 0)
		cpu = sky_partner_select(p, prev_cpu);
	if (cpu >= 0) {
		*direct = true;
		return cpu;
	}
	decay = sky_decay_of(p, tctx, scx_bpf_now());
	if (decay == SKY_WARM || !sky_may_claim_idle(prev_cpu))
		return prev_cpu;
	tctx->cold = 1;
	cpu = sky_claim_idle_for(p, sky_llc_of(prev_cpu), decay == SKY_LLC_COLD);
	if (cpu < 0)
		return prev_cpu;
	*direct = true;
	return cpu;
}

/*
 * Queues @p (not direct-dispatched at wakeup) and wakes a CPU if one should
 * take it now. @cpu is the CPU the kernel has it on.
 *
 * A task waits for the CPU it last ran on whenever it has one: warm, that
 * CPU is where its data is; cold, it may go anywhere, but if no CPU is
 * idle it would wait anyway, and its own CPU is as good a place to wait as
 * any (that is what keeps a busy machine's tasks from churning). Only
 * a task with no usable last CPU (new, or its CPU went offline or left its
 * cpumask) waits in its domain's queue.
 */
static __always_inline void sky_queue_enqueue(struct task_struct *p, struct sky_task *tctx, s32 cpu,
					      u64 enq_flags, u64 now)
{
	enum sky_decay decay = SKY_LLC_COLD;
	u64 slice = sky_cfg.slice_ns;
	bool leaving = sky_cpu_here_leaving();
	u32 llc = sky_llc_of(cpu);
	s32 owner = -1, idle;

	if (p->nr_cpus_allowed == 1) {
		/* Pinned: it waits for the one CPU it may use. */
		owner = bpf_cpumask_test_cpu(cpu, p->cpus_ptr) ? cpu
							       : bpf_cpumask_first(p->cpus_ptr);
		decay = SKY_WARM;
	} else if (sky_cfg.affinity && tctx) {
		decay = sky_decay_of(p, tctx, now);
		if (tctx->last_cpu >= 0 && sky_cpu_usable(p, tctx->last_cpu)) {
			owner = tctx->last_cpu;
			llc = sky_llc_of(owner);
		}
	}
	if (tctx)
		tctx->cold = decay != SKY_WARM;

	/*
	 * Cold (or no affinity): the first idle CPU that may take it, unless
	 * its CPU's load says the move would not balance anything.
	 */
	if (decay != SKY_WARM && !leaving && (owner < 0 || sky_may_claim_idle(owner))) {
		idle = sky_claim_idle_for(p, llc, decay == SKY_LLC_COLD || !sky_cfg.affinity);
		if (idle >= 0) {
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | idle, slice, enq_flags);
			scx_bpf_kick_cpu(idle, SCX_KICK_IDLE);
			return;
		}
	}
	if (owner < 0) {
		sky_queue_in_llc(p, tctx, llc, enq_flags);
		sky_stat_inc(SKY_STAT_COLD_QUEUED);
		return;
	}

	scx_bpf_dsq_insert_vtime(p, sky_cpu_dsq(owner), slice,
				 sky_queue_key(p, tctx, sky_vframe_cpu(owner)), enq_flags);
	sky_stat_inc(decay == SKY_WARM ? SKY_STAT_WARM_QUEUED : SKY_STAT_COLD_QUEUED);
	/* No kick from here: sky_enqueue's keep_watch leaves the alarm to others. */
	if (leaving)
		return;
	if (scx_bpf_test_and_clear_cpu_idle(owner)) {
		scx_bpf_kick_cpu(owner, SCX_KICK_IDLE);
		return;
	}
	if (decay != SKY_WARM || p->nr_cpus_allowed == 1)
		return;
	/* Pure SKY-1: an idle CPU of the domain takes it now. */
	if (!sky_cfg.affinity_grace_ns) {
		idle = sky_claim_idle_for(p, llc, true);
		if (idle >= 0)
			scx_bpf_kick_cpu(idle, SCX_KICK_IDLE);
		return;
	}
	/* Else an idle CPU leaves it to its owner for the grace. */
	if (sky_any_idle())
		sky_bound_arm(now, sky_cfg.affinity_grace_ns);
}

/*
 * Takes one of the first walk_depth tasks of @dsq that @cpu may run and
 * that another CPU may take now: for a CPU queue (@owner >= 0) its grace
 * ran out, for a domain queue it is LLC-cold or waited out its grace.
 * Returns 0 if one moved to @cpu, else the nanoseconds until one may.
 * Global: verified once (see sky_rescue_scan on the loop's shape).
 */
__noinline u64 sky_queue_steal_from(u64 dsq, s32 owner, s32 cpu, u64 now)
{
	u64 next = (u64)-1, left, spill;
	struct bpf_iter_scx_dsq it;
	struct task_struct *p;
	struct sky_task *tctx;
	bool partner;
	u32 n, home;

	bpf_iter_scx_dsq_new(&it, dsq, 0);
	bpf_for(n, 0, SKY_WALK_MAX) {
		p = sky_walk_next(&it, n);
		if (!p)
			break;
		if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
			continue;
		tctx = sky_task_of(p);
		left = tctx ? sky_take_left(p, tctx, owner, now) : 0;
		/* Looked up only for a task the grace holds (partners.bpf.h). */
		partner = left && sky_partner_runs_on(p, owner);
		if (partner)
			left = 0;
		/* A gang's thread leaves its home's queue only after the spill wait. */
		home = owner < 0 ? sky_gang_home_of(p, false) : SKY_LLC_UNKNOWN;
		spill = tctx ? sky_gang_spill_left(home, tctx, cpu, now) : 0;
		if (spill > left)
			left = spill;
		if (left) {
			if (left < next)
				next = left;
			continue;
		}
		if (scx_bpf_dsq_move(&it, p, SCX_DSQ_LOCAL, 0)) {
			if (home != SKY_LLC_UNKNOWN)
				sky_stat_inc(SKY_STAT_GANG_SPILLS);
			if (sky_is_short(tctx))
				sky_stat_inc(SKY_STAT_SHORT_STEALS);
			else if (partner)
				sky_stat_inc(SKY_STAT_PARTNER_STEALS);
			next = 0;
			break;
		}
	}
	bpf_iter_scx_dsq_destroy(&it);
	return next;
}

/*
 * Takes a task waiting for another CPU of @cpu's domain @llc that another
 * CPU may take now (grace.bpf.h). Returns 0 if one moved to @cpu, else the
 * nanoseconds until one may ((u64)-1: none waits). Global: verified once,
 * for both callers.
 */
__noinline u64 sky_queue_steal_in_llc(s32 cpu, u32 llc, u64 now)
{
	u64 next = (u64)-1, left;
	s32 owner;
	u32 i;

	bpf_for(i, 0, SKY_MAX_CPUS) {
		owner = sky_llc_cpu(llc, i);
		if (owner < 0)
			break;
		if (owner == cpu || scx_bpf_dsq_nr_queued(sky_cpu_dsq(owner)) <= 0)
			continue;
		left = sky_queue_steal_from(sky_cpu_dsq(owner), owner, cpu, now);
		if (!left)
			return 0;
		if (left < next)
			next = left;
	}
	return next;
}

/*
 * Takes a task waiting for another CPU of @cpu's domain @llc whose grace
 * ran out, else one of another domain (nearest first). If none may be
 * taken yet, the alarm is set for when the first one may.
 */
static __always_inline bool sky_queue_steal(s32 cpu, u32 llc, u64 now)
{
	u64 next, left;
	u32 i;

	next = sky_queue_steal_in_llc(cpu, llc, now);
	if (!next) {
		sky_stat_inc(SKY_STAT_STEALS_IN_LLC);
		return true;
	}
	bpf_for(i, 1, sky_nr_llcs) {
		u64 dsq = sky_llc_dsq((llc + i) % sky_nr_llcs);

		if (scx_bpf_dsq_nr_queued(dsq) <= 0)
			continue;
		left = sky_queue_steal_from(dsq, -1, cpu, now);
		if (!left) {
			sky_stat_inc(SKY_STAT_STEALS);
			return true;
		}
		if (left < next)
			next = left;
	}
	if (next != (u64)-1)
		sky_bound_arm(now, next);
	return false;
}

/*
 * @cpu's slice ran out with nothing waiting for it but @prev, which would
 * run on: it takes a sibling's waiting task instead if an idle CPU might
 * (its grace ran out and its CPU is overloaded, or it waited out the
 * patience, or it is short), as an idle CPU would. Without this, a domain
 * whose CPUs are all busy balances only through the starvation rescue:
 * one CPU cycles its queue while the others run their one task on, and
 * the waits in the long queue reach the bound. Only within the domain (a
 * gang stays home) and only from a CPU with an empty queue (it carries
 * the least load a busy CPU can: the move balances, it does not churn).
 * @prev is queued again on this CPU and runs next here. Not on a core
 * where SMT pairing places tasks (this CPU or its sibling runs a class
 * that pairs): that slice end is the pairing's repair (smt.bpf.h), and a
 * task taken blind could land beside its own kind.
 */
static __always_inline bool sky_queue_balance_at_slice_end(s32 cpu, u32 llc, u64 now)
{
	if (sky_smt_pairing() &&
	    (sky_smt_pairs(sky_cpu_kind[sky_cpu_idx(cpu)]) || sky_smt_pairs(sky_sibling_kind(cpu))))
		return false;
	if (scx_bpf_dsq_nr_queued(sky_cpu_dsq(cpu)) > 0 || sky_queue_steal_in_llc(cpu, llc, now))
		return false;
	sky_stat_inc(SKY_STAT_BUSY_STEALS);
	return true;
}

/*
 * Is @head, queued in @frame, behind a task @lag ahead of its own clock?
 * Queues have clocks of their own (vtime.bpf.h): their tasks are compared
 * by lag. A missing head is behind everything.
 */
static __always_inline bool sky_queue_behind(const struct task_struct *head, s32 frame, s64 lag)
{
	return !head || sky_vlag(head->scx.dsq_vtime, frame) >= lag;
}

/*
 * Finds @cpu its next task: the rescue queue, else the earlier (by vtime)
 * of the heads of its own queue and its domain's, else a steal. Returns
 * false if @cpu may idle or keep @prev.
 *
 * @prev, if its slice ran out but it is still runnable, keeps the CPU when
 * no rescued task waits, it did not yield, and its key (live vtime plus
 * burst term, as the queued tasks' keys) is not behind those heads: the
 * kernel asks dispatch before it queues @prev again, so otherwise a
 * waiting task would always win and vtime (nice) would mean nothing
 * between a CPU's tasks.
 */
static __always_inline bool sky_queue_dispatch(s32 cpu, struct task_struct *prev)
{
	u32 llc = sky_llc_of(cpu);
	u64 now = scx_bpf_now(), own, shared, first, second;
	s32 own_frame = sky_vframe_cpu(cpu), shared_frame;
	struct task_struct *own_head, *shared_head;
	bool rescuing = scx_bpf_dsq_nr_queued(SKY_DSQ_RESCUE) > 0;

	if (rescuing && scx_bpf_dsq_move_to_local(SKY_DSQ_RESCUE, 0))
		return true;
	if (llc >= sky_nr_llcs)
		llc = 0;
	own = sky_cpu_dsq(cpu);
	shared = sky_llc_dsq(llc);
	shared_frame = sky_vframe_llc(llc);
	own_head = sky_peek(own);
	shared_head = sky_peek(shared);
	if (!rescuing && prev && (prev->scx.flags & SCX_TASK_QUEUED)) {
		struct sky_task *ptctx = sky_task_of(prev);
		s64 lag = sky_running_lag(prev, ptctx, cpu, now);

		/*
		 * The domain's queue (short wakees wait there) does not split
		 * an SMT pair: other CPUs serve it.
		 */
		if (!(ptctx && ptctx->yielded) && sky_queue_behind(own_head, own_frame, lag) &&
		    (sky_queue_behind(shared_head, shared_frame, lag) || sky_smt_beside_mate(cpu)))
			return sky_queue_balance_at_slice_end(cpu, llc, now);
	}
	first = own;
	second = shared;
	if (own_head && !sky_queue_behind(shared_head, shared_frame,
					  sky_vlag(own_head->scx.dsq_vtime, own_frame))) {
		first = shared;
		second = own;
	}
	return scx_bpf_dsq_move_to_local(first, 0) || scx_bpf_dsq_move_to_local(second, 0) ||
	       sky_queue_steal(cpu, llc, now);
}

#endif /* __SKY_SKY1_BPF_H */
