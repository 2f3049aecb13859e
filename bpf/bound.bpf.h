/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bound.bpf.h - the wait bound: no runnable task waits much past
 * starve_ns (more only when more tasks are runnable than starve_ns can
 * serve: sky_bound_ns), whatever affinity, grace, pinning or hotplug do.
 *
 * One BPF timer does two jobs, and runs only while some task is queued:
 *
 * - Starvation rescue. Every rescue period (an eighth of the bound) it
 *   scans every task of every queue (queues are in vtime order, so the
 *   longest wait may be anywhere in one) and moves each task that has
 *   waited the bound minus two periods to the rescue queue, which every
 *   CPU serves before anything else, and kicks a CPU that may run it: an
 *   idle one if any, else one it may use, whose current task is
 *   preempted (under overload only once the task waited the whole bound:
 *   sky_kick_for_rescue). So a task runs by the bound, give or take the
 *   kernel's scheduling latency.
 *
 * - Grace alarms. When an idle CPU leaves a warm task for its own CPU
 *   (grace.bpf.h), the alarm fires when the grace runs out and wakes an
 *   idle CPU that will take it: one of the task's cache domain, or else,
 *   after moving the task to its domain's queue (which other domains
 *   steal from), any idle CPU. A CPU is only woken for a task that its
 *   dispatch will take.
 *
 * Tasks left in the queue of a CPU that went offline are moved to their
 * domain's queue here too. Under overload (the bound has grown) kernel
 * threads keep starve_ns: they queue on the rescue queue at once
 * (sky_bound_kernel_first).
 *
 * A second timer, the watch, keeps the alarm alive where the kernel loses
 * it (sky_watch_timerfn), a CPU about to pick a task scans when both are
 * late, within a fixed budget (sky_bound_catch_up), and a CPU going offline leaves its
 * kicks and alarms to the others (sky_bound_leave_to_others).
 */
#ifndef __SKY_BOUND_BPF_H
#define __SKY_BOUND_BPF_H

#include "sky.bpf.h"
#include "stats.bpf.h"
#include "topology.bpf.h"
#include "grace.bpf.h"
#include "load.bpf.h"
#include "vtime.bpf.h"

struct sky_bound_timer {
	struct bpf_timer timer;
};

enum sky_timer { SKY_TIMER_ALARM, SKY_TIMER_WATCH, SKY_NR_TIMERS };

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SKY_NR_TIMERS);
	__type(key, u32);
	__type(value, struct sky_bound_timer);
} sky_bound_timer SEC(".maps");

/*
 * When the pending alarm fires (scx_bpf_now() time); 0 if none is
 * pending, 1 if it is overdue at once (see sky_bound_arm).
 */
static u64 sky_bound_due;

/* Starts in all at the scan before the last (load.bpf.h counts them). */
static u64 sky_starts_seen;
/* The time a CPU spent per task started, averaged over scans. */
static u64 sky_per_start_ns;

/*
 * The most the bound grows to: a third of the kernel's watchdog timeout, at
 * most 1 s. Set by the daemon from the timeout it gives the kernel.
 */
const volatile u64 sky_bound_max_ns = 1000000000ULL;

/* The bound in force: starve_ns, or the load-following bound when larger. */
static __always_inline u64 sky_bound_ns(void)
{
	return sky_bound_grown() ? sky_bound_load_ns : sky_cfg.starve_ns;
}

static __always_inline u64 sky_rescue_period_ns(void)
{
	return sky_bound_ns() / 8 ?: 1;
}

/*
 * A task that has waited this long is rescued at the next scan: two
 * periods before the bound, so that a scan a period late (timers fire late
 * on a busy machine) and a kicked CPU slow to answer still run it by
 * the bound. The policy loader checks affinity lets go before this
 * (RESCUE_AFTER_EIGHTHS in userspace/policy).
 */
static __always_inline u64 sky_rescue_after_ns(void)
{
	return sky_bound_ns() - 2 * sky_rescue_period_ns();
}

/*
 * This CPU is leaving (topology.bpf.h) and may start no timer or kick: the
 * alarm is made overdue at once, and the next CPU to look after it (any
 * enqueue, or the watch) starts it. Neither timer scans from a leaving
 * CPU, so no kick is made from one.
 */
static __always_inline void sky_bound_leave_to_others(void)
{
	sky_bound_due = 1;
	sky_stat_inc(SKY_STAT_LEFT_TO_OTHERS);
}

/*
 * Makes sure the alarm fires within @delay_ns; an earlier one stands,
 * unless it is a whole period overdue (late, as a 6 ms timer often is
 * under TCG, or lost: see the watch below): then it is started again, to
 * fire at once. Global: verified once, not in each caller (dispatch is
 * near the verifier's limit).
 */
__noinline int sky_bound_arm(u64 now, u64 delay_ns)
{
	struct sky_bound_timer *t;
	u64 due = now + delay_ns, pending = sky_bound_due;
	u32 alarm = SKY_TIMER_ALARM;

	if (sky_cpu_here_leaving()) {
		sky_bound_leave_to_others();
		return 0;
	}
	if (pending && pending <= due) {
		if (now < pending + sky_rescue_period_ns())
			return 0;
		/* A period overdue: lost or late; it fires now. */
		if (pending != 1)
			sky_stat_inc(SKY_STAT_ALARM_RESTARTS);
		delay_ns = 0;
		due = now;
	}
	sky_bound_due = due;
	t = bpf_map_lookup_elem(&sky_bound_timer, &alarm);
	if (!t || bpf_timer_start(&t->timer, delay_ns ?: 1, 0))
		sky_bound_due = 0;
	return 0;
}

/* The scan must run within a period whenever something is queued. */
static __always_inline void sky_bound_keep_watch(u64 now)
{
	sky_bound_arm(now, sky_rescue_period_ns());
}

/*
 * Wakes a CPU to run the rescued @p: an idle one, else preempts one.
 * Under overload (the bound has grown) only an idle one, unless @p is
 * @overdue (it waited the whole bound): every CPU reaches a slice end
 * within a minimum slice and serves the rescue queue first, far inside a
 * grown bound, so a preempting kick (an IPI and a switch) per rescue only
 * costs the CPUs time.
 */
static __always_inline void sky_kick_for_rescue(const struct task_struct *p, bool overdue)
{
	s32 cpu = sky_claim_idle_in(p->cpus_ptr);

	if (cpu >= 0) {
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		return;
	}
	if (sky_bound_grown() && !overdue)
		return;
	cpu = scx_bpf_pick_any_cpu(p->cpus_ptr, 0);
	if (cpu >= 0)
		scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
}

/*
 * Kernel threads are the kernel's own work: the sched_ext watchdog's
 * check-in, RCU, writeback. Under a grown bound each of their waits may
 * last a third of the watchdog's timeout, and the check-in is a chain of
 * them (its kworker wakes, then yields at a cond_resched() after each CPU
 * it checks): under 4 000 runnable threads the chain outlasted the timeout
 * and the kernel ejected scx_sky for its own watchdog's delay. So while
 * the bound has grown past starve_ns, a kernel thread queues on the rescue
 * queue, which every CPU serves first (at its next slice end: slices are
 * at their shortest then), and an idle CPU that may run it is woken. Per-CPU
 * kthreads never come here: they run where they are (sky_enqueue).
 */
static __always_inline bool sky_bound_kernel_first(struct task_struct *p, u64 enq_flags)
{
	s32 cpu;

	if (!(p->flags & PF_KTHREAD) || !sky_bound_grown())
		return false;
	scx_bpf_dsq_insert(p, SKY_DSQ_RESCUE, sky_cfg.slice_ns, enq_flags);
	sky_stat_inc(SKY_STAT_KERNEL_FIRST);
	cpu = sky_claim_idle_in(p->cpus_ptr);
	if (cpu >= 0)
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	return true;
}

/*
 * @p, waiting in @owner's queue (or, with @owner < 0, in its domain's
 * queue), may now be taken by another CPU: wake an idle one that will.
 * One of @p's domain takes it from either queue; a CPU of another domain
 * only from the domain queue, so the task is moved there first.
 */
static __always_inline bool sky_wake_taker(struct bpf_iter_scx_dsq *it, struct task_struct *p,
					   struct sky_task *tctx, s32 owner, u32 llc)
{
	s32 cpu = sky_claim_idle_for(p, llc, false);

	if (cpu < 0) {
		cpu = sky_claim_idle_in(p->cpus_ptr);
		if (cpu < 0)
			return false;
		if (owner >= 0 && sky_llc_of(cpu) != llc) {
			scx_bpf_dsq_move_set_vtime(it, sky_queue_key(p, tctx, sky_vframe_llc(llc)));
			scx_bpf_dsq_move_vtime(it, p, sky_llc_dsq(llc), 0);
		}
	}
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	return true;
}

/*
 * Rescues every task among the first @max of @dsq that has waited
 * the bound minus two periods. Returns the nanoseconds until the next one
 * would need it. Run over the rescue queue itself, it kicks a CPU again
 * for each task still there at the bound (the CPU first kicked may have
 * gone offline or been taken by a higher scheduling class). Global:
 * verified once. The count lives in a bpf_for loop,
 * whose index the verifier does not track value by value; a counter
 * compared inside a bpf_for_each loop would make it walk every count.
 *
 * The scans run from the timer, which kernels before 6.18 do not run in an
 * RCU read section; walking a queue needs one, so each scan takes it.
 */
__noinline u64 sky_rescue_scan(u64 dsq, u64 now, u32 max)
{
	u64 rescue_after = sky_rescue_after_ns(), next = (u64)-1, queued;
	struct bpf_iter_scx_dsq it;
	struct task_struct *p;
	struct sky_task *tctx;
	u32 n;

	bpf_rcu_read_lock();
	bpf_iter_scx_dsq_new(&it, dsq, 0);
	bpf_for(n, 0, SKY_SCAN_MAX) {
		if (n >= max)
			break;
		p = bpf_iter_scx_dsq_next(&it);
		if (!p)
			break;
		tctx = sky_task_of(p);
		if (!tctx)
			continue;
		queued = sky_queued_for(tctx, now);
		if (queued < rescue_after) {
			if (rescue_after - queued < next)
				next = rescue_after - queued;
			continue;
		}
		if (dsq == SKY_DSQ_RESCUE) {
			if (queued >= sky_bound_ns())
				sky_kick_for_rescue(p, true);
			continue;
		}
		if (scx_bpf_dsq_move(&it, p, SKY_DSQ_RESCUE, 0)) {
			sky_stat_inc(SKY_STAT_STARVATION_RESCUES);
			sky_kick_for_rescue(p, false);
		}
	}
	bpf_iter_scx_dsq_destroy(&it);
	bpf_rcu_read_unlock();
	return next;
}

/*
 * Grace alarms for the queue of CPU @owner (or, with @owner < 0, of
 * domain @llc): wakes a taker for each of the first walk_depth tasks whose
 * grace ran out. Returns the nanoseconds until the next grace runs out.
 */
__noinline u64 sky_grace_scan(s32 owner, u32 llc, u64 now)
{
	u64 dsq = owner >= 0 ? sky_cpu_dsq(owner) : sky_llc_dsq(llc), next = (u64)-1, left;
	struct bpf_iter_scx_dsq it;
	struct task_struct *p;
	struct sky_task *tctx;
	u32 n;

	bpf_rcu_read_lock();
	bpf_iter_scx_dsq_new(&it, dsq, 0);
	bpf_for(n, 0, SKY_WALK_MAX) {
		p = sky_walk_next(&it, n);
		if (!p)
			break;
		tctx = sky_task_of(p);
		if (!tctx)
			continue;
		left = sky_take_left(p, tctx, owner, now);
		if (left) {
			if (left < next)
				next = left;
		} else if (sky_wake_taker(&it, p, tctx, owner, llc)) {
			sky_stat_inc(SKY_STAT_GRACE_KICKS);
		}
	}
	bpf_iter_scx_dsq_destroy(&it);
	bpf_rcu_read_unlock();
	return next;
}

/* Moves every task waiting for offline CPU @owner to its domain's queue. */
__noinline int sky_drain_offline(s32 owner)
{
	u32 n, llc = sky_llc_of(owner);
	struct bpf_iter_scx_dsq it;
	struct task_struct *p;

	bpf_rcu_read_lock();
	bpf_iter_scx_dsq_new(&it, sky_cpu_dsq(owner), 0);
	bpf_for(n, 0, SKY_SCAN_MAX) {
		p = bpf_iter_scx_dsq_next(&it);
		if (!p)
			break;
		scx_bpf_dsq_move_set_vtime(&it,
					   sky_queue_key(p, sky_task_of(p), sky_vframe_llc(llc)));
		scx_bpf_dsq_move_vtime(&it, p, sky_llc_dsq(llc), 0);
	}
	bpf_iter_scx_dsq_destroy(&it);
	bpf_rcu_read_unlock();
	return 0;
}

/* Everything the alarm does for one queue; the time until it must look again. */
static __always_inline u64 sky_bound_check(s32 owner, u32 llc, u64 now, bool idle)
{
	u64 dsq = owner >= 0 ? sky_cpu_dsq(owner) : sky_llc_dsq(llc), next, left;

	if (owner >= 0 && !sky_cpu_is_online(owner))
		sky_drain_offline(owner);
	next = sky_rescue_scan(dsq, now, SKY_SCAN_MAX);
	if (idle && scx_bpf_dsq_nr_queued(dsq) > 0) {
		left = sky_grace_scan(owner, llc, now);
		if (left < next)
			next = left;
	}
	return next;
}

/* Tasks in @dsq (0 if the kernel cannot say). */
static __always_inline u32 sky_nr_queued(u64 dsq)
{
	s32 n = scx_bpf_dsq_nr_queued(dsq);

	return n > 0 ? n : 0;
}

/* Tasks in all of scx_sky's queues. */
static __always_inline u64 sky_queued_in_all(void)
{
	u64 total = sky_nr_queued(SKY_DSQ_RESCUE);
	u32 cpu, llc;

	bpf_for(cpu, 0, sky_nr_cpus)
		total += sky_nr_queued(sky_cpu_dsq(cpu));
	bpf_for(llc, 0, sky_nr_llcs)
		total += sky_nr_queued(sky_llc_dsq(llc));
	return total;
}

/*
 * Sets the bound for the tasks queued at the last load sample, beside one
 * running on each CPU online, from the starts made in the @dt since the
 * sample before.
 */
static __always_inline void sky_bound_follow(u64 dt)
{
	u64 cpus = sky_sampled_online ?: 1, queued = sky_sampled_queued;
	u64 made = sky_sampled_starts - sky_starts_seen, per_start, round;

	sky_starts_seen = sky_sampled_starts;
	/*
	 * Only an interval with work waiting for every CPU says what a start
	 * costs (idle time would count as cost), and not one longer than the
	 * bound (scans come every eighth of it: a longer gap spans a lull); a
	 * CPU with work waiting switches at least every slice.
	 */
	if (queued >= cpus && made && dt <= sky_bound_ns()) {
		per_start = dt * cpus / made;
		if (per_start > sky_cfg.slice_ns)
			per_start = sky_cfg.slice_ns;
		sky_per_start_ns = sky_ewma(sky_per_start_ns, per_start);
	}
	per_start =
		sky_per_start_ns > sky_cfg.slice_min_ns ? sky_per_start_ns : sky_cfg.slice_min_ns;
	round = (queued + cpus) * per_start / cpus;
	sky_bound_load_ns = 2 * round < sky_bound_max_ns ? 2 * round : sky_bound_max_ns;
	sky_rescued_per_cpu = sky_nr_queued(SKY_DSQ_RESCUE) / cpus;
}

/*
 * One scan of every queue: rescues, grace alarms, offline CPUs' queues,
 * and the load sample (@dt since the last). Returns the nanoseconds until
 * the next scan is needed, 0 if nothing is queued.
 */
static __always_inline u64 sky_bound_scan_all(u64 now, u64 dt)
{
	bool idle = sky_any_idle(), queued = false;
	u64 next, left;
	u32 cpu, llc;

	sky_load_sample(dt);
	sky_bound_follow(dt);
	next = sky_rescue_period_ns();
	bpf_for(cpu, 0, sky_nr_cpus) {
		if (scx_bpf_dsq_nr_queued(sky_cpu_dsq(cpu)) <= 0)
			continue;
		queued = true;
		left = sky_bound_check(cpu, sky_llc_of(cpu), now, idle);
		if (left < next)
			next = left;
	}
	bpf_for(llc, 0, sky_nr_llcs) {
		if (scx_bpf_dsq_nr_queued(sky_llc_dsq(llc)) <= 0)
			continue;
		queued = true;
		left = sky_bound_check(-1, llc, now, idle);
		if (left < next)
			next = left;
	}
	if (scx_bpf_dsq_nr_queued(SKY_DSQ_RESCUE) > 0) {
		sky_rescue_scan(SKY_DSQ_RESCUE, now, SKY_SCAN_MAX);
		queued = true;
	}
	return queued ? next ?: 1 : 0;
}

/*
 * Scans come from the alarm, the watch and a dispatching CPU
 * (sky_bound_catch_up), on any CPU: a scan claims its turn by moving the
 * load sample's time (load.bpf.h) to @now, so two never run at once (they
 * would share the sampler's scratch sums) and none follows another within
 * a quarter period. Sets *@dt to the time since the last scan.
 */
static __always_inline bool sky_bound_claim_scan(u64 now, u64 *dt)
{
	u64 last = sky_load_sampled_at;

	if ((s64)(now - last) < (s64)(sky_rescue_period_ns() / 4))
		return false;
	*dt = now - last;
	return __sync_val_compare_and_swap(&sky_load_sampled_at, last, now) == last;
}

/*
 * The alarm's work, from either timer or a dispatching CPU: scan, and set
 * the alarm for the next scan if anything is queued; @stat counts the scan
 * (SKY_NR_STATS: not counted). If another CPU has the scan, the alarm is
 * set a period on instead. Returns the time until the next scan, 0 if
 * nothing is queued.
 */
static __always_inline u64 sky_bound_rescan(u64 now, enum sky_stat_idx stat)
{
	u64 next, dt;

	if (!sky_bound_claim_scan(now, &dt)) {
		next = sky_rescue_period_ns();
		sky_bound_arm(now, next);
		return next;
	}
	sky_bound_due = 0;
	next = sky_bound_scan_all(now, dt);
	if (next)
		sky_bound_arm(now, next);
	if (next && stat < SKY_NR_STATS)
		sky_stat_inc(stat);
	return next;
}

static int sky_bound_timerfn(void *map, int *key, struct bpf_timer *timer)
{
	SKY_CFG_PIN();

	if (sky_cpu_here_leaving())
		sky_bound_leave_to_others();
	else
		sky_bound_rescan(scx_bpf_now(), SKY_NR_STATS);
	return 0;
}

/*
 * A CPU about to pick a task scans when the alarm is late: a quarter
 * period past due. Timers fire late on a busy machine (under TCG a vCPU's
 * timer interrupt waits for the emulator's turn: scans came 14 ms apart
 * typically, 22 ms at the 90th percentile, for a 6 ms period, and tasks
 * were rescued up to 25 ms late), while some CPU dispatches every slice or
 * so. It holds its run-queue lock, so it inspects at most
 * SKY_CATCH_UP_MAX tasks: all of them (the whole scan, as a timer would)
 * if no more are queued, else the first of the two queues it serves
 * itself, its own and its domain's; rescued tasks there go to the rescue
 * queue, which it serves first. The rest is the timers' (started again
 * here if a period overdue), which scan outside any run-queue lock.
 * Global: keeps the scan out of dispatch's own verification.
 */
__noinline int sky_bound_catch_up(u64 now)
{
	u64 late = sky_rescue_period_ns() + sky_rescue_period_ns() / 4;
	s32 cpu;

	if ((s64)(now - sky_load_sampled_at) < (s64)late || sky_cpu_here_leaving())
		return 0;
	if (sky_queued_in_all() <= SKY_CATCH_UP_MAX) {
		sky_bound_rescan(now, SKY_STAT_DISPATCH_SCANS);
		return 0;
	}
	cpu = bpf_get_smp_processor_id();
	sky_rescue_scan(sky_cpu_dsq(cpu), now, SKY_CATCH_UP_MAX / 2);
	sky_rescue_scan(sky_llc_dsq(sky_llc_of(cpu)), now, SKY_CATCH_UP_MAX / 2);
	sky_stat_inc(SKY_STAT_DISPATCH_LOCAL_SCANS);
	sky_bound_keep_watch(now);
	return 0;
}

/* The watch's pace while nothing is queued. */
static __always_inline u64 sky_watch_idle_ns(void)
{
	return sky_cfg.starve_ns * 4;
}

/*
 * The watch: a second timer, started only from init and from its own
 * callback, where the kernel starts a timer at once. The alarm is started
 * from scheduler callbacks, which run with interrupts off; there 7.0+
 * kernels start it later from an irq_work, and under CPU hotplug (7.3,
 * TCG) that irq_work was seen never to run again: the alarm was dead for
 * good and tasks waited until the watchdog ejected the scheduler. While
 * tasks are queued the watch looks every rescue period, and scans itself
 * (and starts the alarm again, from here) only if the alarm has not
 * scanned for a period. Its pace when nothing is queued is 4 x starve_ms.
 */
static int sky_watch_timerfn(void *map, int *key, struct bpf_timer *timer)
{
	SKY_CFG_PIN();
	u64 now, period, next;

	now = scx_bpf_now();
	period = sky_rescue_period_ns();
	next = period;

	/* Every scan samples the load: its time is the last scan's. */
	if ((s64)(now - sky_load_sampled_at) >= (s64)period && !sky_cpu_here_leaving())
		next = sky_bound_rescan(now, SKY_STAT_WATCH_SCANS);
	bpf_timer_start(timer, next ? period : sky_watch_idle_ns(), 0);
	return 0;
}

static __always_inline s32 sky_bound_init(void)
{
	u32 alarm = SKY_TIMER_ALARM, watch = SKY_TIMER_WATCH;
	struct sky_bound_timer *a = bpf_map_lookup_elem(&sky_bound_timer, &alarm);
	struct sky_bound_timer *w = bpf_map_lookup_elem(&sky_bound_timer, &watch);

	if (!a || !w)
		return -ENOENT;
	bpf_timer_init(&a->timer, &sky_bound_timer, CLOCK_MONOTONIC);
	bpf_timer_set_callback(&a->timer, sky_bound_timerfn);
	bpf_timer_init(&w->timer, &sky_bound_timer, CLOCK_MONOTONIC);
	bpf_timer_set_callback(&w->timer, sky_watch_timerfn);
	return bpf_timer_start(&w->timer, sky_watch_idle_ns(), 0);
}

#endif /* __SKY_BOUND_BPF_H */
