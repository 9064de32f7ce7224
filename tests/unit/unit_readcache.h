/*
 * unit_readcache.h — the bed test_readcache.c and test_warm.c share
 * (include after unit.h): the fake S3 behind the fault wrapper (counting
 * requests), a block cache in a temporary directory, pins, and helpers
 * to put objects, count GETs, read one through a new reader and wait for
 * the cache's background drops. Define UNIT_WITH_MD5 before unit.h.
 */
#ifndef FACETFS_TEST_UNIT_READCACHE_H
#define FACETFS_TEST_UNIT_READCACHE_H

#include "common/object.h"
#include "common/s3.h"
#include "common/stats.h"
#include "sync/cache/bcache.h"
#include "sync/cache/bcache_int.h"
#include "sync/cache/pins.h"
#include "sync/cache/reader.h"
#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"
#include "sync/cache/visibility.h"
#include "sync/cache/warm.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BS (64u * 1024)

struct bed {
	struct s3 *fake, *s3;
	struct stats st;
	char *dir;
	struct bcache *bc;
	struct pins *pins;
	struct reader_src src;
};

/* The start-up listing calls staged(): held there while *hold is set. */
static atomic_bool staged_hold __attribute__((unused));
static inline uint64_t staged_none(void *ctx)
{
	(void)ctx;
	while (atomic_load(&staged_hold))
		usleep(1000);
	return 0;
}

/* A bed whose burst buffer has blocks of bs bytes and the admission
 * threshold cold_min (0: every object stored at its first read). */
static inline void bed_open_conf(struct bed *b, uint64_t max_bytes, uint32_t bs,
			  uint64_t cold_min, bool wait_listing)
{
	memset(b, 0, sizeof *b);
	stats_init(&b->st);
	if (s3_fake_new(&b->fake) || s3_fault_new(b->fake, true, &b->s3) ||
	    s3_fake_bucket_add(b->fake, "b"))
		exit(2);
	b->dir = unit_tmpdir("readcache");
	struct bcache_conf c = { .dir = b->dir, .max_bytes = max_bytes, .block_size = bs,
				 .staged = staged_none, .cold_min = cold_min, .st = &b->st };
	char err[256];
	if (bcache_open(&c, &b->bc, err, sizeof err) || pins_new(b->bc, &b->pins)) {
		printf("# %s\n", err);
		exit(2);
	}
	for (int i = 0; i < 500 && wait_listing; i++) {     /* the start-up listing */
		struct bcache_counters k;
		bcache_counters(b->bc, &k);
		if (!k.loading)
			break;
		usleep(10000);
	}
	b->src = (struct reader_src){ b->s3, NULL, b->bc, b->pins, NULL };
}

static inline void bed_open(struct bed *b, uint64_t max_bytes, bool wait_listing)
{
	bed_open_conf(b, max_bytes, BS, 0, wait_listing);
}

static inline void bed_init(struct bed *b)
{
	bed_open(b, 64 * BS, true);
}

static inline void bed_free(struct bed *b)
{
	pins_free(b->pins);
	bcache_close(b->bc);
	s3_free(b->s3);
	unit_rmtree(b->dir);
	free(b->dir);
	stats_release(&b->st);
}

static inline char *pattern(size_t n, unsigned seed)
{
	char *p = malloc(n);
	if (!p)
		exit(2);
	for (size_t i = 0; i < n; i++)
		p[i] = (char)(i * 31 + seed * 7 + (i >> 9));
	return p;
}

static inline void put(struct bed *b, const char *key, const char *data, size_t n, char etag[33])
{
	if (s3_fake_object_put(b->fake, "b", key, data, n, NULL, 0, NULL))
		exit(2);
	unit_md5_hex(data, n, etag);
}

static inline uint64_t gets(struct bed *b)
{
	return s3_fault_seen(b->s3, S3K_GET);
}

/* Read all of [0, n) through a new reader of etag; 1 if the bytes are want. */
static inline int read_all(struct bed *b, const char *key, const char *etag, const char *want,
		    size_t n)
{
	struct reader *r;
	if (reader_open(&b->src, "b", key, etag, n, &r))
		return 0;
	char *buf = malloc(n + 1);
	size_t done = 0;
	while (done < n) {
		ssize_t k = reader_read(r, buf + done, 100000, done);
		if (k <= 0)
			break;
		done += (size_t)k;
	}
	int ok = done == n && memcmp(buf, want, n) == 0;
	free(buf);
	reader_close(r);
	return ok;
}

/* Wait for the cache's background drops. */
static inline void drops_settle(struct bed *b, uint64_t want)
{
	for (int i = 0; i < 300; i++) {
		struct bcache_counters k;
		bcache_counters(b->bc, &k);
		if (k.dropped >= want)
			return;
		usleep(10000);
	}
}


#endif
