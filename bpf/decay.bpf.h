/* SPDX-License-Identifier: GPL-2.0 */
/*
 * decay.bpf.h - is a task's cache footprint still there?
 *
 * Two rules, chosen by sky_config.decay:
 *
 * - sleep (SKY-1 as published): the longer a task slept, the more of its
 *   data other tasks overwrote. Asleep past decay_core_ns its private cache
 *   (L2) is cold; past decay_llc_ns the last-level cache is too.
 *
 * - pressure: a cache is overwritten by what runs on it, not by the clock.
 *   Each CPU and each cache domain keeps a running total of the bytes its
 *   tasks pulled in (run time x fill rate); a task remembers both totals
 *   when it leaves. It is core-cold once others pulled more than the CPU's
 *   share of the core cache (decay_core_bytes) into its CPU, LLC-cold once
 *   they pulled more than the LLC (decay_llc_bytes) into its domain. An
 *   idle CPU adds nothing: a task asleep on an idle machine stays warm.
 *
 * Where the PMU counts LLC misses (sky_pressure_line_bytes set), misses x line
 * size replace run time x rate: pmu.bpf.h fills the totals at each context
 * switch from what was measured, and nothing else changes.
 *
 * A task whose last CPU went offline or left its cpumask is cold whatever
 * the rule: there is nothing to go back to.
 */
#ifndef __SKY_DECAY_BPF_H
#define __SKY_DECAY_BPF_H

#include "sky.bpf.h"
#include "topology.bpf.h"

enum sky_decay {
	SKY_WARM, /* cache still warm: stay on the last CPU */
	SKY_CORE_COLD, /* private cache cold: any CPU of the LLC */
	SKY_LLC_COLD, /* everything cold: any CPU */
};

/* Bytes pulled into each CPU's caches and each domain's LLC, ever. */
static u64 sky_cpu_pressure[SKY_MAX_CPUS];
static u64 sky_llc_pressure[SKY_MAX_LLCS];

static __always_inline u64 *sky_llc_pressure_of(u32 llc)
{
	return &sky_llc_pressure[llc & (SKY_MAX_LLCS - 1)];
}

/*
 * Bytes one measured LLC miss brings in (the cache line); 0 while the
 * pressure is estimated from run time. Set by the daemon when it counts
 * LLC misses.
 */
const volatile u64 sky_pressure_line_bytes;

/*
 * @cpu's caches took in @bytes. Only @cpu writes its own total; the
 * domain total is shared by its CPUs.
 */
static __always_inline void sky_pressure_fill(s32 cpu, u64 bytes)
{
	u32 llc = sky_llc_of(cpu);

	sky_cpu_pressure[sky_cpu_idx(cpu)] += bytes;
	if (llc < sky_nr_llcs)
		__sync_fetch_and_add(sky_llc_pressure_of(llc), bytes);
}

/* A task leaves @cpu: it notes the totals it leaves behind. */
static __always_inline void sky_pressure_left(struct sky_task *tctx, s32 cpu)
{
	u32 llc = sky_llc_of(cpu);

	tctx->left_cpu_pressure = sky_cpu_pressure[sky_cpu_idx(cpu)];
	tctx->left_llc_pressure = llc < sky_nr_llcs ? *sky_llc_pressure_of(llc) : 0;
}

/*
 * @p ran @ran_ns on @cpu and is leaving it: add what it pulled in (run
 * time x fill rate, unless misses are measured), then note the totals.
 */
static __always_inline void sky_pressure_add(struct sky_task *tctx, s32 cpu, u64 ran_ns)
{
	if (!sky_pressure_line_bytes)
		sky_pressure_fill(cpu, ran_ns * sky_cfg.fill_bytes_per_ms / 1000000);
	if (tctx)
		sky_pressure_left(tctx, cpu);
}

/* How long the task slept: measured to now while the sleep goes on. */
static __always_inline u64 sky_sleep_ns(const struct sky_task *tctx, u64 now)
{
	if (tctx->slept_at_ns)
		return now > tctx->slept_at_ns ? now - tctx->slept_at_ns : 0;
	return tctx->last_sleep_ns;
}

static __always_inline enum sky_decay sky_decay_by_sleep(const struct sky_task *tctx, u64 now)
{
	u64 slept = sky_sleep_ns(tctx, now);

	if (slept >= sky_cfg.decay_llc_ns)
		return SKY_LLC_COLD;
	if (slept >= sky_cfg.decay_core_ns)
		return SKY_CORE_COLD;
	return SKY_WARM;
}

static __always_inline enum sky_decay sky_decay_by_pressure(const struct sky_task *tctx)
{
	s32 cpu = tctx->last_cpu;
	u32 llc = sky_llc_of(cpu);
	u64 core, shared;

	if (llc >= sky_nr_llcs)
		return SKY_LLC_COLD;
	shared = *sky_llc_pressure_of(llc) - tctx->left_llc_pressure;
	if (shared >= sky_cfg.decay_llc_bytes)
		return SKY_LLC_COLD;
	core = sky_cpu_pressure[sky_cpu_idx(cpu)] - tctx->left_cpu_pressure;
	if (core >= sky_cfg.decay_core_bytes)
		return SKY_CORE_COLD;
	return SKY_WARM;
}

/* How cold @p's footprint on its last CPU is now. */
static __always_inline enum sky_decay sky_decay_of(const struct task_struct *p,
						   const struct sky_task *tctx, u64 now)
{
	if (tctx->last_cpu < 0 || !sky_cpu_usable(p, tctx->last_cpu))
		return SKY_LLC_COLD;
	if (sky_cfg.decay == SKY_DECAY_SLEEP)
		return sky_decay_by_sleep(tctx, now);
	return sky_decay_by_pressure(tctx);
}

#endif /* __SKY_DECAY_BPF_H */
