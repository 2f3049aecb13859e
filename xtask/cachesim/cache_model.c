// SPDX-License-Identifier: GPL-2.0
/*
 * Set-associative LRU caches and the per-core / per-socket hierarchy of
 * the sky_cachesim plugin. See cache_model.h.
 */
#include "cache_model.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ASSOC 64
#define MAX_LINE 4096
#define MIN_LINE 4

static bool power_of_two(uint64_t v)
{
	return v && !(v & (v - 1));
}

static uint32_t log2_of(uint64_t v)
{
	uint32_t s = 0;

	while (v > 1) {
		v >>= 1;
		s++;
	}
	return s;
}

/* "32K", "8M", "512": bytes, or -1 if it is not a number. */
static int64_t parse_size(const char *text, size_t len)
{
	uint64_t v = 0, unit = 1;
	size_t i, digits = len;

	if (!len)
		return -1;
	if (text[len - 1] == 'K' || text[len - 1] == 'k')
		unit = 1024, digits--;
	else if (text[len - 1] == 'M' || text[len - 1] == 'm')
		unit = 1024 * 1024, digits--;
	if (!digits || digits > 12)
		return -1;
	for (i = 0; i < digits; i++) {
		if (text[i] < '0' || text[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(text[i] - '0');
	}
	return (int64_t)(v * unit);
}

int cache_geom_check(const struct cache_geom *g, char *err, size_t errlen)
{
	if (!g->size)
		return 0;
	if (!power_of_two(g->size)) {
		snprintf(err, errlen, "size %" PRIu64 " is not a power of two",
			 g->size);
		return -1;
	}
	if (!power_of_two(g->line) || g->line < MIN_LINE ||
	    g->line > MAX_LINE) {
		snprintf(err, errlen,
			 "line %u is not a power of two from %d to %d bytes",
			 g->line, MIN_LINE, MAX_LINE);
		return -1;
	}
	if (!power_of_two(g->assoc) || g->assoc > MAX_ASSOC) {
		snprintf(err, errlen,
			 "associativity %u is not a power of two up to %d",
			 g->assoc, MAX_ASSOC);
		return -1;
	}
	if (g->size < (uint64_t)g->line * g->assoc) {
		snprintf(err, errlen,
			 "size %" PRIu64 " is smaller than one set (%u ways of %u bytes)",
			 g->size, g->assoc, g->line);
		return -1;
	}
	return 0;
}

int cache_geom_parse(const char *text, struct cache_geom *g, char *err,
		     size_t errlen)
{
	const char *c1, *c2;
	int64_t size, line, assoc;

	memset(g, 0, sizeof(*g));
	if (!strcmp(text, "off"))
		return 0;
	c1 = strchr(text, ':');
	c2 = c1 ? strchr(c1 + 1, ':') : NULL;
	if (!c1 || !c2 || strchr(c2 + 1, ':')) {
		snprintf(err, errlen,
			 "\"%s\" is not SIZE:LINE:ASSOC (e.g. 32K:64:8) or off",
			 text);
		return -1;
	}
	size = parse_size(text, (size_t)(c1 - text));
	line = parse_size(c1 + 1, (size_t)(c2 - c1 - 1));
	assoc = parse_size(c2 + 1, strlen(c2 + 1));
	if (size <= 0 || line <= 0 || assoc <= 0 || line > UINT32_MAX ||
	    assoc > UINT32_MAX) {
		snprintf(err, errlen,
			 "\"%s\": SIZE, LINE and ASSOC must be positive numbers",
			 text);
		return -1;
	}
	g->size = (uint64_t)size;
	g->line = (uint32_t)line;
	g->assoc = (uint32_t)assoc;
	return cache_geom_check(g, err, errlen);
}

int cache_sweep_parse(const char *text, struct hierarchy_geom *g, char *err,
		      size_t errlen)
{
	char one[64];
	const char *p = text;

	g->nr_sweep = 0;
	while (*p) {
		const char *plus = strchr(p, '+');
		size_t len = plus ? (size_t)(plus - p) : strlen(p);

		if (g->nr_sweep == MAX_SWEEP) {
			snprintf(err, errlen, "more than %d sizes", MAX_SWEEP);
			return -1;
		}
		if (!len || len >= sizeof(one)) {
			snprintf(err, errlen, "\"%s\" is not GEOM+GEOM+...", text);
			return -1;
		}
		memcpy(one, p, len);
		one[len] = 0;
		if (cache_geom_parse(one, &g->sweep[g->nr_sweep], err, errlen))
			return -1;
		if (!g->sweep[g->nr_sweep].size) {
			snprintf(err, errlen, "a sweep size cannot be off");
			return -1;
		}
		g->nr_sweep++;
		p += len;
		if (*p == '+' && !*++p) {
			snprintf(err, errlen, "\"%s\" ends in +", text);
			return -1;
		}
	}
	return 0;
}

void cache_geom_format(const struct cache_geom *g, char *buf, size_t len)
{
	if (!g->size)
		snprintf(buf, len, "off");
	else
		snprintf(buf, len, "%" PRIu64 ":%u:%u", g->size, g->line,
			 g->assoc);
}

int cache_init(struct cache *c, const struct cache_geom *g)
{
	uint64_t ways = g->size / g->line;

	memset(c, 0, sizeof(*c));
	c->geom = *g;
	c->line_shift = log2_of(g->line);
	c->set_mask = ways / g->assoc - 1;
	c->tag = calloc(ways, sizeof(*c->tag));
	c->used = calloc(ways, sizeof(*c->used));
	if (!c->tag || !c->used) {
		cache_free(c);
		return -ENOMEM;
	}
	return 0;
}

void cache_free(struct cache *c)
{
	free(c->tag);
	free(c->used);
	c->tag = c->used = NULL;
}

/* The first way of the set that holds line. */
static size_t set_base(const struct cache *c, uint64_t line)
{
	return (size_t)(line & c->set_mask) * c->geom.assoc;
}

bool cache_access(struct cache *c, uint64_t addr)
{
	uint64_t line = addr >> c->line_shift, key = line + 1;
	size_t base = set_base(c, line), victim = base;
	uint32_t w;

	c->clock++;
	for (w = 0; w < c->geom.assoc; w++) {
		size_t i = base + w;

		if (c->tag[i] == key) {
			c->used[i] = c->clock;
			return true;
		}
		/* An empty way has used 0, so it is taken before any LRU way. */
		if (c->used[i] < c->used[victim])
			victim = i;
	}
	c->tag[victim] = key;
	c->used[victim] = c->clock;
	return false;
}

bool cache_invalidate(struct cache *c, uint64_t addr)
{
	uint64_t line = addr >> c->line_shift, key = line + 1;
	size_t base = set_base(c, line);
	uint32_t w;

	for (w = 0; w < c->geom.assoc; w++) {
		if (c->tag[base + w] == key) {
			c->tag[base + w] = 0;
			c->used[base + w] = 0;
			return true;
		}
	}
	return false;
}

void cache_flush(struct cache *c)
{
	uint64_t ways = c->geom.size / c->geom.line;

	memset(c->tag, 0, ways * sizeof(*c->tag));
	memset(c->used, 0, ways * sizeof(*c->used));
}

static struct cache *caches_new(uint32_t n, const struct cache_geom *g)
{
	struct cache *cs = calloc(n, sizeof(*cs));
	uint32_t i;

	if (!cs)
		return NULL;
	for (i = 0; i < n; i++) {
		if (cache_init(&cs[i], g)) {
			while (i--)
				cache_free(&cs[i]);
			free(cs);
			return NULL;
		}
	}
	return cs;
}

static void caches_free(struct cache *cs, uint32_t n)
{
	uint32_t i;

	if (!cs)
		return;
	for (i = 0; i < n; i++)
		cache_free(&cs[i]);
	free(cs);
}

int hierarchy_init(struct hierarchy *h, const struct hierarchy_geom *g,
		   char *err, size_t errlen)
{
	static const char *const names[NR_LEVELS] = { "l1", "l2", "llc" };
	uint32_t lvl, shift = 31;

	memset(h, 0, sizeof(*h));
	h->geom = *g;
	if (!g->vcpus || !g->threads || !g->sockets ||
	    g->vcpus % (g->threads * g->sockets)) {
		snprintf(err, errlen,
			 "%u vCPUs do not split into %u sockets of cores with %u threads",
			 g->vcpus, g->sockets, g->threads);
		return -1;
	}
	if (!g->level[LEVEL_L1].size) {
		snprintf(err, errlen, "l1 cannot be off");
		return -1;
	}
	for (lvl = 0; lvl < NR_LEVELS; lvl++) {
		char why[160];

		if (cache_geom_check(&g->level[lvl], why, sizeof(why))) {
			snprintf(err, errlen, "%s: %s", names[lvl], why);
			return -1;
		}
		if (g->level[lvl].size && log2_of(g->level[lvl].line) < shift)
			shift = log2_of(g->level[lvl].line);
	}
	h->min_line_shift = shift;
	for (lvl = 0; lvl < g->nr_sweep; lvl++) {
		if (g->sweep[lvl].line != g->level[LEVEL_L1].line) {
			snprintf(err, errlen,
				 "sweep size %u has %u-byte lines; they must be L1's (%u)",
				 lvl + 1, g->sweep[lvl].line,
				 g->level[LEVEL_L1].line);
			return -1;
		}
	}
	h->cores = g->vcpus / g->threads;
	h->l1 = caches_new(h->cores, &g->level[LEVEL_L1]);
	if (g->level[LEVEL_L2].size)
		h->l2 = caches_new(h->cores, &g->level[LEVEL_L2]);
	if (g->level[LEVEL_LLC].size)
		h->llc = caches_new(g->sockets, &g->level[LEVEL_LLC]);
	for (lvl = 0; lvl < g->nr_sweep; lvl++)
		if (!(h->sweep[lvl] = caches_new(h->cores, &g->sweep[lvl])))
			break;
	if (!h->l1 || (g->level[LEVEL_L2].size && !h->l2) ||
	    (g->level[LEVEL_LLC].size && !h->llc) || lvl < g->nr_sweep) {
		hierarchy_free(h);
		snprintf(err, errlen, "out of memory for the caches");
		return -1;
	}
	return 0;
}

void hierarchy_free(struct hierarchy *h)
{
	caches_free(h->l1, h->cores);
	caches_free(h->l2, h->cores);
	caches_free(h->llc, h->geom.sockets);
	h->l1 = h->l2 = h->llc = NULL;
	for (uint32_t i = 0; i < h->geom.nr_sweep; i++) {
		caches_free(h->sweep[i], h->cores);
		h->sweep[i] = NULL;
	}
}

/* QEMU numbers vCPUs socket by socket, core by core, thread by thread. */
uint32_t hierarchy_core_of(const struct hierarchy *h, uint32_t vcpu)
{
	return (vcpu / h->geom.threads) % h->cores;
}

uint32_t hierarchy_socket_of(const struct hierarchy *h, uint32_t vcpu)
{
	return (vcpu % h->geom.vcpus) / (h->geom.vcpus / h->geom.sockets);
}

/* Write-invalidate: a store leaves the line only in the writer's caches. */
static void invalidate_others(struct hierarchy *h, uint32_t core,
			      uint32_t socket, uint64_t addr,
			      struct cache_counts *counts)
{
	uint32_t i;

	for (i = 0; i < h->cores; i++) {
		if (i == core)
			continue;
		counts->invalidations += cache_invalidate(&h->l1[i], addr);
		if (h->l2)
			counts->invalidations +=
				cache_invalidate(&h->l2[i], addr);
		/* The sweep's caches are alternatives to L1, not counted. */
		for (uint32_t s = 0; s < h->geom.nr_sweep; s++)
			cache_invalidate(&h->sweep[s][i], addr);
	}
	for (i = 0; h->llc && i < h->geom.sockets; i++) {
		if (i != socket)
			counts->invalidations +=
				cache_invalidate(&h->llc[i], addr);
	}
}

static void access_line(struct hierarchy *h, uint32_t core, uint32_t socket,
			uint64_t addr, bool store, struct cache_counts *counts)
{
	bool hit;

	counts->accesses++;
	counts->stores += store;
	for (uint32_t s = 0; s < h->geom.nr_sweep; s++)
		counts->sweep_misses[s] += !cache_access(&h->sweep[s][core], addr);
	hit = cache_access(&h->l1[core], addr);
	if (!hit) {
		counts->misses[LEVEL_L1]++;
		if (h->l2) {
			hit = cache_access(&h->l2[core], addr);
			counts->misses[LEVEL_L2] += !hit;
		}
		if (!hit && h->llc) {
			hit = cache_access(&h->llc[socket], addr);
			counts->misses[LEVEL_LLC] += !hit;
		}
	}
	if (store)
		invalidate_others(h, core, socket, addr, counts);
}

void hierarchy_access(struct hierarchy *h, uint32_t vcpu, uint64_t addr,
		      uint32_t size, bool store, struct cache_counts *counts)
{
	uint32_t core = hierarchy_core_of(h, vcpu);
	uint32_t socket = hierarchy_socket_of(h, vcpu);
	uint64_t line = addr >> h->min_line_shift;
	uint64_t last = (addr + (size ? size : 1) - 1) >> h->min_line_shift;

	for (; line <= last; line++)
		access_line(h, core, socket, line << h->min_line_shift, store,
			    counts);
}

void hierarchy_flush(struct hierarchy *h)
{
	uint32_t i;

	for (i = 0; i < h->cores; i++) {
		cache_flush(&h->l1[i]);
		if (h->l2)
			cache_flush(&h->l2[i]);
	}
	for (i = 0; h->llc && i < h->geom.sockets; i++)
		cache_flush(&h->llc[i]);
	for (uint32_t s = 0; s < h->geom.nr_sweep; s++)
		for (i = 0; i < h->cores; i++)
			cache_flush(&h->sweep[s][i]);
}
