/* SPDX-License-Identifier: GPL-2.0 */
/*
 * class.bpf.h - task classes (enum sky_class) as the daemon gives them:
 * a map from thread ID to class, which the daemon keeps in step with the
 * running tasks (an entry leaves with its task, so a reused ID does not
 * inherit a class). BPF only reads it; a task without an entry is of
 * unknown class and is placed as any other.
 */
#ifndef __SKY_CLASS_BPF_H
#define __SKY_CLASS_BPF_H

#include "sky.bpf.h"
#include "stats.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SKY_CLASSED_MAX);
	__type(key, u32);
	__type(value, u32);
} sky_pid_class SEC(".maps");

static __always_inline u32 sky_class_of(const struct task_struct *p)
{
	u32 pid = p->pid, *class = bpf_map_lookup_elem(&sky_pid_class, &pid);

	return class && *class < SKY_NR_CLASSES ? *class : SKY_CLASS_UNKNOWN;
}

/* @p ran @ran_ns: counted under its class. */
static __always_inline void sky_class_ran(const struct task_struct *p, u64 ran_ns)
{
	if (ran_ns)
		sky_stat_add(SKY_STAT_RAN_NS_UNKNOWN + sky_class_of(p), ran_ns);
}

#endif /* __SKY_CLASS_BPF_H */
