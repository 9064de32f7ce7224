/*
 * test_stage.c — unit tests of write staging (sync/stage/stage.h) on the
 * in-memory store (sync/s3/s3_fake.h) behind the fault wrapper
 * (sync/s3/s3_fault.h), which fails, slows or cuts requests: write/read/
 * truncate/commit round trips against a model buffer, fill from an
 * existing object (and every way its GETs fail), failed uploads keeping
 * the data, concurrent writers and commits (no torn upload, coalesced
 * commits, reads of other files not blocked), the byte budget, EFBIG, journal
 * escaping; writes whose bytes come from a pipe (stage_file_pwrite_pipe):
 * taken whole, a pipe short of bytes, a write refused before any moved.
 */
#include "sync/stage/stage_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"
#define UNIT_WITH_MD5
#include "tests/unit/unit.h"
#include "tests/unit/unit_stage.h"

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* ---- tests -------------------------------------------------------------- */

static void test_round_trip(void)
{
	struct store fk;
	store_init(&fk, 0);
	char *dir = unit_tmpdir("stage-rt");
	struct stage *st = stage_open_whole(dir, 64 << 20, 0, &fk);
	struct obj_kv meta[] = { { "color", "black" } };
	struct stage_file *f;
	CHECK(stage_file_new(st, "b", "dir/file.bin", meta, 1, "text/plain", &f) == 0,
	      "round trip: new staged file");
	size_t cap = 3 << 20, size = 0;
	char *model = calloc(1, cap), *buf = malloc(cap);
	uint64_t s = 42;
	bool ok = true;
	for (int i = 0; i < 400 && ok; i++) {
		size_t off = rnd(&s) % (2 << 20), len = rnd(&s) % 70000 + 1;
		for (size_t k = 0; k < len; k++)
			buf[k] = (char)rnd(&s);
		ok = stage_file_pwrite(f, buf, len, off) == (ssize_t)len;
		memcpy(model + off, buf, len);
		if (off + len > size)
			size = off + len;
	}
	CHECK(ok && stage_file_size(f) == size, "round trip: 400 random pwrites, size as written");
	ssize_t n = stage_file_pread(f, buf, cap, 0);
	CHECK(n == (ssize_t)size && memcmp(buf, model, size) == 0,
	      "round trip: pread returns exactly the bytes written");
	CHECK(stage_file_pread(f, buf, 10, size) == 0 &&
	      stage_file_pread(f, buf, 10, size - 3) == 3,
	      "round trip: pread at/near the end is short");
	CHECK(stage_file_truncate(f, 1000000) == 0 && stage_file_size(f) == 1000000 &&
	      stage_file_truncate(f, 1500000) == 0, "round trip: truncate down then up");
	size = 1500000;
	memset(model + 1000000, 0, 500000);
	n = stage_file_pread(f, buf, cap, 0);
	CHECK(n == (ssize_t)size && memcmp(buf, model, size) == 0,
	      "round trip: truncated tail is gone, regrown part reads zeros");
	char etag[72] = "", want[33];
	unit_md5_hex(model, size, want);
	CHECK(stage_file_dirty(f) && stage_file_commit(f, etag) == 0 && puts_tried(&fk) == 1,
	      "round trip: commit uploads once");
	size_t olen = 0;
	char meta_s[512] = "";
	char *o = obj_get(&fk, "b", "dir/file.bin", &olen, meta_s, sizeof meta_s);
	CHECK(o && olen == size && memcmp(o, model, size) == 0,
	      "round trip: uploaded bytes equal the bytes written");
	free(o);
	CHECK(strcmp(etag, want) == 0, "round trip: ETag is the MD5 of the data");
	CHECK(strcmp(meta_s, "color=black;ct=text/plain") == 0,
	      "round trip: metadata and content type uploaded (%s)", meta_s);
	char etag2[72] = "";
	CHECK(!stage_file_dirty(f) && stage_file_commit(f, etag2) == 0 && puts_tried(&fk) == 1 &&
	      strcmp(etag2, want) == 0, "round trip: clean commit uploads nothing, same ETag");
	CHECK(count_files(dir, ".jnl") == 0, "round trip: no journal after the commit");
	bool wrote = stage_file_pwrite(f, "Z", 1, 5) == 1 && count_files(dir, ".jnl") == 1 &&
		     stage_file_commit(f, etag2) == 0;
	o = obj_get(&fk, "b", "dir/file.bin", &olen, NULL, 0);
	CHECK(wrote && puts_tried(&fk) == 2 && o && o[5] == 'Z' && strcmp(etag2, etag) != 0,
	      "round trip: write after commit journals and re-uploads");
	free(o);
	struct obj_kv m2[] = { { "color", "green" }, { "x", "1" } };
	wrote = stage_file_set_meta(f, m2, 2, NULL) == 0 && stage_file_commit(f, NULL) == 0;
	free(obj_get(&fk, "b", "dir/file.bin", &olen, meta_s, sizeof meta_s));
	CHECK(wrote && puts_tried(&fk) == 3 &&
	      strcmp(meta_s, "color=green;x=1;ct=binary/octet-stream") == 0,
	      "round trip: set_meta makes it dirty and is uploaded (no content type: "
	      "the store's default)");
	wrote = stage_file_rename(f, "b", "renamed") == 0 && stage_file_commit(f, NULL) == 0;
	o = obj_get(&fk, "b", "renamed", &olen, NULL, 0);
	CHECK(wrote && o && olen == size, "round trip: rename uploads to the new key");
	free(o);
	struct stage_counters c;
	stage_counters_get(st, &c);
	CHECK(c.used_bytes == size && c.open_files == 1 && c.uploads == 4,
	      "round trip: counters (used bytes, open files, uploads)");
	stage_file_release(f);
	stage_counters_get(st, &c);
	CHECK(c.used_bytes == 0 && c.open_files == 0 && count_files(dir, ".data") == 0,
	      "round trip: release of a committed file deletes it and frees the budget");

	/* An empty created file: commit uploads an empty object. */
	wrote = stage_file_new(st, "b", "empty", NULL, 0, NULL, &f) == 0 &&
		stage_file_commit(f, etag) == 0;
	o = obj_get(&fk, "b", "empty", &olen, NULL, 0);
	CHECK(wrote && o && olen == 0 && strcmp(etag, "d41d8cd98f00b204e9800998ecf8427e") == 0,
	      "round trip: created empty file uploads an empty object");
	free(o);
	stage_file_release(f);
	free(model);
	free(buf);
	stage_close(st);
	unit_rmtree(dir);
	free(dir);
	store_release(&fk);
}

/* GETs that reached the store. */
static uint64_t gets_done(struct store *t)
{
	return s3_fake_count(t->fake, S3K_GET);
}

/* A fill that fails: the error, the file empty, the budget given back. */
static void fill_fails(struct store *t, struct stage *st, const char *etag,
		       uint64_t size, int want, const char *what)
{
	struct stage_file *f;
	struct stage_counters c;
	stage_file_new(st, "b", "k2", NULL, 0, NULL, &f);
	int rc = stage_file_fill(f, "b", "k", size, etag);
	stage_counters_get(st, &c);
	struct stat sb;
	CHECK(rc == want && stage_file_size(f) == 0 && fstat(f->data_fd, &sb) == 0 &&
	      sb.st_size == 0 && c.used_bytes == 0,
	      "fill: %s -> %s (want %s), file empty, budget given back", what,
	      strerror(-rc), strerror(-want));
	stage_file_release(f);
	s3_fault_clear(t->s3);
}

static void test_fill(void)
{
	struct store fk;
	store_init(&fk, 0);
	char *dir = unit_tmpdir("stage-fill");
	struct stage *st = stage_open_whole(dir, 32 << 20, 0, &fk);
	size_t size = 20 << 20;
	char *obj = malloc(size), *buf = malloc(size);
	uint64_t s = 7;
	for (size_t i = 0; i < size; i++)
		obj[i] = (char)rnd(&s);
	char md5[33];
	unit_md5_hex(obj, size, md5);
	s3_fake_object_put(fk.fake, "b", "k", obj, size, NULL, 0, NULL);
	struct stage_file *f;
	stage_file_new(st, "b", "k", NULL, 0, NULL, &f);
	CHECK(stage_file_fill(f, "b", "k", size, md5) == 0 &&
	      gets_done(&fk) == 3 && stage_file_size(f) == size && !stage_file_dirty(f),
	      "fill: 20 MiB fetched in 3 GETs of up to 8 MiB, clean");
	CHECK(stage_file_pread(f, buf, size, 0) == (ssize_t)size &&
	      memcmp(buf, obj, size) == 0, "fill: staged bytes equal the object");
	char etag[72];
	CHECK(stage_file_commit(f, etag) == 0 && puts_tried(&fk) == 0 && strcmp(etag, md5) == 0,
	      "fill: commit without writes uploads nothing, returns the object's ETag");
	stage_file_pwrite(f, "hello", 5, 1000);
	memcpy(obj + 1000, "hello", 5);
	size_t olen = 0;
	bool committed = stage_file_commit(f, etag) == 0;
	char *o = obj_get(&fk, "b", "k", &olen, NULL, 0);
	CHECK(committed && puts_tried(&fk) == 1 && o && olen == size &&
	      memcmp(o, obj, size) == 0,
	      "fill: a small write uploads the whole object with the change");
	free(o);
	stage_file_release(f);
	unit_md5_hex(obj, size, md5);   /* the object as it is now */

	/* Every way a GET of the fill fails. */
	struct s3_fault_rule cut = { .kind = S3K_GET, .type = S3F_SHORT, .first = 2,
				     .times = 1, .keep = 2 << 20 };
	s3_fault_add(fk.s3, &cut);
	fill_fails(&fk, st, md5, size, -EIO, "the 2nd GET cut short (2 of 8 MiB)");
	s3_fault_fail(fk.s3, S3K_GET, 1, 1, -EIO);
	fill_fails(&fk, st, md5, size, -EIO, "the 1st GET failing with -EIO");
	s3_fault_fail(fk.s3, S3K_GET, 3, 1, -EHOSTUNREACH);
	fill_fails(&fk, st, md5, size, -EHOSTUNREACH, "the 3rd GET: store unreachable");
	fill_fails(&fk, st, "0123456789abcdef0123456789abcdef", size, -ESTALE,
		   "an ETag the object no longer has");
	fill_fails(&fk, st, md5, size + 1, -EIO, "an object shorter than its size");

	uint64_t g0 = gets_done(&fk);
	stage_file_new(st, "b", "k2", NULL, 0, NULL, &f);
	CHECK(stage_file_fill(f, "b", "k", 40 << 20, NULL) == -ENOSPC && gets_done(&fk) == g0,
	      "fill: over the budget is -ENOSPC before any GET");
	stage_file_release(f);
	free(obj);
	free(buf);
	stage_close(st);
	unit_rmtree(dir);
	free(dir);
	store_release(&fk);
}

static void test_failure(void)
{
	struct store fk;
	store_init(&fk, 0);
	char *dir = unit_tmpdir("stage-fail");
	struct stage *st = stage_open_whole(dir, 8 << 20, 0, &fk);
	struct stage_file *f;
	stage_file_new(st, "b", "k", NULL, 0, NULL, &f);
	const char msg[] = "precious data";
	stage_file_pwrite(f, msg, sizeof msg, 0);
	const int errs[] = { -EIO, -EACCES, -EHOSTUNREACH };
	bool all = true;
	for (int i = 0; i < 3; i++) {
		puts_fail(&fk, 1, errs[i]);
		all = all && stage_file_commit(f, NULL) == -EIO;
	}
	CHECK(all && puts_tried(&fk) == 3 && s3_fake_count(fk.fake, S3K_PUT) == 0,
	      "failure: PUT failing with 5xx, 403, unreachable all make commit -EIO");
	char buf[64] = "";
	struct stage_jnl j;
	CHECK(stage_file_dirty(f) && stage_file_pread(f, buf, sizeof buf, 0) == sizeof msg &&
	      strcmp(buf, msg) == 0, "failure: staged data kept and still dirty");
	CHECK(stage_jnl_read(st, f->id, &j) == 0 && j.state == STAGE_JS_COMMIT &&
	      j.size == sizeof msg, "failure: journal says the commit began");
	stage_jnl_release(&j);
	size_t olen = 0;
	bool committed = stage_file_commit(f, NULL) == 0;
	char *o = obj_get(&fk, "b", "k", &olen, NULL, 0);
	CHECK(committed && o && olen == sizeof msg && strcmp(o, msg) == 0 &&
	      count_files(dir, ".jnl") == 0,
	      "failure: a later commit uploads the kept data and clears the journal");
	free(o);
	/* Released after a failed commit: kept for recovery. */
	stage_file_pwrite(f, "X", 1, 0);
	puts_fail(&fk, 1, -EIO);
	CHECK(stage_file_commit(f, NULL) == -EIO, "failure: fails again");
	stage_file_release(f);
	struct stage_counters c;
	stage_counters_get(st, &c);
	CHECK(count_files(dir, ".data") == 1 && c.pending_files == 1 &&
	      c.used_bytes == sizeof msg && c.upload_errors == 4,
	      "failure: released with a failed commit: kept, pending, still charged");
	struct stage_recovery_report r;
	bool recovered = stage_recover(st, &r) == 0 && r.reuploaded == 1;
	o = obj_get(&fk, "b", "k", &olen, NULL, 0);
	CHECK(recovered && o && o[0] == 'X' && count_files(dir, ".data") == 0,
	      "failure: stage_recover uploads it while running");
	free(o);
	stage_counters_get(st, &c);
	CHECK(c.pending_files == 0 && c.used_bytes == 0, "failure: nothing pending after");
	puts_fail(&fk, 1, -EFBIG);
	stage_file_new(st, "b", "big", NULL, 0, NULL, &f);
	CHECK(stage_file_commit(f, NULL) == -EFBIG, "failure: PUT's -EFBIG passes through");
	stage_file_commit(f, NULL);
	stage_file_release(f);
	stage_close(st);
	unit_rmtree(dir);
	free(dir);
	store_release(&fk);
}

/* ---- concurrency -------------------------------------------------------- */

#define BLK (64 << 10)
#define NBLK 64

struct torn_check {
	struct store *fk;
	struct stage_file *f;
	atomic_bool stop;
	atomic_int commits;
	int torn, errors;
};

struct cw {
	struct stage_file *f;
	struct torn_check *tc;
	int idx, nthreads, rounds, last;
	bool ok;
};

/* Writes whole 64 KiB blocks, each filled with one byte: its round; goes
 * on past `rounds` until at least 3 commits ran (so they overlap). */
static void *cw_writer(void *arg)
{
	struct cw *w = arg;
	char *blk = malloc(BLK);
	w->ok = true;
	for (int r = 1; r <= w->rounds || atomic_load(&w->tc->commits) < 3; r++) {
		w->last = r;
		memset(blk, 'A' + r % 26, BLK);
		for (int b = w->idx; b < NBLK; b += w->nthreads)
			w->ok = w->ok &&
				stage_file_pwrite(w->f, blk, BLK, (uint64_t)b * BLK) == BLK;
	}
	free(blk);
	return NULL;
}

static void *cw_committer(void *arg)
{
	struct torn_check *t = arg;
	while (!atomic_load(&t->stop)) {
		if (stage_file_commit(t->f, NULL) != 0)
			t->errors++;
		atomic_fetch_add(&t->commits, 1);
		size_t len = 0;
		char *o = obj_get(t->fk, "b", "conc", &len, NULL, 0);
		for (size_t b = 0; o && b < len / BLK; b++)
			for (size_t i = 1; i < BLK; i++)
				if (o[b * BLK + i] != o[b * BLK]) {
					t->torn++;
					break;
				}
		free(o);
	}
	return NULL;
}

struct commit_arg {
	struct stage_file *f;
	int rc;
	char etag[72];
	double took;
};

static void *do_commit(void *arg)
{
	struct commit_arg *a = arg;
	double t0 = unit_now_s();
	a->rc = stage_file_commit(a->f, a->etag);
	a->took = unit_now_s() - t0;
	return NULL;
}

static void test_concurrency(void)
{
	struct store fk;
	store_init(&fk, 0);
	char *dir = unit_tmpdir("stage-conc");
	struct stage *st = stage_open_whole(dir, 64 << 20, 0, &fk);
	struct stage_file *f;
	stage_file_new(st, "b", "conc", NULL, 0, NULL, &f);
	enum { NT = 6 };
	struct cw w[NT];
	pthread_t th[NT], ct;
	struct torn_check tc = { .fk = &fk, .f = f };
	atomic_init(&tc.stop, false);
	atomic_init(&tc.commits, 0);
	pthread_create(&ct, NULL, cw_committer, &tc);
	for (int i = 0; i < NT; i++) {
		w[i] = (struct cw){ .f = f, .tc = &tc, .idx = i, .nthreads = NT,
				    .rounds = 30 };
		pthread_create(&th[i], NULL, cw_writer, &w[i]);
	}
	bool ok = true;
	for (int i = 0; i < NT; i++) {
		pthread_join(th[i], NULL);
		ok = ok && w[i].ok;
	}
	atomic_store(&tc.stop, true);
	pthread_join(ct, NULL);
	CHECK(ok, "concurrency: 6 writer threads, 30 rounds of 64 whole blocks each");
	printf("# %d commits ran during the writes\n", atomic_load(&tc.commits));
	CHECK(atomic_load(&tc.commits) >= 3 && tc.errors == 0 && tc.torn == 0,
	      "concurrency: commits during writes never upload a torn block");
	stage_file_commit(f, NULL);
	size_t olen = 0;
	char *o = obj_get(&fk, "b", "conc", &olen, NULL, 0);
	bool final = o && olen == NBLK * BLK;
	for (size_t i = 0; final && i < olen; i++)
		final = o[i] == 'A' + w[(i / BLK) % NT].last % 26;
	CHECK(final, "concurrency: final upload holds every thread's last round");
	free(o);

	/* Two commits at once with a slow uploader coalesce into one upload. */
	stage_file_pwrite(f, "x", 1, 0);
	struct s3_fault_rule slow = { .kind = S3K_PUT, .type = S3F_DELAY, .delay_ms = 1500 };
	s3_fault_add(fk.s3, &slow);
	int puts0 = puts_tried(&fk);
	struct commit_arg a1 = { .f = f }, a2 = { .f = f };
	pthread_t t1, t2;
	/* a PUT has started when the wrapper saw it, finished when the fake did */
	uint64_t finished0 = s3_fake_count(fk.fake, S3K_PUT);
	pthread_create(&t1, NULL, do_commit, &a1);
	while (puts_tried(&fk) == puts0)
		usleep(1000);
	pthread_create(&t2, NULL, do_commit, &a2);
	/* Meanwhile: reads of this file and of another one are not blocked. */
	struct stage_file *g;
	stage_file_new(st, "b", "other", NULL, 0, NULL, &g);
	usleep(20000);
	double t0 = unit_now_s();
	char c = 0;
	bool rd = stage_file_pread(f, &c, 1, 0) == 1 && c == 'x' &&
		  stage_file_pwrite(g, "y", 1, 0) == 1 && stage_file_pread(g, &c, 1, 0) == 1;
	double took = unit_now_s() - t0;
	/* the reads returned while the upload was still sleeping */
	bool upload_still_running = s3_fake_count(fk.fake, S3K_PUT) == finished0;
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	CHECK(a1.rc == 0 && a2.rc == 0 && puts_tried(&fk) == puts0 + 1 &&
	      strcmp(a1.etag, a2.etag) == 0 && a1.etag[0],
	      "concurrency: a commit during a commit waits and coalesces (one upload)");
	printf("# read/write of other file during an upload: %.1f ms\n", took * 1e3);
	CHECK(rd && upload_still_running,
	      "concurrency: upload blocks neither reads of it nor other files");
	/* A write during an upload waits for the upload. */
	stage_file_pwrite(f, "z", 1, 0);
	a1 = (struct commit_arg){ .f = f };
	int started = puts_tried(&fk);
	uint64_t finished = s3_fake_count(fk.fake, S3K_PUT);
	pthread_create(&t1, NULL, do_commit, &a1);
	while (puts_tried(&fk) == started)
		usleep(1000);
	t0 = unit_now_s();
	stage_file_pwrite(f, "w", 1, 0);
	took = unit_now_s() - t0;
	/* it returned only once the store had the upload */
	bool waited = s3_fake_count(fk.fake, S3K_PUT) == finished + 1;
	pthread_join(t1, NULL);
	o = obj_get(&fk, "b", "conc", &olen, NULL, 0);
	printf("# a write during an upload waited %.1f ms\n", took * 1e3);
	CHECK(waited && o && o[0] == 'z' && stage_file_dirty(f),
	      "concurrency: a write waits for the upload in progress, lands after it");
	free(o);
	s3_fault_clear(fk.s3);
	stage_file_commit(f, NULL);
	stage_file_commit(g, NULL);
	stage_file_release(f);
	stage_file_release(g);
	stage_close(st);
	unit_rmtree(dir);
	free(dir);
	store_release(&fk);
}

/* ---- budget and limits -------------------------------------------------- */

static void test_budget(void)
{
	struct store fk;
	store_init(&fk, 0);
	char *dir = unit_tmpdir("stage-budget");
	struct stage *st = stage_open_whole(dir, 1 << 20, 0, &fk);
	char *buf = calloc(1, 1 << 20);
	struct stage_file *f, *g;
	stage_file_new(st, "b", "f", NULL, 0, NULL, &f);
	stage_file_new(st, "b", "g", NULL, 0, NULL, &g);
	CHECK(stage_file_pwrite(f, buf, 1 << 20, 0) == 1 << 20,
	      "budget: 1 MiB fits a 1 MiB budget");
	CHECK(stage_file_pwrite(f, buf, 1, 1 << 20) == -ENOSPC &&
	      stage_file_pwrite(g, buf, 1, 0) == -ENOSPC &&
	      stage_file_truncate(g, 10) == -ENOSPC && stage_file_size(g) == 0,
	      "budget: one more byte anywhere is -ENOSPC");
	CHECK(stage_file_pwrite(f, buf, 4096, 1000) == 4096,
	      "budget: overwriting staged bytes needs no budget");
	CHECK(stage_file_commit(f, NULL) == 0 && stage_file_pwrite(g, buf, 1, 0) == -ENOSPC,
	      "budget: committed but open data still counts (never evicted)");
	CHECK(stage_file_truncate(f, 512 << 10) == 0 &&
	      stage_file_pwrite(g, buf, 512 << 10, 0) == 512 << 10,
	      "budget: truncating one file makes room for another");
	stage_file_commit(f, NULL);
	stage_file_release(f);
	CHECK(stage_file_pwrite(g, buf, 512 << 10, 512 << 10) == 512 << 10,
	      "budget: releasing a committed file frees its bytes");
	struct stage_counters c;
	stage_counters_get(st, &c);
	CHECK(c.enospc == 4 && c.used_bytes == 1 << 20, "budget: refusals counted");
	stage_file_commit(g, NULL);
	stage_file_release(g);
	stage_close(st);
	unit_rmtree(dir);
	free(dir);

	/* EFBIG: a small max_object for the test, then the real 5 GiB one. */
	dir = unit_tmpdir("stage-efbig");
	st = stage_open_whole(dir, 1ull << 40, 1 << 20, &fk);
	stage_file_new(st, "b", "f", NULL, 0, NULL, &f);
	CHECK(stage_file_pwrite(f, buf, 2, (1 << 20) - 1) == -EFBIG &&
	      stage_file_pwrite(f, buf, 1, (1 << 20) - 1) == 1,
	      "efbig: a write past max_object is -EFBIG, up to it is fine");
	CHECK(stage_file_truncate(f, (1 << 20) + 1) == -EFBIG &&
	      stage_file_size(f) == 1 << 20, "efbig: truncate past max_object");
	stage_file_release(f);
	stage_file_new(st, "b", "g", NULL, 0, NULL, &g);
	CHECK(stage_file_fill(g, "b", "f", 2 << 20, NULL) == -EFBIG &&
	      s3_fake_count(fk.fake, S3K_GET) == 0,
	      "efbig: an existing object over max_object cannot be opened for writing");
	stage_file_release(g);
	stage_close(st);
	st = stage_open_whole(dir, 1ull << 43, 0, &fk);
	stage_file_new(st, "b", "f", NULL, 0, NULL, &f);
	CHECK(stage_file_pwrite(f, "x", 1, STAGE_MAX_OBJECT) == -EFBIG &&
	      stage_file_pwrite(f, "x", 1, STAGE_MAX_OBJECT - 1) == 1 &&
	      stage_file_size(f) == STAGE_MAX_OBJECT,
	      "efbig: default limit is S3's 5 TiB (sparse file up to it is fine)");
	stage_file_truncate(f, 0);
	stage_file_commit(f, NULL);
	stage_file_release(f);
	stage_counters_get(st, &c);
	CHECK(c.used_bytes == 1 << 20 && c.pending_files == 1,
	      "efbig: only the uncommitted 1 MiB of the earlier stage is still charged");
	stage_close(st);
	/* Opened with a budget below what is staged (1 MiB kept above): no
	 * write fits, none wraps the budget around. */
	st = stage_open_whole(dir, 512 << 10, 0, &fk);
	stage_file_new(st, "b", "h", NULL, 0, NULL, &f);
	CHECK(stage_file_pwrite(f, "x", 1, 0) == -ENOSPC &&
	      stage_file_pwrite(f, "x", 1, 100ull << 30) == -ENOSPC &&
	      stage_file_truncate(f, 10) == -ENOSPC,
	      "budget: staged bytes over a smaller budget at the start: writes get -ENOSPC");
	stage_file_release(f);
	stage_close(st);
	unit_rmtree(dir);
	free(dir);
	free(buf);
	store_release(&fk);
}

/* A pipe as libfuse makes one for a spliced WRITE: non-blocking, as
 * large as it can be made (up to 1 MiB), holding len bytes of buf. */
static bool pipe_with(int p[2], const char *buf, size_t len)
{
	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0)
		return false;
	(void)fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(p[1], buf + done, len - done);
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	return done == len;
}

/* Bytes in the pipe not read yet. */
static int pipe_left(int fd)
{
	int n = -1;
	return ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
}

static void test_pipe(void)
{
	struct store fk;
	store_init(&fk, 0);
	char *dir = unit_tmpdir("stage-pipe");
	struct stage *st = stage_open_whole(dir, 8 << 20, 4 << 20, &fk);
	struct stage_file *f;
	stage_file_new(st, "b", "piped", NULL, 0, NULL, &f);
	int p[2];
	CHECK(pipe_with(p, "", 0), "pipe: a pipe");
	long cap = fcntl(p[1], F_GETPIPE_SZ);
	size_t most = cap > 0 ? (size_t)cap : 4096;
	size_t msize = 2 << 20, size = 0;
	char *model = calloc(1, msize), *buf = malloc(msize);
	uint64_t s = 7;
	bool ok = true, empty = true;
	/* Mixed with writes from memory, as FUSE mixes small and large ones. */
	for (int i = 0; i < 200 && ok; i++) {
		size_t len = rnd(&s) % most + 1, off = rnd(&s) % (msize - len);
		for (size_t k = 0; k < len; k++)
			buf[k] = (char)rnd(&s);
		if (i % 3 == 2) {
			ok = stage_file_pwrite(f, buf, len, off) == (ssize_t)len;
		} else {
			ssize_t n = -1;
			size_t done = 0;
			while (done < len) {
				ssize_t w = write(p[1], buf + done, len - done);
				if (w <= 0)
					break;
				done += (size_t)w;
			}
			if (done == len)
				n = stage_file_pwrite_pipe(f, p[0], len, off);
			ok = n == (ssize_t)len;
			empty = empty && pipe_left(p[0]) == 0;
		}
		memcpy(model + off, buf, len);
		if (off + len > size)
			size = off + len;
	}
	CHECK(ok && empty && stage_file_size(f) == size,
	      "pipe: 200 writes, 2 in 3 spliced from a pipe (up to %zu bytes): all taken, "
	      "size as written", most);
	ssize_t n = stage_file_pread(f, buf, msize, 0);
	CHECK(n == (ssize_t)size && memcmp(buf, model, size) == 0,
	      "pipe: the file holds exactly the bytes written");

	/* A pipe holding fewer bytes than the write says: -EIO, what it held
	 * is written, and the file is as long as its size says (the rest
	 * reads 0), as after a failed pwrite. */
	memset(buf, 'q', 100);
	size_t off = size + 4096;
	CHECK(write(p[1], buf, 100) == 100, "pipe: 100 bytes in");
	n = stage_file_pwrite_pipe(f, p[0], 300, off);
	CHECK(n == -EIO && pipe_left(p[0]) == 0 && stage_file_size(f) == off + 300,
	      "pipe: 100 bytes for a write of 300: -EIO, size covers the write (%zd)", n);
	n = stage_file_pread(f, buf, 300, off);
	bool zeros = n == 300;
	for (int k = 0; k < 300 && zeros; k++)
		zeros = buf[k] == (k < 100 ? 'q' : 0);
	CHECK(zeros, "pipe: the 100 bytes written, the rest of the write's range reads 0 (%zd)", n);

	/* Refused before any byte moves: the bytes stay in the pipe for the
	 * caller to drop. */
	memset(buf, 'r', 200);
	CHECK(write(p[1], buf, 200) == 200, "pipe: 200 bytes in");
	n = stage_file_pwrite_pipe(f, p[0], 200, (4 << 20) - 100);
	CHECK(n == -EFBIG && pipe_left(p[0]) == 200,
	      "pipe: past max_object: -EFBIG, the pipe left as it was (%zd)", n);
	CHECK(stage_file_pwrite_pipe(f, -1, 10, 0) == -EBADF, "pipe: no pipe: -EBADF");
	CHECK(stage_file_commit(f, NULL) == 0, "pipe: commit");
	size_t olen = 0;
	char *o = obj_get(&fk, "b", "piped", &olen, NULL, 0);
	CHECK(o && olen == off + 300 && memcmp(o, model, size) == 0 &&
	      memcmp(o + off, "qqq", 3) == 0, "pipe: S3 has what the file holds");
	free(o);
	close(p[0]);
	close(p[1]);
	stage_file_release(f);
	stage_close(st);
	unit_rmtree(dir);
	free(dir);
	free(model);
	free(buf);
	store_release(&fk);
}

static void test_journal(void)
{
	char *dir = unit_tmpdir("stage-jnl");
	struct store fk;
	store_init(&fk, 0);
	struct stage *st = stage_open_whole(dir, 1 << 20, 0, &fk);
	struct obj_kv meta[] = { { "sp ace", "tab\there" }, { "pct", "%41%" },
				 { "nl", "a\r\nb" }, { "empty", "" }, { "utf", "\xc3\xbc" } };
	struct stage_jnl j = { .state = STAGE_JS_COMMIT, .size = 12345,
			       .bucket = "bk", .key = "k/ey with space:colon",
			       .ctype = "", .meta = meta, .n_meta = 5 }, r;
	bool ok = stage_jnl_write(st, 77, &j, false) == 0 && stage_jnl_read(st, 77, &r) == 0;
	ok = ok && r.state == STAGE_JS_COMMIT && r.size == 12345 &&
	     !strcmp(r.bucket, "bk") && !strcmp(r.key, j.key) && r.ctype &&
	     !strcmp(r.ctype, "") && r.n_meta == 5;
	for (size_t i = 0; ok && i < 5; i++)
		ok = !strcmp(r.meta[i].name, meta[i].name) &&
		     !strcmp(r.meta[i].value, meta[i].value);
	CHECK(ok, "journal: write/read round trip with spaces, %%, CR/LF, empty, UTF-8");
	stage_jnl_release(&r);
	CHECK(stage_jnl_remove(st, 77) == 0 && stage_jnl_read(st, 77, &r) == -ENOENT,
	      "journal: removed");
	stage_close(st);
	unit_rmtree(dir);
	free(dir);
	store_release(&fk);
}

/* One-shot files (mknod, symlink): under POWER, no journal and no sync at
 * any point, the object in S3 after the commit; a failed commit leaves no
 * journal (release deletes the data); one that grows past a part is
 * journaled like any other; a file that is not one-shot still syncs. */
static void test_oneshot(void)
{
	char *dir = unit_tmpdir("stage-oneshot");
	struct store fk;
	store_init(&fk, 0);
	s3_fake_min_part_set(fk.fake, 1 << 20);
	struct stage_conf c = { .dir = dir, .max_bytes = 64 << 20, .s3 = fk.s3,
				.up = { .part_size = 1 << 20 } };
	struct stage *st = NULL;
	CHECK(stage_open(&c, &st) == 0, "oneshot: stage opened");
	struct stage_counters k0, k1;
	struct stage_file *f = NULL;
	char etag[72];

	stage_counters_get(st, &k0);
	stage_file_new(st, "b", "link", NULL, 0, NULL, &f);
	stage_file_oneshot(f);
	CHECK(stage_file_pwrite(f, "target", 6, 0) == 6 &&
	      count_files(dir, ".jnl") == 0, "oneshot: written, no journal");
	CHECK(stage_file_commit(f, etag) == 0, "oneshot: committed");
	stage_counters_get(st, &k1);
	size_t len = 0;
	char *d = obj_get(&fk, "b", "link", &len, NULL, 0);
	CHECK(d && len == 6 && !memcmp(d, "target", 6) && k1.syncs == k0.syncs &&
	      count_files(dir, ".jnl") == 0,
	      "oneshot: in S3, %llu syncs (want 0), no journal",
	      (unsigned long long)(k1.syncs - k0.syncs));
	free(d);
	stage_file_release(f);
	CHECK(count_files(dir, ".data") == 0, "oneshot: released, no data left");

	/* A failed one-shot commit: -EIO, no journal; release deletes it. */
	stage_file_new(st, "b", "fifo", NULL, 0, NULL, &f);
	stage_file_oneshot(f);
	puts_fail(&fk, 1, -EIO);
	CHECK(stage_file_commit(f, etag) == -EIO && count_files(dir, ".jnl") == 0 &&
	      !obj_get(&fk, "b", "fifo", &len, NULL, 0),
	      "oneshot: failed commit -EIO, no journal, nothing in S3");
	stage_file_release(f);
	CHECK(count_files(dir, ".data") == 0, "oneshot: failed one released, data deleted");

	/* Past one part: journaled from then on. */
	size_t big = (1 << 20) + 10;
	char *buf = calloc(1, big);
	stage_file_new(st, "b", "grown", NULL, 0, NULL, &f);
	stage_file_oneshot(f);
	CHECK(stage_file_pwrite(f, buf, 10, 0) == 10 && count_files(dir, ".jnl") == 0,
	      "oneshot: small write, no journal");
	CHECK(stage_file_pwrite(f, buf, big, 0) == (ssize_t)big &&
	      count_files(dir, ".jnl") == 1, "oneshot: past a part, journaled");
	stage_counters_get(st, &k0);
	CHECK(stage_file_commit(f, etag) == 0, "oneshot: grown file committed");
	stage_counters_get(st, &k1);
	CHECK(k1.syncs > k0.syncs && count_files(dir, ".jnl") == 0,
	      "oneshot: grown file's commit synced (%llu) and removed its journal",
	      (unsigned long long)(k1.syncs - k0.syncs));
	stage_file_release(f);
	free(buf);

	/* An ordinary file under POWER syncs. */
	stage_counters_get(st, &k0);
	stage_file_new(st, "b", "plain", NULL, 0, NULL, &f);
	CHECK(stage_file_pwrite(f, "x", 1, 0) == 1 && stage_file_commit(f, etag) == 0,
	      "oneshot: plain file committed");
	stage_counters_get(st, &k1);
	CHECK(k1.syncs - k0.syncs == 4, "oneshot: plain file: %llu syncs (want 4)",
	      (unsigned long long)(k1.syncs - k0.syncs));
	stage_file_release(f);
	stage_close(st);
	unit_rmtree(dir);
	free(dir);
	store_release(&fk);
}

/* Commits in parts: bytes and ETag form, a failing part (aborted, data
 * kept, retried), the upload id in the journal, and recovery aborting an
 * upload a crash left behind. */
static void test_multipart(void)
{
	struct store fk;
	store_init(&fk, 0);
	s3_fake_min_part_set(fk.fake, 1 << 20);
	char *dir = unit_tmpdir("stage-mpu");
	struct stage_conf c = { .dir = dir, .max_bytes = 64 << 20, .s3 = fk.s3,
				.up = { .part_size = 1 << 20, .threads = 3 } };
	struct stage *st = NULL;
	CHECK(stage_open(&c, &st) == 0, "mpu: stage opened");
	size_t size = (11 << 19) + 123;       /* 5.5 MiB + 123: 6 parts */
	char *obj = malloc(size);
	uint64_t s = 11;
	for (size_t i = 0; i < size; i++)
		obj[i] = (char)rnd(&s);
	struct stage_file *f;
	stage_file_new(st, "b", "big", NULL, 0, "text/plain", &f);
	CHECK(stage_file_pwrite(f, obj, size, 0) == (ssize_t)size, "mpu: 5.5 MiB staged");
	/* the 3rd part fails: commit -EIO, nothing left open, data kept */
	CHECK(s3_fault_fail(fk.s3, S3K_MPU_PART, 3, 1, -EIO) == 0, "mpu: rule");
	char etag[72];
	int rc = stage_file_commit(f, etag);
	CHECK(rc == -EIO && s3_fake_upload_count(fk.fake, "b") == 0 &&
	      s3_fault_seen(fk.s3, S3K_MPU_ABORT) == 1 && stage_file_dirty(f),
	      "mpu: a failed part: -EIO, the upload aborted, the file still dirty (%d)", rc);
	size_t olen = 0;
	char *o = obj_get(&fk, "b", "big", &olen, NULL, 0);
	CHECK(!o, "mpu: no object appeared");
	free(o);
	rc = stage_file_commit(f, etag);
	o = obj_get(&fk, "b", "big", &olen, NULL, 0);
	CHECK(rc == 0 && o && olen == size && memcmp(o, obj, size) == 0,
	      "mpu: the retry uploads every byte (%d)", rc);
	CHECK(strlen(etag) == 34 && !strcmp(etag + 32, "-6") && puts_tried(&fk) == 0,
	      "mpu: 6 parts, no single PUT, ETag %s", etag);
	CHECK(s3_fake_upload_count(fk.fake, "b") == 0, "mpu: no upload left open");
	free(o);
	stage_file_release(f);

	/* the upload id is journaled while the parts are in flight (of an
	 * upload at the commit: no streaming, whose threads a fork loses) */
	stage_close(st);
	c.stream_off = true;
	CHECK(stage_open(&c, &st) == 0, "mpu: reopened without streaming");
	struct s3_fault_rule slow = { .kind = S3K_MPU_PART, .type = S3F_DELAY,
				      .first = 1, .times = 0, .delay_ms = 200 };
	CHECK(s3_fault_add(fk.s3, &slow) == 0, "mpu: slow parts");
	stage_file_new(st, "b", "slow", NULL, 0, NULL, &f);
	stage_file_pwrite(f, obj, 3 << 20, 0);
	pid_t pid = fork();
	if (pid == 0) {
		stage_file_commit(f, etag);
		_exit(0);
	}
	char jpath[4200], text[4096] = "";
	snprintf(jpath, sizeof jpath, "%s/%016llx.jnl", dir, (unsigned long long)f->id);
	bool seen = false;
	for (int i = 0; i < 200 && !seen; i++) {
		FILE *j = fopen(jpath, "r");
		size_t n = j ? fread(text, 1, sizeof text - 1, j) : 0;
		if (j)
			fclose(j);
		text[n] = '\0';
		seen = strstr(text, "\nupload :fake-upload-") != NULL;
		if (!seen)
			usleep(10000);
	}
	kill(pid, SIGKILL);          /* a crash in the middle of the parts */
	waitpid(pid, NULL, 0);
	CHECK(seen && strstr(text, "state commit"), "mpu: the journal names the upload");
	s3_fault_clear(fk.s3);
	/* The child's parts went to its copy of the fake: make the parent's
	 * store hold an upload of that id, as S3 would after such a crash. */
	char id[64];
	s3_mpu_create(fk.fake, "b", "slow", NULL, 0, NULL, id, sizeof id);
	stage_file_release(f);       /* the parent's view: uncommitted */
	stage_close(st);
	char *jid = strstr(text, "fake-upload-");
	CHECK(jid && !strncmp(jid, id, strlen(id)), "mpu: the parent's upload has the journaled id (%s)", id);
	CHECK(stage_open(&c, &st) == 0, "mpu: reopened");
	struct stage_recovery_report rep;
	rc = stage_recover(st, &rep);
	o = obj_get(&fk, "b", "slow", &olen, NULL, 0);
	CHECK(rc == 0 && rep.reuploaded == 1 && o && olen == 3 << 20 &&
	      memcmp(o, obj, olen) == 0, "mpu: recovery uploads the file again (%d)", rc);
	CHECK(s3_fake_upload_count(fk.fake, "b") == 0,
	      "mpu: recovery aborted the interrupted upload: none left open");
	free(o);
	stage_close(st);
	unit_rmtree(dir);
	free(dir);
	free(obj);
	store_release(&fk);
}

int main(void)
{
	log_init("test_stage", getenv("STAGE_DEBUG") ? 2 : 0);
	test_journal();
	test_round_trip();
	test_pipe();
	test_fill();
	test_failure();
	test_concurrency();
	test_budget();
	test_multipart();
	test_oneshot();
	return unit_exit();
}
