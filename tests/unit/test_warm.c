/*
 * test_warm.c — warm on arrival (sync/cache/warm.h) over the fake S3 and a
 * real block cache (the bed of unit_readcache.h): new objects of a warm
 * view fetched in the background and read with no GET, a cache that
 * cannot be written, fetches bounded and counted.
 */
#define UNIT_WITH_MD5
#include "unit.h"
#include "unit_readcache.h"

static void test_warm(void)
{
	struct bed b;
	bed_init(&b);
	struct warm *w;
	struct warm_conf wc = { .s3 = b.s3, .bc = b.bc, .st = &b.st, .threads = 1,
				.queue_max = 4, .max_unread = 20 * BS };
	CHECK(warm_new(&wc, &w) == 0, "warm_new");
	size_t n = 3 * BS + 5;
	char *d = pattern(n, 4), e[33];
	put(&b, "w", d, n, e);
	warm_want(w, "b", "w", e, n, 64 * BS);
	struct warm_counters k = { 0 };
	for (int i = 0; i < 300 && !k.fetched; i++) {
		usleep(10000);
		warm_counters(w, &k);
	}
	CHECK(k.fetched == 1 && k.fetched_bytes == n, "warm: fetched the object (%llu bytes)",
	      (unsigned long long)k.fetched_bytes);
	uint64_t g = gets(&b);
	CHECK(read_all(&b, "w", e, d, n) && gets(&b) == g, "warm: the first read needs no GET");
	struct bcache_counters bk;
	bcache_counters(b.bc, &bk);
	CHECK(bk.warm_used >= 1, "warm: counted as used (%llu)", (unsigned long long)bk.warm_used);
	warm_want(w, "b", "w", e, n, 64 * BS);
	for (int i = 0; i < 300; i++) {
		usleep(10000);
		warm_counters(w, &k);
		if (!k.queued)
			break;
	}
	usleep(50000);
	warm_counters(w, &k);
	CHECK(gets(&b) == g && k.fetched == 1, "warm: a version already cached is not fetched again");
	warm_want(w, "b", "w", e, n, BS);
	warm_counters(w, &k);
	CHECK(k.skipped == 1, "warm: larger than max_object: skipped");
	warm_free(w);
	/* The share counts what warm blocks take, not whole blocks: eight
	 * objects of 100 bytes fit in a share of four blocks. */
	wc.max_unread = 4 * BS;
	wc.queue_max = 16;
	CHECK(warm_new(&wc, &w) == 0, "warm_new (share)");
	for (int i = 0; i < 8; i++) {
		char key[8], es[33];
		snprintf(key, sizeof key, "s%d", i);
		char *x = pattern(100, 20 + (unsigned)i);
		put(&b, key, x, 100, es);
		free(x);
		warm_want(w, "b", key, es, 100, 64 * BS);
	}
	memset(&k, 0, sizeof k);
	for (int i = 0; i < 300 && k.fetched + k.skipped + k.failed < 8; i++) {
		usleep(10000);
		warm_counters(w, &k);
	}
	CHECK(k.fetched == 8 && k.skipped == 0,
	      "warm: 8 small objects within a share of 4 blocks all fetched (%llu, "
	      "%llu skipped)", (unsigned long long)k.fetched, (unsigned long long)k.skipped);
	warm_free(w);
	/* A backlog drops the oldest: every GET waits, so wants pile up. */
	wc.threads = 1;
	wc.queue_max = 2;
	CHECK(warm_new(&wc, &w) == 0, "warm_new (backlog)");
	struct s3_fault_rule slow = { .kind = S3K_GET, .type = S3F_DELAY, .first = 1,
				      .delay_ms = 200 };
	s3_fault_add(b.s3, &slow);
	char ek[4][33];
	for (int i = 0; i < 4; i++) {
		char key[8];
		snprintf(key, sizeof key, "k%d", i);
		char *x = pattern(BS, 10 + (unsigned)i);
		put(&b, key, x, BS, ek[i]);
		free(x);
		warm_want(w, "b", key, ek[i], BS, 64 * BS);
	}
	warm_counters(w, &k);
	CHECK(k.skipped >= 1 && k.queued <= 2, "warm: a full queue drops the oldest (skipped %llu, "
	      "queued %llu)", (unsigned long long)k.skipped, (unsigned long long)k.queued);
	warm_free(w);
	s3_fault_clear(b.s3);
	free(d);
	bed_free(&b);
}

static uint64_t blocks_cached(struct bed *b, const char *key, const char *etag, uint64_t n)
{
	const struct bcache_id id = { "b", key, etag };
	uint64_t k = 0;
	for (uint64_t i = 0; i < n; i++)
		k += bcache_has(b->bc, &id, i);
	return k;
}

static struct warm_counters warm_wait(struct warm *w, uint64_t done)
{
	struct warm_counters k = { 0 };
	for (int i = 0; i < 500; i++) {
		warm_counters(w, &k);
		if (k.fetched + k.skipped + k.failed + k.held >= done &&
		    !k.queued && !k.running)
			break;
		usleep(10000);
	}
	return k;
}

/* A burst buffer that cannot store (its directory replaced by a file):
 * the first fetch fails its store and pauses warm; the wants after it
 * cost no GET. */
static void test_warm_unwritable(void)
{
	struct bed b;
	bed_open(&b, 1024 * BS, true);
	struct warm *w;
	struct warm_conf wc = { .s3 = b.s3, .bc = b.bc, .pins = b.pins, .st = &b.st,
				.threads = 1, .queue_max = 8 };
	CHECK(warm_new(&wc, &w) == 0, "warm_new (unwritable)");
	unit_rmtree(b.dir);
	FILE *fp = fopen(b.dir, "w");
	if (fp)
		fclose(fp);
	char *d = pattern(4 * BS, 40);
	uint64_t g = gets(&b);
	for (int i = 0; i < 3; i++) {
		char key[16], e[33];
		snprintf(key, sizeof key, "u%d", i);
		put(&b, key, d, 4 * BS, e);
		warm_want(w, "b", key, e, 4 * BS, 1u << 30);
		warm_wait(w, (uint64_t)i + 1);
	}
	struct warm_counters k;
	warm_counters(w, &k);
	CHECK(gets(&b) - g == 1 && k.failed == 1 && k.skipped == 2 && k.fetched == 0,
	      "warm: the cache cannot store: one GET, then paused (%llu GETs, failed %llu, "
	      "skipped %llu)", (unsigned long long)(gets(&b) - g),
	      (unsigned long long)k.failed, (unsigned long long)k.skipped);
	warm_free(w);
	unlink(b.dir);
	mkdir(b.dir, 0700);
	free(d);
	bed_free(&b);
}

/* Warm's fetch loop: cached blocks inside a chunk and whole chunks cached
 * leave no hole; a version held whole is neither fetched nor failed; stop
 * ends a fetch after its chunk in flight; the start-up listing is waited
 * for; a drop during a fetch takes the blocks that fetch stores. */
static void test_warm_fetch(void)
{
	struct bed b;
	bed_open(&b, 1024 * BS, true);
	struct warm *w;
	struct warm_conf wc = { .s3 = b.s3, .bc = b.bc, .pins = b.pins, .st = &b.st,
				.threads = 1, .queue_max = 8 };
	CHECK(warm_new(&wc, &w) == 0, "warm_new");
	const uint64_t nblk = 256;   /* two chunks of 8 MiB */
	char *d = pattern(nblk * BS, 30), e1[33], e2[33];
	put(&b, "h1", d, nblk * BS, e1);
	const struct bcache_id id1 = { "b", "h1", e1 };
	CHECK(bcache_put(b.bc, &id1, 0, d, BS, 0) == 0, "warm holes: block 0 stored");
	uint64_t g = gets(&b);
	warm_want(w, "b", "h1", e1, nblk * BS, 1u << 30);
	struct warm_counters k = warm_wait(w, 1);
	CHECK(blocks_cached(&b, "h1", e1, nblk) == nblk && k.fetched == 1 && k.failed == 0,
	      "warm holes: block 0 cached before: all %llu blocks cached after (%llu)",
	      (unsigned long long)nblk, (unsigned long long)blocks_cached(&b, "h1", e1, nblk));
	CHECK(gets(&b) - g == 2, "warm holes: one GET per chunk (%llu)",
	      (unsigned long long)(gets(&b) - g));
	char *d2 = pattern(nblk * BS, 31);
	put(&b, "h2", d2, nblk * BS, e2);
	const struct bcache_id id2 = { "b", "h2", e2 };
	for (uint64_t i = 0; i < nblk / 2; i++)
		bcache_put(b.bc, &id2, i, d2 + i * BS, BS, 0);
	warm_want(w, "b", "h2", e2, nblk * BS, 1u << 30);
	k = warm_wait(w, 2);
	CHECK(blocks_cached(&b, "h2", e2, nblk) == nblk,
	      "warm holes: first chunk cached before: the second fetched whole (%llu of %llu)",
	      (unsigned long long)blocks_cached(&b, "h2", e2, nblk), (unsigned long long)nblk);
	g = gets(&b);
	warm_want(w, "b", "h2", e2, nblk * BS, 1u << 30);
	k = warm_wait(w, 3);
	CHECK(gets(&b) == g && k.fetched == 2 && k.failed == 0 && k.held == 1,
	      "warm: a version cached whole: no GET, counted held, neither fetched nor "
	      "failed (%llu / %llu / %llu)", (unsigned long long)k.held,
	      (unsigned long long)k.fetched, (unsigned long long)k.failed);

	/* Stop: the chunk in flight ends the fetch. */
	char e3[33];
	put(&b, "h3", d, nblk * BS, e3);
	struct s3_fault_rule slow = { .kind = S3K_GET, .type = S3F_DELAY, .first = 1,
				      .delay_ms = 300 };
	s3_fault_add(b.s3, &slow);
	g = gets(&b);
	warm_want(w, "b", "h3", e3, nblk * BS, 1u << 30);
	for (int i = 0; i < 300 && gets(&b) == g; i++)
		usleep(5000);
	warm_free(w);
	s3_fault_clear(b.s3);
	CHECK(gets(&b) - g == 1, "warm_free: the fetch ends after its chunk in flight (%llu GETs)",
	      (unsigned long long)(gets(&b) - g));

	/* A drop while the GET is in flight: the blocks stored after it go. */
	CHECK(warm_new(&wc, &w) == 0, "warm_new (drop)");
	char e4[33];
	put(&b, "h4", d, 4 * BS, e4);
	const struct bcache_id id4 = { "b", "h4", e4 };
	s3_fault_add(b.s3, &slow);
	g = gets(&b);
	struct bcache_counters bk;
	bcache_counters(b.bc, &bk);
	uint64_t dropped0 = bk.dropped;
	warm_want(w, "b", "h4", e4, 4 * BS, 1u << 30);
	for (int i = 0; i < 300 && gets(&b) == g; i++)
		usleep(5000);
	pins_drop(b.pins, &id4, 4 * BS);
	k = warm_wait(w, 1);
	drops_settle(&b, dropped0 + 1);
	CHECK(blocks_cached(&b, "h4", e4, 4) == 0,
	      "warm: a drop during the fetch takes the blocks it stored (%llu left)",
	      (unsigned long long)blocks_cached(&b, "h4", e4, 4));
	s3_fault_clear(b.s3);
	warm_free(w);
	bed_free(&b);

	/* While the start-up listing runs the cache takes no block: warm waits. */
	atomic_store(&staged_hold, true);
	bed_open(&b, 1024 * BS, false);
	wc.s3 = b.s3, wc.bc = b.bc, wc.pins = b.pins, wc.st = &b.st;
	CHECK(warm_new(&wc, &w) == 0, "warm_new (listing)");
	char e5[33];
	put(&b, "h5", d, 4 * BS, e5);
	warm_want(w, "b", "h5", e5, 4 * BS, 1u << 30);
	usleep(200000);
	CHECK(gets(&b) == 0, "warm: nothing fetched while the listing runs (%llu GETs)",
	      (unsigned long long)gets(&b));
	atomic_store(&staged_hold, false);
	k = warm_wait(w, 1);
	bcache_counters(b.bc, &bk);
	CHECK(k.fetched == 1 && blocks_cached(&b, "h5", e5, 4) == 4 && bk.put_skipped == 0,
	      "warm: fetched and stored once the listing is done (fetched %llu, put_skipped %llu)",
	      (unsigned long long)k.fetched, (unsigned long long)bk.put_skipped);
	warm_free(w);
	free(d);
	free(d2);
	bed_free(&b);
}

int main(void)
{
	test_warm();
	test_warm_fetch();
	test_warm_unwritable();
	return unit_exit();
}
