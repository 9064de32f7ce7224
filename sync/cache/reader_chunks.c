/*
 * reader_chunks.c — a reader's chunk slots (reader_int.h): the chunk that
 * holds a byte, where the next one starts, a slot for a new one (the least
 * recently used window replaced), a chunk freed (its buffer, and what the
 * pool granted it, let go), and what a sequential reader left behind
 * freed. The caller holds r->lock.
 */
#include "sync/cache/reader_int.h"

#include <assert.h>

void reader_chunk_to(struct chunk *c, enum ch_state to)
{
	/* The states each state may go to (docs/design.md "A reader's
	 * chunks"). */
	static const unsigned allowed[] = {
		[CH_FREE] = 1u << CH_FETCHING,
		[CH_FETCHING] = 1u << CH_READY | 1u << CH_FAILED | 1u << CH_FREE,
		[CH_READY] = 1u << CH_FREE,
		[CH_FAILED] = 1u << CH_FREE,
	};
	assert(allowed[c->state] & 1u << to);
	c->state = to;
}

void reader_chunk_start(struct reader *r, struct chunk *c, uint64_t off,
			size_t len, bool ahead)
{
	size_t kept = c->kept;
	reader_chunk_to(c, CH_FETCHING);
	*c = (struct chunk){ .state = CH_FETCHING, .ahead = ahead, .off = off,
			     .len = len, .tick = ++r->tick, .kept = kept };
}

/* Free a chunk that no helper fetches (its slot becomes FREE). */
void reader_chunk_free(struct reader *r, struct chunk *c)
{
	if (c->ahead) {
		if (c->state == CH_READY && !c->used)
			R_COUNT(r, ra_wasted, c->got);
		reader_pool_release(r->pool, c->len);
		r->ra_held -= c->len;
	}
	reader_pool_unkeep(r->pool, c->kept);
	reader_rbuf_put(c->rb);
	reader_chunk_to(c, CH_FREE);
	*c = (struct chunk){ .state = CH_FREE };
}

/* The chunk holding byte at: a READY one with it, else one FETCHING or
 * FAILED whose range has it; NULL: none. Caller holds the lock. */
struct chunk *reader_chunk_find(struct reader *r, uint64_t at)
{
	struct chunk *f = NULL;
	for (unsigned i = 0; i < RA_SLOTS; i++) {
		struct chunk *c = &r->ch[i];
		if (c->state == CH_FREE || c->orphan)
			continue;
		if (c->state == CH_READY) {
			if (at >= c->off && at < c->off + c->got)
				return c;
		} else if (!f && at >= c->off && at < c->off + c->len) {
			f = c;
		}
	}
	return f;
}

/* Where the first chunk starting after at begins (the object's size if
 * none): a window fetched at at stops there. Caller holds the lock. */
uint64_t reader_chunk_next(struct reader *r, uint64_t at)
{
	uint64_t n = r->size;
	for (unsigned i = 0; i < RA_SLOTS; i++) {
		const struct chunk *c = &r->ch[i];
		if (c->state != CH_FREE && !c->orphan && c->off > at && c->off < n)
			n = c->off;
	}
	return n;
}

/* A slot for a new chunk: a free one, else (or, for a sync chunk, when
 * SYNC_KEEP sync chunks are held) the least recently used sync chunk that
 * landed; NULL when every slot is busy. Caller holds the lock. */
struct chunk *reader_chunk_slot(struct reader *r, bool ahead)
{
	struct chunk *free_c = NULL, *old = NULL;
	unsigned held = 0;
	for (unsigned i = 0; i < RA_SLOTS; i++) {
		struct chunk *c = &r->ch[i];
		if (c->state == CH_FREE) {
			if (!free_c)
				free_c = c;
		} else if (!c->ahead && c->state == CH_READY) {
			held++;
			if (!old || c->tick < old->tick)
				old = c;
		}
	}
	if ((ahead || held < SYNC_KEEP) && free_c)
		return free_c;
	if (old) {
		reader_chunk_free(r, old);
		return old;
	}
	return free_c;
}

/* Free what a sequential reader at pos left TRIM_BEHIND behind. */
void reader_chunks_trim(struct reader *r, uint64_t pos)
{
	for (unsigned i = 0; i < RA_SLOTS; i++) {
		struct chunk *c = &r->ch[i];
		if ((c->state == CH_READY || c->state == CH_FAILED) &&
		    c->off + c->len + TRIM_BEHIND <= pos)
			reader_chunk_free(r, c);
	}
}
