/* warm.c — see warm.h.
 *
 * DESIGN: the queue is an array used as a stack (newest on top); the
 * fetch threads pop from the top and sleep on a condition variable when
 * it is empty. A want for a (bucket, key) already queued replaces that
 * entry's version in place. A full queue drops its bottom (oldest) entry.
 */
#include "sync/cache/warm.h"

#include "common/lock.h"
#include "common/log.h"
#include "common/s3.h"
#include "common/stats.h"
#include "sync/cache/bcache.h"
#include "sync/cache/pins.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_BYTES (8u << 20)

struct want {
	char *bucket, *key, *etag;
	uint64_t size;
};

struct warm {
	struct warm_conf conf;
	pthread_t *threads;
	unsigned n_threads;

	pthread_mutex_t lock;        /* protects everything below (a leaf) */
	pthread_cond_t cv;
	bool stop;
	struct want *q;              /* q[0] oldest, q[n-1] newest */
	size_t n;
	struct warm_counters c;
	struct timespec paused_until; /* a store failed: no fetch before it */
};

static void want_release(struct want *x)
{
	free(x->bucket);
	free(x->key);
	free(x->etag);
	memset(x, 0, sizeof *x);
}

static bool share_used_up(struct warm *w)
{
	if (!w->conf.max_unread)
		return false;
	struct bcache_counters bc;
	bcache_counters(w->conf.bc, &bc);
	return bc.warm_bytes >= w->conf.max_unread;
}

/* Is fetching paused after a store failed? */
static bool paused(struct warm *w)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	mod_lock(&w->lock);
	bool p = now.tv_sec < w->paused_until.tv_sec;
	mod_unlock(&w->lock);
	return p;
}

/* The burst buffer did not store a block of x (err): no fetch for
 * WARM_PAUSE_S seconds; logged once per pause. */
static void pause_fetches(struct warm *w, const struct want *x, int err)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	mod_lock(&w->lock);
	bool fresh = now.tv_sec >= w->paused_until.tv_sec;
	if (fresh)
		w->paused_until.tv_sec = now.tv_sec + WARM_PAUSE_S;
	mod_unlock(&w->lock);
	if (fresh)
		log_warn("warm: the burst buffer did not store a block of %s/%s (%s): "
			 "no fetch for %d s", x->bucket, x->key, strerror(-err),
			 WARM_PAUSE_S);
}

static bool stopping(struct warm *w)
{
	mod_lock(&w->lock);
	bool stop = w->stop;
	mod_unlock(&w->lock);
	return stop;
}

/* Fetch one version into the burst buffer, chunk by chunk (CHUNK_BYTES
 * of whole blocks), skipping the blocks it holds already. 0 (*bytes: what
 * was fetched, 0 when all was cached), -ECANCELED when warm_free() began
 * (checked before each chunk), -ENOSPC when the share is used up, or the
 * GET's or the cache's error (*put_err: the cache's). The version is
 * pinned meanwhile: a drop of it (an event replaced it) waits for the
 * blocks stored here. */
static int fetch_one(struct warm *w, const struct want *x, char *buf, uint64_t *bytes,
		     int *put_err)
{
	const struct bcache_id id = { x->bucket, x->key, x->etag };
	uint32_t bs = bcache_block_size(w->conf.bc);
	uint64_t per = CHUNK_BYTES / bs ? CHUNK_BYTES / bs : 1;
	uint64_t nblk = (x->size + bs - 1) / bs;
	*bytes = 0;
	if (w->conf.pins && pins_pin(w->conf.pins, &id) < 0)
		return -ENOMEM;
	int rc = 0;
	for (uint64_t first = 0; first < nblk && !rc; first += per) {
		uint64_t end = first + per < nblk ? first + per : nblk, b = first;
		while (b < end && bcache_has(w->conf.bc, &id, b))
			b++;                 /* cached already: start after it */
		if (b == end)
			continue;
		if (stopping(w)) {
			rc = -ECANCELED;
			break;
		}
		if (share_used_up(w)) {
			rc = -ENOSPC;
			break;
		}
		uint64_t off = b * bs;
		uint64_t len = (end * (uint64_t)bs < x->size ? end * (uint64_t)bs : x->size) - off;
		size_t got = 0;
		if ((rc = s3_get(w->conf.s3, x->bucket, x->key, off, (size_t)len, x->etag,
				 buf, &got)) < 0)
			break;
		for (size_t o = 0; o < got && !rc; o += bs) {
			size_t l = got - o < bs ? got - o : bs;
			if (l == bs || off + o + l == x->size)
				rc = bcache_put(w->conf.bc, &id, (off + o) / bs, buf + o, l,
						BCACHE_WARM);
			if (rc == -EBUSY)
				rc = 0;      /* being stored by a reader right now */
			else if (rc)
				*put_err = rc;
		}
		*bytes += got;
		if (!rc && got < len)
			rc = -EIO;           /* shorter than the event said */
	}
	if (w->conf.pins)
		pins_unpin(w->conf.pins, &id);
	return rc;
}

/* Wait (polling, since the cache has no hook for it) until the burst
 * buffer's start-up listing is done: puts are refused until then, so a
 * fetch meanwhile would be thrown away. false: warm_free() began, or the
 * listing failed (the buffer stores nothing this run: skipped). */
static bool listing_done(struct warm *w)
{
	for (;;) {
		struct bcache_counters k;
		bcache_counters(w->conf.bc, &k);
		if (k.unlisted)
			return false;    /* it stores nothing this run */
		if (!k.loading)
			return true;
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 20 * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		mod_lock(&w->lock);
		if (!w->stop)
			pthread_cond_timedwait(&w->cv, &w->lock, &until);
		bool stop = w->stop;
		mod_unlock(&w->lock);
		if (stop)
			return false;
	}
}

static void *fetch_main(void *arg)
{
	struct warm *w = arg;
	/* Users' reads first: this thread runs at a lower priority. */
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
	uint32_t bs = bcache_block_size(w->conf.bc);
	size_t cap = CHUNK_BYTES > bs ? CHUNK_BYTES : bs;
	char *buf = malloc(cap);
	mod_lock(&w->lock);
	while (!w->stop) {
		if (!w->n || !buf) {
			pthread_cond_wait(&w->cv, &w->lock);
			continue;
		}
		struct want x = w->q[--w->n];
		w->c.running++;
		mod_unlock(&w->lock);
		uint64_t bytes = 0;
		int put_err = 0;
		struct bcache_counters k0, k1;
		bcache_counters(w->conf.bc, &k0);
		int rc = paused(w) ? -ENOSPC : listing_done(w) ?
			 fetch_one(w, &x, buf, &bytes, &put_err) :
			 stopping(w) ? -ECANCELED : -ENOSPC;
		/* The disk refused a block (full, read-only): pause. A budget
		 * taken for a moment (blocks being written) is not a reason. */
		bcache_counters(w->conf.bc, &k1);
		bool disk = put_err && k1.write_errors > k0.write_errors;
		if (disk)
			pause_fetches(w, &x, put_err);
		mod_lock(&w->lock);
		w->c.fetched_bytes += bytes;
		w->c.running--;
		if (rc == 0) {
			if (bytes)
				w->c.fetched++;
			else
				w->c.held++;
		} else if (rc == -ENOSPC && !disk) {
			w->c.skipped++;  /* share used up, paused, listing failed */
		} else if (rc != -ECANCELED) {
			w->c.failed++;
		}
		if (rc < 0 && rc != -ENOSPC && rc != -ESTALE && rc != -ECANCELED)
			log_debug("warm: %s/%s: %s", x.bucket, x.key, strerror(-rc));
		mod_unlock(&w->lock);
		want_release(&x);
		mod_lock(&w->lock);
	}
	mod_unlock(&w->lock);
	free(buf);
	return NULL;
}

int warm_new(const struct warm_conf *conf, struct warm **out)
{
	struct warm *w = calloc(1, sizeof *w);
	if (!w)
		return -ENOMEM;
	w->conf = *conf;
	if (!w->conf.threads)
		w->conf.threads = 2;
	if (!w->conf.queue_max)
		w->conf.queue_max = 256;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->q = calloc(w->conf.queue_max, sizeof *w->q);
	w->threads = calloc(w->conf.threads, sizeof *w->threads);
	if (!w->q || !w->threads) {
		warm_free(w);
		return -ENOMEM;
	}
	for (; w->n_threads < w->conf.threads; w->n_threads++) {
		if (pthread_create(&w->threads[w->n_threads], NULL, fetch_main, w) != 0) {
			warm_free(w);
			return -EAGAIN;
		}
	}
	*out = w;
	return 0;
}

void warm_free(struct warm *w)
{
	if (!w)
		return;
	mod_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->cv);
	mod_unlock(&w->lock);
	for (unsigned i = 0; i < w->n_threads; i++)
		pthread_join(w->threads[i], NULL);
	for (size_t i = 0; i < w->n; i++)
		want_release(&w->q[i]);
	free(w->q);
	free(w->threads);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

void warm_want(struct warm *w, const char *bucket, const char *key,
	       const char *etag, uint64_t size, uint64_t max_object)
{
	if (size == 0)
		return;              /* nothing to fetch */
	struct want x = { 0 };
	bool big = size > max_object;
	if (!big && (!(x.bucket = strdup(bucket)) || !(x.key = strdup(key)) ||
		     !(x.etag = strdup(etag)))) {
		want_release(&x);
		big = true;          /* out of memory: skip it */
	}
	x.size = size;
	mod_lock(&w->lock);
	if (big) {
		w->c.skipped++;
		mod_unlock(&w->lock);
		return;
	}
	size_t i = 0;
	while (i < w->n && (strcmp(w->q[i].key, key) || strcmp(w->q[i].bucket, bucket)))
		i++;
	struct want old = { 0 };
	if (i < w->n) {                /* queued already: a newer version */
		old = w->q[i];
		memmove(&w->q[i], &w->q[i + 1], (w->n - i - 1) * sizeof *w->q);
		w->n--;
	} else if (w->n == w->conf.queue_max) {
		old = w->q[0];             /* backlog: the oldest goes */
		memmove(&w->q[0], &w->q[1], (w->n - 1) * sizeof *w->q);
		w->n--;
		w->c.skipped++;
	}
	w->q[w->n++] = x;
	pthread_cond_signal(&w->cv);
	mod_unlock(&w->lock);
	want_release(&old);
}

void warm_counters(struct warm *w, struct warm_counters *out)
{
	mod_lock(&w->lock);
	*out = w->c;
	out->queued = w->n;
	mod_unlock(&w->lock);
}
