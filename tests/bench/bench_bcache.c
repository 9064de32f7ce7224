/*
 * bench_bcache.c — figures of the block cache (sync/cache/bcache.h), printed,
 * never asserted:
 *   1. start-up: bcache_open + the background listing with N small block
 *      files (default 100,000), with the dentry/inode caches warm and
 *      after `echo 3 > /proc/sys/vm/drop_caches`; whether a put while
 *      listing is skipped, and how long a read takes then;
 *   2. put throughput of 1 MiB blocks (no fsync: page cache speed);
 *   3. read-hit throughput of those blocks after `echo 1 >
 *      /proc/sys/vm/drop_caches`, next to pread of one plain file of the
 *      same size on the same disk after the same drop, and hot (page
 *      cache); then cold again with four readers in parallel;
 *   4. CRC-32C speed, SSE4.2 and tables;
 *   5. scan resistance: a hot set read twice, then one sequential stream
 *      of 10 times the budget of other blocks, then the hot set again:
 *      how much of it is still cached (plain LRU would keep none).
 * Usage: bench-bcache [DIR [NFILES [READ_MIB]]] (DIR: a new directory on
 * the disk to measure, removed at the end; default under /tmp). Dropping
 * the caches needs root; without it the "cold" figures are marked warm.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/file.h"
#include "sync/cache/bcache.h"
#include "sync/cache/bcache_int.h"

#define MIB (1u << 20)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static bool caches_drop(const char *what)
{
	sync();
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	bool ok = fd >= 0 && write(fd, what, 1) == 1;
	if (fd >= 0)
		close(fd);
	if (!ok)
		printf("  (cannot drop caches: %s; figure below is warm)\n",
		       strerror(errno));
	return ok;
}

static struct bcache *cache_open(const char *dir, uint64_t max, uint32_t bs)
{
	struct bcache_conf conf = { .dir = dir, .max_bytes = max, .block_size = bs };
	struct bcache *bc = NULL;
	char err[256];
	int rc = bcache_open(&conf, &bc, err, sizeof err);
	if (rc) {
		fprintf(stderr, "bcache_open: %s\n", err);
		exit(1);
	}
	return bc;
}

/* Seconds until the listing is done. */
static double wait_loaded(struct bcache *bc, double t0)
{
	struct bcache_counters c;
	for (;;) {
		bcache_counters(bc, &c);
		if (!c.loading)
			return now_s() - t0;
		usleep(200);
	}
}

static void bench_startup(const char *dir, unsigned nfiles)
{
	uint32_t bs = MIB;
	uint64_t max = 1ull << 40;
	char data[100];
	memset(data, 'x', sizeof data);
	struct bcache *bc = cache_open(dir, max, bs);
	wait_loaded(bc, now_s());
	double t0 = now_s();
	for (unsigned i = 0; i < nfiles; i++) {
		char key[32];
		snprintf(key, sizeof key, "obj/%05u", i / 100);
		struct bcache_id id = { "bench", key, "etag" };
		if (bcache_put(bc, &id, i % 100, data, sizeof data, 0)) {
			fprintf(stderr, "put %u failed\n", i);
			exit(1);
		}
	}
	double tput = now_s() - t0;
	bcache_close(bc);
	printf("start-up with %u block files of %zu bytes (written in %.2f s, "
	       "%.0f puts/s)\n", nfiles, sizeof data, tput, nfiles / tput);

	for (int cold = 0; cold < 2; cold++) {
		bool dropped = cold && caches_drop("3");
		t0 = now_s();
		bc = cache_open(dir, max, bs);
		double topen = now_s() - t0;
		struct bcache_id id = { "bench", "obj/00000", "etag" };
		char got[200];
		double tr = now_s();
		ssize_t n = bcache_read(bc, &id, 7, got, sizeof got, 0);
		tr = now_s() - tr;
		int prc = bcache_put(bc, &id, 100, data, sizeof data, 0);
		double tload = wait_loaded(bc, t0);
		struct bcache_counters c;
		bcache_counters(bc, &c);
		printf("  %-5s bcache_open %.1f ms, listing done after %.1f ms "
		       "(%" PRIu64 " blocks); a read meanwhile: %zd bytes in "
		       "%.2f ms; a put meanwhile: %s\n",
		       dropped ? "cold" : "warm", topen * 1e3, tload * 1e3,
		       c.blocks, n, tr * 1e3,
		       prc == -EAGAIN ? "skipped (-EAGAIN)" :
		       prc == 0 ? "done (listing had finished)" : strerror(-prc));
		bcache_close(bc);
	}
}

struct par_reader {
	struct bcache *bc;
	const struct bcache_id *id;
	unsigned first, n, hits;
};

static void *par_read(void *arg)
{
	struct par_reader *r = arg;
	char *buf = malloc(MIB);
	for (unsigned i = r->first; buf && i < r->n; i += 4)
		r->hits += bcache_read(r->bc, r->id, i, buf, MIB, 0) == (ssize_t)MIB;
	free(buf);
	return NULL;
}

static void bench_rw(const char *dir, unsigned mib)
{
	uint32_t bs = MIB;
	char *buf = malloc(bs);
	if (!buf)
		exit(1);
	for (uint32_t i = 0; i < bs; i++)
		buf[i] = (char)(i * 2654435761u >> 13);
	char cdir[1024], plain[1024];
	snprintf(cdir, sizeof cdir, "%s/rw", dir);
	snprintf(plain, sizeof plain, "%s/plain.bin", dir);
	struct bcache *bc = cache_open(cdir, (uint64_t)(mib + 16) * MIB * 2, bs);
	wait_loaded(bc, now_s());
	struct bcache_id id = { "bench", "big/object.bin", "0123456789abcdef0123456789abcdef" };

	double t0 = now_s();
	for (unsigned i = 0; i < mib; i++) {
		buf[0] = (char)i;
		if (bcache_put(bc, &id, i, buf, bs, 0)) {
			fprintf(stderr, "put failed\n");
			exit(1);
		}
	}
	double t = now_s() - t0;
	printf("put: %u blocks of 1 MiB in %.2f s: %.0f MiB/s (no fsync)\n",
	       mib, t, mib / t);

	int fd = open(plain, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	for (unsigned i = 0; i < mib; i++)
		if (fd < 0 || write(fd, buf, bs) != (ssize_t)bs) {
			fprintf(stderr, "cannot write %s\n", plain);
			exit(1);
		}
	close(fd);

	/* Round 0: each after a drop of the page cache. Round 1: each read
	 * twice, the second timed (all in the page cache). */
	for (int round = 0; round < 2; round++) {
		bool cold = round == 0 && caches_drop("1");
		unsigned hits = 0;
		double tc = 0, tp = 0;
		for (int pass = 0; pass <= round; pass++) {
			hits = 0;
			t0 = now_s();
			for (unsigned i = 0; i < mib; i++)
				hits += bcache_read(bc, &id, i, buf, bs, 0) == (ssize_t)bs;
			tc = now_s() - t0;
		}
		if (round == 0)
			caches_drop("1");
		fd = open(plain, O_RDONLY);
		for (int pass = 0; pass <= round; pass++) {
			t0 = now_s();
			for (unsigned i = 0; i < mib; i++)
				if (pread(fd, buf, bs, (off_t)i * bs) != (ssize_t)bs)
					break;
			tp = now_s() - t0;
		}
		close(fd);
		printf("read %s: bcache %u/%u hits %.0f MiB/s; plain pread %.0f "
		       "MiB/s; ratio %.0f %%\n", cold ? "after drop_caches" :
		       "again (page cache)", hits, mib, mib / tc, mib / tp,
		       100.0 * tp / tc);
	}
	/* Cold again, four readers taking every fourth block: what a reader
	 * that reads ahead (several blocks in flight) gets from the cache. */
	struct par_reader pr[4];
	pthread_t th[4];
	caches_drop("1");
	t0 = now_s();
	for (int i = 0; i < 4; i++) {
		pr[i] = (struct par_reader){ bc, &id, (unsigned)i, mib, 0 };
		pthread_create(&th[i], NULL, par_read, &pr[i]);
	}
	unsigned phits = 0;
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		phits += pr[i].hits;
	}
	t = now_s() - t0;
	printf("read after drop_caches, 4 readers in parallel: %u/%u hits "
	       "%.0f MiB/s\n", phits, mib, mib / t);
	bcache_close(bc);

	double tsw = now_s();
	uint32_t crc = 0;
	for (int i = 0; i < 256; i++)
		crc = bcache_crc32c_sw(crc, buf, bs);
	tsw = now_s() - tsw;
	double thw = 0;
	if (bcache_crc32c_hw_ok()) {
		thw = now_s();
		for (int i = 0; i < 256; i++)
			crc = bcache_crc32c_hw(crc, buf, bs);
		thw = now_s() - thw;
	}
	printf("crc32c over 256 MiB: tables %.0f MiB/s, SSE4.2 %s%.0f MiB/s "
	       "(%08x)\n", 256 / tsw, thw ? "" : "n/a ", thw ? 256 / thw : 0.0,
	       crc);
	unlink(plain);
	free(buf);
}

/* 5. The hot set survives one long sequential read. */
static void bench_scan_resist(const char *dir)
{
	const uint32_t bs = 64u << 10;
	const unsigned budget_blocks = 256, hot = 64, stream = 10 * budget_blocks;
	char sdir[1024];
	snprintf(sdir, sizeof sdir, "%s/scan", dir);
	struct bcache *bc = cache_open(sdir, (uint64_t)budget_blocks * (bs + 4096), bs);
	wait_loaded(bc, now_s());
	char *buf = malloc(bs);
	if (!buf)
		exit(1);
	memset(buf, 'h', bs);
	struct bcache_id hid = { "bench", "hot", "etag-hot" };
	for (unsigned i = 0; i < hot; i++)
		bcache_put(bc, &hid, i, buf, bs, 0);
	for (unsigned i = 0; i < hot; i++)       /* read once more: protected */
		bcache_read(bc, &hid, i, buf, bs, 0);
	struct bcache_id sid = { "bench", "stream", "etag-stream" };
	double t0 = now_s();
	for (unsigned i = 0; i < stream; i++) {  /* one scan, each block once */
		if (bcache_read(bc, &sid, i, buf, bs, 0) < 0)
			bcache_put(bc, &sid, i, buf, bs, 0);
	}
	double secs = now_s() - t0;
	unsigned kept = 0;
	for (unsigned i = 0; i < hot; i++)
		kept += bcache_read(bc, &hid, i, buf, bs, 0) == (ssize_t)bs;
	struct bcache_counters c;
	bcache_counters(bc, &c);
	printf("scan resistance: %u hot blocks read twice, then a stream of %u other blocks "
	       "(%u x the budget of %u blocks, %.0f blocks/s): %u of %u hot blocks still "
	       "cached (plain LRU: 0); %" PRIu64 " evictions\n", hot, stream,
	       stream / budget_blocks, budget_blocks, stream / secs, kept, hot, c.evictions);
	free(buf);
	bcache_close(bc);
}

int main(int argc, char **argv)
{
	char tmpl[] = "/tmp/facetfs-bench-bcache-XXXXXX";
	const char *dir = argc > 1 ? argv[1] : mkdtemp(tmpl);
	unsigned nfiles = argc > 2 ? (unsigned)atoi(argv[2]) : 100000;
	unsigned mib = argc > 3 ? (unsigned)atoi(argv[3]) : 256;
	if (!dir || file_mkdir_p(dir, 0755)) {
		fprintf(stderr, "cannot make %s\n", dir ? dir : "a directory");
		return 1;
	}
	char sdir[1024];
	snprintf(sdir, sizeof sdir, "%s/startup", dir);
	bench_startup(sdir, nfiles);
	bench_rw(dir, mib);
	bench_scan_resist(dir);
	char cmd[1200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
	return 0;
}
