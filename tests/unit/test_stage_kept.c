/*
 * test_stage_kept.c — unit tests of staged files whose commit failed
 * (sync/stage/stage_kept.c and the upload hooks' abandoned uploads) on the
 * in-memory store behind the fault wrapper: a multipart upload whose part
 * and abort failed is aborted by the next commit and never blocks one;
 * a file kept for the next start is uploaded there unless a newer
 * version of its key was written, renamed onto or deleted meanwhile
 * (then it goes to recovered/), and of two failed commits of one key the
 * later one wins. A crash is a copy of the staging directory taken at that
 * moment (its image), recovered by a second stage: while a later commit
 * of the key uploads, and while the failed file is still open.
 */
#include "sync/stage/stage_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_stage.h"

static struct stage *open_stage(const char *dir, uint64_t max, struct store *t)
{
	return stage_open_or_exit((struct stage_conf){ .dir = dir, .max_bytes = max,
			.up = { .part_size = 1ull << 30 } }, t);
}

/* A whole-file multipart upload whose part and abort both fail: its id
 * stays with the file (journaled by every later journal write) until the
 * next commit aborts it; none is left open. */
static void test_abandoned(void)
{
	struct store fk;
	store_init(&fk, 0);
	s3_fake_min_part_set(fk.fake, 1 << 20);
	char *dir = unit_tmpdir("stage-abandoned");
	struct stage *st = stage_open_or_exit((struct stage_conf){ .dir = dir,
			.max_bytes = 64 << 20, .stream_off = true,
			.up = { .part_size = 1 << 20, .threads = 2 } }, &fk);
	size_t size = 3 << 20;
	char *obj = calloc(1, size);
	struct stage_file *f;
	stage_file_new(st, "b", "k", NULL, 0, NULL, &f);
	stage_file_pwrite(f, obj, size, 0);
	s3_fault_fail(fk.s3, S3K_MPU_PART, 1, 0, -EHOSTUNREACH);
	s3_fault_fail(fk.s3, S3K_MPU_ABORT, 1, 0, -EHOSTUNREACH);
	CHECK(stage_file_commit(f, NULL) == -EIO && s3_fake_upload_count(fk.fake, "b") == 1,
	      "abandoned: part and abort fail: -EIO, the upload still open");
	s3_fault_clear(fk.s3);
	stage_file_pwrite(f, "z", 1, size);
	struct stage_jnl j;
	bool named = stage_jnl_read(st, f->id, &j) == 0 && j.upload_id != NULL;
	CHECK(named, "abandoned: the next write's journal still names the upload (%s)",
	      named ? j.upload_id : "none");
	if (named || stage_jnl_read(st, f->id, &j) == 0)
		stage_jnl_release(&j);
	CHECK(stage_file_commit(f, NULL) == 0 && s3_fake_upload_count(fk.fake, "b") == 0,
	      "abandoned: the next commit aborts it and uploads: none left open (%zu)",
	      s3_fake_upload_count(fk.fake, "b"));
	/* An abort the store refuses for good (403) does not block commits. */
	stage_file_pwrite(f, "y", 1, size);
	s3_fault_fail(fk.s3, S3K_MPU_PART, 1, 0, -EHOSTUNREACH);
	s3_fault_fail(fk.s3, S3K_MPU_ABORT, 1, 0, -EACCES);
	CHECK(stage_file_commit(f, NULL) == -EIO, "abandoned: a part fails, the abort is refused");
	s3_fault_clear(fk.s3);
	s3_fault_fail(fk.s3, S3K_MPU_ABORT, 1, 0, -EACCES);
	stage_file_pwrite(f, "x", 1, size);
	size_t olen = 0;
	CHECK(stage_file_commit(f, NULL) == 0,
	      "abandoned: an abort refused for good (403) does not hold the next commit back");
	char *o = obj_get(&fk, "b", "k", &olen, NULL, 0);
	CHECK(o && olen == size + 1 && o[size] == 'x', "abandoned: ... the file is in S3");
	free(o);
	s3_fault_clear(fk.s3);
	stage_file_release(f);
	free(obj);
	stage_case_end(st, &fk, dir);
}

/* A file of key with bytes whose commit failed, released: kept for the
 * next start. */
static void commit_fails(struct stage *st, struct store *fk, const char *key,
			 const char *bytes)
{
	struct stage_file *f;
	stage_file_new(st, "b", key, NULL, 0, NULL, &f);
	stage_file_pwrite(f, bytes, strlen(bytes), 0);
	puts_fail(fk, 1, -EIO);
	if (stage_file_commit(f, NULL) != -EIO)
		printf("# commit_fails: the commit of %s did not fail\n", key);
	stage_file_release(f);
}

/* Files kept after a failed commit wait for the next start's upload; a
 * newer version of their key written, renamed onto or deleted here
 * meanwhile stops that upload (the start moves them to recovered/). */
static void test_kept(void)
{
	struct store fk;
	store_init(&fk, 0);
	char *dir = unit_tmpdir("stage-kept");
	struct stage *st = open_stage(dir, 8 << 20, &fk);
	commit_fails(st, &fk, "newer", "v1");
	struct stage_file *g;
	stage_file_new(st, "b", "newer", NULL, 0, NULL, &g);
	stage_file_pwrite(g, "v2", 2, 0);
	CHECK(stage_file_commit(g, NULL) == 0, "kept: a newer version of the key committed");
	stage_file_release(g);
	commit_fails(st, &fk, "deleted", "v1");
	stage_key_replaced(st, "b", "deleted");
	commit_fails(st, &fk, "alone", "v1");
	stage_close(st);
	st = open_stage(dir, 8 << 20, &fk);
	struct stage_recovery_report r;
	CHECK(stage_recover(st, &r) == 0 && r.reuploaded == 1 && r.recovered == 2,
	      "kept: the next start uploads one, moves two to recovered/ (%u, %u)",
	      r.reuploaded, r.recovered);
	CHECK(s3_has(&fk, "newer", "v2"),
	      "kept: the newer version stays in S3, not the older staged one");
	CHECK(s3_has(&fk, "deleted", NULL), "kept: a key deleted meanwhile is not brought back");
	CHECK(s3_has(&fk, "alone", "v1"),
	      "kept: with nothing newer the kept data is uploaded at the start");
	CHECK(stage_recovered_count(dir) == 4,
	      "kept: both older copies are in recovered/, each with its .journal (%d files)",
	      stage_recovered_count(dir));
	/* Still open when its key is deleted: its release stops the upload.
	 * Two failed commits of one key: the start uploads the later one. */
	struct stage_file *h;
	stage_file_new(st, "b", "openk", NULL, 0, NULL, &h);
	stage_file_pwrite(h, "v1", 2, 0);
	puts_fail(&fk, 1, -EIO);
	stage_file_commit(h, NULL);
	stage_key_replaced(st, "b", "openk");
	stage_file_release(h);
	commit_fails(st, &fk, "twice", "v1");
	commit_fails(st, &fk, "twice", "v2");
	stage_close(st);
	st = open_stage(dir, 8 << 20, &fk);
	CHECK(stage_recover(st, &r) == 0 && r.reuploaded == 1 && r.recovered == 2,
	      "kept: open at the delete, and the older of two failed commits: moved; the "
	      "later one uploaded (%u, %u)", r.reuploaded, r.recovered);
	CHECK(s3_has(&fk, "openk", NULL), "kept: deleted while its file was open: not brought back");
	CHECK(s3_has(&fk, "twice", "v2"), "kept: of two failed commits the later one is in S3");
	/* One a start could not upload (S3 down) waits again, and a newer
	 * version written during that run stops it too. */
	commit_fails(st, &fk, "again", "v1");
	stage_close(st);
	st = open_stage(dir, 8 << 20, &fk);
	puts_fail(&fk, 1, -EIO);
	CHECK(stage_recover(st, &r) == 0 && r.reupload_failed == 1,
	      "kept: a start whose upload fails keeps the file");
	stage_file_new(st, "b", "again", NULL, 0, NULL, &g);
	stage_file_pwrite(g, "v3", 2, 0);
	stage_file_commit(g, NULL);
	stage_file_release(g);
	stage_close(st);
	st = open_stage(dir, 8 << 20, &fk);
	CHECK(stage_recover(st, &r) == 0 && r.reuploaded == 0 && r.recovered == 1,
	      "kept: ... and the start after a newer version moves it (%u, %u)",
	      r.reuploaded, r.recovered);
	CHECK(s3_has(&fk, "again", "v3"), "kept: the newer version stays");
	stage_case_end(st, &fk, dir);
}

/* The staging directory as a crash at this moment leaves it: a copy of
 * its files (not recovered/) in a new directory (freed by the caller). */
static char *crash_image(const char *dir)
{
	char *img = unit_tmpdir("stage-kept-image");
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char from[600], to[600], buf[1 << 16];
		snprintf(from, sizeof from, "%s/%s", dir, de->d_name);
		snprintf(to, sizeof to, "%s/%s", img, de->d_name);
		struct stat sb;
		if (stat(from, &sb) != 0 || !S_ISREG(sb.st_mode))
			continue;
		int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT, 0600);
		ssize_t n;
		while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
			if (write(out, buf, (size_t)n) != n)
				break;
		if (in >= 0)
			close(in);
		if (out >= 0)
			close(out);
	}
	if (d)
		closedir(d);
	return img;
}

/* The start after a crash whose image is img, over the same store: the
 * stage recovered and closed, img removed and freed. */
static void start_on_image(char *img, struct store *fk, struct stage_recovery_report *r)
{
	struct stage *st = open_stage(img, 8 << 20, fk);
	if (stage_recover(st, r) != 0)
		printf("# start_on_image: recovery failed\n");
	stage_close(st);
	unit_rmtree(img);
	free(img);
}

/* Another file of a key committed with bytes (a string) on a thread of
 * its own, once puts0 is no longer the PUTs tried (a PUT of an earlier
 * commit is in flight); puts0 -1: at once. */
struct committer {
	struct stage *st;
	struct store *fk;
	const char *key, *bytes;
	int puts0, rc;
};

static void *commit_key(void *arg)
{
	struct committer *c = arg;
	if (c->puts0 >= 0)
		puts_wait_past(c->fk, c->puts0);
	struct stage_file *g;
	stage_file_new(c->st, "b", c->key, NULL, 0, NULL, &g);
	stage_file_pwrite(g, c->bytes, strlen(c->bytes), 0);
	c->rc = stage_file_commit(g, NULL);
	stage_file_release(g);
	return NULL;
}

/* Crashes around a failed commit: the start after them never puts the
 * older bytes over the newer version. */
static void test_kept_crash(void)
{
	struct store fk;
	store_init(&fk, 0);
	char *dir = unit_tmpdir("stage-kept-crash");
	struct stage *st = open_stage(dir, 8 << 20, &fk);
	struct stage_recovery_report r;

	/* A crash while a later commit of the key uploads: both journals say
	 * "commit"; only the later may go up. */
	commit_fails(st, &fk, "crashk", "v1");
	puts_delay(&fk, 1500);
	int puts0 = puts_tried(&fk);
	struct committer l = { st, &fk, "crashk", "v2", -1, -1 };
	pthread_t th;
	pthread_create(&th, NULL, commit_key, &l);
	puts_wait_past(&fk, puts0);      /* the later PUT is in flight */
	char *img = crash_image(dir);
	pthread_join(th, NULL);
	s3_fault_clear(fk.s3);
	s3_fake_object_delete(fk.fake, "b", "crashk");
	start_on_image(img, &fk, &r);
	CHECK(l.rc == 0 && r.reuploaded == 1 && r.recovered == 1 && s3_has(&fk, "crashk", "v2"),
	      "kept crash: during a later commit of the key: the start uploads the later, "
	      "moves the older (%u uploaded, %u moved)", r.reuploaded, r.recovered);

	stage_recover(st, &r);           /* (the older copy leaves the live one) */

	/* A crash while the failed file is still open, its key written anew
	 * meanwhile (and another's deleted). */
	struct stage_file *h, *g, *d;
	stage_file_new(st, "b", "openw", NULL, 0, NULL, &h);
	stage_file_pwrite(h, "v1", 2, 0);
	puts_fail(&fk, 1, -EIO);
	stage_file_commit(h, NULL);
	stage_file_new(st, "b", "openw", NULL, 0, NULL, &g);
	stage_file_pwrite(g, "v2", 2, 0);
	stage_file_commit(g, NULL);
	stage_file_release(g);
	stage_file_new(st, "b", "opend", NULL, 0, NULL, &d);
	stage_file_pwrite(d, "v1", 2, 0);
	puts_fail(&fk, 1, -EIO);
	stage_file_commit(d, NULL);
	stage_key_replaced(st, "b", "opend");
	img = crash_image(dir);
	start_on_image(img, &fk, &r);
	CHECK(r.reuploaded == 0 && r.recovered == 2 && s3_has(&fk, "openw", "v2") &&
	      s3_has(&fk, "opend", NULL),
	      "kept crash: open at the crash, key written anew or deleted: neither uploaded "
	      "(%u uploaded, %u moved)", r.reuploaded, r.recovered);
	/* Its own later commit makes it the newest again. */
	stage_file_pwrite(h, "v3", 2, 0);
	puts_fail(&fk, 1, -EIO);
	stage_file_commit(h, NULL);
	img = crash_image(dir);
	start_on_image(img, &fk, &r);
	CHECK(r.reuploaded == 1 && s3_has(&fk, "openw", "v3") && s3_has(&fk, "opend", NULL),
	      "kept crash: the failed file committed again (and failed): the start uploads "
	      "it (%u uploaded)", r.reuploaded);
	stage_file_release(h);
	stage_file_release(d);
	stage_case_end(st, &fk, dir);
}

struct replacer {
	struct stage *st;
	struct store *fk;
	const char *key;
	int puts0;                   /* PUTs tried before the commit */
};

/* Replace the key once the commit's PUT is in flight. */
static void *replace_later(void *arg)
{
	struct replacer *x = arg;
	puts_wait_past(x->fk, x->puts0);
	stage_key_replaced(x->st, "b", x->key);
	return NULL;
}

/* The key replaced while a retry of a failed commit uploads; the retry
 * fails (retry_fails: that copy stays marked) or succeeds (no mark is left
 * behind). Either way the file's next commit is the newest: it fails, and
 * the start after a crash uploads it. */
static void kept_replaced_case(bool retry_fails)
{
	const char *what = retry_fails ? "kept: replaced during a retry that fails"
				       : "kept: replaced during a retry that succeeds";
	struct store fk;
	store_init(&fk, 0);
	char *dir = unit_tmpdir("stage-kept-during");
	struct stage *st = open_stage(dir, 8 << 20, &fk);
	struct stage_file *h;
	stage_file_new(st, "b", "dur", NULL, 0, NULL, &h);
	stage_file_pwrite(h, "v1", 2, 0);
	puts_fail(&fk, 1, -EIO);
	int rc1 = stage_file_commit(h, NULL);
	stage_file_pwrite(h, "v2", 2, 0);
	puts_delay(&fk, 1000);
	if (retry_fails)
		puts_fail(&fk, 1, -EIO);
	struct replacer x = { st, &fk, "dur", puts_tried(&fk) };
	pthread_t th;
	pthread_create(&th, NULL, replace_later, &x);
	int rc2 = stage_file_commit(h, NULL);
	pthread_join(th, NULL);
	s3_fault_clear(fk.s3);
	stage_file_pwrite(h, "v3", 2, 0);
	puts_fail(&fk, 1, -EIO);
	int rc3 = stage_file_commit(h, NULL);
	s3_fault_clear(fk.s3);
	struct stage_recovery_report r;
	start_on_image(crash_image(dir), &fk, &r);
	CHECK(rc1 == -EIO && rc2 == (retry_fails ? -EIO : 0) && rc3 == -EIO &&
	      r.reuploaded == 1 && s3_has(&fk, "dur", "v3"),
	      "%s, then a commit fails: the start uploads the newest (%u uploaded, "
	      "%u moved)", what, r.reuploaded, r.recovered);
	stage_file_release(h);
	stage_case_end(st, &fk, dir);
}

/* A file's first commit fails after another file's commit of the key
 * began and succeeded: the first one is marked, the start leaves the
 * newer version. */
static void test_first_commit_overtaken(void)
{
	struct store fk;
	store_init(&fk, 0);
	char *dir = unit_tmpdir("stage-kept-first");
	struct stage *st = open_stage(dir, 8 << 20, &fk);
	struct stage_file *h;
	stage_file_new(st, "b", "first", NULL, 0, NULL, &h);
	stage_file_pwrite(h, "h1", 2, 0);
	puts_delay(&fk, 1000);
	puts_fail(&fk, 1, -EIO);
	struct committer c = { st, &fk, "first", "g2", puts_tried(&fk), -1 };
	pthread_t th;
	pthread_create(&th, NULL, commit_key, &c);
	int rc = stage_file_commit(h, NULL);
	pthread_join(th, NULL);
	s3_fault_clear(fk.s3);
	struct stage_recovery_report r;
	start_on_image(crash_image(dir), &fk, &r);
	CHECK(rc == -EIO && c.rc == 0 && r.reuploaded == 0 && r.recovered == 1 &&
	      s3_has(&fk, "first", "g2"),
	      "kept: a first commit overtaken by another of the key, then failed: moved, "
	      "the newer version stays (%d, %d; %u uploaded, %u moved)", rc, c.rc,
	      r.reuploaded, r.recovered);
	stage_file_release(h);
	stage_case_end(st, &fk, dir);
}

/* A streamed file whose part fails closes with EIO like any other: the
 * next start uploads it, and it is the key's newest (an older failed
 * commit of the key is moved, not uploaded). */
static void test_stream_failed(void)
{
	struct store fk;
	store_init(&fk, 0);
	s3_fake_min_part_set(fk.fake, 1 << 20);
	char *dir = unit_tmpdir("stage-kept-stream");
	struct stage *st = stage_open_or_exit((struct stage_conf){ .dir = dir,
			.max_bytes = 64 << 20, .stream_threads = 2,
			.up = { .part_size = 1 << 20, .threads = 2 } }, &fk);
	commit_fails(st, &fk, "sk", "v1");
	size_t size = (3 << 20) + 7;
	char *obj = malloc(size);
	memset(obj, 's', size);
	s3_fault_fail(fk.s3, S3K_MPU_PART, 1, 0, -EHOSTUNREACH);
	struct stage_file *f;
	stage_file_new(st, "b", "sk", NULL, 0, NULL, &f);
	stage_file_pwrite(f, obj, size, 0);
	int rc = stage_file_commit(f, NULL);
	stage_file_release(f);
	s3_fault_clear(fk.s3);
	stage_close(st);
	st = stage_open_or_exit((struct stage_conf){ .dir = dir, .max_bytes = 64 << 20,
			.up = { .part_size = 1 << 20, .threads = 2 } }, &fk);
	struct stage_recovery_report r;
	stage_recover(st, &r);
	size_t olen = 0;
	char *o = obj_get(&fk, "b", "sk", &olen, NULL, 0);
	CHECK(rc == -EIO && r.reuploaded == 1 && r.recovered == 1 && o && olen == size &&
	      !memcmp(o, obj, size) && s3_fake_upload_count(fk.fake, "b") == 0,
	      "stream failed: the start uploads the streamed file, moves the older "
	      "(rc %d, %u uploaded, %u moved, %zu bytes)", rc, r.reuploaded, r.recovered,
	      olen);
	free(o);
	free(obj);
	stage_case_end(st, &fk, dir);
}

int main(void)
{
	log_init("test_stage_kept", getenv("STAGE_DEBUG") ? 2 : 0);
	test_kept();
	test_abandoned();
	test_kept_crash();
	kept_replaced_case(true);
	kept_replaced_case(false);
	test_first_commit_overtaken();
	test_stream_failed();
	return unit_exit();
}
