/*
 * test_stage_stream.c — unit tests of streamed multipart uploads of staged
 * files (sync/stage/stage.h "Streaming", sync/stage/stage_stream.c) on the in-memory
 * store (sync/s3/s3_fake.h, minimum part size lowered) behind the fault
 * wrapper (sync/s3/s3_fault.h): parts go up before the commit and the object
 * is byte for byte what was written with the "-N" ETag; part k fails,
 * creation fails, completion fails (-EIO, aborted, data kept, the retry
 * uploads); non-sequential writes, truncates, metadata changes and renames
 * fall back to a whole upload that carries the right bytes, name and
 * metadata; a crash in the middle (a child killed with SIGKILL) leaves a
 * journal with the upload id, which recovery aborts (dirty: data to
 * recovered/; commit: uploaded again); the part-size schedule.
 */
#include "sync/stage/stage_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"
#define UNIT_WITH_MD5
#include "tests/unit/unit.h"
#include "tests/unit/unit_stage.h"

#define PART (64u << 10)

static struct stage *open_stage(const char *dir, struct store *t)
{
	return stage_open_or_exit((struct stage_conf){ .dir = dir, .max_bytes = 256 << 20,
			.up = { .part_size = PART, .threads = 3 }, .stream_threads = 2 }, t);
}

static void fill_random(char *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		buf[i] = (char)seed;
	}
}

/* Write buf[0..len) sequentially in 4 KiB writes; false on a short one. */
static bool write_seq(struct stage_file *f, const char *buf, size_t from,
		      size_t len)
{
	for (size_t off = from; off < len; off += 4096) {
		size_t n = len - off < 4096 ? len - off : 4096;
		if (stage_file_pwrite(f, buf + off, n, off) != (ssize_t)n)
			return false;
	}
	return true;
}

static uint64_t streamed(struct stage *st)
{
	struct stage_counters c;
	stage_counters_get(st, &c);
	return c.parts_streamed;
}

/* Wait (up to 10 s) until at least n parts went up in the background. */
static bool wait_streamed(struct stage *st, uint64_t n)
{
	for (int i = 0; i < 1000 && streamed(st) < n; i++)
		usleep(10000);
	return streamed(st) >= n;
}

/* The object equals buf[0..len) and has ETag etag. */
static bool obj_is(struct store *t, const char *key, const char *buf,
		   size_t len, const char *etag)
{
	void *d = NULL;
	size_t n = 0;
	struct obj_meta m;
	if (s3_fake_object_read(t->fake, "b", key, &d, &n, &m, NULL) != 0)
		return false;
	bool same = n == len && memcmp(d, buf, len) == 0 &&
		    (!etag || strcmp(m.etag, etag) == 0);
	if (!same)
		printf("# %s: %zu bytes (want %zu), ETag %s (want %s)\n", key, n,
		       len, m.etag, etag ? etag : "any");
	obj_meta_release(&m);
	free(d);
	return same;
}

/* "-N" at the end of etag. */
static unsigned etag_parts(const char *etag)
{
	const char *d = strrchr(etag, '-');
	return d ? (unsigned)atoi(d + 1) : 0;
}

/* ---- tests -------------------------------------------------------------- */

static void test_schedule(void)
{
	struct upload_conf c = { .part_size = 8ull << 20 };
	CHECK(upload_stream_part_size(&c, 1) == 8ull << 20 &&
	      upload_stream_part_size(&c, 1000) == 8ull << 20 &&
	      upload_stream_part_size(&c, 1001) == 16ull << 20 &&
	      upload_stream_part_size(&c, 7001) == 1ull << 30 &&
	      upload_stream_part_size(&c, 8001) == S3_MAX_PART &&
	      upload_stream_part_size(&c, 10000) == S3_MAX_PART,
	      "schedule: 8 MiB x1000, doubling per 1000, 5 GiB from part 8001");
	uint64_t sizes[] = { 4096, 64 << 10, 5ull << 20, 8ull << 20, 100ull << 20,
			     4ull << 30, 6ull << 30 };
	bool reach = true, capped = true;
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		c.part_size = sizes[k];
		uint64_t sum = 0;
		for (unsigned n = 1; n <= S3_MAX_PARTS; n++) {
			uint64_t p = upload_stream_part_size(&c, n);
			capped = capped && p <= S3_MAX_PART && p >= 4096;
			sum += p;
		}
		reach = reach && sum >= S3_MAX_OBJECT;
	}
	CHECK(reach && capped, "schedule: 10,000 parts reach 5 TiB for part sizes "
	      "4 KiB..6 GiB, no part over 5 GiB");
}

static void test_stream(void)
{
	struct store t;
	store_init(&t, 4096);
	char *dir = unit_tmpdir("stream");
	struct stage *st = open_stage(dir, &t);
	size_t size = 40 * PART + 123;
	char *buf = malloc(size);
	fill_random(buf, size, 7);
	struct obj_kv meta[] = { { "color", "blue" } };
	struct stage_file *f;
	CHECK(stage_file_new(st, "b", "big", meta, 1, "text/plain", &f) == 0,
	      "stream: new file");
	CHECK(write_seq(f, buf, 0, size), "stream: %zu bytes written in order", size);
	CHECK(wait_streamed(st, 30), "stream: parts went up before the commit (%llu)",
	      (unsigned long long)streamed(st));
	CHECK(stage_file_streaming(f), "stream: the file says it streams");
	CHECK(s3_fake_object_count(t.fake, "b") == 0,
	      "stream: no object visible before the commit");
	char etag[72] = "";
	int rc = stage_file_commit(f, etag);
	CHECK(rc == 0 && obj_is(&t, "big", buf, size, etag) && etag_parts(etag) == 41,
	      "stream: commit -> the object is what was written, ETag %s (41 parts)", etag);
	struct obj_meta m;
	void *d;
	size_t n;
	s3_fake_object_read(t.fake, "b", "big", &d, &n, &m, NULL);
	CHECK(m.n_meta == 1 && !strcmp(m.meta[0].value, "blue") &&
	      !strcmp(m.content_type, "text/plain"), "stream: metadata and type kept");
	obj_meta_release(&m);
	free(d);
	struct stage_counters c;
	stage_counters_get(st, &c);
	printf("# parts streamed %llu, tail %llu\n", (unsigned long long)c.parts_streamed,
	       (unsigned long long)c.parts_tail);
	CHECK(c.streams == 1 && c.parts_streamed + c.parts_tail == 41 &&
	      s3_fault_seen(t.s3, S3K_PUT) == 0 && s3_fault_seen(t.s3, S3K_MPU_CREATE) == 1,
	      "stream: one streamed upload of 41 parts, no single PUT");
	CHECK(s3_fake_upload_count(t.fake, "b") == 0 && !stage_file_dirty(f),
	      "stream: nothing left open, file clean");

	/* Appending afterwards streams again from the start (a new upload). */
	char *more = malloc(size + 20 * PART);
	memcpy(more, buf, size);
	fill_random(more + size, 20 * PART, 8);
	CHECK(write_seq(f, more, size, size + 20 * PART), "stream: appended 20 parts");
	rc = stage_file_commit(f, etag);
	CHECK(rc == 0 && obj_is(&t, "big", more, size + 20 * PART, etag) &&
	      etag_parts(etag) == 61, "stream: second commit carries all %d parts (%s)", 61,
	      etag);
	stage_file_release(f);

	/* Smaller than a part: one PUT at the commit, as before. */
	stage_file_new(st, "b", "small", NULL, 0, NULL, &f);
	stage_file_pwrite(f, buf, PART - 1, 0);
	rc = stage_file_commit(f, etag);
	CHECK(rc == 0 && obj_is(&t, "small", buf, PART - 1, etag) && !etag_parts(etag) &&
	      s3_fault_seen(t.s3, S3K_PUT) == 1, "stream: a file under a part: one PUT");
	stage_file_release(f);
	/* Exactly one part: streamed, completed with that one part. */
	stage_file_new(st, "b", "one", NULL, 0, NULL, &f);
	write_seq(f, buf, 0, PART);
	rc = stage_file_commit(f, etag);
	CHECK(rc == 0 && obj_is(&t, "one", buf, PART, etag) && etag_parts(etag) == 1,
	      "stream: exactly one part: ETag %s", etag);
	stage_file_release(f);
	stage_file_new(st, "b", "oneplus", NULL, 0, NULL, &f);
	write_seq(f, buf, 0, PART + 1);
	rc = stage_file_commit(f, etag);
	CHECK(rc == 0 && obj_is(&t, "oneplus", buf, PART + 1, etag) && etag_parts(etag) == 2,
	      "stream: one part + 1 byte: ETag %s", etag);
	stage_file_release(f);
	CHECK(s3_fake_upload_count(t.fake, "b") == 0, "stream: no upload left open");
	stage_case_end(st, &t, dir);
	free(buf);
	free(more);
}

/* Part k (or the creation, or the completion) fails: -EIO, the upload is
 * aborted, the data stays; the next commit uploads it whole. */
static void fail_case(enum s3_kind kind, unsigned first, const char *what)
{
	struct store t;
	store_init(&t, 4096);
	char *dir = unit_tmpdir("stream-fail");
	struct stage *st = open_stage(dir, &t);
	size_t size = 12 * PART + 5;
	char *buf = malloc(size);
	fill_random(buf, size, first + 100);
	struct stage_file *f;
	stage_file_new(st, "b", "k", NULL, 0, NULL, &f);
	s3_fault_fail(t.s3, kind, first, 1, -EIO);
	write_seq(f, buf, 0, size);
	char etag[72] = "x";
	int rc = stage_file_commit(f, etag);
	CHECK(rc == -EIO && stage_file_dirty(f) && s3_fake_object_count(t.fake, "b") == 0,
	      "%s fails: commit -EIO, no object, still dirty (%d)", what, rc);
	CHECK(s3_fake_upload_count(t.fake, "b") == 0,
	      "%s fails: no upload left open", what);
	char jp[512];
	snprintf(jp, sizeof jp, "%s/%016llx.data", dir, (unsigned long long)f->id);
	struct stat sb;
	CHECK(stat(jp, &sb) == 0 && (size_t)sb.st_size == size,
	      "%s fails: staged data kept", what);
	rc = stage_file_commit(f, etag);
	CHECK(rc == 0 && obj_is(&t, "k", buf, size, etag) && etag_parts(etag) == 13 &&
	      s3_fake_upload_count(t.fake, "b") == 0,
	      "%s fails: the retry uploads it (%s), nothing open", what, etag);
	stage_file_release(f);
	stage_case_end(st, &t, dir);
	free(buf);
}

static void test_failures(void)
{
	fail_case(S3K_MPU_PART, 3, "part 3");
	fail_case(S3K_MPU_PART, 1, "part 1");
	fail_case(S3K_MPU_CREATE, 1, "creation");
	fail_case(S3K_MPU_COMPLETE, 1, "completion");
}

/* A change the stream cannot carry: the commit uploads the file whole. */
enum change { CH_REWRITE, CH_TRUNCATE, CH_META, CH_RENAME, CH_SAME_META };

static void change_case(enum change ch, const char *what)
{
	struct store t;
	store_init(&t, 4096);
	char *dir = unit_tmpdir("stream-change");
	struct stage *st = open_stage(dir, &t);
	size_t size = 16 * PART;
	char *buf = malloc(size);
	fill_random(buf, size, ch + 50);
	struct obj_kv m1[] = { { "color", "red" } }, m2[] = { { "color", "green" } };
	struct stage_file *f;
	stage_file_new(st, "b", "c", m1, 1, NULL, &f);
	write_seq(f, buf, 0, size / 2);
	CHECK(wait_streamed(st, 3), "%s: parts streamed first", what);
	const char *key = "c", *color = "red";
	size_t end = size;
	switch (ch) {
	case CH_REWRITE:
		memset(buf + 100, 'X', 1000);
		stage_file_pwrite(f, buf + 100, 1000, 100);
		break;
	case CH_TRUNCATE:
		stage_file_truncate(f, 1000);
		break;
	case CH_META:
		stage_file_set_meta(f, m2, 1, NULL);
		color = "green";
		break;
	case CH_RENAME:
		stage_file_rename(f, "b", "renamed");
		key = "renamed";
		break;
	case CH_SAME_META:
		stage_file_set_meta(f, m1, 1, NULL);
		break;
	}
	bool streams = ch == CH_SAME_META;
	CHECK(stage_file_streaming(f) == streams, "%s: %s", what,
	      streams ? "still streaming" : "the stream is given up");
	if (ch == CH_TRUNCATE)
		write_seq(f, buf, 1000, end);
	else
		write_seq(f, buf, size / 2, end);
	char etag[72] = "";
	int rc = stage_file_commit(f, etag);
	CHECK(rc == 0 && obj_is(&t, key, buf, end, etag),
	      "%s: the object has the bytes written (%d, %s)", what, rc, etag);
	struct obj_meta m;
	void *d = NULL;
	size_t n;
	if (s3_fake_object_read(t.fake, "b", key, &d, &n, &m, NULL) == 0) {
		CHECK(m.n_meta == 1 && !strcmp(m.meta[0].value, color),
		      "%s: the object carries color=%s", what, color);
		obj_meta_release(&m);
		free(d);
	}
	struct stage_counters c;
	stage_counters_get(st, &c);
	CHECK(c.stream_fallbacks == !streams && c.stream_aborts == !streams &&
	      c.streams == streams && s3_fake_upload_count(t.fake, "b") == 0 &&
	      s3_fake_object_count(t.fake, "b") == 1,
	      "%s: %s, one object, no upload left open", what,
	      streams ? "streamed" : "one fallback, the stream aborted");
	stage_file_release(f);
	stage_case_end(st, &t, dir);
	free(buf);
}

static void test_changes(void)
{
	change_case(CH_REWRITE, "rewrite of sent bytes");
	change_case(CH_TRUNCATE, "truncate below sent bytes");
	change_case(CH_META, "metadata change");
	change_case(CH_RENAME, "rename");
	change_case(CH_SAME_META, "same metadata set again");
}

/* The journal's text, or "" (static buffer). */
static const char *jnl_text(const char *dir, uint64_t id)
{
	static char text[4096];
	char p[512];
	snprintf(p, sizeof p, "%s/%016llx.jnl", dir, (unsigned long long)id);
	FILE *j = fopen(p, "r");
	size_t n = j ? fread(text, 1, sizeof text - 1, j) : 0;
	if (j)
		fclose(j);
	text[n] = '\0';
	return text;
}

/* A child writes (and, commit: commits) a file whose parts are slow and
 * is killed once its journal names the upload; recovery in the parent. */
static void crash_case(bool commit)
{
	const char *what = commit ? "crash at commit" : "crash while dirty";
	struct store t;
	store_init(&t, 4096);
	char *dir = unit_tmpdir("stream-crash");
	size_t size = 10 * PART + 7;
	char *buf = malloc(size);
	fill_random(buf, size, commit);
	struct s3_fault_rule slow = { .kind = S3K_MPU_PART, .type = S3F_DELAY,
				      .first = commit ? 1 : 3, .times = 0,
				      .delay_ms = 300 };
	s3_fault_add(t.s3, &slow);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		struct stage *st = open_stage(dir, &t);
		struct stage_file *f;
		stage_file_new(st, "b", "crash", NULL, 0, NULL, &f);
		write_seq(f, buf, 0, size);
		if (commit)
			stage_file_commit(f, NULL);
		pause();
		_exit(0);
	}
	const char *want = commit ? "state commit" : "state dirty";
	bool seen = false;
	for (int i = 0; i < 1000 && !seen; i++) {
		const char *j = jnl_text(dir, 1);
		seen = strstr(j, want) && strstr(j, "\nupload :fake-upload-");
		if (!seen)
			usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	CHECK(seen, "%s: the journal names the upload (%s)", what, want);
	s3_fault_clear(t.s3);
	/* The child's parts went to its copy of the store: give the parent's
	 * store an open upload of the same id, as S3 would hold. */
	char id[64];
	s3_mpu_create(t.fake, "b", "crash", NULL, 0, NULL, id, sizeof id);
	CHECK(strstr(jnl_text(dir, 1), id) != NULL, "%s: same upload id (%s)", what, id);
	struct stage *st = open_stage(dir, &t);
	struct stage_recovery_report rep;
	int rc = stage_recover(st, &rep);
	printf("# %s: reuploaded %u, recovered %u, aborted %u\n", what, rep.reuploaded,
	       rep.recovered, rep.aborted);
	CHECK(rc == 0 && rep.aborted == 1 && s3_fake_upload_count(t.fake, "b") == 0,
	      "%s: recovery aborts the upload: none left open", what);
	if (commit) {
		CHECK(rep.reuploaded == 1 && obj_is(&t, "crash", buf, size, NULL),
		      "%s: the file is uploaded again, whole", what);
	} else {
		CHECK(rep.recovered == 1 && stage_recovered_count(dir) == 2 && s3_fake_object_count(t.fake, "b") == 0,
		      "%s: data (+ journal) moved to recovered/, no object", what);
	}
	stage_case_end(st, &t, dir);
	free(buf);
}

/* Recovery while S3 refuses the abort keeps the file (its id is only in
 * the journal); the next recovery aborts and moves it. */
static void test_abort_fails(void)
{
	struct store t;
	store_init(&t, 4096);
	char *dir = unit_tmpdir("stream-abort");
	struct stage *st = open_stage(dir, &t);
	size_t size = 6 * PART;
	char *buf = malloc(size);
	fill_random(buf, size, 99);
	struct stage_file *f;
	stage_file_new(st, "b", "a", NULL, 0, NULL, &f);
	write_seq(f, buf, 0, size);
	wait_streamed(st, 6);
	/* Released uncommitted, with S3 refusing the abort. */
	s3_fault_fail(t.s3, S3K_MPU_ABORT, 1, 2, -EHOSTUNREACH);
	stage_file_release(f);
	CHECK(s3_fake_upload_count(t.fake, "b") == 1 && strstr(jnl_text(dir, 1), "upload :"),
	      "abort fails at release: the upload stays, journaled");
	struct stage_recovery_report rep;
	stage_recover(st, &rep);
	CHECK(rep.abort_failed == 1 && rep.recovered == 0,
	      "abort fails in recovery: the file stays staged");
	stage_recover(st, &rep);
	CHECK(rep.aborted == 1 && rep.recovered == 1 && s3_fake_upload_count(t.fake, "b") == 0,
	      "next recovery: aborted, moved to recovered/");
	stage_case_end(st, &t, dir);
	free(buf);
}

/* The journal keeps the upload's own name after a rename. */
static void test_journal_names(void)
{
	struct store t;
	store_init(&t, 4096);
	char *dir = unit_tmpdir("stream-jnl");
	struct stage *st = open_stage(dir, &t);
	struct stage_jnl j = { .state = STAGE_JS_DIRTY, .size = 3, .bucket = "b",
			       .key = "new name", .upload_id = "id 1",
			       .upload_bucket = "b", .upload_key = "old/näme" }, r;
	int rc = stage_jnl_write(st, 5, &j, false);
	rc = rc ? rc : stage_jnl_read(st, 5, &r);
	CHECK(rc == 0 && !strcmp(r.upload_id, "id 1") && !r.upload_bucket &&
	      !strcmp(r.upload_key, "old/näme") && !strcmp(r.key, "new name"),
	      "journal: upload id and its old key read back");
	stage_jnl_release(&r);
	stage_jnl_remove(st, 5);
	stage_case_end(st, &t, dir);
}

int main(void)
{
	log_init("test_stage_stream", getenv("STAGE_DEBUG") ? 2 : 0);
	test_schedule();
	test_journal_names();
	test_stream();
	test_failures();
	test_changes();
	crash_case(false);
	crash_case(true);
	test_abort_fails();
	return unit_exit();
}
