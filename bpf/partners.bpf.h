/* SPDX-License-Identifier: GPL-2.0 */
/*
 * partners.bpf.h - communicating partners run side by side: the processes
 * of one gang of several (the members of a shared space, a cgroup or a
 * rule: gang.bpf.h's keys from SKY_GANG_SHARED_BASE up) exchange data,
 * and one that waits on the CPU where another runs gains no cache by it
 * (the two share their data, and what one left in that CPU's caches the
 * other is overwriting) while it loses the parallelism: a member that
 * spins for its peer's answer, or yields in a loop, holds the CPU its
 * peer waits for. SKY-1 alone kept such a pair stacked on one CPU (the
 * wakee warm there, an idle CPU leaving it for the grace and then for the
 * patience, as the CPU is not overloaded) while other CPUs idled.
 *
 * - Wakeup: a task whose previous CPU runs one of its partners takes an
 *   idle CPU near instead: that CPU's SMT sibling (which shares its
 *   core's caches), else any of its domain (sky_lat_idle_near), grace
 *   waived (partner_splits).
 * - Queued: an idle CPU of the domain may take a task waiting for a CPU
 *   that runs its partner at once (sky_queue_steal_from: partner_steals).
 *
 * Memory-bound gangs with a home (gang.bpf.h) already take an idle CPU at
 * home; this is for the others. Threads of one process are not partners
 * here: a process's threads are as often workers sharing nothing but an
 * address space, and SKY-1's placement is theirs. On with gangs
 * (sky_cfg.gangs).
 */
#ifndef __SKY_PARTNERS_BPF_H
#define __SKY_PARTNERS_BPF_H

#include "sky.bpf.h"
#include "stats.bpf.h"
#include "gang.bpf.h"
#include "latency.bpf.h"

/* Does @cpu run another thread of @p's gang of several processes? */
static __always_inline bool sky_partner_runs_on(const struct task_struct *p, s32 cpu)
{
	const struct sky_cpu_run *r;
	u64 key;

	if (!sky_cfg.gangs || cpu < 0)
		return false;
	r = sky_run_of(cpu);
	if (!r->pid || r->pid == p->pid)
		return false;
	key = sky_gang_key(p);
	return key >= SKY_GANG_SHARED_BASE && key == sky_gang_key_of(r->tgid);
}

/*
 * Wakeup placement of @p whose previous CPU @prev is busy: if a partner
 * runs there, an idle CPU near (claimed), else -1.
 */
static __always_inline s32 sky_partner_select(struct task_struct *p, s32 prev)
{
	s32 cpu;

	if (!sky_task_is_free(p) || !sky_partner_runs_on(p, prev))
		return -1;
	cpu = sky_lat_idle_near(p, prev);
	if (cpu >= 0)
		sky_stat_inc(SKY_STAT_PARTNER_SPLITS);
	return cpu;
}

#endif /* __SKY_PARTNERS_BPF_H */
