/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vtime.bpf.h - task priority as weighted virtual time. A task's vtime
 * advances by its run time divided by its weight (nice), queues are ordered
 * by it, and a sleeper's credit is capped so it cannot monopolise a CPU on
 * wakeup nor be starved by tasks that never sleep.
 */
#ifndef __SKY_VTIME_BPF_H
#define __SKY_VTIME_BPF_H

#include "sky.bpf.h"

/* The vtime of the most recently started task: "now" in vtime. */
static u64 sky_vtime_now;

static __always_inline u64 sky_vtime_for_queue(const struct task_struct *p)
{
	u64 credit = sky_cfg.sleeper_credit_ns;
	u64 floor = sky_vtime_now > credit ? sky_vtime_now - credit : 0;

	return p->scx.dsq_vtime > floor ? p->scx.dsq_vtime : floor;
}

static __always_inline void sky_vtime_started(const struct task_struct *p)
{
	if ((s64)(p->scx.dsq_vtime - sky_vtime_now) > 0)
		sky_vtime_now = p->scx.dsq_vtime;
}

/* Charges @p for the part of its slice it used, scaled by its weight. */
static __always_inline void sky_vtime_charge(struct task_struct *p)
{
	u64 slice = sky_cfg.slice_ns;
	u64 used = slice > p->scx.slice ? slice - p->scx.slice : 0;

	p->scx.dsq_vtime += used * 100 / (p->scx.weight ? p->scx.weight : 1);
}

static __always_inline void sky_vtime_enable(struct task_struct *p)
{
	p->scx.dsq_vtime = sky_vtime_now;
}

#endif /* __SKY_VTIME_BPF_H */
