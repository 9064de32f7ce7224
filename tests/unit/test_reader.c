/*
 * test_reader.c — unit tests of sync/reader.h on the in-memory store
 * (sync/s3_fake.h) behind the fault wrapper (sync/s3_fault.h): sequential
 * reads served by growing read-ahead windows (each byte fetched once),
 * random reads (one GET of 64 KiB units each), EOF and objects shorter
 * than the index said, an object changed in S3 (-ESTALE once the reader
 * needs bytes it does not hold), and every GET failure: an error, a short
 * body, -ESTALE, a failed read-ahead, concurrent readers of one range.
 */
#define UNIT_WITH_MD5
#include "unit.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/stats.h"
#include "sync/reader.h"
#include "sync/s3_fake.h"
#include "sync/s3_fault.h"

#define MIB (1u << 20)
#define KIB 1024u

struct bed {
	struct s3 *fake, *s3;    /* s3: the fault wrapper (owns the fake) */
	struct stats st;
	struct reader_counters rc;   /* the readers', registered with st */
	char *data;              /* the object "b/obj" */
	size_t size;
	char etag[33];
	struct reader_src src;   /* s3 and rc; no burst buffer */
};

static void bed_init(struct bed *b, size_t size)
{
	if (s3_fake_new(&b->fake) || s3_fault_new(b->fake, true, &b->s3) ||
	    s3_fake_bucket_add(b->fake, "b"))
		exit(2);
	stats_init(&b->st);
	reader_counters_init(&b->rc, &b->st);
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
	if (reader_open(&b->src, "b", "obj", b->etag, size, &r))
		exit(2);
	return r;
}

static int gets(struct bed *b)
{
	return (int)s3_fault_seen(b->s3, S3K_GET);
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
	struct reader *r = bed_reader(&b, b.size);
	bool ok = read_all(&b, r);
	/* windows 256 KiB, 512 KiB, 1, 2 (the first read-ahead), 4, 8 MiB,
	 * then the 4.25 MiB left: 7 GETs, each byte fetched once */
	printf("# sequential 20 MiB in 128 KiB reads: %d GETs, %llu misses, %llu hits\n",
	       gets(&b), (unsigned long long)stats_value(&b.st, "cache", "misses"),
	       (unsigned long long)stats_value(&b.st, "cache", "hits"));
	CHECK(ok, "sequential: every byte as in S3");
	CHECK(gets(&b) == 7, "sequential: 7 GETs for 160 reads (windows grow to 8 MiB) (%d)",
	      gets(&b));
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

	/* a read across two windows whose second GET fails: the bytes before */
	reader_close(r);
	r = bed_reader(&b, b.size);
	CHECK(read_ok(&b, r, 0, 1000), "failures: window [0, 256 KiB) read");
	s3_fault_fail(b.s3, S3K_GET, 1, 1, -EIO);
	char *big = malloc(512 * KIB);
	ssize_t n = reader_read(r, big, 512 * KIB, 1000);
	CHECK(n == 256 * KIB - 1000 && memcmp(big, b.data + 1000, (size_t)n) == 0,
	      "failures: a read whose second GET fails returns the bytes before it (%zd)", n);
	free(big);
	s3_fault_clear(b.s3);
	reader_close(r);

	/* the read-ahead GET failing: the read that needs it fetches itself */
	r = bed_reader(&b, b.size);
	s3_fault_fail(b.s3, S3K_GET, 4, 1, -EIO);   /* the first read-ahead (GET 4) */
	g0 = gets(&b);
	uint64_t inj0 = s3_fault_injected(b.s3, S3K_GET);
	bool all_ok = read_all(&b, r);
	/* 256 KiB, 512 KiB, 1 MiB, the 2 MiB read-ahead failing, then the read
	 * at 1.75 MiB fetches the (doubled) 4 MiB window itself, 8 MiB ahead,
	 * the 6.25 MiB left: 7 GETs */
	CHECK(all_ok && s3_fault_injected(b.s3, S3K_GET) - inj0 == 1 && gets(&b) - g0 == 7,
	      "failures: a failed read-ahead is fetched again by the read that needs it "
	      "(%d GETs, the failed one included)", gets(&b) - g0);
	s3_fault_clear(b.s3);
	reader_close(r);

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

int main(void)
{
	test_sequential();
	test_random();
	test_changed();
	test_failures();
	return unit_exit();
}
