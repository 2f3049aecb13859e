/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The cache model behind the sky_cachesim QEMU plugin: set-associative
 * LRU caches, a private hierarchy per core (L1, optional L2) and an
 * optional last-level cache shared by the cores of a socket, kept
 * coherent by write-invalidate. No QEMU types here, so the model is unit
 * tested on the host (cache_model_test.c) with the textbook answers.
 */
#ifndef SKY_CACHE_MODEL_H
#define SKY_CACHE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Size and line in bytes, both powers of two; assoc 1 is direct-mapped. */
struct cache_geom {
	uint64_t size;
	uint32_t line;
	uint32_t assoc;
};

struct cache {
	struct cache_geom geom;
	uint32_t line_shift;
	uint64_t set_mask;
	/* sets * assoc entries: line address + 1 (0 is an empty way) ... */
	uint64_t *tag;
	/* ... and when each way was last used, for LRU. */
	uint64_t *used;
	uint64_t clock;
};

enum cache_level { LEVEL_L1, LEVEL_L2, LEVEL_LLC, NR_LEVELS };

enum cache_space { SPACE_USER, SPACE_KERNEL, NR_SPACES };

/*
 * Extra private caches per core, simulated side by side with L1 (same
 * accesses, same line size), so one run gives a whole cache-size sweep.
 */
#define MAX_SWEEP 8

/* What one vCPU's accesses did, per address space. */
struct cache_counts {
	uint64_t accesses;
	uint64_t stores;
	/* Misses at each level; a level's accesses are the misses above it. */
	uint64_t misses[NR_LEVELS];
	/* Lines this vCPU's stores removed from other cores' or sockets' caches. */
	uint64_t invalidations;
	uint64_t sweep_misses[MAX_SWEEP];
};

struct hierarchy_geom {
	struct cache_geom level[NR_LEVELS]; /* size 0: the level is absent */
	uint32_t vcpus;
	uint32_t threads; /* SMT threads of a core share its L1 and L2 */
	uint32_t sockets; /* the cores of a socket share its LLC */
	struct cache_geom sweep[MAX_SWEEP];
	uint32_t nr_sweep;
};

struct hierarchy {
	struct hierarchy_geom geom;
	uint32_t cores;
	struct cache *l1;  /* one per core */
	struct cache *l2;  /* one per core, or NULL */
	struct cache *llc; /* one per socket, or NULL */
	struct cache *sweep[MAX_SWEEP]; /* one per core each */
	uint32_t min_line_shift;
};

/*
 * Parses "SIZE:LINE:ASSOC" (sizes may end in K or M) or "off". Returns 0,
 * or -1 with a message naming what was wrong in err.
 */
int cache_geom_parse(const char *text, struct cache_geom *geom, char *err,
		     size_t errlen);
int cache_geom_check(const struct cache_geom *geom, char *err, size_t errlen);
/* "GEOM+GEOM+...": up to MAX_SWEEP geometries, none off. */
int cache_sweep_parse(const char *text, struct hierarchy_geom *g, char *err,
		      size_t errlen);
void cache_geom_format(const struct cache_geom *geom, char *buf, size_t len);

int cache_init(struct cache *c, const struct cache_geom *geom);
void cache_free(struct cache *c);
/* Looks the byte address up; fills it on a miss. Returns true on a hit. */
bool cache_access(struct cache *c, uint64_t addr);
/* Drops the line holding addr; true if it was there. */
bool cache_invalidate(struct cache *c, uint64_t addr);
void cache_flush(struct cache *c);

int hierarchy_init(struct hierarchy *h, const struct hierarchy_geom *geom,
		   char *err, size_t errlen);
void hierarchy_free(struct hierarchy *h);
/*
 * One data access of size bytes at physical address addr by vcpu, split
 * at line boundaries; counted into counts.
 */
void hierarchy_access(struct hierarchy *h, uint32_t vcpu, uint64_t addr,
		      uint32_t size, bool store, struct cache_counts *counts);
void hierarchy_flush(struct hierarchy *h);
uint32_t hierarchy_core_of(const struct hierarchy *h, uint32_t vcpu);
uint32_t hierarchy_socket_of(const struct hierarchy *h, uint32_t vcpu);

#endif
