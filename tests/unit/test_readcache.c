/*
 * test_readcache.c — the burst buffer's read side over the fake S3 (with
 * the fault wrapper counting requests) and a real block cache in a
 * temporary directory: readers storing and reusing blocks, reads the cache
 * holds served from it directly (unaligned, partly cached objects, a
 * corrupt block among them), pins keeping a
 * replaced version's blocks for its readers, the admission rule (a cold
 * reader stores nothing and fetches only what it reads, the second open
 * stores, a corrupt stored block is fetched again, a restart keeps
 * it), the eventual policy's open without HEAD and its move on a 412.
 * The bed (unit_readcache.h) is shared with test_warm.c.
 */
#define UNIT_WITH_MD5
#include "unit.h"
#include "unit_readcache.h"

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

static void test_reader_blocks(void)
{
	struct bed b;
	bed_init(&b);
	size_t n = 5 * BS + 1234;           /* a short last block */
	char *d = pattern(n, 1), etag[33];
	put(&b, "o", d, n, etag);
	CHECK(read_all(&b, "o", etag, d, n), "reader with a cache: the bytes");
	uint64_t g = gets(&b);
	CHECK(g >= 1, "… fetched with GETs (%llu)", (unsigned long long)g);
	struct bcache_counters k;
	bcache_counters(b.bc, &k);
	CHECK(k.blocks == 6, "… and stored as 6 blocks (%llu)", (unsigned long long)k.blocks);
	CHECK(read_all(&b, "o", etag, d, n), "a second reader: the same bytes");
	CHECK(gets(&b) == g, "… with no GET");
	/* A read in the middle: a window of whole blocks from the cache. */
	struct reader *r;
	char buf[100];
	reader_open(&b.src, "b", "o", etag, n, &r);
	CHECK(reader_read(r, buf, sizeof buf, 3 * BS + 17) == (ssize_t)sizeof buf &&
	      !memcmp(buf, d + 3 * BS + 17, sizeof buf) && gets(&b) == g,
	      "a random read inside a cached block: no GET");
	reader_close(r);
	free(d);
	bed_free(&b);
}

/* Flip one data byte of block blk of (key, etag)'s file. */
static void block_flip(struct bed *b, const char *key, const char *etag, uint64_t blk)
{
	const struct bcache_id id = { "b", key, etag };
	struct bcache_hash h;
	char rel[BCACHE_NAME_MAX + 4], path[1024];
	bcache_hash_id(&id, &h);
	bcache_name_format(&h, blk, rel);
	snprintf(path, sizeof path, "%s/%s", b->dir, rel);
	unit_flip_byte(path, (off_t)bcache_hdr_len(&id) + 77, 0x40);
}

/* Read [off, off+len) in pieces of step through r; 1 if they are want's. */
static int read_span(struct reader *r, const char *want, uint64_t off, size_t len,
		     size_t step)
{
	char *buf = malloc(step);
	int ok = buf != NULL;
	for (size_t done = 0; ok && done < len; ) {
		size_t n = len - done < step ? len - done : step;
		ok = reader_read(r, buf, n, off + done) == (ssize_t)n &&
		     !memcmp(buf, want + off + done, n);
		done += n;
	}
	free(buf);
	return ok;
}

/* Blocks the cache holds are read from it directly, blocks it does not
 * hold with GETs, in one stream; a corrupt block is fetched again. */
static void test_reader_direct(void)
{
	struct bed b;
	bed_init(&b);
	size_t n = 8 * BS + 100;
	char *d = pattern(n, 5), etag[33];
	put(&b, "p", d, n, etag);
	const struct bcache_id id = { "b", "p", etag };
	for (uint64_t blk = 0; blk < 4; blk++)      /* blocks 0-3 cached */
		bcache_put(b.bc, &id, blk, d + blk * BS, BS, 0);
	bcache_put(b.bc, &id, 8, d + 8 * BS, 100, 0);   /* and the short last */
	struct bcache_counters k0, k1;
	bcache_counters(b.bc, &k0);
	uint64_t g = gets(&b);
	struct reader *r;
	if (reader_open(&b.src, "b", "p", etag, n, &r))
		exit(2);
	CHECK(read_span(r, d, 0, 4 * BS, BS) && gets(&b) == g,
	      "cached blocks read whole: the bytes, no GET");
	bcache_counters(b.bc, &k1);
	CHECK(k1.hits == k0.hits + 4 && k1.misses == k0.misses,
	      "… one hit per block (%llu) and no miss",
	      (unsigned long long)(k1.hits - k0.hits));
	/* The same as pieces: one buffer read from the block files. */
	struct reader_piece pc[READER_PIECES];
	unsigned np;
	ssize_t got = reader_read_pieces(r, 4 * BS, 0, pc, &np);
	CHECK(got == 4 * BS && np == 1 && pc[0].len == 4 * BS && !memcmp(pc[0].p, d, 4 * BS) &&
	      gets(&b) == g, "cached blocks as pieces: one piece, the bytes, no GET");
	reader_pieces_put(pc, np);
	got = reader_read_pieces(r, 4096, 8 * BS, pc, &np);
	CHECK(got == 100 && np == 1 && !memcmp(pc[0].p, d + 8 * BS, 100) && gets(&b) == g,
	      "the short last block, cached, as a piece: its 100 bytes, no GET");
	reader_pieces_put(pc, np);
	reader_close(r);
	if (reader_open(&b.src, "b", "p", etag, n, &r))
		exit(2);
	CHECK(read_span(r, d, 0, 4 * BS, 10000) && gets(&b) == g,
	      "the same blocks in unaligned pieces: the bytes, no GET");
	CHECK(read_span(r, d, 4 * BS, n - 4 * BS, 10000) && gets(&b) > g,
	      "the blocks after them, not cached: the bytes, with GETs");
	reader_close(r);
	bcache_counters(b.bc, &k0);
	CHECK(k0.blocks == 9, "… stored: 9 blocks (%llu)", (unsigned long long)k0.blocks);
	/* Block 2 goes bad on the disk: a new reader gets the right bytes. */
	block_flip(&b, "p", etag, 2);
	g = gets(&b);
	if (reader_open(&b.src, "b", "p", etag, n, &r))
		exit(2);
	CHECK(read_span(r, d, 0, n, BS), "a corrupt block among cached ones: the bytes");
	reader_close(r);
	bcache_counters(b.bc, &k1);
	CHECK(k1.corrupt == k0.corrupt + 1 && gets(&b) > g,
	      "… it failed its check once (corrupt %llu) and was fetched again",
	      (unsigned long long)k1.corrupt);
	CHECK(k1.misses == k0.misses + 1 && k1.hits == k0.hits + 8,
	      "… one miss (%llu), the 8 other blocks hits (%llu)",
	      (unsigned long long)(k1.misses - k0.misses),
	      (unsigned long long)(k1.hits - k0.hits));
	free(d);
	bed_free(&b);
}

/* Close the bed's burst buffer and open it again on the same directory
 * (a restart), waiting for its listing. */
static void bed_restart(struct bed *b, uint32_t bs, uint64_t cold_min)
{
	pins_free(b->pins);
	bcache_close(b->bc);
	struct bcache_conf c = { .dir = b->dir, .max_bytes = 64ull << 20, .block_size = bs,
				 .staged = staged_none, .cold_min = cold_min, .st = &b->st };
	char err[256];
	if (bcache_open(&c, &b->bc, err, sizeof err) || pins_new(b->bc, &b->pins))
		exit(2);
	for (int i = 0; i < 500; i++) {
		struct bcache_counters k;
		bcache_counters(b->bc, &k);
		if (!k.loading)
			break;
		usleep(10000);
	}
	b->src.bc = b->bc;
	b->src.pins = b->pins;
}

/* The admission rule through readers: an object of cold_min bytes or more
 * is not stored at its first open (a cold reader fetches only the ranges
 * it reads), is stored at its second, is served with no GET at the third
 * and after a restart; a stored block that goes bad is fetched again. A
 * small object is stored at its first read. Blocks of 256 KiB. */
static void test_cold(void)
{
	const uint32_t bs = 256 * 1024;
	struct bed b;
	bed_open_conf(&b, 64ull << 20, bs, 4 * bs, true);
	size_t n1 = 16 * bs + 100, n = 8 * bs + 100, sn = 3 * bs;
	char *d = pattern(n1, 3), *sd = pattern(sn, 4), etag[33], setag[33];
	put(&b, "big", d, n1, etag);
	put(&b, "small", sd, sn, setag);
	struct bcache_counters k;
	struct reader *r;

	/* First open: cold. A random read (past the first 2 MiB, so not
	 * taken for the start of a stream) fetches 64 KiB, not its block. */
	if (reader_open(&b.src, "b", "big", etag, n1, &r))
		exit(2);
	CHECK(reader_cold(r), "cold: the first open of a large version is cold");
	char buf[100];
	uint64_t g = gets(&b);
	bool ok = reader_read(r, buf, sizeof buf, 12 * bs + 17) == (ssize_t)sizeof buf &&
		  !memcmp(buf, d + 12 * bs + 17, sizeof buf);
	ok = ok && reader_read(r, buf, sizeof buf, 12 * bs + 150000) == (ssize_t)sizeof buf &&
	     !memcmp(buf, d + 12 * bs + 150000, sizeof buf);
	CHECK(ok && gets(&b) == g + 2,
	      "cold: two random reads 150 KB apart in one block: the bytes, one GET each "
	      "(%llu): the first fetched 64 KiB, not the block",
	      (unsigned long long)(gets(&b) - g));
	reader_close(r);
	bcache_counters(b.bc, &k);
	CHECK(k.blocks == 0 && k.cold_opens == 1 && k.not_admitted >= 2,
	      "cold: nothing stored, 1 cold open, the blocks fetched in part not stored "
	      "(blocks %llu, cold_opens %llu, not_admitted %llu)", (unsigned long long)k.blocks,
	      (unsigned long long)k.cold_opens, (unsigned long long)k.not_admitted);
	uint64_t na = k.not_admitted;

	/* Another version's first open streams all of it: right bytes,
	 * nothing stored, every block counted once. */
	char *d2 = pattern(n, 5), etag2[33];
	put(&b, "big2", d2, n, etag2);
	g = gets(&b);
	CHECK(read_all(&b, "big2", etag2, d2, n), "cold: a stream of a first open: the bytes");
	bcache_counters(b.bc, &k);
	CHECK(k.blocks == 0 && k.not_admitted == na + 9 && gets(&b) > g,
	      "… fetched (%llu GETs), 9 blocks not admitted (%llu), none stored",
	      (unsigned long long)(gets(&b) - g), (unsigned long long)(k.not_admitted - na));

	/* Its second open stores every block; the third needs no GET. */
	CHECK(read_all(&b, "big2", etag2, d2, n), "cold: the second open: the bytes");
	bcache_counters(b.bc, &k);
	CHECK(k.blocks == 9 && k.admitted == 9, "… and all 9 blocks stored (%llu, admitted %llu)",
	      (unsigned long long)k.blocks, (unsigned long long)k.admitted);
	g = gets(&b);
	CHECK(read_all(&b, "big2", etag2, d2, n) && gets(&b) == g, "… the third: no GET");

	/* A stored block gone bad is fetched again, the bytes right. */
	block_flip(&b, "big2", etag2, 4);
	uint64_t corrupt = k.corrupt;
	CHECK(read_all(&b, "big2", etag2, d2, n) && gets(&b) > g,
	      "cold: a stored block flipped on disk: the bytes, fetched again");
	bcache_counters(b.bc, &k);
	CHECK(k.corrupt == corrupt + 1, "… counted corrupt once");

	/* A cold reader of a version some of whose blocks are held (not
	 * the first): reads those from the buffer, fetches the rest. */
	char *d3 = pattern(n, 6), etag3[33];
	put(&b, "big3", d3, n, etag3);
	const struct bcache_id id3 = { "b", "big3", etag3 };
	bcache_put(b.bc, &id3, 2, d3 + 2 * bs, bs, BCACHE_WARM);
	bcache_put(b.bc, &id3, 5, d3 + 5 * bs, bs, BCACHE_WARM);
	struct bcache_counters k0;
	bcache_counters(b.bc, &k0);
	if (reader_open(&b.src, "b", "big3", etag3, n, &r))
		exit(2);
	CHECK(reader_cold(r) && read_span(r, d3, 0, n, 10000),
	      "cold: unaligned pieces of a version with two blocks held: the bytes");
	reader_close(r);
	bcache_counters(b.bc, &k);
	CHECK(k.hits - k0.hits >= 2 && k.blocks == k0.blocks,
	      "… the held blocks read from the buffer (%llu hits), nothing more stored",
	      (unsigned long long)(k.hits - k0.hits));

	/* A small object is stored at its first read. */
	CHECK(read_all(&b, "small", setag, sd, sn), "cold: a small object: the bytes");
	bcache_counters(b.bc, &k0);
	CHECK(k0.blocks == k.blocks + 3, "… stored at its first read (%llu blocks)",
	      (unsigned long long)(k0.blocks - k.blocks));

	/* A restart: the version read twice is served with no GET. */
	bed_restart(&b, bs, 4 * bs);
	g = gets(&b);
	if (reader_open(&b.src, "b", "big2", etag2, n, &r))
		exit(2);
	CHECK(!reader_cold(r), "cold: after a restart, a version read twice is not cold");
	reader_close(r);
	CHECK(read_all(&b, "big2", etag2, d2, n) && gets(&b) == g, "… its bytes with no GET");
	free(d);
	free(d2);
	free(d3);
	free(sd);
	bed_free(&b);
}

static void test_pins(void)
{
	struct bed b;
	bed_init(&b);
	size_t n = 3 * BS;
	char *v1 = pattern(n, 1), *v2 = pattern(n, 2), e1[33], e2[33];
	put(&b, "o", v1, n, e1);
	struct reader *r;
	CHECK(reader_open(&b.src, "b", "o", e1, n, &r) == 0, "open v1");
	char *buf = malloc(n);
	CHECK(reader_read(r, buf, n, 0) == (ssize_t)n && !memcmp(buf, v1, n), "read v1");
	put(&b, "o", v2, n, e2);
	/* The event for v2 releases v1's blocks: deferred while r pins v1. */
	struct bcache_id id1 = { "b", "o", e1 };
	pins_drop(b.pins, &id1, n);
	usleep(50000);
	CHECK(bcache_has(b.bc, &id1, 0) && bcache_has(b.bc, &id1, 2),
	      "a pinned version's blocks stay after the drop");
	/* A new reader of v1 (the same version, still pinned by r) reads
	 * v1 from the cache although S3 has v2 (If-Match would fail). */
	uint64_t g = gets(&b);
	CHECK(read_all(&b, "o", e1, v1, n) && gets(&b) == g,
	      "the old version is read from the cache after S3 moved on, no GET");
	reader_close(r);
	drops_settle(&b, 3);
	CHECK(!bcache_has(b.bc, &id1, 0) && !bcache_has(b.bc, &id1, 2),
	      "the last unpin releases them");
	/* Now the old version is in neither: -ESTALE. */
	CHECK(reader_open(&b.src, "b", "o", e1, n, &r) == 0, "open v1 again");
	CHECK(reader_read(r, buf, n, 0) == -ESTALE, "v1 in neither the cache nor S3: ESTALE");
	reader_close(r);
	/* A drop with no pin is done at once. */
	CHECK(read_all(&b, "o", e2, v2, n), "read v2");
	struct bcache_id id2 = { "b", "o", e2 };
	pins_drop(b.pins, &id2, n);
	drops_settle(&b, 6);
	CHECK(!bcache_has(b.bc, &id2, 1), "an unpinned version's drop is done");
	free(buf);
	free(v1);
	free(v2);
	bed_free(&b);
}

struct moved { int calls; char etag[72]; };

static void on_moved(void *ctx, const struct obj_meta *o)
{
	struct moved *m = ctx;
	m->calls++;
	snprintf(m->etag, sizeof m->etag, "%s", o->etag);
}

static void test_eventual(void)
{
	struct bed b;
	bed_init(&b);
	size_t n = 2 * BS;
	char *v1 = pattern(n, 1), *v2 = pattern(n, 2), e1[33], e2[33];
	put(&b, "o", v1, n, e1);
	CHECK(vis_policy_of("eventual") == VIS_EVENTUAL && vis_open_trusts_index(VIS_EVENTUAL) &&
	      !vis_open_trusts_index(VIS_SESSION) && !vis_fsync_commits(VIS_EVENTUAL),
	      "eventual: what it is");
	/* Open on the version the index names: no HEAD. */
	struct vis_version *v;
	uint64_t h = s3_fault_seen(b.s3, S3K_HEAD);
	CHECK(vis_version_open_known(&b.src, "b", "o", e1, n, &v) == 0 &&
	      s3_fault_seen(b.s3, S3K_HEAD) == h, "eventual open: no HEAD");
	char *buf = malloc(n);
	CHECK(vis_version_read(v, VIS_EVENTUAL, buf, n, 0) == (ssize_t)n && !memcmp(buf, v1, n),
	      "eventual read");
	vis_version_close(v);
	/* A cached object: open + read with no request at all. */
	uint64_t before = s3_fault_seen(b.s3, S3K_GET) + s3_fault_seen(b.s3, S3K_HEAD);
	vis_version_open_known(&b.src, "b", "o", e1, n, &v);
	CHECK(vis_version_read(v, VIS_EVENTUAL, buf, n, 0) == (ssize_t)n && !memcmp(buf, v1, n) &&
	      s3_fault_seen(b.s3, S3K_GET) + s3_fault_seen(b.s3, S3K_HEAD) == before,
	      "eventual: a cached object costs no S3 request");
	vis_version_close(v);
	/* The index is behind S3 (v2 landed, its event not applied): the
	 * first read moves the descriptor to v2 and says so. */
	put(&b, "o", v2, n, e2);
	struct moved m = { 0 };
	vis_version_open_known(&b.src, "b", "o", "0123456789abcdef0123456789abcdef", n, &v);
	vis_version_on_moved(v, on_moved, &m);
	CHECK(vis_version_read(v, VIS_EVENTUAL, buf, n, 0) == (ssize_t)n && !memcmp(buf, v2, n),
	      "a 412 before any byte: moved to the current version, its bytes");
	CHECK(m.calls == 1 && !strcmp(m.etag, e2), "… and the caller is told (%d)", m.calls);
	vis_version_close(v);
	/* After a byte was served, no move: ESTALE (as session). */
	char *v3 = pattern(n, 3), e3[33];
	vis_version_open_known(&b.src, "b", "o", e2, n, &v);
	CHECK(vis_version_read(v, VIS_EVENTUAL, buf, 10, 0) == 10, "read 10 bytes of v2");
	put(&b, "o", v3, n, e3);
	struct bcache_id id2 = { "b", "o", e2 };
	pins_drop(b.pins, &id2, n);   /* deferred: v pins v2 */
	CHECK(vis_version_read(v, VIS_EVENTUAL, buf, n, 0) == (ssize_t)n && !memcmp(buf, v2, n),
	      "served: it keeps reading v2 from the cache");
	vis_version_close(v);
	drops_settle(&b, 2);
	vis_version_open_known(&b.src, "b", "o", e2, n, &v);
	vis_version_served(v);
	CHECK(vis_version_read(v, VIS_EVENTUAL, buf, n, 0) == -ESTALE,
	      "a descriptor the page cache may serve never moves: ESTALE");
	vis_version_close(v);
	free(buf);
	free(v1);
	free(v2);
	free(v3);
	bed_free(&b);
}

struct race_read { struct vis_version *v; char *buf; ssize_t n; };

static void *race_read(void *arg)
{
	struct race_read *r = arg;
	r->n = vis_version_read(r->v, VIS_EVENTUAL, r->buf, BS, 0);
	return NULL;
}

/* Two reads of one eventual descriptor at once: the first meets the 412
 * and waits on a slow HEAD; meanwhile the second returns the old
 * version's bytes from the cache. The first must not move the descriptor
 * then (its bytes would be of another version): ESTALE. */
static void test_eventual_race(void)
{
	struct bed b;
	bed_init(&b);
	size_t n = 2 * BS;
	char *v1 = pattern(n, 4), *v2 = pattern(n, 5), e1[33], e2[33];
	put(&b, "o", v1, n, e1);
	struct reader *r;
	char *buf = malloc(n);
	reader_open(&b.src, "b", "o", e1, n, &r);       /* block 1 of v1 cached */
	CHECK(reader_read(r, buf, BS, BS) == (ssize_t)BS, "race: block 1 of v1 read");
	reader_close(r);
	put(&b, "o", v2, n, e2);                         /* S3 now has v2 only */
	struct s3_fault_rule slow = { .kind = S3K_HEAD, .type = S3F_DELAY, .delay_ms = 300 };
	s3_fault_add(b.s3, &slow);
	struct vis_version *v;
	vis_version_open_known(&b.src, "b", "o", e1, n, &v);
	struct race_read rr = { v, malloc(BS), 0 };
	pthread_t t;
	pthread_create(&t, NULL, race_read, &rr);
	usleep(100000);                                  /* t is in its HEAD */
	ssize_t k = vis_version_read(v, VIS_EVENTUAL, buf, BS, BS);
	pthread_join(t, NULL);
	CHECK(k == (ssize_t)BS && !memcmp(buf, v1 + BS, BS),
	      "race: the cached read returns v1's bytes (%zd)", k);
	CHECK(rr.n == -ESTALE,
	      "race: the read that met the 412 does not move the descriptor: ESTALE (%zd)", rr.n);
	s3_fault_clear(b.s3);
	vis_version_close(v);
	free(rr.buf);
	free(buf);
	free(v1);
	free(v2);
	bed_free(&b);
}

int main(void)
{
	test_reader_blocks();
	test_reader_direct();
	test_cold();
	test_pins();
	test_eventual();
	test_eventual_race();
	return unit_exit();
}
