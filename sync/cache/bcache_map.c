/*
 * bcache_map.c — the block cache's table (bcache_int.h): a hash map from
 * (version hash, block number) to entries, its buckets doubled as the
 * chains grow, and the path of an entry's file. Callers hold bc->mu
 * (bcache_path_of needs no lock).
 */
#include "sync/cache/bcache_int.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

static size_t slot_of(const struct bcache *bc, const struct bcache_hash *h,
		      uint64_t blk)
{
	uint64_t x = h->h[1] ^ (blk * 0x9e3779b97f4a7c15ull);
	x ^= x >> 31;
	return (size_t)(x & (bc->nbuckets - 1));
}

struct ent *bcache_map_find(struct bcache *bc, const struct bcache_hash *h,
			    uint64_t blk)
{
	for (struct ent *e = bc->buckets[slot_of(bc, h, blk)]; e; e = e->hnext)
		if (e->blk == blk && e->h.h[0] == h->h[0] && e->h.h[1] == h->h[1])
			return e;
	return NULL;
}

/* Double the buckets when the chains grow long (silently keeps the old
 * ones when memory is short: chains are only longer). */
static void map_grow(struct bcache *bc)
{
	size_t n = bc->nbuckets * 2;
	struct ent **b = calloc(n, sizeof *b);
	if (!b)
		return;
	struct ent **old = bc->buckets;
	size_t on = bc->nbuckets;
	bc->buckets = b;
	bc->nbuckets = n;
	for (size_t i = 0; i < on; i++) {
		struct ent *e = old[i];
		while (e) {
			struct ent *nx = e->hnext;
			size_t s = slot_of(bc, &e->h, e->blk);
			e->hnext = b[s];
			b[s] = e;
			e = nx;
		}
	}
	free(old);
}

void bcache_map_insert(struct bcache *bc, struct ent *e)
{
	if (bc->nents >= bc->nbuckets && bc->nbuckets < ENTRIES_MAX)
		map_grow(bc);
	size_t s = slot_of(bc, &e->h, e->blk);
	e->hnext = bc->buckets[s];
	bc->buckets[s] = e;
	bc->nents++;
}

void bcache_map_remove(struct bcache *bc, struct ent *e)
{
	struct ent **pp = &bc->buckets[slot_of(bc, &e->h, e->blk)];
	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp) {
		*pp = e->hnext;
		bc->nents--;
	}
}

struct ent *bcache_ent_new(const struct bcache_hash *h, uint64_t blk)
{
	struct ent *e = calloc(1, sizeof *e);
	if (e) {
		e->h = *h;
		e->blk = blk;
	}
	return e;
}

void bcache_ent_to(struct ent *e, enum ent_state to)
{
	/* The states each state may go to (docs/design.md "Burst buffer"). */
	static const unsigned allowed[] = {
		[ENT_NEW] = 1u << ENT_READY | 1u << ENT_WRITING | 1u << ENT_DYING,
		[ENT_READY] = 1u << ENT_DYING,
		[ENT_WRITING] = 1u << ENT_READY | 1u << ENT_DYING,
		[ENT_DYING] = 1u << ENT_WRITING,
	};
	assert(allowed[e->state] & 1u << to);
	e->state = to;
}

void bcache_path_of(const struct bcache *bc, const struct bcache_hash *h,
		    uint64_t blk, char *path, size_t size)
{
	char rel[BCACHE_NAME_MAX + 4];
	bcache_name_format(h, blk, rel);
	snprintf(path, size, "%s/%s", bc->dir, rel);
}
