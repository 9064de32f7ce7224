/*
 * test_fscore_cases.c — the file-system core (fuse/core.h) case by case,
 * beside the model-based test (test_fscore.c): the defects that test found
 * or the issue named, fixed (an empty made directory renamed onto another,
 * a renamed inode found by its new name), and each S3 error path of the
 * core through the fault wrapper (sync/s3/s3_fault.h) around the fake store:
 * PUT at fsync and close, HEAD at open and at a commit read, GET at a read
 * and at the fill of an open for writing, COPY at rename and setxattr,
 * DELETE at unlink; and the POSIX attributes (issue 12): mode, owner and
 * times set through the core land in S3 in s3fs's names, come back from
 * objects s3fs and rclone wrote, ride on the upload of an open file, and
 * stay out of the user.* xattrs; mknod, and directories' modes across a
 * restart of the core. Writes whose bytes come in a pipe (the adapter's
 * spliced WRITEs). And view-set reloads between and during
 * operations: a request keeps the set it pinned; inodes, descriptors and
 * lookups follow their view by name when it goes and comes back at
 * another index.
 */
#include "unit.h"
#include "unit_views.h"
#include "unit_fscore.h"

#include "common/posix.h"
#include "common/s3.h"
#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"
#include "views/index.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

/* ---------- fixed cases: the defects the model found or the issue named ---------- */

struct entry_probe {
	const char *name;
	int n;                       /* times listed */
	long long size;              /* its st_size as listed (the last time) */
};

static int probe_entry(void *ctx, const struct core_dirent *e)
{
	struct entry_probe *p = ctx;
	if (strcmp(e->name, p->name) == 0) {
		p->n++;
		p->size = (long long)e->attr.st_size;
	}
	return 0;
}

/* name as a listing of dir shows it (plus: readdirplus); 0 or -1. */
static int probe(struct core_req *rq, uint64_t dir, bool plus, struct entry_probe *p)
{
	struct core_dir *d;
	if (core_opendir(rq, dir, &d) < 0)
		return -1;
	int rc = core_readdir(rq, d, 0, plus, probe_entry, p);
	core_releasedir(rq, d);
	return rc < 0 ? -1 : 0;
}

/* How many times the view's root lists name. */
static int listed(struct core_req *rq, uint64_t dir, const char *name)
{
	struct entry_probe p = { name, 0, -1 };
	return probe(rq, dir, false, &p) < 0 ? -1 : p.n;
}

/* The size readdirplus gives name in dir, -1 if it is not listed. */
static long long plus_size(struct core_req *rq, uint64_t dir, const char *name)
{
	struct entry_probe p = { name, 0, -1 };
	return probe(rq, dir, true, &p) < 0 ? -1 : p.size;
}

/* A writer goes on after another descriptor's close published a shorter
 * version: readdirplus gives the staged size, as getattr does (it gave
 * the index's, and the kernel then read only that much). */
static void staged_readdirplus(struct gw *gw)
{
	struct core_req *rq = &gw->rq;
	uint64_t root = gw->view_ino[0];
	struct core_entry e;
	struct core_open_cache cache;
	struct core_file *a = NULL, *b = NULL;
	static char more[1424];
	memset(more, 'y', sizeof more);
	int rc = core_create(rq, root, "rp_f", NULL, &e, &a, &cache);
	if (rc == 0)
		rc = core_open(rq, e.ino, O_WRONLY | O_TRUNC, &b, &cache);
	ssize_t n = rc == 0 ? core_write(rq, b, "0123456789012345678901234567890123456789"
					  "01234567890", 51, 0) : -1;
	int frc = b ? core_flush(rq, b) : -1;
	if (b)
		core_release(rq, b);
	ssize_t m = a ? core_write(rq, a, more, sizeof more, 120) : -1;
	struct stat st;
	int grc = core_getattr(rq, e.ino, &st);
	CHECK(n == 51 && frc == 0 && m == (ssize_t)sizeof more && grc == 0 && st.st_size == 1544,
	      "a writer goes on after another descriptor's close: getattr %lld",
	      (long long)st.st_size);
	long long ps = plus_size(rq, root, "rp_f");
	CHECK(ps == 1544, "readdirplus gives the staged size too (%lld)", ps);
	if (a) {
		core_flush(rq, a);
		core_release(rq, a);
	}
	core_forget(rq, e.ino, 1);
}

static void fixed_cases(struct gw *gw)
{
	struct core_req *rq = &gw->rq;
	uint64_t root = gw->view_ino[0];
	struct core_entry e1, e2, e;

	/* An empty made directory renamed onto another one: one entry, and
	 * rmdir removes it (the mirror of the index kept a second one). */
	int rc = core_mkdir(rq, root, "fx_d1", NULL, &e1);
	if (rc == 0)
		rc = core_mkdir(rq, root, "fx_d2", NULL, &e2);
	if (rc == 0)
		rc = core_rename(rq, root, "fx_d1", root, "fx_d2", 0);
	CHECK(rc == 0, "mkdir, mkdir, rename onto the empty made directory: %d", rc);
	CHECK(listed(rq, root, "fx_d2") == 1 && listed(rq, root, "fx_d1") == 0,
	      "the view lists fx_d2 once and fx_d1 no more (%d, %d)",
	      listed(rq, root, "fx_d2"), listed(rq, root, "fx_d1"));
	/* The kernel keeps the moved directory's inode: it stands for fx_d2
	 * now (a GETATTR of it answered ENOENT: pjdfstest rename/10.t). */
	struct stat dst;
	int grc = core_getattr(rq, e1.ino, &dst);
	int drc = core_lookup(rq, root, "fx_d2", &e);
	CHECK(grc == 0 && S_ISDIR(dst.st_mode) && drc == 0 && e.ino == e1.ino,
	      "the moved directory's inode is fx_d2: getattr %d, lookup %d (%llu, %llu)",
	      grc, drc, (unsigned long long)e.ino, (unsigned long long)e1.ino);
	rc = core_rmdir(rq, root, "fx_d2");
	int lrc = core_lookup(rq, root, "fx_d2", &e);
	CHECK(rc == 0 && lrc == -ENOENT, "rmdir removes it for good: rmdir %d, lookup %d",
	      rc, lrc);

	/* A renamed inode is found by its new name: the lookup answers the
	 * number the kernel holds, and reads through it see the staged copy. */
	struct core_file *f = NULL;
	struct core_open_cache cache;
	rc = core_create(rq, root, "fx_f", NULL, &e1, &f, &cache);
	ssize_t n = rc == 0 ? core_write(rq, f, "abc", 3, 0) : -1;
	if (rc == 0)
		rc = core_rename(rq, root, "fx_f", root, "fx_g", 0);
	lrc = rc == 0 ? core_lookup(rq, root, "fx_g", &e2) : -1;
	CHECK(n == 3 && rc == 0 && lrc == 0 && e2.ino == e1.ino,
	      "after rename the new name is the same inode (%llu, %llu)",
	      (unsigned long long)e1.ino, (unsigned long long)e2.ino);
	struct core_file *r = NULL;
	char buf[8] = "";
	n = lrc == 0 && core_open(rq, e2.ino, O_RDONLY, &r, &cache) == 0
		    ? core_read(rq, r, buf, sizeof buf, 0) : -1;
	CHECK(n == 3 && memcmp(buf, "abc", 3) == 0,
	      "a descriptor opened by the new name reads the staged bytes (%zd)", n);
	core_release(rq, r);
	if (f) {
		CHECK(core_flush(rq, f) == 0, "close publishes the renamed file");
		core_release(rq, f);
	}
	lrc = core_lookup(rq, root, "fx_f", &e);
	CHECK(lrc == -ENOENT, "the old name is gone (%d)", lrc);
	staged_readdirplus(gw);
}

/* A write whose bytes come in a pipe (core_write_pipe), as the adapter's
 * spliced WRITEs do: they land where memory's would, the file wants no
 * copy in memory, and a descriptor not open for writing takes none. */
static void pipe_cases(struct gw *gw)
{
	struct core_req *rq = &gw->rq;
	uint64_t root = gw->view_ino[0];
	struct core_entry e;
	struct core_open_cache cache;
	struct core_file *f = NULL, *r = NULL;
	static char data[5000];
	memset(data, 'p', sizeof data);
	int p[2];
	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) {
		CHECK(0, "pipe: pipe2: %s", strerror(errno));
		return;
	}
	int rc = core_create(rq, root, "pw_a", NULL, &e, &f, &cache);
	ssize_t w = rc == 0 ? write(p[1], data, sizeof data) : -1;
	ssize_t n = w == (ssize_t)sizeof data ? core_write_pipe(rq, f, p[0], sizeof data, 0) : -1;
	ssize_t m = n == (ssize_t)sizeof data ? core_write(rq, f, "abc", 3, sizeof data) : -1;
	int left = -1;
	ioctl(p[0], FIONREAD, &left);
	CHECK(rc == 0 && !core_write_in_memory(f) && n == (ssize_t)sizeof data && m == 3 &&
	      left == 0, "pipe: 5000 bytes from a pipe, 3 from memory, the pipe emptied "
	      "(%d, %zd, %zd, %d)", rc, n, m, left);
	char buf[6000];
	n = f ? core_read(rq, f, buf, sizeof buf, 0) : -1;
	CHECK(n == 5003 && memcmp(buf, data, sizeof data) == 0 &&
	      memcmp(buf + sizeof data, "abc", 3) == 0, "pipe: read back as written (%zd)", n);
	CHECK(f && core_flush(rq, f) == 0, "pipe: close publishes it");
	core_release(rq, f);
	rc = core_open(rq, e.ino, O_RDONLY, &r, &cache);
	w = rc == 0 ? write(p[1], data, 100) : -1;
	n = w == 100 ? core_write_pipe(rq, r, p[0], 100, 0) : -1;
	left = -1;
	ioctl(p[0], FIONREAD, &left);
	CHECK(n == -EBADF && left == 100,
	      "pipe: a read-only descriptor: EBADF, the pipe as it was (%zd, %d)", n, left);
	core_release(rq, r);
	core_forget(rq, e.ino, 1);
	close(p[0]);
	close(p[1]);
}

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

/* ---------- POSIX attributes kept in S3 ---------- */

/* The value S3 holds for key's user metadata name, or "" (static buffer). */
static const char *s3_meta(struct s3 *s3, const char *key, const char *name,
			   uint64_t *version)
{
	static char val[64];
	void *data = NULL;
	size_t len;
	struct obj_meta o = { 0 };
	val[0] = '\0';
	if (s3_fake_object_read(s3, BUCKET, key, &data, &len, &o, version) == 0) {
		const char *v = obj_meta_get(&o, name);
		snprintf(val, sizeof val, "%s", v ? v : "");
	}
	free(data);
	obj_meta_release(&o);
	return val;
}

/* An object (bytes) written by another client, then its event applied. */
static void foreign_bytes(struct gw *gw, struct s3 *s3, const char *key, const char *bytes,
			  const struct obj_kv *meta, size_t n)
{
	struct obj_meta o = { 0 };
	void *data = NULL;
	size_t len;
	if (s3_fake_object_put(s3, BUCKET, key, bytes, strlen(bytes), meta, n, NULL) < 0 ||
	    s3_fake_object_read(s3, BUCKET, key, &data, &len, &o, NULL) < 0 ||
	    (!o.bucket && !(o.bucket = strdup(BUCKET))) || (!o.key && !(o.key = strdup(key)))) {
		printf("# putting %s failed\n", key);
		exit(2);
	}
	o.flags |= OBJ_HAS_META;
	CHECK(index_apply(gw->ix, &o, 1, NULL, 0, NULL, NULL) >= 0, "event of %s applied", key);
	free(data);
	obj_meta_release(&o);
}

static void foreign_object(struct gw *gw, struct s3 *s3, const char *key,
			   const struct obj_kv *meta, size_t n)
{
	foreign_bytes(gw, s3, key, "xyz", meta, n);
}

static int64_t ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

static int64_t st_mtime_ns(const struct stat *st)
{
	return ts_ns(&st->st_mtim);
}

static void posix_cases(struct view *const *views, struct s3 *s3)
{
	struct gw gw;
	gw_open(views, s3, &gw, "fscore-px");
	struct core_req *rq = &gw.rq;
	uint64_t sv = gw.view_ino[0];
	struct core_entry e, e2;
	struct core_open_cache cache;
	struct core_file *f = NULL;
	struct stat st;
	uint64_t v0 = 0, v1 = 0;

	/* create keeps the caller's mode and ids, the upload carries them
	 * with the time in s3fs's names */
	struct core_who who = { S_IFREG | 0640, 1001, 1002 };
	int rc = core_create(rq, sv, "px_a", &who, &e, &f, &cache);
	ssize_t n = rc == 0 ? core_write(rq, f, "abc", 3, 0) : -1;
	int grc = core_getattr(rq, e.ino, &st);
	CHECK(rc == 0 && n == 3 && grc == 0 && (st.st_mode & 07777) == 0640 &&
	      st.st_uid == 1001 && st.st_gid == 1002,
	      "a created file shows the mode and owner asked while open (%o %u %u)",
	      (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)st.st_gid);
	int64_t before = 0;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	before = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	rc = f ? core_flush(rq, f) : -1;
	core_release(rq, f);
	f = NULL;
	int64_t mt = 0;
	posix_time_parse(s3_meta(s3, "s/px_a", "mtime", NULL), &mt);
	CHECK(rc == 0 && strcmp(s3_meta(s3, "s/px_a", "mode", NULL), "33184") == 0 &&
	      strcmp(s3_meta(s3, "s/px_a", "uid", NULL), "1001") == 0 &&
	      strcmp(s3_meta(s3, "s/px_a", "gid", NULL), "1002") == 0 &&
	      mt >= before - 1000000000LL && mt <= before + 5000000000LL,
	      "S3 holds mode 33184 (0100640), uid 1001, gid 1002, mtime of the commit (%s)",
	      s3_meta(s3, "s/px_a", "mtime", NULL));

	/* utimensat, chmod, chown on a file not open: a COPY onto itself */
	s3_meta(s3, "s/px_a", "mtime", &v0);
	struct core_set set = { .what = CORE_SET_MTIME | CORE_SET_ATIME,
				.mtime = { 1500000000, 123456789 },
				.atime = { 1500000001, 0 } };
	rc = core_setattr(rq, e.ino, NULL, &set, &st);
	CHECK(rc == 0 && st_mtime_ns(&st) == 1500000000123456789LL &&
	      st.st_atim.tv_sec == 1500000001 &&
	      strcmp(s3_meta(s3, "s/px_a", "mtime", &v1), "1500000000.123456789") == 0 &&
	      strcmp(s3_meta(s3, "s/px_a", "atime", NULL), "1500000001") == 0 &&
	      v1 == v0 + 1,
	      "utimensat: the mtime shown and in S3 to the nanosecond, one write (%s, v%llu->%llu)",
	      s3_meta(s3, "s/px_a", "mtime", NULL), (unsigned long long)v0,
	      (unsigned long long)v1);
	set = (struct core_set){ .what = CORE_SET_MODE | CORE_SET_UID | CORE_SET_GID,
				 .mode = S_IFREG | 04600, .uid = 2000, .gid = 3000 };
	rc = core_setattr(rq, e.ino, NULL, &set, &st);
	CHECK(rc == 0 && (st.st_mode & 07777) == 04600 && S_ISREG(st.st_mode) &&
	      st.st_uid == 2000 && st.st_gid == 3000 &&
	      strcmp(s3_meta(s3, "s/px_a", "mode", NULL), "35200") == 0 &&
	      strcmp(s3_meta(s3, "s/px_a", "uid", NULL), "2000") == 0 &&
	      st_mtime_ns(&st) == 1500000000123456789LL &&
	      s3_meta(s3, "s/px_a", "ctime", NULL)[0],
	      "chmod 4600, chown 2000:3000: shown, in S3 (mode %s), mtime kept, ctime set",
	      s3_meta(s3, "s/px_a", "mode", NULL));
	rc = core_lookup(rq, sv, "px_a", &e2);
	CHECK(rc == 0 && (e2.attr.st_mode & 07777) == 04600 && e2.attr.st_uid == 2000 &&
	      st_mtime_ns(&e2.attr) == 1500000000123456789LL,
	      "a lookup (the index's membership) shows them too");
	core_forget(rq, e2.ino, 1);

	/* the attribute names are not user.* xattrs */
	char buf[256];
	ssize_t ln = core_listxattr(rq, e.ino, buf, sizeof buf);
	ssize_t gx = core_getxattr(rq, e.ino, "user.mtime", buf, sizeof buf);
	int sx = core_setxattr(rq, e.ino, "user.mode", "1", 1, 0);
	int rx = core_removexattr(rq, e.ino, "user.uid");
	int ux = core_setxattr(rq, e.ino, "user.color", "red", 3, 0);
	ssize_t ln2 = core_listxattr(rq, e.ino, buf, sizeof buf);
	CHECK(ln == 0 && gx == -ENODATA && sx == -EPERM && rx == -EPERM && ux == 0 &&
	      ln2 == (ssize_t)sizeof "user.color" && strcmp(buf, "user.color") == 0 &&
	      strcmp(s3_meta(s3, "s/px_a", "uid", NULL), "2000") == 0,
	      "xattrs: none listed, user.mtime ENODATA, set/remove user.mode EPERM; "
	      "user.color set keeps uid (%zd %zd %d %d %d %zd)", ln, gx, sx, rx, ux, ln2);

	/* open for writing: utimensat rides on the commit's upload, a write
	 * after it makes the time now again */
	rc = core_open(rq, e.ino, O_WRONLY, &f, &cache);
	n = rc == 0 ? core_write(rq, f, "defg", 4, 0) : -1;
	s3_meta(s3, "s/px_a", "mtime", &v0);
	set = (struct core_set){ .what = CORE_SET_MTIME, .mtime = { 1400000000, 0 } };
	int src = core_setattr(rq, e.ino, NULL, &set, &st);
	s3_meta(s3, "s/px_a", "mtime", &v1);
	CHECK(rc == 0 && n == 4 && src == 0 && v1 == v0 && st.st_mtim.tv_sec == 1400000000,
	      "futimens while open for writing: shown, nothing sent yet (v%llu)",
	      (unsigned long long)v1);
	rc = f ? core_flush(rq, f) : -1;
	CHECK(rc == 0 && strcmp(s3_meta(s3, "s/px_a", "mtime", &v1), "1400000000") == 0 &&
	      v1 == v0 + 1 && strcmp(s3_meta(s3, "s/px_a", "mode", NULL), "35200") == 0,
	      "close: one upload carries the time set and keeps the mode (%s, v%llu)",
	      s3_meta(s3, "s/px_a", "mtime", NULL), (unsigned long long)v1);
	src = core_setattr(rq, e.ino, NULL, &set, &st);
	n = f ? core_write(rq, f, "h", 1, 4) : -1;
	rc = f ? core_flush(rq, f) : -1;
	mt = 0;
	posix_time_parse(s3_meta(s3, "s/px_a", "mtime", NULL), &mt);
	CHECK(src == 0 && n == 1 && rc == 0 && mt > 1500000000000000000LL,
	      "a write after futimens: the commit's time is now (%s)",
	      s3_meta(s3, "s/px_a", "mtime", NULL));
	core_release(rq, f);
	f = NULL;

	/* rsync's order: close (the flush publishes), utimensat by name, a
	 * rename, and only then the release the kernel sends late: the
	 * release's commit of the renamed file keeps the time set */
	rc = core_create(rq, sv, "px_tmp", &who, &e2, &f, &cache);
	n = rc == 0 ? core_write(rq, f, "rsync", 5, 0) : -1;
	int frc = f ? core_flush(rq, f) : -1;
	set = (struct core_set){ .what = CORE_SET_MTIME, .mtime = { 1300000000, 42 } };
	src = rc == 0 ? core_setattr(rq, e2.ino, NULL, &set, &st) : rc;
	int rrc = rc == 0 ? core_rename(rq, sv, "px_tmp", sv, "px_final", 0) : rc;
	core_release(rq, f);
	f = NULL;
	CHECK(rc == 0 && n == 5 && frc == 0 && src == 0 && rrc == 0 &&
	      strcmp(s3_meta(s3, "s/px_final", "mtime", NULL), "1300000000.000000042") == 0,
	      "flush, utimensat, rename, then release: S3 keeps the time set (%s)",
	      s3_meta(s3, "s/px_final", "mtime", NULL));
	core_forget(rq, e2.ino, 1);

	/* objects other clients wrote: s3fs's whole seconds and st_mode,
	 * rclone's trimmed float; none at all: Last-Modified and defaults */
	struct obj_kv s3fs[] = { { "mtime", "1600000000" }, { "mode", "33261" },
				 { "uid", "5" }, { "gid", "6" } };
	struct obj_kv rclone[] = { { "mtime", "1600000000.5" }, { "md5chksum", "x" } };
	foreign_object(&gw, s3, "s/px_s3fs", s3fs, 4);
	foreign_object(&gw, s3, "s/px_rclone", rclone, 2);
	foreign_object(&gw, s3, "s/px_none", NULL, 0);
	int r1 = core_lookup(rq, sv, "px_s3fs", &e2);
	CHECK(r1 == 0 && (e2.attr.st_mode & 07777) == 0755 && e2.attr.st_uid == 5 &&
	      e2.attr.st_gid == 6 && st_mtime_ns(&e2.attr) == 1600000000000000000LL,
	      "s3fs's object: 0755, 5:6, its mtime (%o %u:%u %lld)",
	      (unsigned)(e2.attr.st_mode & 07777), (unsigned)e2.attr.st_uid,
	      (unsigned)e2.attr.st_gid, (long long)st_mtime_ns(&e2.attr));
	if (r1 == 0)
		core_forget(rq, e2.ino, 1);
	r1 = core_lookup(rq, sv, "px_rclone", &e2);
	CHECK(r1 == 0 && st_mtime_ns(&e2.attr) == 1600000000500000000LL &&
	      (e2.attr.st_mode & 07777) == 0644 && e2.attr.st_uid == getuid(),
	      "rclone's object: its mtime .5 s, the mount's defaults (%lld)",
	      (long long)st_mtime_ns(&e2.attr));
	if (r1 == 0)
		core_forget(rq, e2.ino, 1);
	r1 = core_lookup(rq, sv, "px_none", &e2);
	struct obj_meta none = { 0 };
	void *data = NULL;
	size_t len;
	s3_fake_object_read(s3, BUCKET, "s/px_none", &data, &len, &none, NULL);
	free(data);
	CHECK(r1 == 0 && st_mtime_ns(&e2.attr) == none.mtime_ns,
	      "no attributes: Last-Modified (%lld, %lld)", (long long)st_mtime_ns(&e2.attr),
	      (long long)none.mtime_ns);
	obj_meta_release(&none);
	if (r1 == 0)
		core_forget(rq, e2.ino, 1);

	/* mknod and symlink make objects as s3fs does: the type in the mode,
	 * a link's target as the content; chmod keeps the type */
	struct core_who fifo = { S_IFIFO | 0644, 0, 0 }, reg = { S_IFREG | 0600, 7, 8 };
	int m1 = core_mknod(rq, sv, "px_fifo", &fifo, 0, &e2);
	CHECK(m1 == 0 && S_ISFIFO(e2.attr.st_mode) && (e2.attr.st_mode & 07777) == 0644 &&
	      strcmp(s3_meta(s3, "s/px_fifo", "mode", NULL), "4516") == 0,
	      "mknod of a FIFO: an empty object with mode 4516 (%d, %s)", m1,
	      s3_meta(s3, "s/px_fifo", "mode", NULL));
	set = (struct core_set){ .what = CORE_SET_MODE, .mode = S_IFIFO | 0600 };
	rc = m1 == 0 ? core_setattr(rq, e2.ino, NULL, &set, &st) : m1;
	CHECK(rc == 0 && S_ISFIFO(st.st_mode) && (st.st_mode & 07777) == 0600 &&
	      strcmp(s3_meta(s3, "s/px_fifo", "mode", NULL), "4480") == 0,
	      "chmod of the FIFO keeps its type (%s)", s3_meta(s3, "s/px_fifo", "mode", NULL));
	if (m1 == 0)
		core_forget(rq, e2.ino, 1);
	int m2 = core_mknod(rq, sv, "px_reg", &reg, 0, &e2);
	CHECK(m2 == 0 && S_ISREG(e2.attr.st_mode) && (e2.attr.st_mode & 07777) == 0600 &&
	      strcmp(s3_meta(s3, "s/px_reg", "uid", NULL), "7") == 0,
	      "mknod of a regular file: an empty object with its mode (%d)", m2);
	if (m2 == 0)
		core_forget(rq, e2.ino, 1);
	struct core_who me = { 0, 42, 43 };
	int m3 = core_symlink(rq, sv, "px_link", "../some/target", &me, &e2);
	char target[64] = "";
	uint64_t h0 = s3_fake_count(s3, S3K_HEAD), g0 = s3_fake_count(s3, S3K_GET);
	int m4 = m3 == 0 ? core_readlink(rq, e2.ino, target, sizeof target) : m3;
	CHECK(s3_fake_count(s3, S3K_HEAD) == h0 && s3_fake_count(s3, S3K_GET) == g0,
	      "readlink of a link made here: no request (%llu HEAD, %llu GET)",
	      (unsigned long long)(s3_fake_count(s3, S3K_HEAD) - h0),
	      (unsigned long long)(s3_fake_count(s3, S3K_GET) - g0));
	size_t tlen = 0;
	char tbuf[64] = "";
	s3_bytes(s3, "s/px_link", tbuf, sizeof tbuf - 1, &tlen);
	CHECK(m3 == 0 && m4 == 0 && S_ISLNK(e2.attr.st_mode) && e2.attr.st_size == 14 &&
	      e2.attr.st_uid == 42 && strcmp(target, "../some/target") == 0 &&
	      tlen == 14 && memcmp(tbuf, "../some/target", 14) == 0 &&
	      strcmp(s3_meta(s3, "s/px_link", "mode", NULL), "41471") == 0,
	      "symlink: an object holding the target, mode 41471; readlink reads it (%d %d %s)",
	      m3, m4, target);
	if (m3 == 0)
		core_forget(rq, e2.ino, 1);

	/* directories: mkdir's mode, chmod of a made one and of one listed
	 * from keys; kept across a restart of the core (the index) */
	struct core_who dw = { S_IFDIR | 0700, 1001, 1002 };
	rc = core_mkdir(rq, sv, "px_d", &dw, &e2);
	CHECK(rc == 0 && S_ISDIR(e2.attr.st_mode) && (e2.attr.st_mode & 07777) == 0700 &&
	      e2.attr.st_uid == 1001, "mkdir keeps its mode and owner (%o)",
	      (unsigned)(e2.attr.st_mode & 07777));
	uint64_t dino = e2.ino;
	set = (struct core_set){ .what = CORE_SET_MODE, .mode = S_IFDIR | 0751 };
	int d1 = core_setattr(rq, dino, NULL, &set, &st);
	foreign_object(&gw, s3, "s/px_keys/f", NULL, 0);
	rc = core_lookup(rq, sv, "px_keys", &e);
	set.mode = S_IFDIR | 0711;
	int d2 = rc == 0 ? core_setattr(rq, e.ino, NULL, &set, &st) : rc;
	CHECK(d1 == 0 && d2 == 0 && (st.st_mode & 07777) == 0711,
	      "chmod of a made directory and of one listed from keys (%d %d %o)", d1, d2,
	      (unsigned)(st.st_mode & 07777));
	core_forget(rq, e.ino, 1);
	core_forget(rq, dino, 1);
	core_req_end(&gw.rq);
	core_free(gw.core);
	struct core_deps deps = { .ix = gw.ix, .s3 = s3, .stage = gw.stage, .st = &gw.st,
				  .views = &gw.slot, .it = gw.it };
	if (core_new(&deps, &gw.core) < 0) {
		printf("# core_new again failed\n");
		exit(2);
	}
	core_req_begin(gw.core, &gw.rq);
	int l1 = core_lookup(rq, sv, "px_d", &e);
	mode_t m_d = e.attr.st_mode & 07777;
	uid_t u_d = e.attr.st_uid;
	if (l1 == 0)
		core_forget(rq, e.ino, 1);
	int l2 = core_lookup(rq, sv, "px_keys", &e);
	CHECK(l1 == 0 && m_d == 0751 && u_d == 1001 && l2 == 0 &&
	      (e.attr.st_mode & 07777) == 0711,
	      "after a restart: px_d 0751 owned by 1001, px_keys 0711 (%o, %o)", (unsigned)m_d,
	      (unsigned)(e.attr.st_mode & 07777));
	if (l2 == 0)
		core_forget(rq, e.ino, 1);
	gw_close(&gw);
}

/* ---------- S3 failures: each error path of the core, injected ---------- */

static void fault_cases(struct view *const *views, struct s3 *s3)
{
	struct s3 *fs3;
	if (s3_fault_new(s3, false, &fs3) < 0) {
		printf("# s3_fault_new failed\n");
		exit(2);
	}
	struct gw gw;
	gw_open(views, fs3, &gw, "fscore-f");
	struct core_req *rq = &gw.rq;
	uint64_t cv = gw.view_ino[1], sv = gw.view_ino[0];
	struct core_entry e;
	struct core_open_cache cache;
	struct core_file *f = NULL, *r = NULL;
	char buf[64];
	size_t len = 0;

	/* commit: a failed upload makes fsync return EIO and keeps the data;
	 * the next fsync uploads it */
	int rc = core_create(rq, cv, "ft_a", NULL, &e, &f, &cache);
	ssize_t n = rc == 0 ? core_write(rq, f, "hello", 5, 0) : -1;
	s3_fault_fail(fs3, S3K_PUT, 1, 1, -EHOSTUNREACH);
	int frc = rc == 0 ? core_fsync(rq, f) : 0;
	CHECK(n == 5 && frc == -EIO && s3_bytes(s3, "c/ft_a", buf, sizeof buf, &len) == -ENOENT,
	      "fsync with the PUT failing: EIO, nothing in S3 (%d)", frc);
	n = f ? core_read(rq, f, buf, sizeof buf, 0) : -1;
	CHECK(n == 5 && memcmp(buf, "hello", 5) == 0, "the staged data is kept (%zd)", n);
	frc = f ? core_fsync(rq, f) : -1;
	CHECK(frc == 0 && s3_bytes(s3, "c/ft_a", buf, sizeof buf, &len) == 0 && len == 5,
	      "the next fsync uploads it (%d)", frc);

	/* a failed close (flush) also answers EIO; the next close uploads */
	n = f ? core_write(rq, f, "HELLO", 5, 0) : -1;
	s3_fault_fail(fs3, S3K_PUT, 1, 1, -EIO);
	frc = f ? core_flush(rq, f) : 0;
	CHECK(frc == -EIO && s3_bytes(s3, "c/ft_a", buf, sizeof buf, &len) == 0 &&
	      memcmp(buf, "hello", 5) == 0, "close with the PUT failing: EIO, S3 keeps the "
	      "old bytes (%d)", frc);
	frc = f ? core_flush(rq, f) : -1;
	CHECK(frc == 0 && s3_bytes(s3, "c/ft_a", buf, sizeof buf, &len) == 0 &&
	      memcmp(buf, "HELLO", 5) == 0, "the next close uploads (%d)", frc);
	core_release(rq, f);
	f = NULL;

	/* a symlink is one PUT: its failure leaves no name behind */
	s3_fault_fail(fs3, S3K_PUT, 1, 1, -EIO);
	rc = core_symlink(rq, cv, "ft_l", "ft_a", NULL, &e);
	int lrc = core_lookup(rq, cv, "ft_l", &e);
	int nl = listed(rq, cv, "ft_l");
	CHECK(rc == -EIO && lrc == -ENOENT && nl == 0,
	      "symlink with the PUT failing: EIO, the name neither found nor listed "
	      "(%d, %d, listed %d)", rc, lrc, nl);
	if (lrc == 0)
		core_forget(rq, e.ino, 1);

	/* open validates with a HEAD: its failure is the open's */
	uint64_t ino = 0;
	rc = core_lookup(rq, cv, "ft_a", &e);
	ino = e.ino;
	s3_fault_fail(fs3, S3K_HEAD, 1, 1, -EHOSTUNREACH);
	int orc = rc == 0 ? core_open(rq, ino, O_RDONLY, &r, &cache) : 0;
	CHECK(orc == -EHOSTUNREACH, "open with the HEAD failing answers its error (%d)", orc);
	if (orc == 0)
		core_release(rq, r);

	/* commit: each read validates; a failed HEAD fails that read only */
	orc = core_open(rq, ino, O_RDONLY, &r, &cache);
	s3_fault_fail(fs3, S3K_HEAD, 1, 1, -EIO);
	n = orc == 0 ? core_read(rq, r, buf, sizeof buf, 0) : 0;
	ssize_t n2 = orc == 0 ? core_read(rq, r, buf, sizeof buf, 0) : 0;
	CHECK(orc == 0 && n == -EIO && n2 == 5, "commit read with the HEAD failing: EIO, "
	      "then the next read works (%zd, %zd)", n, n2);
	if (orc == 0)
		core_release(rq, r);

	/* rename: a failed COPY changes nothing */
	s3_fault_fail(fs3, S3K_COPY, 1, 1, -EIO);
	rc = core_rename(rq, cv, "ft_a", cv, "ft_b", 0);
	int l1 = core_lookup(rq, cv, "ft_a", &e), l2 = core_lookup(rq, cv, "ft_b", &e);
	CHECK(rc == -EIO && l1 == 0 && l2 == -ENOENT &&
	      s3_bytes(s3, "c/ft_b", buf, sizeof buf, &len) == -ENOENT,
	      "rename with the COPY failing: EIO, the old name stays, no new one (%d)", rc);

	/* unlink: a failed DELETE leaves the object and its name */
	s3_fault_fail(fs3, S3K_DELETE, 1, 1, -EIO);
	rc = core_unlink(rq, cv, "ft_a");
	l1 = core_lookup(rq, cv, "ft_a", &e);
	CHECK(rc == -EIO && l1 == 0 && s3_bytes(s3, "c/ft_a", buf, sizeof buf, &len) == 0,
	      "unlink with the DELETE failing: EIO, object and name stay (%d)", rc);

	/* setxattr is a COPY onto itself: its failure leaves the metadata */
	s3_fault_fail(fs3, S3K_COPY, 1, 1, -EIO);
	rc = core_setxattr(rq, ino, "user.color", "red", 3, 0);
	n = core_getxattr(rq, ino, "user.color", buf, sizeof buf);
	CHECK(rc == -EIO && n == -ENODATA, "setxattr with the COPY failing: EIO, no "
	      "xattr (%d, %zd)", rc, n);
	rc = core_setxattr(rq, ino, "user.color", "red", 3, 0);
	n = core_getxattr(rq, ino, "user.color", buf, sizeof buf);
	CHECK(rc == 0 && n == 3 && memcmp(buf, "red", 3) == 0, "then it works (%d, %zd)",
	      rc, n);

	/* open for writing fills the staged copy from S3: a failed GET fails
	 * the open (session view) */
	rc = core_create(rq, sv, "ft_s", NULL, &e, &f, &cache);
	n = rc == 0 ? core_write(rq, f, "abc", 3, 0) : -1;
	frc = rc == 0 ? core_flush(rq, f) : -1;
	core_release(rq, f);
	f = NULL;
	/* a read that needs a GET: its failure fails that read only */
	orc = frc == 0 ? core_open(rq, e.ino, O_RDONLY, &r, &cache) : -1;
	s3_fault_fail(fs3, S3K_GET, 1, 1, -EIO);
	n = orc == 0 ? core_read(rq, r, buf, sizeof buf, 0) : 0;
	n2 = orc == 0 ? core_read(rq, r, buf, sizeof buf, 0) : 0;
	CHECK(orc == 0 && n == -EIO && n2 == 3, "read with the GET failing: EIO, then the "
	      "next read works (%zd, %zd)", n, n2);
	if (orc == 0)
		core_release(rq, r);
	s3_fault_fail(fs3, S3K_GET, 1, 1, -EIO);
	orc = frc == 0 ? core_open(rq, e.ino, O_RDWR, &f, &cache) : 0;
	CHECK(frc == 0 && orc == -EIO, "open for writing with the GET of the fill failing: "
	      "EIO (%d)", orc);
	if (orc == 0)
		core_release(rq, f);
	CHECK(s3_fault_injected(fs3, S3K_PUT) == 3 && s3_fault_injected(fs3, S3K_COPY) == 2 &&
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

/* ---------- view-set reloads: names, not indexes, outlive a set ---------- */

/* Publish a set of views[order[0..n)] (borrowed) in gw's slot, as the
 * gateway's reload does. */
static int reload(struct gw *gw, struct view *const *views, const int *order, size_t n)
{
	struct viewset *vs;
	int rc = viewset_new(n, &vs);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = viewset_add_borrowed(vs, views[order[i]]);
	if (rc == 0)
		rc = viewset_seal(vs);
	if (rc == 0)
		rc = index_set_views(gw->ix, vs, &gw->slot);
	viewset_unpin(vs);
	return rc;
}

/* One request around a call of fn (its first argument the request), as
 * the FUSE adapter makes one. */
#define IN_REQ(c, fn, ...) ({ struct core_req q_; core_req_begin((c), &q_);      \
			      __typeof__(fn(&q_, __VA_ARGS__)) r_ = fn(&q_, __VA_ARGS__); \
			      core_req_end(&q_); r_; })

static void reload_cases(struct view *const *views, struct s3 *s3)
{
	struct gw gw;
	gw_open(views, s3, &gw, "fscore-reload");
	struct core *c = gw.core;
	core_req_end(&gw.rq);                /* gw_open's request: each call below has its own */
	uint64_t croot = gw.view_ino[1];     /* "c", index 1 in the first set */
	struct core_entry e, e2;
	struct core_file *f = NULL;
	struct core_open_cache cache;
	struct stat st;
	int rc = IN_REQ(c, core_create, croot, "rl_f", NULL, &e, &f, &cache);
	ssize_t n = rc == 0 ? IN_REQ(c, core_write, f, "one", 3, 0) : -1;
	if (rc == 0)
		rc = IN_REQ(c, core_flush, f);
	CHECK(rc == 0 && n == 3, "create, write and close c/rl_f (%d, %zd)", rc, n);

	/* An operation that pinned the set before a reload ends with it. */
	struct core_req before;
	core_req_begin(c, &before);
	int only_s[] = { 0 };
	int rrc = reload(&gw, views, only_s, 1);
	int grc = core_getattr(&before, e.ino, &st);
	core_req_end(&before);
	CHECK(rrc == 0 && grc == 0,
	      "a reload that drops view c in the middle of an operation: it still "
	      "sees c (reload %d, getattr %d)", rrc, grc);

	/* The next operations see the new set: c and what is in it are gone. */
	grc = IN_REQ(c, core_getattr, e.ino, &st);
	int lrc = IN_REQ(c, core_lookup, INODE_ROOT, "c", &e2);
	CHECK(grc == -ENOENT && lrc == -ENOENT,
	      "after it, an inode of c and the name c answer ENOENT (%d, %d)", grc, lrc);
	CHECK(IN_REQ(c, listed, INODE_ROOT, "c") == 0 &&
	      IN_REQ(c, listed, INODE_ROOT, "s") == 1, "the root lists s, not c");

	/* c comes back at another index: everything kept its name. */
	int swapped[] = { 1, 0 };
	rrc = reload(&gw, views, swapped, 2);
	grc = IN_REQ(c, core_getattr, e.ino, &st);
	CHECK(rrc == 0 && grc == 0 && S_ISREG(st.st_mode) && st.st_size == 3,
	      "c back as view 0: the inode the kernel holds is c/rl_f again (%d, "
	      "size %lld)", grc, (long long)st.st_size);
	lrc = IN_REQ(c, core_lookup, croot, "rl_f", &e2);
	CHECK(lrc == 0 && e2.ino == e.ino, "its lookup answers the same inode (%d)", lrc);
	n = f ? IN_REQ(c, core_write, f, "two", 3, 0) : -1;
	rc = f ? IN_REQ(c, core_flush, f) : -1;
	char buf[8] = "";
	size_t len = 0;
	int src = s3_bytes(s3, "c/rl_f", buf, sizeof buf, &len);
	CHECK(n == 3 && rc == 0 && src == 0 && len == 3 && memcmp(buf, "two", 3) == 0,
	      "the descriptor opened before both reloads writes and commits to c/rl_f "
	      "(%zd, %d, S3 %d, %zu bytes)", n, rc, src, len);
	lrc = IN_REQ(c, core_lookup, gw.view_ino[0], "rl_f", &e2);
	CHECK(lrc == -ENOENT, "and nothing of it shows in s, now at c's old index (%d)",
	      lrc);
	core_req_begin(c, &gw.rq);           /* gw_close ends one */
	core_release(&gw.rq, f);
	gw_close(&gw);
}

/* ---------- an unlink while a close uploads ---------- */

struct flush_arg {
	struct core *c;
	struct core_file *f;
	int rc;
};

static void *flush_main(void *arg)
{
	struct flush_arg *a = arg;
	a->rc = IN_REQ(a->c, core_flush, a->f);
	return NULL;
}

/* The close's PUT is in flight when the name is unlinked: whatever order
 * the two take, the object and the name do not come back when the PUT
 * lands (the unlink waits for the upload; its DELETE goes after). */
static void unlink_commit_cases(struct view *const *views, struct s3 *s3)
{
	struct s3 *fs3;
	if (s3_fault_new(s3, false, &fs3) < 0)
		exit(2);
	struct gw gw;
	gw_open(views, fs3, &gw, "fscore-uc");
	struct core *c = gw.core;
	core_req_end(&gw.rq);
	uint64_t sv = gw.view_ino[0];
	struct core_entry e;
	struct core_file *f = NULL;
	struct core_open_cache cache;
	int rc = IN_REQ(c, core_create, sv, "uc", NULL, &e, &f, &cache);
	ssize_t n = rc == 0 ? IN_REQ(c, core_write, f, "late", 4, 0) : -1;
	s3_fault_add(fs3, &(struct s3_fault_rule){ .kind = S3K_PUT, .type = S3F_DELAY,
		     .first = 1, .times = 1, .delay_ms = 400 });
	struct flush_arg a = { c, f, -1 };
	pthread_t th;
	pthread_create(&th, NULL, flush_main, &a);
	usleep(150000);                      /* the PUT is in flight */
	int urc = IN_REQ(c, core_unlink, sv, "uc");
	pthread_join(th, NULL);
	s3_fault_clear(fs3);
	char buf[16];
	size_t len = 0;
	int src = s3_bytes(s3, "s/uc", buf, sizeof buf, &len);
	int lrc = IN_REQ(c, core_lookup, sv, "uc", &e);
	CHECK(rc == 0 && n == 4 && a.rc == 0 && urc == 0 && src == -ENOENT && lrc == -ENOENT,
	      "unlink during the close's upload: no object, no name after (close %d, unlink "
	      "%d, S3 %d, lookup %d)", a.rc, urc, src, lrc);
	core_req_begin(c, &gw.rq);           /* gw_close ends one */
	core_release(&gw.rq, f);
	gw_close(&gw);
	s3_free(fs3);
}

/* ---------- a made directory's times follow its entries ---------- */

/* Making or removing an entry moves its made parent's mtime and ctime to
 * now and keeps its atime (pjdfstest open/00, unlink/00, mkdir/00...). */
static void dir_times_cases(struct view *const *views, struct s3 *s3)
{
	struct gw gw;
	gw_open(views, s3, &gw, "fscore-dt");
	struct core_req *rq = &gw.rq;
	uint64_t sv = gw.view_ino[0];
	struct core_entry d, e, e2;
	struct core_who who = { S_IFDIR | 0755, 0, 0 };
	struct stat s0, s1, s2, s3st;
	int rc = core_mkdir(rq, sv, "dt_d", &who, &d);
	int grc = rc == 0 ? core_getattr(rq, d.ino, &s0) : rc;
	struct timespec pause = { 0, 3000000 };
	nanosleep(&pause, NULL);
	struct core_file *f = NULL;
	struct core_open_cache cache;
	who.mode = S_IFREG | 0644;
	int crc = rc == 0 ? core_create(rq, d.ino, "f", &who, &e, &f, &cache) : rc;
	if (f) {
		core_flush(rq, f);
		core_release(rq, f);
	}
	int g1 = core_getattr(rq, d.ino, &s1);
	CHECK(grc == 0 && crc == 0 && g1 == 0 && st_mtime_ns(&s1) > st_mtime_ns(&s0) &&
	      ts_ns(&s1.st_ctim) > ts_ns(&s0.st_ctim) &&
	      ts_ns(&s1.st_atim) == ts_ns(&s0.st_atim),
	      "create in a made directory: its mtime and ctime move, its atime stays (%d %d %d)",
	      grc, crc, g1);
	nanosleep(&pause, NULL);
	rc = core_unlink(rq, d.ino, "f");
	int g2 = core_getattr(rq, d.ino, &s2);
	CHECK(rc == 0 && g2 == 0 && st_mtime_ns(&s2) > st_mtime_ns(&s1) &&
	      ts_ns(&s2.st_ctim) > ts_ns(&s1.st_ctim), "unlink: they move again (%d %d)", rc, g2);
	nanosleep(&pause, NULL);
	who.mode = S_IFDIR | 0700;
	rc = core_mkdir(rq, d.ino, "sub", &who, &e2);
	if (rc == 0)
		core_forget(rq, e2.ino, 1);
	int g3 = core_getattr(rq, d.ino, &s3st);
	CHECK(rc == 0 && g3 == 0 && st_mtime_ns(&s3st) > st_mtime_ns(&s2),
	      "mkdir inside: they move (%d %d)", rc, g3);
	nanosleep(&pause, NULL);
	int rrc = rc == 0 ? core_rename(rq, d.ino, "sub", d.ino, "sub2", 0) : rc;
	g3 = core_getattr(rq, d.ino, &s2);
	CHECK(rrc == 0 && g3 == 0 && st_mtime_ns(&s2) > st_mtime_ns(&s3st),
	      "rename inside: they move (%d %d)", rrc, g3);
	rc = core_rmdir(rq, d.ino, "sub2");
	CHECK(rc == 0, "rmdir inside (%d)", rc);

	/* fstat of a descriptor whose name was unlinked: what it was, no link
	 * (pjdfstest unlink/14; a temporary file's usual life) */
	struct core_file *w = NULL, *r = NULL;
	struct core_entry g;
	who.mode = S_IFREG | 0600;
	rc = core_create(rq, d.ino, "gone", &who, &g, &w, &cache);
	ssize_t n = rc == 0 ? core_write(rq, w, "abc", 3, 0) : -1;
	int frc = rc == 0 ? core_flush(rq, w) : -1;
	int orc = rc == 0 ? core_open(rq, g.ino, O_RDONLY, &r, &cache) : -1;
	int urc = rc == 0 ? core_unlink(rq, d.ino, "gone") : -1;
	struct stat gs;
	int g4 = core_getattr(rq, g.ino, &gs);
	CHECK(n == 3 && frc == 0 && orc == 0 && urc == 0 && g4 == 0 && gs.st_nlink == 0 &&
	      gs.st_size == 3 && (gs.st_mode & 07777) == 0600,
	      "fstat after unlink: size 3, mode 600, nlink 0 (%d, %d, nlink %lu, size %lld)",
	      urc, g4, (unsigned long)gs.st_nlink, (long long)gs.st_size);
	n = w ? core_write(rq, w, "defg", 4, 3) : -1;
	g4 = core_getattr(rq, g.ino, &gs);
	CHECK(n == 4 && g4 == 0 && gs.st_size == 7 && gs.st_nlink == 0,
	      "a writer of the unlinked file: its size as written since (%d, %lld)", g4,
	      (long long)gs.st_size);
	core_release(rq, r);
	core_release(rq, w);
	core_forget(rq, g.ino, 1);

	/* the same with no writer left: the snapshot taken at the unlink */
	w = r = NULL;
	rc = core_create(rq, d.ino, "gone2", &who, &g, &w, &cache);
	n = rc == 0 ? core_write(rq, w, "hello", 5, 0) : -1;
	frc = rc == 0 ? core_flush(rq, w) : -1;
	core_release(rq, w);
	orc = rc == 0 ? core_open(rq, g.ino, O_RDONLY, &r, &cache) : -1;
	urc = rc == 0 ? core_unlink(rq, d.ino, "gone2") : -1;
	g4 = core_getattr(rq, g.ino, &gs);
	CHECK(n == 5 && frc == 0 && orc == 0 && urc == 0 && g4 == 0 && gs.st_nlink == 0 &&
	      gs.st_size == 5 && (gs.st_mode & 07777) == 0600,
	      "fstat of a reader after unlink: size 5, mode 600, nlink 0 (%d, %d, %lld)",
	      urc, g4, (long long)gs.st_size);
	core_release(rq, r);
	core_forget(rq, g.ino, 1);
	core_forget(rq, d.ino, 1);
	core_forget(rq, e.ino, 1);
	gw_close(&gw);
}

/* ---------- one size per kernel inode (issue 8) ---------- */

/* Another client replaces an object a descriptor reads through the page
 * cache with a shorter version: the descriptor's inode is retired (it
 * keeps the old size), the name's next lookup is a new inode. */
static void retire_cases(struct view *const *views, struct s3 *s3)
{
	struct gw gw;
	gw_open(views, s3, &gw, "fscore-retire");
	struct core *c = gw.core;
	struct core_req *rq = &gw.rq;
	uint64_t root = gw.view_ino[0], ino = 0;
	foreign_bytes(&gw, s3, "s/rt_f", "abcdef", NULL, 0);
	struct core_entry e, e2;
	struct core_file *r = NULL, *r2 = NULL;
	struct core_open_cache cache;
	char buf[16] = "";
	int lrc = core_lookup(rq, root, "rt_f", &e);
	int orc = lrc == 0 ? core_open(rq, e.ino, O_RDONLY, &r, &cache) : lrc;
	ssize_t n = orc == 0 ? core_read(rq, r, buf, sizeof buf, 0) : orc;
	CHECK(n == 6 && !cache.direct_io, "v1: 6 bytes through the page cache (%zd, direct %d)",
	      n, cache.direct_io);
	CHECK(!core_retire_changed(c, "s", "rt_f", &ino),
	      "the same version: nothing to retire");

	foreign_bytes(&gw, s3, "s/rt_f", "gh", NULL, 0);
	bool ret = core_retire_changed(c, "s", "rt_f", &ino);
	CHECK(ret && ino == e.ino, "v2 indexed while v1's reader is open: its inode retired");
	struct stat st;
	int grc = core_getattr(rq, e.ino, &st);
	CHECK(grc == 0 && st.st_size == 6, "the retired inode keeps v1's size (%d, %lld)",
	      grc, (long long)st.st_size);
	lrc = core_lookup(rq, root, "rt_f", &e2);
	CHECK(lrc == 0 && e2.ino != e.ino && e2.attr.st_size == 2,
	      "the name's next lookup: a new inode of v2 (%d, %llu vs %llu, size %lld)", lrc,
	      (unsigned long long)e2.ino, (unsigned long long)e.ino,
	      (long long)e2.attr.st_size);
	CHECK(!core_retire_changed(c, "s", "rt_f", &ino),
	      "the new inode has no reader of another version: nothing to retire");
	orc = lrc == 0 ? core_open(rq, e2.ino, O_RDONLY, &r2, &cache) : lrc;
	n = orc == 0 ? core_read(rq, r2, buf, sizeof buf, 0) : orc;
	CHECK(n == 2 && memcmp(buf, "gh", 2) == 0 && !cache.direct_io,
	      "a new descriptor reads v2 through the new inode's page cache (%zd)", n);
	CHECK(!core_retire_changed(c, "s", "rt_f", &ino),
	      "v2 is what its reader holds: nothing to retire");
	int urc = core_unlink(rq, root, "rt_f");
	grc = core_getattr(rq, e.ino, &st);
	CHECK(urc == 0 && grc == 0 && st.st_size == 6 && st.st_nlink == 1,
	      "the name unlinked afterwards: the retired inode still answers v1 (%d, %d, %lld)",
	      urc, grc, (long long)st.st_size);
	core_release(rq, r2);
	core_release(rq, r);
	core_forget(rq, e.ino, 1);
	core_forget(rq, e2.ino, 1);
	gw_close(&gw);
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
	pipe_cases(&gw);
	gw_close(&gw);
	posix_cases(views, s3);
	fault_cases(views, s3);
	reload_cases(views, s3);
	unlink_commit_cases(views, s3);
	retire_cases(views, s3);
	dir_times_cases(views, s3);
	for (int v = 0; v < 2; v++)
		view_free(views[v]);
	s3_free(s3);
	return unit_exit();
}
