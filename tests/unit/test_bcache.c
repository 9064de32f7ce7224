/*
 * test_bcache.c — unit tests of the block cache (sync/cache/bcache.h) in a
 * temporary directory: CRC-32C (tables and SSE4.2) against known vectors,
 * names, configuration errors, round trips (full, short last block,
 * partial reads), identity and checksum failures (flipped byte, truncated
 * file), temporary files left by a crash, persistence across close/open
 * with the LRU order taken from mtimes, the budget (also shrunk by staged
 * bytes), scan resistance, the DIR lock, a removed DIR, a broken
 * subdirectory, drops, warm counters, the admission rule (a large
 * version's first open cold, its second and a held first block admitted,
 * across a restart), and four threads at once followed by a check that
 * the accounting equals the files on disk.
 */
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stats.h"
#include "sync/cache/bcache.h"
#include "sync/cache/bcache_int.h"

#define BS (64u * 1024)              /* the block size of most tests */

static const struct bcache_id ID_A = { "bkt", "dir/a.bin", "etag-a-1" };
static const struct bcache_id ID_B = { "bkt", "dir/b.bin", "etag-b-1" };

/* The charge of one full BS block of id. */
static uint64_t full_charge(const struct bcache_id *id)
{
	return bcache_charge(bcache_hdr_len(id) + BS);
}

/* Bytes of block blk of an object tagged t. */
static void fill(char *buf, size_t len, unsigned t, uint64_t blk)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (t + 1) ^ (blk + 7) * 0xff51afd7ed558ccdull;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (char)x;
	}
}

static struct bcache *open_ok(const char *dir, uint64_t max, uint32_t bs,
			      uint64_t (*staged)(void *), void *ctx,
			      struct stats *st)
{
	struct bcache_conf conf = { .dir = dir, .max_bytes = max, .block_size = bs,
				    .staged = staged, .staged_ctx = ctx, .st = st };
	struct bcache *bc = NULL;
	char err[256] = "";
	int rc = bcache_open(&conf, &bc, err, sizeof err);
	if (rc) {
		printf("# bcache_open %s: %d %s\n", dir, rc, err);
		exit(2);
	}
	return bc;
}

/* Wait (up to 30 s) until the start-up listing is done. */
static void wait_loaded(struct bcache *bc)
{
	struct bcache_counters c;
	for (int i = 0; i < 30000; i++) {
		bcache_counters(bc, &c);
		if (!c.loading)
			return;
		usleep(1000);
	}
	printf("# listing never finished\n");
	exit(2);
}

/* Wait (up to 30 s) until cond(bc) holds; its result. */
static bool wait_for(struct bcache *bc, bool (*cond)(struct bcache *, void *),
		     void *arg)
{
	for (int i = 0; i < 30000; i++) {
		if (cond(bc, arg))
			return true;
		usleep(1000);
	}
	return false;
}

static bool not_cached(struct bcache *bc, void *arg)
{
	const struct bcache_id *id = arg;
	return !bcache_has(bc, id, 0);
}

/* The block files under dir: count and sum of charges (temporary files
 * counted in *tmp when not NULL). The first one's path into first. */
static size_t files_scan(const char *dir, uint64_t *charges, size_t *tmp,
			 char *first, size_t firstlen)
{
	size_t n = 0;
	if (charges)
		*charges = 0;
	if (tmp)
		*tmp = 0;
	for (unsigned x = 0; x < 256; x++) {
		char sub[512];
		snprintf(sub, sizeof sub, "%s/%02x", dir, x);
		DIR *d = opendir(sub);
		if (!d)
			continue;
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.') {
				if (tmp && !strncmp(de->d_name, ".tmp-", 5))
					(*tmp)++;
				continue;
			}
			char p[1024];
			snprintf(p, sizeof p, "%s/%s", sub, de->d_name);
			struct stat st;
			if (stat(p, &st))
				continue;
			if (!n && first)
				snprintf(first, firstlen, "%s", p);
			if (charges)
				*charges += bcache_charge((uint64_t)st.st_size);
			n++;
		}
		closedir(d);
	}
	return n;
}

static void block_path(const char *dir, const struct bcache_id *id,
		       uint64_t blk, char *path, size_t len)
{
	struct bcache_hash h;
	char rel[BCACHE_NAME_MAX + 4];
	bcache_hash_id(id, &h);
	bcache_name_format(&h, blk, rel);
	snprintf(path, len, "%s/%s", dir, rel);
}

/* ---- tests ------------------------------------------------------------ */

static void test_crc(void)
{
	const char *v = "123456789";
	CHECK(bcache_crc32c_sw(0, v, 9) == 0xE3069283u,
	      "crc32c tables: \"123456789\" -> E3069283 (got %08X)",
	      bcache_crc32c_sw(0, v, 9));
	unsigned char z[32], ff[32];
	memset(z, 0, sizeof z);
	memset(ff, 0xff, sizeof ff);
	CHECK(bcache_crc32c_sw(0, z, 32) == 0x8A9136AAu &&
	      bcache_crc32c_sw(0, ff, 32) == 0x62A8AB43u,
	      "crc32c tables: 32 zero bytes -> 8A9136AA, 32 0xFF -> 62A8AB43");
	CHECK(bcache_crc32c_sw(bcache_crc32c_sw(0, v, 4), v + 4, 5) == 0xE3069283u,
	      "crc32c tables: in two pieces, the same");
	if (!bcache_crc32c_hw_ok()) {
		printf("# no SSE4.2 on this CPU: the instruction path is not run\n");
		return;
	}
	CHECK(bcache_crc32c_hw(0, v, 9) == 0xE3069283u &&
	      bcache_crc32c_hw(0, z, 32) == 0x8A9136AAu &&
	      bcache_crc32c_hw(0, ff, 32) == 0x62A8AB43u,
	      "crc32c SSE4.2: the same known vectors");
	static char buf[70000];
	fill(buf, sizeof buf, 3, 3);
	int bad = 0;
	for (size_t off = 0; off < 9; off++)
		for (size_t len = 0; len < 300; len += 7)
			if (bcache_crc32c_hw(0, buf + off, len) !=
			    bcache_crc32c_sw(0, buf + off, len))
				bad++;
	/* Around the three-stream rounds of 3 x 8 KiB. */
	const size_t big[] = { 24575, 24576, 24577, 24583, 49152, 49160,
			       sizeof buf - 1, sizeof buf };
	for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
		for (uint32_t seed = 0; seed < 2; seed++)
			if (bcache_crc32c_hw(seed * 5, buf + (sizeof buf - big[i]),
					     big[i]) !=
			    bcache_crc32c_sw(seed * 5, buf + (sizeof buf - big[i]),
					     big[i]))
				bad++;
	CHECK(bad == 0, "crc32c SSE4.2 equals the tables on 403 lengths, "
	      "offsets and seeds");
}

static void test_names(void)
{
	struct bcache_hash a, a2, b, p;
	bcache_hash_id(&ID_A, &a);
	bcache_hash_id(&ID_A, &a2);
	bcache_hash_id(&ID_B, &b);
	struct bcache_id shift = { "bkt", "dir/a.bi", "netag-a-1" };
	struct bcache_hash s;
	bcache_hash_id(&shift, &s);
	CHECK(a.h[0] == a2.h[0] && a.h[1] == a2.h[1] &&
	      (a.h[0] != b.h[0] || a.h[1] != b.h[1]) &&
	      (a.h[0] != s.h[0] || a.h[1] != s.h[1]),
	      "name hash: stable, and differs for other ids (also moved bytes)");
	char rel[BCACHE_NAME_MAX + 4];
	uint64_t blk = 0;
	bcache_name_format(&a, 0x1234abcull, rel);
	CHECK(strlen(rel) == 3 + 32 + 1 + 7 && rel[2] == '/' &&
	      !strncmp(rel, rel + 3, 2) &&
	      bcache_name_parse(rel + 3, &p, &blk) == 0 && blk == 0x1234abcull &&
	      p.h[0] == a.h[0] && p.h[1] == a.h[1],
	      "block name %s parses back", rel);
	CHECK(bcache_name_parse("lock", &p, &blk) == -EINVAL &&
	      bcache_name_parse(".tmp-1-2", &p, &blk) == -EINVAL,
	      "other names are not blocks");
}

static void test_conf(const char *root)
{
	char dir[512], err[256];
	snprintf(dir, sizeof dir, "%s/conf", root);
	struct bcache *bc = NULL;
	struct bcache_conf c = { .dir = dir, .max_bytes = BS - 1, .block_size = BS };
	int rc = bcache_open(&c, &bc, err, sizeof err);
	CHECK(rc == -EINVAL && !bc && strstr(err, "cache.max_bytes (65535) is "
	      "smaller than one block (cache.block_size 65536)"),
	      "max_bytes < block_size: -EINVAL, \"%s\"", err);
	c.max_bytes = 1u << 30;
	c.block_size = 3 * BS;
	rc = bcache_open(&c, &bc, err, sizeof err);
	CHECK(rc == -EINVAL && !bc, "block size not a power of two: -EINVAL (%s)", err);
	c.block_size = BCACHE_BLOCK_MAX * 2;
	rc = bcache_open(&c, &bc, err, sizeof err);
	CHECK(rc == -EINVAL, "block size above the maximum: -EINVAL");
	c.block_size = BCACHE_BLOCK_MIN / 2;
	rc = bcache_open(&c, &bc, err, sizeof err);
	CHECK(rc == -EINVAL, "block size below the minimum: -EINVAL");
}

static void test_roundtrip(const char *root)
{
	char dir[512];
	snprintf(dir, sizeof dir, "%s/rt/deeper", root);
	struct stats st;
	stats_init(&st);
	struct bcache *bc = open_ok(dir, 64ull * BS, BS, NULL, NULL, &st);
	wait_loaded(bc);
	CHECK(bcache_block_size(bc) == BS, "block size %u", bcache_block_size(bc));
	static char data[BS], got[BS + 100];
	fill(data, BS, 1, 0);
	CHECK(bcache_put(bc, &ID_A, 0, data, BS, 0) == 0, "put a full block");
	memset(got, 0, sizeof got);
	ssize_t n = bcache_read(bc, &ID_A, 0, got, sizeof got, 0);
	CHECK(n == BS && !memcmp(got, data, BS), "read it back whole: %zd bytes", n);
	n = bcache_read(bc, &ID_A, 0, got, 1000, 5000);
	CHECK(n == 1000 && !memcmp(got, data + 5000, 1000), "partial read at 5000");
	n = bcache_read(bc, &ID_A, 0, got, 4096, BS - 100);
	CHECK(n == 100 && !memcmp(got, data + BS - 100, 100),
	      "read past the block's end: the 100 bytes left");
	n = bcache_read(bc, &ID_A, 0, got, 4096, BS);
	CHECK(n == 0, "read at the block's end: 0");

	fill(data, 777, 1, 1);
	CHECK(bcache_put(bc, &ID_A, 1, data, 777, 0) == 0, "put a short last block");
	n = bcache_read(bc, &ID_A, 1, got, sizeof got, 0);
	CHECK(n == 777 && !memcmp(got, data, 777), "read it: %zd bytes", n);
	n = bcache_read(bc, &ID_A, 1, got, 10, 770);
	CHECK(n == 7 && !memcmp(got, data + 770, 7), "its tail: 7 bytes");

	struct bcache_id other = ID_A;
	other.etag = "etag-a-2";
	n = bcache_read(bc, &other, 0, got, sizeof got, 0);
	CHECK(n == -ENOENT, "another ETag of the same key: a miss");
	n = bcache_read(bc, &ID_A, 7, got, sizeof got, 0);
	CHECK(n == -ENOENT, "a block never put: a miss");
	CHECK(bcache_has(bc, &ID_A, 0) && bcache_has(bc, &ID_A, 1) &&
	      !bcache_has(bc, &ID_A, 2) && !bcache_has(bc, &other, 0),
	      "bcache_has agrees");
	CHECK(bcache_put(bc, &ID_A, 2, data, BS + 1, 0) == -EINVAL &&
	      bcache_put(bc, &ID_A, 2, data, 0, 0) == -EINVAL,
	      "put of more than a block or of nothing: -EINVAL");

	/* Replace block 1 with other bytes: the new ones are read. */
	fill(data, 500, 9, 1);
	CHECK(bcache_put(bc, &ID_A, 1, data, 500, 0) == 0, "put over a cached block");
	n = bcache_read(bc, &ID_A, 1, got, sizeof got, 0);
	CHECK(n == 500 && !memcmp(got, data, 500), "the new bytes are read");

	struct bcache_counters c;
	bcache_counters(bc, &c);
	uint64_t charges = 0;
	size_t files = files_scan(dir, &charges, NULL, NULL, 0);
	CHECK(c.hits == 7 && c.misses == 2 && c.blocks == 2 && files == 2 &&
	      c.used_bytes == charges,
	      "counters: hits %" PRIu64 " misses %" PRIu64 " blocks %" PRIu64
	      " used %" PRIu64 " = files' charges %" PRIu64, c.hits, c.misses,
	      c.blocks, c.used_bytes, charges);
	CHECK(stats_value(&st, "cache", "hits") == 7 && stats_value(&st, "cache", "misses") == 2,
	      "stats cache.hits/misses bumped too");
	bcache_close(bc);
	stats_release(&st);
}

static void test_corrupt(const char *root)
{
	char dir[512], path[1024];
	snprintf(dir, sizeof dir, "%s/corrupt", root);
	struct bcache *bc = open_ok(dir, 64ull * BS, BS, NULL, NULL, NULL);
	wait_loaded(bc);
	static char data[BS], got[BS];
	fill(data, BS, 2, 0);
	bcache_put(bc, &ID_A, 0, data, BS, 0);
	block_path(dir, &ID_A, 0, path, sizeof path);
	/* Flip one data byte. */
	unit_flip_byte(path, (off_t)bcache_hdr_len(&ID_A) + 1234, 0x10);
	ssize_t n = bcache_read(bc, &ID_A, 0, got, sizeof got, 0);
	struct bcache_counters c;
	bcache_counters(bc, &c);
	CHECK(n == -ENOENT && c.corrupt == 1 && access(path, F_OK) != 0 &&
	      c.blocks == 0 && c.used_bytes == 0,
	      "a flipped data byte: -ENOENT, corrupt %" PRIu64 ", file gone, "
	      "entry gone", c.corrupt);
	n = bcache_read(bc, &ID_A, 0, got, 10, 0);
	CHECK(n == -ENOENT, "read again: a plain miss");

	/* Flip a byte of the key in the header: the header sum catches it. */
	bcache_put(bc, &ID_A, 0, data, BS, 0);
	unit_flip_byte(path, BCACHE_HDR_FIXED + 3 + 2, 1);
	n = bcache_read(bc, &ID_A, 0, got, 100, 0);
	bcache_counters(bc, &c);
	CHECK(n == -ENOENT && c.corrupt == 2 && access(path, F_OK) != 0,
	      "a flipped header byte (partial read): -ENOENT, counted, removed");

	/* Truncate it. */
	bcache_put(bc, &ID_A, 0, data, BS, 0);
	if (truncate(path, (off_t)bcache_hdr_len(&ID_A) + BS / 2))
		exit(2);
	n = bcache_read(bc, &ID_A, 0, got, sizeof got, 0);
	bcache_counters(bc, &c);
	CHECK(n == -ENOENT && c.corrupt == 3 && access(path, F_OK) != 0,
	      "a truncated block file: -ENOENT, counted, removed");

	/* Another object's block under this one's name: identity mismatch. */
	char pb[1024];
	bcache_put(bc, &ID_B, 0, data, BS, 0);
	block_path(dir, &ID_B, 0, pb, sizeof pb);
	bcache_put(bc, &ID_A, 0, data, BS, 0);
	char cmd[2200];
	snprintf(cmd, sizeof cmd, "cp '%s' '%s'", pb, path);
	if (system(cmd))
		exit(2);
	n = bcache_read(bc, &ID_A, 0, got, sizeof got, 0);
	bcache_counters(bc, &c);
	CHECK(n == -ENOENT && c.corrupt == 4,
	      "a block of another object under this name: a miss, counted");
	n = bcache_read(bc, &ID_B, 0, got, sizeof got, 0);
	CHECK(n == BS && !memcmp(got, data, BS), "the other object still reads");
	bcache_close(bc);
}

static void test_persist(const char *root)
{
	char dir[512], tmp[1024];
	snprintf(dir, sizeof dir, "%s/persist", root);
	uint64_t fc = full_charge(&ID_A);
	struct bcache *bc = open_ok(dir, 3 * fc, BS, NULL, NULL, NULL);
	wait_loaded(bc);
	static char data[3][BS], got[BS];
	for (int i = 0; i < 3; i++) {
		fill(data[i], BS, 4, (uint64_t)i);
		bcache_put(bc, &ID_A, (uint64_t)i, data[i], BS, 0);
	}
	bcache_close(bc);

	/* mtimes: block 1 oldest, then 2, then 0. */
	time_t now = time(NULL);
	const time_t age[3] = { 10, 300, 200 };
	for (int i = 0; i < 3; i++) {
		char p[1024];
		block_path(dir, &ID_A, (uint64_t)i, p, sizeof p);
		struct timespec ts[2] = { { now - age[i], 0 }, { now - age[i], 0 } };
		if (utimensat(AT_FDCWD, p, ts, 0))
			exit(2);
	}
	/* A temporary file left by a crash. */
	block_path(dir, &ID_A, 0, tmp, sizeof tmp);
	char *slash = strrchr(tmp, '/');
	snprintf(slash + 1, 64, ".tmp-99999-1");
	int fd = open(tmp, O_WRONLY | O_CREAT, 0644);
	if (fd < 0 || write(fd, "half", 4) != 4)
		exit(2);
	close(fd);

	bc = open_ok(dir, 3 * fc, BS, NULL, NULL, NULL);
	ssize_t n = bcache_read(bc, &ID_A, 2, got, sizeof got, 0);
	CHECK(n == BS && !memcmp(got, data[2], BS),
	      "after reopen: a block reads at once (listing may still run)");
	wait_loaded(bc);
	struct bcache_counters c;
	bcache_counters(bc, &c);
	CHECK(access(tmp, F_OK) != 0, "the temporary file was removed at open");
	CHECK(c.blocks == 3 && c.used_bytes == 3 * fc,
	      "the listing found 3 blocks, %" PRIu64 " bytes", c.used_bytes);
	/* Block 2 was read (protected now); of the others block 1 is the
	 * oldest: a new block evicts it. */
	CHECK(bcache_put(bc, &ID_B, 0, data[0], BS, 0) == 0, "put a 4th block");
	CHECK(!bcache_has(bc, &ID_A, 1) && bcache_has(bc, &ID_A, 0) &&
	      bcache_has(bc, &ID_A, 2) && bcache_has(bc, &ID_B, 0),
	      "the oldest by mtime (block 1) was evicted, not block 0");
	CHECK(bcache_put(bc, &ID_B, 1, data[0], BS, 0) == 0 &&
	      !bcache_has(bc, &ID_A, 0) && bcache_has(bc, &ID_A, 2),
	      "the next put evicts block 0 (probation), the read block stays");
	n = bcache_read(bc, &ID_A, 0, got, sizeof got, 0);
	CHECK(n == -ENOENT, "evicted: a miss");
	bcache_counters(bc, &c);
	CHECK(c.evictions == 2 && c.used_bytes <= 3 * fc, "evictions %" PRIu64,
	      c.evictions);
	bcache_close(bc);
}

/* A subdirectory the start-up listing cannot open (a symbolic link to
 * itself: ELOOP) costs only its own blocks: the others are listed, read
 * and counted, and puts go on inside the budget. */
static void test_list_fail(const char *root)
{
	char dir[512];
	snprintf(dir, sizeof dir, "%s/listfail", root);
	uint64_t fc = full_charge(&ID_A);
	struct bcache *bc = open_ok(dir, 8 * fc, BS, NULL, NULL, NULL);
	wait_loaded(bc);
	static char data[BS], got[BS];
	for (uint64_t i = 0; i < 4; i++) {
		fill(data, BS, 7, i);
		bcache_put(bc, &ID_A, i, data, BS, 0);
	}
	bcache_close(bc);
	char p[1024], sub[1100];
	block_path(dir, &ID_A, 0, p, sizeof p);
	unsigned used_xx = 0;
	sscanf(strrchr(p, '/') - 2, "%2x", &used_xx);   /* all four share it */
	snprintf(sub, sizeof sub, "%s/%02x", dir, (used_xx + 1) & 0xff);
	if (symlink(sub, sub) != 0)
		exit(2);
	bc = open_ok(dir, 8 * fc, BS, NULL, NULL, NULL);
	wait_loaded(bc);
	struct bcache_counters c;
	bcache_counters(bc, &c);
	CHECK(c.blocks == 4 && c.used_bytes == 4 * fc,
	      "list fail: one subdirectory failing, the others' 4 blocks are known (%" PRIu64 ")",
	      c.blocks);
	fill(data, BS, 7, 2);
	CHECK(bcache_read(bc, &ID_A, 2, got, sizeof got, 0) == BS && !memcmp(got, data, BS),
	      "list fail: a listed block reads");
	CHECK(bcache_put(bc, &ID_B, 0, data, BS, 0) == 0,
	      "list fail: puts go on after the listing");
	bcache_close(bc);
	unlink(sub);
}

struct staged_box {
	_Atomic uint64_t v;
};

static uint64_t staged_get(void *ctx)
{
	struct staged_box *b = ctx;
	return atomic_load(&b->v);
}

static void test_budget(const char *root)
{
	char dir[512];
	snprintf(dir, sizeof dir, "%s/budget", root);
	uint64_t fc = full_charge(&ID_A);
	uint64_t max = 10 * fc + fc / 2;
	struct staged_box sb = { 0 };
	struct bcache *bc = open_ok(dir, max, BS, staged_get, &sb, NULL);
	wait_loaded(bc);
	static char data[BS];
	int over = 0, fails = 0;
	struct bcache_counters c;
	for (uint64_t i = 0; i < 100; i++) {
		fill(data, BS, 5, i);
		if (bcache_put(bc, &ID_A, i, data, i % 3 ? BS : 1000 + i, 0))
			fails++;
		bcache_counters(bc, &c);
		if (c.used_bytes > max)
			over++;
	}
	uint64_t charges;
	size_t files = files_scan(dir, &charges, NULL, NULL, 0);
	CHECK(fails == 0 && over == 0 && c.evictions > 80,
	      "100 puts into 10.5 blocks: used never over the budget (%d times), "
	      "%" PRIu64 " evictions", over, c.evictions);
	CHECK(files == c.blocks && charges == c.used_bytes,
	      "%zu files on disk, %" PRIu64 " bytes charged = counters", files,
	      charges);

	/* Staging grows to 6 blocks: trim leaves 4.5 blocks of clean data. */
	atomic_store(&sb.v, 6 * fc);
	bcache_trim(bc);
	bcache_counters(bc, &c);
	CHECK(c.used_bytes <= max - 6 * fc && c.blocks > 0,
	      "staged 6 blocks + trim: used %" PRIu64 " <= %" PRIu64 ", %" PRIu64
	      " blocks left", c.used_bytes, max - 6 * fc, c.blocks);
	over = 0;
	for (uint64_t i = 100; i < 120; i++) {
		fill(data, BS, 5, i);
		bcache_put(bc, &ID_A, i, data, BS, 0);
		bcache_counters(bc, &c);
		if (c.used_bytes > max - 6 * fc)
			over++;
	}
	CHECK(over == 0, "20 more puts stay inside the shrunk budget");
	atomic_store(&sb.v, max);
	int rc = bcache_put(bc, &ID_A, 500, data, BS, 0);
	bcache_trim(bc);
	bcache_counters(bc, &c);
	CHECK(rc == -ENOSPC && c.used_bytes == 0 && c.blocks == 0 &&
	      files_scan(dir, NULL, NULL, NULL, 0) == 0,
	      "staging holds the whole budget: put skipped, trim empties the cache");
	bcache_close(bc);
}

static void test_scan(const char *root)
{
	char dir[512];
	snprintf(dir, sizeof dir, "%s/scan", root);
	uint64_t fc = full_charge(&ID_A);
	uint64_t max = 20 * fc;
	struct bcache *bc = open_ok(dir, max, BS, NULL, NULL, NULL);
	wait_loaded(bc);
	static char data[BS], got[BS];
	for (uint64_t i = 0; i < 5; i++) {
		fill(data, BS, 6, i);
		bcache_put(bc, &ID_A, i, data, BS, 0);
		bcache_read(bc, &ID_A, i, got, sizeof got, 0);
	}
	/* A sequential stream of 10x the budget, each block put once. */
	for (uint64_t i = 0; i < 200; i++) {
		fill(data, BS, 7, i);
		bcache_put(bc, &ID_B, i, data, BS, 0);
	}
	int hits = 0;
	for (uint64_t i = 0; i < 5; i++) {
		fill(data, BS, 6, i);
		if (bcache_read(bc, &ID_A, i, got, sizeof got, 0) == BS &&
		    !memcmp(got, data, BS))
			hits++;
	}
	struct bcache_counters c;
	bcache_counters(bc, &c);
	CHECK(hits == 5 && c.used_bytes <= max,
	      "after streaming 200 blocks through a 20-block cache the 5 hot "
	      "blocks still hit (%d of 5), %" PRIu64 " evictions", hits,
	      c.evictions);
	bcache_close(bc);
}

static void test_lock(const char *root)
{
	char dir[512], err[256] = "", want[64];
	snprintf(dir, sizeof dir, "%s/lock", root);
	struct bcache *bc = open_ok(dir, 16ull * BS, BS, NULL, NULL, NULL);
	struct bcache_conf conf = { .dir = dir, .max_bytes = 16ull * BS, .block_size = BS };
	struct bcache *bc2 = NULL;
	int rc = bcache_open(&conf, &bc2, err, sizeof err);
	snprintf(want, sizeof want, "(pid %ld)", (long)getpid());
	CHECK(rc == -EBUSY && !bc2 && strstr(err, "is used by another gateway") &&
	      strstr(err, want), "a second open of the same dir: -EBUSY, \"%s\"",
	      err);
	bcache_close(bc);
	rc = bcache_open(&conf, &bc2, err, sizeof err);
	CHECK(rc == 0, "after close it opens again");
	bcache_close(bc2);
}

static void test_bad_dir(const char *root)
{
	char dir[512], cmd[2200], path[1024];
	snprintf(dir, sizeof dir, "%s/gone", root);
	struct bcache *bc = open_ok(dir, 16ull * BS, BS, NULL, NULL, NULL);
	wait_loaded(bc);
	static char data[BS], got[BS];
	fill(data, BS, 8, 0);
	bcache_put(bc, &ID_A, 0, data, BS, 0);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd))
		exit(2);
	ssize_t n = bcache_read(bc, &ID_A, 0, got, sizeof got, 0);
	CHECK(n == -ENOENT, "DIR removed: a read is a miss");
	int rc = bcache_put(bc, &ID_A, 1, data, BS, 0);
	n = bcache_read(bc, &ID_A, 1, got, sizeof got, 0);
	struct bcache_counters c;
	bcache_counters(bc, &c);
	CHECK(rc == 0 && n == BS && !memcmp(got, data, BS) && c.blocks == 1 &&
	      c.write_errors == 0,
	      "the next put makes DIR again and succeeds; it reads back");
	/* Removed again with blocks nobody reads after: the put that makes
	 * DIR again forgets them (no block counted that is not on disk). */
	for (uint64_t b = 3; b < 8; b++)
		bcache_put(bc, &ID_A, b, data, BS, 0);
	if (system(cmd))
		exit(2);
	rc = bcache_put(bc, &ID_A, 8, data, BS, 0);
	bcache_counters(bc, &c);
	CHECK(rc == 0 && c.blocks == 1 && c.used_bytes == full_charge(&ID_A) &&
	      !bcache_has(bc, &ID_A, 3) && !bcache_has(bc, &ID_A, 1) &&
	      bcache_has(bc, &ID_A, 8),
	      "DIR removed again: the put that makes it forgets the 6 blocks it held "
	      "(%llu blocks, %llu bytes)", (unsigned long long)c.blocks,
	      (unsigned long long)c.used_bytes);

	/* DIR/XX of block 2 replaced by a regular file: puts there fail. */
	block_path(dir, &ID_A, 2, path, sizeof path);
	*strrchr(path, '/') = '\0';
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && echo x > '%s'", path, path);
	if (system(cmd))
		exit(2);
	rc = bcache_put(bc, &ID_A, 2, data, BS, 0);
	int rc2 = bcache_put(bc, &ID_A, 2, data, BS, 0);
	bcache_counters(bc, &c);
	CHECK(rc < 0 && rc2 < 0 && c.write_errors == 2 && c.put_skipped == 2,
	      "a put into a broken DIR/XX fails (%d), counted: write_errors %"
	      PRIu64 ", logged once", rc, c.write_errors);
	n = bcache_read(bc, &ID_A, 2, got, sizeof got, 0);
	size_t tmp = 0;
	files_scan(dir, NULL, &tmp, NULL, 0);
	CHECK(n == -ENOENT && c.blocks == 1 && tmp == 0 &&
	      c.used_bytes == full_charge(&ID_A),
	      "its read is a clean miss; no temporary file; accounting unchanged");
	bcache_close(bc);
}

static void test_drop_warm(const char *root)
{
	char dir[512];
	snprintf(dir, sizeof dir, "%s/drop", root);
	struct bcache *bc = open_ok(dir, 64ull * BS, BS, NULL, NULL, NULL);
	wait_loaded(bc);
	static char data[BS], got[BS];
	fill(data, BS, 9, 0);
	uint64_t size_a = 2 * BS + 100;      /* 3 blocks */
	for (uint64_t i = 0; i < 3; i++)
		bcache_put(bc, &ID_A, i, data, i < 2 ? BS : 100, 0);
	for (uint64_t i = 0; i < 2; i++)
		bcache_put(bc, &ID_B, i, data, BS, 0);
	struct bcache_id a2 = ID_A;
	a2.etag = "etag-a-2";
	bcache_put(bc, &a2, 0, data, BS, 0);
	bcache_drop(bc, &ID_A, size_a);
	bool done = wait_for(bc, not_cached, (void *)&ID_A);
	struct bcache_counters c;
	for (int i = 0; i < 1000; i++) {
		bcache_counters(bc, &c);
		if (c.dropped >= 3)
			break;
		usleep(1000);
	}
	char p[1024];
	int left = 0;
	for (uint64_t i = 0; i < 3; i++) {
		block_path(dir, &ID_A, i, p, sizeof p);
		left += access(p, F_OK) == 0;
	}
	CHECK(done && c.dropped == 3 && left == 0 && c.blocks == 3 &&
	      bcache_has(bc, &ID_B, 0) && bcache_has(bc, &ID_B, 1) &&
	      bcache_has(bc, &a2, 0),
	      "drop of a 3-block object: its 3 blocks gone (dropped %" PRIu64
	      "), the other object and the other ETag kept", c.dropped);

	/* Warm: read once -> used; dropped unread -> wasted. */
	struct bcache_id w1 = { "bkt", "warm/1", "e1" }, w2 = { "bkt", "warm/2", "e2" };
	bcache_put(bc, &w1, 0, data, 100, BCACHE_WARM);
	bcache_put(bc, &w2, 0, data, 100, BCACHE_WARM);
	bcache_counters(bc, &c);
	CHECK(c.warm_bytes == 2 * bcache_charge(100 + bcache_hdr_len(&w1)),
	      "2 warm blocks put: their charged bytes counted (%" PRIu64 ")", c.warm_bytes);
	bcache_read(bc, &w1, 0, got, sizeof got, 0);
	bcache_read(bc, &w1, 0, got, sizeof got, 0);
	bcache_drop(bc, &w2, 0);
	wait_for(bc, not_cached, &w2);
	bcache_counters(bc, &c);
	CHECK(c.warm_used == 1 && c.warm_wasted == 1 && c.warm_bytes == 0,
	      "warm: read twice -> warm_used 1; dropped unread -> warm_wasted 1");
	bcache_put(bc, &w2, 0, data, 100, BCACHE_WARM);
	bcache_put(bc, &w2, 0, data, 100, 0);
	bcache_counters(bc, &c);
	CHECK(c.warm_wasted == 2 && c.warm_bytes == 0,
	      "a warm block replaced unread is wasted too");
	bcache_close(bc);
}

/* ---- four threads at once --------------------------------------------- */

struct hammer {
	struct bcache *bc;
	atomic_bool stop;
	atomic_int bad;
	unsigned seed;
};

static const struct bcache_id HID[3] = {
	{ "bkt", "h/0", "e0" }, { "bkt", "h/1", "e1" }, { "bkt", "h/2", "e2" },
};

static void *hammer_main(void *arg)
{
	struct hammer *h = arg;
	unsigned seed = __atomic_fetch_add(&h->seed, 7919, __ATOMIC_RELAXED);
	char *data = malloc(BS), *got = malloc(BS);
	if (!data || !got)
		exit(2);
	while (!atomic_load(&h->stop)) {
		unsigned r = (unsigned)rand_r(&seed);
		unsigned o = r % 3;
		uint64_t blk = (r >> 4) % 6;
		size_t len = blk == 5 ? 3000 : BS;
		switch ((r >> 8) % 8) {
		case 0: case 1: case 2:
			fill(data, len, o, blk);
			bcache_put(h->bc, &HID[o], blk, data, len,
				   (r >> 12) & 1 ? BCACHE_WARM : 0);
			break;
		case 7:
			if ((r >> 12) % 8 == 0)
				bcache_drop(h->bc, &HID[o], 5 * BS + 3000);
			break;
		default: {
			ssize_t n = bcache_read(h->bc, &HID[o], blk, got, BS, 0);
			if (n >= 0) {
				fill(data, len, o, blk);
				if ((size_t)n != len || memcmp(got, data, len))
					atomic_fetch_add(&h->bad, 1);
			} else if (n != -ENOENT) {
				atomic_fetch_add(&h->bad, 1);
			}
		}
		}
	}
	free(data);
	free(got);
	return NULL;
}

static void test_threads(const char *root)
{
	char dir[512];
	snprintf(dir, sizeof dir, "%s/threads", root);
	uint64_t fc = full_charge(&HID[0]);
	struct hammer h = { .bc = NULL, .seed = 1 };
	h.bc = open_ok(dir, 8 * fc, BS, NULL, NULL, NULL);
	wait_loaded(h.bc);
	atomic_init(&h.stop, false);
	atomic_init(&h.bad, 0);
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, hammer_main, &h);
	sleep(1);
	atomic_store(&h.stop, true);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	/* The drop queue is FIFO with one worker: once a last sentinel drop
	 * is done, every earlier one is. */
	static char data[100];
	struct bcache_id sent = { "bkt", "sentinel", "s" };
	while (bcache_put(h.bc, &sent, 0, data, sizeof data, 0))
		usleep(1000);
	bcache_drop(h.bc, &sent, sizeof data);
	bool drained = wait_for(h.bc, not_cached, &sent);
	char sp[1024];
	block_path(dir, &sent, 0, sp, sizeof sp);
	for (int i = 0; i < 30000 && access(sp, F_OK) == 0; i++)
		usleep(1000);
	struct bcache_counters c;
	bcache_counters(h.bc, &c);
	uint64_t charges;
	size_t tmp;
	size_t files = files_scan(dir, &charges, &tmp, NULL, 0);
	printf("# 4 threads, 1 s: hits %" PRIu64 " misses %" PRIu64 " evictions %"
	       PRIu64 " dropped %" PRIu64 " put_skipped %" PRIu64 " warm used %"
	       PRIu64 " wasted %" PRIu64 "\n", c.hits, c.misses, c.evictions,
	       c.dropped, c.put_skipped, c.warm_used, c.warm_wasted);
	CHECK(atomic_load(&h.bad) == 0, "no read returned wrong bytes or an odd error");
	CHECK(drained && files == c.blocks && charges == c.used_bytes && tmp == 0 &&
	      c.used_bytes <= 8 * fc,
	      "afterwards: %zu files = %" PRIu64 " blocks, charges %" PRIu64
	      " = used %" PRIu64 ", no temporary file", files, c.blocks, charges,
	      c.used_bytes);
	CHECK(c.hits > 0 && c.evictions > 0 && c.dropped > 0,
	      "the run hit, evicted and dropped");
	bcache_close(h.bc);
}

/* The admission rule (bcache.h): objects of cold_min bytes or more are
 * cold at the first open of their version, admitted from the second, or
 * at once when the buffer holds their first block; smaller ones always;
 * cold_min 0 admits all. What it did is counted. */
static struct bcache *open_cold(const char *dir, uint64_t cold_min, struct stats *st)
{
	struct bcache_conf conf = { .dir = dir, .max_bytes = 64 * full_charge(&ID_A),
				    .block_size = BS, .cold_min = cold_min, .st = st };
	struct bcache *bc = NULL;
	char err[256] = "";
	if (bcache_open(&conf, &bc, err, sizeof err)) {
		printf("# bcache_open %s: %s\n", dir, err);
		exit(2);
	}
	wait_loaded(bc);
	return bc;
}

static void test_admit(const char *root)
{
	char dir[512];
	snprintf(dir, sizeof dir, "%s/admit", root);
	struct stats st;
	stats_init(&st);
	struct bcache *bc = open_cold(dir, 8 * BS, &st);
	const struct bcache_id small = { "bkt", "small", "e-s" };
	const struct bcache_id big = { "bkt", "big", "e-b" };
	const struct bcache_id big2 = { "bkt", "big", "e-b2" };   /* another version */
	const struct bcache_id held = { "bkt", "held", "e-h" };
	CHECK(bcache_admit(bc, &small, 8 * BS - 1) && bcache_admit(bc, &small, 0),
	      "admit: an object under cold_min is admitted at its first open");
	CHECK(!bcache_admit(bc, &big, 8 * BS), "admit: one of cold_min bytes is cold at its first open");
	CHECK(bcache_admit(bc, &big, 8 * BS), "… and admitted at its second");
	CHECK(bcache_admit(bc, &big, 8 * BS), "… and at every open after");
	CHECK(!bcache_admit(bc, &big2, 8 * BS), "… another version of it is cold at its first open");
	static char data[BS];
	fill(data, BS, 9, 0);
	CHECK(bcache_put(bc, &held, 0, data, BS, BCACHE_WARM) == 0 &&
	      bcache_admit(bc, &held, 100 * BS),
	      "admit: a version whose first block is held is admitted at its first open");
	CHECK(bcache_put(bc, &big, 0, data, BS, 0) == 0 && bcache_put(bc, &big, 1, data, BS, 0) == 0,
	      "admit: two blocks of the admitted version stored");
	bcache_not_admitted(bc, 5);
	struct bcache_counters c;
	bcache_counters(bc, &c);
	CHECK(c.cold_opens == 2 && c.admitted == 2 && c.not_admitted == 5,
	      "admit: counted: 2 cold opens, 2 blocks admitted (a warm put is not), "
	      "5 not admitted (%" PRIu64 ", %" PRIu64 ", %" PRIu64 ")", c.cold_opens,
	      c.admitted, c.not_admitted);
	CHECK(stats_value(&st, "cache", "cold_opens") == 2 &&
	      stats_value(&st, "cache", "admitted") == 2 &&
	      stats_value(&st, "cache", "not_admitted") == 5,
	      "admit: the same in the stats (cache.cold_opens, admitted, not_admitted)");
	bcache_close(bc);

	/* A restart forgets the opens, not the blocks: big (its first block
	 * on disk) is admitted, big2 (opened once, nothing stored) cold. */
	bc = open_cold(dir, 8 * BS, &st);
	CHECK(bcache_admit(bc, &big, 8 * BS), "admit: after a restart, a version read twice is admitted");
	CHECK(!bcache_admit(bc, &big2, 8 * BS), "… one opened once before it is cold");
	bcache_close(bc);
	bc = open_cold(dir, 0, NULL);
	CHECK(bcache_admit(bc, &big2, 1ull << 40), "admit: cold_min 0 admits every open");
	bcache_counters(bc, &c);
	CHECK(c.cold_opens == 0, "… and counts no cold open");
	bcache_close(bc);
	stats_release(&st);
}

int main(void)
{
	char *root = unit_tmpdir("bcache");
	test_crc();
	test_names();
	test_conf(root);
	test_roundtrip(root);
	test_corrupt(root);
	test_persist(root);
	test_list_fail(root);
	test_budget(root);
	test_scan(root);
	test_lock(root);
	test_bad_dir(root);
	test_drop_warm(root);
	test_admit(root);
	test_threads(root);
	unit_rmtree(root);
	free(root);
	return unit_exit();
}
