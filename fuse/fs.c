/* fs.c — see fs.h. The low-level FUSE operations.
 *
 * Every handler follows one shape: a worker computes a result or a negative
 * errno; the handler replies exactly once (fuse_reply_err(req, -rc) on
 * error). No lock is held across an index or S3 call (each request holds a
 * reference to its view set instead, fs_views.c); the inode table has its
 * own short critical sections.
 *
 * Readdir offsets: "." is 1, ".." is 2, the i-th entry after them is i + 3.
 * A directory handle remembers the name of the last entry it returned and
 * the offset after it, so the usual sequential readdir continues with an
 * index seek past that name; any other offset restarts and skips.
 */
#include "fuse/fs_int.h"

#include "common/log.h"
#include "common/stats.h"
#include "sync/stage.h"
#include "views/filter.h"
#include "views/index.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

struct dh {
	uint64_t ino;
	size_t view;                 /* in the set of the readdir running (the
				      * kernel serialises readdir per handle) */
	char *vname;                 /* NULL for fixed directories */
	char *path;
	off_t next_off;              /* offset after last_name */
	char last_name[NAME_MAX_BYTES + 1];
	bool extra;                  /* index entries done; listing made dirs */
	size_t extra_pos;            /* made dirs already returned */
};

/* In name order: readdir resumes after a name. */
static const char *const meta_names[] = { "control", "recovered", "stats", "views" };
static const uint64_t meta_inos[] = { INODE_META_CONTROL, INODE_META_RECOVERED,
				      INODE_META_STATS, INODE_META_VIEWS };

/* ---------- attributes ---------- */

void fs_attr_dir(struct fs *fs, uint64_t ino, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = ino;
	st->st_mode = S_IFDIR | 0555;
	st->st_nlink = 2;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_blksize = 4096;
	st->st_mtim = st->st_ctim = st->st_atim = fs->start;
}

void fs_attr_file(struct fs *fs, uint64_t ino, uint64_t size,
		  int64_t mtime_ns, mode_t perm, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = ino;
	st->st_mode = S_IFREG | perm;
	st->st_nlink = 1;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_size = (off_t)size;
	st->st_blocks = (blkcnt_t)((size + 511) / 512);
	st->st_blksize = 4096;
	st->st_mtim.tv_sec = mtime_ns / 1000000000;
	st->st_mtim.tv_nsec = mtime_ns % 1000000000;
	st->st_ctim = st->st_atim = st->st_mtim;
}

mode_t fs_file_perm(struct fs *fs, size_t view)
{
	(void)fs;
	const struct view *v = fs_req_view(view);
	return v && view_writable(v) ? 0644 : 0444;
}

static void view_dir_attr(struct fs *fs, size_t view, uint64_t ino, struct stat *st)
{
	fs_attr_dir(fs, ino, st);
	const struct view *v = fs_req_view(view);
	if (v && view_writable(v))
		st->st_mode = S_IFDIR | 0755;
}

static void attr_fill_index(struct fs *fs, size_t view, uint64_t ino,
			    const struct index_attr *a, struct stat *st)
{
	if (a->is_dir)
		view_dir_attr(fs, view, ino, st);
	else
		fs_attr_file(fs, ino, a->size, a->mtime_ns, fs_file_perm(fs, view), st);
}

static int view_by_name(struct fs *fs, const char *name, size_t *out)
{
	*out = fs_view_index(fs, name);
	return *out == INODE_NO_VIEW ? -ENOENT : 0;
}

/* Path of child `name` under `dir` ("" is a view's root). */
int fs_path_join(const char *dir, const char *name, char *out, size_t outlen)
{
	int n = *dir ? snprintf(out, outlen, "%s/%s", dir, name)
		     : snprintf(out, outlen, "%s", name);
	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

/* What (view, path) is for this mount: a file staged here (created or
 * being written), what the index shows, or a directory made here. */
static int node_attr(struct fs *fs, size_t view, const char *path, uint64_t ino,
		     struct stat *st, bool *is_dir)
{
	*is_dir = true;
	if (!*path) {
		view_dir_attr(fs, view, ino, st);
		return 0;
	}
	struct ofile *of = fs_ofile_find_path(fs, view, path);
	if (of) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		fs_attr_file(fs, ino, stage_file_size(of->sf),
			     (int64_t)now.tv_sec * 1000000000 + now.tv_nsec,
			     fs_file_perm(fs, view), st);
		fs_ofile_put(fs, of);
		*is_dir = false;
		return 0;
	}
	struct index_attr a;
	int rc = index_lookup(fs->d.ix, fs_req_view(view), path, &a);
	if (rc == 0) {
		attr_fill_index(fs, view, ino, &a, st);
		*is_dir = a.is_dir;
		return 0;
	}
	if (rc == -ENOENT && fs_mkdir_exists(fs, view, path)) {
		view_dir_attr(fs, view, ino, st);
		return 0;
	}
	return rc;
}

int fs_child(struct fs *fs, fuse_ino_t parent, const char *name, size_t *view,
	     char *path, size_t pathlen)
{
	if (strlen(name) > NAME_MAX_BYTES)
		return -ENAMETOOLONG;
	if (parent < INODE_FIRST_DYNAMIC)
		return parent == INODE_ROOT ? -EPERM : -EACCES;
	struct inode_info info;
	int rc = inode_get(fs->it, parent, &info);
	if (rc < 0)
		return rc;
	if (!info.is_dir)
		rc = -ENOTDIR;
	else
		rc = fs_path_join(info.path, name, path, pathlen);
	*view = info.view;
	free(info.path);
	return rc;
}

int fs_path_object(struct fs *fs, size_t view, const char *path, char *bucket,
		   size_t blen, char *key, size_t klen)
{
	(void)fs;
	const struct view *v = fs_req_view(view);
	const char *p = path;
	if (view_n_buckets(v) > 1) {
		/* multi-bucket views show BUCKET/path */
		const char *slash = strchr(path, '/');
		if (!slash || (size_t)(slash - path) >= blen)
			return -EINVAL;
		memcpy(bucket, path, (size_t)(slash - path));
		bucket[slash - path] = '\0';
		if (!view_uses_bucket(v, bucket))
			return -EINVAL;
		p = slash + 1;
	} else {
		snprintf(bucket, blen, "%s", view_bucket(v, 0));
	}
	return view_path_key(v, p, key, klen);
}

static void local_change(void *ctx, const char *view, const char *path, int what)
{
	fs_notify_change(ctx, view, path, what);
}

int fs_index_local(struct fs *fs, const struct obj_meta *o)
{
	int rc = index_apply(fs->d.ix, o, 1, NULL, 0, local_change, fs);
	return rc < 0 ? rc : 0;
}

/* Attributes of an inode the kernel holds. */
int fs_attr_of(struct fs *fs, uint64_t ino, struct stat *st)
{
	switch (ino) {
	case INODE_ROOT:
	case INODE_META_DIR:
		fs_attr_dir(fs, ino, st);
		return 0;
	case INODE_META_STATS:
	case INODE_META_VIEWS:
		fs_attr_file(fs, ino, 0, 0, 0444, st);
		st->st_mtim = st->st_ctim = st->st_atim = fs->start;
		return 0;
	case INODE_META_CONTROL:
		fs_attr_file(fs, ino, 0, 0, 0600, st);
		st->st_mtim = st->st_ctim = st->st_atim = fs->start;
		return 0;
	case INODE_META_RECOVERED:
		fs_attr_file(fs, ino, strlen(fs->recovered), 0, 0777, st);
		st->st_mode = S_IFLNK | 0777;
		st->st_mtim = st->st_ctim = st->st_atim = fs->start;
		return 0;
	}
	struct inode_info info;
	int rc = inode_get(fs->it, ino, &info);
	if (rc < 0)
		return rc;
	bool is_dir;
	rc = node_attr(fs, info.view, info.path, ino, st, &is_dir);
	free(info.path);
	return rc;
}

/* ---------- lookup, getattr, forget ---------- */

static int do_lookup(struct fs *fs, fuse_ino_t parent, const char *name,
		     struct fuse_entry_param *e)
{
	memset(e, 0, sizeof *e);
	e->attr_timeout = FS_TIMEOUT;
	e->entry_timeout = FS_TIMEOUT;
	if (strlen(name) > NAME_MAX_BYTES)
		return -ENAMETOOLONG;

	if (parent == INODE_ROOT) {
		if (strcmp(name, ".facetfs") == 0) {
			e->ino = INODE_META_DIR;
			return fs_attr_of(fs, e->ino, &e->attr);
		}
		size_t v;
		int rc = view_by_name(fs, name, &v);
		if (rc < 0)
			return rc;
		e->ino = inode_ref(fs->it, name, "", true);
		if (!e->ino)
			return -ENOMEM;
		view_dir_attr(fs, v, e->ino, &e->attr);
		return 0;
	}
	if (parent == INODE_META_DIR) {
		for (size_t i = 0; i < sizeof meta_names / sizeof meta_names[0]; i++)
			if (strcmp(name, meta_names[i]) == 0) {
				e->ino = meta_inos[i];
				/* Generated files: never cache their attributes. */
				e->attr_timeout = 0;
				return fs_attr_of(fs, e->ino, &e->attr);
			}
		return -ENOENT;
	}

	size_t view;
	char path[PATH_MAX];
	int rc = fs_child(fs, parent, name, &view, path, sizeof path);
	if (rc < 0)
		return rc;
	/* The inode number does not depend on what the name is: compute the
	 * attributes first, then take the reference. */
	bool is_dir;
	uint64_t ino = inode_number(view_name(fs_req_view(view)), path);
	rc = node_attr(fs, view, path, ino, &e->attr, &is_dir);
	if (rc < 0)
		return rc;
	e->ino = inode_ref(fs->it, view_name(fs_req_view(view)), path, is_dir);
	if (!e->ino)
		return -ENOMEM;
	e->attr.st_ino = e->ino;
	return 0;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	struct fuse_entry_param e;
	stats_inc(fs->d.st, fuse_lookup);
	inode_note_lookup(fs->it, parent);   /* before the index is read */
	int rc = do_lookup(fs, parent, name, &e);
	if (rc == -ENOENT) {
		/* A negative entry, cached until an event adds the name (the
		 * change notifier invalidates it). */
		memset(&e, 0, sizeof e);
		e.entry_timeout = FS_TIMEOUT;
		fuse_reply_entry(req, &e);
		return;
	}
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct fs *fs = fs_of(req);
	struct stat st;
	stats_inc(fs->d.st, fuse_getattr);
	int rc = fs_attr_of(fs, ino, &st);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, ino >= INODE_META_STATS && ino <= INODE_META_CONTROL
						 ? 0 : FS_TIMEOUT);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct fs *fs = fs_of(req);
	if (ino >= INODE_FIRST_DYNAMIC)
		inode_unref(fs->it, ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct fs *fs = fs_of(req);
	for (size_t i = 0; i < count; i++)
		if (forgets[i].ino >= INODE_FIRST_DYNAMIC)
			inode_unref(fs->it, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

/* ---------- directories ---------- */

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct dh *dh = calloc(1, sizeof *dh);
	if (!dh) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	dh->ino = ino;
	dh->view = INODE_NO_VIEW;
	if (ino >= INODE_FIRST_DYNAMIC) {
		struct inode_info info;
		int rc = inode_get(fs->it, ino, &info);
		if (rc == 0 && !info.is_dir) {
			free(info.path);
			rc = -ENOTDIR;
		}
		if (rc < 0) {
			free(dh);
			fuse_reply_err(req, -rc);
			return;
		}
		dh->view = info.view;
		dh->path = info.path;
		dh->vname = strdup(view_name(fs_req_view(info.view)));
		if (!dh->vname) {
			free(dh->path);
			free(dh);
			fuse_reply_err(req, ENOMEM);
			return;
		}
	} else if (ino != INODE_ROOT && ino != INODE_META_DIR) {
		free(dh);
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	fi->fh = (uintptr_t)dh;
	fi->cache_readdir = 0;
	fuse_reply_open(req, fi);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct dh *dh = (struct dh *)(uintptr_t)fi->fh;
	free(dh->path);
	free(dh->vname);
	free(dh);
	fuse_reply_err(req, 0);
}

/* The state of one readdir reply being filled. */
struct rd {
	struct fs *fs;
	fuse_req_t req;
	struct dh *dh;
	bool plus;
	char *buf;
	size_t size, pos;
	off_t off;                   /* offset of the next entry to add */
	off_t skip_until;            /* entries with offset below this are skipped */
	bool full;
};

/* Add one entry. Returns 1 when the buffer is full (entry not added). */
static int rd_add(struct rd *r, const char *name, uint64_t ino, const struct stat *st,
		  const char *child_path, bool is_dir)
{
	off_t next = r->off + 1;
	if (r->off < r->skip_until) {
		r->off = next;
		return 0;
	}
	size_t room = r->size - r->pos;
	size_t need;
	if (!r->plus) {
		need = fuse_add_direntry(r->req, r->buf + r->pos, room, name, st, next);
	} else {
		struct fuse_entry_param e;
		memset(&e, 0, sizeof e);
		e.attr = *st;
		e.attr_timeout = FS_TIMEOUT;
		e.entry_timeout = FS_TIMEOUT;
		bool counted = child_path != NULL;
		if (counted) {
			e.ino = inode_ref(r->fs->it, r->dh->vname, child_path, is_dir);
			e.attr.st_ino = e.ino;
		} else if (ino >= INODE_FIRST_DYNAMIC) {
			/* a view directory listed in the root */
			e.ino = inode_ref(r->fs->it, name, "", true);
			e.attr.st_ino = e.ino;
			counted = true;
		} else if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
			e.ino = ino;
		}
		need = fuse_add_direntry_plus(r->req, r->buf + r->pos, room, name, &e, next);
		if (need > room && counted && e.ino)
			inode_unref(r->fs->it, e.ino, 1);
	}
	if (need > room) {
		r->full = true;
		return 1;
	}
	r->pos += need;
	r->off = next;
	snprintf(r->dh->last_name, sizeof r->dh->last_name, "%s", name);
	r->dh->next_off = next;
	return 0;
}

static int rd_index_entry(void *ctx, const char *name, const struct index_attr *a)
{
	struct rd *r = ctx;
	char child[PATH_MAX];
	if (fs_path_join(r->dh->path, name, child, sizeof child) < 0)
		return 0;
	struct stat st;
	uint64_t ino = inode_number(view_name(fs_req_view(r->dh->view)), child);
	attr_fill_index(r->fs, r->dh->view, ino, a, &st);
	return rd_add(r, name, ino, &st, child, a->is_dir);
}

/* After the index's entries: directories made here with mkdir that hold
 * no object yet. */
static void rd_made_dirs(struct rd *r)
{
	struct fs *fs = r->fs;
	char **names = NULL;
	size_t n = 0, cap = 0;
	size_t plen = strlen(r->dh->path);
	pthread_mutex_lock(&fs->ofile_lock);
	for (struct mkdir_ent *m = fs->mkdirs; m; m = m->next) {
		if (strcmp(m->vname, r->dh->vname) != 0)
			continue;
		const char *rest = m->path;
		if (plen) {
			if (strncmp(m->path, r->dh->path, plen) != 0 || m->path[plen] != '/')
				continue;
			rest = m->path + plen + 1;
		}
		if (strchr(rest, '/'))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 8;
			char **g = realloc(names, cap * sizeof *names);
			if (!g)
				break;
			names = g;
		}
		if (!(names[n] = strdup(rest)))
			break;
		n++;
	}
	pthread_mutex_unlock(&fs->ofile_lock);
	for (size_t i = r->dh->extra_pos; i < n && !r->full; i++) {
		char child[PATH_MAX];
		struct index_attr a;
		if (fs_path_join(r->dh->path, names[i], child, sizeof child) < 0 ||
		    index_lookup(fs->d.ix, fs_req_view(r->dh->view), child, &a) == 0) {
			r->dh->extra_pos++;
			continue;    /* the index lists it already */
		}
		struct stat st;
		uint64_t ino = inode_number(view_name(fs_req_view(r->dh->view)), child);
		view_dir_attr(fs, r->dh->view, ino, &st);
		if (rd_add(r, names[i], ino, &st, child, true) == 0)
			r->dh->extra_pos++;
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, bool plus)
{
	struct fs *fs = fs_of(req);
	struct dh *dh = (struct dh *)(uintptr_t)fi->fh;
	stats_inc(fs->d.st, fuse_readdir);
	if (dh->vname) {
		/* this request's set may not be opendir's */
		dh->view = fs_view_index(fs, dh->vname);
	}
	if (dh->vname && dh->view == INODE_NO_VIEW) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct rd r = { .fs = fs, .req = req, .dh = dh, .plus = plus, .size = size };
	r.buf = malloc(size);
	if (!r.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* Continue after the remembered name, or restart and skip. */
	bool resume = off > 2 && off == dh->next_off && dh->last_name[0];
	const char *after = NULL;
	if (resume) {
		r.off = off;
		after = dh->last_name;
	} else {
		r.off = 0;
		r.skip_until = off;
	}
	char after_copy[NAME_MAX_BYTES + 1] = "";
	if (after) {
		snprintf(after_copy, sizeof after_copy, "%s", after);
		after = after_copy;
	}

	struct stat st;
	int rc = 0;
	if (!resume) {
		fs_attr_dir(fs, ino, &st);
		if (rd_add(&r, ".", ino, &st, NULL, true) == 0) {
			fs_attr_dir(fs, INODE_ROOT, &st);
			rd_add(&r, "..", INODE_ROOT, &st, NULL, true);
		}
	}
	if (r.full)
		goto reply;

	if (ino == INODE_ROOT) {
		/* .facetfs, then the views in their configured order. */
		size_t first = 0;
		if (!resume || strcmp(after, ".facetfs") == 0) {
			if (!resume) {
				fs_attr_dir(fs, INODE_META_DIR, &st);
				if (rd_add(&r, ".facetfs", INODE_META_DIR, &st, NULL, true))
					goto reply;
			}
		} else {
			size_t v;
			if (view_by_name(fs, after, &v) == 0)
				first = v + 1;
		}
		for (size_t v = first; v < fs_req_n_views(); v++) {
			const char *name = view_name(fs_req_view(v));
			fs_attr_dir(fs, inode_number(name, ""), &st);
			if (rd_add(&r, name, INODE_FIRST_DYNAMIC + v, &st, NULL, true))
				break;
		}
	} else if (ino == INODE_META_DIR) {
		for (size_t i = 0; i < sizeof meta_names / sizeof meta_names[0]; i++) {
			if (resume && strcmp(meta_names[i], after) <= 0)
				continue;
			if (fs_attr_of(fs, meta_inos[i], &st) == 0 &&
			    rd_add(&r, meta_names[i], meta_inos[i], &st, NULL, false))
				break;
		}
	} else {
		if (!resume) {
			dh->extra = false;
			dh->extra_pos = 0;
		}
		if (!dh->extra) {
			rc = index_readdir(fs->d.ix, fs_req_view(dh->view), dh->path, after,
					   rd_index_entry, &r);
			if (rc == -ENOENT && fs_mkdir_exists(fs, dh->view, dh->path))
				rc = 0;      /* an empty directory made here */
			if (rc >= 0 && !r.full) {
				rc = 0;
				dh->extra = true;
			}
		}
		if (dh->extra && !r.full)
			rd_made_dirs(&r);
	}
reply:
	if (rc < 0 && r.pos == 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, r.buf, r.pos);
	free(r.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs sv;
	memset(&sv, 0, sizeof sv);
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = 1ULL << 40;  /* an object store has no fixed size */
	sv.f_bfree = sv.f_bavail = 1ULL << 40;
	sv.f_files = 1ULL << 32;
	sv.f_ffree = sv.f_favail = 1ULL << 32;
	sv.f_namemax = NAME_MAX_BYTES;
	fuse_reply_statfs(req, &sv);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* readdirplus for every listing: `ls -l` then needs no lookups. */
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* Page cache contents stay until we invalidate them explicitly. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	conn->max_readahead = FS_READAHEAD;
}

/* .facetfs/recovered points at the local directory where staged data that
 * was never committed is put after a crash (sync/stage.h). */
static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fs_of(req);
	if (ino == INODE_META_RECOVERED)
		fuse_reply_readlink(req, fs->recovered);
	else
		fuse_reply_err(req, EINVAL);
}

static const struct fuse_lowlevel_ops fs_core_ops = {
	.readlink = op_readlink,
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.statfs = op_statfs,
};

/* ---------- change notification ---------- */

struct inval {
	uint64_t parent;         /* 0: invalidate inode `ino` instead */
	uint64_t ino;
	char name[NAME_MAX_BYTES + 1];
};

/* Invalidate what the kernel may cache of (view, path). Runs on the
 * notifier thread: never inside a FUSE request (a related request could
 * deadlock with it) and with no lock of ours held. */
static void invalidate(struct fs *fs, const char *vname, const char *path, int what)
{
	if (!vname) {
		/* a whole view appeared, changed or went away: its name in the
		 * root, and with it everything the kernel cached below */
		uint64_t ino;
		fuse_lowlevel_notify_inval_entry(fs->se, INODE_ROOT, path, strlen(path));
		if (inode_find(fs->it, path, "", &ino))
			fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0);
		fuse_lowlevel_notify_inval_inode(fs->se, INODE_ROOT, 0, 0);
		stats_inc(fs->d.st, fuse_inval);
		return;
	}
	/* The job names its view: nothing to look up in a view set, which may
	 * have changed since the job was queued (the inodes go by name too). */
	char prefix[PATH_MAX];
	size_t plen = strlen(path);
	if (plen >= sizeof prefix)
		return;
	struct inval todo[64];
	size_t n = 0;

	/* Each level (parent dir, component) the kernel may have cached. For
	 * a change of contents only the leaf matters; names appear and vanish
	 * at every level when objects are added or removed (implicit dirs). */
	size_t start = 0;
	for (;;) {
		const char *slash = strchr(path + start, '/');
		size_t end = slash ? (size_t)(slash - path) : plen;
		bool leaf = !slash;
		if (what != INDEX_CHANGED || leaf) {
			memcpy(prefix, path, start ? start - 1 : 0);
			prefix[start ? start - 1 : 0] = '\0';
			uint64_t parent;
			bool looked_up_in = false;
			/* A name added where no LOOKUP was ever answered cannot
			 * be a cached negative entry: nothing to invalidate (a
			 * first scan adds 100,000s of names) */
			if (n < 64 && end - start <= NAME_MAX_BYTES &&
			    inode_find_dir(fs->it, vname, prefix, &parent, &looked_up_in) &&
			    (what != INDEX_ADDED || looked_up_in)) {
				todo[n].parent = parent;
				memcpy(todo[n].name, path + start, end - start);
				todo[n].name[end - start] = '\0';
				n++;
			}
		}
		if (leaf)
			break;
		start = end + 1;
	}
	uint64_t ino;
	if (what != INDEX_ADDED && n < 64 && inode_find(fs->it, vname, path, &ino)) {
		todo[n].parent = 0;
		todo[n].ino = ino;
		n++;
	}
	/* No lock is held here: the kernel may call back into us. */
	for (size_t i = 0; i < n; i++) {
		int rc;
		if (todo[i].parent && what == INDEX_CHANGED)
			continue;    /* the name itself did not change */
		if (todo[i].parent)
			rc = fuse_lowlevel_notify_inval_entry(fs->se, todo[i].parent,
							      todo[i].name,
							      strlen(todo[i].name));
		else
			rc = fuse_lowlevel_notify_inval_inode(fs->se, todo[i].ino, 0, 0);
		if (rc == 0)
			stats_inc(fs->d.st, fuse_inval);
		else if (rc != -ENOENT)
			log_debug("invalidate %s/%s: %s", vname, path, strerror(-rc));
	}
}

void fs_notify_change(struct fs *fs, const char *view, const char *path, int what)
{
	if (!fs->mounted)
		return;
	/* The change is in the index already: while the kernel holds no inode
	 * of any view, it caches nothing below one, and what it looks up from
	 * now on is read after the change. A first scan before any listing
	 * then queues nothing. */
	if (view && inode_count(fs->it) == 0)
		return;
	struct inval_job *j = calloc(1, sizeof *j);
	if (!j || !(j->path = strdup(path)) || (view && !(j->vname = strdup(view)))) {
		if (j)
			free(j->path);
		free(j);
		log_error("invalidate %s: out of memory; the kernel may show it stale "
			  "for up to %.0f s", path, FS_TIMEOUT);
		return;
	}
	j->what = what;
	j->next = NULL;
	pthread_mutex_lock(&fs->inval_lock);
	if (fs->inval_tail)
		fs->inval_tail->next = j;
	else
		fs->inval_head = j;
	fs->inval_tail = j;
	pthread_cond_signal(&fs->inval_cond);
	pthread_mutex_unlock(&fs->inval_lock);
}

static void *notifier_main(void *arg)
{
	struct fs *fs = arg;
	pthread_setname_np(pthread_self(), "fs-notify");
	pthread_mutex_lock(&fs->inval_lock);
	for (;;) {
		while (!fs->inval_head && !fs->inval_stop)
			pthread_cond_wait(&fs->inval_cond, &fs->inval_lock);
		struct inval_job *j = fs->inval_head;
		if (!j)
			break;       /* stopping, queue drained */
		fs->inval_head = j->next;
		if (!fs->inval_head)
			fs->inval_tail = NULL;
		pthread_mutex_unlock(&fs->inval_lock);
		invalidate(fs, j->vname, j->path, j->what);
		free(j->vname);
		free(j->path);
		free(j);
		pthread_mutex_lock(&fs->inval_lock);
	}
	pthread_mutex_unlock(&fs->inval_lock);
	return NULL;
}

/* ---------- mount, run, unmount ---------- */

/* A gateway that died leaves its mountpoint answering ENOTCONN. */
static void unmount_stale(const char *mountpoint)
{
	struct stat st;
	if (stat(mountpoint, &st) == 0 || errno != ENOTCONN)
		return;
	log_warn("%s: stale mount of a stopped gateway; unmounting it", mountpoint);
	if (umount2(mountpoint, MNT_DETACH) == 0)
		return;
	char cmd[PATH_MAX + 64];
	snprintf(cmd, sizeof cmd, "fusermount3 -u -z '%s' 2>/dev/null", mountpoint);
	if (system(cmd) != 0)
		log_error("%s: could not unmount the stale mount", mountpoint);
}

/* The inode table's resolver: the index in the request's view set. */
static size_t inode_resolve(void *ctx, const char *view_name)
{
	return fs_view_index(ctx, view_name);
}

int fs_mount(const char *mountpoint, const char *fuse_opts,
	     const struct fs_deps *deps, struct fs **out)
{
	int rc = -ENOMEM;
	struct fs *fs = calloc(1, sizeof *fs);
	if (!fs)
		return -ENOMEM;
	fs->d = *deps;
	fs->uid = getuid();
	fs->gid = getgid();
	clock_gettime(CLOCK_REALTIME, &fs->start);
	pthread_mutex_init(&fs->ofile_lock, NULL);
	pthread_mutex_init(&fs->inval_lock, NULL);
	pthread_cond_init(&fs->inval_cond, NULL);
	fs->mountpoint = strdup(mountpoint);
	if (!fs->mountpoint || inode_table_new(inode_resolve, fs, &fs->it) < 0)
		goto fail;
	if ((rc = fs_mkdirs_load(fs)) < 0)
		goto fail;
	rc = -ENOMEM;
	fs->recovered = fs->d.stage ? realpath(stage_recovered_dir(fs->d.stage), NULL) : NULL;
	if (!fs->recovered && !(fs->recovered = strdup("/nonexistent")))
		goto fail;

	unmount_stale(mountpoint);
	struct stat st;
	if (stat(mountpoint, &st) < 0 || !S_ISDIR(st.st_mode)) {
		rc = stat(mountpoint, &st) < 0 ? -errno : -ENOTDIR;
		log_error("%s: not a directory: %s", mountpoint, strerror(-rc));
		goto fail;
	}
	char abs[PATH_MAX];          /* before mounting: later it would ask us */
	if (!realpath(mountpoint, abs))
		abs[0] = '\0';

	char *argv[] = { "facetfs", "-o",
			 "fsname=facetfs,subtype=facetfs,default_permissions",
			 fuse_opts ? "-o" : NULL, (char *)fuse_opts, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(fuse_opts ? 5 : 3, argv);
	fs->real = fs_core_ops;
	fs_io_init_ops(&fs->real);
	fs_ns_init_ops(&fs->real);
	struct fuse_lowlevel_ops ops = fs->real;
	fs_wrap_ops(&ops);
	fs->se = fuse_session_new(&args, &ops, sizeof ops, fs);
	fuse_opt_free_args(&args);
	if (!fs->se) {
		rc = -EINVAL;
		log_error("bad FUSE options: %s", fuse_opts ? fuse_opts : "");
		goto fail;
	}
	if (fuse_set_signal_handlers(fs->se) != 0) {
		rc = -EIO;
		goto fail;
	}
	if (fuse_session_mount(fs->se, mountpoint) != 0) {
		rc = -EIO;
		log_error("%s: mount failed (is /dev/fuse there, and fuse3 installed?)",
			  mountpoint);
		goto fail;
	}
	fs->mounted = true;
	if (abs[0])
		fs_set_readahead(abs, FS_READAHEAD >> 10);
	if (pthread_create(&fs->inval_thread, NULL, notifier_main, fs) != 0) {
		rc = -EAGAIN;
		goto fail;
	}
	fs->inval_running = true;
	*out = fs;
	return 0;
fail:
	fs_free(fs);
	return rc;
}

int fs_run(struct fs *fs)
{
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	if (!cfg)
		return -ENOMEM;
	fuse_loop_cfg_set_max_threads(cfg, 16);
	fuse_loop_cfg_set_idle_threads(cfg, 4);
	int rc = fuse_session_loop_mt(fs->se, cfg);
	fuse_loop_cfg_destroy(cfg);
	return rc < 0 ? rc : 0;
}

void fs_free(struct fs *fs)
{
	if (!fs)
		return;
	if (fs->inval_running) {
		pthread_mutex_lock(&fs->inval_lock);
		fs->inval_stop = true;
		pthread_cond_signal(&fs->inval_cond);
		pthread_mutex_unlock(&fs->inval_lock);
		pthread_join(fs->inval_thread, NULL);
		fs->inval_running = false;
	}
	if (fs->se) {
		if (fs->mounted)
			fuse_session_unmount(fs->se);
		fs->mounted = false;
		fuse_remove_signal_handlers(fs->se);
		fuse_session_destroy(fs->se);
	}
	inode_table_free(fs->it);
	for (struct inval_job *j = fs->inval_head, *n; j; j = n) {
		n = j->next;
		free(j->vname);
		free(j->path);
		free(j);
	}
	for (struct mkdir_ent *m = fs->mkdirs, *n; m; m = n) {
		n = m->next;
		free(m->path);
		free(m->vname);
		free(m);
	}
	pthread_mutex_destroy(&fs->ofile_lock);
	pthread_mutex_destroy(&fs->inval_lock);
	pthread_cond_destroy(&fs->inval_cond);
	free(fs->mountpoint);
	free(fs->recovered);
	free(fs);
}
