/* fs_ns.c — changes to the namespace through the mount (unlink, rename,
 * mkdir, rmdir) and user metadata as xattrs (get, list, set, remove).
 *
 * Every change is made in S3 first and then applied to the index at once,
 * so this mount sees it before the event arrives; other mounts follow the
 * event. Read-only views answer EROFS.
 *
 * What is not atomic (S3 has no rename): rename is a server-side COPY then
 * a DELETE of the source; a crash between the two leaves both names.
 * Renaming a directory that holds objects is refused with EXDEV, so mv(1)
 * falls back to copying file by file. Directories made with mkdir are in
 * fs->mkdirs and stored in the index (S3 has no directories: index_dir_add),
 * so an empty one outlives a restart; rmdir and rename update both.
 * setxattr/removexattr of user.* is a COPY of the object onto itself with
 * the new metadata (x-amz-metadata-directive: REPLACE).
 */
#include "fuse/fs_int.h"

#include "common/log.h"
#include "common/stats.h"
#include "common/s3.h"
#include "sync/stage.h"
#include "views/filter.h"
#include "views/index.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>

static int64_t now_ns(void)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* ---------- directories made here ---------- */

bool fs_mkdir_exists(struct fs *fs, size_t view, const char *path)
{
	pthread_mutex_lock(&fs->ofile_lock);
	struct mkdir_ent *m = fs->mkdirs;
	while (m && (!fs_in_view(m->vname, view) || strcmp(m->path, path) != 0))
		m = m->next;
	pthread_mutex_unlock(&fs->ofile_lock);
	return m != NULL;
}

/* A made directory into fs->mkdirs (by view name: it shows while a view
 * of that name exists). */
static int mkdir_remember(struct fs *fs, const char *vname, const char *path)
{
	struct mkdir_ent *m = calloc(1, sizeof *m);
	if (!m || !(m->path = strdup(path)) || !(m->vname = strdup(vname))) {
		if (m)
			free(m->path);
		free(m);
		return -ENOMEM;
	}
	pthread_mutex_lock(&fs->ofile_lock);
	m->next = fs->mkdirs;
	fs->mkdirs = m;
	pthread_mutex_unlock(&fs->ofile_lock);
	return 0;
}

static int mkdir_loaded(void *ctx, const char *vname, const char *path)
{
	return mkdir_remember(ctx, vname, path);
}

int fs_mkdirs_load(struct fs *fs)
{
	return index_dirs_each(fs->d.ix, mkdir_loaded, fs);
}

static int first_child(void *ctx, const char *name, const struct index_attr *a)
{
	(void)name;
	(void)a;
	*(bool *)ctx = true;
	return 1;
}

/* Does the directory hold anything (in the index or made here)? */
static bool dir_has_children(struct fs *fs, size_t view, const char *path)
{
	bool any = false;
	index_readdir(fs->d.ix, fs_req_view(view), path, NULL, first_child, &any);
	if (any)
		return true;
	size_t plen = strlen(path);
	pthread_mutex_lock(&fs->ofile_lock);
	for (struct mkdir_ent *m = fs->mkdirs; m && !any; m = m->next)
		any = fs_in_view(m->vname, view) && strncmp(m->path, path, plen) == 0 &&
		      m->path[plen] == '/';
	for (struct ofile *o = fs->ofiles; o && !any; o = o->next)
		any = fs_in_view(o->vname, view) && strncmp(o->path, path, plen) == 0 &&
		      o->path[plen] == '/';
	pthread_mutex_unlock(&fs->ofile_lock);
	return any;
}

static bool name_exists(struct fs *fs, size_t view, const char *path, bool *is_dir)
{
	struct index_attr a;
	*is_dir = false;
	if (index_lookup(fs->d.ix, fs_req_view(view), path, &a) == 0) {
		*is_dir = a.is_dir;
		return true;
	}
	if (fs_mkdir_exists(fs, view, path)) {
		*is_dir = true;
		return true;
	}
	struct ofile *of = fs_ofile_find_path(fs, view, path);
	fs_ofile_put(fs, of);
	return of != NULL;
}

static int writable_child(struct fs *fs, fuse_ino_t parent, const char *name,
			  size_t *view, char *path, size_t pathlen)
{
	int rc = fs_child(fs, parent, name, view, path, pathlen);
	if (rc == 0 && !view_writable(fs_req_view(*view)))
		rc = -EROFS;
	return rc;
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	(void)mode;
	struct fs *fs = fs_of(req);
	size_t view;
	char path[PATH_MAX];
	bool is_dir;
	int rc = writable_child(fs, parent, name, &view, path, sizeof path);
	if (rc == 0 && name_exists(fs, view, path, &is_dir))
		rc = -EEXIST;
	const char *vname = rc == 0 ? view_name(fs_req_view(view)) : NULL;
	if (rc == 0 && (rc = index_dir_add(fs->d.ix, vname, path)) == 0 &&
	    (rc = mkdir_remember(fs, vname, path)) < 0)
		index_dir_remove(fs->d.ix, vname, path);
	struct fuse_entry_param e;
	memset(&e, 0, sizeof e);
	if (rc == 0) {
		e.ino = inode_ref(fs->it, view_name(fs_req_view(view)), path, true);
		rc = e.ino ? fs_attr_of(fs, e.ino, &e.attr) : -ENOMEM;
	}
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	e.attr_timeout = FS_TIMEOUT;
	e.entry_timeout = FS_TIMEOUT;
	fuse_reply_entry(req, &e);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	size_t view;
	char path[PATH_MAX];
	bool is_dir;
	int rc = writable_child(fs, parent, name, &view, path, sizeof path);
	if (rc == 0 && !name_exists(fs, view, path, &is_dir))
		rc = -ENOENT;
	else if (rc == 0 && !is_dir)
		rc = -ENOTDIR;
	else if (rc == 0 && dir_has_children(fs, view, path))
		rc = -ENOTEMPTY;
	if (rc == 0 && fs_mkdir_exists(fs, view, path))
		rc = index_dir_remove(fs->d.ix, view_name(fs_req_view(view)), path);
	if (rc == 0) {
		pthread_mutex_lock(&fs->ofile_lock);
		for (struct mkdir_ent **pp = &fs->mkdirs; *pp; pp = &(*pp)->next)
			if (fs_in_view((*pp)->vname, view) && strcmp((*pp)->path, path) == 0) {
				struct mkdir_ent *m = *pp;
				*pp = m->next;
				free(m->path);
				free(m->vname);
				free(m);
				break;
			}
		pthread_mutex_unlock(&fs->ofile_lock);
	}
	fuse_reply_err(req, -rc);
}

/* ---------- unlink, rename ---------- */

static int delete_object(struct fs *fs, const char *bucket, const char *key)
{
	int rc = s3_delete(fs->d.s3, bucket, key);
	if (rc < 0)
		return rc;
	struct obj_meta o = { 0 };
	o.bucket = (char *)bucket;
	o.key = (char *)key;
	o.mtime_ns = now_ns();
	o.flags = OBJ_DELETED;
	fs_index_local(fs, &o);
	return 0;
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	size_t view;
	char path[PATH_MAX], bucket[256], key[4096];
	bool is_dir;
	int rc = writable_child(fs, parent, name, &view, path, sizeof path);
	if (rc == 0 && !name_exists(fs, view, path, &is_dir))
		rc = -ENOENT;
	else if (rc == 0 && is_dir)
		rc = -EISDIR;
	if (rc == 0)
		rc = fs_path_object(fs, view, path, bucket, sizeof bucket, key, sizeof key);
	if (rc == 0) {
		/* Open descriptors keep their data but never publish it again. */
		struct ofile *of = fs_ofile_find_path(fs, view, path);
		if (of) {
			of->unlinked = true;
			fs_ofile_put(fs, of);
		}
		rc = delete_object(fs, bucket, key);
	}
	fuse_reply_err(req, -rc);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct fs *fs = fs_of(req);
	size_t view, nview;
	char path[PATH_MAX], npath[PATH_MAX], bucket[256], nbucket[256];
	char key[4096], nkey[4096];
	bool is_dir, n_is_dir;
	int rc = writable_child(fs, parent, name, &view, path, sizeof path);
	if (rc == 0)
		rc = writable_child(fs, newparent, newname, &nview, npath, sizeof npath);
	if (rc == 0 && (flags & ~RENAME_NOREPLACE))
		rc = -EINVAL;                /* RENAME_EXCHANGE, WHITEOUT */
	if (rc == 0 && nview != view)
		rc = -EXDEV;
	if (rc == 0 && !name_exists(fs, view, path, &is_dir))
		rc = -ENOENT;
	bool dst_exists = rc == 0 && name_exists(fs, nview, npath, &n_is_dir);
	if (rc == 0 && dst_exists && (flags & RENAME_NOREPLACE))
		rc = -EEXIST;
	if (rc == 0 && is_dir) {
		/* Only an empty directory made here can move (in memory). */
		if (dir_has_children(fs, view, path) || !fs_mkdir_exists(fs, view, path))
			rc = -EXDEV;
		else if (dst_exists)
			rc = n_is_dir && !dir_has_children(fs, nview, npath) ? 0 : -ENOTEMPTY;
		const char *vname = view_name(fs_req_view(view));
		if (rc == 0 && (rc = index_dir_add(fs->d.ix, vname, npath)) == 0)
			index_dir_remove(fs->d.ix, vname, path);
		if (rc == 0) {
			pthread_mutex_lock(&fs->ofile_lock);
			for (struct mkdir_ent *m = fs->mkdirs; m; m = m->next)
				if (fs_in_view(m->vname, view) && strcmp(m->path, path) == 0) {
					char *p = strdup(npath);
					if (p) {
						free(m->path);
						m->path = p;
					}
				}
			pthread_mutex_unlock(&fs->ofile_lock);
		}
		goto out;
	}
	if (rc == 0 && dst_exists && n_is_dir)
		rc = -EISDIR;
	if (rc == 0)
		rc = fs_path_object(fs, view, path, bucket, sizeof bucket, key, sizeof key);
	if (rc == 0)
		rc = fs_path_object(fs, nview, npath, nbucket, sizeof nbucket, nkey, sizeof nkey);
	if (rc == 0 && (strcmp(bucket, nbucket) != 0))
		rc = -EXDEV;
	if (rc == 0 && !view_key_can_match(fs_req_view(view), nkey))
		rc = -EINVAL;
	/* A file open for writing here: publish it first, then move it. */
	struct ofile *of = rc == 0 ? fs_ofile_find_path(fs, view, path) : NULL;
	if (of)
		rc = fs_ofile_commit(fs, of);
	/* The copy keeps data, metadata and type: the new name's record is the
	 * old one's under the new key (no HEAD needed). */
	char etag[72] = "";
	struct obj_meta rec = { 0 };
	bool have_rec = rc == 0 && index_object_get(fs->d.ix, bucket, key, &rec) == 0 &&
			!(rec.flags & OBJ_DELETED);
	if (rc == 0)
		rc = s3_copy(fs->d.s3, bucket, key, nkey, NULL, 0, NULL, etag);
	if (rc == 0 && have_rec) {
		free(rec.key);
		rec.key = strdup(nkey);
		if (rec.key) {
			if (etag[0])
				snprintf(rec.etag, sizeof rec.etag, "%s", etag);
			rec.seq[0] = '\0';
			rec.mtime_ns = now_ns();
			rec.flags &= ~(uint32_t)OBJ_FROM_SCAN;
			fs_index_local(fs, &rec);
		}
	}
	obj_meta_release(&rec);
	if (rc == 0)
		rc = delete_object(fs, bucket, key);
	if (rc == 0 && of) {
		stage_file_rename(of->sf, bucket, nkey);
		char *np = strdup(npath), *nk = strdup(nkey);
		pthread_mutex_lock(&fs->ofile_lock);
		if (np && nk) {
			free(of->path);
			free(of->key);
			of->path = np;
			of->key = nk;
			np = nk = NULL;
		}
		pthread_mutex_unlock(&fs->ofile_lock);
		free(np);
		free(nk);
	}
	if (of)
		fs_ofile_put(fs, of);
	if (rc == 0) {
		/* The kernel keeps the moved inode: it now stands for npath. */
		uint64_t ino;
		if (inode_find(fs->it, view_name(fs_req_view(view)), path, &ino))
			inode_rename(fs->it, ino, npath);
	}
out:
	fuse_reply_err(req, -rc);
}

/* ---------- xattrs: user metadata ---------- */

static bool is_user_xattr(const char *name)
{
	return strncmp(name, "user.", 5) == 0;
}

/* The metadata of an object inode: its staged copy's if open for writing
 * here, else the index's record. Released by the caller. */
static int xattr_object(struct fs *fs, fuse_ino_t ino, struct obj_meta *o)
{
	if (ino < INODE_FIRST_DYNAMIC)
		return -ENOENT;
	struct ofile *of = fs_ofile_find(fs, ino);
	if (of) {
		int rc = obj_meta_copy(o, &of->meta);
		fs_ofile_put(fs, of);
		return rc;
	}
	struct inode_info info;
	int rc = inode_get(fs->it, ino, &info);
	if (rc < 0)
		return rc;
	rc = info.is_dir ? -ENOENT : index_object(fs->d.ix, fs_req_view(info.view), info.path, o);
	free(info.path);
	return rc;
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct fs *fs = fs_of(req);
	stats_inc(fs->d.st, fuse_getxattr);
	if (!is_user_xattr(name)) {
		/* security.*, system.*, trusted.*: not supported. ls -l asks for
		 * them on every entry; EOPNOTSUPP is much cheaper for it than
		 * ENODATA (TESTBED.md). */
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	struct obj_meta o = { 0 };
	int rc = xattr_object(fs, ino, &o);
	const char *val = rc == 0 ? obj_meta_get(&o, name + 5) : NULL;
	if (rc == -ENOENT || (rc == 0 && !val)) {
		fuse_reply_err(req, ENODATA);
	} else if (rc < 0) {
		fuse_reply_err(req, -rc);
	} else {
		size_t len = strlen(val);
		if (size == 0)
			fuse_reply_xattr(req, len);
		else if (size < len)
			fuse_reply_err(req, ERANGE);
		else
			fuse_reply_buf(req, val, len);
	}
	obj_meta_release(&o);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct fs *fs = fs_of(req);
	struct obj_meta o = { 0 };
	int rc = xattr_object(fs, ino, &o);
	if (rc < 0 && rc != -ENOENT) {
		fuse_reply_err(req, -rc);
		return;
	}
	size_t total = 0;
	for (size_t i = 0; i < o.n_meta; i++)
		total += 5 + strlen(o.meta[i].name) + 1;
	if (size == 0) {
		fuse_reply_xattr(req, total);
	} else if (size < total) {
		fuse_reply_err(req, ERANGE);
	} else {
		char *buf = malloc(total ? total : 1), *p = buf;
		if (!buf) {
			fuse_reply_err(req, ENOMEM);
		} else {
			for (size_t i = 0; i < o.n_meta; i++)
				p += sprintf(p, "user.%s", o.meta[i].name) + 1;
			fuse_reply_buf(req, buf, total);
			free(buf);
		}
	}
	obj_meta_release(&o);
}

/* Replace the user metadata of an object inode: on its staged copy if it
 * is open for writing here (published at its commit), else in S3 now. */
static int set_metadata(struct fs *fs, fuse_ino_t ino, const char *name,
			const char *value, size_t vlen, int flags)
{
	if (ino < INODE_FIRST_DYNAMIC)
		return -EOPNOTSUPP;
	struct inode_info info;
	int rc = inode_get(fs->it, ino, &info);
	if (rc < 0)
		return rc;
	char bucket[256], key[4096];
	struct obj_meta o = { 0 }, nm = { 0 };
	struct ofile *of = NULL;
	if (info.is_dir)
		rc = -EOPNOTSUPP;           /* S3 has no directories to tag */
	else if (!view_writable(fs_req_view(info.view)))
		rc = -EROFS;
	if (rc == 0)
		rc = fs_path_object(fs, info.view, info.path, bucket, sizeof bucket,
				    key, sizeof key);
	if (rc == 0) {
		of = fs_ofile_find(fs, ino);
		rc = of ? obj_meta_copy(&o, &of->meta) : s3_head(fs->d.s3, bucket, key, &o);
	}
	const char *mname = name + 5;
	bool present = rc == 0 && obj_meta_get(&o, mname) != NULL;
	if (rc == 0 && (flags & XATTR_CREATE) && present)
		rc = -EEXIST;
	if (rc == 0 && ((flags & XATTR_REPLACE) || !value) && !present)
		rc = -ENODATA;
	char *val = NULL;
	if (rc == 0 && value && !(val = strndup(value, vlen)))
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < o.n_meta; i++)
		if (strcmp(o.meta[i].name, mname) != 0)
			rc = obj_kv_add(&nm.meta, &nm.n_meta, o.meta[i].name, o.meta[i].value);
	if (rc == 0 && val)
		rc = obj_kv_add(&nm.meta, &nm.n_meta, mname, val);
	free(val);
	if (rc == 0 && of) {
		rc = stage_file_set_meta(of->sf, nm.meta, nm.n_meta, o.content_type);
		if (rc == 0) {
			pthread_mutex_lock(&fs->ofile_lock);
			struct obj_kv *tmp = of->meta.meta;
			size_t ntmp = of->meta.n_meta;
			of->meta.meta = nm.meta;
			of->meta.n_meta = nm.n_meta;
			nm.meta = tmp;
			nm.n_meta = ntmp;
			pthread_mutex_unlock(&fs->ofile_lock);
		}
	} else if (rc == 0) {
		/* One HEAD (above) serves the copy and the new record. */
		char etag[72] = "";
		rc = s3_copy(fs->d.s3, bucket, key, key, nm.meta, nm.n_meta, &o, etag);
		if (rc == 0) {
			struct obj_kv *old = o.meta;
			size_t nold = o.n_meta;
			o.meta = nm.meta;
			o.n_meta = nm.n_meta;
			nm.meta = old;
			nm.n_meta = nold;
			if (etag[0])
				snprintf(o.etag, sizeof o.etag, "%s", etag);
			o.seq[0] = '\0';
			o.mtime_ns = now_ns();
			o.flags |= OBJ_HAS_META;
			fs_index_local(fs, &o);
		}
	}
	fs_ofile_put(fs, of);
	obj_meta_release(&o);
	obj_meta_release(&nm);
	free(info.path);
	return rc;
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct fs *fs = fs_of(req);
	int rc;
	if (!is_user_xattr(name) || !name[5])
		rc = -EOPNOTSUPP;
	else if (memchr(value, '\0', size) || memchr(value, '\n', size) ||
		 memchr(value, '\r', size))
		rc = -EINVAL;               /* not representable in an HTTP header */
	else
		rc = set_metadata(fs, ino, name, value, size, flags);
	fuse_reply_err(req, -rc);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct fs *fs = fs_of(req);
	int rc = is_user_xattr(name) ? set_metadata(fs, ino, name, NULL, 0, 0)
				     : -EOPNOTSUPP;
	fuse_reply_err(req, -rc);
}

void fs_ns_init_ops(struct fuse_lowlevel_ops *ops)
{
	ops->mkdir = op_mkdir;
	ops->rmdir = op_rmdir;
	ops->unlink = op_unlink;
	ops->rename = op_rename;
	ops->getxattr = op_getxattr;
	ops->listxattr = op_listxattr;
	ops->setxattr = op_setxattr;
	ops->removexattr = op_removexattr;
}
