/*
 * test_fscore_cases.c — the file-system core (fuse/core.h) case by case,
 * beside the model-based test (test_fscore.c): the defects that test found
 * or the issue named, fixed (an empty made directory renamed onto another,
 * a renamed inode found by its new name), and each S3 error path of the
 * core through the fault wrapper (sync/s3_fault.h) around the fake store:
 * PUT at fsync and close, HEAD at open and at a commit read, GET at a read
 * and at the fill of an open for writing, COPY at rename and setxattr,
 * DELETE at unlink.
 */
#include "unit.h"
#include "unit_views.h"
#include "unit_fscore.h"

#include "common/s3.h"
#include "sync/s3_fake.h"
#include "sync/s3_fault.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------- fixed cases: the defects the model found or the issue named ---------- */

static int count_entry(void *ctx, const struct core_dirent *e)
{
	struct { const char *name; int n; } *c = ctx;
	if (strcmp(e->name, c->name) == 0)
		c->n++;
	return 0;
}

/* How many times the view's root lists name. */
static int listed(struct core *c, uint64_t dir, const char *name)
{
	struct { const char *name; int n; } cnt = { name, 0 };
	struct core_dir *d;
	if (core_opendir(c, dir, &d) < 0)
		return -1;
	int rc = core_readdir(c, d, 0, false, count_entry, &cnt);
	core_releasedir(c, d);
	return rc < 0 ? -1 : cnt.n;
}

static void fixed_cases(struct gw *gw)
{
	struct core *c = gw->core;
	uint64_t root = gw->view_ino[0];
	struct core_entry e1, e2, e;

	/* An empty made directory renamed onto another one: one entry, and
	 * rmdir removes it (the mirror of the index kept a second one). */
	int rc = core_mkdir(c, root, "fx_d1", NULL, &e1);
	if (rc == 0)
		rc = core_mkdir(c, root, "fx_d2", NULL, &e2);
	if (rc == 0)
		rc = core_rename(c, root, "fx_d1", root, "fx_d2", 0);
	CHECK(rc == 0, "mkdir, mkdir, rename onto the empty made directory: %d", rc);
	CHECK(listed(c, root, "fx_d2") == 1 && listed(c, root, "fx_d1") == 0,
	      "the view lists fx_d2 once and fx_d1 no more (%d, %d)",
	      listed(c, root, "fx_d2"), listed(c, root, "fx_d1"));
	rc = core_rmdir(c, root, "fx_d2");
	int lrc = core_lookup(c, root, "fx_d2", &e);
	CHECK(rc == 0 && lrc == -ENOENT, "rmdir removes it for good: rmdir %d, lookup %d",
	      rc, lrc);

	/* A renamed inode is found by its new name: the lookup answers the
	 * number the kernel holds, and reads through it see the staged copy. */
	struct core_file *f = NULL;
	struct core_open_cache cache;
	rc = core_create(c, root, "fx_f", NULL, &e1, &f, &cache);
	ssize_t n = rc == 0 ? core_write(c, f, "abc", 3, 0) : -1;
	if (rc == 0)
		rc = core_rename(c, root, "fx_f", root, "fx_g", 0);
	lrc = rc == 0 ? core_lookup(c, root, "fx_g", &e2) : -1;
	CHECK(n == 3 && rc == 0 && lrc == 0 && e2.ino == e1.ino,
	      "after rename the new name is the same inode (%llu, %llu)",
	      (unsigned long long)e1.ino, (unsigned long long)e2.ino);
	struct core_file *r = NULL;
	char buf[8] = "";
	n = lrc == 0 && core_open(c, e2.ino, O_RDONLY, &r, &cache) == 0
		    ? core_read(c, r, buf, sizeof buf, 0) : -1;
	CHECK(n == 3 && memcmp(buf, "abc", 3) == 0,
	      "a descriptor opened by the new name reads the staged bytes (%zd)", n);
	core_release(c, r);
	if (f) {
		CHECK(core_flush(c, f) == 0, "close publishes the renamed file");
		core_release(c, f);
	}
	lrc = core_lookup(c, root, "fx_f", &e);
	CHECK(lrc == -ENOENT, "the old name is gone (%d)", lrc);
}

/* ---------- S3 failures: each error path of the core, injected ---------- */

/* The bytes S3 holds for key (fake's view), or -ENOENT. */
static int s3_bytes(struct s3 *s3, const char *key, char *buf, size_t cap, size_t *len)
{
	void *data = NULL;
	int rc = s3_fake_object_read(s3, BUCKET, key, &data, len, NULL, NULL);
	if (rc == 0) {
		if (*len > cap)
			*len = cap;
		memcpy(buf, data, *len);
	}
	free(data);
	return rc;
}

static void fault_cases(struct view *const *views, struct s3 *s3)
{
	struct s3 *fs3;
	if (s3_fault_new(s3, false, &fs3) < 0) {
		printf("# s3_fault_new failed\n");
		exit(2);
	}
	struct gw gw;
	gw_open(views, fs3, &gw, "fscore-f");
	struct core *c = gw.core;
	uint64_t cv = gw.view_ino[1], sv = gw.view_ino[0];
	struct core_entry e;
	struct core_open_cache cache;
	struct core_file *f = NULL, *r = NULL;
	char buf[64];
	size_t len = 0;

	/* commit: a failed upload makes fsync return EIO and keeps the data;
	 * the next fsync uploads it */
	int rc = core_create(c, cv, "ft_a", NULL, &e, &f, &cache);
	ssize_t n = rc == 0 ? core_write(c, f, "hello", 5, 0) : -1;
	s3_fault_fail(fs3, S3K_PUT, 1, 1, -EHOSTUNREACH);
	int frc = rc == 0 ? core_fsync(c, f) : 0;
	CHECK(n == 5 && frc == -EIO && s3_bytes(s3, "c/ft_a", buf, sizeof buf, &len) == -ENOENT,
	      "fsync with the PUT failing: EIO, nothing in S3 (%d)", frc);
	n = f ? core_read(c, f, buf, sizeof buf, 0) : -1;
	CHECK(n == 5 && memcmp(buf, "hello", 5) == 0, "the staged data is kept (%zd)", n);
	frc = f ? core_fsync(c, f) : -1;
	CHECK(frc == 0 && s3_bytes(s3, "c/ft_a", buf, sizeof buf, &len) == 0 && len == 5,
	      "the next fsync uploads it (%d)", frc);

	/* a failed close (flush) also answers EIO; the next close uploads */
	n = f ? core_write(c, f, "HELLO", 5, 0) : -1;
	s3_fault_fail(fs3, S3K_PUT, 1, 1, -EIO);
	frc = f ? core_flush(c, f) : 0;
	CHECK(frc == -EIO && s3_bytes(s3, "c/ft_a", buf, sizeof buf, &len) == 0 &&
	      memcmp(buf, "hello", 5) == 0, "close with the PUT failing: EIO, S3 keeps the "
	      "old bytes (%d)", frc);
	frc = f ? core_flush(c, f) : -1;
	CHECK(frc == 0 && s3_bytes(s3, "c/ft_a", buf, sizeof buf, &len) == 0 &&
	      memcmp(buf, "HELLO", 5) == 0, "the next close uploads (%d)", frc);
	core_release(c, f);
	f = NULL;

	/* open validates with a HEAD: its failure is the open's */
	uint64_t ino = 0;
	rc = core_lookup(c, cv, "ft_a", &e);
	ino = e.ino;
	s3_fault_fail(fs3, S3K_HEAD, 1, 1, -EHOSTUNREACH);
	int orc = rc == 0 ? core_open(c, ino, O_RDONLY, &r, &cache) : 0;
	CHECK(orc == -EHOSTUNREACH, "open with the HEAD failing answers its error (%d)", orc);
	if (orc == 0)
		core_release(c, r);

	/* commit: each read validates; a failed HEAD fails that read only */
	orc = core_open(c, ino, O_RDONLY, &r, &cache);
	s3_fault_fail(fs3, S3K_HEAD, 1, 1, -EIO);
	n = orc == 0 ? core_read(c, r, buf, sizeof buf, 0) : 0;
	ssize_t n2 = orc == 0 ? core_read(c, r, buf, sizeof buf, 0) : 0;
	CHECK(orc == 0 && n == -EIO && n2 == 5, "commit read with the HEAD failing: EIO, "
	      "then the next read works (%zd, %zd)", n, n2);
	if (orc == 0)
		core_release(c, r);

	/* rename: a failed COPY changes nothing */
	s3_fault_fail(fs3, S3K_COPY, 1, 1, -EIO);
	rc = core_rename(c, cv, "ft_a", cv, "ft_b", 0);
	int l1 = core_lookup(c, cv, "ft_a", &e), l2 = core_lookup(c, cv, "ft_b", &e);
	CHECK(rc == -EIO && l1 == 0 && l2 == -ENOENT &&
	      s3_bytes(s3, "c/ft_b", buf, sizeof buf, &len) == -ENOENT,
	      "rename with the COPY failing: EIO, the old name stays, no new one (%d)", rc);

	/* unlink: a failed DELETE leaves the object and its name */
	s3_fault_fail(fs3, S3K_DELETE, 1, 1, -EIO);
	rc = core_unlink(c, cv, "ft_a");
	l1 = core_lookup(c, cv, "ft_a", &e);
	CHECK(rc == -EIO && l1 == 0 && s3_bytes(s3, "c/ft_a", buf, sizeof buf, &len) == 0,
	      "unlink with the DELETE failing: EIO, object and name stay (%d)", rc);

	/* setxattr is a COPY onto itself: its failure leaves the metadata */
	s3_fault_fail(fs3, S3K_COPY, 1, 1, -EIO);
	rc = core_setxattr(c, ino, "user.color", "red", 3, 0);
	n = core_getxattr(c, ino, "user.color", buf, sizeof buf);
	CHECK(rc == -EIO && n == -ENODATA, "setxattr with the COPY failing: EIO, no "
	      "xattr (%d, %zd)", rc, n);
	rc = core_setxattr(c, ino, "user.color", "red", 3, 0);
	n = core_getxattr(c, ino, "user.color", buf, sizeof buf);
	CHECK(rc == 0 && n == 3 && memcmp(buf, "red", 3) == 0, "then it works (%d, %zd)",
	      rc, n);

	/* open for writing fills the staged copy from S3: a failed GET fails
	 * the open (session view) */
	rc = core_create(c, sv, "ft_s", NULL, &e, &f, &cache);
	n = rc == 0 ? core_write(c, f, "abc", 3, 0) : -1;
	frc = rc == 0 ? core_flush(c, f) : -1;
	core_release(c, f);
	f = NULL;
	/* a read that needs a GET: its failure fails that read only */
	orc = frc == 0 ? core_open(c, e.ino, O_RDONLY, &r, &cache) : -1;
	s3_fault_fail(fs3, S3K_GET, 1, 1, -EIO);
	n = orc == 0 ? core_read(c, r, buf, sizeof buf, 0) : 0;
	n2 = orc == 0 ? core_read(c, r, buf, sizeof buf, 0) : 0;
	CHECK(orc == 0 && n == -EIO && n2 == 3, "read with the GET failing: EIO, then the "
	      "next read works (%zd, %zd)", n, n2);
	if (orc == 0)
		core_release(c, r);
	s3_fault_fail(fs3, S3K_GET, 1, 1, -EIO);
	orc = frc == 0 ? core_open(c, e.ino, O_RDWR, &f, &cache) : 0;
	CHECK(frc == 0 && orc == -EIO, "open for writing with the GET of the fill failing: "
	      "EIO (%d)", orc);
	if (orc == 0)
		core_release(c, f);
	CHECK(s3_fault_injected(fs3, S3K_PUT) == 2 && s3_fault_injected(fs3, S3K_COPY) == 2 &&
	      s3_fault_injected(fs3, S3K_GET) == 2 && s3_fault_injected(fs3, S3K_HEAD) == 2 &&
	      s3_fault_injected(fs3, S3K_DELETE) == 1,
	      "every injected failure was met (PUT %llu, COPY %llu, GET %llu, HEAD %llu, "
	      "DELETE %llu)", (unsigned long long)s3_fault_injected(fs3, S3K_PUT),
	      (unsigned long long)s3_fault_injected(fs3, S3K_COPY),
	      (unsigned long long)s3_fault_injected(fs3, S3K_GET),
	      (unsigned long long)s3_fault_injected(fs3, S3K_HEAD),
	      (unsigned long long)s3_fault_injected(fs3, S3K_DELETE));
	gw_close(&gw);
	s3_free(fs3);
}

int main(void)
{
	struct s3 *s3;
	struct view *views[2];
	if (s3_fake_new(&s3) < 0 || s3_fake_bucket_add(s3, BUCKET) < 0) {
		printf("# fake S3 set-up failed\n");
		return 2;
	}
	for (int v = 0; v < 2; v++)
		views[v] = unit_view(unit_fscore_view_json[v]);
	struct gw gw;
	gw_open(views, s3, &gw, "fscore-cases");
	fixed_cases(&gw);
	gw_close(&gw);
	fault_cases(views, s3);
	for (int v = 0; v < 2; v++)
		view_free(views[v]);
	s3_free(s3);
	return unit_exit();
}
