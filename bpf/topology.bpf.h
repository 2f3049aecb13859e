/* SPDX-License-Identifier: GPL-2.0 */
/*
 * topology.bpf.h - cache domains. The daemon reads the topology from sysfs
 * and fills cpu_llc[]; here each last-level-cache (LLC) domain gets its own
 * queue (a user DSQ) and a cpumask to look for idle CPUs in.
 */
#ifndef __SKY_TOPOLOGY_BPF_H
#define __SKY_TOPOLOGY_BPF_H

#include "sky.bpf.h"

const volatile u32 nr_llcs = 1;
const volatile u32 cpu_llc[SKY_MAX_CPUS];

struct sky_llc_mask {
	struct bpf_cpumask __kptr *cpus;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SKY_MAX_LLCS);
	__type(key, u32);
	__type(value, struct sky_llc_mask);
} sky_llc_masks SEC(".maps");

static __always_inline u32 sky_llc_of(s32 cpu)
{
	u32 idx = (u32)cpu;

	if (idx >= SKY_MAX_CPUS)
		return SKY_LLC_UNKNOWN;
	/* The mask keeps the verifier sure of the bound (SKY_MAX_CPUS is 2^n). */
	return cpu_llc[idx & (SKY_MAX_CPUS - 1)];
}

/* The queue of @llc; unknown domains share domain 0's queue. */
static __always_inline u64 sky_llc_dsq(u32 llc)
{
	return SKY_DSQ_LLC_BASE + (llc < nr_llcs ? llc : 0);
}

static __always_inline const struct cpumask *sky_llc_cpus(u32 llc)
{
	struct sky_llc_mask *m = bpf_map_lookup_elem(&sky_llc_masks, &llc);

	return m && m->cpus ? (const struct cpumask *)m->cpus : NULL;
}

/*
 * Claims an idle CPU of @llc, a whole idle core first so the task does not
 * share a core's caches and pipeline with a busy sibling. Returns -1 if none.
 */
static __always_inline s32 sky_claim_idle_in(const struct cpumask *cpus)
{
	s32 cpu;

	if (!cpus)
		return -1;
	cpu = scx_bpf_pick_idle_cpu(cpus, SCX_PICK_IDLE_CORE);
	if (cpu < 0)
		cpu = scx_bpf_pick_idle_cpu(cpus, 0);
	return cpu;
}

/*
 * Claims an idle CPU for @p near @cpu: in @cpu's cache domain if @p may run
 * anywhere in it, then (with @anywhere) any CPU @p may use. -1 if none.
 */
static __always_inline s32 sky_claim_idle_near(const struct task_struct *p, s32 cpu,
					       bool anywhere)
{
	s32 idle = -1;

	if (sky_task_is_free(p))
		idle = sky_claim_idle_in(sky_llc_cpus(sky_llc_of(cpu)));
	if (idle < 0 && anywhere)
		idle = sky_claim_idle_in(p->cpus_ptr);
	return idle;
}

/* Creates one queue and one cpumask per cache domain. */
static __always_inline s32 sky_topology_init(void)
{
	u32 llc, cpu;
	s32 err;

	bpf_for(llc, 0, nr_llcs) {
		struct sky_llc_mask *m;
		struct bpf_cpumask *mask, *old;

		if (llc >= SKY_MAX_LLCS)
			break;
		err = scx_bpf_create_dsq(SKY_DSQ_LLC_BASE + llc, -1);
		if (err) {
			scx_bpf_error("creating the queue of LLC %u failed: %d", llc, err);
			return err;
		}
		mask = bpf_cpumask_create();
		if (!mask)
			return -ENOMEM;
		bpf_for(cpu, 0, SKY_MAX_CPUS) {
			if (cpu_llc[cpu] == llc)
				bpf_cpumask_set_cpu(cpu, mask);
		}
		m = bpf_map_lookup_elem(&sky_llc_masks, &llc);
		if (!m) {
			bpf_cpumask_release(mask);
			return -ENOENT;
		}
		old = bpf_kptr_xchg(&m->cpus, mask);
		if (old)
			bpf_cpumask_release(old);
	}
	return 0;
}

#endif /* __SKY_TOPOLOGY_BPF_H */
