/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gang.bpf.h - shared-cache gangs (seed 003, docs/seeds.md): the threads of a
 * memory-bound gang run in one cache domain, their home ("All share"), and
 * each domain holds one memory-bound gang while there are domains to spare
 * (Clean, not Dirty): Partial share in a Dirty domain costs > 2x CPI.
 *
 * Who is in which gang, whether it is memory-bound, and where its home is
 * are the daemon's (userspace/gangs: rules, CPI test, planner). BPF keeps
 * the threads at home:
 *
 * - sky_proc_gang: process ID -> gang key, for gangs of several processes
 *   (a shared space, a cgroup, a rule). A process not listed is a gang of
 *   its own, keyed by its process ID.
 * - sky_gang_homes: gang key -> home domain, one per memory-bound gang.
 *   A new process whose class is memory-bound (a name hint BPF matches at
 *   exec) is not there yet: it claims a provisional home at exec (or,
 *   renamed later, at its next placement), the domain with the fewest
 *   gangs homed, so the threads it makes microseconds later land there
 *   too; the daemon's next plan (100 ms) adopts it, and confirms or moves
 *   it.
 * - sky_llc_gangs: gangs homed per domain, published with each plan,
 *   counted up here by provisional claims and down when a homed process
 *   exits, so claims between two plans spread over the domains.
 *
 * Placement: a homed thread takes its previous CPU if it is idle and at
 * home, else an idle CPU at home; else it waits in its home's domain queue,
 * which every CPU there serves. Another domain's CPU takes it only after
 * it waited gang_spill_ns (home overloaded); the starvation rescue still
 * bounds every wait. Tasks of no gang fill what is left: at a tick, a CPU
 * whose domain has a homed thread waiting moves a guest (a task not homed
 * there) to an idle CPU elsewhere, and a homed thread running away from
 * home goes back as soon as home has an idle CPU.
 */
#ifndef __SKY_GANG_BPF_H
#define __SKY_GANG_BPF_H

#include "sky.bpf.h"
#include "stats.bpf.h"
#include "topology.bpf.h"
#include "load.bpf.h"
#include "vtime.bpf.h"
#include "class.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SKY_GANGS_MAX);
	__type(key, u32);
	__type(value, u64);
} sky_proc_gang SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SKY_GANGS_MAX);
	__type(key, u64);
	__type(value, struct sky_gang_home);
} sky_gang_homes SEC(".maps");

/*
 * Process entries dropped here (their leader exited): when it moves, the
 * daemon checks that what it wrote is still there, so a reused process ID
 * of the same gang is written again.
 */
u64 sky_proc_gang_dropped;

/* Gangs homed in each domain (see above); may dip below 0 between plans. */
s32 sky_llc_gangs[SKY_MAX_LLCS];
/* Homed threads waiting in each domain's queue for their home. */
s32 sky_llc_gang_waiting[SKY_MAX_LLCS];

/* The gang key of process @tgid. */
static __always_inline u64 sky_gang_key_of(u32 tgid)
{
	u64 *gang = bpf_map_lookup_elem(&sky_proc_gang, &tgid);

	return gang ? *gang : (u64)tgid;
}

static __always_inline u64 sky_gang_key(const struct task_struct *p)
{
	return sky_gang_key_of(p->tgid);
}

/*
 * Does process @tgid belong to a memory-bound gang homed in @cpu's domain?
 * (For a CPU's running task, known by its process ID only.)
 */
static __always_inline bool sky_gang_at_home(u32 tgid, s32 cpu)
{
	struct sky_gang_home *h;
	u64 key;

	if (!sky_cfg.gangs)
		return false;
	key = sky_gang_key_of(tgid);
	h = bpf_map_lookup_elem(&sky_gang_homes, &key);
	return h && h->llc == sky_llc_of(cpu);
}

/*
 * The domain with the fewest gangs homed, then the least load, among those
 * with a CPU online; SKY_LLC_UNKNOWN if none.
 */
__noinline u32 sky_gang_pick_home(void)
{
	u32 best = SKY_LLC_UNKNOWN, best_load = 0, llc, load;
	s32 fewest = 0, n;

	bpf_for(llc, 0, SKY_MAX_LLCS) {
		if (llc >= sky_nr_llcs)
			break;
		if (sky_llc_online[llc] <= 0)
			continue;
		n = sky_llc_gangs[llc];
		if (n < 0)
			n = 0;
		load = sky_llc_load_of(llc);
		if (best == SKY_LLC_UNKNOWN || n < fewest || (n == fewest && load < best_load)) {
			best = llc;
			fewest = n;
			best_load = load;
		}
	}
	return best;
}

/* Claims a provisional home for process gang @key; the home it has then. */
static __always_inline u32 sky_gang_claim(u64 key)
{
	struct sky_gang_home home = { .planned = 0 }, *h;

	home.llc = sky_gang_pick_home();
	if (home.llc == SKY_LLC_UNKNOWN)
		return SKY_LLC_UNKNOWN;
	home.since_ns = bpf_ktime_get_ns();
	/* Threads of one process race here: the first claim wins. */
	if (!bpf_map_update_elem(&sky_gang_homes, &key, &home, BPF_NOEXIST)) {
		__sync_fetch_and_add(&sky_llc_gangs[home.llc & (SKY_MAX_LLCS - 1)], 1);
		sky_stat_inc(SKY_STAT_GANG_PROVISIONAL);
		return home.llc;
	}
	h = bpf_map_lookup_elem(&sky_gang_homes, &key);
	return h ? h->llc : SKY_LLC_UNKNOWN;
}

/*
 * The home domain of @p's gang, or SKY_LLC_UNKNOWN: gangs off, a task
 * pinned by its cpumask, no memory-bound gang, or a home gone offline.
 * With @claim, a memory-bound process with no entry yet claims one.
 */
static __always_inline u32 sky_gang_home_of(const struct task_struct *p, bool claim)
{
	struct sky_gang_home *h;
	u64 key;
	u32 llc;

	if (!sky_cfg.gangs || !sky_task_is_free(p) || (p->flags & PF_KTHREAD))
		return SKY_LLC_UNKNOWN;
	key = sky_gang_key(p);
	h = bpf_map_lookup_elem(&sky_gang_homes, &key);
	if (h)
		llc = h->llc;
	else if (claim && sky_cfg.gang_by_class && key < SKY_GANG_SHARED_BASE &&
		 sky_class_of(p) == SKY_CLASS_MEMORY_BOUND)
		llc = sky_gang_claim(key);
	else
		return SKY_LLC_UNKNOWN;
	if (llc >= sky_nr_llcs || sky_llc_online[llc & (SKY_MAX_LLCS - 1)] <= 0)
		return SKY_LLC_UNKNOWN;
	return llc;
}

/*
 * A process named memory-bound at exec claims its provisional home here,
 * before it makes its threads: their first placements find it, and the
 * daemon, which learns the new name only at its next pass, adopts it
 * rather than racing the first placement to home the process itself.
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(sky_gang_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	SKY_CFG_PIN();

	sky_gang_home_of(p, true);
	return 0;
}

/*
 * Wakeup placement of a homed task: its previous CPU if idle and at home,
 * else an idle CPU at home (*@direct set, the CPU claimed). With no CPU
 * free at home it returns @prev and leaves the queue to sky_gang_enqueue.
 * -1 if @p has no home.
 */
static __always_inline s32 sky_gang_select(struct task_struct *p, s32 prev, bool *direct)
{
	u32 home = sky_gang_home_of(p, true);
	s32 cpu;

	*direct = false;
	if (home == SKY_LLC_UNKNOWN)
		return -1;
	if (sky_llc_of(prev) == home && sky_cpu_usable(p, prev) &&
	    scx_bpf_test_and_clear_cpu_idle(prev)) {
		*direct = true;
		return prev;
	}
	cpu = sky_claim_idle_in(sky_llc_cpus(home));
	if (cpu >= 0)
		*direct = true;
	return cpu >= 0 ? cpu : prev;
}

/* @tctx's task no longer waits in a domain queue for its home. */
static __always_inline void sky_gang_stop_waiting(struct sky_task *tctx)
{
	s32 llc = tctx->gang_waiting_llc;

	if (llc < 0)
		return;
	tctx->gang_waiting_llc = -1;
	__sync_fetch_and_add(&sky_llc_gang_waiting[llc & (SKY_MAX_LLCS - 1)], -1);
}

/*
 * Queues a homed task: on an idle CPU at home if there is one, else in its
 * home's domain queue. False if @p has no home (SKY-1 places it).
 */
static __always_inline bool sky_gang_enqueue(struct task_struct *p, struct sky_task *tctx,
					     u64 enq_flags)
{
	u32 home;
	s32 idle;

	if (!tctx)
		return false;
	home = sky_gang_home_of(p, true);
	if (home == SKY_LLC_UNKNOWN)
		return false;
	idle = sky_claim_idle_in(sky_llc_cpus(home));
	if (idle >= 0) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | idle, sky_cfg.slice_ns, enq_flags);
		scx_bpf_kick_cpu(idle, SCX_KICK_IDLE);
		return true;
	}
	scx_bpf_dsq_insert_vtime(p, sky_llc_dsq(home), sky_cfg.slice_ns,
				 sky_queue_key(p, tctx, sky_vframe_llc(home)), enq_flags);
	if (tctx->gang_waiting_llc < 0) {
		tctx->gang_waiting_llc = home;
		__sync_fetch_and_add(&sky_llc_gang_waiting[home & (SKY_MAX_LLCS - 1)], 1);
	}
	return true;
}

/*
 * How long until a CPU of another domain than @cpu's may take @tctx's task
 * from its home's queue (@home, from sky_gang_home_of()): gang_spill_ns
 * after it was queued. 0 for a task not homed, or homed in @cpu's domain.
 */
static __always_inline u64 sky_gang_spill_left(u32 home, const struct sky_task *tctx, s32 cpu,
					       u64 now)
{
	u64 queued;

	if (home == SKY_LLC_UNKNOWN || home == sky_llc_of(cpu))
		return 0;
	queued = sky_queued_for(tctx, now);
	return queued >= sky_cfg.gang_spill_ns ? 0 : sky_cfg.gang_spill_ns - queued;
}

/* Does a homed thread wait in @llc's queue for a CPU of its home? */
static __always_inline bool sky_gang_waits_in(u32 llc)
{
	return llc < sky_nr_llcs && sky_llc_gang_waiting[llc & (SKY_MAX_LLCS - 1)] > 0 &&
	       scx_bpf_dsq_nr_queued(sky_llc_dsq(llc)) > 0;
}

/*
 * An idle CPU outside @llc that @p may use, claimed, preferring domains
 * where no homed thread waits; -1 if none.
 */
static __always_inline s32 sky_gang_room_elsewhere(struct task_struct *p, u32 llc)
{
	s32 cpu = -1, fallback = -1;
	u32 i, d;

	if (!p)
		return -1;
	bpf_for(i, 1, SKY_MAX_LLCS) {
		if (i >= sky_nr_llcs)
			break;
		d = (llc + i) % sky_nr_llcs;
		if (sky_gang_waits_in(d))
			continue;
		cpu = sky_claim_idle_in(sky_llc_cpus(d));
		if (cpu >= 0 && bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
			return cpu;
		if (cpu >= 0 && fallback < 0)
			fallback = cpu;
	}
	/* A CPU claimed but unusable by @p is kicked: it goes idle again. */
	if (fallback >= 0)
		scx_bpf_kick_cpu(fallback, SCX_KICK_IDLE);
	return -1;
}

/*
 * A tick of @p on @cpu: a homed thread away from home goes back when home
 * has an idle CPU; a guest in a domain whose gang waits for a CPU makes
 * room by moving to an idle CPU elsewhere. The move is recorded and @p's
 * slice ends; sky_gang_move makes it at the next enqueue.
 */
static __always_inline void sky_gang_tick(s32 cpu, struct task_struct *p)
{
	u32 llc = sky_llc_of(cpu), home;
	struct sky_task *tctx;
	enum sky_stat_idx stat;
	s32 d;

	if (!sky_cfg.gangs || !sky_task_is_free(p) || (p->flags & PF_KTHREAD))
		return;
	tctx = sky_task_of(p);
	if (!tctx || tctx->gang_target >= 0)
		return;
	home = sky_gang_home_of(p, false);
	if (home == llc)
		return;
	if (home != SKY_LLC_UNKNOWN) {
		d = sky_claim_idle_in(sky_llc_cpus(home));
		stat = SKY_STAT_GANG_RETURNS;
	} else {
		if (!sky_gang_waits_in(llc))
			return;
		d = sky_gang_room_elsewhere(p, llc);
		stat = SKY_STAT_GANG_EVICTIONS;
	}
	if (d < 0)
		return;
	tctx->gang_target = d;
	scx_bpf_task_set_slice(p, 0);
	sky_stat_inc(stat);
}

/* Has a tick decided to move @p (its slice must stay at zero)? */
static __always_inline bool sky_gang_moving(const struct task_struct *p)
{
	struct sky_task *tctx = sky_task_of(p);

	return tctx && tctx->gang_target >= 0;
}

/* Makes the move sky_gang_tick decided, if the target is still usable. */
static __always_inline bool sky_gang_move(struct task_struct *p, struct sky_task *tctx,
					  u64 enq_flags)
{
	s32 d = tctx ? tctx->gang_target : -1;

	if (d < 0)
		return false;
	tctx->gang_target = -1;
	if (!sky_cpu_usable(p, d)) {
		scx_bpf_kick_cpu(d, SCX_KICK_IDLE);
		return false;
	}
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | d, sky_cfg.slice_ns, enq_flags);
	scx_bpf_kick_cpu(d, SCX_KICK_IDLE);
	return true;
}

/* @p ran @ran_ns on @cpu: counted at home or away if it has a home. */
static __always_inline void sky_gang_ran(const struct task_struct *p, s32 cpu, u64 ran_ns)
{
	u32 home;

	if (!ran_ns)
		return;
	home = sky_gang_home_of(p, false);
	if (home == SKY_LLC_UNKNOWN)
		return;
	sky_stat_add(home == sky_llc_of(cpu) ? SKY_STAT_GANG_HOME_NS : SKY_STAT_GANG_AWAY_NS,
		     ran_ns);
}

/*
 * @p leaves the scheduler (it exited, or scx_sky unloads): a process
 * leader takes its process gang's home with it, so a reused process ID
 * does not inherit it.
 */
static __always_inline void sky_gang_exit(struct task_struct *p, struct sky_task *tctx)
{
	struct sky_gang_home *h;
	u32 tgid = p->tgid, llc;
	u64 key = tgid;

	if (tctx)
		sky_gang_stop_waiting(tctx);
	if (p->pid != p->tgid)
		return;
	if (!bpf_map_delete_elem(&sky_proc_gang, &tgid))
		__sync_fetch_and_add(&sky_proc_gang_dropped, 1);
	h = bpf_map_lookup_elem(&sky_gang_homes, &key);
	if (!h)
		return;
	llc = h->llc;
	if (!bpf_map_delete_elem(&sky_gang_homes, &key) && llc < sky_nr_llcs)
		__sync_fetch_and_add(&sky_llc_gangs[llc & (SKY_MAX_LLCS - 1)], -1);
}

#endif /* __SKY_GANG_BPF_H */
