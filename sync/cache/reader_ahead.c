/*
 * reader_ahead.c — a reader's read-ahead (reader_int.h): once a stream has
 * run RA_AFTER bytes, ranges ahead of it fetched on detached helper
 * threads within the reader's and the pool's bounds (reader_ra_fill),
 * widened at the first read from each (reader_ra_grow), dropped by a read
 * that is not sequential (reader_ra_stop). The caller holds r->lock; a
 * helper fetches with no lock held.
 */
#include "sync/cache/reader_int.h"

#include "common/lock.h"

#include <pthread.h>
#include <stdlib.h>

void reader_ra_reset(struct reader *r)
{
	r->ra_end = 0;
	r->ra_chunk = (size_t)(RA_CHUNK_MIN < r->ra.max_bytes ? RA_CHUNK_MIN : r->ra.max_bytes);
	r->ra_win = RA_WIN_MIN < r->ra.max_bytes ? RA_WIN_MIN : r->ra.max_bytes;
	r->seq_win = WIN_MIN;
	r->seq_run = 0;
	r->pf_end = 0;
}

struct ra_job {
	struct reader *r;
	struct chunk *c;
};

static void *ra_main(void *arg)
{
	struct ra_job *j = arg;
	struct reader *r = j->r;
	struct chunk *c = j->c;
	free(j);
	mod_lock(&r->lock);
	uint64_t at = c->off;        /* fixed while FETCHING */
	size_t want = c->len;
	mod_unlock(&r->lock);

	struct reader_buf *rb = NULL;
	size_t got;
	int rc = reader_fetch(r, at, want, &rb, &got);

	mod_lock(&r->lock);
	reader_pool_landed(r->pool);
	r->ra_flight--;
	if (rc == 0) {
		R_COUNT(r, ra_ranges, 1);
		R_COUNT(r, ra_bytes, got);
	}
	c->rb = rb;
	if (c->orphan || r->closing) {
		R_COUNT(r, ra_wasted, got);
		reader_chunk_to(c, CH_FAILED);   /* counted: reader_chunk_free counts nothing more */
		reader_chunk_free(r, c);
	} else if (rc < 0) {
		reader_chunk_to(c, CH_FAILED);   /* the read that gets there fetches it again */
	} else {
		c->got = got;
		reader_chunk_to(c, CH_READY);
	}
	r->helpers--;
	pthread_cond_broadcast(&r->cv);
	mod_unlock(&r->lock);   /* r may be freed from here on */
	return NULL;
}

/* A read that is not sequential: drop what was fetched ahead and start
 * over. Caller holds the lock. */
void reader_ra_stop(struct reader *r)
{
	for (unsigned i = 0; i < RA_SLOTS; i++) {
		struct chunk *c = &r->ch[i];
		if (!c->ahead || c->state == CH_FREE)
			continue;
		if (c->state == CH_FETCHING)
			c->orphan = true;
		else
			reader_chunk_free(r, c);
	}
	reader_ra_reset(r);
}

/* The reader took its first bytes from an ahead chunk: widen. */
void reader_ra_grow(struct reader *r)
{
	if (r->ra_chunk < RA_CHUNK_MAX && r->ra_chunk * 2 <= r->ra.max_bytes)
		r->ra_chunk *= 2;
	r->ra_win *= 2;
	if (r->ra_win > r->ra.max_bytes)
		r->ra_win = r->ra.max_bytes;
}

/* Start ranges ahead of pos, a sequential reader's position, within the
 * bounds. Caller holds the lock. */
void reader_ra_fill(struct reader *r, uint64_t pos)
{
	if (r->closing || !r->ra.streams || r->seq_run < RA_AFTER || pos >= r->size)
		return;
	if (r->ra_end < pos) {       /* (re)start after what covers pos */
		uint64_t e = pos;
		const struct chunk *c;
		while (e < r->size && (c = reader_chunk_find(r, e)))
			e = c->off + (c->state == CH_READY ? c->got : c->len);
		if (r->bc && r->store)
			e = e / r->bs * r->bs;
		r->ra_end = e;
	}
	while (r->ra_end < r->size && r->ra_flight < r->ra.streams &&
	       r->ra_end - pos < r->ra_win) {
		uint64_t from = r->ra_end;
		size_t want = (size_t)(r->size - from < r->ra_chunk ? r->size - from : r->ra_chunk);
		reader_align_blocks(r, &from, &want);
		if (r->ra_held + want > r->ra.max_bytes)
			break;
		struct chunk *c = reader_chunk_slot(r, true);
		if (!c)
			break;
		if (!reader_pool_take(r->pool, want)) {
			R_COUNT(r, ra_throttled, 1);
			break;
		}
		struct ra_job *j = malloc(sizeof *j);
		reader_chunk_start(r, c, from, want, true);
		r->ra_held += want;
		r->ra_flight++;
		r->helpers++;
		pthread_attr_t a;
		pthread_t t;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		bool started = j && (*j = (struct ra_job){ r, c },
				     pthread_create(&t, &a, ra_main, j) == 0);
		pthread_attr_destroy(&a);
		if (!started) {      /* no helper: reads fetch for themselves */
			free(j);
			reader_pool_landed(r->pool);
			r->ra_flight--;
			r->helpers--;
			reader_chunk_to(c, CH_FAILED);
			reader_chunk_free(r, c);
			break;
		}
		r->ra_end = from + want;
	}
}
