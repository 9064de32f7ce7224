/*
 * test_stage.c — unit tests of write staging (sync/stage.h) with a fake
 * uploader behind the stage_uploader seam (in memory, MD5 ETags, can fail,
 * be slow, or kill the process mid-upload): write/read/truncate/commit
 * round trips against a model buffer, fill from an existing object,
 * failed uploads keeping the data, concurrent writers and commits (no torn
 * upload, coalesced commits, reads of other files not blocked), crash
 * recovery after a real crash of a child process, the byte budget, EFBIG,
 * journal escaping. Prints "ok - ..." / "not ok - ..." lines.
 */
#include "sync/stage_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#define UNIT_WITH_MD5
#include "tests/unit/unit.h"

static int failures;

static void check(bool cond, const char *what)
{
	printf("%s - %s\n", cond ? "ok" : "not ok", what);
	fflush(stdout);
	if (!cond)
		failures++;
}

/* ---- the fake uploader ------------------------------------------------ */

#define FAKE_MAX 16

struct fake_obj {
	char bucket[64], key[256];
	char *data;
	size_t size;
	char meta[512];          /* "name=value;" ..., then "ct=" */
};

struct fake {
	pthread_mutex_t lock;
	struct fake_obj obj[FAKE_MAX];
	int n_obj;
	int puts;                /* attempts */
	int fail;                /* > 0: that many next puts fail with fail_err */
	int fail_err;
	int delay_ms;            /* each put sleeps this long */
	const char *exit_key;    /* put of this key ends the process (a crash) */
	atomic_int started;      /* puts begun (read without the lock) */
	atomic_int finished;     /* puts returned */
};

static int fake_put(void *ctx, const char *bucket, const char *key, int fd,
		    uint64_t size, const struct obj_kv *meta, size_t n_meta,
		    const char *ct, char etag[72])
{
	struct fake *fk = ctx;
	if (fk->exit_key && strcmp(fk->exit_key, key) == 0)
		_exit(0);
	atomic_fetch_add(&fk->started, 1);
	pthread_mutex_lock(&fk->lock);
	fk->puts++;
	int fail = fk->fail > 0 ? (fk->fail--, fk->fail_err) : 0;
	int delay = fk->delay_ms;
	pthread_mutex_unlock(&fk->lock);
	if (delay)
		usleep((useconds_t)delay * 1000);
	if (fail) {
		atomic_fetch_add(&fk->finished, 1);
		return fail;
	}
	char *buf = malloc(size ? size : 1);
	size_t got = 0;
	while (got < size) {
		ssize_t n = pread(fd, buf + got, size - got, (off_t)got);
		if (n <= 0) {
			free(buf);
			return -EIO;
		}
		got += (size_t)n;
	}
	unit_md5_hex(buf, size, etag);
	pthread_mutex_lock(&fk->lock);
	struct fake_obj *o = NULL;
	for (int i = 0; i < fk->n_obj && !o; i++)
		if (!strcmp(fk->obj[i].bucket, bucket) && !strcmp(fk->obj[i].key, key))
			o = &fk->obj[i];
	if (!o && fk->n_obj < FAKE_MAX)
		o = &fk->obj[fk->n_obj++];
	if (o) {
		free(o->data);
		snprintf(o->bucket, sizeof o->bucket, "%s", bucket);
		snprintf(o->key, sizeof o->key, "%s", key);
		o->data = buf;
		o->size = size;
		size_t m = 0;
		o->meta[0] = '\0';
		for (size_t i = 0; i < n_meta; i++)
			m += (size_t)snprintf(o->meta + m, sizeof o->meta - m, "%s=%s;",
					      meta[i].name, meta[i].value);
		snprintf(o->meta + m, sizeof o->meta - m, "ct=%s", ct ? ct : "(null)");
	} else {
		free(buf);
	}
	pthread_mutex_unlock(&fk->lock);
	atomic_fetch_add(&fk->finished, 1);
	return 0;
}

static struct fake_obj *fake_get(struct fake *fk, const char *bucket,
				 const char *key)
{
	for (int i = 0; i < fk->n_obj; i++)
		if (!strcmp(fk->obj[i].bucket, bucket) && !strcmp(fk->obj[i].key, key))
			return &fk->obj[i];
	return NULL;
}

static void fake_init(struct fake *fk)
{
	memset(fk, 0, sizeof *fk);
	atomic_init(&fk->started, 0);
	pthread_mutex_init(&fk->lock, NULL);
	fk->fail_err = -EIO;
}

static void fake_release(struct fake *fk)
{
	for (int i = 0; i < fk->n_obj; i++)
		free(fk->obj[i].data);
	pthread_mutex_destroy(&fk->lock);
}

static char *mk_dir(const char *tag)
{
	char *d;
	if (asprintf(&d, "%s/facetfs-stage-%s-XXXXXX",
		     getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", tag) < 0)
		abort();
	if (!mkdtemp(d))
		abort();
	return d;
}

static void rm_rf(const char *dir)
{
	char *cmd;
	if (asprintf(&cmd, "rm -rf '%s'", dir) >= 0) {
		if (system(cmd) != 0)
			fprintf(stderr, "# cannot remove %s\n", dir);
		free(cmd);
	}
}

static struct stage *open_stage(const char *dir, uint64_t max, uint64_t maxobj,
				struct fake *fk)
{
	struct stage_conf c = { .dir = dir, .max_bytes = max, .max_object = maxobj,
				.up = { .ctx = fk, .put = fake_put } };
	struct stage *st = NULL;
	int err = stage_open(&c, &st);
	if (err) {
		printf("# stage_open(%s): %s\n", dir, strerror(-err));
		exit(1);
	}
	return st;
}

/* Files in dir whose name ends in ext. */
static int count_files(const char *dir, const char *ext)
{
	DIR *d = opendir(dir);
	int n = 0;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		size_t l = strlen(de->d_name), e = strlen(ext);
		if (de->d_name[0] != '.' && l >= e && !strcmp(de->d_name + l - e, ext))
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

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
	struct fake fk;
	fake_init(&fk);
	char *dir = mk_dir("rt");
	struct stage *st = open_stage(dir, 64 << 20, 0, &fk);
	struct obj_kv meta[] = { { "color", "black" } };
	struct stage_file *f;
	check(stage_file_new(st, "b", "dir/file.bin", meta, 1, "text/plain", &f) == 0,
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
	check(ok && stage_file_size(f) == size, "round trip: 400 random pwrites, size as written");
	ssize_t n = stage_file_pread(f, buf, cap, 0);
	check(n == (ssize_t)size && memcmp(buf, model, size) == 0,
	      "round trip: pread returns exactly the bytes written");
	check(stage_file_pread(f, buf, 10, size) == 0 &&
	      stage_file_pread(f, buf, 10, size - 3) == 3,
	      "round trip: pread at/near the end is short");
	check(stage_file_truncate(f, 1000000) == 0 && stage_file_size(f) == 1000000 &&
	      stage_file_truncate(f, 1500000) == 0, "round trip: truncate down then up");
	size = 1500000;
	memset(model + 1000000, 0, 500000);
	n = stage_file_pread(f, buf, cap, 0);
	check(n == (ssize_t)size && memcmp(buf, model, size) == 0,
	      "round trip: truncated tail is gone, regrown part reads zeros");
	char etag[72] = "", want[33];
	unit_md5_hex(model, size, want);
	check(stage_file_dirty(f) && stage_file_commit(f, etag) == 0 && fk.puts == 1,
	      "round trip: commit uploads once");
	struct fake_obj *o = fake_get(&fk, "b", "dir/file.bin");
	check(o && o->size == size && memcmp(o->data, model, size) == 0,
	      "round trip: uploaded bytes equal the bytes written");
	check(strcmp(etag, want) == 0, "round trip: ETag is the MD5 of the data");
	check(o && strcmp(o->meta, "color=black;ct=text/plain") == 0,
	      "round trip: metadata and content type uploaded");
	char etag2[72] = "";
	check(!stage_file_dirty(f) && stage_file_commit(f, etag2) == 0 && fk.puts == 1 &&
	      strcmp(etag2, want) == 0, "round trip: clean commit uploads nothing, same ETag");
	check(count_files(dir, ".jnl") == 0, "round trip: no journal after the commit");
	check(stage_file_pwrite(f, "Z", 1, 5) == 1 && count_files(dir, ".jnl") == 1 &&
	      stage_file_commit(f, etag2) == 0 && fk.puts == 2 && o->data[5] == 'Z' &&
	      strcmp(etag2, etag) != 0, "round trip: write after commit journals and re-uploads");
	struct obj_kv m2[] = { { "color", "green" }, { "x", "1" } };
	check(stage_file_set_meta(f, m2, 2, NULL) == 0 && stage_file_commit(f, NULL) == 0 &&
	      fk.puts == 3 && strcmp(o->meta, "color=green;x=1;ct=(null)") == 0,
	      "round trip: set_meta makes it dirty and is uploaded");
	check(stage_file_rename(f, "b", "renamed") == 0 && stage_file_commit(f, NULL) == 0 &&
	      fake_get(&fk, "b", "renamed") && fake_get(&fk, "b", "renamed")->size == size,
	      "round trip: rename uploads to the new key");
	struct stage_counters c;
	stage_counters_get(st, &c);
	check(c.used_bytes == size && c.open_files == 1 && c.uploads == 4,
	      "round trip: counters (used bytes, open files, uploads)");
	stage_file_release(f);
	stage_counters_get(st, &c);
	check(c.used_bytes == 0 && c.open_files == 0 && count_files(dir, ".data") == 0,
	      "round trip: release of a committed file deletes it and frees the budget");

	/* An empty created file: commit uploads an empty object. */
	check(stage_file_new(st, "b", "empty", NULL, 0, NULL, &f) == 0 &&
	      stage_file_commit(f, etag) == 0 && fake_get(&fk, "b", "empty") &&
	      fake_get(&fk, "b", "empty")->size == 0 &&
	      strcmp(etag, "d41d8cd98f00b204e9800998ecf8427e") == 0,
	      "round trip: created empty file uploads an empty object");
	stage_file_release(f);
	free(model);
	free(buf);
	stage_close(st);
	rm_rf(dir);
	free(dir);
	fake_release(&fk);
}

struct src {
	const char *data;
	size_t size;
	size_t cut;             /* a fetch ending past this gives a short count */
	int calls;
};

static int src_fetch(void *ctx, uint64_t off, void *buf, size_t len, size_t *got)
{
	struct src *s = ctx;
	s->calls++;
	size_t end = off + len > s->size ? s->size : off + len;
	if (s->cut && end > s->cut)
		end = s->cut;
	*got = end > off ? end - off : 0;
	memcpy(buf, s->data + off, *got);
	return 0;
}

static void test_fill(void)
{
	struct fake fk;
	fake_init(&fk);
	char *dir = mk_dir("fill");
	struct stage *st = open_stage(dir, 32 << 20, 0, &fk);
	size_t size = 20 << 20;
	char *obj = malloc(size), *buf = malloc(size);
	uint64_t s = 7;
	for (size_t i = 0; i < size; i++)
		obj[i] = (char)rnd(&s);
	struct src src = { obj, size, 0, 0 };
	struct stage_file *f;
	stage_file_new(st, "b", "k", NULL, 0, NULL, &f);
	check(stage_file_fill(f, src_fetch, &src, size, "abc123") == 0 &&
	      src.calls == 3 && stage_file_size(f) == size && !stage_file_dirty(f),
	      "fill: 20 MiB fetched in 8 MiB chunks, clean");
	check(stage_file_pread(f, buf, size, 0) == (ssize_t)size &&
	      memcmp(buf, obj, size) == 0, "fill: staged bytes equal the object");
	char etag[72];
	check(stage_file_commit(f, etag) == 0 && fk.puts == 0 && strcmp(etag, "abc123") == 0,
	      "fill: commit without writes uploads nothing, returns the object's ETag");
	stage_file_pwrite(f, "hello", 5, 1000);
	memcpy(obj + 1000, "hello", 5);
	struct fake_obj *o;
	check(stage_file_commit(f, etag) == 0 && fk.puts == 1 &&
	      (o = fake_get(&fk, "b", "k")) && o->size == size &&
	      memcmp(o->data, obj, size) == 0,
	      "fill: a small write uploads the whole object with the change");
	stage_file_release(f);

	struct src shrt = { obj, size, 10 << 20, 0 };
	stage_file_new(st, "b", "k2", NULL, 0, NULL, &f);
	struct stage_counters c;
	check(stage_file_fill(f, src_fetch, &shrt, size, NULL) == -EIO &&
	      stage_file_size(f) == 0, "fill: a short fetch is -EIO, file empty again");
	stage_counters_get(st, &c);
	check(c.used_bytes == 0, "fill: failed fill gives its bytes back to the budget");
	src.calls = 0;
	check(stage_file_fill(f, src_fetch, &src, 40 << 20, NULL) == -ENOSPC && src.calls == 0,
	      "fill: over the budget is -ENOSPC before any fetch");
	stage_file_release(f);
	free(obj);
	free(buf);
	stage_close(st);
	rm_rf(dir);
	free(dir);
	fake_release(&fk);
}

static void test_failure(void)
{
	struct fake fk;
	fake_init(&fk);
	char *dir = mk_dir("fail");
	struct stage *st = open_stage(dir, 8 << 20, 0, &fk);
	struct stage_file *f;
	stage_file_new(st, "b", "k", NULL, 0, NULL, &f);
	const char msg[] = "precious data";
	stage_file_pwrite(f, msg, sizeof msg, 0);
	const int errs[] = { -EIO, -EACCES, -EHOSTUNREACH };
	bool all = true;
	for (int i = 0; i < 3; i++) {
		fk.fail = 1;
		fk.fail_err = errs[i];
		all = all && stage_file_commit(f, NULL) == -EIO;
	}
	check(all && fk.puts == 3, "failure: 5xx, 403, unreachable all make commit -EIO");
	char buf[64] = "";
	struct stage_jnl j;
	check(stage_file_dirty(f) && stage_file_pread(f, buf, sizeof buf, 0) == sizeof msg &&
	      strcmp(buf, msg) == 0, "failure: staged data kept and still dirty");
	check(stage_jnl_read(st, f->id, &j) == 0 && j.state == STAGE_JS_COMMIT &&
	      j.size == sizeof msg, "failure: journal says the commit began");
	stage_jnl_release(&j);
	struct fake_obj *o = NULL;
	check(stage_file_commit(f, NULL) == 0 && (o = fake_get(&fk, "b", "k")) &&
	      strcmp(o->data, msg) == 0 && count_files(dir, ".jnl") == 0,
	      "failure: a later commit succeeds and clears the journal");
	/* Released after a failed commit: kept for recovery. */
	stage_file_pwrite(f, "X", 1, 0);
	fk.fail = 1;
	check(stage_file_commit(f, NULL) == -EIO, "failure: fails again");
	stage_file_release(f);
	struct stage_counters c;
	stage_counters_get(st, &c);
	check(count_files(dir, ".data") == 1 && c.pending_files == 1 &&
	      c.used_bytes == sizeof msg && c.upload_errors == 4,
	      "failure: released with a failed commit: kept, pending, still charged");
	struct stage_recovery_report r;
	check(stage_recover(st, &r) == 0 && r.reuploaded == 1 &&
	      o && o->data[0] == 'X' && count_files(dir, ".data") == 0,
	      "failure: stage_recover uploads it while running");
	stage_counters_get(st, &c);
	check(c.pending_files == 0 && c.used_bytes == 0, "failure: nothing pending after");
	fk.fail = 1;
	fk.fail_err = -EFBIG;
	stage_file_new(st, "b", "big", NULL, 0, NULL, &f);
	check(stage_file_commit(f, NULL) == -EFBIG, "failure: uploader's -EFBIG passes through");
	stage_file_commit(f, NULL);
	stage_file_release(f);
	stage_close(st);
	rm_rf(dir);
	free(dir);
	fake_release(&fk);
}

/* ---- concurrency -------------------------------------------------------- */

#define BLK (64 << 10)
#define NBLK 64

struct torn_check {
	struct fake *fk;
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
		pthread_mutex_lock(&t->fk->lock);
		struct fake_obj *o = fake_get(t->fk, "b", "conc");
		for (size_t b = 0; o && b < o->size / BLK; b++)
			for (size_t i = 1; i < BLK; i++)
				if (o->data[b * BLK + i] != o->data[b * BLK]) {
					t->torn++;
					break;
				}
		pthread_mutex_unlock(&t->fk->lock);
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
	struct fake fk;
	fake_init(&fk);
	char *dir = mk_dir("conc");
	struct stage *st = open_stage(dir, 64 << 20, 0, &fk);
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
	check(ok, "concurrency: 6 writer threads, 30 rounds of 64 whole blocks each");
	printf("# %d commits ran during the writes\n", atomic_load(&tc.commits));
	check(atomic_load(&tc.commits) >= 3 && tc.errors == 0 && tc.torn == 0,
	      "concurrency: commits during writes never upload a torn block");
	stage_file_commit(f, NULL);
	struct fake_obj *o = fake_get(&fk, "b", "conc");
	bool final = o && o->size == NBLK * BLK;
	for (size_t i = 0; final && i < o->size; i++)
		final = o->data[i] == 'A' + w[(i / BLK) % NT].last % 26;
	check(final, "concurrency: final upload holds every thread's last round");

	/* Two commits at once with a slow uploader coalesce into one upload. */
	stage_file_pwrite(f, "x", 1, 0);
	fk.delay_ms = 1500;
	int puts0 = fk.puts;
	struct commit_arg a1 = { .f = f }, a2 = { .f = f };
	pthread_t t1, t2;
	int started0 = atomic_load(&fk.started);
	int finished0 = atomic_load(&fk.finished);
	pthread_create(&t1, NULL, do_commit, &a1);
	while (atomic_load(&fk.started) == started0)
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
	bool upload_still_running = atomic_load(&fk.finished) == finished0;
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	check(a1.rc == 0 && a2.rc == 0 && fk.puts == puts0 + 1 &&
	      strcmp(a1.etag, a2.etag) == 0 && a1.etag[0],
	      "concurrency: a commit during a commit waits and coalesces (one upload)");
	printf("# read/write of other file during an upload: %.1f ms\n", took * 1e3);
	check(rd && upload_still_running,
	      "concurrency: upload blocks neither reads of it nor other files");
	/* A write during an upload waits for the upload. */
	stage_file_pwrite(f, "z", 1, 0);
	a1 = (struct commit_arg){ .f = f };
	int started = atomic_load(&fk.started);
	pthread_create(&t1, NULL, do_commit, &a1);
	while (atomic_load(&fk.started) == started)
		usleep(1000);
	t0 = unit_now_s();
	stage_file_pwrite(f, "w", 1, 0);
	took = unit_now_s() - t0;
	pthread_join(t1, NULL);
	o = fake_get(&fk, "b", "conc");
	check(took > 0.1 && o->data[0] == 'z' && stage_file_dirty(f),
	      "concurrency: a write waits for the upload in progress, lands after it");
	fk.delay_ms = 0;
	stage_file_commit(f, NULL);
	stage_file_commit(g, NULL);
	stage_file_release(f);
	stage_file_release(g);
	stage_close(st);
	rm_rf(dir);
	free(dir);
	fake_release(&fk);
}

/* ---- crash recovery ----------------------------------------------------- */

static const char *const crash_key_dirty = "a/dirty file%.txt";

/* The child: stage files in every state, then crash (no release, no close). */
static void crash_child(const char *dir)
{
	struct fake fk;
	fake_init(&fk);
	struct stage *st = open_stage(dir, 64 << 20, 0, &fk);
	struct stage_file *f;
	struct obj_kv meta[] = { { "color", "black and white" }, { "note", "100%\nsure" },
				 { "empty", "" } };
	/* A: written, never committed -> recovered/ */
	stage_file_new(st, "bk", crash_key_dirty, meta, 3, NULL, &f);
	stage_file_pwrite(f, "AAAA", 4, 0);
	/* B: commit began and failed -> re-upload, with its metadata */
	stage_file_new(st, "bk", "b", meta, 3, "text/plain; charset=utf-8", &f);
	stage_file_pwrite(f, "BBBBBB", 6, 0);
	fk.fail = 1;
	stage_file_commit(f, NULL);
	/* C: committed -> deleted */
	stage_file_new(st, "bk", "c", NULL, 0, NULL, &f);
	stage_file_pwrite(f, "CC", 2, 0);
	stage_file_commit(f, NULL);
	/* D: never written -> deleted */
	stage_file_new(st, "bk", "d", NULL, 0, NULL, &f);
	/* E: committed, then written again -> recovered/ */
	stage_file_new(st, "bk", "e", NULL, 0, NULL, &f);
	stage_file_pwrite(f, "EEE", 3, 0);
	stage_file_commit(f, NULL);
	stage_file_pwrite(f, "e", 1, 3);
	/* F: the process dies during the upload -> re-upload */
	stage_file_new(st, "bk", "f", NULL, 0, NULL, &f);
	stage_file_pwrite(f, "FFFFFFFF", 8, 0);
	fk.exit_key = "f";
	stage_file_commit(f, NULL);
	_exit(3);   /* not reached: the upload of f ends the process */
}

static void test_crash(void)
{
	char *dir = mk_dir("crash");
	pid_t pid = fork();
	if (pid == 0)
		crash_child(dir);
	int status = 0;
	waitpid(pid, &status, 0);
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "crash: child staged files in every state and died mid-upload");
	check(count_files(dir, ".data") == 6 && count_files(dir, ".jnl") == 4,
	      "crash: 6 data files, 4 journals left behind");

	struct fake fk;
	fake_init(&fk);
	struct stage *st = open_stage(dir, 64 << 20, 0, &fk);
	struct stage_counters c;
	stage_counters_get(st, &c);
	check(c.used_bytes == 4 + 6 + 2 + 0 + 4 + 8 && c.pending_files == 4,
	      "crash: reopen charges what is staged; 4 pending");
	/* A new file opened before recovery is left alone by it. */
	struct stage_file *n;
	check(stage_file_new(st, "bk", "new", NULL, 0, NULL, &n) == 0 &&
	      stage_file_pwrite(n, "N", 1, 0) == 1, "crash: new file gets a fresh id");
	struct stage_recovery_report r;
	check(stage_recover(st, &r) == 0, "crash: stage_recover");
	printf("# reuploaded %u, failed %u, recovered %u (%llu bytes), deleted %u\n",
	       r.reuploaded, r.reupload_failed, r.recovered,
	       (unsigned long long)r.recovered_bytes, r.deleted);
	check(r.reuploaded == 2 && r.reupload_failed == 0 && r.recovered == 2 &&
	      r.recovered_bytes == 8 && r.deleted == 2,
	      "crash: 2 re-uploaded, 2 moved to recovered/, 2 deleted");
	struct fake_obj *b = fake_get(&fk, "bk", "b"), *ff = fake_get(&fk, "bk", "f");
	check(fk.n_obj == 2 && b && ff && b->size == 6 && !memcmp(b->data, "BBBBBB", 6) &&
	      ff->size == 8 && !memcmp(ff->data, "FFFFFFFF", 8),
	      "crash: commit-begun files re-uploaded with their bytes");
	check(b && strcmp(b->meta, "color=black and white;note=100%\nsure;empty=;"
			  "ct=text/plain; charset=utf-8") == 0,
	      "crash: re-upload carries the journaled metadata and content type");
	char rd[512];
	snprintf(rd, sizeof rd, "%s", stage_recovered_dir(st));
	printf("# recovered/*.journal %d, *.jnl %d, *.data %d\n", count_files(rd, ".journal"),
	       count_files(dir, ".jnl"), count_files(dir, ".data"));
	check(count_files(rd, ".journal") == 2 && count_files(dir, ".jnl") == 1 &&
	      count_files(dir, ".data") == 1, "crash: staging holds only the open file");
	/* The recovered name says bucket/key and time; its bytes are intact. */
	DIR *d = opendir(rd);
	struct dirent *de;
	bool found_a = false, found_e = false;
	while (d && (de = readdir(d))) {
		char p[1024], buf[16] = "";
		snprintf(p, sizeof p, "%s/%s", rd, de->d_name);
		if (strstr(de->d_name, ".journal"))
			continue;
		int fd = open(p, O_RDONLY);
		ssize_t got = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
		if (fd >= 0)
			close(fd);
		printf("# recovered: %s\n", de->d_name);
		if (!strncmp(de->d_name, "bk%2Fa%2Fdirty file%25.txt@20", 29) &&
		    got == 4 && !strcmp(buf, "AAAA"))
			found_a = true;
		if (!strncmp(de->d_name, "bk%2Fe@20", 9) && got == 4 && !strcmp(buf, "EEEe"))
			found_e = true;
	}
	if (d)
		closedir(d);
	check(found_a && found_e,
	      "crash: recovered/BUCKET%2FKEY@TIME files hold the uncommitted bytes");
	stage_counters_get(st, &c);
	check(c.used_bytes == 1 && c.pending_files == 0 && c.recovered_files == 2 &&
	      c.reuploaded_files == 2, "crash: counters after recovery");
	stage_file_commit(n, NULL);
	stage_file_release(n);
	stage_close(st);
	fake_release(&fk);

	/* Re-upload failing at start: kept, and done by a later recovery. */
	fake_init(&fk);
	st = open_stage(dir, 64 << 20, 0, &fk);
	stage_file_new(st, "bk", "g", NULL, 0, NULL, &n);
	stage_file_pwrite(n, "GG", 2, 0);
	fk.fail = 1;
	stage_file_commit(n, NULL);
	stage_file_release(n);
	fk.fail = 1;
	check(stage_recover(st, &r) == 0 && r.reupload_failed == 1 &&
	      count_files(dir, ".data") == 1, "crash: S3 down during recovery keeps the file");
	check(stage_recover(st, &r) == 0 && r.reuploaded == 1 &&
	      fake_get(&fk, "bk", "g") && count_files(dir, ".data") == 0,
	      "crash: next recovery uploads it");
	/* A malformed journal: data goes to recovered/ as unknown-ID. */
	stage_file_new(st, "bk", "h", NULL, 0, NULL, &n);
	stage_file_pwrite(n, "H", 1, 0);
	uint64_t id = n->id;
	char jp[512];
	snprintf(jp, sizeof jp, "%s/%016llx.jnl", dir, (unsigned long long)id);
	n->js = STAGE_JS_NONE;   /* as if crashed: release deletes nothing ... */
	int fd = open(jp, O_WRONLY | O_TRUNC);
	check(fd >= 0 && write(fd, "garbage\n", 8) == 8, "crash: journal overwritten with garbage");
	if (fd >= 0)
		close(fd);
	n->js = STAGE_JS_DIRTY;  /* ... so keep it: release leaves it on disk */
	stage_file_release(n);
	check(stage_recover(st, &r) == 0 && r.recovered == 1 &&
	      count_files(rd, ".journal") == 3, "crash: malformed journal -> recovered/unknown-ID");
	stage_close(st);
	fake_release(&fk);
	rm_rf(dir);
	free(dir);
}

/* ---- budget and limits -------------------------------------------------- */

static void test_budget(void)
{
	struct fake fk;
	fake_init(&fk);
	char *dir = mk_dir("budget");
	struct stage *st = open_stage(dir, 1 << 20, 0, &fk);
	char *buf = calloc(1, 1 << 20);
	struct stage_file *f, *g;
	stage_file_new(st, "b", "f", NULL, 0, NULL, &f);
	stage_file_new(st, "b", "g", NULL, 0, NULL, &g);
	check(stage_file_pwrite(f, buf, 1 << 20, 0) == 1 << 20,
	      "budget: 1 MiB fits a 1 MiB budget");
	check(stage_file_pwrite(f, buf, 1, 1 << 20) == -ENOSPC &&
	      stage_file_pwrite(g, buf, 1, 0) == -ENOSPC &&
	      stage_file_truncate(g, 10) == -ENOSPC && stage_file_size(g) == 0,
	      "budget: one more byte anywhere is -ENOSPC");
	check(stage_file_pwrite(f, buf, 4096, 1000) == 4096,
	      "budget: overwriting staged bytes needs no budget");
	check(stage_file_commit(f, NULL) == 0 && stage_file_pwrite(g, buf, 1, 0) == -ENOSPC,
	      "budget: committed but open data still counts (never evicted)");
	check(stage_file_truncate(f, 512 << 10) == 0 &&
	      stage_file_pwrite(g, buf, 512 << 10, 0) == 512 << 10,
	      "budget: truncating one file makes room for another");
	stage_file_commit(f, NULL);
	stage_file_release(f);
	check(stage_file_pwrite(g, buf, 512 << 10, 512 << 10) == 512 << 10,
	      "budget: releasing a committed file frees its bytes");
	struct stage_counters c;
	stage_counters_get(st, &c);
	check(c.enospc == 4 && c.used_bytes == 1 << 20, "budget: refusals counted");
	stage_file_commit(g, NULL);
	stage_file_release(g);
	stage_close(st);
	rm_rf(dir);
	free(dir);

	/* EFBIG: a small max_object for the test, then the real 5 GiB one. */
	dir = mk_dir("efbig");
	st = open_stage(dir, 1ull << 40, 1 << 20, &fk);
	stage_file_new(st, "b", "f", NULL, 0, NULL, &f);
	check(stage_file_pwrite(f, buf, 2, (1 << 20) - 1) == -EFBIG &&
	      stage_file_pwrite(f, buf, 1, (1 << 20) - 1) == 1,
	      "efbig: a write past max_object is -EFBIG, up to it is fine");
	check(stage_file_truncate(f, (1 << 20) + 1) == -EFBIG &&
	      stage_file_size(f) == 1 << 20, "efbig: truncate past max_object");
	stage_file_release(f);
	stage_file_new(st, "b", "g", NULL, 0, NULL, &g);
	struct src src = { buf, 2 << 20, 0, 0 };
	check(stage_file_fill(g, src_fetch, &src, 2 << 20, NULL) == -EFBIG && src.calls == 0,
	      "efbig: an existing object over max_object cannot be opened for writing");
	stage_file_release(g);
	stage_close(st);
	st = open_stage(dir, 1ull << 40, 0, &fk);
	stage_file_new(st, "b", "f", NULL, 0, NULL, &f);
	check(stage_file_pwrite(f, "x", 1, STAGE_MAX_OBJECT) == -EFBIG &&
	      stage_file_pwrite(f, "x", 1, STAGE_MAX_OBJECT - 1) == 1 &&
	      stage_file_size(f) == STAGE_MAX_OBJECT,
	      "efbig: default limit is 5 GiB (sparse file up to it is fine)");
	stage_file_truncate(f, 0);
	stage_file_commit(f, NULL);
	stage_file_release(f);
	stage_counters_get(st, &c);
	check(c.used_bytes == 1 << 20 && c.pending_files == 1,
	      "efbig: only the uncommitted 1 MiB of the earlier stage is still charged");
	stage_close(st);
	rm_rf(dir);
	free(dir);
	free(buf);
	fake_release(&fk);
}

static void test_journal(void)
{
	char *dir = mk_dir("jnl");
	struct fake fk;
	fake_init(&fk);
	struct stage *st = open_stage(dir, 1 << 20, 0, &fk);
	struct obj_kv meta[] = { { "sp ace", "tab\there" }, { "pct", "%41%" },
				 { "nl", "a\r\nb" }, { "empty", "" }, { "utf", "\xc3\xbc" } };
	struct stage_jnl j = { .state = STAGE_JS_COMMIT, .size = 12345,
			       .bucket = "bk", .key = "k/ey with space:colon",
			       .ctype = "", .meta = meta, .n_meta = 5 }, r;
	bool ok = stage_jnl_write(st, 77, &j) == 0 && stage_jnl_read(st, 77, &r) == 0;
	ok = ok && r.state == STAGE_JS_COMMIT && r.size == 12345 &&
	     !strcmp(r.bucket, "bk") && !strcmp(r.key, j.key) && r.ctype &&
	     !strcmp(r.ctype, "") && r.n_meta == 5;
	for (size_t i = 0; ok && i < 5; i++)
		ok = !strcmp(r.meta[i].name, meta[i].name) &&
		     !strcmp(r.meta[i].value, meta[i].value);
	check(ok, "journal: write/read round trip with spaces, %, CR/LF, empty, UTF-8");
	stage_jnl_release(&r);
	check(stage_jnl_remove(st, 77) == 0 && stage_jnl_read(st, 77, &r) == -ENOENT,
	      "journal: removed");
	stage_close(st);
	rm_rf(dir);
	free(dir);
	fake_release(&fk);
}

int main(void)
{
	log_init("test_stage", getenv("STAGE_DEBUG") ? 2 : 0);
	test_journal();
	test_round_trip();
	test_fill();
	test_failure();
	test_concurrency();
	test_crash();
	test_budget();
	printf("# %d failed\n", failures);
	return failures ? 1 : 0;
}
