/* reader.c — see reader.h.
 *
 * DESIGN: one window of bytes [win_off, win_off + win_len) per reader,
 * replaced as a whole. A read inside the window is a memcpy under the mutex.
 * A read outside it fetches a new window without the mutex (so concurrent
 * readers of the same descriptor never wait on each other's network time
 * for a hit) and installs it if it is still the newest fetch.
 */
#include "sync/reader.h"

#include "gateway/log.h"
#include "gateway/stats.h"
#include "sync/s3.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define WIN_MIN   (256u * 1024)
#define WIN_MAX   (8u * 1024 * 1024)
#define RAND_UNIT (64u * 1024)

struct reader {
	struct s3 *s3;
	struct stats *st;
	char *bucket, *key;
	char etag[72];
	uint64_t size;

	pthread_mutex_t lock;    /* protects everything below */
	char *win;
	uint64_t win_off;
	size_t win_len;
	uint64_t next_seq_off;   /* where a sequential reader reads next */
	size_t seq_win;          /* current read-ahead size */
	uint64_t fetch_gen;      /* newest fetch started */
};

int reader_open(struct s3 *s3, struct stats *st, const char *bucket,
		const char *key, const char *etag, uint64_t size,
		struct reader **out)
{
	struct reader *r = calloc(1, sizeof *r);
	if (!r)
		return -ENOMEM;
	r->bucket = strdup(bucket);
	r->key = strdup(key);
	if (!r->bucket || !r->key) {
		reader_close(r);
		return -ENOMEM;
	}
	snprintf(r->etag, sizeof r->etag, "%s", etag ? etag : "");
	r->s3 = s3;
	r->st = st;
	r->size = size;
	r->seq_win = WIN_MIN;
	pthread_mutex_init(&r->lock, NULL);
	*out = r;
	return 0;
}

void reader_close(struct reader *r)
{
	if (!r)
		return;
	free(r->win);
	free(r->bucket);
	free(r->key);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/* Copy what the window holds of [off, off+len); returns bytes copied, or -1
 * if the window does not hold the start of the range. Caller holds lock. */
static ssize_t window_copy(struct reader *r, void *buf, size_t len, uint64_t off)
{
	if (!r->win || off < r->win_off || off >= r->win_off + r->win_len)
		return -1;
	size_t avail = (size_t)(r->win_off + r->win_len - off);
	size_t n = len < avail ? len : avail;
	memcpy(buf, r->win + (off - r->win_off), n);
	return (ssize_t)n;
}

ssize_t reader_read(struct reader *r, void *buf, size_t len, uint64_t off)
{
	if (off >= r->size || len == 0)
		return 0;
	if (len > r->size - off)
		len = (size_t)(r->size - off);

	size_t done = 0;
	while (done < len) {
		uint64_t at = off + done;
		pthread_mutex_lock(&r->lock);
		ssize_t got = window_copy(r, (char *)buf + done, len - done, at);
		if (got > 0) {
			done += (size_t)got;
			r->next_seq_off = at + (uint64_t)got;
			pthread_mutex_unlock(&r->lock);
			stats_inc(r->st, cache_hits);
			continue;
		}
		/* Decide the window to fetch: grow it for sequential readers. */
		bool sequential = at == r->next_seq_off;
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
		uint64_t gen = ++r->fetch_gen;
		pthread_mutex_unlock(&r->lock);

		stats_inc(r->st, cache_misses);
		char *nb = malloc(want);
		if (!nb)
			return done ? (ssize_t)done : -ENOMEM;
		size_t n = 0;
		int rc = s3_get(r->s3, r->bucket, r->key, at, want,
				r->etag[0] ? r->etag : NULL, nb, &n);
		if (rc < 0) {
			free(nb);
			return done ? (ssize_t)done : rc;
		}
		size_t use = n < len - done ? n : len - done;
		memcpy((char *)buf + done, nb, use);
		done += use;

		pthread_mutex_lock(&r->lock);
		if (gen == r->fetch_gen) {
			free(r->win);
			r->win = nb;
			r->win_off = at;
			r->win_len = n;
			nb = NULL;
		}
		r->next_seq_off = at + use;
		pthread_mutex_unlock(&r->lock);
		free(nb);
		if (n < want)        /* object shorter than the index said */
			break;
	}
	return (ssize_t)done;
}
