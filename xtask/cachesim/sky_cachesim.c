// SPDX-License-Identifier: GPL-2.0
/*
 * sky_cachesim: a QEMU TCG plugin that feeds every guest data access, by
 * physical address, to the cache model (cache_model.c) and counts
 * accesses and misses per vCPU, address space (user/kernel) and level,
 * over phases the guest marks.
 *
 * Built by xtask (xtask/src/cachesim.rs) against the plugin API header of
 * the QEMU installed (API version 1, QEMU 7.2). Arguments, as qemu's
 * -plugin sub-options:
 *   out=FILE           where the counts go (required)
 *   l1=, l2=, llc=     SIZE:LINE:ASSOC or off (l1 per core, l2 per core,
 *                      llc per socket)
 *   threads=N          SMT threads per core (they share L1 and L2)
 *   sockets=N          sockets (their cores share one LLC)
 *   sweep=G+G+...      up to 8 more private caches per core, each seeing
 *                      the same accesses as L1 (same line size): a
 *                      cache-size sweep in one run
 *   always=on          model every access from boot (default: only from a
 *                      warm or begin marker to the end marker)
 *
 * Phase markers: `nopl 0x5CA1000K(%rax)` (bytes 0F 1F 80 and the
 * displacement), a no-op on any x86-64 CPU, spotted at translation. K=1
 * begins a phase (the counters restart), K=2 ends it (its counts are
 * written out), K=3 empties every cache, K=4 starts modelling without
 * counting (to warm the caches before a phase). Phases are numbered by
 * the plugin in the order they begin.
 *
 * Between phases the memory callbacks return at once: modelling every
 * access makes the guest ~25 times slower, which booting and loading BPF
 * schedulers need not pay. (The callbacks stay registered: dropping them
 * with qemu_plugin_reset re-translates all code, and QEMU 7.2 then calls
 * freed callback lists, its bug #1381.) The caches see nothing while idle,
 * so modelling resumes with them empty: a phase's first accesses are
 * compulsory misses.
 *
 * The callbacks keep no locks: the VM runs TCG with thread=single (and
 * -icount implies it), so they never run concurrently.
 *
 * Not seen: instruction fetches (data caches only), page-table walks and
 * device DMA, which QEMU does not report to plugins.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

#include "cache_model.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define MARKER_LEN 7
#define MARKER_MAGIC 0x5CA1u
enum marker { MARK_BEGIN = 1, MARK_END = 2, MARK_FLUSH = 3, MARK_WARM = 4 };

/* x86-64 kernels live in the upper half of the canonical address space. */
#define KERNEL_HALF 0xffff800000000000ull

static struct hierarchy model;
static uint32_t vcpus;
/* [vcpu][space] */
static struct cache_counts *counts;
static uint64_t *insns;
static uint64_t unmapped;
static uint64_t phase_seq;
static bool in_phase;
static FILE *out;
/* Whether accesses are modelled now; always=on models them from boot. */
static bool modelling, always;

/* Turns the model on or off; from off, the caches start empty. */
static void set_modelling(bool on)
{
	on |= always;
	if (on && !modelling)
		hierarchy_flush(&model);
	modelling = on;
}

static uint32_t vcpu_slot(unsigned int vcpu_index)
{
	return vcpu_index < vcpus ? vcpu_index : vcpus - 1;
}

static void on_mem(unsigned int vcpu_index, qemu_plugin_meminfo_t info,
		   uint64_t vaddr, void *udata)
{
	struct qemu_plugin_hwaddr *hw;
	uint32_t vcpu = vcpu_slot(vcpu_index);
	int space = vaddr >= KERNEL_HALF ? SPACE_KERNEL : SPACE_USER;

	(void)udata;
	if (!modelling)
		return;
	hw = qemu_plugin_get_hwaddr(info, vaddr);
	if (!hw || qemu_plugin_hwaddr_is_io(hw)) {
		unmapped++;
		return;
	}
	hierarchy_access(&model, vcpu, qemu_plugin_hwaddr_phys_addr(hw),
			 1u << qemu_plugin_mem_size_shift(info),
			 qemu_plugin_mem_is_store(info),
			 &counts[vcpu * NR_SPACES + space]);
}

/* udata: the block's instruction count << 1 | 1 if it is kernel code. */
static void on_tb(unsigned int vcpu_index, void *udata)
{
	uintptr_t v = (uintptr_t)udata;

	if (!modelling)
		return;
	insns[vcpu_slot(vcpu_index) * NR_SPACES + (v & 1)] += v >> 1;
}

/* " sweep_misses=A+B+..." when a sweep is simulated, else nothing. */
static void write_sweep(const struct cache_counts *c)
{
	uint32_t i;

	for (i = 0; i < model.geom.nr_sweep; i++)
		fprintf(out, "%s%" PRIu64, i ? "+" : " sweep_misses=",
			c->sweep_misses[i]);
}

static void write_phase(const char *how)
{
	static const char *const space_names[NR_SPACES] = { "user", "kernel" };
	uint32_t v;
	int s;

	for (v = 0; v < vcpus; v++) {
		for (s = 0; s < NR_SPACES; s++) {
			const struct cache_counts *c = &counts[v * NR_SPACES + s];

			fprintf(out,
				"cachesim-counts phase=%" PRIu64
				" vcpu=%u space=%s insns=%" PRIu64
				" accesses=%" PRIu64 " stores=%" PRIu64
				" l1_misses=%" PRIu64 " l2_misses=%" PRIu64
				" llc_misses=%" PRIu64
				" invalidations=%" PRIu64,
				phase_seq, v, space_names[s],
				insns[v * NR_SPACES + s], c->accesses,
				c->stores, c->misses[LEVEL_L1],
				c->misses[LEVEL_L2], c->misses[LEVEL_LLC],
				c->invalidations);
			write_sweep(c);
			fputc('\n', out);
		}
	}
	fprintf(out, "cachesim-end phase=%" PRIu64 " how=%s unmapped=%" PRIu64 "\n",
		phase_seq, how, unmapped);
	fflush(out);
}

static void restart_counts(void)
{
	memset(counts, 0, sizeof(*counts) * vcpus * NR_SPACES);
	memset(insns, 0, sizeof(*insns) * vcpus * NR_SPACES);
	unmapped = 0;
}

static void on_marker(unsigned int vcpu_index, void *udata)
{
	switch ((uintptr_t)udata) {
	case MARK_BEGIN:
		if (in_phase)
			write_phase("restarted");
		set_modelling(true);
		phase_seq++;
		in_phase = true;
		restart_counts();
		fprintf(out, "cachesim-begin phase=%" PRIu64 " vcpu=%u\n",
			phase_seq, vcpu_index);
		fflush(out);
		break;
	case MARK_END:
		if (in_phase)
			write_phase("marked");
		else
			fprintf(out, "cachesim-stray-end vcpu=%u\n", vcpu_index);
		in_phase = false;
		set_modelling(false);
		break;
	case MARK_FLUSH:
		hierarchy_flush(&model);
		break;
	case MARK_WARM:
		set_modelling(true);
		break;
	}
}

/* The marker's kind, or 0 if insn is not one. */
static unsigned int marker_kind(struct qemu_plugin_insn *insn)
{
	const uint8_t *b = qemu_plugin_insn_data(insn);
	uint32_t disp;

	if (qemu_plugin_insn_size(insn) != MARKER_LEN || b[0] != 0x0f ||
	    b[1] != 0x1f || b[2] != 0x80)
		return 0;
	disp = (uint32_t)b[3] | (uint32_t)b[4] << 8 | (uint32_t)b[5] << 16 |
	       (uint32_t)b[6] << 24;
	if (disp >> 16 != MARKER_MAGIC)
		return 0;
	disp &= 0xffff;
	return disp >= MARK_BEGIN && disp <= MARK_WARM ? disp : 0;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb), i;
	uintptr_t kernel = qemu_plugin_tb_vaddr(tb) >= KERNEL_HALF;

	(void)id;
	qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb, QEMU_PLUGIN_CB_NO_REGS,
					     (void *)(n << 1 | kernel));
	for (i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		unsigned int kind = marker_kind(insn);

		if (kind)
			qemu_plugin_register_vcpu_insn_exec_cb(
				insn, on_marker, QEMU_PLUGIN_CB_NO_REGS,
				(void *)(uintptr_t)kind);
		qemu_plugin_register_vcpu_mem_cb(insn, on_mem,
						 QEMU_PLUGIN_CB_NO_REGS,
						 QEMU_PLUGIN_MEM_RW, NULL);
	}
}

static void on_qemu_exit(qemu_plugin_id_t id, void *udata)
{
	(void)id;
	(void)udata;
	if (in_phase)
		write_phase("unfinished");
	fprintf(out, "cachesim-exit phases=%" PRIu64 "\n", phase_seq);
	fclose(out);
	hierarchy_free(&model);
	free(counts);
	free(insns);
}

static int parse_count(const char *name, const char *val, uint32_t *dst)
{
	char *end;
	unsigned long v = strtoul(val, &end, 10);

	if (!*val || *end || !v || v > 64) {
		fprintf(stderr, "sky_cachesim: %s=%s is not a number from 1 to 64\n",
			name, val);
		return -1;
	}
	*dst = (uint32_t)v;
	return 0;
}

static int parse_args(int argc, char **argv, struct hierarchy_geom *g,
		      const char **path)
{
	static const char *const level_names[NR_LEVELS] = { "l1", "l2", "llc" };
	char err[200];
	int i, l;

	for (i = 0; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		const char *val;
		size_t len;

		if (!eq) {
			fprintf(stderr, "sky_cachesim: argument \"%s\" is not NAME=VALUE\n",
				argv[i]);
			return -1;
		}
		len = (size_t)(eq - argv[i]);
		val = eq + 1;
		for (l = 0; l < NR_LEVELS; l++) {
			if (strlen(level_names[l]) == len &&
			    !strncmp(argv[i], level_names[l], len))
				break;
		}
		if (l < NR_LEVELS) {
			if (cache_geom_parse(val, &g->level[l], err, sizeof(err))) {
				fprintf(stderr, "sky_cachesim: %s: %s\n",
					level_names[l], err);
				return -1;
			}
		} else if (len == 5 && !strncmp(argv[i], "sweep", 5)) {
			if (cache_sweep_parse(val, g, err, sizeof(err))) {
				fprintf(stderr, "sky_cachesim: sweep: %s\n", err);
				return -1;
			}
		} else if (len == 6 && !strncmp(argv[i], "always", 6)) {
			if (!qemu_plugin_bool_parse("always", val, &always)) {
				fprintf(stderr, "sky_cachesim: always=%s is not on or off\n",
					val);
				return -1;
			}
		} else if (len == 3 && !strncmp(argv[i], "out", 3)) {
			*path = val;
		} else if (len == 7 && !strncmp(argv[i], "threads", 7)) {
			if (parse_count("threads", val, &g->threads))
				return -1;
		} else if (len == 7 && !strncmp(argv[i], "sockets", 7)) {
			if (parse_count("sockets", val, &g->sockets))
				return -1;
		} else {
			fprintf(stderr,
				"sky_cachesim: unknown argument \"%s\" (out, l1, l2, llc, threads, sockets, sweep, always)\n",
				argv[i]);
			return -1;
		}
	}
	if (!*path || !**path) {
		fprintf(stderr, "sky_cachesim: out=FILE is required\n");
		return -1;
	}
	return 0;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
					   const qemu_info_t *info, int argc,
					   char **argv)
{
	struct hierarchy_geom g = { .threads = 1, .sockets = 1 };
	const char *path = NULL;
	char err[200], text[NR_LEVELS][64];
	int l;

	if (!info->system_emulation) {
		fprintf(stderr, "sky_cachesim: needs system emulation\n");
		return -1;
	}
	cache_geom_parse("32K:64:8", &g.level[LEVEL_L1], err, sizeof(err));
	if (parse_args(argc, argv, &g, &path))
		return -1;
	vcpus = (uint32_t)info->system.max_vcpus;
	g.vcpus = vcpus;
	if (hierarchy_init(&model, &g, err, sizeof(err))) {
		fprintf(stderr, "sky_cachesim: %s\n", err);
		return -1;
	}
	counts = calloc((size_t)vcpus * NR_SPACES, sizeof(*counts));
	insns = calloc((size_t)vcpus * NR_SPACES, sizeof(*insns));
	out = fopen(path, "w");
	if (!counts || !insns || !out) {
		fprintf(stderr, "sky_cachesim: cannot open %s or allocate counters\n",
			path);
		return -1;
	}
	for (l = 0; l < NR_LEVELS; l++)
		cache_geom_format(&g.level[l], text[l], sizeof(text[l]));
	fprintf(out,
		"cachesim-config vcpus=%u threads=%u sockets=%u l1=%s l2=%s llc=%s",
		vcpus, g.threads, g.sockets, text[LEVEL_L1], text[LEVEL_L2],
		text[LEVEL_LLC]);
	for (l = 0; l < (int)g.nr_sweep; l++) {
		cache_geom_format(&g.sweep[l], text[0], sizeof(text[0]));
		fprintf(out, "%s%s", l ? "+" : " sweep=", text[0]);
	}
	fputc('\n', out);
	fflush(out);
	modelling = always;
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	qemu_plugin_register_atexit_cb(id, on_qemu_exit, NULL);
	return 0;
}
