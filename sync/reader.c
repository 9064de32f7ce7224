/* reader.c — see reader.h.
 *
 * DESIGN: two windows of bytes per reader, `cur` and `ahead`, each replaced
 * as a whole. A read inside `cur` is a memcpy under the mutex; a read that
 * reaches `ahead` promotes it. A read outside both fetches a new `cur`
 * without holding the mutex; while one fetch of a range is in flight, other
 * reads of that range wait for it instead of sending their own GET (the
 * kernel sends readahead requests for one file from several threads at
 * once). Sequential reading (reads close to where the last one ended) grows
 * the window from 256 KiB to 8 MiB, and once a window of 1 MiB or more is
 * current, a helper thread fetches the next window into `ahead` while the
 * caller copies from `cur`. reader_close() waits for that helper.
 */
#include "sync/reader.h"

#include "sync/bcache.h"
#include "sync/pins.h"
#include "common/log.h"
#include "common/stats.h"
#include "common/s3.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIN_MIN   (256u * 1024)
#define WIN_MAX   (8u * 1024 * 1024)
#define RAND_UNIT (64u * 1024)
#define SEQ_SLACK (2u * 1024 * 1024)  /* reads this close count as sequential */

struct win {
	char *buf;
	uint64_t off;
	size_t len;              /* 0: empty */
};

struct reader {
	struct s3 *s3;
	struct reader_counters *ctr; /* NULL: not counted */
	struct bcache *bc;       /* NULL: no burst buffer (or no ETag) */
	struct pins *pins;       /* holds this version while bc is set */
	uint32_t bs;             /* its block size */
	char *bucket, *key;
	char etag[72];
	uint64_t size;

	pthread_mutex_t lock;    /* protects everything below */
	pthread_cond_t cv;       /* a fetch finished */
	struct win cur, ahead;
	bool busy;               /* a fetch of [busy_off, +busy_len) is in flight */
	uint64_t busy_off;
	size_t busy_len;
	bool prefetching;        /* the helper thread runs */
	uint64_t next_seq_off;   /* where a sequential reader reads next */
	size_t seq_win;          /* current read-ahead size */
};

static const struct stats_def reader_stats[] = {
	STATS_COUNTER(struct reader_counters, hits, "cache", "hits"),
	STATS_COUNTER(struct reader_counters, misses, "cache", "misses"),
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
	if (src->bc && r->etag[0]) {
		const struct bcache_id id = { r->bucket, r->key, r->etag };
		if (src->pins && pins_pin(src->pins, &id) < 0) {
			reader_close(r);
			return -ENOMEM;
		}
		r->pins = src->pins;
		r->bc = src->bc;
		r->bs = bcache_block_size(src->bc);
	}
	r->size = size;
	r->seq_win = WIN_MIN;
	*out = r;
	return 0;
}

void reader_close(struct reader *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	while (r->prefetching)
		pthread_cond_wait(&r->cv, &r->lock);
	pthread_mutex_unlock(&r->lock);
	if (r->pins) {
		const struct bcache_id id = { r->bucket, r->key, r->etag };
		pins_unpin(r->pins, &id);
	}
	free(r->cur.buf);
	free(r->ahead.buf);
	free(r->bucket);
	free(r->key);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

static bool win_has(const struct win *w, uint64_t at)
{
	return w->len && at >= w->off && at < w->off + w->len;
}

static void win_set(struct win *w, char *buf, uint64_t off, size_t len)
{
	free(w->buf);
	w->buf = buf;
	w->off = off;
	w->len = len;
}

static size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* [at, at+want) (whole blocks) from the burst buffer where it has them,
 * the rest with GETs, stored in it as they arrive. *got: the bytes from at
 * on that are there; a GET that fails after blocks were found gives those
 * (the caller asks again for the rest and gets the error then). */
static int fetch_blocks(struct reader *r, uint64_t at, size_t want, char *nb,
			size_t *got)
{
	const struct bcache_id id = { r->bucket, r->key, r->etag };
	size_t done = 0;
	int rc = 0;
	while (done < want) {
		uint64_t pos = at + done;
		size_t blen = min_sz(r->bs, want - done);
		if (bcache_read(r->bc, &id, pos / r->bs, nb + done, blen, 0) == (ssize_t)blen) {
			done += blen;
			continue;
		}
		size_t run = blen;   /* the missing blocks from here: one GET */
		while (done + run < want && !bcache_has(r->bc, &id, (pos + run) / r->bs))
			run += min_sz(r->bs, want - done - run);
		size_t g = 0;
		if ((rc = s3_get(r->s3, r->bucket, r->key, pos, run, r->etag,
				 nb + done, &g)) < 0)
			break;
		for (size_t o = 0; o < g; o += r->bs) {
			size_t l = min_sz(r->bs, g - o);
			if (l == r->bs || pos + o + l == r->size)
				bcache_put(r->bc, &id, (pos + o) / r->bs, nb + done + o, l, 0);
		}
		done += g;
		if (g < run)
			break;           /* the object is shorter than the index said */
	}
	*got = done;
	return done ? 0 : rc;
}

/* [at, at+want) into a new buffer; *got bytes arrived. */
static int fetch(struct reader *r, uint64_t at, size_t want, char **out, size_t *got)
{
	char *nb = malloc(want ? want : 1);
	if (!nb)
		return -ENOMEM;
	int rc = r->bc ? fetch_blocks(r, at, want, nb, got)
		       : s3_get(r->s3, r->bucket, r->key, at, want,
				r->etag[0] ? r->etag : NULL, nb, got);
	if (rc < 0) {
		free(nb);
		return rc;
	}
	*out = nb;
	return 0;
}

/* With a burst buffer a window is whole blocks: [*at, +*want) grown to
 * block boundaries (the object's end for the last one). */
static void align_blocks(const struct reader *r, uint64_t *at, size_t *want)
{
	if (!r->bc)
		return;
	uint64_t start = *at / r->bs * r->bs;
	uint64_t end = (*at + *want + r->bs - 1) / r->bs * r->bs;
	if (end > r->size)
		end = r->size;
	*at = start;
	*want = (size_t)(end - start);
}

static void *prefetch_main(void *arg)
{
	struct reader *r = arg;
	pthread_mutex_lock(&r->lock);
	uint64_t at = r->busy_off;
	size_t want = r->busy_len;
	pthread_mutex_unlock(&r->lock);

	char *nb = NULL;
	size_t got = 0;
	int rc = fetch(r, at, want, &nb, &got);

	pthread_mutex_lock(&r->lock);
	if (rc == 0 && got)
		win_set(&r->ahead, nb, at, got);
	else
		free(nb);            /* a read will fetch (and report) it itself */
	r->busy = false;
	r->prefetching = false;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->lock);   /* r may be freed from here on */
	return NULL;
}

/* After a sequential read: fetch the next window ahead of the reader.
 * Caller holds the lock. */
static void maybe_prefetch(struct reader *r)
{
	uint64_t next = r->cur.off + r->cur.len;
	if (r->prefetching || r->busy || r->ahead.len || r->cur.len < (1u << 20) ||
	    next >= r->size || r->next_seq_off + SEQ_SLACK < r->cur.off)
		return;
	size_t want = r->seq_win;
	if (r->seq_win < WIN_MAX)
		r->seq_win *= 2;     /* reads served from prefetched windows never
				      * miss: grow here, or it stays where it was */
	if (want > r->size - next)
		want = (size_t)(r->size - next);
	align_blocks(r, &next, &want);
	r->busy = true;
	r->busy_off = next;
	r->busy_len = want;
	r->prefetching = true;
	pthread_attr_t a;
	pthread_t t;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, prefetch_main, r) != 0) {
		r->busy = false;     /* no helper: reads fetch for themselves */
		r->prefetching = false;
	}
	pthread_attr_destroy(&a);
}

ssize_t reader_read(struct reader *r, void *buf, size_t len, uint64_t off)
{
	if (off >= r->size || len == 0)
		return 0;
	if (len > r->size - off)
		len = (size_t)(r->size - off);

	size_t done = 0;
	ssize_t result = 0;
	bool missed = false;
	pthread_mutex_lock(&r->lock);
	while (done < len) {
		uint64_t at = off + done;
		if (!win_has(&r->cur, at) && win_has(&r->ahead, at)) {
			struct win t = r->cur;
			r->cur = r->ahead;
			r->ahead = t;
			win_set(&r->ahead, NULL, 0, 0);
		}
		if (win_has(&r->cur, at)) {
			size_t avail = (size_t)(r->cur.off + r->cur.len - at);
			size_t n = len - done < avail ? len - done : avail;
			memcpy((char *)buf + done, r->cur.buf + (at - r->cur.off), n);
			done += n;
			r->next_seq_off = at + n;
			continue;
		}
		if (r->busy && at >= r->busy_off && at < r->busy_off + r->busy_len) {
			pthread_cond_wait(&r->cv, &r->lock);   /* that fetch brings it */
			continue;
		}
		/* Fetch a window: grown for sequential readers. */
		missed = true;
		bool sequential = at + SEQ_SLACK >= r->next_seq_off &&
				  at <= r->next_seq_off + SEQ_SLACK;
		size_t want;
		if (sequential) {
			want = r->seq_win;
			if (r->seq_win < WIN_MAX)
				r->seq_win *= 2;
		} else {
			r->seq_win = WIN_MIN;
			want = (len - done + RAND_UNIT - 1) / RAND_UNIT * RAND_UNIT;
		}
		if (want < len - done)
			want = len - done;
		if (want > r->size - at)
			want = (size_t)(r->size - at);
		uint64_t from = at;
		align_blocks(r, &from, &want);
		bool mine = !r->busy;
		if (mine) {
			r->busy = true;
			r->busy_off = from;
			r->busy_len = want;
		}
		pthread_mutex_unlock(&r->lock);
		char *nb = NULL;
		size_t got = 0;
		int rc = fetch(r, from, want, &nb, &got);
		pthread_mutex_lock(&r->lock);
		if (mine) {
			r->busy = false;
			pthread_cond_broadcast(&r->cv);
		}
		if (rc < 0) {
			result = rc;
			break;
		}
		if (from + got <= at) {  /* the object is shorter than the index said */
			free(nb);
			break;
		}
		win_set(&r->cur, nb, from, got);
	}
	if (result == 0 && done == len)
		maybe_prefetch(r);
	pthread_mutex_unlock(&r->lock);
	if (!r->bc && r->ctr) {      /* (a burst buffer counts its blocks) */
		if (missed)
			stats_inc(&r->ctr->misses);
		else
			stats_inc(&r->ctr->hits);
	}
	if (result < 0 && done == 0)
		return result;
	return (ssize_t)done;
}
