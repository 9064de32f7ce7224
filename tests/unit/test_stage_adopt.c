/*
 * test_stage_adopt.c — recovery that leaves commit-begun files for the
 * drain (stage_conf.defer_commits) and stage_file_adopt, which opens them
 * again (sync/stage/stage.h). Checked, over the fake store behind the fault
 * wrapper: recovery sends no request for them, keeps them staged and
 * pending, and still moves what was never committed to recovered/; each
 * is adopted once, oldest first, sealed, with the bucket, key, size,
 * metadata and base its journal holds, and its commit uploads it with no
 * sync and no journal write (counted as re-uploaded); an upload its
 * journal names is aborted by that commit, which fails and keeps the file
 * while the abort does; of two copies of one key the older goes to
 * recovered/; a key replaced after recovery is not adopted; an older
 * journal (no base line) is adopted with its base not known; without defer_commits
 * recovery uploads as before.
 */
#include "sync/stage/stage_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_stage.h"

static struct stage *open_defer(const char *dir, bool defer, struct store *t)
{
	return stage_open_or_exit((struct stage_conf){ .dir = dir,
			.max_bytes = 64 << 20, .up = { .part_size = 1ull << 30 },
			.defer_commits = defer }, t);
}

/* Requests of every kind the store has seen. */
static unsigned seen_all(struct store *t)
{
	unsigned n = 0;
	for (int k = 0; k < S3K_N; k++)
		n += (unsigned)s3_fault_seen(t->s3, (enum s3_kind)k);
	return n;
}

static struct stage_counters counters(struct stage *st)
{
	struct stage_counters c;
	stage_counters_get(st, &c);
	return c;
}

/* A file of bucket "b" written with text, its base set (NULL: not), then
 * sealed (or, fail_put, committed with its PUT failing) and released:
 * pending with a "commit" journal. */
static void pending_file(struct stage *st, struct store *t, const char *key,
			 const char *text, const char *base, bool fail_put)
{
	struct stage_file *f;
	struct obj_kv meta[] = { { "mode", "600" } };
	if (stage_file_new(st, "b", key, meta, 1, "text/x-test", &f) != 0 ||
	    stage_file_pwrite(f, text, strlen(text), 0) != (ssize_t)strlen(text))
		exit(2);
	if (base)
		stage_file_set_base(f, base);
	if (fail_put)
		puts_fail(t, 1, -EIO);
	int rc = fail_put ? stage_file_commit(f, NULL) : stage_file_seal(f);
	if (rc != (fail_put ? -EIO : 0))
		exit(2);
	stage_file_release(f);
}

/* DIR/ID.EXT holds text. */
static void put_text(const char *dir, uint64_t id, const char *ext, const char *text)
{
	char path[600];
	snprintf(path, sizeof path, "%s/%016llx%s", dir, (unsigned long long)id, ext);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) || close(fd))
		exit(2);
}

/* Recovery defers; adoption opens each once, oldest first, sealed, with
 * what its journal holds; the commits upload them. */
static void test_defer(void)
{
	char *dir = unit_tmpdir("stage-adopt");
	struct store t;
	store_init(&t, 0);
	struct stage *st = open_defer(dir, true, &t);
	pending_file(st, &t, "sealed", "sealed bytes", "e-0", false);
	pending_file(st, &t, "failed", "its PUT failed", NULL, true);
	struct stage_file *d;
	if (stage_file_new(st, "b", "dirty", NULL, 0, NULL, &d) != 0 ||
	    stage_file_pwrite(d, "never closed", 12, 0) != 12)
		exit(2);
	stage_file_release(d);
	stage_close(st);

	st = open_defer(dir, true, &t);
	unsigned r0 = seen_all(&t);
	struct stage_recovery_report rep;
	CHECK(stage_recover(st, &rep) == 0 && rep.deferred == 2 && rep.recovered == 1 &&
	      rep.reuploaded == 0, "defer: recovery leaves the 2 commit-begun files "
	      "and moves the dirty one (%u deferred, %u moved, %u uploaded)",
	      rep.deferred, rep.recovered, rep.reuploaded);
	CHECK(seen_all(&t) == r0, "defer: no request sent (%u)", seen_all(&t) - r0);
	CHECK(count_files(dir, ".jnl") == 2 && count_files(dir, ".data") == 2 &&
	      counters(st).pending_files == 2, "defer: both staged, journaled, pending");

	struct stage_file *f[2];
	struct obj_meta w[2];
	bool known[2];
	uint64_t s0 = counters(st).syncs;
	CHECK(stage_file_adopt(st, &f[0], &w[0], &known[0]) == 0 &&
	      !strcmp(w[0].key, "sealed") && w[0].size == 12 && known[0] &&
	      !strcmp(w[0].etag, "e-0") && w[0].n_meta == 1 &&
	      !strcmp(w[0].content_type, "text/x-test"),
	      "adopt: the oldest first, with its key, size, metadata, type and base");
	CHECK(stage_file_adopt(st, &f[1], &w[1], &known[1]) == 0 &&
	      !strcmp(w[1].key, "failed") && !known[1],
	      "adopt: then the failed commit, its base not known (none set)");
	struct obj_meta none;
	bool none_known;
	CHECK(stage_file_adopt(st, &d, &none, &none_known) == -ENOENT,
	      "adopt: then none is left");
	struct stage_counters c = counters(st);
	CHECK(c.pending_files == 0 && c.open_files == 2 && c.sealed_files == 2 &&
	      c.sealed_bytes == 12 + 14, "adopt: open and sealed now, none pending");
	CHECK(stage_file_sealed(f[0]) && stage_file_dirty(f[0]) &&
	      stage_file_size(f[0]) == 12, "adopt: sealed and dirty, 12 bytes");
	char buf[32] = "";
	CHECK(stage_file_pread(f[0], buf, sizeof buf, 0) == 12 &&
	      !memcmp(buf, "sealed bytes", 12), "adopt: its bytes read");
	CHECK(seen_all(&t) == r0, "adopt: no request sent");
	for (int i = 0; i < 2; i++) {
		CHECK(stage_file_commit(f[i], NULL) == 0, "adopt: commit %d", i);
		stage_file_release(f[i]);
	}
	char meta[128];
	size_t n;
	char *o = obj_get(&t, "b", "sealed", &n, meta, sizeof meta);
	CHECK(o && n == 12 && !memcmp(o, "sealed bytes", 12) &&
	      !strcmp(meta, "mode=600;ct=text/x-test"),
	      "adopt: S3 has its bytes, metadata and type (%s)", meta);
	free(o);
	CHECK(s3_has(&t, "failed", "its PUT failed"), "adopt: and the failed one's");
	c = counters(st);
	CHECK(c.syncs == s0 + 2 && c.reuploaded_files == 2 && c.sealed_files == 0,
	      "adopt: one sync a file, the directory's after its journal went (no "
	      "data sync, no journal write: %llu); 2 re-uploaded counted",
	      (unsigned long long)(c.syncs - s0));
	CHECK(count_files(dir, ".jnl") == 0 && count_files(dir, ".data") == 0,
	      "adopt: nothing staged after the uploads and releases");
	obj_meta_release(&w[0]);
	obj_meta_release(&w[1]);
	stage_case_end(st, &t, dir);
}

/* A journal naming a multipart upload: the adopted file's commit aborts
 * it first; while the abort fails, the commit fails and the file stays. */
static void test_upload_named(void)
{
	char *dir = unit_tmpdir("stage-adopt-up");
	struct store t;
	store_init(&t, 0);
	char id[256];
	if (s3_mpu_create(t.s3, "b", "up", NULL, 0, NULL, id, sizeof id) != 0)
		exit(2);
	struct stage *st = open_defer(dir, true, &t);
	put_text(dir, 0x20, ".data", "uploaded once");
	struct stage_jnl j = { .state = STAGE_JS_COMMIT, .size = 13, .bucket = "b",
			       .key = "up", .upload_id = id, .base = "" };
	CHECK(stage_jnl_write(st, 0x20, &j, false) == 0, "upload: a journal naming one");
	stage_close(st);
	st = open_defer(dir, true, &t);
	struct stage_recovery_report rep;
	unsigned a0 = (unsigned)s3_fault_seen(t.s3, S3K_MPU_ABORT);
	CHECK(stage_recover(st, &rep) == 0 && rep.deferred == 1 &&
	      s3_fault_seen(t.s3, S3K_MPU_ABORT) == a0,
	      "upload: deferred, not aborted by recovery");
	struct stage_file *f;
	struct obj_meta w;
	bool known;
	CHECK(stage_file_adopt(st, &f, &w, &known) == 0 && known && !*w.etag,
	      "upload: adopted, based on none (a new key)");
	obj_meta_release(&w);
	s3_fault_fail(t.s3, S3K_MPU_ABORT, 1, 1, -EIO);
	CHECK(stage_file_commit(f, NULL) == -EIO && s3_has(&t, "up", NULL),
	      "upload: the abort fails: the commit fails, nothing uploaded");
	CHECK(stage_jnl_read(st, f->id, &j) == 0 && j.state == STAGE_JS_COMMIT &&
	      j.upload_id && !strcmp(j.upload_id, id), "upload: still journaled "
	      "\"commit\" naming it");
	stage_jnl_release(&j);
	CHECK(stage_file_commit(f, NULL) == 0 && s3_has(&t, "up", "uploaded once") &&
	      s3_fault_seen(t.s3, S3K_MPU_ABORT) == a0 + 2,
	      "upload: the next commit aborts it, then uploads");
	stage_file_release(f);
	CHECK(count_files(dir, ".jnl") == 0, "upload: nothing journaled after");
	stage_case_end(st, &t, dir);
}

/* Of two copies of one key the newer (higher id) is adopted, the older
 * goes to recovered/; a key replaced after recovery is not adopted; a
 * version-2 journal is, its base not known. */
static void test_two_stale_v2(void)
{
	char *dir = unit_tmpdir("stage-adopt-two");
	struct store t;
	store_init(&t, 0);
	struct stage *st = open_defer(dir, true, &t);
	struct stage_jnl j = { .state = STAGE_JS_COMMIT, .size = 5, .bucket = "b",
			       .key = "two", .base = "" };
	put_text(dir, 0x30, ".data", "older");
	put_text(dir, 0x31, ".data", "newer");
	CHECK(stage_jnl_write(st, 0x31, &j, false) == 0 &&
	      stage_jnl_write(st, 0x30, &j, false) == 0, "two: two commit journals of b/two");
	j.key = "gone";
	put_text(dir, 0x32, ".data", "stale");
	CHECK(stage_jnl_write(st, 0x32, &j, false) == 0, "two: one of b/gone");
	put_text(dir, 0x33, ".data", "v2!");
	put_text(dir, 0x33, ".jnl", "facetfs-stage 1\nstate commit\nsize 3\n"
		 "bucket :b\nkey :old\n");
	stage_close(st);
	st = open_defer(dir, true, &t);
	struct stage_recovery_report rep;
	CHECK(stage_recover(st, &rep) == 0 && rep.deferred == 3 && rep.recovered == 1,
	      "two: 3 deferred, the older copy of b/two moved (%u, %u)", rep.deferred,
	      rep.recovered);
	stage_key_replaced(st, "b", "gone");
	struct stage_file *f;
	struct obj_meta w;
	bool known;
	char buf[8] = "";
	CHECK(stage_file_adopt(st, &f, &w, &known) == 0 && !strcmp(w.key, "two") &&
	      stage_file_pread(f, buf, sizeof buf, 0) == 5 && !memcmp(buf, "newer", 5),
	      "two: the newer copy adopted");
	obj_meta_release(&w);
	CHECK(stage_file_commit(f, NULL) == 0 && s3_has(&t, "two", "newer"),
	      "two: and uploaded");
	stage_file_release(f);
	CHECK(stage_file_adopt(st, &f, &w, &known) == -ESTALE,
	      "two: b/gone, replaced after recovery, is not adopted");
	CHECK(stage_file_adopt(st, &f, &w, &known) == 0 && !strcmp(w.key, "old") &&
	      !known, "two: a version-1 journal is adopted, its base not known");
	obj_meta_release(&w);
	CHECK(stage_file_commit(f, NULL) == 0 && s3_has(&t, "old", "v2!"),
	      "two: and uploaded");
	stage_file_release(f);
	CHECK(stage_file_adopt(st, &f, &w, &known) == -ENOENT &&
	      counters(st).pending_files == 1, "two: none left; b/gone stays pending");
	stage_close(st);
	st = open_defer(dir, false, &t);
	CHECK(stage_recover(st, &rep) == 0 && rep.recovered == 1 && rep.reuploaded == 0 &&
	      s3_has(&t, "gone", NULL), "two: the next start moves the stale one to "
	      "recovered/, uploads nothing");
	stage_case_end(st, &t, dir);
}

/* Without defer_commits recovery uploads, as before. */
static void test_no_defer(void)
{
	char *dir = unit_tmpdir("stage-adopt-no");
	struct store t;
	store_init(&t, 0);
	struct stage *st = open_defer(dir, false, &t);
	pending_file(st, &t, "now", "uploaded by recovery", "", false);
	stage_close(st);
	st = open_defer(dir, false, &t);
	struct stage_recovery_report rep;
	struct stage_file *f;
	struct obj_meta w;
	bool known;
	CHECK(stage_recover(st, &rep) == 0 && rep.deferred == 0 && rep.reuploaded == 1 &&
	      s3_has(&t, "now", "uploaded by recovery"),
	      "no defer: recovery uploads the sealed file itself");
	CHECK(stage_file_adopt(st, &f, &w, &known) == -ENOENT, "no defer: nothing to adopt");
	stage_case_end(st, &t, dir);
}

int main(void)
{
	test_defer();
	test_upload_named();
	test_two_stale_v2();
	test_no_defer();
	return unit_exit();
}
