/*
 * test_reader.c — unit tests of sync/cache/reader.h on the in-memory store
 * (sync/s3/s3_fake.h) behind the fault wrapper (sync/s3/s3_fault.h): sequential
 * reads served by growing read-ahead windows (each byte fetched once),
 * random reads (one GET of 64 KiB units each), EOF and objects shorter
 * than the index said, an object changed in S3 (-ESTALE once the reader
 * needs bytes it does not hold), and every GET failure: an error, a short
 * body, -ESTALE, a failed read-ahead, concurrent readers of one range.
 * Parallel read-ahead: several ranged GETs in flight (slow GETs), within
 * the per-reader and the shared pool's bounds, a range failing in the
 * middle of it, the object changing while it streams, a random read
 * stopping it, and close while ranges are in flight. Reads that leave the
 * bytes in the reader's buffers (pieces): a stream right piece by piece,
 * buffers taken again from the pool's free list, pieces held after the
 * range was freed and after close, a read over more ranges than pieces.
 */
#define UNIT_WITH_MD5
#include "unit.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "common/stats.h"
#include "sync/cache/reader.h"
#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"

#define MIB (1u << 20)
#define KIB 1024u

/* Between the reader and the fault wrapper: counts the bytes GETs brought,
 * to show each byte is fetched once however the ranges were cut. Only GET
 * passes (the reader sends nothing else). */
struct counting {
	struct s3 s;
	struct s3 *inner;
	_Atomic uint64_t bytes;
};

static int cnt_get(struct s3 *s, const char *bucket, const char *key, uint64_t off,
		   size_t len, const char *if_match, void *buf, size_t *got)
{
	struct counting *c = (struct counting *)s;
	int rc = s3_get(c->inner, bucket, key, off, len, if_match, buf, got);
	if (rc == 0)
		c->bytes += *got;
	return rc;
}

static const struct s3_ops cnt_ops = { .get = cnt_get };

struct bed {
	struct s3 *fake, *s3;    /* s3: the fault wrapper (owns the fake) */
	struct stats st;
	struct reader_counters rc;   /* the readers', registered with st */
	char *data;              /* the object "b/obj" */
	size_t size;
	char etag[33];
	struct reader_src src;   /* s3 and rc; no burst buffer */
	struct counting cnt;     /* (used when cnt.inner is set) */
};

static void bed_init(struct bed *b, size_t size)
{
	if (s3_fake_new(&b->fake) || s3_fault_new(b->fake, true, &b->s3) ||
	    s3_fake_bucket_add(b->fake, "b"))
		exit(2);
	stats_init(&b->st);
	reader_counters_init(&b->rc, &b->st);
	b->cnt = (struct counting){ .s = { &cnt_ops } };
	b->size = size;
	b->data = malloc(size);
	if (!b->data)
		exit(2);
	uint64_t x = 88172645463325252ull;
	for (size_t i = 0; i < size; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b->data[i] = (char)x;
	}
	unit_md5_hex(b->data, size, b->etag);
	if (s3_fake_object_put(b->fake, "b", "obj", b->data, size, NULL, 0, NULL))
		exit(2);
}

static void bed_free(struct bed *b)
{
	s3_free(b->s3);
	reader_counters_release(&b->rc);
	stats_release(&b->st);
	free(b->data);
}

static struct reader *bed_reader(struct bed *b, uint64_t size)
{
	struct reader *r;
	b->src = (struct reader_src){ .s3 = b->s3, .ctr = &b->rc };
	if (b->cnt.inner)
		b->src.s3 = &b->cnt.s;
	if (reader_open(&b->src, "b", "obj", b->etag, size, &r))
		exit(2);
	return r;
}


static int gets(struct bed *b)
{
	return (int)s3_fault_seen(b->s3, S3K_GET);
}

/* Count the bytes GETs bring from now on (bed_reader*() readers). */
static void bed_count(struct bed *b)
{
	b->cnt.inner = b->s3;
	b->cnt.bytes = 0;
}

/* Read [off, off+len) and compare it with the object's bytes. */
static bool read_ok(struct bed *b, struct reader *r, uint64_t off, size_t len)
{
	char *buf = malloc(len ? len : 1);
	ssize_t n = reader_read(r, buf, len, off);
	size_t want = off >= b->size ? 0 : b->size - off < len ? b->size - (size_t)off : len;
	bool ok = n == (ssize_t)want && memcmp(buf, b->data + off, want) == 0;
	if (!ok)
		printf("# read of %zu at %llu: %zd (want %zu)\n", len,
		       (unsigned long long)off, n, want);
	free(buf);
	return ok;
}

/* Read the whole object in 128 KiB reads; true if every byte was right. */
static bool read_all(struct bed *b, struct reader *r)
{
	bool ok = true;
	for (uint64_t off = 0; off < b->size && ok; off += 128 * KIB)
		ok = read_ok(b, r, off, 128 * KIB);
	return ok;
}

static void test_sequential(void)
{
	struct bed b;
	bed_init(&b, 20 * MIB);
	bed_count(&b);
	struct reader *r = bed_reader(&b, b.size);
	bool ok = read_all(&b, r);
	CHECK(b.cnt.bytes == b.size, "sequential: each byte fetched once (%llu bytes)",
	      (unsigned long long)b.cnt.bytes);
	/* windows 256 KiB, 512 KiB, 1 MiB read by the reads themselves, then
	 * ranges ahead of 2, 2, 4, 8 MiB and the 2.25 MiB left: 8 GETs, each
	 * byte fetched once (nothing fetched ahead is wasted) */
	printf("# sequential 20 MiB in 128 KiB reads: %d GETs, %llu misses, %llu hits\n",
	       gets(&b), (unsigned long long)stats_value(&b.st, "cache", "misses"),
	       (unsigned long long)stats_value(&b.st, "cache", "hits"));
	CHECK(ok, "sequential: every byte as in S3");
	CHECK(gets(&b) == 8, "sequential: 8 GETs for 160 reads (ranges grow to 8 MiB) (%d)",
	      gets(&b));
	CHECK(stats_value(&b.st, "readahead", "ranges") == 5 && stats_value(&b.st, "readahead", "wasted_bytes") == 0 &&
	      stats_value(&b.st, "readahead", "bytes") == b.size - 1792 * KIB,
	      "sequential: 5 ranges read ahead, their bytes counted, none wasted");
	CHECK(stats_value(&b.st, "cache", "misses") == 3 && stats_value(&b.st, "cache", "hits") == 157,
	      "sequential: 3 reads waited for a GET, 157 were served by windows read ahead");
	CHECK(read_ok(&b, r, b.size, 10) && read_ok(&b, r, b.size - 5, 10) &&
	      read_ok(&b, r, b.size + 100, 10),
	      "EOF: a read at or past the end gives 0, one across it is short");
	reader_close(r);
	bed_free(&b);
}

static void test_random(void)
{
	struct bed b;
	bed_init(&b, 24 * MIB);
	struct reader *r = bed_reader(&b, b.size);
	uint64_t x = 7;
	bool ok = true;
	int g0 = gets(&b), reads = 0;
	for (int i = 0; i < 50 && ok; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		/* over 2 MiB from the last read: each read is random */
		uint64_t off = (uint64_t)(i * 7 % 50) * 400 * KIB + (x >> 40) % 1000;
		ok = read_ok(&b, r, off, 1000 + (size_t)((x >> 20) % 50000));
		reads++;
	}
	CHECK(ok && gets(&b) - g0 == reads, "random: %d reads, %d GETs, bytes right", reads,
	      gets(&b) - g0);
	/* a second read inside the window just fetched: no GET */
	int g1 = gets(&b);
	CHECK(read_ok(&b, r, 3 * MIB, 1000) && read_ok(&b, r, 3 * MIB + 20000, 1000) &&
	      gets(&b) - g1 == 1, "random: a read inside the last 64 KiB window sends no GET");
	reader_close(r);
	bed_free(&b);
}

static void test_changed(void)
{
	struct bed b;
	bed_init(&b, 4 * MIB);
	struct reader *r = bed_reader(&b, b.size);
	CHECK(read_ok(&b, r, 0, 100 * KIB), "changed: first read before the change");
	s3_fake_object_put(b.fake, "b", "obj", "other bytes", 11, NULL, 0, NULL);
	CHECK(read_ok(&b, r, 100 * KIB, 100 * KIB),
	      "changed: bytes the reader holds are still served (same version)");
	char buf[4096];
	CHECK(reader_read(r, buf, sizeof buf, 3 * MIB) == -ESTALE,
	      "changed: bytes it must fetch -> -ESTALE (If-Match)");
	/* A read that starts in held bytes and needs fetched ones: the error,
	 * not the held part (the kernel takes a short read for the end of the
	 * file: the file would look cut short, with no error). */
	char *big = malloc(b.size);
	ssize_t n = reader_read(r, big, b.size, 0);
	CHECK(n == -ESTALE, "changed: a read half held, half to fetch -> -ESTALE, not short (%zd)",
	      n);
	free(big);
	reader_close(r);

	/* the index said bigger than the object is (a missed event) */
	s3_fake_object_put(b.fake, "b", "obj", b.data, 1000, NULL, 0, NULL);
	unit_md5_hex(b.data, 1000, b.etag);
	r = bed_reader(&b, 4 * MIB);
	CHECK(reader_read(r, buf, sizeof buf, 0) == 1000 && !memcmp(buf, b.data, 1000) &&
	      reader_read(r, buf, sizeof buf, 2000) == 0,
	      "shorter than said: the bytes there are, then 0");
	reader_close(r);
	bed_free(&b);
}

struct par {
	struct bed *b;
	struct reader *r;
	uint64_t off;
	bool ok;
};

static void *par_read(void *arg)
{
	struct par *p = arg;
	p->ok = read_ok(p->b, p->r, p->off, 32 * KIB);
	return NULL;
}

static void test_failures(void)
{
	struct bed b;
	bed_init(&b, 20 * MIB);
	struct reader *r = bed_reader(&b, b.size);
	char buf[4096];

	/* a GET failing: the error, and nothing sticks */
	s3_fault_fail(b.s3, S3K_GET, 1, 1, -EIO);
	CHECK(reader_read(r, buf, sizeof buf, 5 * MIB) == -EIO,
	      "failures: a GET failing -> -EIO");
	CHECK(read_ok(&b, r, 5 * MIB, sizeof buf), "failures: the next read fetches again");
	s3_fault_fail(b.s3, S3K_GET, 1, 1, -ESTALE);
	CHECK(reader_read(r, buf, sizeof buf, 9 * MIB) == -ESTALE,
	      "failures: a GET answering -ESTALE -> -ESTALE");
	s3_fault_fail(b.s3, S3K_GET, 1, 1, -EHOSTUNREACH);
	CHECK(reader_read(r, buf, sizeof buf, 11 * MIB) == -EHOSTUNREACH,
	      "failures: store unreachable -> -EHOSTUNREACH");
	s3_fault_clear(b.s3);

	/* a short body: the reader asks for the rest itself */
	struct s3_fault_rule cut = { .kind = S3K_GET, .type = S3F_SHORT, .first = 1,
				     .times = 1, .keep = 1000 };
	s3_fault_add(b.s3, &cut);
	int g0 = gets(&b);
	CHECK(read_ok(&b, r, 15 * MIB, 10000) && gets(&b) - g0 == 2,
	      "failures: a GET cut short after 1000 bytes: one more GET, bytes right (%d GETs)",
	      gets(&b) - g0);
	s3_fault_clear(b.s3);

	/* a read across two windows whose second GET fails: the error, not
	 * the bytes before it (a short read is the end of the file to the
	 * kernel); the same read again gets them all */
	reader_close(r);
	r = bed_reader(&b, b.size);
	CHECK(read_ok(&b, r, 0, 1000), "failures: window [0, 256 KiB) read");
	s3_fault_fail(b.s3, S3K_GET, 1, 1, -EIO);
	char *big = malloc(512 * KIB);
	ssize_t n = reader_read(r, big, 512 * KIB, 1000);
	CHECK(n == -EIO, "failures: a read whose second GET fails is -EIO, not short (%zd)", n);
	free(big);
	s3_fault_clear(b.s3);
	CHECK(read_ok(&b, r, 1000, 512 * KIB), "failures: ... the same read again: all of it");
	reader_close(r);

	/* a read-ahead GET failing: the read that needs it fetches itself.
	 * GET 4 is one of the first two ranges ahead (which one depends on
	 * which helper thread asks first); every byte arrives once. */
	bed_count(&b);
	r = bed_reader(&b, b.size);
	s3_fault_fail(b.s3, S3K_GET, 4, 1, -EIO);
	uint64_t inj0 = s3_fault_injected(b.s3, S3K_GET);
	bool all_ok = read_all(&b, r);
	CHECK(all_ok && s3_fault_injected(b.s3, S3K_GET) - inj0 == 1 && b.cnt.bytes == b.size,
	      "failures: a failed read-ahead is fetched again by the read that needs it, "
	      "each byte fetched once (%llu bytes)", (unsigned long long)b.cnt.bytes);
	s3_fault_clear(b.s3);
	reader_close(r);
	b.cnt.inner = NULL;

	/* slow GETs: readers of one range wait for the GET in flight */
	r = bed_reader(&b, b.size);
	struct s3_fault_rule slow = { .kind = S3K_GET, .type = S3F_DELAY, .delay_ms = 200 };
	s3_fault_add(b.s3, &slow);
	g0 = gets(&b);
	struct par p[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		p[i] = (struct par){ &b, r, 7 * MIB, false };
		pthread_create(&th[i], NULL, par_read, &p[i]);
	}
	bool all = true;
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		all = all && p[i].ok;
	}
	CHECK(all && gets(&b) - g0 == 1,
	      "failures: 4 concurrent reads of one range, slow GET: one GET, all right (%d)",
	      gets(&b) - g0);
	s3_fault_clear(b.s3);
	reader_close(r);
	bed_free(&b);
}

/* ---------- parallel read-ahead ---------- */

static struct reader *bed_reader_pool(struct bed *b, struct reader_pool *p)
{
	struct reader *r;
	b->src = (struct reader_src){ .s3 = b->s3, .ctr = &b->rc, .pool = p };
	if (b->cnt.inner)
		b->src.s3 = &b->cnt.s;
	if (reader_open(&b->src, "b", "obj", b->etag, b->size, &r))
		exit(2);
	return r;
}

static struct reader_pool *pool_of(unsigned streams, uint64_t max_bytes,
				   unsigned total_streams, uint64_t total_bytes)
{
	struct reader_ra_conf c = { streams, max_bytes, total_streams, total_bytes, 0 };
	struct reader_pool *p;
	if (reader_pool_new(&c, &p))
		exit(2);
	return p;
}

/* Read in 128 KiB reads from *pos until a read fails or the end: every byte
 * returned must be the object's (else *bad). The failing read's result
 * (0 at the end); *pos: where it was. */
static ssize_t read_until_error(struct bed *b, struct reader *r, uint64_t *pos, bool *bad)
{
	char *buf = malloc(128 * KIB);
	ssize_t n = 0;
	*bad = false;
	for (; *pos < b->size; *pos += (uint64_t)n) {
		n = reader_read(r, buf, 128 * KIB, *pos);
		if (n <= 0)
			break;
		if (memcmp(buf, b->data + *pos, (size_t)n) != 0)
			*bad = true;
	}
	free(buf);
	return *pos < b->size ? n : 0;
}

static void test_parallel(void)
{
	struct bed b;
	bed_init(&b, 64 * MIB);
	struct reader_pool *p = pool_of(4, 40 * MIB, 16, 256 * MIB);
	struct s3_fault_rule slow = { .kind = S3K_GET, .type = S3F_DELAY, .delay_ms = 30 };
	s3_fault_add(b.s3, &slow);
	bed_count(&b);
	struct reader *r = bed_reader_pool(&b, p);
	bool ok = read_all(&b, r);
	struct reader_pool_counters k;
	reader_pool_counters(p, &k);
	printf("# parallel: 64 MiB, GETs of 30 ms: %d GETs, %llu ranges ahead, at most %u in "
	       "flight and %llu MiB held\n", gets(&b),
	       (unsigned long long)stats_value(&b.st, "readahead", "ranges"), k.streams_max,
	       (unsigned long long)(k.bytes_max >> 20));
	CHECK(ok && b.cnt.bytes == b.size, "parallel: every byte as in S3, fetched once");
	/* the first two ranges ahead start together: at least 2 in flight */
	CHECK(k.streams_max >= 2 && k.streams_max <= 4,
	      "parallel: several GETs ahead in flight, never over the reader's 4 (%u)",
	      k.streams_max);
	CHECK(k.bytes_max <= 40 * MIB, "parallel: bytes ahead within the reader's 40 MiB");
	CHECK(stats_value(&b.st, "readahead", "wasted_bytes") == 0 && stats_value(&b.st, "readahead", "ranges") >= 8,
	      "parallel: ranges ahead counted (%llu), none wasted",
	      (unsigned long long)stats_value(&b.st, "readahead", "ranges"));
	reader_close(r);
	reader_pool_counters(p, &k);
	CHECK(k.streams == 0 && k.bytes == 0, "parallel: the pool is empty after close");
	reader_pool_free(p);
	bed_free(&b);
}

struct seqjob {
	struct bed *b;
	struct reader *r;
	bool ok;
};

static void *seq_read(void *arg)
{
	struct seqjob *j = arg;
	j->ok = read_all(j->b, j->r);
	return NULL;
}

static void test_pool_bounds(void)
{
	struct bed b;
	bed_init(&b, 32 * MIB);
	/* 3 readers wanting 4 GETs and 32 MiB ahead each; the pool grants 3
	 * GETs and 12 MiB in all */
	struct reader_pool *p = pool_of(4, 32 * MIB, 3, 12 * MIB);
	struct s3_fault_rule slow = { .kind = S3K_GET, .type = S3F_DELAY, .delay_ms = 20 };
	s3_fault_add(b.s3, &slow);
	struct seqjob j[3];
	pthread_t th[3];
	for (int i = 0; i < 3; i++) {
		j[i] = (struct seqjob){ &b, bed_reader_pool(&b, p), false };
		pthread_create(&th[i], NULL, seq_read, &j[i]);
	}
	bool all = true;
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		all = all && j[i].ok;
	}
	struct reader_pool_counters k;
	reader_pool_counters(p, &k);
	printf("# pool: 3 readers: at most %u GETs ahead and %llu MiB held in all, %llu ranges "
	       "not fetched ahead\n", k.streams_max, (unsigned long long)(k.bytes_max >> 20),
	       (unsigned long long)stats_value(&b.st, "readahead", "throttled"));
	CHECK(all, "pool: 3 readers at once, every byte right");
	CHECK(k.streams_max <= 3 && k.bytes_max <= 12 * MIB,
	      "pool: never more than 3 GETs ahead and 12 MiB held across readers");
	CHECK(stats_value(&b.st, "readahead", "throttled") > 0, "pool: the bound was met (ranges refused)");
	for (int i = 0; i < 3; i++)
		reader_close(j[i].r);
	reader_pool_counters(p, &k);
	CHECK(k.streams == 0 && k.bytes == 0, "pool: empty after the readers closed");
	reader_pool_free(p);
	bed_free(&b);
}

static void test_fail_midstream(void)
{
	struct bed b;
	bed_init(&b, 40 * MIB);
	struct reader_pool *p = pool_of(4, 64 * MIB, 16, 256 * MIB);
	/* GET 7: a range ahead, in the middle of the stream */
	s3_fault_fail(b.s3, S3K_GET, 7, 1, -EIO);
	struct reader *r = bed_reader_pool(&b, p);
	CHECK(read_all(&b, r) && s3_fault_injected(b.s3, S3K_GET) == 1,
	      "midstream: a range ahead failing is fetched again by the read, bytes right");
	reader_close(r);
	s3_fault_clear(b.s3);

	/* every GET from the 7th on fails: the reads before it are right, the
	 * read that needs a failed range gets the error */
	s3_fault_fail(b.s3, S3K_GET, 7, 0, -EIO);
	r = bed_reader_pool(&b, p);
	uint64_t pos = 0;
	bool bad;
	ssize_t rc = read_until_error(&b, r, &pos, &bad);
	CHECK(rc == -EIO && !bad && pos >= 1792 * KIB,
	      "midstream: the store failing: right bytes up to %llu KiB, then -EIO (%zd)",
	      (unsigned long long)(pos >> 10), rc);
	reader_close(r);
	s3_fault_clear(b.s3);
	struct reader_pool_counters k;
	reader_pool_counters(p, &k);
	CHECK(k.streams == 0 && k.bytes == 0, "midstream: the pool is empty after close");
	reader_pool_free(p);
	bed_free(&b);
}

static void test_changed_midstream(void)
{
	struct bed b;
	bed_init(&b, 48 * MIB);
	struct reader_pool *p = pool_of(4, 16 * MIB, 16, 256 * MIB);
	struct reader *r = bed_reader_pool(&b, p);
	bool ok = true;
	for (uint64_t off = 0; off < 4 * MIB && ok; off += 128 * KIB)
		ok = read_ok(&b, r, off, 128 * KIB);
	CHECK(ok && stats_value(&b.st, "readahead", "ranges") + s3_fault_seen(b.s3, S3K_GET) > 3,
	      "changed midstream: 4 MiB read, read-ahead running");
	/* another client replaces the object (same size, other bytes) */
	char *v2 = malloc(b.size);
	for (size_t i = 0; i < b.size; i++)
		v2[i] = (char)~b.data[i];
	s3_fake_object_put(b.fake, "b", "obj", v2, b.size, NULL, 0, NULL);
	free(v2);
	uint64_t pos = 4 * MIB;
	bool bad;
	ssize_t rc = read_until_error(&b, r, &pos, &bad);
	/* bytes fetched before the change may be served; at most 4 MiB read
	 * + 16 MiB ahead + one 8 MiB window: never the new bytes */
	CHECK(rc == -ESTALE && !bad && pos >= 4 * MIB && pos < 28 * MIB,
	      "changed midstream: only the old version's bytes (up to %llu MiB), then -ESTALE "
	      "(%zd)", (unsigned long long)(pos >> 20), rc);
	reader_close(r);
	reader_pool_free(p);
	bed_free(&b);
}

static void test_random_stops(void)
{
	struct bed b;
	bed_init(&b, 50 * MIB);
	struct reader_pool *p = pool_of(4, 64 * MIB, 16, 256 * MIB);
	struct reader *r = bed_reader_pool(&b, p);
	bool ok = true;
	for (uint64_t off = 0; off < 6 * MIB && ok; off += 128 * KIB)
		ok = read_ok(&b, r, off, 128 * KIB);
	CHECK(ok, "random stops: 6 MiB read in sequence");
	struct reader_pool_counters k = { .streams = 1 };
	for (int i = 0; i < 1000 && k.streams; i++) {   /* the ranges ahead land */
		usleep(5000);
		reader_pool_counters(p, &k);
	}
	int g0 = gets(&b);
	/* 20 reads, each over 2 MiB from the one before: random */
	ok = read_ok(&b, r, 30 * MIB, 1000);
	for (int i = 0; i < 20 && ok; i++)
		ok = read_ok(&b, r, (uint64_t)(i * 7 % 19) * (5 * MIB / 2), 1000);
	CHECK(ok && gets(&b) - g0 == 21,
	      "random stops: 21 random reads, 21 GETs: nothing more fetched ahead (%d)",
	      gets(&b) - g0);
	reader_close(r);
	CHECK(stats_value(&b.st, "readahead", "wasted_bytes") >= 4 * MIB,
	      "random stops: the ranges ahead never read are counted as wasted (%llu KiB)",
	      (unsigned long long)(stats_value(&b.st, "readahead", "wasted_bytes") >> 10));
	reader_pool_free(p);
	bed_free(&b);
}

/* The kernel sends a file's read-ahead as several reads at once and our
 * threads take them in any order: a read that lags 3 MiB behind the
 * furthest one is still the stream's (reader.c seq_near), so read-ahead
 * goes on and nothing it fetched is wasted. */
static void test_out_of_order(void)
{
	struct bed b;
	bed_init(&b, 24 * MIB);
	bed_count(&b);
	struct reader_pool *p = pool_of(4, 64 * MIB, 16, 256 * MIB);
	struct reader *r = bed_reader_pool(&b, p);
	bool ok = true;
	for (uint64_t off = 0; off < 7 * MIB && ok; off += 512 * KIB)
		if (off != 4 * MIB)
			ok = read_ok(&b, r, off, 512 * KIB);
	ok = ok && read_ok(&b, r, 4 * MIB, 512 * KIB);      /* the late one */
	for (uint64_t off = 7 * MIB; off < b.size && ok; off += 512 * KIB)
		ok = read_ok(&b, r, off, 512 * KIB);
	CHECK(ok, "out of order: every byte as in S3");
	CHECK(b.cnt.bytes == b.size, "out of order: %llu bytes fetched for %llu: "
	      "the late read's bytes were still held", (unsigned long long)b.cnt.bytes,
	      (unsigned long long)b.size);
	reader_close(r);
	CHECK(stats_value(&b.st, "readahead", "wasted_bytes") == 0 &&
	      stats_value(&b.st, "readahead", "ranges") >= 3,
	      "out of order: a read 3 MiB behind does not stop read-ahead (%llu ranges, "
	      "%llu bytes wasted)",
	      (unsigned long long)stats_value(&b.st, "readahead", "ranges"),
	      (unsigned long long)stats_value(&b.st, "readahead", "wasted_bytes"));
	reader_pool_free(p);
	bed_free(&b);
}

static void test_close_inflight(void)
{
	struct bed b;
	bed_init(&b, 32 * MIB);
	struct reader_pool *p = pool_of(4, 64 * MIB, 16, 256 * MIB);
	struct s3_fault_rule slow = { .kind = S3K_GET, .type = S3F_DELAY, .delay_ms = 300 };
	s3_fault_add(b.s3, &slow);
	struct reader *r = bed_reader_pool(&b, p);
	bool ok = true;
	for (uint64_t off = 0; off < 1 * MIB && ok; off += 128 * KIB)
		ok = read_ok(&b, r, off, 128 * KIB);
	struct reader_pool_counters k;
	reader_pool_counters(p, &k);
	/* the read that ended at 1 MiB started two 2 MiB ranges ahead */
	CHECK(ok && k.streams == 2 && k.bytes == 4 * MIB,
	      "close in flight: 2 ranges ahead in flight (%u, %llu bytes)", k.streams,
	      (unsigned long long)k.bytes);
	reader_close(r);
	int g = gets(&b);
	reader_pool_counters(p, &k);
	CHECK(k.streams == 0 && k.bytes == 0,
	      "close in flight: close waited for them and released their bytes");
	CHECK(stats_value(&b.st, "readahead", "wasted_bytes") == 4 * MIB,
	      "close in flight: their 4 MiB counted as wasted (%llu)",
	      (unsigned long long)stats_value(&b.st, "readahead", "wasted_bytes"));
	usleep(400 * 1000);
	CHECK(gets(&b) == g, "close in flight: no GET starts after close");
	s3_fault_clear(b.s3);
	reader_pool_free(p);
	bed_free(&b);
}

/* Many open descriptors that read and stay open keep at most the pool's
 * kept_bytes of windows and buffers between reads (here 32 MiB);
 * reads past it are still right (their windows go after the read). */
static void test_kept_bound(void)
{
	struct bed b;
	bed_init(&b, 16 * MIB);
	const uint64_t bound = 32 * MIB;
	struct reader_ra_conf rc = { 0, 0, 16, 256 * MIB, bound };   /* no read-ahead */
	struct reader_pool *p;
	if (reader_pool_new(&rc, &p))
		exit(2);
	enum { N = 8 };
	struct reader *r[N];
	bool ok = true;
	for (int i = 0; i < N; i++) {
		r[i] = bed_reader_pool(&b, p);
		for (uint64_t off = 0; off < b.size && ok; off += 128 * KIB)
			ok = read_ok(&b, r[i], off, 128 * KIB);
	}
	struct reader_pool_counters k;
	reader_pool_counters(p, &k);
	/* (kept_max <= bound holds by construction: pool_keep refuses past
	 * it; what can fail is whether the readers came to the bound at all,
	 * i.e. whether this case tests it.) */
	CHECK(ok && k.kept_max >= bound / 2,
	      "kept bound: %d descriptors read 16 MiB each and stay open: they reach the "
	      "bound (%llu MiB kept at most, bound %llu MiB)", N,
	      (unsigned long long)(k.kept_max >> 20), (unsigned long long)(bound >> 20));
	/* One more streams it past the bound: each read fetches what it
	 * needs, not a growing window thrown away after the read. */
	b.cnt.inner = b.s3;
	struct reader *x = bed_reader_pool(&b, p);
	uint64_t before = b.cnt.bytes;
	for (uint64_t off = 0; off < b.size && ok; off += 128 * KIB)
		ok = read_ok(&b, x, off, 128 * KIB);
	CHECK(ok && b.cnt.bytes - before == b.size,
	      "kept bound: a reader past it fetches each byte once (%llu MiB for 16)",
	      (unsigned long long)((b.cnt.bytes - before) >> 20));
	reader_close(x);
	for (int i = 0; i < N && ok; i++)
		ok = read_ok(&b, r[i], 15 * MIB, 64 * KIB) && read_ok(&b, r[i], MIB, 64 * KIB);
	CHECK(ok, "kept bound: every descriptor still reads right");
	for (int i = 0; i < N; i++)
		reader_close(r[i]);
	reader_pool_counters(p, &k);
	CHECK(k.kept == 0, "kept bound: nothing kept once all are closed (%llu)",
	      (unsigned long long)k.kept);
	reader_pool_free(p);
	bed_free(&b);
}

/* Read [off, off+len) as pieces: true if they are the object's bytes in
 * order and no more than READER_PIECES; the pieces stay held in pc/n. */
static bool pieces_ok(struct bed *b, struct reader *r, uint64_t off, size_t len,
		      struct reader_piece *pc, unsigned *n)
{
	ssize_t got = reader_read_pieces(r, len, off, pc, n);
	size_t want = off >= b->size ? 0 : b->size - off < len ? b->size - (size_t)off : len;
	bool ok = got == (ssize_t)want && *n <= READER_PIECES;
	size_t at = 0;
	for (unsigned i = 0; ok && i < *n; i++) {
		ok = pc[i].hold && pc[i].len && at + pc[i].len <= want &&
		     !memcmp(pc[i].p, b->data + off + at, pc[i].len);
		at += pc[i].len;
	}
	if (!ok || at != want)
		printf("# pieces of %zu at %llu: %zd in %u (want %zu)\n", len,
		       (unsigned long long)off, got, *n, want);
	return ok && at == want;
}

static void test_pieces(void)
{
	struct bed b;
	bed_init(&b, 40 * MIB + 3);
	struct reader_pool *p = pool_of(4, 16 * MIB, 16, 256 * MIB);
	struct reader *r = bed_reader_pool(&b, p);
	struct reader_piece pc[READER_PIECES];
	unsigned n;
	bool ok = true;
	unsigned most = 0;
	for (uint64_t off = 0; off < b.size && ok; off += MIB) {
		ok = pieces_ok(&b, r, off, MIB, pc, &n);
		most = n > most ? n : most;
		reader_pieces_put(pc, n);
	}
	struct reader_pool_counters k;
	reader_pool_counters(p, &k);
	CHECK(ok, "pieces: a 40 MiB stream read in 1 MiB pieces: every byte right (at most %u "
	      "pieces a read)", most);
	CHECK(k.reused > 0 && k.made < 20,
	      "pieces: the stream's ranges take buffers again from the free list (%llu made, "
	      "%llu reused)", (unsigned long long)k.made, (unsigned long long)k.reused);
	CHECK(k.free_bytes <= 64 * MIB && k.free <= 16,
	      "pieces: the free list is bounded (%u buffers, %llu MiB)", k.free,
	      (unsigned long long)(k.free_bytes >> 20));

	/* Pieces outlive the range's chunk and the reader itself. */
	ok = pieces_ok(&b, r, 3 * MIB + 5, 700 * KIB, pc, &n);
	reader_close(r);
	bool still = n > 0;
	for (unsigned i = 0, at = 0; still && i < n; at += (unsigned)pc[i].len, i++)
		still = !memcmp(pc[i].p, b.data + 3 * MIB + 5 + at, pc[i].len);
	reader_pieces_put(pc, n);
	CHECK(ok && still, "pieces: held across reader_close, the bytes stay right");

	/* No read-ahead: four 64 KiB windows made by reads going backwards
	 * (each stops at the window after it), then a read from 64 KiB
	 * before them to 64 KiB past them: five ranges, more than the
	 * pieces, so the read is copied into one buffer; the range fetched
	 * for its start is freed for the last one while its piece holds it. */
	struct reader_pool *p0 = pool_of(0, 16 * MIB, 16, 256 * MIB);
	r = bed_reader_pool(&b, p0);
	char one[1];
	const uint64_t base = 10 * MIB;
	ok = true;
	for (uint64_t w = 4; ok && w >= 1; w--)
		ok = reader_read(r, one, 1, base + w * 64 * KIB) == 1;
	int g = gets(&b);
	ok = ok && pieces_ok(&b, r, base, 384 * KIB, pc, &n);
	CHECK(ok && n == 1 && gets(&b) == g + 2,
	      "pieces: a read over five ranges: right, in one piece (%u), a GET for each of "
	      "the two no window held (%d)", n, gets(&b) - g);
	reader_pieces_put(pc, n);
	CHECK(pieces_ok(&b, r, b.size - 2, 10, pc, &n) && n == 1,
	      "pieces: a read over the end: its bytes only");
	reader_pieces_put(pc, n);
	CHECK(reader_read_pieces(r, 10, b.size, pc, &n) == 0 && n == 0,
	      "pieces: at the end: 0, no piece");
	reader_close(r);
	reader_pool_free(p0);
	reader_pool_free(p);
	bed_free(&b);
}

int main(void)
{
	test_sequential();
	test_random();
	test_changed();
	test_failures();
	test_parallel();
	test_pool_bounds();
	test_fail_midstream();
	test_changed_midstream();
	test_random_stops();
	test_out_of_order();
	test_close_inflight();
	test_kept_bound();
	test_pieces();
	return unit_exit();
}
