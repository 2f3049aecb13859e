/* SPDX-License-Identifier: GPL-2.0 */
/*
 * stats.bpf.h - per-CPU event counters indexed by enum sky_stat_idx. Each
 * CPU bumps its own slot without atomics; the daemon sums the CPUs.
 */
#ifndef __SKY_STATS_BPF_H
#define __SKY_STATS_BPF_H

#include "sky.bpf.h"

struct sky_stat_row {
	u64 counters[SKY_NR_STATS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct sky_stat_row);
} sky_stats SEC(".maps");

static __always_inline void sky_stat_add(enum sky_stat_idx idx, u64 value)
{
	u32 zero = 0;
	struct sky_stat_row *row = bpf_map_lookup_elem(&sky_stats, &zero);

	if (row && idx < SKY_NR_STATS)
		row->counters[idx] += value;
}

static __always_inline void sky_stat_inc(enum sky_stat_idx idx)
{
	sky_stat_add(idx, 1);
}

#endif /* __SKY_STATS_BPF_H */
