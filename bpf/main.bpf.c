/* SPDX-License-Identifier: GPL-2.0 */
/*
 * main.bpf.c - the scx_sky sched_ext ops table. Only glue lives here: each
 * callback hands off to the file that owns the idea (see sky.bpf.h for the
 * map). Scheduling stays correct if the daemon stalls: every decision is
 * made from what is already in the maps.
 */
#include "sky.bpf.h"
#include "stats.bpf.h"
#include "topology.bpf.h"
#include "vtime.bpf.h"
#include "decay.bpf.h"
#include "grace.bpf.h"
#include "bound.bpf.h"
#include "burst.bpf.h"
#include "latency.bpf.h"
#include "queues.bpf.h"
#include "class.bpf.h"
#include "smt.bpf.h"
#include "gang.bpf.h"
#include "pmu.bpf.h"
#include "dump.bpf.h"
#include "tasks.bpf.h"

char _license[] SEC("license") = "GPL";

struct sky_config sky_cfgs[SKY_CFG_SLOTS];
volatile u32 sky_cfg_live;
u64 sky_cfg_first_use_ns[SKY_CFG_SLOTS];
u32 sky_cfg_pinned[SKY_MAX_CPUS];

UEI_DEFINE(uei);

s32 BPF_STRUCT_OPS(sky_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	SKY_CFG_PIN();
	struct sky_task *tctx, *waker = NULL;
	bool direct = false;
	s32 cpu;

	if ((wake_flags & SCX_WAKE_SYNC) && sky_lat_on())
		waker = sky_lat_sync_woke(scx_bpf_now());
	if ((cpu = sky_smt_place(p, prev_cpu)) >= 0)
		direct = true;
	else if ((cpu = sky_gang_select(p, prev_cpu, &direct)) >= 0)
		;
	else if (sky_cfg.affinity && sky_task_is_free(p))
		cpu = sky_queue_select_cpu(p, prev_cpu, wake_flags, waker, &direct);
	else if (__COMPAT_HAS_scx_bpf_select_cpu_and)
		direct = (cpu = scx_bpf_select_cpu_and(p, prev_cpu, wake_flags, p->cpus_ptr, 0)) >=
			 0;
	else
		cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &direct);

	if (!direct)
		return cpu >= 0 ? cpu : prev_cpu;
	tctx = sky_task_of(p);
	if (tctx)
		tctx->queued_at_ns = scx_bpf_now();
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, sky_cfg.slice_ns, 0);
	return cpu;
}

void BPF_STRUCT_OPS(sky_enqueue, struct task_struct *p, u64 enq_flags)
{
	SKY_CFG_PIN();
	struct sky_task *tctx = sky_task_of(p);
	s32 cpu = scx_bpf_task_cpu(p), idle;
	u64 now = scx_bpf_now();

	/*
	 * The wait runs from the first enqueue to the next run: a task taken
	 * off its queue and put back without running (its affinity, nice or
	 * class changed) keeps its place in time, as the kernel's run-queue
	 * wait does; else the starvation rescue would never see it waiting.
	 */
	if (tctx && !tctx->queued_at_ns)
		tctx->queued_at_ns = now;
	if (tctx)
		tctx->restoring = 0;
	/*
	 * Per-CPU kthreads can run nowhere else, and a task with migration
	 * disabled must not be taken by another CPU (kernels before 6.15 do
	 * not stop that): both run where they are.
	 */
	if (((p->flags & PF_KTHREAD) && p->nr_cpus_allowed == 1) || is_migration_disabled(p)) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, sky_cfg.slice_ns, enq_flags);
		return;
	}
	/*
	 * A CPU on its way offline may kick no other (topology.bpf.h), and
	 * every path below but SKY-1's may: from here tasks queue for SKY-1,
	 * which wakes no CPU from a leaving one. A move a tick decided for a
	 * gang is dropped (its slice stays zero while it is pending).
	 */
	if (sky_cpu_here_leaving()) {
		if (tctx)
			tctx->gang_target = -1;
		sky_queue_enqueue(p, tctx, cpu, enq_flags, now);
		sky_bound_keep_watch(now);
		return;
	}
	/* The kernel's own work waits no grown bound (bound.bpf.h). */
	if (sky_bound_kernel_first(p, enq_flags))
		return;
	/* A tick chose it a CPU to move to for a gang (gang.bpf.h). */
	if (sky_gang_move(p, tctx, enq_flags))
		return;
	/* Preempted for a short wakee (latency.bpf.h): it resumes here next. */
	if (sky_lat_resume(p, cpu, enq_flags))
		return;
	/*
	 * Left without a slice at its slice end to move for SMT pairing (the
	 * only way SCX_ENQ_LAST comes here): if the move no longer suits, it
	 * runs on where it was, as it would have had its slice been renewed.
	 */
	if (enq_flags & SCX_ENQ_LAST) {
		if (!sky_smt_move(p, tctx, cpu, enq_flags))
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, sky_cfg.slice_ns, enq_flags);
		return;
	}
	idle = sky_smt_place(p, cpu);
	if (idle >= 0) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | idle, sky_cfg.slice_ns, enq_flags);
		scx_bpf_kick_cpu(idle, SCX_KICK_IDLE);
		return;
	}
	if (!sky_gang_enqueue(p, tctx, enq_flags) && !sky_lat_enqueue(p, tctx, cpu, enq_flags, now))
		sky_queue_enqueue(p, tctx, cpu, enq_flags, now);
	sky_bound_keep_watch(now);
}

void BPF_STRUCT_OPS(sky_dispatch, s32 cpu, struct task_struct *prev)
{
	SKY_CFG_PIN();
	u64 now = scx_bpf_now();

	sky_bound_catch_up(now);
	if (sky_queue_dispatch(cpu, prev)) {
		if (prev && sky_lat_yielded(prev))
			sky_stat_inc(SKY_STAT_YIELDS);
		return;
	}
	/*
	 * Nothing else should run here: let the previous task keep the CPU,
	 * unless SMT pairing or a gang moves it (its zero slice sends it to
	 * enqueue).
	 */
	if (prev && (prev->scx.flags & SCX_TASK_QUEUED) && !sky_gang_moving(prev) &&
	    !sky_smt_wants_move(cpu, prev, now))
		scx_bpf_task_set_slice(prev, sky_slice_for(cpu));
}

/*
 * The kernel restores a running task whose nice, class or affinity
 * changed: stopping() and quiescent() without a sleep, runnable(), then
 * running() again on the same CPU, with no enqueue and no slice end
 * between. That is no new start: it keeps its slice, the CPU's vtime clock
 * does not move to it, its run goes on (the latency path's minimum run
 * counts from its start) and no wait or dispatch is counted. Taken as starts,
 * a task renicing itself every millisecond kept its CPU for many slices
 * (each restore a fresh slice, and a clock that followed it alone) while
 * its neighbour waited 35 ms between runs against 4 ms beside a plain
 * spinner (tests/vm/fairness.sh), and a task in that CPU's local queue,
 * where no rescue scan looks, waited 130-150 ms (the hostile test).
 */
static __always_inline bool sky_restored(struct sky_task *tctx, u64 now)
{
	if (!tctx || !tctx->restoring)
		return false;
	tctx->restoring = 0;
	tctx->started_at_ns = now;
	return true;
}

void BPF_STRUCT_OPS(sky_running, struct task_struct *p)
{
	SKY_CFG_PIN();
	struct sky_task *tctx = sky_task_of(p);
	s32 cpu = scx_bpf_task_cpu(p);
	u64 now = scx_bpf_now(), waited;
	bool restored = sky_restored(tctx, now);

	if (!restored) {
		sky_vtime_started(p, tctx, cpu, now);
		sky_load_started(cpu);
	}
	sky_lat_started(p, tctx, cpu, now, restored);
	sky_smt_started(cpu, p, now);
	if (!restored)
		scx_bpf_task_set_slice(p, sky_slice_for(cpu));
	if (!tctx || restored)
		return;
	sky_stat_inc(SKY_STAT_DISPATCHES);
	waited = sky_queued_for(tctx, now);
	sky_stat_add(SKY_STAT_WAIT_NS, waited);
	sky_wait_record(tctx, waited);
	/*
	 * The wait bound from scx_sky's side, over the interval the kernel's
	 * run-queue wait measures too, so the two can be compared.
	 */
	if (waited > sky_bound_ns() + sky_cfg.slice_ns)
		sky_stat_inc(SKY_STAT_LATE_RUNS);
	tctx->queued_at_ns = 0;
	sky_gang_stop_waiting(tctx);
	if (tctx->last_cpu == cpu) {
		sky_stat_inc(SKY_STAT_LAST_CPU_HITS);
	} else if (tctx->last_cpu >= 0) {
		if (sky_llc_of(tctx->last_cpu) == sky_llc_of(cpu))
			sky_stat_inc(SKY_STAT_MOVES_IN_LLC);
		else
			sky_stat_inc(SKY_STAT_MOVES_ACROSS_LLC);
		if (tctx->cold)
			sky_stat_inc(SKY_STAT_DECAYED_MOVES);
	}
	tctx->last_cpu = cpu;
}

void BPF_STRUCT_OPS(sky_stopping, struct task_struct *p, bool runnable)
{
	SKY_CFG_PIN();
	struct sky_task *tctx = sky_task_of(p);
	s32 cpu = scx_bpf_task_cpu(p);
	u64 now, ran;
	u32 class;

	now = scx_bpf_now();
	ran = sky_vtime_charge(p, tctx, now);
	class = sky_class_of(p);

	sky_pressure_add(tctx, cpu, ran);
	sky_lat_stopped(cpu);
	if (tctx) {
		sky_burst_ran(tctx, ran);
		if (runnable)
			sky_lat_sync_settle(tctx, false, now);
		/* A sleep (quiescent) or a queue (enqueue) clears it. */
		tctx->restoring = !runnable;
	}
	sky_class_ran(class, ran);
	sky_gang_ran(p, cpu, ran);
	sky_smt_stopped(cpu, class, now);
}

void BPF_STRUCT_OPS(sky_tick, struct task_struct *p)
{
	SKY_CFG_PIN();

	s32 cpu = scx_bpf_task_cpu(p);

	sky_smt_restate(cpu, p);
	sky_gang_tick(cpu, p);
	sky_lat_tick(p, cpu);
}

void BPF_STRUCT_OPS(sky_runnable, struct task_struct *p, u64 enq_flags)
{
	SKY_CFG_PIN();
	struct sky_task *tctx = sky_task_of(p);
	u64 now = scx_bpf_now();

	/* A restore (sky_restored) begins no burst: the task never slept. */
	if (!tctx || tctx->restoring)
		return;
	if (enq_flags & SCX_ENQ_WAKEUP) {
		sky_stat_inc(SKY_STAT_WAKEUPS);
		if (sky_is_short(tctx))
			sky_stat_inc(SKY_STAT_SHORT_WAKEUPS);
	}
	tctx->last_sleep_ns = sky_sleep_ns(tctx, now);
	tctx->slept_at_ns = 0;
	sky_burst_woke(tctx, now);
}

void BPF_STRUCT_OPS(sky_quiescent, struct task_struct *p, u64 deq_flags)
{
	SKY_CFG_PIN();
	struct sky_task *tctx = sky_task_of(p);
	u64 now;

	if (!tctx || !(deq_flags & SCX_DEQ_SLEEP))
		return;
	tctx->restoring = 0;
	now = scx_bpf_now();
	tctx->slept_at_ns = now;
	sky_burst_slept(tctx);
	sky_lat_sync_settle(tctx, true, now);
}

/* sched_yield(): the CPU goes to a queued task (latency.bpf.h). */
bool BPF_STRUCT_OPS(sky_yield, struct task_struct *from, struct task_struct *to)
{
	if (!to)
		sky_lat_yield(from);
	return false;
}

/* A higher scheduling class took the CPU: its local queue must not wait. */
void BPF_STRUCT_OPS(sky_cpu_release, s32 cpu, struct scx_cpu_release_args *args)
{
	scx_bpf_reenqueue_local();
}

/*
 * Counts CPUs going idle while a task they could run waited past the
 * bound: evidence that the bound failed. Looks only, never moves.
 */
void BPF_STRUCT_OPS(sky_update_idle, s32 cpu, bool idle)
{
	SKY_CFG_PIN();
	u64 now = scx_bpf_now(),
	    dsqs[3] = { SKY_DSQ_RESCUE, sky_cpu_dsq(cpu), sky_llc_dsq(sky_llc_of(cpu)) };
	struct sky_task *tctx;
	struct task_struct *p;
	u32 i;

	if (!idle) {
		sky_smt_left_idle(cpu, now);
		return;
	}
	sky_smt_set(cpu, SKY_SMT_IDLE, now);
	bpf_for(i, 0, 3) {
		p = sky_peek(dsqs[i]);
		tctx = p ? sky_task_of(p) : NULL;
		if (tctx && sky_queued_for(tctx, now) >= sky_bound_ns() &&
		    bpf_cpumask_test_cpu(cpu, p->cpus_ptr)) {
			sky_stat_inc(SKY_STAT_IDLE_WITH_WAITERS);
			return;
		}
	}
}

/*
 * Hotplug is handled in place: a CPU's queue is emptied into its domain's
 * when it goes offline (bound.bpf.h), and any CPU steals from a domain
 * with none left. Only a CPU whose domain was unknown at start-up needs
 * the daemon to re-read the topology.
 */
void BPF_STRUCT_OPS(sky_cpu_online, s32 cpu)
{
	sky_stat_inc(SKY_STAT_HOTPLUG_EVENTS);
	if (sky_llc_of(cpu) == SKY_LLC_UNKNOWN) {
		scx_bpf_exit(SCX_ECODE_ACT_RESTART | SCX_ECODE_RSN_HOTPLUG,
			     "CPU %d came online in an unknown cache domain", cpu);
		return;
	}
	sky_cpu_set_online(cpu, true);
}

void BPF_STRUCT_OPS(sky_cpu_offline, s32 cpu)
{
	SKY_CFG_PIN();

	sky_stat_inc(SKY_STAT_HOTPLUG_EVENTS);
	sky_cpu_set_online(cpu, false);
	sky_bound_arm(scx_bpf_now(), 0);
}

s32 BPF_STRUCT_OPS(sky_init_task, struct task_struct *p, struct scx_init_task_args *args)
{
	struct sky_task *tctx;

	tctx = bpf_task_storage_get(&sky_tasks, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!tctx)
		return -ENOMEM;
	tctx->last_cpu = -1;
	tctx->smt_target = -1;
	tctx->gang_target = -1;
	tctx->gang_waiting_llc = -1;
	tctx->sync_trust = SKY_SYNC_TRUST_START;
	return 0;
}

void BPF_STRUCT_OPS(sky_exit_task, struct task_struct *p, struct scx_exit_task_args *args)
{
	sky_gang_exit(p, sky_task_of(p));
}

void BPF_STRUCT_OPS(sky_enable, struct task_struct *p)
{
	SKY_CFG_PIN();
	struct sky_task *tctx = sky_task_of(p);

	/*
	 * Back from another class: a wait begun before it left is over, and
	 * its next run is a start, not a restore (it may have left scx while
	 * running, which set restoring).
	 */
	if (tctx) {
		tctx->queued_at_ns = 0;
		tctx->restoring = 0;
	}
	sky_vtime_enable(p, tctx);
}

void BPF_STRUCT_OPS(sky_dump_op, struct scx_dump_ctx *dctx)
{
	SKY_CFG_PIN();

	sky_dump();
}

void BPF_STRUCT_OPS(sky_dump_cpu_op, struct scx_dump_ctx *dctx, s32 cpu, bool idle)
{
	sky_dump_cpu(cpu, idle);
}

void BPF_STRUCT_OPS(sky_dump_task_op, struct scx_dump_ctx *dctx, struct task_struct *p)
{
	sky_dump_task(p);
}

s32 BPF_STRUCT_OPS_SLEEPABLE(sky_init)
{
	SKY_CFG_PIN();

	return sky_topology_init() ?: sky_bound_init();
}

void BPF_STRUCT_OPS(sky_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

/* The ops table keeps one callback a line, aligned. */
/* clang-format off */
SCX_OPS_DEFINE(sky_ops,
	       .select_cpu	= (void *)sky_select_cpu,
	       .enqueue		= (void *)sky_enqueue,
	       .dispatch	= (void *)sky_dispatch,
	       .runnable	= (void *)sky_runnable,
	       .running		= (void *)sky_running,
	       .stopping	= (void *)sky_stopping,
	       .tick		= (void *)sky_tick,
	       .quiescent	= (void *)sky_quiescent,
	       .yield		= (void *)sky_yield,
	       .cpu_release	= (void *)sky_cpu_release,
	       .update_idle	= (void *)sky_update_idle,
	       .cpu_online	= (void *)sky_cpu_online,
	       .cpu_offline	= (void *)sky_cpu_offline,
	       .init_task	= (void *)sky_init_task,
	       .exit_task	= (void *)sky_exit_task,
	       .enable		= (void *)sky_enable,
	       .dump		= (void *)sky_dump_op,
	       .dump_cpu	= (void *)sky_dump_cpu_op,
	       .dump_task	= (void *)sky_dump_task_op,
	       .init		= (void *)sky_init,
	       .exit		= (void *)sky_exit,
	       /*
		* ENQ_LAST: a task whose slice dispatch leaves at zero comes to
		* enqueue instead of running on (SMT pairing moves it); dispatch
		* renews every other slice, so nothing else changes.
		*/
	       .flags		= SCX_OPS_KEEP_BUILTIN_IDLE | SCX_OPS_ENQ_LAST,
	       .name		= "sky");
/* clang-format on */
