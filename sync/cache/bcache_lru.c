/*
 * bcache_lru.c — the block cache's policy (bcache_int.h): the segmented
 * LRU (a new block enters probation, a hit promotes it to protected, at
 * most 80 % of the clean budget), the budget (what staging leaves of
 * max_bytes), eviction to make room, bcache_trim (bcache.h), and the
 * reaping of victims: their files unlinked with no lock held, then their
 * entries taken out of the map. Callers hold bc->mu except for
 * bcache_budget_now, bcache_victims_reap and bcache_trim, which take it
 * themselves or need none.
 */
#include "sync/cache/bcache_int.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/lock.h"

void bcache_lru_push(struct bcache *bc, struct ent *e, int seg)
{
	struct lru *l = &bc->seg[seg];
	e->seg = (uint8_t)seg;
	e->prev = NULL;
	e->next = l->head;
	if (l->head)
		l->head->prev = e;
	else
		l->tail = e;
	l->head = e;
	l->bytes += e->charge;
}

void bcache_lru_unlink(struct bcache *bc, struct ent *e)
{
	struct lru *l = &bc->seg[e->seg];
	if (e->prev)
		e->prev->next = e->next;
	else
		l->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		l->tail = e->prev;
	e->prev = e->next = NULL;
	l->bytes -= e->charge;
}

/* A READY entry leaves the table's accounting: it becomes DYING (the
 * caller unlinks its file, then reaps it). */
void bcache_ent_retire(struct bcache *bc, struct ent *e)
{
	bcache_lru_unlink(bc, e);
	bc->used -= e->charge;
	bc->n_ready--;
	bcache_ent_to(e, ENT_DYING);
	if (e->warm) {
		e->warm = false;
		bc->c.warm_bytes -= e->charge;
		bc->c.warm_wasted++;
	}
}

/* The clean budget now. Called with no lock held. */
uint64_t bcache_budget_now(const struct bcache *bc)
{
	uint64_t s = bc->staged ? bc->staged(bc->staged_ctx) : 0;
	return s >= bc->max_bytes ? 0 : bc->max_bytes - s;
}

/* Evict READY entries (probation's LRU end first, then protected's) until
 * need more bytes and one more entry fit; the victims are pushed on
 * *victims for bcache_victims_reap(). false when not enough could be evicted. */
bool bcache_room_make(struct bcache *bc, uint64_t budget, uint64_t need,
		      struct ent **victims)
{
	while (bc->used + need > budget ||
	       (need && bc->nents + 1 > ENTRIES_MAX)) {
		struct ent *v = bc->seg[SEG_PROBATION].tail;
		if (!v)
			v = bc->seg[SEG_PROTECTED].tail;
		if (!v)
			return false;
		bcache_ent_retire(bc, v);
		bc->c.evictions++;
		v->vnext = *victims;
		*victims = v;
	}
	return true;
}

/* Keep the protected segment at most 80 % of the clean budget. */
void bcache_protected_cap(struct bcache *bc, uint64_t budget)
{
	uint64_t cap = budget / 5 * 4;
	struct lru *p = &bc->seg[SEG_PROTECTED];
	while (p->bytes > cap && p->tail) {
		struct ent *e = p->tail;
		bcache_lru_unlink(bc, e);
		bcache_lru_push(bc, e, SEG_PROBATION);
	}
}

/* Unlink the victims' files (no lock held), then free them. */
void bcache_victims_reap(struct bcache *bc, struct ent *victims)
{
	if (!victims)
		return;
	for (struct ent *v = victims; v; v = v->vnext) {
		char path[PATH_MAX];
		bcache_path_of(bc, &v->h, v->blk, path, sizeof path);
		unlink(path);
	}
	mod_lock(&bc->mu);
	for (struct ent *v = victims; v; v = v->vnext)
		bcache_map_remove(bc, v);
	mod_unlock(&bc->mu);
	while (victims) {
		struct ent *nx = victims->vnext;
		free(victims);
		victims = nx;
	}
}

/* A hit: move e to the most recent end of the protected segment. */
void bcache_hit_promote(struct bcache *bc, struct ent *e, uint64_t budget)
{
	bcache_lru_unlink(bc, e);
	bcache_lru_push(bc, e, SEG_PROTECTED);
	bcache_protected_cap(bc, budget);
	if (e->warm) {
		e->warm = false;
		bc->c.warm_bytes -= e->charge;
		bc->c.warm_used++;
	}
}

void bcache_trim(struct bcache *bc)
{
	struct ent *victims = NULL;
	uint64_t budget = bcache_budget_now(bc);
	mod_lock(&bc->mu);
	bcache_room_make(bc, budget, 0, &victims);
	bcache_protected_cap(bc, budget);
	mod_unlock(&bc->mu);
	bcache_victims_reap(bc, victims);
}
