/* SPDX-License-Identifier: GPL-2.0 */
/*
 * topology.bpf.h - cache domains and CPUs. The daemon reads the topology
 * from sysfs and fills the read-only arrays below; here each last-level
 * cache (LLC) domain gets its own queue and a cpumask to look for idle CPUs
 * in, each CPU a queue of the tasks warm on it, and hotplug keeps a record
 * of which CPUs are offline (a task is never left waiting for one).
 */
#ifndef __SKY_TOPOLOGY_BPF_H
#define __SKY_TOPOLOGY_BPF_H

#include "sky.bpf.h"

const volatile u32 sky_nr_llcs = 1;
const volatile u32 sky_nr_cpus = 1;
const volatile u32 sky_cpu_llc[SKY_MAX_CPUS];
/*
 * The CPUs of LLC l are sky_llc_cpu_list[sky_llc_start[l] .. sky_llc_start[l + 1]).
 * sky_llc_start is twice as long as needed so a mask bounds every index.
 */
const volatile u32 sky_llc_cpu_list[SKY_MAX_CPUS];
const volatile u32 sky_llc_start[2 * SKY_MAX_LLCS];

/* 1 for a CPU that is offline; the daemon fills it, hotplug keeps it. */
u8 sky_offline_cpus[SKY_MAX_CPUS];
/* Online CPUs per domain; the daemon fills it, hotplug keeps it. */
s32 sky_llc_online[SKY_MAX_LLCS];

struct sky_llc_mask {
	struct bpf_cpumask __kptr *cpus;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SKY_MAX_LLCS);
	__type(key, u32);
	__type(value, struct sky_llc_mask);
} sky_llc_masks SEC(".maps");

/*
 * Masks keep the verifier sure of array bounds (the sizes are powers of 2).
 * The barrier keeps clang from dropping the mask where an earlier range
 * check makes it redundant in C: the verifier may not see that check on
 * the register the address is computed from.
 */
static __always_inline u32 sky_cpu_idx(s32 cpu)
{
	u32 i = cpu;

	barrier_var(i);
	return i & (SKY_MAX_CPUS - 1);
}

static __always_inline u32 sky_llc_of(s32 cpu)
{
	if ((u32)cpu >= SKY_MAX_CPUS)
		return SKY_LLC_UNKNOWN;
	return sky_cpu_llc[sky_cpu_idx(cpu)];
}

/* The queue of @llc; unknown domains share domain 0's queue. */
static __always_inline u64 sky_llc_dsq(u32 llc)
{
	return SKY_DSQ_LLC_BASE + (llc < sky_nr_llcs ? llc : 0);
}

/* The queue of tasks whose caches are warm on @cpu. */
static __always_inline u64 sky_cpu_dsq(s32 cpu)
{
	return SKY_DSQ_CPU_BASE + sky_cpu_idx(cpu);
}

static __always_inline bool sky_cpu_is_online(s32 cpu)
{
	return (u32)cpu < sky_nr_cpus && !sky_offline_cpus[sky_cpu_idx(cpu)];
}

/* Hotplug: @cpu goes online (@online) or offline; its state and domain count follow. */
static __always_inline void sky_cpu_set_online(s32 cpu, bool online)
{
	u32 llc = sky_llc_of(cpu);
	u8 *offline = &sky_offline_cpus[sky_cpu_idx(cpu)];

	if (*offline == !online)
		return;
	*offline = !online;
	if (llc < sky_nr_llcs)
		__sync_fetch_and_add(&sky_llc_online[llc & (SKY_MAX_LLCS - 1)], online ? 1 : -1);
}

/*
 * Is the CPU running this program on its way offline (ops.cpu_offline has
 * run)? No kick or timer may be started from it: both go through an
 * irq_work queued on this CPU, and one queued once the CPU has run its
 * last irq_works never runs. Seen on 7.3 under TCG: the CPU's kick
 * irq_work stayed busy, later kicks from it were lost, the bound alarm
 * with them, and unloading the scheduler waited for it forever
 * (free_kick_syncs).
 */
static __always_inline bool sky_cpu_here_leaving(void)
{
	return !sky_cpu_is_online(bpf_get_smp_processor_id());
}

/* May @p run on @cpu now: online and in its cpumask. */
static __always_inline bool sky_cpu_usable(const struct task_struct *p, s32 cpu)
{
	return sky_cpu_is_online(cpu) && bpf_cpumask_test_cpu(cpu, p->cpus_ptr);
}

static __always_inline const struct cpumask *sky_llc_cpus(u32 llc)
{
	struct sky_llc_mask *m = bpf_map_lookup_elem(&sky_llc_masks, &llc);

	return m && m->cpus ? (const struct cpumask *)m->cpus : NULL;
}

static __always_inline u32 sky_llc_first(u32 llc)
{
	return llc < sky_nr_llcs ? sky_llc_start[llc & (2 * SKY_MAX_LLCS - 1)] : 0;
}

/* Number of CPUs in @llc; 0 for an unknown domain. */
static __always_inline u32 sky_llc_size(u32 llc)
{
	if (llc >= sky_nr_llcs)
		return 0;
	return sky_llc_start[(llc + 1) & (2 * SKY_MAX_LLCS - 1)] - sky_llc_first(llc);
}

/* The i-th CPU of @llc, or -1 past its end. */
static __always_inline s32 sky_llc_cpu(u32 llc, u32 i)
{
	if (i >= sky_llc_size(llc))
		return -1;
	return sky_llc_cpu_list[sky_cpu_idx(sky_llc_first(llc) + i)];
}

/*
 * Claims an idle CPU among @cpus, a whole idle core first so the task does
 * not share a core's caches and pipeline with a busy sibling. -1 if none.
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
 * Claims an idle CPU @p may use in @llc, or (with @anywhere) any idle CPU
 * @p may use, its own domain first. -1 if none. A task with a restricted
 * cpumask skips the domain preference: the domain's mask would offer CPUs
 * it may not use.
 */
static __always_inline s32 sky_claim_idle_for(const struct task_struct *p, u32 llc, bool anywhere)
{
	s32 cpu = -1;

	if (sky_task_is_free(p))
		cpu = sky_claim_idle_in(sky_llc_cpus(llc));
	if (cpu < 0 && (anywhere || !sky_task_is_free(p)))
		cpu = sky_claim_idle_in(p->cpus_ptr);
	return cpu;
}

/* Is any CPU idle right now? Decides whether waiting tasks need an alarm. */
static __always_inline bool sky_any_idle(void)
{
	const struct cpumask *idle = scx_bpf_get_idle_cpumask();
	bool any = !bpf_cpumask_empty(idle);

	scx_bpf_put_idle_cpumask(idle);
	return any;
}

/* Creates the queues: one per cache domain, one per CPU, the rescue queue. */
static __always_inline s32 sky_topology_init(void)
{
	u32 llc, cpu;
	s32 err;

	err = scx_bpf_create_dsq(SKY_DSQ_RESCUE, -1);
	if (err) {
		scx_bpf_error("creating the rescue queue failed: %d", err);
		return err;
	}
	bpf_for(cpu, 0, sky_nr_cpus) {
		err = scx_bpf_create_dsq(sky_cpu_dsq(cpu), -1);
		if (err) {
			scx_bpf_error("creating the queue of CPU %u failed: %d", cpu, err);
			return err;
		}
	}
	bpf_for(llc, 0, sky_nr_llcs) {
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
		bpf_for(cpu, 0, sky_nr_cpus) {
			if (sky_cpu_llc[sky_cpu_idx(cpu)] == llc)
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
