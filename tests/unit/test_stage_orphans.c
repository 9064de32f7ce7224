/*
 * test_stage_orphans.c — unit tests of the crash window between S3
 * creating a multipart upload and the staging journal naming it
 * (sync/stage/stage_orphans.c, the "intent" of sync/stage/stage_int.h), on the
 * in-memory store behind the fault wrapper:
 * - the state such a crash leaves (a journal with an intent and no upload
 *   id, the upload open in the store), dirty and commit: recovery aborts
 *   that upload and only it (an upload of a longer key under the same
 *   prefix, and one of the same key initiated before the intent minus the
 *   clock-skew margin, stay), then moves or uploads the file as the
 *   journal's state says;
 * - the listing refused: the file stays staged, the next start aborts;
 * - a creation whose answer is lost (S3F_LOST) while a file streams: the
 *   commit fails, the intent stays journaled, a recovery in the same run
 *   defers, the next start aborts the upload and uploads the file (its
 *   close got EIO);
 * - the intent line of the journal read back;
 * - server-side copies in parts (sync/stage/copy.h) whose abort failed or whose
 *   creation's answer was lost: reported, recorded by stage_upload_left,
 *   aborted by the next start.
 */
#include "sync/stage/stage_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "sync/stage/copy.h"
#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_stage.h"

#define PART (64u << 10)
#define SEC ((int64_t)1000000000)

static struct stage *open_stage(const char *dir, struct store *t)
{
	return stage_open_or_exit((struct stage_conf){ .dir = dir, .max_bytes = 64 << 20,
			.up = { .part_size = PART, .threads = 2 }, .stream_threads = 2 }, t);
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * SEC + ts.tv_nsec;
}

/* The uploads open in bucket b, as "key=id;" in listing order. */
static int list_cb(void *ctx, const char *key, const char *id, int64_t ns)
{
	(void)ns;
	char *out = ctx;
	size_t n = strlen(out);
	snprintf(out + n, 1024 - n, "%s=%s;", key, id);
	return 0;
}

static const char *uploads(struct store *t)
{
	static char out[1024];
	out[0] = '\0';
	s3_mpu_list(t->fake, "b", NULL, list_cb, out);
	return out;
}

/* An upload of key in the fake store initiated at ns; its id into id. */
static void upload_at(struct store *t, const char *key, int64_t ns, char id[64])
{
	s3_fake_clock_set(t->fake, ns);
	if (s3_mpu_create(t->fake, "b", key, NULL, 0, NULL, id, 64) != 0) {
		printf("# cannot create an upload of %s\n", key);
		exit(2);
	}
}


static void write_file(const char *dir, const char *name, const char *text,
		       size_t len)
{
	char p[600];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	FILE *fp = fopen(p, "w");
	if (!fp || fwrite(text, 1, len, fp) != len) {
		printf("# cannot write %s\n", p);
		exit(2);
	}
	fclose(fp);
}

/* The staging directory a crash leaves right after CreateMultipartUpload
 * answered: ID.data, ID.jnl with the intent (journaled before the
 * creation) and no upload id. The upload itself is made in the store one
 * second after the intent; decoys: the same key 901 s before the intent
 * (outside the margin: another client's), "crashed2" (a longer key under
 * the same prefix) after it. */
static void window_case(bool commit, bool list_fails)
{
	char what[80];
	snprintf(what, sizeof what, "%s%s", commit ? "crash at commit" :
		 "crash while dirty", list_fails ? ", listing refused" : "");
	struct store t;
	store_init(&t, 4096);
	char *dir = unit_tmpdir("orphans");
	struct stage *st = open_stage(dir, &t);
	const char data[] = "the bytes written before the crash";
	size_t size = sizeof data - 1;
	int64_t intent = now_ns() - 30 * SEC;
	struct stage_jnl j = {
		.state = commit ? STAGE_JS_COMMIT : STAGE_JS_DIRTY, .size = size,
		.bucket = "b", .key = "crashed",
		.intent = { .ns = intent, .bucket = "b", .key = "crashed" },
	};
	if (stage_jnl_write(st, 9, &j, false) != 0) {
		printf("# cannot plant the journal\n");
		exit(2);
	}
	write_file(dir, "0000000000000009.data", data, size);
	stage_close(st);

	char old[64], ours[64], other[64];
	upload_at(&t, "crashed", intent - 901 * SEC, old);
	upload_at(&t, "crashed", intent + 1 * SEC, ours);
	upload_at(&t, "crashed2", intent + 2 * SEC, other);
	CHECK(s3_fake_upload_count(t.fake, "b") == 3, "%s: 3 uploads open before", what);

	st = open_stage(dir, &t);
	if (list_fails)
		s3_fault_fail(t.s3, S3K_MPU_LIST, 1, 1, -EIO);
	struct stage_recovery_report rep;
	int rc = stage_recover(st, &rep);
	if (list_fails) {
		CHECK(rc == 0 && rep.abort_failed == 1 && rep.orphans_aborted == 0 &&
		      rep.recovered == 0 && rep.reuploaded == 0 &&
		      strstr(uploads(&t), ours),
		      "%s: the file stays staged, the upload open", what);
		stage_close(st);
		st = open_stage(dir, &t);     /* the next start */
		rc = stage_recover(st, &rep);
	}
	printf("# %s: orphans aborted %u, recovered %u, re-uploaded %u; open: %s\n",
	       what, rep.orphans_aborted, rep.recovered, rep.reuploaded, uploads(&t));
	char want[256];
	snprintf(want, sizeof want, "crashed=%s;crashed2=%s;", old, other);
	CHECK(rc == 0 && rep.orphans_aborted == 1 && strcmp(uploads(&t), want) == 0,
	      "%s: recovery aborts exactly the upload of the crash (left: %s)", what,
	      uploads(&t));
	if (commit) {
		void *d = NULL;
		size_t n = 0;
		bool same = s3_fake_object_read(t.fake, "b", "crashed", &d, &n, NULL,
						NULL) == 0 && n == size &&
			    memcmp(d, data, size) == 0;
		free(d);
		CHECK(rep.reuploaded == 1 && same && stage_recovered_count(dir) == 0,
		      "%s: the file is uploaded again, whole", what);
	} else {
		CHECK(rep.recovered == 1 && stage_recovered_count(dir) == 2 &&
		      s3_fake_object_count(t.fake, "b") == 0,
		      "%s: data (+ journal) moved to recovered/, no object", what);
	}
	stage_case_end(st, &t, dir);
}

/* A streamed file whose CreateMultipartUpload answer is lost: the store
 * has the upload, the gateway never learns its id. */
static void lost_answer_case(void)
{
	const char *what = "creation answer lost";
	struct store t;
	store_init(&t, 4096);
	s3_fake_clock_set(t.fake, now_ns());
	char *dir = unit_tmpdir("orphans-lost");
	struct stage *st = open_stage(dir, &t);
	struct s3_fault_rule lost = { .kind = S3K_MPU_CREATE, .type = S3F_LOST,
				      .first = 1, .times = 1, .err = -ETIMEDOUT };
	CHECK(s3_fault_add(t.s3, &lost) == 0, "%s: rule added", what);
	size_t size = 3 * PART + 5;
	char *buf = malloc(size);
	memset(buf, 'x', size);
	struct stage_file *f;
	stage_file_new(st, "b", "lost", NULL, 0, NULL, &f);
	bool wrote = stage_file_pwrite(f, buf, size, 0) == (ssize_t)size;
	int rc = stage_file_commit(f, NULL);
	CHECK(wrote && rc == -EIO && s3_fake_upload_count(t.fake, "b") == 1,
	      "%s: commit -EIO, the store holds an upload nobody named (rc %d)",
	      what, rc);
	stage_file_release(f);
	struct stage_jnl j;
	rc = stage_jnl_read(st, 1, &j);
	CHECK(rc == 0 && j.intent.ns > 0 && !j.upload_id &&
	      !strcmp(j.intent.key, "lost"), "%s: the journal keeps the intent", what);
	if (rc == 0)
		stage_jnl_release(&j);
	struct stage_recovery_report rep;
	rc = stage_recover(st, &rep);
	CHECK(rc == 0 && rep.abort_failed == 1 && rep.orphans_aborted == 0 &&
	      s3_fake_upload_count(t.fake, "b") == 1 && stage_recovered_count(dir) == 0,
	      "%s: a recovery in the same run lists nothing, keeps the file", what);
	stage_close(st);
	st = open_stage(dir, &t);
	rc = stage_recover(st, &rep);
	size_t olen = 0;
	char *o = obj_get(&t, "b", "lost", &olen, NULL, 0);
	CHECK(rc == 0 && rep.orphans_aborted == 1 && rep.reuploaded == 1 &&
	      s3_fake_upload_count(t.fake, "b") == 0 && stage_recovered_count(dir) == 0 &&
	      o && olen == size && !memcmp(o, buf, size),
	      "%s: the next start aborts it and uploads the file (its close got EIO: "
	      "\"commit\" journaled; %u uploaded, %u moved)", what, rep.reuploaded,
	      rep.recovered);
	free(o);
	stage_case_end(st, &t, dir);
	free(buf);
}

static bool orphans_file(const char *dir)
{
	char p[600];
	snprintf(p, sizeof p, "%s/orphans", dir);
	return access(p, F_OK) == 0;
}

/* A streamed file of key committed twice (a byte rewritten between):
 * the first commit meets whatever fault the caller set. False if a write
 * failed. */
static bool commit_twice(struct stage *st, const char *key, int *rc1, int *rc2)
{
	size_t size = 3 * PART + 5;
	char *buf = malloc(size);
	if (!buf)
		return false;
	memset(buf, 'y', size);
	struct stage_file *f;
	stage_file_new(st, "b", key, NULL, 0, NULL, &f);
	bool wrote = stage_file_pwrite(f, buf, size, 0) == (ssize_t)size;
	*rc1 = stage_file_commit(f, NULL);
	wrote = wrote && stage_file_pwrite(f, "z", 1, 0) == 1;   /* dirty again */
	*rc2 = stage_file_commit(f, NULL);
	stage_file_release(f);
	free(buf);
	return wrote;
}

/* A creation whose answer is lost, then a commit of the same file that
 * succeeds (its journal goes): the intent moves to the orphans file and
 * the next start aborts the upload, leaving another client's upload of
 * the key from before the margin and one of another key. */
static void lost_then_committed_case(void)
{
	const char *what = "lost answer, then a commit";
	struct store t;
	store_init(&t, 4096);
	char *dir = unit_tmpdir("orphans-later");
	int64_t start = now_ns();
	char old[64], other[64];
	upload_at(&t, "later", start - 1000 * SEC, old);
	upload_at(&t, "later2", start, other);
	s3_fake_clock_set(t.fake, start);
	struct stage *st = open_stage(dir, &t);
	struct s3_fault_rule lost = { .kind = S3K_MPU_CREATE, .type = S3F_LOST,
				      .first = 1, .times = 1, .err = -ETIMEDOUT };
	CHECK(s3_fault_add(t.s3, &lost) == 0, "%s: rule added", what);
	int rc1, rc2;
	bool wrote = commit_twice(st, "later", &rc1, &rc2);
	CHECK(wrote && rc1 == -EIO && rc2 == 0 && s3_fake_object_count(t.fake, "b") == 1,
	      "%s: the first commit fails, the second uploads (%d, %d)", what, rc1, rc2);
	CHECK(s3_fake_upload_count(t.fake, "b") == 3 && orphans_file(dir),
	      "%s: the lost upload is open, its intent in the orphans file", what);
	struct stage_recovery_report rep;
	int rc = stage_recover(st, &rep);
	CHECK(rc == 0 && rep.orphans_aborted == 0 && orphans_file(dir) &&
	      s3_fake_upload_count(t.fake, "b") == 3,
	      "%s: a recovery in the same run leaves it for the next start", what);
	stage_close(st);
	st = open_stage(dir, &t);
	rc = stage_recover(st, &rep);
	char want[256];
	snprintf(want, sizeof want, "later=%s;later2=%s;", old, other);
	CHECK(rc == 0 && rep.orphans_aborted == 1 && strcmp(uploads(&t), want) == 0 &&
	      !orphans_file(dir),
	      "%s: the next start aborts exactly it, the file goes (left: %s)", what,
	      uploads(&t));
	stage_case_end(st, &t, dir);
}

/* A creation's answer lost for key A, the file renamed to B, a
 * creation's answer lost again for B: both uploads are found by the next
 * start (A's intent went to the orphans file when B's was set). */
static void renamed_case(void)
{
	const char *what = "lost answers around a rename";
	struct store t;
	store_init(&t, 4096);
	char *dir = unit_tmpdir("orphans-renamed");
	s3_fake_clock_set(t.fake, now_ns());
	struct stage *st = open_stage(dir, &t);
	struct s3_fault_rule lost = { .kind = S3K_MPU_CREATE, .type = S3F_LOST,
				      .first = 1, .times = 2, .err = -ETIMEDOUT };
	CHECK(s3_fault_add(t.s3, &lost) == 0, "%s: rule added", what);
	size_t size = 3 * PART + 5;
	char *buf = calloc(1, size);
	struct stage_file *f;
	stage_file_new(st, "b", "A", NULL, 0, NULL, &f);
	stage_file_pwrite(f, buf, size, 0);
	int rc1 = stage_file_commit(f, NULL);
	stage_file_rename(f, "b", "B");
	stage_file_pwrite(f, "z", 1, 0);
	int rc2 = stage_file_commit(f, NULL);
	s3_fault_clear(t.s3);
	stage_file_pwrite(f, "w", 1, 0);
	int rc3 = stage_file_commit(f, NULL);
	stage_file_release(f);
	free(buf);
	CHECK(rc1 == -EIO && rc2 == -EIO && rc3 == 0 && s3_fake_upload_count(t.fake, "b") == 2,
	      "%s: two lost creations, then a commit (%d, %d, %d; %zu open)", what, rc1, rc2,
	      rc3, s3_fake_upload_count(t.fake, "b"));
	stage_close(st);
	st = open_stage(dir, &t);
	struct stage_recovery_report rep;
	int rc = stage_recover(st, &rep);
	CHECK(rc == 0 && rep.orphans_aborted == 2 && s3_fake_upload_count(t.fake, "b") == 0,
	      "%s: the next start aborts both (%u; left: %s)", what, rep.orphans_aborted,
	      uploads(&t));
	stage_case_end(st, &t, dir);
}

/* A creation the store refused (NoSuchBucket: -ENOENT; no upload made),
 * then a commit that succeeds: nothing for the next start. */
static void refused_case(void)
{
	const char *what = "creation refused";
	struct store t;
	store_init(&t, 4096);
	char *dir = unit_tmpdir("orphans-refused");
	struct stage *st = open_stage(dir, &t);
	s3_fault_fail(t.s3, S3K_MPU_CREATE, 1, 1, -ENOENT);
	int rc1, rc2;
	bool wrote = commit_twice(st, "refused", &rc1, &rc2);
	CHECK(wrote && rc1 != 0 && rc2 == 0 && !orphans_file(dir) &&
	      s3_fake_upload_count(t.fake, "b") == 0,
	      "%s: the second commit uploads, no intent is kept (%d, %d)", what, rc1, rc2);
	stage_close(st);
	/* Refused for good, uploaded at the commit in parts: the journal the
	 * failed commit leaves names no intent either (the next start would
	 * list the key and abort others' uploads of it). */
	st = stage_open_or_exit((struct stage_conf){ .dir = dir, .max_bytes = 64 << 20,
			.stream_off = true, .up = { .part_size = PART, .threads = 2 } }, &t);
	s3_fault_fail(t.s3, S3K_MPU_CREATE, 1, 0, -EACCES);
	size_t size = 3 * PART + 5;
	char *buf = calloc(1, size);
	struct stage_file *f;
	stage_file_new(st, "b", "refused2", NULL, 0, NULL, &f);
	stage_file_pwrite(f, buf, size, 0);
	int rc = stage_file_commit(f, NULL);
	struct stage_jnl j;
	bool read = stage_jnl_read(st, f->id, &j) == 0;
	CHECK(rc == -EIO && read && j.state == STAGE_JS_COMMIT && j.intent.ns == 0,
	      "%s: the failed commit's journal keeps no intent (rc %d, intent %lld)", what,
	      rc, read ? (long long)j.intent.ns : -1LL);
	if (read)
		stage_jnl_release(&j);
	s3_fault_clear(t.s3);
	stage_file_release(f);
	free(buf);
	stage_case_end(st, &t, dir);
}

/* The orphans file: a listing refused keeps its record for the next
 * start; a malformed record is dropped with the rest. */
static void orphans_file_case(void)
{
	const char *what = "orphans file";
	struct store t;
	store_init(&t, 4096);
	char *dir = unit_tmpdir("orphans-file");
	struct stage *st = open_stage(dir, &t);
	int64_t in_ns = now_ns();
	struct stage_intent in = { .ns = in_ns, .bucket = "b", .key = "a key\nwith a newline" };
	CHECK(stage_orphans_defer(st, &in) == 0 && orphans_file(dir), "%s: noted", what);
	stage_close(st);
	char id[64];
	upload_at(&t, "a key\nwith a newline", in_ns + SEC, id);
	st = open_stage(dir, &t);
	s3_fault_fail(t.s3, S3K_MPU_LIST, 1, 1, -EIO);
	struct stage_recovery_report rep;
	int rc = stage_recover(st, &rep);
	CHECK(rc == 0 && rep.orphans_aborted == 0 && orphans_file(dir) &&
	      s3_fake_upload_count(t.fake, "b") == 1,
	      "%s: the listing refused: the record stays", what);
	stage_close(st);
	st = open_stage(dir, &t);
	rc = stage_recover(st, &rep);
	CHECK(rc == 0 && rep.orphans_aborted == 1 && !orphans_file(dir) &&
	      s3_fake_upload_count(t.fake, "b") == 0,
	      "%s: the next start aborts it (a key with a newline read back)", what);
	stage_close(st);
	char p[600];
	snprintf(p, sizeof p, "%s/orphans", dir);
	write_file(dir, "orphans", "12 1 x\nbk\n", 10);
	st = open_stage(dir, &t);
	rc = stage_recover(st, &rep);
	CHECK(rc == 0 && rep.orphans_aborted == 0 && access(p, F_OK) != 0,
	      "%s: a malformed record is dropped", what);
	stage_case_end(st, &t, dir);
}

/* A streamed upload that works leaves no intent in the journal, and the
 * intent line reads back. */
static void journal_case(void)
{
	struct store t;
	store_init(&t, 4096);
	char *dir = unit_tmpdir("orphans-jnl");
	struct stage *st = open_stage(dir, &t);
	struct stage_jnl j = { .state = STAGE_JS_DIRTY, .size = 1, .bucket = "b",
			       .key = "k",
			       .intent = { .ns = 1700000000123456789ll, .bucket = "b",
					   .key = "old name %" } }, r;
	int rc = stage_jnl_write(st, 4, &j, false);
	rc = rc ? rc : stage_jnl_read(st, 4, &r);
	CHECK(rc == 0 && r.intent.ns == 1700000000123456789ll &&
	      !strcmp(r.intent.bucket, "b") && !strcmp(r.intent.key, "old name %"),
	      "journal: the intent reads back");
	if (rc == 0)
		stage_jnl_release(&r);
	stage_jnl_remove(st, 4);

	size_t size = 2 * PART;
	char *buf = calloc(1, size);
	struct stage_file *f;
	stage_file_new(st, "b", "fine", NULL, 0, NULL, &f);
	stage_file_pwrite(f, buf, size, 0);
	bool named = false, clean = true;
	for (int i = 0; i < 500 && !named; i++) {
		rc = stage_jnl_read(st, 1, &r);
		named = rc == 0 && r.upload_id;
		clean = clean && (!named || !r.intent.ns);
		if (rc == 0)
			stage_jnl_release(&r);
		if (!named)
			usleep(10000);
	}
	CHECK(named && clean, "journal: the streamed upload's id is journaled, "
	      "without the intent it replaced");
	CHECK(stage_file_commit(f, NULL) == 0 && s3_fake_upload_count(t.fake, "b") == 0,
	      "journal: the stream completes");
	stage_file_release(f);
	stage_case_end(st, &t, dir);
	free(buf);
}

static void copy_left_cb(void *ctx, const char *bucket, const char *key,
			 int64_t since_ns)
{
	stage_upload_left(ctx, bucket, key, since_ns);
}

/* Two copies in parts leave their uploads open: one whose part copy and
 * abort fail, one whose creation's answer is lost. Both are reported and
 * recorded; the next start aborts exactly them (another client's upload
 * of a copied key from before the margin stays). */
static void copy_left_case(void)
{
	const char *what = "copy in parts left open";
	struct store t;
	store_init(&t, 4096);
	char *dir = unit_tmpdir("orphans-copy");
	int64_t start = now_ns();
	char old[64];
	upload_at(&t, "dst1", start - 1000 * SEC, old);
	s3_fake_clock_set(t.fake, start);
	struct stage *st = open_stage(dir, &t);
	struct stage_recovery_report rep;
	stage_recover(st, &rep);
	size_t size = 3 * PART + 5;
	char *buf = calloc(1, size);
	s3_fake_object_put(t.fake, "b", "src", buf, size, NULL, 0, NULL);
	struct obj_meta src = { 0 };
	s3_head(t.fake, "b", "src", &src);
	struct copy_conf cc = { .threshold = PART, .part_size = PART,
				.left_open = copy_left_cb, .left_ctx = st };
	char etag[72];
	s3_fault_fail(t.s3, S3K_MPU_COPY, 2, 0, -EHOSTUNREACH);
	s3_fault_fail(t.s3, S3K_MPU_ABORT, 1, 0, -EHOSTUNREACH);
	int rc1 = copy_object(t.s3, &cc, "b", "src", "dst1", &src, NULL, 0, etag);
	s3_fault_clear(t.s3);
	struct s3_fault_rule lost = { .kind = S3K_MPU_CREATE, .type = S3F_LOST,
				      .first = 1, .times = 1, .err = -ETIMEDOUT };
	s3_fault_add(t.s3, &lost);
	int rc2 = copy_object(t.s3, &cc, "b", "src", "dst2", &src, NULL, 0, etag);
	s3_fault_clear(t.s3);
	CHECK(rc1 < 0 && rc2 < 0 && s3_fake_upload_count(t.fake, "b") == 3 &&
	      orphans_file(dir),
	      "%s: both copies fail, their uploads open, recorded (%d, %d, %zu open)",
	      what, rc1, rc2, s3_fake_upload_count(t.fake, "b"));
	stage_close(st);
	st = open_stage(dir, &t);
	int rc = stage_recover(st, &rep);
	char want[128];
	snprintf(want, sizeof want, "dst1=%s;", old);
	CHECK(rc == 0 && rep.orphans_aborted == 2 && strcmp(uploads(&t), want) == 0 &&
	      !orphans_file(dir),
	      "%s: the next start aborts exactly them (%u aborted, left: %s)", what,
	      rep.orphans_aborted, uploads(&t));
	obj_meta_release(&src);
	free(buf);
	stage_case_end(st, &t, dir);
}

int main(void)
{
	log_init("test_stage_orphans", getenv("STAGE_DEBUG") ? 2 : 0);
	journal_case();
	window_case(false, false);
	window_case(true, false);
	window_case(false, true);
	lost_answer_case();
	lost_then_committed_case();
	refused_case();
	renamed_case();
	orphans_file_case();
	copy_left_case();
	return unit_exit();
}
