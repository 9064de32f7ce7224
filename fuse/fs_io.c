/* fs_io.c — open, read, write and the commit points of the mount, the
 * open-file table, and the generated files of .facetfs/.
 *
 * Visibility (DESIGN.md "Visibility policies"):
 *  - a descriptor opened for writing works on the inode's staged copy
 *    (sync/stage.h); close (flush) uploads it whole and returns only once S3
 *    has it (EIO and the data kept otherwise); under `commit` fsync does too.
 *    The index is updated at once so this mount sees its own change.
 *  - `session`: open() validates the version with one HEAD; the descriptor
 *    reads that version (If-Match on every GET: -ESTALE once it is gone
 *    from S3 and not held here). The kernel page cache is kept across opens
 *    while the ETag stays the same; a descriptor opened on a new version
 *    while another descriptor of the inode reads an older one gets direct
 *    I/O, so the page cache never mixes two versions.
 *  - `commit`: descriptors use direct I/O and every read validates the
 *    version with a HEAD first, so a descriptor opened before another
 *    client's commit reads the new bytes.
 *  - any descriptor of an inode that has a staged copy here reads the staged
 *    copy (read-your-writes inside the mount).
 */
#include "fuse/fs_int.h"

#include "common/log.h"
#include "common/stats.h"
#include "sync/reader.h"
#include "common/s3.h"
#include "sync/stage.h"
#include "views/filter.h"
#include "views/index.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------- the open-file table ---------- */

struct ofile *fs_ofile_find(struct fs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->ofile_lock);
	struct ofile *of = fs->ofiles;
	while (of && of->ino != ino)
		of = of->next;
	if (of)
		of->refs++;
	pthread_mutex_unlock(&fs->ofile_lock);
	return of;
}

struct ofile *fs_ofile_find_path(struct fs *fs, size_t view, const char *path)
{
	pthread_mutex_lock(&fs->ofile_lock);
	struct ofile *of = fs->ofiles;
	while (of && (!fs_in_view(of->vname, view) || strcmp(of->path, path) != 0))
		of = of->next;
	if (of)
		of->refs++;
	pthread_mutex_unlock(&fs->ofile_lock);
	return of;
}

static void ofile_free(struct ofile *of)
{
	if (of->sf)
		stage_file_release(of->sf);
	obj_meta_release(&of->meta);
	free(of->vname);
	free(of->path);
	free(of->bucket);
	free(of->key);
	free(of);
}

void fs_ofile_put(struct fs *fs, struct ofile *of)
{
	if (!of)
		return;
	pthread_mutex_lock(&fs->ofile_lock);
	bool last = --of->refs == 0;
	if (last) {
		struct ofile **pp = &fs->ofiles;
		while (*pp && *pp != of)
			pp = &(*pp)->next;
		if (*pp)
			*pp = of->next;
	}
	pthread_mutex_unlock(&fs->ofile_lock);
	if (last)
		ofile_free(of);
}

/* Find the inode's staged copy or make one: empty when truncating or
 * creating, otherwise filled with the object's current bytes. */
static int ofile_get(struct fs *fs, uint64_t ino, size_t view, const char *path,
		     const char *bucket, const char *key, bool trunc, bool create,
		     struct ofile **out)
{
	struct ofile *of = fs_ofile_find(fs, ino);
	if (of) {
		int rc = trunc ? stage_file_truncate(of->sf, 0) : 0;
		if (rc < 0) {
			fs_ofile_put(fs, of);
			return rc;
		}
		*out = of;
		return 0;
	}
	of = calloc(1, sizeof *of);
	if (!of || !(of->path = strdup(path)) || !(of->bucket = strdup(bucket)) ||
	    !(of->key = strdup(key)) ||
	    !(of->vname = strdup(view_name(fs_req_view(view))))) {
		if (of)
			ofile_free(of);
		return -ENOMEM;
	}
	of->ino = ino;
	of->refs = 1;

	/* The metadata the upload carries: the view's on_create for a new
	 * object, the current object's otherwise. */
	int rc = 0;
	struct obj_meta cur = { 0 };
	bool exists = false;
	if (!create) {
		rc = s3_head(fs->d.s3, bucket, key, &cur);
		exists = rc == 0;
		if (rc == -ENOENT)
			rc = 0;
	}
	if (rc == 0 && exists) {
		of->meta = cur;
		memset(&cur, 0, sizeof cur);
	} else if (rc == 0) {
		size_t n;
		const struct obj_kv *kv = view_on_create(fs_req_view(view), &n);
		for (size_t i = 0; rc == 0 && i < n; i++)
			rc = obj_kv_add(&of->meta.meta, &of->meta.n_meta, kv[i].name,
					kv[i].value);
		of->meta.flags |= OBJ_HAS_META;
	}
	if (rc == 0)
		rc = stage_file_new(fs->d.stage, bucket, key, of->meta.meta,
				    of->meta.n_meta, of->meta.content_type, &of->sf);
	if (rc == 0 && exists && !trunc && of->meta.size > 0) {
		rc = stage_file_fill(of->sf, bucket, key, of->meta.size,
				     of->meta.etag);
	}
	obj_meta_release(&cur);
	if (rc < 0) {
		ofile_free(of);
		return rc;
	}

	/* Another descriptor may have made one meanwhile: use the first. */
	pthread_mutex_lock(&fs->ofile_lock);
	struct ofile *other = fs->ofiles;
	while (other && other->ino != ino)
		other = other->next;
	if (other) {
		other->refs++;
	} else {
		of->next = fs->ofiles;
		fs->ofiles = of;
	}
	pthread_mutex_unlock(&fs->ofile_lock);
	if (other) {
		ofile_free(of);
		of = other;
		if (trunc && (rc = stage_file_truncate(of->sf, 0)) < 0) {
			fs_ofile_put(fs, of);
			return rc;
		}
	}
	*out = of;
	return 0;
}

/* Commit point: upload the staged copy if it changed, then show the new
 * version in the index at once. */
int fs_ofile_commit(struct fs *fs, struct ofile *of)
{
	if (of->unlinked)
		return 0;    /* unlinked while open: nothing to publish */
	bool dirty = stage_file_dirty(of->sf);
	char etag[72] = "";
	int rc = stage_file_commit(of->sf, etag);
	if (rc < 0) {
		log_error("commit of %s/%s failed: %s (the data stays staged)",
			  of->bucket, of->key, strerror(-rc));
		return rc == -EFBIG ? -EFBIG : -EIO;
	}
	if (!dirty)
		return 0;
	struct obj_meta o = { 0 };
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	o.bucket = of->bucket;
	o.key = of->key;
	o.size = stage_file_size(of->sf);
	o.mtime_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	snprintf(o.etag, sizeof o.etag, "%s", etag);
	o.meta = of->meta.meta;
	o.n_meta = of->meta.n_meta;
	o.content_type = of->meta.content_type;
	o.flags = OBJ_HAS_META | (o.content_type ? OBJ_HAS_CTYPE : 0);
	rc = fs_index_local(fs, &o);
	if (rc < 0)   /* S3 has it; the event will bring the index up to date */
		log_warn("index update after the upload of %s/%s: %s", of->bucket,
			 of->key, strerror(-rc));
	/* The page cache holds what was just written: keep it. */
	inode_set_etag(fs->it, of->ino, etag);
	return 0;
}

/* ---------- descriptors ---------- */

static void fh_free(struct fs *fs, struct fh *h)
{
	if (!h)
		return;
	if (h->cached)
		inode_close_read(fs->it, h->ino, false);
	reader_close(h->rd);
	if (h->of)
		fs_ofile_put(fs, h->of);
	free(h->bucket);
	free(h->key);
	free(h->vname);
	free(h->text);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

static int open_meta(struct fs *fs, fuse_ino_t ino, struct fuse_file_info *fi,
		     struct fh *h)
{
	int acc = fi->flags & O_ACCMODE;
	if (ino == INODE_META_CONTROL) {
		h->kind = FH_CONTROL;
	} else {
		if (acc != O_RDONLY)
			return -EACCES;
		h->kind = FH_TEXT;
		h->text = ino == INODE_META_STATS ? fs->d.stats_json(fs->d.ctx)
						  : fs->d.views_json(fs->d.ctx);
		if (!h->text)
			return -ENOMEM;
		h->text_len = strlen(h->text);
	}
	fi->direct_io = 1;       /* generated: size unknown until read */
	return 0;
}

static bool view_commit_policy(struct fs *fs, size_t view)
{
	(void)fs;
	const struct view *v = fs_req_view(view);
	return v && strcmp(view_visibility(v), "commit") == 0;
}

/* The descriptor's view index in the request's set (found by name: the
 * set may have changed since open). */
static size_t fh_view(struct fs *fs, struct fh *h)
{
	return h->vname ? fs_view_index(fs, h->vname) : INODE_NO_VIEW;
}

/* A read-only descriptor: validate the version once (HEAD) and read it. */
static int open_reader(struct fs *fs, fuse_ino_t ino, struct fuse_file_info *fi,
		       struct fh *h)
{
	struct obj_meta o = { 0 };
	int rc = s3_head(fs->d.s3, h->bucket, h->key, &o);
	if (rc == -ENOENT) {
		/* Not in S3 (yet): a file created here and still open. */
		struct ofile *of = fs_ofile_find(fs, ino);
		if (!of)
			return -ENOENT;
		fs_ofile_put(fs, of);
		rc = 0;
	}
	if (rc < 0)
		return rc;
	snprintf(h->etag, sizeof h->etag, "%s", o.etag);
	h->size = o.size;
	rc = reader_open(fs->d.s3, fs->d.st, h->bucket, h->key, o.etag, o.size, &h->rd);
	obj_meta_release(&o);
	if (rc < 0)
		return rc;
	if (view_commit_policy(fs, fh_view(fs, h))) {
		fi->direct_io = 1;   /* every read validates; no page cache */
	} else {
		/* Never two versions in the inode's page cache: a new version
		 * while older descriptors read the old one from it gets direct
		 * I/O (inode.h). */
		bool direct, keep;
		inode_open_read(fs->it, ino, h->etag, &direct, &keep);
		fi->direct_io = direct;
		fi->keep_cache = keep;
		h->cached = !direct;
		h->ino = ino;
	}
	return 0;
}

static int open_object(struct fs *fs, fuse_ino_t ino, struct fuse_file_info *fi,
		       struct fh *h)
{
	struct inode_info info;
	int rc = inode_get(fs->it, ino, &info);
	if (rc < 0)
		return rc;
	char bucket[256], key[4096];
	bool writing = (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC);
	h->kind = FH_OBJECT;
	h->vname = strdup(view_name(fs_req_view(info.view)));
	if (!h->vname)
		rc = -ENOMEM;
	else if (info.is_dir)
		rc = -EISDIR;
	else if (writing && !view_writable(fs_req_view(info.view)))
		rc = -EROFS;
	else
		rc = fs_path_object(fs, info.view, info.path, bucket, sizeof bucket,
				    key, sizeof key);
	if (rc == 0 && (!(h->bucket = strdup(bucket)) || !(h->key = strdup(key))))
		rc = -ENOMEM;
	if (rc == 0 && writing) {
		rc = ofile_get(fs, ino, info.view, info.path, bucket, key,
			       fi->flags & O_TRUNC, false, &h->of);
		h->writable = rc == 0;
		fi->keep_cache = 1;  /* our own writes keep the page cache right */
	} else if (rc == 0) {
		rc = open_reader(fs, ino, fi, h);
	}
	free(info.path);
	return rc;
}

static struct fh *fh_new(void)
{
	struct fh *h = calloc(1, sizeof *h);
	if (h)
		pthread_mutex_init(&h->lock, NULL);
	return h;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	stats_inc(fs->d.st, fuse_open);
	struct fh *h = fh_new();
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int rc;
	if (ino == INODE_ROOT || ino == INODE_META_DIR)
		rc = -EISDIR;
	else if (ino < INODE_FIRST_DYNAMIC)
		rc = open_meta(fs, ino, fi, h);
	else
		rc = open_object(fs, ino, fi, h);
	if (rc < 0) {
		fh_free(fs, h);
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uintptr_t)h;
	if (fuse_reply_open(req, fi) == -ENOENT)
		fh_free(fs, h);      /* the open was interrupted */
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	(void)mode;
	struct fs *fs = fs_of(req);
	size_t view;
	char path[PATH_MAX], bucket[256], key[4096];
	struct fh *h = NULL;
	int rc = fs_child(fs, parent, name, &view, path, sizeof path);
	if (rc == 0 && !view_writable(fs_req_view(view)))
		rc = -EROFS;
	if (rc == 0)
		rc = fs_path_object(fs, view, path, bucket, sizeof bucket, key, sizeof key);
	if (rc == 0 && !view_key_can_match(fs_req_view(view), key))
		rc = -EINVAL;        /* the object could never be in this view */
	if (rc == 0 && !(h = fh_new()))
		rc = -ENOMEM;
	if (rc == 0 && (!(h->bucket = strdup(bucket)) || !(h->key = strdup(key))))
		rc = -ENOMEM;
	struct fuse_entry_param e;
	memset(&e, 0, sizeof e);
	if (rc == 0) {
		const char *vname = view_name(fs_req_view(view));
		e.ino = inode_ref(fs->it, vname, path, false);
		rc = e.ino ? 0 : -ENOMEM;
	}
	if (rc == 0) {
		h->kind = FH_OBJECT;
		h->vname = strdup(view_name(fs_req_view(view)));
		rc = ofile_get(fs, e.ino, view, path, bucket, key, true, true, &h->of);
		if (rc < 0)
			inode_unref(fs->it, e.ino, 1);
	}
	if (rc < 0) {
		if (rc == -EINVAL)
			log_info("create %s in view %s refused: key %s cannot match the view",
				 name, fs_req_view(view) ? view_name(fs_req_view(view)) : "?",
				 key);
		fh_free(fs, h);
		fuse_reply_err(req, -rc);
		return;
	}
	h->writable = true;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	fs_attr_file(fs, e.ino, 0, (int64_t)now.tv_sec * 1000000000 + now.tv_nsec,
		     fs_file_perm(fs, view), &e.attr);
	e.attr_timeout = FS_TIMEOUT;
	e.entry_timeout = FS_TIMEOUT;
	fi->fh = (uintptr_t)h;
	fi->keep_cache = 1;
	if (fuse_reply_create(req, &e, fi) == -ENOENT)
		fh_free(fs, h);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	fh_free(fs_of(req), (struct fh *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct fs *fs = fs_of(req);
	struct fh *h = (struct fh *)(uintptr_t)fi->fh;
	int rc = h->writable ? fs_ofile_commit(fs, h->of) : 0;
	fuse_reply_err(req, -rc);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	struct fs *fs = fs_of(req);
	struct fh *h = (struct fh *)(uintptr_t)fi->fh;
	int rc = 0;
	/* Under `session` fsync is not a visibility point. */
	if (h->writable && view_commit_policy(fs, fh_view(fs, h)))
		rc = fs_ofile_commit(fs, h->of);
	fuse_reply_err(req, -rc);
}

static void reply_text(fuse_req_t req, const char *text, size_t len, size_t size,
		       off_t off)
{
	if (!text || off < 0 || (size_t)off >= len)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_buf(req, text + off, len - (size_t)off < size
							? len - (size_t)off : size);
}

/* `commit`: make sure the descriptor reads the version S3 has now. */
static int revalidate(struct fs *fs, struct fh *h)
{
	struct obj_meta o = { 0 };
	int rc = s3_head(fs->d.s3, h->bucket, h->key, &o);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&h->lock);
	if (strcmp(o.etag, h->etag) != 0) {
		struct reader *nr;
		rc = reader_open(fs->d.s3, fs->d.st, h->bucket, h->key, o.etag, o.size, &nr);
		if (rc == 0) {
			reader_close(h->rd);
			h->rd = nr;
			snprintf(h->etag, sizeof h->etag, "%s", o.etag);
			h->size = o.size;
		}
	}
	pthread_mutex_unlock(&h->lock);
	obj_meta_release(&o);
	return rc;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fh *h = (struct fh *)(uintptr_t)fi->fh;
	stats_inc(fs->d.st, fuse_read);
	if (h->kind != FH_OBJECT) {
		pthread_mutex_lock(&h->lock);
		reply_text(req, h->text, h->text_len, size, off);
		pthread_mutex_unlock(&h->lock);
		return;
	}
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ssize_t n;
	/* A writable descriptor holds its staged copy; any other descriptor
	 * of an inode staged here reads it too (our own writes). */
	struct ofile *of = h->of ? NULL : fs_ofile_find(fs, ino);
	if (h->of || of) {
		n = stage_file_pread(h->of ? h->of->sf : of->sf, buf, size, (uint64_t)off);
		fs_ofile_put(fs, of);
	} else {
		int rc = view_commit_policy(fs, fh_view(fs, h)) ? revalidate(fs, h) : 0;
		if (rc < 0) {
			n = rc;
		} else {
			/* reader_read may race with a revalidation swapping the
			 * reader: hold the descriptor lock only for commit views. */
			bool commit = view_commit_policy(fs, fh_view(fs, h));
			if (commit)
				pthread_mutex_lock(&h->lock);
			n = reader_read(h->rd, buf, size, (uint64_t)off);
			if (commit)
				pthread_mutex_unlock(&h->lock);
		}
	}
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static void control_write(fuse_req_t req, struct fs *fs, struct fh *h,
			  const char *buf, size_t size)
{
	char *cmd = strndup(buf, size);
	if (!cmd) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	cmd[strcspn(cmd, "\r\n")] = '\0';
	char *answer = fs->d.control ? fs->d.control(fs->d.ctx, cmd) : NULL;
	free(cmd);
	if (!answer)
		answer = strdup("error: no answer\n");
	pthread_mutex_lock(&h->lock);
	free(h->text);
	h->text = answer;
	h->text_len = answer ? strlen(answer) : 0;
	pthread_mutex_unlock(&h->lock);
	fuse_reply_write(req, size);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
		     off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	struct fs *fs = fs_of(req);
	struct fh *h = (struct fh *)(uintptr_t)fi->fh;
	if (h->kind == FH_CONTROL) {
		control_write(req, fs, h, buf, size);
		return;
	}
	if (!h->writable) {
		fuse_reply_err(req, EBADF);
		return;
	}
	ssize_t n = stage_file_pwrite(h->of->sf, buf, size, (uint64_t)off);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

/* truncate(2)/ftruncate(2) and the attribute changes that make sense here;
 * owner, mode and times are kept as S3 has them (answered, not stored). */
static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	int rc = 0;
	if (to_set & FUSE_SET_ATTR_SIZE) {
		struct fh *h = fi ? (struct fh *)(uintptr_t)fi->fh : NULL;
		struct ofile *of = h && h->writable ? h->of : NULL;
		bool own = false;
		struct inode_info info = { 0 };
		if (!of) {
			char bucket[256], key[4096];
			rc = ino < INODE_FIRST_DYNAMIC ? -EACCES : inode_get(fs->it, ino, &info);
			if (rc == 0 && info.is_dir)
				rc = -EISDIR;
			else if (rc == 0 && !view_writable(fs_req_view(info.view)))
				rc = -EROFS;
			if (rc == 0)
				rc = fs_path_object(fs, info.view, info.path, bucket,
						    sizeof bucket, key, sizeof key);
			if (rc == 0)
				rc = ofile_get(fs, ino, info.view, info.path, bucket, key,
					       attr->st_size == 0, false, &of);
			own = rc == 0;
		}
		if (rc == 0)
			rc = stage_file_truncate(of->sf, (uint64_t)attr->st_size);
		/* truncate(2) on a path is its own commit point. */
		if (rc == 0 && own)
			rc = fs_ofile_commit(fs, of);
		if (own)
			fs_ofile_put(fs, of);
		free(info.path);
	}
	struct stat st;
	if (rc == 0)
		rc = fs_attr_of(fs, ino, &st);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, ino < INODE_FIRST_DYNAMIC ? 0 : FS_TIMEOUT);
}

/* Does a mountinfo path field (octal escapes: \040 for a space) name path? */
static bool mountinfo_path_is(const char *field, const char *path)
{
	for (; *field && *path; path++) {
		unsigned c = (unsigned char)*field;
		if (field[0] == '\\' && field[1] >= '0' && field[1] <= '3' &&
		    field[2] >= '0' && field[2] <= '7' && field[3] >= '0' && field[3] <= '7') {
			c = (unsigned)((field[1] - '0') * 64 + (field[2] - '0') * 8 + (field[3] - '0'));
			field += 4;
		} else {
			field++;
		}
		if (c != (unsigned char)*path)
			return false;
	}
	return !*field && !*path;
}

void fs_set_readahead(const char *abs_mountpoint, unsigned kib)
{
	/* The kernel caps a FUSE mount's read-ahead at its backing device's
	 * (128 KiB by default), whatever max_readahead the mount asks for;
	 * the per-device knob raises it: sequential reads then arrive as
	 * 1 MiB requests instead of 128 KiB ones. Best effort (root only).
	 * The device comes from /proc/self/mountinfo: a stat of the mount
	 * here, before the session loop runs, would wait for ourselves. */
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096], dev[32] = "";
	while (f && fgets(line, sizeof line, f)) {
		char mdev[32], mpath[PATH_MAX];
		if (sscanf(line, "%*s %*s %31s %*s %4095s", mdev, mpath) == 2 &&
		    mountinfo_path_is(mpath, abs_mountpoint))
			snprintf(dev, sizeof dev, "%s", mdev);   /* the last (top) one */
	}
	if (f)
		fclose(f);
	char path[96], val[16];
	snprintf(path, sizeof path, "/sys/class/bdi/%s/read_ahead_kb", dev);
	int fd = dev[0] ? open(path, O_WRONLY | O_CLOEXEC) : -1;
	int n = snprintf(val, sizeof val, "%u", kib);
	if (fd < 0 || write(fd, val, (size_t)n) != n)
		log_debug("%s: read-ahead stays at the default: %s", dev[0] ? path : abs_mountpoint,
			  dev[0] ? strerror(errno) : "not in /proc/self/mountinfo");
	if (fd >= 0)
		close(fd);
}

void fs_io_init_ops(struct fuse_lowlevel_ops *ops)
{
	ops->open = op_open;
	ops->create = op_create;
	ops->read = op_read;
	ops->write = op_write;
	ops->flush = op_flush;
	ops->fsync = op_fsync;
	ops->release = op_release;
	ops->setattr = op_setattr;
}
