/*
 * test_fscore_copy.c — server-side copies of the file-system core
 * (fuse/core_metadata.c, core_namespace.c over sync/stage/copy.h) on the fake
 * store, counted and broken through the fault wrapper: a chmod of a file
 * the index knows whole is one COPY and no HEAD, and keeps content type and
 * user metadata; an index without the content type (as RGW's events leave
 * it) costs one HEAD; an index older than the object gives -ESTALE at the
 * COPY, then a HEAD and a COPY of the new version. Objects above the copy
 * threshold are copied in parts (chmod, setxattr, rename), byte for byte
 * with their metadata and no upload left; a failing part copy aborts the
 * copy and leaves the object as it was; a source changed during a copy in
 * parts is copied again from its new version, and one that keeps changing
 * fails the change with nothing half-done visible.
 */
#include "unit.h"
#include "unit_views.h"
#include "unit_fscore.h"

#include "common/posix.h"
#include "common/s3.h"
#include "sync/stage/copy.h"
#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"
#include "views/index.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* What S3 holds for key: bytes into *data (caller frees), HEAD into *o. */
static int s3_object(struct s3 *fake, const char *key, void **data, size_t *len,
		     struct obj_meta *o)
{
	*data = NULL;
	memset(o, 0, sizeof *o);
	return s3_fake_object_read(fake, BUCKET, key, data, len, o, NULL);
}

/* An object written by another client with content type ctype and
 * user metadata color=red, then its event applied as RGW sends it (user
 * metadata, no content type). */
static void foreign(struct gw *gw, struct s3 *fake, const char *key,
		    const char *data, size_t len, const char *ctype)
{
	struct obj_kv kv = { "color", "red" };
	struct obj_meta o;
	void *d;
	size_t l;
	if (s3_fake_object_put(fake, BUCKET, key, data, len, &kv, 1, ctype) < 0 ||
	    s3_object(fake, key, &d, &l, &o) < 0) {
		printf("# putting %s failed\n", key);
		exit(2);
	}
	free(o.content_type);
	o.content_type = NULL;
	o.flags = OBJ_HAS_META;
	CHECK(index_apply(gw->ix, &o, 1, NULL, 0, NULL, NULL) >= 0, "event of %s applied", key);
	free(d);
	obj_meta_release(&o);
}

static int chmod_ino(struct core_req *rq, uint64_t ino, mode_t mode)
{
	struct core_set set = { .what = CORE_SET_MODE, .mode = mode };
	struct stat st;
	return core_setattr(rq, ino, NULL, &set, &st);
}

/* Requests of kind the wrapper saw since the last call with reset. */
static uint64_t seen(struct s3 *w, enum s3_kind k, uint64_t *base)
{
	uint64_t n = s3_fault_seen(w, k);
	uint64_t d = n - base[k];
	base[k] = n;
	return d;
}

static void reset(struct s3 *w, uint64_t *base)
{
	for (int k = 0; k < S3K_N; k++)
		base[k] = s3_fault_seen(w, (enum s3_kind)k);
}

/* ---------- single COPYs: where the source comes from ---------- */

static void single_cases(struct view *const *views, struct s3 *fake)
{
	struct s3 *w;
	if (s3_fault_new(fake, false, &w) < 0)
		exit(2);
	struct gw gw;
	gw_open(views, w, &gw, "fscore-copy1");
	struct core_req *rq = &gw.rq;
	uint64_t sv = gw.view_ino[0], base[S3K_N];
	struct core_entry e;
	struct core_file *f = NULL;
	struct core_open_cache cache;

	/* a file made here: the index knows it whole */
	int rc = core_create(rq, sv, "made", NULL, &e, &f, &cache);
	ssize_t n = rc == 0 ? core_write(rq, f, "hello", 5, 0) : -1;
	int frc = rc == 0 ? core_flush(rq, f) : -1;
	core_release(rq, f);
	reset(w, base);
	rc = chmod_ino(rq, e.ino, 0640);
	uint64_t heads = seen(w, S3K_HEAD, base), copies = seen(w, S3K_COPY, base);
	CHECK(n == 5 && frc == 0 && rc == 0 && heads == 0 && copies == 1,
	      "chmod of a file made here: one COPY, no HEAD (rc %d, HEAD %llu, COPY %llu)",
	      rc, (unsigned long long)heads, (unsigned long long)copies);
	void *d;
	size_t len;
	struct obj_meta o;
	struct obj_posix px;
	rc = s3_object(fake, "s/made", &d, &len, &o);
	posix_meta_parse(o.meta, o.n_meta, &px);
	CHECK(rc == 0 && len == 5 && !memcmp(d, "hello", 5) && (px.mode & 07777) == 0640 &&
	      o.content_type && !strcmp(o.content_type, "binary/octet-stream"),
	      "its bytes, the mode and the default content type in S3 (%o, %s)",
	      px.mode, o.content_type ? o.content_type : "-");
	free(d);
	obj_meta_release(&o);

	/* a setattr between a close's flush and its release (rsync's
	 * utimensat after close): the file is clean, so a COPY now; the
	 * release then leaves nothing uncommitted, and a later write's commit
	 * carries the new mode */
	struct core_entry re;
	f = NULL;
	rc = core_create(rq, sv, "raced", NULL, &re, &f, &cache);
	n = rc == 0 ? core_write(rq, f, "r1", 2, 0) : -1;
	frc = rc == 0 ? core_flush(rq, f) : -1;
	reset(w, base);
	int arc = rc == 0 ? chmod_ino(rq, re.ino, 0604) : -1;
	copies = seen(w, S3K_COPY, base);
	uint64_t puts = seen(w, S3K_PUT, base);
	struct stage_counters sc0, sc1;
	stage_counters_get(gw.stage, &sc0);
	n = rc == 0 ? core_write(rq, f, "r2", 2, 2) : -1;
	int frc2 = rc == 0 ? core_flush(rq, f) : -1;
	core_release(rq, f);
	stage_counters_get(gw.stage, &sc1);
	rc = s3_object(fake, "s/raced", &d, &len, &o);
	posix_meta_parse(o.meta, o.n_meta, &px);
	CHECK(frc == 0 && arc == 0 && copies == 1 && puts == 0 && n == 2 && frc2 == 0 &&
	      rc == 0 && len == 4 && !memcmp(d, "r1r2", 4) && (px.mode & 07777) == 0604 &&
	      sc1.pending_files == sc0.pending_files,
	      "chmod of an open, committed file: one COPY; the next commit keeps the mode "
	      "(COPY %llu, PUT %llu, mode %o)", (unsigned long long)copies,
	      (unsigned long long)puts, px.mode & 07777);
	free(d);
	obj_meta_release(&o);

	/* another client's object, known from an event without content type:
	 * one HEAD, then the index holds it whole */
	foreign(&gw, fake, "s/typed", "abc", 3, "text/x-typed");
	struct core_entry te;
	rc = core_lookup(rq, sv, "typed", &te);
	reset(w, base);
	if (rc == 0)
		rc = chmod_ino(rq, te.ino, 0600);
	heads = seen(w, S3K_HEAD, base);
	copies = seen(w, S3K_COPY, base);
	CHECK(rc == 0 && heads == 1 && copies == 1,
	      "chmod with no content type in the index: a HEAD and a COPY (rc %d, %llu, %llu)",
	      rc, (unsigned long long)heads, (unsigned long long)copies);
	rc = core_setxattr(rq, te.ino, "user.shape", "round", 5, 0);
	heads = seen(w, S3K_HEAD, base);
	copies = seen(w, S3K_COPY, base);
	CHECK(rc == 0 && heads == 0 && copies == 1,
	      "then setxattr: one COPY from the index (rc %d, HEAD %llu, COPY %llu)",
	      rc, (unsigned long long)heads, (unsigned long long)copies);
	rc = s3_object(fake, "s/typed", &d, &len, &o);
	posix_meta_parse(o.meta, o.n_meta, &px);
	const char *color = obj_meta_get(&o, "color"), *shape = obj_meta_get(&o, "shape");
	CHECK(rc == 0 && o.content_type && !strcmp(o.content_type, "text/x-typed") &&
	      color && !strcmp(color, "red") && shape && !strcmp(shape, "round") &&
	      (px.mode & 07777) == 0600,
	      "content type, user metadata, the new xattr and the mode kept (%s)",
	      o.content_type ? o.content_type : "-");
	free(d);
	obj_meta_release(&o);

	/* the object changed behind the index (no event yet): the COPY of the
	 * indexed version is refused, a HEAD reads the new one, a COPY of it */
	struct obj_kv kv = { "color", "blue" };
	s3_fake_object_put(fake, BUCKET, "s/typed", "newer", 5, &kv, 1, "text/x-new");
	uint64_t stale0 = stats_value(&gw.st, "s3", "copy_stale_index");
	reset(w, base);
	rc = chmod_ino(rq, te.ino, 0604);
	heads = seen(w, S3K_HEAD, base);
	copies = seen(w, S3K_COPY, base);
	CHECK(rc == 0 && heads == 1 && copies == 2 && stats_value(&gw.st, "s3", "copy_stale_index") == stale0 + 1,
	      "chmod over a stale index: COPY refused, HEAD, COPY (rc %d, %llu, %llu)",
	      rc, (unsigned long long)heads, (unsigned long long)copies);
	rc = s3_object(fake, "s/typed", &d, &len, &o);
	posix_meta_parse(o.meta, o.n_meta, &px);
	color = obj_meta_get(&o, "color");
	CHECK(rc == 0 && len == 5 && !memcmp(d, "newer", 5) && o.content_type &&
	      !strcmp(o.content_type, "text/x-new") && color && !strcmp(color, "blue") &&
	      (px.mode & 07777) == 0604,
	      "the new version's bytes, content type and metadata, with the mode");
	free(d);
	obj_meta_release(&o);

	/* a rename of a small object: one COPY, no HEAD, as before */
	reset(w, base);
	rc = core_rename(rq, sv, "typed", sv, "typed2", 0);
	heads = seen(w, S3K_HEAD, base);
	copies = seen(w, S3K_COPY, base);
	CHECK(rc == 0 && heads == 0 && copies == 1 && seen(w, S3K_DELETE, base) == 1,
	      "rename: one COPY, one DELETE, no HEAD (rc %d, %llu, %llu)", rc,
	      (unsigned long long)heads, (unsigned long long)copies);

	/* a rename over a stale index: the COPY of the indexed version is
	 * refused, a HEAD reads the new one, a COPY of it; the new name's
	 * record is that version's (its size), not the old record's */
	s3_fake_object_put(fake, BUCKET, "s/typed2", "newest!", 7, NULL, 0, NULL);
	reset(w, base);
	rc = core_rename(rq, sv, "typed2", sv, "typed3", 0);
	heads = seen(w, S3K_HEAD, base);
	copies = seen(w, S3K_COPY, base);
	struct obj_meta rec = { 0 };
	bool have = index_object_get(gw.ix, BUCKET, "s/typed3", &rec) == 0;
	int rc2 = s3_object(fake, "s/typed3", &d, &len, &o);
	CHECK(rc == 0 && heads == 1 && copies == 2 && rc2 == 0 && len == 7 &&
	      !memcmp(d, "newest!", 7) && have && rec.size == 7,
	      "rename over a stale index: COPY refused, HEAD, COPY; the new record has the "
	      "copied version's size (rc %d, %llu, %llu, size %llu)", rc,
	      (unsigned long long)heads, (unsigned long long)copies,
	      (unsigned long long)rec.size);
	free(d);
	obj_meta_release(&o);
	obj_meta_release(&rec);
	gw_close(&gw);
	s3_free(w);
}

/* ---------- copies in parts ---------- */

#define BIG_LEN 5000             /* 5 parts of 1,024 bytes (the last 904) */

/* A fake hook: another client rewrites the source while the second part
 * of a copy in parts is copied (of the first copy only, or of each). */
struct changer {
	struct s3 *fake;
	const char *key;
	bool once;
	unsigned in_copy, changes;   /* part copies of the current copy; rewrites */
};

static void change_source(void *ctx, enum s3_kind kind, const char *bucket,
			  const char *key)
{
	(void)bucket;
	(void)key;
	struct changer *ch = ctx;
	if (kind == S3K_MPU_CREATE)
		ch->in_copy = 0;
	if (kind != S3K_MPU_COPY || ++ch->in_copy != 2 || (ch->once && ch->changes))
		return;
	char buf[BIG_LEN];
	memset(buf, 'a' + (int)(ch->changes % 26), sizeof buf);
	struct obj_kv kv = { "color", "green" };
	s3_fake_object_put(ch->fake, BUCKET, ch->key, buf, sizeof buf, &kv, 1, "text/x-chg");
	ch->changes++;
}

static void big_file(struct core_req *rq, uint64_t dir, const char *name, char fill,
		     struct core_entry *e)
{
	char buf[BIG_LEN];
	memset(buf, fill, sizeof buf);
	for (size_t i = 0; i < sizeof buf; i += 97)
		buf[i] = (char)('0' + i % 10);          /* not one repeated byte */
	struct core_file *f = NULL;
	struct core_open_cache cache;
	int rc = core_create(rq, dir, name, NULL, e, &f, &cache);
	ssize_t n = rc == 0 ? core_write(rq, f, buf, sizeof buf, 0) : -1;
	int frc = rc == 0 ? core_flush(rq, f) : -1;
	core_release(rq, f);
	CHECK(rc == 0 && n == BIG_LEN && frc == 0, "%s: %d bytes written and closed",
	      name, BIG_LEN);
}

static bool big_bytes_ok(const void *d, size_t len, char fill)
{
	const char *p = d;
	if (len != BIG_LEN)
		return false;
	for (size_t i = 0; i < len; i++)
		if (p[i] != (i % 97 == 0 ? (char)('0' + i % 10) : fill))
			return false;
	return true;
}

static void parts_cases(struct view *const *views, struct s3 *fake)
{
	struct s3 *w;
	if (s3_fault_new(fake, false, &w) < 0)
		exit(2);
	s3_fake_min_part_set(fake, 1000);
	struct copy_conf cc = { .threshold = 4096, .part_size = 1024, .threads = 3 };
	struct gw gw;
	gw_open_copy(views, w, &gw, "fscore-copy2", &cc);
	struct core_req *rq = &gw.rq;
	uint64_t sv = gw.view_ino[0], base[S3K_N];
	struct core_entry e;
	void *d;
	size_t len;
	struct obj_meta o;
	struct obj_posix px;

	big_file(rq, sv, "big", 'x', &e);
	reset(w, base);
	int rc = chmod_ino(rq, e.ino, 0751);
	uint64_t parts = seen(w, S3K_MPU_COPY, base), copies = seen(w, S3K_COPY, base);
	CHECK(rc == 0 && parts == 5 && copies == 0 && seen(w, S3K_MPU_COMPLETE, base) == 1,
	      "chmod above the threshold: 5 part copies, no single COPY (rc %d, %llu, %llu)",
	      rc, (unsigned long long)parts, (unsigned long long)copies);
	rc = core_setxattr(rq, e.ino, "user.kind", "large", 5, 0);
	CHECK(rc == 0 && seen(w, S3K_MPU_COPY, base) == 5, "setxattr: in parts too (%d)", rc);
	rc = s3_object(fake, "s/big", &d, &len, &o);
	posix_meta_parse(o.meta, o.n_meta, &px);
	const char *kind = obj_meta_get(&o, "kind");
	size_t el = strlen(o.etag);
	CHECK(rc == 0 && big_bytes_ok(d, len, 'x') && (px.mode & 07777) == 0751 &&
	      kind && !strcmp(kind, "large") && el > 2 && !strcmp(o.etag + el - 2, "-5") &&
	      s3_fake_upload_count(fake, BUCKET) == 0,
	      "bytes, mode, xattr kept; ETag %s; no upload left", o.etag);
	free(d);
	obj_meta_release(&o);

	/* rename in parts: bytes and metadata at the new name */
	reset(w, base);
	rc = core_rename(rq, sv, "big", sv, "big2", 0);
	parts = seen(w, S3K_MPU_COPY, base);
	int grc = s3_object(fake, "s/big", &d, &len, &o);
	free(d);
	obj_meta_release(&o);
	rc = rc == 0 ? s3_object(fake, "s/big2", &d, &len, &o) : rc;
	posix_meta_parse(o.meta, o.n_meta, &px);
	kind = obj_meta_get(&o, "kind");
	CHECK(rc == 0 && parts == 5 && grc == -ENOENT && big_bytes_ok(d, len, 'x') &&
	      (px.mode & 07777) == 0751 && kind && !strcmp(kind, "large") &&
	      s3_fake_upload_count(fake, BUCKET) == 0,
	      "rename in %llu parts: the new name holds bytes and metadata, the old is gone",
	      (unsigned long long)parts);
	char etag_before[72];
	snprintf(etag_before, sizeof etag_before, "%s", o.etag);
	free(d);
	obj_meta_release(&o);

	/* a failing part copy: the copy is aborted, the object stays as it was */
	struct core_entry e2;
	rc = core_lookup(rq, sv, "big2", &e2);
	s3_fault_fail(w, S3K_MPU_COPY, 3, 1, -EIO);
	rc = rc == 0 ? chmod_ino(rq, e2.ino, 0700) : rc;
	s3_fault_clear(w);
	s3_object(fake, "s/big2", &d, &len, &o);
	posix_meta_parse(o.meta, o.n_meta, &px);
	CHECK(rc == -EIO && !strcmp(o.etag, etag_before) && (px.mode & 07777) == 0751 &&
	      s3_fake_upload_count(fake, BUCKET) == 0 &&
	      s3_fake_count(fake, S3K_MPU_ABORT) >= 1,
	      "a part copy failing: EIO, the object unchanged, the upload aborted (rc %d)", rc);
	free(d);
	obj_meta_release(&o);

	/* the source changes once during the copy: copied again from the new
	 * version (a HEAD), whose bytes and metadata it keeps */
	struct changer ch = { .fake = fake, .key = "s/big2", .once = true };
	s3_fake_hook_set(fake, change_source, &ch);
	rc = chmod_ino(rq, e2.ino, 0710);
	s3_fake_hook_set(fake, NULL, NULL);
	s3_object(fake, "s/big2", &d, &len, &o);
	posix_meta_parse(o.meta, o.n_meta, &px);
	const char *color = obj_meta_get(&o, "color");
	bool all_a = len == BIG_LEN && memchr(d, 'b', len) == NULL &&
		     ((char *)d)[0] == 'a' && ((char *)d)[len - 1] == 'a';
	CHECK(rc == 0 && ch.changes == 1 && all_a && color && !strcmp(color, "green") &&
	      o.content_type && !strcmp(o.content_type, "text/x-chg") &&
	      (px.mode & 07777) == 0710 && s3_fake_upload_count(fake, BUCKET) == 0,
	      "source changed during the copy: copied again from the new version "
	      "(rc %d, mode %o)", rc, px.mode & 07777);
	free(d);
	obj_meta_release(&o);

	/* it keeps changing: the change fails, what S3 holds is the other
	 * client's last version, whole, without the mode; no upload left */
	ch = (struct changer){ .fake = fake, .key = "s/big2" };
	s3_fake_hook_set(fake, change_source, &ch);
	rc = chmod_ino(rq, e2.ino, 0777);
	s3_fake_hook_set(fake, NULL, NULL);
	s3_object(fake, "s/big2", &d, &len, &o);
	posix_meta_parse(o.meta, o.n_meta, &px);
	char last = (char)('a' + (int)((ch.changes - 1) % 26));
	bool whole = len == BIG_LEN && ((char *)d)[0] == last && ((char *)d)[len - 1] == last;
	CHECK(rc == -ESTALE && ch.changes == 2 && whole && !(px.have & POSIX_MODE) &&
	      s3_fake_upload_count(fake, BUCKET) == 0,
	      "source changing at every try: ESTALE, the other client's version whole, "
	      "no upload left (rc %d, %u changes)", rc, ch.changes);
	free(d);
	obj_meta_release(&o);
	gw_close(&gw);
	s3_free(w);
}

/* ---------- copy_object alone ---------- */

static void engine_cases(struct s3 *fake)
{
	char buf[BIG_LEN], etag[72];
	memset(buf, 'q', sizeof buf);
	struct obj_kv kv[2] = { { "a", "1" }, { "b", "2" } };
	s3_fake_object_put(fake, BUCKET, "e/src", buf, sizeof buf, kv, 2, "text/x-e");
	struct obj_meta src;
	void *d;
	size_t len;
	s3_object(fake, "e/src", &d, &len, &src);
	free(d);
	struct copy_conf cc = { .threshold = 4096, .part_size = 1024, .threads = 8 };
	CHECK(copy_in_parts(&cc, 4097) && !copy_in_parts(&cc, 4096) &&
	      !copy_in_parts(NULL, 5ull << 30) && copy_in_parts(NULL, (5ull << 30) + 1),
	      "the threshold: above it in parts (default 5 GiB)");
	int rc = copy_object(fake, &cc, BUCKET, "e/src", "e/dst", &src, NULL, 0, etag);
	struct obj_meta o;
	s3_object(fake, "e/dst", &d, &len, &o);
	const char *b = obj_meta_get(&o, "b");
	CHECK(rc == 0 && len == BIG_LEN && !memcmp(d, buf, len) && b && !strcmp(b, "2") &&
	      o.content_type && !strcmp(o.content_type, "text/x-e") && !strcmp(etag, o.etag),
	      "meta NULL in parts keeps the source's metadata and content type (%s)", etag);
	free(d);
	obj_meta_release(&o);
	struct obj_meta nosrc = { 0 };
	nosrc.size = 10;
	rc = copy_object(fake, &cc, BUCKET, "e/src", "e/x", &nosrc, NULL, 0, etag);
	CHECK(rc == -EINVAL, "no source ETag: EINVAL (%d)", rc);
	struct obj_meta huge = src;
	huge.size = S3_MAX_OBJECT + 1;
	rc = copy_object(fake, &cc, BUCKET, "e/src", "e/x", &huge, NULL, 0, etag);
	CHECK(rc == -EFBIG, "past 5 TiB: EFBIG (%d)", rc);
	obj_meta_release(&src);
}

int main(void)
{
	struct s3 *fake;
	struct view *views[2];
	if (s3_fake_new(&fake) < 0 || s3_fake_bucket_add(fake, BUCKET) < 0) {
		printf("# fake S3 set-up failed\n");
		return 2;
	}
	for (int v = 0; v < 2; v++)
		views[v] = unit_view(unit_fscore_view_json[v]);
	single_cases(views, fake);
	parts_cases(views, fake);
	engine_cases(fake);
	for (int v = 0; v < 2; v++)
		view_free(views[v]);
	s3_free(fake);
	return unit_exit();
}
