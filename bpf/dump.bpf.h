/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dump.bpf.h - what the kernel prints (and scx_sky relays) when it ejects
 * the scheduler: the policy generation, every queue's length, each CPU's
 * cache pressure, and per task the state placement was decided from.
 */
#ifndef __SKY_DUMP_BPF_H
#define __SKY_DUMP_BPF_H

#include "sky.bpf.h"
#include "topology.bpf.h"
#include "decay.bpf.h"
#include "bound.bpf.h"

static __always_inline void sky_dump(void)
{
	u32 llc;

	scx_bpf_dump("sky: policy generation %llu, rescue queue %d, alarm due %llu, now %llu\n",
		     sky_cfg.generation, scx_bpf_dsq_nr_queued(SKY_DSQ_RESCUE), sky_bound_due,
		     scx_bpf_now());
	bpf_for(llc, 0, sky_nr_llcs) {
		scx_bpf_dump("sky: llc %u queue %d pressure %llu\n", llc,
			     scx_bpf_dsq_nr_queued(sky_llc_dsq(llc)), *sky_llc_pressure_of(llc));
	}
}

static __always_inline void sky_dump_cpu(s32 cpu, bool idle)
{
	scx_bpf_dump("sky: cpu %d llc %u %s%s queue %d pressure %llu\n", cpu, sky_llc_of(cpu),
		     idle ? "idle" : "busy", sky_cpu_is_online(cpu) ? "" : " offline",
		     scx_bpf_dsq_nr_queued(sky_cpu_dsq(cpu)), sky_cpu_pressure[sky_cpu_idx(cpu)]);
}

static __always_inline void sky_dump_task(struct task_struct *p)
{
	struct sky_task *tctx = sky_task_of(p);
	u64 now = scx_bpf_now();

	if (!tctx)
		return;
	scx_bpf_dump("sky: last_cpu %d decay %d queued_for %llu us slept %llu us vtime %llu\n",
		     tctx->last_cpu, sky_decay_of(p, tctx, now), sky_queued_for(tctx, now) / 1000,
		     sky_sleep_ns(tctx, now) / 1000, p->scx.dsq_vtime);
}

#endif /* __SKY_DUMP_BPF_H */
