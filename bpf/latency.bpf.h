/* SPDX-License-Identifier: GPL-2.0 */
/*
 * latency.bpf.h - the latency path beside SKY-1: a short task (burst.bpf.h)
 * that wakes runs at once, where its data is nearest.
 *
 * - Idle CPU near: its previous CPU if idle, else that CPU's SMT sibling,
 *   else any idle CPU of its cache domain, without the affinity grace or
 *   the load test a warm task waits for: a short task's footprint is
 *   small, and what it costs to move is less than a wait behind a hog.
 *   Not in a domain whose homed gang threads wait for its CPUs (gangs
 *   stay whole): an idle CPU of another domain, else SKY-1's queue,
 *   behind them (sky_lat_gang_waits).
 * - Preemption when no CPU near is idle: it goes into its domain's queue
 *   and a victim CPU is kicked with SCX_KICK_PREEMPT, which reschedules
 *   that CPU at once (an IPI, not a tick). A victim runs a batch task
 *   (not short, not a per-CPU kthread) that has run latency_min_run_ns,
 *   on a CPU not preempted for latency within that time; never a task
 *   beside its SMT mate, nor a memory-bound gang's thread at home; and
 *   only a task whose key the wakee's is ahead of, so preemption never
 *   buys a task more than its share (and a task that runs just under the
 *   burst limit and sleeps 10 us is not short at all: burst.bpf.h). The
 *   previous CPU is tried first, then its domain. The victim resumes on
 *   its own CPU next, behind the wakee.
 * - Waiting in the domain, not on one CPU: whichever CPU of the domain
 *   comes first takes the wakee, the kicked victim or any other. At each
 *   tick a batch task that has run latency_min_run_ns ends its slice if a
 *   short task that would run next waits ahead of it (by key) in its
 *   CPU's or its domain's queue (sky_lat_tick). The CPUs of a domain tick
 *   at their own times, so a wakee whose kicked CPU is slow to answer (an
 *   IPI under TCG waits for that vCPU's turn on the host, milliseconds)
 *   runs at the domain's next tick, not at that CPU's.
 * - Synchronous wakeups go to the waker's CPU only if the waker sleeps
 *   right after them (a pipe round trip), as measured per waker
 *   (sync_trust): a waker that spins or runs on (a shared-space member
 *   yielding in a loop) would keep the wakee waiting behind it. A short
 *   wakee waits for it in the waker's domain queue, by key, even with
 *   tasks waiting there (sky_lat_sync_queue); a task that is not short
 *   stacks in the waker's local queue when nothing waits there.
 * - Yield: a yielding task gives its CPU to the next queued task
 *   (sky_queue_dispatch reads tctx->yielded).
 * - Overload (more tasks runnable than starve_ns serves: the bound has
 *   grown, bound.bpf.h): idle CPUs near are still claimed, but no wakee
 *   preempts or stacks over waiting tasks; every task waits its turn.
 */
#ifndef __SKY_LATENCY_BPF_H
#define __SKY_LATENCY_BPF_H

#include "sky.bpf.h"
#include "stats.bpf.h"
#include "topology.bpf.h"
#include "burst.bpf.h"
#include "vtime.bpf.h"
#include "smt.bpf.h"
#include "gang.bpf.h"
#include "bound.bpf.h"

/* sync_trust: sleeps after a synchronous wakeup count up, runs on count down. */
enum sky_sync_trust {
	SKY_SYNC_TRUST_MAX = 8,
	/* Where a new task starts: stacks when nothing waits. */
	SKY_SYNC_TRUST_START = 4,
	/* A waker stacks its wakee only from here. */
	SKY_SYNC_TRUST_STACK = 3,
};

/* A queue head that is not short is behind every running task. */
#define SKY_LAG_NONE ((s64)(~0ULL >> 1))

/* What each CPU runs, for choosing a task to preempt (and partners.bpf.h). */
struct sky_cpu_run {
	/* When the running task started; 0 if it may not be preempted. */
	u64 started_ns;
	/* Its vtime when it started, in the CPU's frame, and its weight. */
	u64 vtime;
	u32 weight;
	/* Its process (for its gang) and thread ID; pid 0: nothing runs. */
	u32 tgid;
	u32 pid;
	/* The thread preempted for latency here, which resumes here next. */
	u32 victim_pid;
	/* The last latency preemption here. */
	u64 preempted_ns;
};

static struct sky_cpu_run sky_cpu_runs[SKY_MAX_CPUS];

static __always_inline struct sky_cpu_run *sky_run_of(s32 cpu)
{
	return &sky_cpu_runs[sky_cpu_idx(cpu)];
}

/*
 * @p starts on @cpu: may a short wakee preempt it, and from when? A
 * restore (@restored, main.bpf.c) continues its run: it keeps its claims
 * and the time its run began, which latency_min_run_ns counts from.
 */
static __always_inline void sky_lat_started(struct task_struct *p, struct sky_task *tctx, s32 cpu,
					    u64 now, bool restored)
{
	struct sky_cpu_run *r = sky_run_of(cpu);
	bool batch =
		tctx && !tctx->short_task && !((p->flags & PF_KTHREAD) && p->nr_cpus_allowed == 1);

	if (tctx && !restored) {
		tctx->yielded = 0;
		tctx->run_began_ns = now;
	}
	/*
	 * The victim runs again; or it slept instead of coming back, and
	 * leaves no claim behind.
	 */
	if (!restored)
		r->victim_pid = 0;
	/* Who runs here, for partners.bpf.h too. */
	r->tgid = p->tgid;
	r->pid = p->pid;
	if (!sky_lat_on())
		return;
	r->started_ns = batch ? (tctx ? tctx->run_began_ns : now) : 0;
	r->vtime = p->scx.dsq_vtime;
	r->weight = p->scx.weight ?: 1;
}

/* @cpu's task stopped: nothing runs there to preempt or to wait for. */
static __always_inline void sky_lat_stopped(s32 cpu)
{
	struct sky_cpu_run *r = sky_run_of(cpu);

	r->started_ns = 0;
	r->pid = 0;
}

/*
 * Is what @cpu runs (@r) kept from latency preemption whatever the keys
 * say: a task beside its SMT mate, or a memory-bound gang's thread at home?
 */
static __always_inline bool sky_lat_protected(const struct sky_cpu_run *r, s32 cpu)
{
	return sky_smt_beside_mate(cpu) || sky_gang_at_home(r->tgid, cpu);
}

/*
 * May a wakee of vtime @vtime (in frame @vframe, @extra its burst term)
 * preempt what @cpu runs at @now? Claims the CPU if so.
 */
static __always_inline bool sky_lat_take_victim(s32 cpu, u64 vtime, s32 vframe, u64 extra, u64 now)
{
	struct sky_cpu_run *r = sky_run_of(cpu);
	u64 started = r->started_ns, last = r->preempted_ns, min_run = sky_cfg.latency_min_run_ns;
	s64 lag, victim_lag;

	if (!started || now < started + min_run || now < last + min_run || !sky_cpu_is_online(cpu))
		return false;
	/* Its key against the victim's vtime as it runs, both in @cpu's frame. */
	lag = sky_lag_carried(sky_vlag(vtime, vframe), vframe, sky_vframe_cpu(cpu));
	victim_lag = sky_vlag(r->vtime + (now - started) * 100 / r->weight, cpu);
	if (lag + (s64)extra >= victim_lag || sky_lat_protected(r, cpu))
		return false;
	if (__sync_val_compare_and_swap(&r->preempted_ns, last, now) != last)
		return false;
	r->victim_pid = r->pid;
	return true;
}

/*
 * A CPU to preempt for a short wakee last on @prev: @prev, else one of its
 * domain; -1 if none may be. Global: its loop is verified once.
 */
__noinline s32 sky_lat_victim(s32 prev, u64 vtime, s32 vframe, u64 extra, u64 now)
{
	u32 llc = sky_llc_of(prev), i;
	s32 cpu;

	if (sky_lat_take_victim(prev, vtime, vframe, extra, now))
		return prev;
	bpf_for(i, 0, SKY_MAX_CPUS) {
		cpu = sky_llc_cpu(llc, i);
		if (cpu < 0)
			break;
		if (cpu != prev && sky_lat_take_victim(cpu, vtime, vframe, extra, now))
			return cpu;
	}
	return -1;
}

/*
 * Do homed gang threads wait in @llc's queue for its CPUs, @p not one of
 * them? Then a short task (a small footprint, cheap to move) must neither
 * take the CPU they wait for nor queue ahead of them there (its burst
 * term would put it ahead): they would wait past the spill time and run
 * in another domain, and the gang be split.
 */
static __always_inline bool sky_lat_gang_waits(struct task_struct *p, u32 llc)
{
	return sky_gang_waits_in(llc) && sky_gang_home_of(p, false) != llc;
}

/*
 * An idle CPU for short @p near @prev, claimed: @prev's SMT sibling (which
 * shares its core's caches), else one of @prev's domain; where gang
 * threads wait for that domain, one of another domain instead. -1 if
 * none. The caller has tried @prev itself.
 */
static __always_inline s32 sky_lat_idle_near(struct task_struct *p, s32 prev)
{
	u32 llc = sky_llc_of(prev);
	const struct cpumask *domain = sky_llc_cpus(llc);
	s32 sib = sky_cpu_sibling[sky_cpu_idx(prev)];

	if (sky_lat_gang_waits(p, llc)) {
		sky_stat_inc(SKY_STAT_LAT_GANG_DEFERS);
		return sky_gang_room_elsewhere(p, llc);
	}
	if (sib >= 0 && sky_cpu_usable(p, sib) && scx_bpf_test_and_clear_cpu_idle(sib))
		return sib;
	return domain ? scx_bpf_pick_idle_cpu(domain, 0) : -1;
}

/*
 * Wakeup placement for a short task whose previous CPU is busy: an idle
 * CPU near it. Returns it (claimed) or -1.
 */
static __always_inline s32 sky_lat_select(struct task_struct *p, struct sky_task *tctx, s32 prev)
{
	s32 cpu;

	if (!sky_is_short(tctx) || !sky_task_is_free(p))
		return -1;
	cpu = sky_lat_idle_near(p, prev);
	if (cpu >= 0)
		sky_stat_inc(SKY_STAT_LAT_IDLE_CLAIMS);
	return cpu;
}

/*
 * Queues a short task whose last CPU is busy: on an idle CPU near, else in
 * its domain's queue with a victim kicked (see the header comment). False
 * if it is not short or under overload: SKY-1 queues it.
 */
static __always_inline bool sky_lat_enqueue(struct task_struct *p, struct sky_task *tctx, s32 cpu,
					    u64 enq_flags, u64 now)
{
	s32 victim;
	u64 key;
	u32 llc;

	if (!(enq_flags & SCX_ENQ_WAKEUP) || !sky_is_short(tctx) || !sky_task_is_free(p) ||
	    !sky_cpu_usable(p, cpu))
		return false;
	victim = sky_lat_idle_near(p, cpu);
	if (victim >= 0) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | victim, sky_cfg.slice_ns, enq_flags);
		scx_bpf_kick_cpu(victim, SCX_KICK_IDLE);
		sky_stat_inc(SKY_STAT_LAT_IDLE_CLAIMS);
		return true;
	}
	/*
	 * Under overload (the bound has grown) every task waits its turn and
	 * slices are at their shortest: a preemption would only reorder the
	 * waiters, at an IPI and a switch each (2 000 short sleepers on 4
	 * CPUs made 69 000 of them in a 40 s run). Where gang threads wait
	 * for the domain's CPUs, it waits as SKY-1 queues it, behind them.
	 */
	llc = sky_llc_of(cpu);
	if (sky_bound_grown() || sky_lat_gang_waits(p, llc))
		return false;
	/* A kicked victim that finds it gone (another CPU came first) runs on. */
	key = sky_queue_key(p, tctx, sky_vframe_llc(llc));
	victim = sky_lat_victim(cpu, key - tctx->key_extra, tctx->vframe, tctx->key_extra, now);
	scx_bpf_dsq_insert_vtime(p, sky_llc_dsq(llc), sky_cfg.slice_ns, key, enq_flags);
	if (victim >= 0) {
		scx_bpf_kick_cpu(victim, SCX_KICK_PREEMPT);
		sky_stat_inc(SKY_STAT_LAT_PREEMPTS);
	} else {
		sky_stat_inc(SKY_STAT_LAT_SHARED);
	}
	return true;
}

/*
 * The lag of @dsq's first task in @frame if it is short, else SKY_LAG_NONE.
 * Global: its iterator is verified once.
 */
__noinline s64 sky_lat_short_head_lag(u64 dsq, s32 frame)
{
	struct bpf_iter_scx_dsq it;
	struct task_struct *p;
	s64 lag = SKY_LAG_NONE;

	if (scx_bpf_dsq_nr_queued(dsq) <= 0)
		return lag;
	bpf_iter_scx_dsq_new(&it, dsq, 0);
	p = bpf_iter_scx_dsq_next(&it);
	if (p && sky_is_short(sky_task_of(p)))
		lag = sky_vlag(p->scx.dsq_vtime, frame);
	bpf_iter_scx_dsq_destroy(&it);
	return lag;
}

/*
 * A tick on @cpu, which runs @p: a batch task that has run
 * latency_min_run_ns ends its slice now if a short task waits ahead of it
 * (by key, as sky_queue_dispatch compares them at a slice end) in this CPU's
 * queue or its domain's. Each CPU of a domain ticks at its own time, so a
 * short task waits for the domain's next tick, with no IPI, rather than
 * for its last CPU's slice end.
 */
static __always_inline void sky_lat_tick(struct task_struct *p, s32 cpu)
{
	struct sky_cpu_run *r = sky_run_of(cpu);
	struct task_struct *own_head;
	u32 llc = sky_llc_of(cpu);
	s64 lag, own_lag;
	u64 now;

	if (!sky_lat_on() || !r->started_ns || r->pid != p->pid || sky_bound_grown())
		return;
	now = scx_bpf_now();
	if (now < r->started_ns + sky_cfg.latency_min_run_ns || sky_lat_protected(r, cpu))
		return;
	lag = sky_running_lag(p, sky_task_of(p), cpu, now);
	/*
	 * The domain's head runs next only if it is ahead of this CPU's own;
	 * the own head is looked at again (is it short?) only if it is ahead.
	 */
	own_head = sky_peek(sky_cpu_dsq(cpu));
	own_lag = own_head ? sky_vlag(own_head->scx.dsq_vtime, sky_vframe_cpu(cpu)) : SKY_LAG_NONE;
	if ((own_lag >= lag ||
	     sky_lat_short_head_lag(sky_cpu_dsq(cpu), sky_vframe_cpu(cpu)) >= lag) &&
	    sky_lat_short_head_lag(sky_llc_dsq(llc), sky_vframe_llc(llc)) >=
		    (own_lag < lag ? own_lag : lag))
		return;
	scx_bpf_task_set_slice(p, 0);
	sky_stat_inc(SKY_STAT_LAT_TICK_ENDS);
}

/*
 * @p, back in enqueue, was preempted for latency on @cpu: it resumes
 * there next, behind the wakee in that CPU's local queue.
 */
static __always_inline bool sky_lat_resume(struct task_struct *p, s32 cpu, u64 enq_flags)
{
	struct sky_cpu_run *r = sky_run_of(cpu);

	if (!r->victim_pid || r->victim_pid != p->pid)
		return false;
	r->victim_pid = 0;
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, sky_slice_for(cpu), enq_flags);
	return true;
}

/*
 * The running task woke a task synchronously: is it about to sleep? Returns
 * its state (NULL if none), for sky_lat_may_stack.
 */
static __always_inline struct sky_task *sky_lat_sync_woke(u64 now)
{
	struct sky_task *waker = sky_task_of(bpf_get_current_task_btf());

	if (waker)
		waker->sync_woke_at_ns = now;
	return waker;
}

/*
 * @tctx's task stops (@slept: to sleep): a synchronous wakeup it made
 * counts for its trust if it slept within half a short burst of it, and
 * against it if it ran on.
 */
static __always_inline void sky_lat_sync_settle(struct sky_task *tctx, bool slept, u64 now)
{
	u64 woke = tctx->sync_woke_at_ns;

	if (!woke)
		return;
	tctx->sync_woke_at_ns = 0;
	if (slept && now - woke <= sky_cfg.latency_burst_ns / 2) {
		if (tctx->sync_trust < SKY_SYNC_TRUST_MAX)
			tctx->sync_trust++;
	} else if (tctx->sync_trust) {
		tctx->sync_trust--;
	}
}

/*
 * May a synchronous wakeup of @wakee go to the waker's CPU @cpu? With the
 * latency path off, when nothing waits there (SKY-1 as before). Else only
 * for a waker that sleeps right after its synchronous wakeups, and with
 * tasks waiting there only for a short wakee (which sky_lat_sync_queue
 * queues by key). @waker is what sky_lat_sync_woke returned.
 */
static __always_inline bool sky_lat_may_stack(const struct sky_task *wakee,
					      const struct sky_task *waker, s32 cpu)
{
	bool waiting = scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | cpu) > 0 ||
		       scx_bpf_dsq_nr_queued(sky_cpu_dsq(cpu)) > 0;

	if (!sky_lat_on() || !waker)
		return !waiting;
	if (waker->sync_trust < SKY_SYNC_TRUST_STACK) {
		sky_stat_inc(SKY_STAT_SYNC_REFUSED);
		return false;
	}
	/* Under overload, no task jumps the waiters (sky_lat_enqueue). */
	return !waiting || (sky_is_short(wakee) && !sky_bound_grown());
}

/*
 * A short wakee going to its waker's CPU @cpu (sky_lat_may_stack) waits in
 * that CPU's domain queue by key, not in its local queue: the waker's CPU
 * takes it the moment the waker sleeps, as its key is ahead of batch
 * tasks', and if that CPU is slow to (a vCPU the host stalls, a CPU lost
 * to interrupts) any CPU of the domain takes it at its next tick
 * (sky_lat_tick); in the local queue it would wait for that one CPU, and
 * ahead of tasks waiting there whatever their keys. False (not queued)
 * for a task that is not short, or under overload.
 */
static __always_inline bool sky_lat_sync_queue(struct task_struct *p, struct sky_task *tctx,
					       s32 cpu)
{
	if (!sky_is_short(tctx) || sky_bound_grown())
		return false;
	tctx->queued_at_ns = scx_bpf_now();
	sky_queue_in_llc(p, tctx, sky_llc_of(cpu), 0);
	sky_stat_inc(SKY_STAT_SYNC_QUEUED);
	return true;
}

/* Did @p yield since it last started? */
static __always_inline bool sky_lat_yielded(const struct task_struct *p)
{
	struct sky_task *tctx = sky_task_of(p);

	return tctx && tctx->yielded;
}

/* ops.yield without a target: give the CPU to a queued task. */
static __always_inline void sky_lat_yield(struct task_struct *p)
{
	struct sky_task *tctx = sky_task_of(p);

	if (tctx)
		tctx->yielded = 1;
	scx_bpf_task_set_slice(p, 0);
}

#endif /* __SKY_LATENCY_BPF_H */
