/* core.c — see core.h and core_int.h: the bottom layer of the core. Its
 * lifecycle, the view set, the attributes and paths every operation needs,
 * and the mount's own changes into the index. What core_new and core_free
 * need of the tables above is here too: a made directory remembered
 * (core_mkdir_remember; core_mkdir.c keeps the list), an open file freed
 * (core_ofile_free, with its record of uploads for readers:
 * core_ofile_pub_put; core_ofile.c keeps the table). Calls nothing else of
 * the core.
 */
#include "fuse/core_int.h"

#include "common/lock.h"
#include "common/posix.h"
#include "sync/stage/stage.h"
#include "views/filter.h"
#include "views/index.h"
#include "views/viewset.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------- lifecycle and the view set ---------- */

/* A made directory into c->mkdirs (its view by name: INODE_NO_VIEW until a
 * view of that name exists). */
int core_mkdir_remember(struct core *c, const char *vname, const char *path,
			const struct obj_posix *px)
{
	struct mkdir_ent *m = calloc(1, sizeof *m);
	if (!m || !(m->path = strdup(path)) || !(m->vname = strdup(vname))) {
		if (m)
			free(m->path);
		free(m);
		return -ENOMEM;
	}
	if (px)
		m->px = *px;
	mod_lock(&c->ofile_lock);
	m->next = c->mkdirs;
	c->mkdirs = m;
	mod_unlock(&c->ofile_lock);
	return 0;
}

static int mkdir_loaded(void *ctx, const char *vname, const char *path,
			const struct obj_posix *px)
{
	return core_mkdir_remember(ctx, vname, path, px);
}

#define CORE_OP(field) STATS_FAMILY(struct core_counters, field, "fuse", #field, \
				    "facetfs_fuse_requests_total", "op=\"" #field "\"")
static const struct stats_def core_stats[] = {
	CORE_OP(lookup),
	CORE_OP(getattr),
	CORE_OP(readdir),
	CORE_OP(read),
	CORE_OP(open),
	STATS_COUNTER(struct core_counters, open_from_index, "fuse", "open_from_index"),
	STATS_COUNTER(struct core_counters, open_direct_cold, "fuse", "open_direct_cold"),
	STATS_COUNTER(struct core_counters, open_direct_size, "fuse", "open_direct_size"),
	CORE_OP(getxattr),
	STATS_COUNTER(struct core_counters, copy_from_index, "s3", "copy_from_index"),
	STATS_COUNTER(struct core_counters, copy_stale_index, "s3", "copy_stale_index"),
	STATS_COUNTER(struct core_counters, copy_in_parts, "s3", "copy_in_parts"),
};
#undef CORE_OP

int core_new(const struct core_deps *deps, struct core **out)
{
	struct core *c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	c->d = *deps;
	reader_counters_init(&c->rctr, deps->st);
	stats_group_add(deps->st, &c->grp, core_stats,
			sizeof core_stats / sizeof core_stats[0], &c->ctr);
	c->src = (struct reader_src){ deps->s3, &c->rctr, deps->bc, deps->pins,
				      deps->rpool };
	c->uid = deps->owner.has_uid ? deps->owner.uid : getuid();
	c->gid = deps->owner.has_gid ? deps->owner.gid : getgid();
	clock_gettime(CLOCK_REALTIME, &c->start);
	pthread_mutex_init(&c->ofile_lock, NULL);
	pthread_cond_init(&c->ofile_cv, NULL);
	pthread_mutex_init(&c->dir_lock, NULL);
	int rc = index_dirs_each(c->d.ix, mkdir_loaded, c);
	if (rc < 0)
		goto fail;
	rc = links_new(&c->links);
	if (rc < 0)
		goto fail;
	rc = -ENOMEM;
	c->recovered = c->d.stage ? realpath(stage_recovered_dir(c->d.stage), NULL) : NULL;
	if (!c->recovered && !(c->recovered = strdup("/nonexistent")))
		goto fail;
	*out = c;
	return 0;
fail:
	core_free(c);
	return rc;
}

/* The record of an open file's uploads its readers share (core_int.h). */
void core_ofile_pub_put(struct ofile_pub *p)
{
	if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
		return;
	free(p->bucket);
	free(p->key);
	free(p);
}

/* An open file (core_ofile.c) and all it holds; core_free frees those
 * left in the table. */
void core_ofile_free(struct ofile *of)
{
	if (of->sf)
		stage_file_release(of->sf);
	core_ofile_pub_put(of->pub);
	obj_meta_release(&of->meta);
	free(of->vname);
	free(of->path);
	free(of->bucket);
	free(of->key);
	free(of);
}

void core_free(struct core *c)
{
	if (!c)
		return;
	for (struct mkdir_ent *m = c->mkdirs, *n; m; m = n) {
		n = m->next;
		free(m->path);
		free(m->vname);
		free(m);
	}
	for (size_t i = 0; i < CORE_OFILE_SLOTS; i++) {
		for (struct ofile *of = c->ofiles_by_key[i], *n; of; of = n) {
			n = of->next;
			core_ofile_free(of);
		}
		for (struct ofile *of = c->ofiles_gone[i], *n; of; of = n) {
			n = of->next;
			core_ofile_free(of);
		}
	}
	stats_group_remove(&c->grp);
	reader_counters_release(&c->rctr);
	pthread_mutex_destroy(&c->ofile_lock);
	pthread_cond_destroy(&c->ofile_cv);
	pthread_mutex_destroy(&c->dir_lock);
	free(c->recovered);
	links_free(c->links);
	free(c);
}

void core_req_begin(struct core *c, struct core_req *rq)
{
	rq->c = c;
	rq->vs = viewset_slot_pin(c->d.views);
	rq->cv.views = rq->vs ? viewset_views(rq->vs) : NULL;
	rq->cv.n = rq->vs ? viewset_count(rq->vs) : 0;
}

void core_req_end(struct core_req *rq)
{
	viewset_unpin(rq->vs);
	rq->vs = NULL;
	rq->cv.n = 0;
}

const struct core_views *core_views(const struct core_req *rq)
{
	return &rq->cv;
}

size_t core_view_find(const struct core_req *rq, const char *name)
{
	const struct core_views *vs = core_views(rq);
	for (size_t i = 0; i < vs->n; i++)
		if (strcmp(view_name(vs->views[i]), name) == 0)
			return i;
	return INODE_NO_VIEW;
}

bool core_in_view(const struct core_req *rq, const char *vname, size_t view)
{
	const struct core_views *vs = core_views(rq);
	return vname && view < vs->n && strcmp(view_name(vs->views[view]), vname) == 0;
}

size_t core_view_follow(const struct core_req *rq, size_t *view, const char *vname)
{
	if (vname)
		*view = core_view_find(rq, vname);
	return *view;
}

bool core_view_writable(const struct core_req *rq, size_t view)
{
	return view < core_views(rq)->n && view_writable(core_view(rq, view));
}

enum vis_policy core_view_policy(const struct core_req *rq, size_t view)
{
	return view < core_views(rq)->n ? vis_policy_of(view_visibility(core_view(rq, view)))
					: VIS_SESSION;
}

const char *core_recovered(struct core *c)
{
	return c->recovered;
}

int64_t core_now_ns(void)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* ---------- attributes and paths ---------- */

/* The mode shown for a directory or file: the given (or default) mode,
 * without write bits unless writable, minus the umask. */
static mode_t shown_mode(struct core *c, bool dir, bool writable)
{
	const struct core_owner *o = &c->d.owner;
	mode_t m = dir ? (o->dir_mode ? o->dir_mode : 0755)
		       : (o->file_mode ? o->file_mode : 0644);
	if (!writable)
		m &= ~(mode_t)0222;
	return m & ~o->umask & 07777;
}

void core_attr_dir(struct core *c, uint64_t ino, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = ino;
	st->st_mode = S_IFDIR | shown_mode(c, true, false);
	st->st_nlink = 2;
	st->st_uid = c->uid;
	st->st_gid = c->gid;
	st->st_blksize = 4096;
	st->st_mtim = st->st_ctim = st->st_atim = c->start;
}

void core_attr_file(struct core *c, uint64_t ino, uint64_t size,
		    int64_t mtime_ns, mode_t perm, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = ino;
	st->st_mode = S_IFREG | perm;
	st->st_nlink = 1;
	st->st_uid = c->uid;
	st->st_gid = c->gid;
	st->st_size = (off_t)size;
	st->st_blocks = (blkcnt_t)((size + 511) / 512);
	/* Programs size their I/O by st_blksize (cp and cat use the larger of
	 * it and 128 KiB): 1 MiB makes each write request carry 1 MiB, with
	 * one FUSE round trip and one security.capability getxattr for it
	 * instead of eight. stdio ignores sizes above BUFSIZ. */
	st->st_blksize = 1 << 20;
	st->st_mtim.tv_sec = mtime_ns / 1000000000;
	st->st_mtim.tv_nsec = mtime_ns % 1000000000;
	st->st_ctim = st->st_atim = st->st_mtim;
}

static void ts_of_ns(int64_t ns, struct timespec *ts)
{
	int64_t sec = ns / 1000000000, nsec = ns % 1000000000;
	if (nsec < 0) {
		sec--;
		nsec += 1000000000;
	}
	ts->tv_sec = (time_t)sec;
	ts->tv_nsec = (long)nsec;
}

void core_attr_posix(struct core_req *rq, size_t view, const struct obj_posix *px,
		     struct stat *st)
{
	if (px->have & POSIX_MODE) {
		mode_t m = px->mode & 07777, type = st->st_mode & S_IFMT;
		if (!core_view_writable(rq, view))
			m &= ~(mode_t)0222;
		/* an object may hold a symbolic link, a FIFO, a socket or a
		 * device node (its type in the mode, as s3fs writes it) */
		mode_t stored = px->mode & S_IFMT;
		if (type == S_IFREG && stored && stored != S_IFDIR)
			type = stored;
		st->st_mode = type | m;
	}
	if (px->have & POSIX_UID)
		st->st_uid = px->uid;
	if (px->have & POSIX_GID)
		st->st_gid = px->gid;
	if (px->have & POSIX_MTIME) {
		ts_of_ns(px->mtime_ns, &st->st_mtim);
		st->st_atim = st->st_mtim;
	}
	if (px->have & POSIX_ATIME)
		ts_of_ns(px->atime_ns, &st->st_atim);
	if (px->have & POSIX_CTIME)
		ts_of_ns(px->ctime_ns, &st->st_ctim);
}

mode_t core_file_perm(struct core_req *rq, size_t view)
{
	struct core *c = rq->c;
	return shown_mode(c, false, core_view_writable(rq, view));
}

void core_attr_view_dir(struct core_req *rq, size_t view, uint64_t ino, struct stat *st)
{
	struct core *c = rq->c;
	core_attr_dir(c, ino, st);
	if (core_view_writable(rq, view))
		st->st_mode = S_IFDIR | shown_mode(c, true, true);
}

/* What a new directory or file keeps: the mode asked, the caller's ids,
 * and (files) the time it was made. */
void core_who_posix(const struct core_who *who, bool with_mtime, struct obj_posix *px)
{
	memset(px, 0, sizeof *px);
	if (!who)
		return;
	px->have = POSIX_MODE | POSIX_UID | POSIX_GID;
	px->mode = who->mode & (S_IFMT | 07777);
	px->uid = who->uid;
	px->gid = who->gid;
	if (with_mtime) {
		px->have |= POSIX_MTIME;
		px->mtime_ns = core_now_ns();
	}
}

static int64_t ns_of(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* The attributes set changes, and ctime: now. */
void core_set_posix(const struct core_set *set, struct obj_posix *px)
{
	int64_t now = core_now_ns();
	if (set->what & CORE_SET_MODE) {
		px->have |= POSIX_MODE;
		px->mode = set->mode & 07777;
	}
	if (set->what & CORE_SET_UID) {
		px->have |= POSIX_UID;
		px->uid = set->uid;
	}
	if (set->what & CORE_SET_GID) {
		px->have |= POSIX_GID;
		px->gid = set->gid;
	}
	if (set->what & (CORE_SET_MTIME | CORE_SET_MTIME_NOW)) {
		px->have |= POSIX_MTIME;
		px->mtime_ns = set->what & CORE_SET_MTIME_NOW ? now : ns_of(&set->mtime);
	}
	if (set->what & (CORE_SET_ATIME | CORE_SET_ATIME_NOW)) {
		px->have |= POSIX_ATIME;
		px->atime_ns = set->what & CORE_SET_ATIME_NOW ? now : ns_of(&set->atime);
	}
	px->have |= POSIX_CTIME;
	px->ctime_ns = now;
}

/* Path of child `name` under `dir` ("" is a view's root). */
int core_path_join(const char *dir, const char *name, char *out, size_t outlen)
{
	int n = *dir ? snprintf(out, outlen, "%s/%s", dir, name)
		     : snprintf(out, outlen, "%s", name);
	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

int core_child(struct core_req *rq, uint64_t parent, const char *name, size_t *view,
	       char *path, size_t pathlen)
{
	struct core *c = rq->c;
	if (strlen(name) > CORE_NAME_MAX)
		return -ENAMETOOLONG;
	if (parent < INODE_FIRST_DYNAMIC)
		return parent == INODE_ROOT ? -EPERM : -EACCES;
	struct inode_info info;
	int rc = inode_get(c->d.it, parent, rq, &info);
	if (rc < 0)
		return rc;
	if (!info.is_dir)
		rc = -ENOTDIR;
	else
		rc = core_path_join(info.path, name, path, pathlen);
	*view = info.view;
	free(info.path);
	return rc;
}

int core_writable_child(struct core_req *rq, uint64_t parent, const char *name,
			size_t *view, char *path, size_t pathlen)
{
	int rc = core_child(rq, parent, name, view, path, pathlen);
	if (rc == 0 && !view_writable(core_view(rq, *view)))
		rc = -EROFS;
	return rc;
}

int core_path_object(struct core_req *rq, size_t view, const char *path, char *bucket,
		     size_t blen, char *key, size_t klen)
{
	const struct view *v = core_view(rq, view);
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

/* A change to pass on; vname and path: the name the kernel knows from the
 * reply to the request that made it (or NULL). */
struct local_ctx {
	struct core *c;
	const char *vname, *path;
	bool same;                   /* the kernel's view of that name stays right */
};

static void local_change(void *ctx, const char *view, const char *path, int what)
{
	struct local_ctx *l = ctx;
	bool named = l->path && view && strcmp(view, l->vname) == 0 &&
		     strcmp(path, l->path) == 0;
	if (what == INDEX_CHANGED && named && l->same)
		return;              /* a sealed file's upload: same bytes */
	if (what == INDEX_ADDED && named)
		what |= CORE_CHANGE_REPLIED;
	if (l->c->d.changed)
		l->c->d.changed(l->c->d.changed_ctx, view, path, what);
}

int core_index_made(struct core *c, const struct obj_meta *o, const char *vname,
		    const char *path)
{
	struct local_ctx l = { c, vname, path, false };
	int rc = index_apply_own(c->d.ix, o, local_change, &l);
	return rc < 0 ? rc : 0;
}

int core_index_uploaded(struct core *c, const struct obj_meta *o, const char *vname,
			const char *path)
{
	struct local_ctx l = { c, vname, path, true };
	int rc = index_apply_own(c->d.ix, o, local_change, &l);
	return rc < 0 ? rc : 0;
}

int core_index_local(struct core *c, const struct obj_meta *o)
{
	return core_index_made(c, o, NULL, NULL);
}

int core_index_newer(struct core *c, const struct obj_meta *o)
{
	struct local_ctx l = { c, NULL, NULL, false };
	int rc = index_apply_newer(c->d.ix, o, local_change, &l);
	return rc < 0 ? rc : 0;
}
