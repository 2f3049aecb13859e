/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pmu.bpf.h - PMU attribution: what each task made the CPU count (cycles,
 * instructions, LLC misses, stall cycles, stores), for the daemon's
 * classifier (userspace/classify). The daemon opens the counters on every
 * CPU and puts them in sky_pmu_events; at every context switch the counts
 * since the last switch on that CPU are charged to the task that ran,
 * scaled up when the kernel multiplexed a counter (it counted for only
 * part of the time it was enabled), as perf does.
 *
 * A tracing program on sched_switch, not the scheduler's running and
 * stopping callbacks: sched_ext callbacks may not read perf events
 * (bpf_perf_event_read_value is a tracing helper). It sees every switch,
 * those of tasks of other scheduling classes too, which is what a
 * per-task count should include. Loaded only when the daemon has counters
 * to give it (sky_pmu_counters), so it costs nothing otherwise.
 *
 * Where LLC misses are counted, they also measure the cache pressure the
 * decay rule reads (decay.bpf.h): misses x line size fill the CPU's and
 * its domain's totals. The switch comes after ops.stopping, so the task
 * that ran notes the totals again here, its own misses included (they
 * are not pressure from others).
 */
#ifndef __SKY_PMU_BPF_H
#define __SKY_PMU_BPF_H

#include "sky.bpf.h"
#include "stats.bpf.h"
#include "decay.bpf.h"

/* The counters opened: bit N for slot N (enum sky_pmu_counter). */
const volatile u32 sky_pmu_counters;

/* Counter N of CPU C at index N * SKY_MAX_CPUS + C. */
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(u32));
	__uint(value_size, sizeof(u32));
	__uint(max_entries, SKY_NR_PMU *SKY_MAX_CPUS);
} sky_pmu_events SEC(".maps");

/* Each CPU's counters as read at its last switch. */
struct sky_pmu_last {
	struct bpf_perf_event_value read[SKY_NR_PMU];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct sky_pmu_last);
} sky_pmu_last SEC(".maps");

/*
 * Per-task sums. LRU: the daemon removes the entries of tasks gone, and
 * should it fall behind, the oldest go first rather than new tasks being
 * left uncounted.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SKY_CLASSED_MAX);
	__type(key, u32);
	__type(value, struct sky_task_counts);
} sky_pid_counts SEC(".maps");

/*
 * What counter @slot counted on this CPU since @last, scaled for
 * multiplexing, and @last brought up to now. 0 if it cannot be read or
 * this is its first read here.
 */
static __always_inline u64 sky_pmu_delta(u32 slot, struct bpf_perf_event_value *last)
{
	struct bpf_perf_event_value now;
	u64 count, enabled, running;
	u32 index = slot * SKY_MAX_CPUS + bpf_get_smp_processor_id();

	if (bpf_perf_event_read_value(&sky_pmu_events, index, &now, sizeof(now))) {
		sky_stat_inc(SKY_STAT_PMU_READ_ERRORS);
		return 0;
	}
	count = now.counter - last->counter;
	enabled = now.enabled - last->enabled;
	running = now.running - last->running;
	if (!last->enabled) {
		count = 0;
	} else if (!running) {
		count = 0;
	} else if (running < enabled) {
		/* 10 bits of fraction: exact enough, no overflow below 2^54. */
		count = (count * ((enabled << 10) / running)) >> 10;
	}
	*last = now;
	return count;
}

SEC("?tp_btf/sched_switch")
int BPF_PROG(sky_pmu_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct sky_task_counts fresh = {}, *sums;
	struct sky_pmu_last *last;
	u64 delta[SKY_NR_PMU] = {};
	u32 zero = 0, pid = prev->pid, slot;

	last = bpf_map_lookup_elem(&sky_pmu_last, &zero);
	if (!last)
		return 0;
	bpf_for(slot, 0, SKY_NR_PMU) {
		if (sky_pmu_counters & (1u << slot))
			delta[slot] = sky_pmu_delta(slot, &last->read[slot]);
	}
	/* The idle task's counts belong to no one, and press on no cache. */
	if (!pid)
		return 0;
	if (sky_pressure_line_bytes && delta[SKY_PMU_LLC_MISSES]) {
		struct sky_task *tctx = sky_task_of(prev);
		s32 cpu = bpf_get_smp_processor_id();
		u64 bytes = delta[SKY_PMU_LLC_MISSES] * sky_pressure_line_bytes;

		sky_pressure_fill(cpu, bytes);
		sky_stat_add(SKY_STAT_MEASURED_FILL_BYTES, bytes);
		if (tctx)
			sky_pressure_left(tctx, cpu);
	}
	sums = bpf_map_lookup_elem(&sky_pid_counts, &pid);
	if (!sums || sums->start_time != prev->start_time) {
		fresh.start_time = prev->start_time;
		bpf_map_update_elem(&sky_pid_counts, &pid, &fresh, BPF_ANY);
		sums = bpf_map_lookup_elem(&sky_pid_counts, &pid);
		if (!sums)
			return 0;
	}
	bpf_for(slot, 0, SKY_NR_PMU)
		__sync_fetch_and_add(&sums->count[slot], delta[slot]);
	sky_stat_inc(SKY_STAT_PMU_CHARGES);
	return 0;
}

#endif /* __SKY_PMU_BPF_H */
