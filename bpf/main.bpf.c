/* SPDX-License-Identifier: GPL-2.0 */
/*
 * main.bpf.c - the scx_sky sched_ext ops table. Only glue lives here: each
 * callback hands off to the file that owns the idea (sky1, vtime, topology,
 * stats). Scheduling stays correct if the daemon stalls: every decision is
 * made from what is already in the maps.
 */
#include "sky.bpf.h"
#include "stats.bpf.h"
#include "topology.bpf.h"
#include "vtime.bpf.h"
#include "grace.bpf.h"
#include "sky1.bpf.h"

struct sky_config sky_cfg;

UEI_DEFINE(uei);

/*
 * Looks at the head (highest priority) of @dsq: if it may run on @cpu and
 * has waited at least starve_ns, it is starving. With @take, it is moved to
 * @cpu's local queue (dispatch context only). Global, so verified once.
 */
__hidden int sky_head_starving(u64 dsq, s32 cpu, u64 now, bool take)
{
	struct task_struct *p;
	struct sky_task *tctx;
	bool starving = false;

	if (scx_bpf_dsq_nr_queued(dsq) <= 0)
		return false;
	bpf_for_each(scx_dsq, p, dsq, 0) {
		tctx = sky_task_of(p);
		starving = tctx && sky_queued_for(tctx, now) >= sky_cfg.starve_ns &&
			   bpf_cpumask_test_cpu(cpu, p->cpus_ptr);
		if (starving && take)
			starving = scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0);
		break;
	}
	return starving;
}

/* Runs the longest-waiting head of any domain if it waited too long. */
static __always_inline bool sky_rescue_starving(s32 cpu)
{
	u64 now = scx_bpf_now();
	u32 llc;

	bpf_for(llc, 0, nr_llcs) {
		if (sky_head_starving(sky_llc_dsq(llc), cpu, now, true)) {
			sky_stat_inc(SKY_STAT_STARVATION_RESCUES);
			return true;
		}
	}
	return false;
}

/* The baseline's dispatch: own domain's head, else another domain's. */
static __always_inline bool sky_vtime_dispatch(u32 own)
{
	u32 i;

	if (scx_bpf_dsq_move_to_local(sky_llc_dsq(own), 0))
		return true;
	bpf_for(i, 1, nr_llcs) {
		if (scx_bpf_dsq_move_to_local(sky_llc_dsq((own + i) % nr_llcs), 0)) {
			sky_stat_inc(SKY_STAT_STEALS);
			return true;
		}
	}
	return false;
}

s32 BPF_STRUCT_OPS(sky_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	struct sky_task *tctx;
	bool direct = false;
	s32 cpu;

	if (sky_cfg.affinity)
		cpu = sky1_select_cpu(p, prev_cpu, wake_flags, &direct);
	else
		cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &direct);

	if (direct) {
		tctx = sky_task_of(p);
		if (tctx)
			tctx->queued_at_ns = scx_bpf_now();
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, sky_cfg.slice_ns, 0);
	}
	return cpu;
}

void BPF_STRUCT_OPS(sky_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct sky_task *tctx = sky_task_of(p);
	s32 cpu = scx_bpf_task_cpu(p);
	u32 llc = sky_llc_of(cpu);

	if (tctx) {
		tctx->queued_at_ns = scx_bpf_now();
		sky_own_waiting_track(tctx, true);
	}

	/* Per-CPU kthreads can run nowhere else: keep them off the shared queues. */
	if ((p->flags & PF_KTHREAD) && p->nr_cpus_allowed == 1) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, sky_cfg.slice_ns, enq_flags);
		return;
	}

	scx_bpf_dsq_insert_vtime(p, sky_llc_dsq(llc), sky_cfg.slice_ns,
				 sky_vtime_for_queue(p), enq_flags);

	/* Never leave a CPU idle while work waits: wake one to take it. */
	if (scx_bpf_test_and_clear_cpu_idle(cpu))
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	else if (sky_cfg.affinity)
		sky1_queued(p);
	else
		sky_kick_idle_for(p);
}

void BPF_STRUCT_OPS(sky_dispatch, s32 cpu, struct task_struct *prev)
{
	u32 own = sky_llc_of(cpu);

	if (own >= nr_llcs)
		own = 0;
	if (sky_rescue_starving(cpu))
		return;
	if (sky_cfg.affinity ? sky1_dispatch(cpu, own) : sky_vtime_dispatch(own))
		return;
	/* Nothing else wants this CPU: let the previous task keep it. */
	if (prev && (prev->scx.flags & SCX_TASK_QUEUED))
		prev->scx.slice = sky_cfg.slice_ns;
}

void BPF_STRUCT_OPS(sky_running, struct task_struct *p)
{
	struct sky_task *tctx = sky_task_of(p);
	s32 cpu = scx_bpf_task_cpu(p);
	u64 now = scx_bpf_now();

	sky_vtime_started(p);
	if (!tctx)
		return;
	sky_stat_inc(SKY_STAT_DISPATCHES);
	sky_stat_add(SKY_STAT_WAIT_NS, sky_queued_for(tctx, now));
	tctx->queued_at_ns = 0;
	sky_own_waiting_track(tctx, false);
	if (tctx->last_cpu == cpu) {
		sky_stat_inc(SKY_STAT_LAST_CPU_HITS);
	} else if (tctx->last_cpu >= 0) {
		if (sky_llc_of(tctx->last_cpu) == sky_llc_of(cpu))
			sky_stat_inc(SKY_STAT_MOVES_IN_LLC);
		else
			sky_stat_inc(SKY_STAT_MOVES_ACROSS_LLC);
		if (sky1_decay(tctx, now) != SKY_WARM)
			sky_stat_inc(SKY_STAT_DECAYED_MOVES);
	}
	tctx->last_cpu = cpu;
}

void BPF_STRUCT_OPS(sky_stopping, struct task_struct *p, bool runnable)
{
	sky_vtime_charge(p);
}

void BPF_STRUCT_OPS(sky_runnable, struct task_struct *p, u64 enq_flags)
{
	struct sky_task *tctx = sky_task_of(p);

	if (!tctx)
		return;
	tctx->last_sleep_ns = sky_sleep_ns(tctx, scx_bpf_now());
	tctx->slept_at_ns = 0;
}

void BPF_STRUCT_OPS(sky_quiescent, struct task_struct *p, u64 deq_flags)
{
	struct sky_task *tctx = sky_task_of(p);

	if (tctx && (deq_flags & SCX_DEQ_SLEEP))
		tctx->slept_at_ns = scx_bpf_now();
}

/*
 * Checks the promise that dispatch drains every queue before a CPU idles:
 * counts CPUs going idle while a task they could run waited too long.
 */
void BPF_STRUCT_OPS(sky_update_idle, s32 cpu, bool idle)
{
	u64 now = scx_bpf_now();
	u32 llc;

	if (!idle)
		return;
	bpf_for(llc, 0, nr_llcs) {
		if (sky_head_starving(sky_llc_dsq(llc), cpu, now, false)) {
			sky_stat_inc(SKY_STAT_IDLE_WITH_WAITERS);
			return;
		}
	}
}

/*
 * Hotplug is handled in place: queues are per cache domain and any CPU
 * steals from a domain that has no CPU left. Only a CPU whose domain was
 * unknown at start-up needs the daemon to re-read the topology.
 */
void BPF_STRUCT_OPS(sky_cpu_online, s32 cpu)
{
	sky_stat_inc(SKY_STAT_HOTPLUG_EVENTS);
	if (sky_llc_of(cpu) == SKY_LLC_UNKNOWN)
		scx_bpf_exit(SCX_ECODE_ACT_RESTART | SCX_ECODE_RSN_HOTPLUG,
			     "CPU %d came online in an unknown cache domain", cpu);
}

void BPF_STRUCT_OPS(sky_cpu_offline, s32 cpu)
{
	sky_stat_inc(SKY_STAT_HOTPLUG_EVENTS);
}

s32 BPF_STRUCT_OPS(sky_init_task, struct task_struct *p, struct scx_init_task_args *args)
{
	struct sky_task *tctx;

	tctx = bpf_task_storage_get(&sky_tasks, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!tctx)
		return -ENOMEM;
	tctx->last_cpu = -1;
	tctx->waiting_for = -1;
	return 0;
}

void BPF_STRUCT_OPS(sky_enable, struct task_struct *p)
{
	sky_vtime_enable(p);
}

s32 BPF_STRUCT_OPS_SLEEPABLE(sky_init)
{
	return sky_topology_init() ?: sky_grace_init();
}

void BPF_STRUCT_OPS(sky_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(sky_ops,
	       .select_cpu	= (void *)sky_select_cpu,
	       .enqueue		= (void *)sky_enqueue,
	       .dispatch	= (void *)sky_dispatch,
	       .runnable	= (void *)sky_runnable,
	       .running		= (void *)sky_running,
	       .stopping	= (void *)sky_stopping,
	       .quiescent	= (void *)sky_quiescent,
	       .update_idle	= (void *)sky_update_idle,
	       .cpu_online	= (void *)sky_cpu_online,
	       .cpu_offline	= (void *)sky_cpu_offline,
	       .init_task	= (void *)sky_init_task,
	       .enable		= (void *)sky_enable,
	       .init		= (void *)sky_init,
	       .exit		= (void *)sky_exit,
	       .flags		= SCX_OPS_KEEP_BUILTIN_IDLE,
	       .name		= "sky");
