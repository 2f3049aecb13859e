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

/* Index of the top set bit of @v (v != 0), without a loop. */
static __always_inline u32 sky_msb64(u64 v)
{
	u32 n = 0;

	if (v >> 32) {
		v >>= 32;
		n += 32;
	}
	if (v >> 16) {
		v >>= 16;
		n += 16;
	}
	if (v >> 8) {
		v >>= 8;
		n += 8;
	}
	if (v >> 4) {
		v >>= 4;
		n += 4;
	}
	if (v >> 2) {
		v >>= 2;
		n += 2;
	}
	if (v >> 1)
		n += 1;
	return n;
}

/* Counts one wait of @waited_ns in @tctx's histogram (struct sky_wait_hist). */
static __always_inline void sky_wait_record(struct sky_task *tctx, u64 waited_ns)
{
	u64 us = waited_ns / 1000;
	u32 msb, sub, bucket = 0;

	if (us) {
		msb = sky_msb64(us);
		sub = msb >= SKY_WAIT_SUB_SHIFT ? us >> (msb - SKY_WAIT_SUB_SHIFT)
						: us << (SKY_WAIT_SUB_SHIFT - msb);
		sub &= (1 << SKY_WAIT_SUB_SHIFT) - 1;
		bucket = 1 + (msb << SKY_WAIT_SUB_SHIFT) + sub;
	}
	if (bucket >= SKY_WAIT_BUCKETS)
		bucket = SKY_WAIT_BUCKETS - 1;
	tctx->waits.counts[bucket]++;
}

static __always_inline void sky_stat_inc(enum sky_stat_idx idx)
{
	sky_stat_add(idx, 1);
}

#endif /* __SKY_STATS_BPF_H */
