/* SPDX-License-Identifier: GPL-2.0 */
/*
 * class.bpf.h - task classes (enum sky_class) as the daemon gives them:
 * a map from thread ID to class, which the daemon keeps in step with the
 * running tasks (an entry leaves with its task, so a reused ID does not
 * inherit a class). BPF only reads it. A task the daemon has not looked at
 * yet (it looks every 100 ms, or every second when BPF applies every hint
 * and there is no PMU) is matched against the hints by task name here
 * (the pinned policy's, sky_config.comm_rules), so a process named at
 * exec or by PR_SET_NAME has its class from its next placement on; a task
 * neither gives a class is unknown.
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

/* A task name as read from task_struct, for the global matchers below. */
struct sky_comm {
	char name[SKY_COMM_LEN];
};

/*
 * Name hint @rule of the pinned policy (sky_config.comm_rules), or NULL
 * if there is no such rule or no name.
 */
static __always_inline const struct sky_comm_rule *sky_comm_rule(const struct sky_comm *comm,
								 u32 rule)
{
	return comm && rule < SKY_COMM_RULES_MAX ? &sky_cfg.comm_rules[rule] : NULL;
}

/*
 * Does @comm hold name hint @rule's pattern at byte @at? Global, as are
 * the callers: each loop is verified once, on its own (nested in one
 * function, the loops took the verifier past 30 s under TCG). A global
 * function takes memory of a known size, so the name travels in a struct.
 */
__noinline int sky_comm_has_at(struct sky_comm *comm, u32 at, u32 rule)
{
	const struct sky_comm_rule *r = sky_comm_rule(comm, rule);
	u32 i;

	if (!r)
		return 0;
	bpf_for(i, 0, SKY_COMM_LEN) {
		if (i >= r->len)
			return 1;
		if (at + i >= SKY_COMM_LEN ||
		    comm->name[(at + i) & (SKY_COMM_LEN - 1)] != r->pattern[i & (SKY_COMM_LEN - 1)])
			return 0;
	}
	return 1;
}

/* Does name hint @rule match @comm, @len bytes long? */
__noinline int sky_comm_matches(struct sky_comm *comm, u32 len, u32 rule)
{
	const struct sky_comm_rule *r = sky_comm_rule(comm, rule);
	u32 start;

	if (!r || r->len > len)
		return 0;
	switch (r->shape) {
	case SKY_COMM_EXACT:
		return r->len == len && sky_comm_has_at(comm, 0, rule);
	case SKY_COMM_PREFIX:
		return sky_comm_has_at(comm, 0, rule);
	case SKY_COMM_SUFFIX:
		return sky_comm_has_at(comm, len - r->len, rule);
	case SKY_COMM_CONTAINS:
		bpf_for(start, 0, SKY_COMM_LEN) {
			if (start + r->len > len)
				break;
			if (sky_comm_has_at(comm, start, rule))
				return 1;
		}
	}
	return 0;
}

/* The class the first name hint matching @comm gives, else unknown. */
__noinline u32 sky_class_by_comm(struct sky_comm *comm)
{
	u32 len = 0, i, class;

	if (!comm)
		return SKY_CLASS_UNKNOWN;
	bpf_for(i, 0, SKY_COMM_LEN) {
		if (!comm->name[i])
			break;
		len++;
	}
	bpf_for(i, 0, SKY_COMM_RULES_MAX) {
		if (i >= sky_cfg.nr_comm_rules)
			break;
		if (sky_comm_matches(comm, len, i)) {
			class = sky_cfg.comm_rules[i].class;
			return class < SKY_NR_CLASSES ? class : SKY_CLASS_UNKNOWN;
		}
	}
	return SKY_CLASS_UNKNOWN;
}

/* The daemon's class for @p, else the name hints'. */
static __always_inline u32 sky_class_of(const struct task_struct *p)
{
	struct sky_comm comm = {};
	u32 pid = p->pid, *class;

	class = bpf_map_lookup_elem(&sky_pid_class, &pid);
	if (class)
		return *class < SKY_NR_CLASSES ? *class : SKY_CLASS_UNKNOWN;
	if (!sky_cfg.nr_comm_rules ||
	    bpf_probe_read_kernel_str(comm.name, sizeof(comm.name), p->comm) <= 0)
		return SKY_CLASS_UNKNOWN;
	return sky_class_by_comm(&comm);
}

/* A task of @class ran @ran_ns: counted under its class. */
static __always_inline void sky_class_ran(u32 class, u64 ran_ns)
{
	if (ran_ns && class < SKY_NR_CLASSES)
		sky_stat_add(SKY_STAT_RAN_NS_UNKNOWN + class, ran_ns);
}

#endif /* __SKY_CLASS_BPF_H */
