// SPDX-License-Identifier: GPL-2.0
/*
 * The cache model against answers known without it: strided sweeps that
 * fit a level or do not, LRU's cyclic pathology, write-invalidate
 * ping-pong, SMT threads sharing a core's caches and a socket's cores
 * sharing its LLC. Built and run by `cargo test -p xtask` (cachesim.rs);
 * prints each check and exits 1 on the first that fails.
 */
#include "cache_model.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void expect(bool ok, const char *what, double got, double want)
{
	printf("%s %s: got %.4f want %.4f\n", ok ? "ok  " : "FAIL", what, got,
	       want);
	failures += !ok;
}

static void expect_near(const char *what, double got, double want,
			double slack)
{
	expect(got >= want - slack && got <= want + slack, what, got, want);
}

static struct hierarchy_geom geom(const char *l1, const char *l2,
				  const char *llc, uint32_t vcpus,
				  uint32_t threads, uint32_t sockets)
{
	struct hierarchy_geom g = { .vcpus = vcpus,
				    .threads = threads,
				    .sockets = sockets };
	const char *text[NR_LEVELS] = { l1, l2, llc };
	char err[200];
	int i;

	for (i = 0; i < NR_LEVELS; i++) {
		if (cache_geom_parse(text[i], &g.level[i], err, sizeof(err))) {
			printf("FAIL geometry %s: %s\n", text[i], err);
			exit(1);
		}
	}
	return g;
}

static void init(struct hierarchy *h, const struct hierarchy_geom *g)
{
	char err[200];

	if (hierarchy_init(h, g, err, sizeof(err))) {
		printf("FAIL hierarchy: %s\n", err);
		exit(1);
	}
}

/* Loads every stride, of 8 bytes or the stride if smaller (none crosses
 * a line), counted into c. */
static void one_pass(struct hierarchy *h, uint32_t vcpu, uint64_t base,
		     uint64_t bytes, uint64_t stride, struct cache_counts *c)
{
	uint32_t size = stride < 8 ? (uint32_t)stride : 8;
	uint64_t off;

	for (off = 0; off < bytes; off += stride)
		hierarchy_access(h, vcpu, base + off, size, false, c);
}

/* One warm-up pass, then `passes` counted ones. */
static struct cache_counts sweep(struct hierarchy *h, uint32_t vcpu,
				 uint64_t base, uint64_t bytes,
				 uint64_t stride, int passes)
{
	struct cache_counts warm = { 0 }, counts = { 0 };
	int p;

	one_pass(h, vcpu, base, bytes, stride, &warm);
	for (p = 0; p < passes; p++)
		one_pass(h, vcpu, base, bytes, stride, &counts);
	return counts;
}

static double rate(uint64_t misses, uint64_t accesses)
{
	return accesses ? (double)misses / (double)accesses : -1.0;
}

static void sky1_direct_mapped(void)
{
	struct hierarchy_geom g = geom("512K:16:1", "off", "off", 4, 1, 1);
	struct hierarchy h;
	struct cache_counts c;

	init(&h, &g);
	c = sweep(&h, 0, 0x100000, 256 << 10, 4, 3);
	expect_near("512K direct-mapped, 256K array: no misses",
		    rate(c.misses[LEVEL_L1], c.accesses), 0.0, 0.0);
	c = sweep(&h, 1, 0x100000, 1 << 20, 4, 2);
	expect_near("512K direct-mapped, 1M array, 4 B stride: 1 in 4",
		    rate(c.misses[LEVEL_L1], c.accesses), 0.25, 0.0);
	/* Two arrays 512K apart collide in every set of a direct-mapped cache. */
	hierarchy_flush(&h);
	memset(&c, 0, sizeof(c));
	for (int i = 0; i < 1000; i++) {
		hierarchy_access(&h, 2, 0x200000 + 16 * (i % 64), 4, false, &c);
		hierarchy_access(&h, 2, 0x280000 + 16 * (i % 64), 4, false, &c);
	}
	expect_near("direct-mapped conflict: every access misses",
		    rate(c.misses[LEVEL_L1], c.accesses), 1.0, 0.0);
	hierarchy_free(&h);
}

/* SKY-1's cache-size sweep: sizes side by side see the same accesses. */
static void size_sweep(void)
{
	struct hierarchy_geom g = geom("512K:16:1", "off", "off", 2, 1, 1);
	struct hierarchy h;
	struct cache_counts c;
	char err[200];

	if (cache_sweep_parse("8K:16:1+32K:16:1+128K:16:1", &g, err,
			      sizeof(err))) {
		printf("FAIL sweep: %s\n", err);
		exit(1);
	}
	init(&h, &g);
	c = sweep(&h, 0, 0, 64 << 10, 16, 2);
	expect_near("64K array: the 512K L1 hits",
		    rate(c.misses[LEVEL_L1], c.accesses), 0.0, 0.0);
	expect_near("... 8K misses every line", rate(c.sweep_misses[0], c.accesses),
		    1.0, 0.0);
	expect_near("... 32K misses every line",
		    rate(c.sweep_misses[1], c.accesses), 1.0, 0.0);
	expect_near("... 128K hits", rate(c.sweep_misses[2], c.accesses), 0.0,
		    0.0);
	hierarchy_free(&h);
	expect(cache_sweep_parse("8K:64:1", &g, err, sizeof(err)) == 0 &&
		       hierarchy_init(&h, &g, err, sizeof(err)) != 0,
	       "a sweep size with another line size is refused", 0, 0);
	printf("     %s\n", err);
	expect(cache_sweep_parse("8K:16:1+", &g, err, sizeof(err)) != 0 &&
		       cache_sweep_parse("off", &g, err, sizeof(err)) != 0 &&
		       cache_sweep_parse("1K:16:1+1K:16:1+1K:16:1+1K:16:1+1K:16:1+1K:16:1+1K:16:1+1K:16:1+1K:16:1",
					 &g, err, sizeof(err)) != 0,
	       "malformed sweeps are refused", 0, 0);
}

static void levels(void)
{
	struct hierarchy_geom g =
		geom("32K:64:8", "256K:64:8", "2M:64:16", 2, 1, 1);
	struct hierarchy h;
	struct cache_counts c;

	init(&h, &g);
	c = sweep(&h, 0, 0, 16 << 10, 8, 4);
	expect_near("16K in L1: no L1 misses",
		    rate(c.misses[LEVEL_L1], c.accesses), 0.0, 0.0);
	c = sweep(&h, 0, 0, 128 << 10, 8, 4);
	expect_near("128K, 8 B stride: L1 misses 1 in 8",
		    rate(c.misses[LEVEL_L1], c.accesses), 0.125, 0.0);
	expect_near("128K fits L2: no L2 misses",
		    rate(c.misses[LEVEL_L2], c.misses[LEVEL_L1]), 0.0, 0.0);
	c = sweep(&h, 0, 0, 1 << 20, 64, 3);
	expect_near("1M, line stride: every L1 access misses (LRU, cyclic)",
		    rate(c.misses[LEVEL_L1], c.accesses), 1.0, 0.0);
	expect_near("1M: every L2 access misses",
		    rate(c.misses[LEVEL_L2], c.misses[LEVEL_L1]), 1.0, 0.0);
	expect_near("1M fits the LLC: no LLC misses",
		    rate(c.misses[LEVEL_LLC], c.misses[LEVEL_L2]), 0.0, 0.0);
	c = sweep(&h, 0, 0, 4 << 20, 64, 2);
	expect_near("4M: every LLC access misses",
		    rate(c.misses[LEVEL_LLC], c.misses[LEVEL_L2]), 1.0, 0.0);
	/* Just over L1: cyclic access defeats LRU entirely. */
	c = sweep(&h, 1, 0x10000000, 40 << 10, 64, 3);
	expect_near("40K in a 32K 8-way L1, line stride: all miss",
		    rate(c.misses[LEVEL_L1], c.accesses), 1.0, 0.0);
	hierarchy_free(&h);
}

static void sharing(void)
{
	/* 2 sockets x 2 cores x 2 threads, as the VM's 2x2x2. */
	struct hierarchy_geom g =
		geom("32K:64:8", "256K:64:8", "4M:64:16", 8, 2, 2);
	struct hierarchy h;
	struct cache_counts c = { 0 };

	init(&h, &g);
	expect(hierarchy_core_of(&h, 1) == 0 && hierarchy_core_of(&h, 2) == 1 &&
		       hierarchy_socket_of(&h, 3) == 0 &&
		       hierarchy_socket_of(&h, 4) == 1,
	       "vCPU 1 on core 0, 2 on core 1, 3 on socket 0, 4 on socket 1",
	       hierarchy_socket_of(&h, 4), 1);
	sweep(&h, 0, 0, 16 << 10, 64, 1);
	c = sweep(&h, 1, 0, 16 << 10, 64, 1);
	expect_near("SMT sibling finds its core's L1 warm",
		    rate(c.misses[LEVEL_L1], c.accesses), 0.0, 0.0);
	sweep(&h, 0, 0x1000000, 1 << 20, 64, 1);
	c = (struct cache_counts){ 0 };
	one_pass(&h, 2, 0x1000000, 1 << 20, 64, &c);
	expect_near("other core, same socket: L2 misses ...",
		    rate(c.misses[LEVEL_L2], c.misses[LEVEL_L1]), 1.0, 0.0);
	expect_near("... but the shared LLC hits",
		    rate(c.misses[LEVEL_LLC], c.misses[LEVEL_L2]), 0.0, 0.0);
	c = (struct cache_counts){ 0 };
	one_pass(&h, 4, 0x1000000, 1 << 20, 64, &c);
	expect_near("other socket: the LLC misses too",
		    rate(c.misses[LEVEL_LLC], c.misses[LEVEL_L2]), 1.0, 0.0);

	/* Stores by two cores to one line: each takes it from the other. */
	struct cache_counts a = { 0 }, b = { 0 };

	for (int i = 0; i < 100; i++) {
		hierarchy_access(&h, 0, 0x4000000, 8, true, &a);
		hierarchy_access(&h, 2, 0x4000000, 8, true, &b);
	}
	expect_near("write ping-pong: core 0 misses every round",
		    rate(a.misses[LEVEL_L1], a.accesses), 1.0, 0.0);
	expect_near("write ping-pong: core 1's stores invalidated 100 L1+L2 lines ...",
		    (double)b.invalidations, 200.0, 0.0);
	expect_near("... and the line never left the socket's LLC",
		    (double)(a.misses[LEVEL_LLC] + b.misses[LEVEL_LLC]), 1.0,
		    0.0);
	hierarchy_free(&h);
}

static void line_crossing(void)
{
	struct hierarchy_geom g = geom("1K:64:2", "off", "off", 1, 1, 1);
	struct hierarchy h;
	struct cache_counts c = { 0 };

	init(&h, &g);
	hierarchy_access(&h, 0, 60, 8, false, &c);
	expect_near("an 8-byte access at 60 touches two 64-byte lines",
		    (double)c.accesses, 2.0, 0.0);
	hierarchy_free(&h);
}

static void parsing(void)
{
	static const char *const bad[] = {
		"32K:64",    "32K:64:8:1", "30K:64:8", "32K:60:8", "32K:64:3",
		"32K:8192:1", "1K:64:32",   "x:64:8",   "",	    "32K::8",
	};
	struct cache_geom g;
	char err[200];
	size_t i;

	expect(!cache_geom_parse("8M:64:16", &g, err, sizeof(err)) &&
		       g.size == (8 << 20) && g.line == 64 && g.assoc == 16,
	       "8M:64:16 parses", (double)g.size, 8 << 20);
	expect(!cache_geom_parse("off", &g, err, sizeof(err)) && !g.size,
	       "off parses as absent", (double)g.size, 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = cache_geom_parse(bad[i], &g, err, sizeof(err));

		printf("     \"%s\": %s\n", bad[i], rc ? err : "accepted");
		expect(rc != 0, "a malformed geometry is refused", rc, -1);
	}
}

int main(void)
{
	sky1_direct_mapped();
	size_sweep();
	levels();
	sharing();
	line_crossing();
	parsing();
	printf("%s: %d failed\n", failures ? "FAIL" : "ok", failures);
	return failures ? 1 : 0;
}
