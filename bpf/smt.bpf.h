/* SPDX-License-Identifier: GPL-2.0 */
/*
 * smt.bpf.h - SMT siblings and what each CPU runs, by class: the ground
 * SMT pairing stands on (SEEDS.md §2: a persistent-memory writer beside a
 * compute task). For now it counts how long PM writers ran beside each
 * kind of sibling (pm_beside_* statistics); placement does not pair yet.
 * On only while classes are fed and the machine has SMT (smt_accounting),
 * so it costs nothing otherwise.
 */
#ifndef __SKY_SMT_BPF_H
#define __SKY_SMT_BPF_H

#include "sky.bpf.h"
#include "stats.bpf.h"
#include "topology.bpf.h"
#include "class.bpf.h"

/* Each CPU's SMT sibling, -1 for none; written by the daemon. */
const volatile s32 cpu_sibling[SKY_MAX_CPUS];
const volatile u32 smt_accounting;

/* What a CPU runs: an enum sky_class value, or one of these. */
enum sky_smt_kind {
	SKY_SMT_IDLE	= SKY_NR_CLASSES,
	SKY_SMT_OTHER,
};

static u8 sky_cpu_kind[SKY_MAX_CPUS];
/* Since when the CPU's time is not yet counted. */
static u64 sky_cpu_counted_to[SKY_MAX_CPUS];

/* The pm_beside_* statistic for a sibling running @kind. */
static __always_inline u32 sky_beside_stat(u8 kind)
{
	switch (kind) {
	case SKY_CLASS_COMPUTE:
		return SKY_STAT_PM_BESIDE_COMPUTE_NS;
	case SKY_CLASS_PM_WRITER:
		return SKY_STAT_PM_BESIDE_PM_WRITER_NS;
	case SKY_SMT_IDLE:
		return SKY_STAT_PM_BESIDE_IDLE_NS;
	default:
		return SKY_STAT_PM_BESIDE_OTHER_NS;
	}
}

/*
 * Counts @cpu's time up to @now under what its sibling runs, if @cpu runs
 * a PM writer. Either sibling may count a CPU's time when it changes what
 * it runs: the interval is claimed by compare-and-swap, so none is counted
 * twice.
 */
static __always_inline void sky_smt_count(s32 cpu, u64 now)
{
	u32 i = sky_cpu_idx(cpu);
	u64 from = sky_cpu_counted_to[i];
	s32 sib = cpu_sibling[i];

	if ((s64)(now - from) <= 0 || __sync_val_compare_and_swap(&sky_cpu_counted_to[i], from, now) != from)
		return;
	if (from && sib >= 0 && sky_cpu_kind[i] == SKY_CLASS_PM_WRITER)
		sky_stat_add(sky_beside_stat(sky_cpu_kind[sky_cpu_idx(sib)]), now - from);
}

/* @cpu runs @kind from @now on. */
static __always_inline void sky_smt_set(s32 cpu, u8 kind, u64 now)
{
	s32 sib;

	if (!smt_accounting)
		return;
	sib = cpu_sibling[sky_cpu_idx(cpu)];
	sky_smt_count(cpu, now);
	if (sib >= 0)
		sky_smt_count(sib, now);
	sky_cpu_kind[sky_cpu_idx(cpu)] = kind;
}

/* @p starts on @cpu. */
static __always_inline void sky_smt_started(s32 cpu, const struct task_struct *p, u64 now)
{
	if (smt_accounting)
		sky_smt_set(cpu, sky_class_of(p), now);
}

/*
 * @p runs on @cpu (a tick): what the CPU runs is @p's class as it is now.
 * A process that names itself after it started and then runs without a
 * break gets its class here (the time not yet counted goes to the new
 * class: at most a tick too early).
 */
static __always_inline void sky_smt_restate(s32 cpu, const struct task_struct *p)
{
	if (smt_accounting)
		sky_cpu_kind[sky_cpu_idx(cpu)] = sky_class_of(p);
}

/*
 * A task of @class (as it is now) stops on @cpu: its time since the last
 * count goes to that class, and the CPU runs another class's task, or
 * none, until the next of ours starts.
 */
static __always_inline void sky_smt_stopped(s32 cpu, u32 class, u64 now)
{
	if (!smt_accounting)
		return;
	sky_cpu_kind[sky_cpu_idx(cpu)] = class;
	sky_smt_set(cpu, SKY_SMT_OTHER, now);
}

/*
 * @cpu leaves idle: for another class's task, or for ours, whose running
 * callback sets its class (whichever of the two callbacks comes first).
 */
static __always_inline void sky_smt_left_idle(s32 cpu, u64 now)
{
	if (sky_cpu_kind[sky_cpu_idx(cpu)] == SKY_SMT_IDLE)
		sky_smt_set(cpu, SKY_SMT_OTHER, now);
}

#endif /* __SKY_SMT_BPF_H */
