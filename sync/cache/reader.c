/* reader.c — see reader.h: a reader's open and close, and its reads
 * (windows, pieces, the burst buffer's blocks read straight in); the
 * files below it are listed in reader_int.h.
 *
 * DESIGN: a reader holds up to RA_SLOTS chunks, each one range of the
 * object [off, off+len) in one of four states:
 *   FETCHING  a GET (or a burst-buffer read) runs for it without the lock;
 *             reads of its range wait on cv instead of sending their own
 *             (the kernel sends reads of one file from several threads);
 *   READY     buf holds got bytes (got < len: the object ended, or the
 *             burst buffer gave the first blocks and a GET then failed);
 *   FAILED    a read-ahead GET failed: the read that reaches it frees it
 *             and fetches the range itself (and so reports the error);
 *   FREE      an empty slot.
 * A read copies from READY chunks; a read no chunk covers fetches a window
 * itself (a `sync` chunk: 256 KiB doubling to 8 MiB while reads are
 * sequential, else the read rounded up to 64 KiB), at most SYNC_KEEP of
 * them kept, least recently used replaced. Read-ahead (`ahead` chunks,
 * reader_ahead.c) starts after RA_AFTER bytes read in sequence: ranges of
 * ra_chunk bytes from ra_end on, each on a detached helper thread, while
 * fewer than ra.streams are in flight, the bytes ahead of the reader are
 * under ra_win, the reader holds under ra.max_bytes of them and the pool
 * grants them. The first read from each new ahead chunk doubles ra_chunk
 * (2 → 8 MiB) and ra_win (4 MiB → ra.max_bytes), as mountpoint-s3 grows
 * its window. A read that is not sequential (reader_ra_stop) frees the
 * ahead chunks that landed, orphans those in flight (their helper frees
 * them on landing) and starts over. Chunks more than TRIM_BEHIND behind a
 * sequential reader are freed. reader_close() orphans what is in flight
 * and waits for the helpers.
 *
 * A chunk's bytes live in a struct reader_buf with a count of references: the
 * chunk holds one, and reader_read_pieces() gives one to each piece it
 * returns, so a reply is written from the chunk itself while the chunk
 * may be freed, or the reader closed, before the reply went. The last
 * reference returns the buffer to the pool's free list (at most
 * FREE_MAX_N buffers, FREE_TOTAL bytes), from which the next chunk of
 * about its size takes it: a stream does not map and fault in fresh
 * memory for every range.
 */
#include "sync/cache/reader.h"
#include "sync/cache/reader_int.h"

#include "sync/cache/bcache.h"
#include "sync/cache/pins.h"
#include "common/lock.h"
#include "common/log.h"
#include "common/stats.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct stats_def reader_stats[] = {
	STATS_COUNTER(struct reader_counters, hits, "cache", "hits"),
	STATS_COUNTER(struct reader_counters, misses, "cache", "misses"),
	STATS_COUNTER(struct reader_counters, ra_ranges, "readahead", "ranges"),
	STATS_COUNTER(struct reader_counters, ra_bytes, "readahead", "bytes"),
	STATS_COUNTER(struct reader_counters, ra_wasted, "readahead", "wasted_bytes"),
	STATS_COUNTER(struct reader_counters, ra_throttled, "readahead", "throttled"),
};

void reader_counters_init(struct reader_counters *c, struct stats *st)
{
	memset(c, 0, sizeof *c);
	stats_group_add(st, &c->grp, reader_stats,
			sizeof reader_stats / sizeof reader_stats[0], c);
}

void reader_counters_release(struct reader_counters *c)
{
	stats_group_remove(&c->grp);
}

int reader_open(const struct reader_src *src, const char *bucket,
		const char *key, const char *etag, uint64_t size,
		struct reader **out)
{
	struct reader *r = calloc(1, sizeof *r);
	if (!r)
		return -ENOMEM;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->bucket = strdup(bucket);
	r->key = strdup(key);
	if (!r->bucket || !r->key) {
		reader_close(r);
		return -ENOMEM;
	}
	snprintf(r->etag, sizeof r->etag, "%s", etag ? etag : "");
	r->s3 = src->s3;
	r->ctr = src->ctr;
	r->pool = src->pool;
	if (src->pool)
		r->ra = src->pool->c;
	else
		r->ra = (struct reader_ra_conf){ READER_RA_STREAMS, READER_RA_BYTES, 0, 0, 0 };
	if (src->bc && r->etag[0]) {
		const struct bcache_id id = { r->bucket, r->key, r->etag };
		if (src->pins && pins_pin(src->pins, &id) < 0) {
			reader_close(r);
			return -ENOMEM;
		}
		r->pins = src->pins;
		r->bc = src->bc;
		r->bs = bcache_block_size(src->bc);
		r->store = bcache_admit(src->bc, &id, size);
	}
	r->size = size;
	reader_ra_reset(r);
	*out = r;
	return 0;
}

bool reader_cold(const struct reader *r)
{
	return r->bc && !r->store;
}

void reader_close(struct reader *r)
{
	if (!r)
		return;
	mod_lock(&r->lock);
	r->closing = true;
	for (unsigned i = 0; i < RA_SLOTS; i++)
		if (r->ch[i].state == CH_FETCHING && r->ch[i].ahead)
			r->ch[i].orphan = true;
	while (r->helpers)
		pthread_cond_wait(&r->cv, &r->lock);
	for (unsigned i = 0; i < RA_SLOTS; i++)
		if (r->ch[i].state != CH_FREE)
			reader_chunk_free(r, &r->ch[i]);
	mod_unlock(&r->lock);
	if (r->pins) {
		const struct bcache_id id = { r->bucket, r->key, r->etag };
		pins_unpin(r->pins, &id);
	}
	free(r->bucket);
	free(r->key);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/* ---------- reads ---------- */

/* Does a read at off go on a sequential stream? The kernel sends a file's
 * read-ahead as several reads at once, which our threads take in any
 * order, and a read waiting for a range does not finish before later ones
 * start: so next_seq_off is the end of the furthest read begun, and a read
 * up to SEQ_BEHIND behind it is still part of the stream. */
static bool seq_near(const struct reader *r, uint64_t off)
{
	return off + SEQ_BEHIND >= r->next_seq_off && off <= r->next_seq_off + SEQ_SLACK;
}

/* Fetch the window at `at` that a read needs (no chunk has it): a sync
 * chunk other reads of its range wait for. 1: it landed, *out (with no slot
 * free: tmp, which the caller frees after copying); 0: there are no bytes
 * at `at` (the object is shorter than the index said); or an error.
 * Called and returns with the lock held; drops it for the fetch. */
static int read_fetch(struct reader *r, uint64_t at, size_t need, bool sequential,
		      struct chunk *tmp, struct chunk **out)
{
	size_t want = (need + RAND_UNIT - 1) / RAND_UNIT * RAND_UNIT;
	size_t win_was = r->seq_win;
	struct chunk *c = reader_chunk_slot(r, false);
	if (c && sequential) {
		want = r->seq_win;
		if (r->seq_win < WIN_MAX)
			r->seq_win *= 2;
	}
	if (want < need)
		want = need;
	uint64_t stop = reader_chunk_next(r, at);   /* never fetch what a chunk has */
	if (want > stop - at)
		want = (size_t)(stop - at);
	uint64_t from = at;
	reader_align_blocks(r, &from, &want);
	if (c) {
		*c = (struct chunk){ .state = CH_FREE };
		if (!reader_pool_keep(r->pool, want)) {
			/* Readers keep enough already: this read fetches
			 * what it needs (whole blocks with a burst buffer)
			 * into a chunk that goes after it. */
			c = NULL;
			r->seq_win = win_was;
			want = (need + RAND_UNIT - 1) / RAND_UNIT * RAND_UNIT;
			if (want > stop - at)
				want = (size_t)(stop - at);
			from = at;
			reader_align_blocks(r, &from, &want);
		} else {
			c->kept = want;
		}
	}
	if (!c) {
		c = tmp;
		*c = (struct chunk){ 0 };
	}
	reader_chunk_start(r, c, from, want, false);
	mod_unlock(&r->lock);
	struct reader_buf *rb = NULL;
	size_t got;
	int rc = reader_fetch(r, from, want, &rb, &got);
	mod_lock(&r->lock);
	pthread_cond_broadcast(&r->cv);
	c->rb = rb;
	if (rc < 0 || from + got <= at) {
		if (c == tmp)
			reader_rbuf_put(rb);
		else
			reader_chunk_free(r, c);
		return rc < 0 ? rc : 0;
	}
	c->got = got;
	reader_chunk_to(c, CH_READY);
	*out = c;
	return 1;
}

/* Whole blocks from off (a block boundary) on that the burst buffer
 * holds, read straight into buf, up to the first block it has not or the
 * first that len does not cover whole: its files are on a local disk whose
 * page cache and read-ahead do for them what chunks do for S3, so the
 * bytes are copied once (file -> buf), not twice (file -> chunk -> buf).
 * A read of part of a block goes the chunk way, which checks each block
 * once per window, not once per read. Blocks [pf_from, pf_to) are
 * prefetched first. No lock held. */
static size_t read_cached(struct reader *r, char *buf, size_t len, uint64_t off,
			  uint64_t pf_from, uint64_t pf_to)
{
	const struct bcache_id id = { r->bucket, r->key, r->etag };
	for (uint64_t b = pf_from; b < pf_to; b++)
		bcache_prefetch(r->bc, &id, b);
	size_t done = 0;
	while (done < len && (off + done) % r->bs == 0) {
		uint64_t at = off + done;
		size_t n = (size_t)min_sz(r->bs, r->size - at);   /* the whole block */
		/* A block that fails here is looked for again (and counted
		 * as a miss once) by the chunk path. No buf: prefetch only. */
		if (!buf || len - done < n || !bcache_has(r->bc, &id, at / r->bs) ||
		    bcache_try(r->bc, &id, at / r->bs, buf + done, n, 0) != (ssize_t)n)
			break;
		done += n;
	}
	return done;
}

/* Prefetch for a sequential read of [off, off+len) served by the burst
 * buffer: the blocks up to PF_BLOCKS past it that no earlier read asked
 * for, once the stream has run RA_AFTER bytes. Caller holds the lock. */
static void prefetch_range(struct reader *r, uint64_t off, size_t len,
			   uint64_t *from, uint64_t *to)
{
	*from = *to = 0;
	if (r->seq_run < RA_AFTER)
		return;
	uint64_t first = (off + len + r->bs - 1) / r->bs;
	uint64_t end = (r->size + r->bs - 1) / r->bs;      /* one past the last */
	uint64_t a = first > r->pf_end ? first : r->pf_end;
	uint64_t b = first + PF_BLOCKS < end ? first + PF_BLOCKS : end;
	if (b <= a)
		return;
	*from = a;
	*to = r->pf_end = b;
}

/* Is the burst buffer still holding the stream PF_BLOCKS blocks past
 * pos? If not, the chunk read-ahead should start now, before the reader
 * reaches the blocks it has not. No lock held. */
static bool cached_ahead(struct reader *r, uint64_t pos)
{
	const struct bcache_id id = { r->bucket, r->key, r->etag };
	uint64_t blk = pos / r->bs + PF_BLOCKS;
	uint64_t last = (r->size - 1) / r->bs;
	return bcache_has(r->bc, &id, blk < last ? blk : last);
}

/* Where a read's bytes go: copied into buf (reader_read), or left where
 * they lie and named by pieces holding their buffers (reader_read_pieces).
 * A read that needs more than READER_PIECES pieces is copied into one
 * buffer of its own from there on (one). */
struct sink {
	char *buf;                   /* copy into this; NULL: pieces */
	struct reader_piece *pc;
	unsigned n;
	struct reader_buf *one;      /* pieces folded into this one buffer */
	struct reader_pool *pool;
	size_t len;                  /* the read's whole length */
};

/* Bytes [p, p + n) of b are the read's from offset done on: copied or
 * held (a reference taken). 0 or -ENOMEM. */
static int sink_add(struct sink *s, size_t done, struct reader_buf *b, const char *p,
		    size_t n)
{
	if (!s->buf && s->n == READER_PIECES) {
		struct reader_buf *one = reader_rbuf_get(s->pool, s->len);
		if (!one)
			return -ENOMEM;
		size_t o = 0;
		for (unsigned i = 0; i < s->n; i++) {
			memcpy(one->data + o, s->pc[i].p, s->pc[i].len);
			o += s->pc[i].len;
			reader_rbuf_put(s->pc[i].hold);
		}
		s->n = 1;
		s->pc[0] = (struct reader_piece){ one->data, o, one };
		s->one = one;
		s->buf = one->data;
	}
	if (s->buf) {
		memcpy(s->buf + done, p, n);
		if (s->one)
			s->pc[0].len = done + n;
		return 0;
	}
	s->pc[s->n++] = (struct reader_piece){ p, n, reader_rbuf_ref(b) };
	return 0;
}

/* read_cached into the sink: into its buffer, or into a buffer of the
 * pool's that becomes the first piece (taken only when the first block
 * is held). No lock held. */
static size_t sink_cached(struct reader *r, struct sink *s, size_t len, uint64_t off,
			  uint64_t pf_from, uint64_t pf_to)
{
	if (s->buf)
		return read_cached(r, s->buf, len, off, pf_from, pf_to);
	const struct bcache_id id = { r->bucket, r->key, r->etag };
	bool whole = len >= min_sz(r->bs, (size_t)(r->size - off));   /* a block at least */
	struct reader_buf *b = whole && bcache_has(r->bc, &id, off / r->bs)
			       ? reader_rbuf_get(r->pool, len) : NULL;
	size_t done = read_cached(r, b ? b->data : NULL, len, off, pf_from, pf_to);
	if (done && sink_add(s, 0, b, b->data, done) < 0)
		done = 0;
	reader_rbuf_put(b);
	return done;
}

static ssize_t read_to(struct reader *r, struct sink *s, size_t len, uint64_t off)
{
	if (off >= r->size || len == 0)
		return 0;
	if (len > r->size - off)
		len = (size_t)(r->size - off);
	s->len = len;

	size_t done = 0;
	ssize_t result = 0;
	bool missed = false;
	mod_lock(&r->lock);
	bool sequential = seq_near(r, off);
	if (!sequential)
		reader_ra_stop(r);
	else if (off + len > r->next_seq_off)
		r->next_seq_off = off + len;   /* at once: see seq_near */
	bool local = false;   /* all from the burst buffer, more of it ahead */
	if (r->bc && off % r->bs == 0 && !reader_chunk_find(r, off)) {
		uint64_t pf_from = 0, pf_to = 0;
		if (sequential)
			prefetch_range(r, off, len, &pf_from, &pf_to);
		mod_unlock(&r->lock);
		done = sink_cached(r, s, len, off, pf_from, pf_to);
		local = done == len && cached_ahead(r, off + len);
		mod_lock(&r->lock);
	}
	while (done < len) {
		uint64_t at = off + done;
		struct chunk *c = reader_chunk_find(r, at);
		struct chunk tmp;
		if (c && c->state == CH_FAILED) {
			reader_chunk_free(r, c);
			continue;
		}
		if (c && c->state == CH_FETCHING) {
			pthread_cond_wait(&r->cv, &r->lock);   /* that fetch brings it */
			continue;
		}
		if (!c) {
			missed = true;
			int rc = read_fetch(r, at, len - done, sequential, &tmp, &c);
			if (rc <= 0) {
				result = rc;
				break;
			}
		}
		size_t n = min_sz(len - done, (size_t)(c->off + c->got - at));
		int rc = sink_add(s, done, c->rb, c->rb->data + (at - c->off), n);
		if (c == &tmp)
			reader_rbuf_put(tmp.rb);
		if (rc < 0) {
			result = rc;
			break;
		}
		done += n;
		if (c == &tmp)
			continue;
		if (c->ahead && !c->used)
			reader_ra_grow(r);
		c->used = true;
		c->tick = ++r->tick;
	}
	if (done && !sequential)
		r->next_seq_off = off + done;
	else if (done)
		r->seq_run += done;
	if (result == 0 && done == len && sequential) {
		reader_chunks_trim(r, off + done);
		if (!local)
			reader_ra_fill(r, off + done);
	}
	mod_unlock(&r->lock);
	if (!r->bc && missed)        /* (a burst buffer counts its blocks) */
		R_COUNT(r, misses, 1);
	else if (!r->bc)
		R_COUNT(r, hits, 1);
	/* An error after some bytes is still the error: the kernel takes a
	 * short read for the end of the file, which would cut the file short
	 * with no error seen. */
	if (result < 0)
		return result;
	return (ssize_t)done;
}

ssize_t reader_read(struct reader *r, void *buf, size_t len, uint64_t off)
{
	struct sink s = { .buf = buf };
	return read_to(r, &s, len, off);
}

ssize_t reader_read_pieces(struct reader *r, size_t len, uint64_t off,
			   struct reader_piece *pc, unsigned *n)
{
	struct sink s = { .pc = pc, .pool = r->pool };
	ssize_t got = read_to(r, &s, len, off);
	if (got < 0) {
		reader_pieces_put(pc, s.n);
		s.n = 0;
	}
	*n = s.n;
	return got;
}

void reader_pieces_put(struct reader_piece *pc, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		reader_rbuf_put(pc[i].hold);
		pc[i].hold = NULL;
	}
}
