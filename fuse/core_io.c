/* core_io.c — open, read, write and truncate of a descriptor (core.h),
 * the staged copy a writer opens, and the generated files of .facetfs/.
 * The staged copy's upload is core_commit.c's; the commit points that
 * call it (close, fsync) are core_drain.c's.
 *
 * Visibility (docs/design.md "Visibility policies"; the read rule is
 * sync/cache/visibility.h):
 *  - a descriptor opened for writing works on the inode's staged copy
 *    (sync/stage/stage.h); close (flush) uploads it whole and returns only once S3
 *    has it (EIO and the data kept otherwise); under `commit` fsync does too.
 *    The index is updated at once so this mount sees its own change.
 *  - `session`: open() validates the version with one HEAD; the descriptor
 *    reads that version (-ESTALE once it is gone from S3 and not held
 *    here). The kernel page cache is kept across opens while the ETag stays
 *    the same; a descriptor opened on a new version while another
 *    descriptor of the inode reads an older one gets direct I/O, so the
 *    page cache never mixes two versions.
 *  - a cold stream (the first open of a large object's version, which the
 *    burst buffer does not store: sync/cache/reader.h) gets direct I/O under
 *    `session` and `eventual` when d.cold_direct is set; later opens use
 *    the page cache as below.
 *  - `commit`: descriptors use direct I/O and every read validates the
 *    version with a HEAD first, so a descriptor opened before another
 *    client's commit reads the new bytes.
 *  - `eventual`: open takes the version from the index (no HEAD; a name
 *    the index does not hold as an object, e.g. one still staged here, is
 *    opened as under `session`); page cache as under `session`; a read
 *    that finds S3 has moved on before the descriptor returned a byte
 *    moves it and writes what the HEAD said into the index (moved_index).
 *  - any descriptor of an inode that has a staged copy here reads the staged
 *    copy (read-your-writes inside the mount).
 */
#include "fuse/core_int.h"

#include "common/lock.h"
#include "common/log.h"
#include "common/s3.h"
#include "common/stats.h"
#include "sync/stage/stage.h"
#include "views/filter.h"
#include "views/index.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------- staged copies ---------- */

/* Find the inode's staged copy or make one: empty when truncating or
 * creating, otherwise filled with the object's current bytes. A new object
 * gets the view's on_create metadata and the attributes in px (NULL: none). */
static int ofile_get(struct core_req *rq, uint64_t ino, size_t view, const char *path,
		     const char *bucket, const char *key, bool trunc, bool create,
		     const struct obj_posix *px, struct ofile **out)
{
	struct core *c = rq->c;
	struct ofile *of;
	for (;;) {
		of = core_ofile_find(rq, ino, false);
		if (!of)     /* staged from another view */
			of = core_ofile_find_key(c, bucket, key);
		if (!of || core_ofile_writer_begin(c, of))
			break;
		core_ofile_put(c, of);   /* set aside meanwhile: the name's file now */
	}
	if (of) {
		core_ofile_set_ino(c, of, ino);
		int rc = trunc ? stage_file_truncate(of->sf, 0) : 0;
		if (rc < 0)
			core_ofile_writer_end(c, of);
		if (rc < 0) {
			core_ofile_put(c, of);
			return rc;
		}
		*out = of;
		return 0;
	}
	of = calloc(1, sizeof *of);
	if (!of || !(of->path = strdup(path)) || !(of->bucket = strdup(bucket)) ||
	    !(of->key = strdup(key)) ||
	    !(of->vname = strdup(view_name(core_view(rq, view))))) {
		if (of)
			core_ofile_free(of);
		return -ENOMEM;
	}
	of->ino = ino;
	of->refs = 1;
	of->writers = 1;

	/* The metadata the upload carries: the view's on_create for a new
	 * object, the current object's otherwise. */
	int rc = 0;
	struct obj_meta cur = { 0 };
	bool exists = false;
	if (!create) {
		rc = s3_head(c->d.s3, bucket, key, &cur);
		exists = rc == 0;
		if (rc == -ENOENT)
			rc = 0;
	}
	if (rc == 0 && exists) {
		of->meta = cur;
		memset(&cur, 0, sizeof cur);
		snprintf(of->base_etag, sizeof of->base_etag, "%s", of->meta.etag);
		/* Emptied, not filled: the change is to the version the mount
		 * showed, if the index knows one; a newer one the HEAD found is
		 * another client's, and a conflict. */
		struct obj_meta shown = { 0 };
		if (trunc && index_object_get(c->d.ix, bucket, key, &shown) == 0 &&
		    !(shown.flags & OBJ_DELETED) && shown.etag[0])
			snprintf(of->base_etag, sizeof of->base_etag, "%s", shown.etag);
		obj_meta_release(&shown);
	} else if (rc == 0) {
		/* A create replaces what the index knows of the key (a name
		 * another view shows, or this mount's own last upload): that
		 * version was there before this open, not written after it. */
		struct obj_meta known = { 0 };
		if (create && index_object_get(c->d.ix, bucket, key, &known) == 0 &&
		    !(known.flags & OBJ_DELETED))
			snprintf(of->base_etag, sizeof of->base_etag, "%s", known.etag);
		obj_meta_release(&known);
		size_t n;
		const struct obj_kv *kv = view_on_create(core_view(rq, view), &n);
		for (size_t i = 0; rc == 0 && i < n; i++)
			rc = obj_kv_add(&of->meta.meta, &of->meta.n_meta, kv[i].name,
					kv[i].value);
		if (rc == 0 && px)
			rc = posix_meta_put(&of->meta.meta, &of->meta.n_meta, px);
		of->meta.flags |= OBJ_HAS_META;
	}
	/* The staged file's metadata (a streamed upload's, fixed at its
	 * first part) carries no time of its own: see commit_mtime. */
	struct obj_kv *up = NULL;
	size_t n_up = 0;
	if (rc == 0)
		rc = obj_kv_copy(&up, &n_up, of->meta.meta, of->meta.n_meta);
	if (rc == 0) {
		posix_meta_drop_times(up, &n_up, POSIX_WRITE_TIMES);
		rc = stage_file_new(c->d.stage, bucket, key, up, n_up,
				    of->meta.content_type, &of->sf);
	}
	if (rc == 0 && view_write_back(core_view(rq, view)))
		stage_file_nostream(of->sf);     /* the drain uploads it after */
	obj_kv_free(up, n_up);
	if (rc == 0 && exists && !trunc && of->meta.size > 0) {
		rc = stage_file_fill(of->sf, bucket, key, of->meta.size,
				     of->meta.etag);
	}
	obj_meta_release(&cur);
	if (rc < 0) {
		core_ofile_free(of);
		return rc;
	}

	/* Another descriptor may have made one meanwhile: use the first. */
	struct ofile *other = core_ofile_insert(c, of);
	if (other && !core_ofile_writer_begin(c, other)) {
		core_ofile_put(c, other);        /* set aside meanwhile */
		core_ofile_free(of);
		return -EAGAIN;
	}
	if (other) {
		core_ofile_free(of);
		of = other;
		core_ofile_set_ino(c, of, ino);
		if (trunc && (rc = stage_file_truncate(of->sf, 0)) < 0) {
			core_ofile_writer_end(c, of);
			core_ofile_put(c, of);
			return rc;
		}
	}
	*out = of;
	return 0;
}

/* ---------- descriptors ---------- */

static struct core_file *file_new(void)
{
	struct core_file *f = calloc(1, sizeof *f);
	if (f)
		pthread_mutex_init(&f->lock, NULL);
	return f;
}

struct ofile *core_file_close(struct core *c, struct core_file *f)
{
	if (!f)
		return NULL;
	if (f->cached)
		inode_close_read(c->d.it, f->ino, false);
	vis_version_close(f->ver);
	core_ofile_pub_put(f->pub);
	struct ofile *held = NULL;
	if (f->of)   /* it may stay, waiting for the drain: no descriptor meanwhile */
		stage_file_park(f->of->sf);
	if (f->of && f->writable && core_ofile_writer_end(c, f->of))
		held = f->of;        /* the caller's reference now */
	else if (f->of)
		core_ofile_put(c, f->of);
	free(f->bucket);
	free(f->key);
	free(f->vname);
	free(f->text);
	pthread_mutex_destroy(&f->lock);
	free(f);
	return held;
}

static int open_meta(struct core *c, uint64_t ino, int flags, struct core_file *f,
		     struct core_open_cache *cache)
{
	if (ino == INODE_META_CONTROL) {
		f->kind = FILE_CONTROL;
	} else {
		if ((flags & O_ACCMODE) != O_RDONLY)
			return -EACCES;
		f->kind = FILE_TEXT;
		f->text = ino == INODE_META_STATS ? c->d.stats_json(c->d.ctx)
			: ino == INODE_META_PENDING ? (c->d.pending_text
				? c->d.pending_text(c->d.pending_ctx) : strdup(""))
			: c->d.views_json(c->d.ctx);
		if (!f->text)
			return -ENOMEM;
		f->text_len = strlen(f->text);
	}
	cache->direct_io = true;     /* generated: size unknown until read */
	return 0;
}

/* The descriptor's view index now (the view set may have changed). */
static size_t file_view(struct core_req *rq, struct core_file *f)
{
	return core_view_follow(rq, &f->view, f->vname);
}

/* `eventual`: S3 had another version than the index when a descriptor
 * first read: the index takes what the HEAD said (keeping the fields a
 * HEAD does not give: tags) if it is provably newer than what the index
 * holds, until the object's event comes. */
static void moved_index(void *ctx, const struct obj_meta *o)
{
	struct core *c = ctx;
	struct obj_meta cur = { 0 }, nr = { 0 };
	int rc = index_object_get(c->d.ix, o->bucket, o->key, &cur);
	/* Only a provably newer version: the HEAD and a later event may
	 * cross (an older HEAD answer must not undo a newer event). Checked
	 * here to skip the write, and again under the index's write lock. */
	if (rc == 0 && !(cur.flags & OBJ_DELETED) &&
	    o->mtime_ns > cur.mtime_ns + INDEX_TIME_SLACK_NS)
		rc = obj_meta_copy(&nr, o);
	else
		rc = -ENOENT;        /* gone, or not provably newer: the event will tell */
	if (rc == 0) {
		obj_kv_free(nr.tags, nr.n_tags);
		nr.tags = cur.tags;
		nr.n_tags = cur.n_tags;
		cur.tags = NULL;
		cur.n_tags = 0;
		nr.flags = (o->flags | (cur.flags & OBJ_HAS_TAGS)) & ~(uint32_t)OBJ_DELETED;
		rc = core_index_newer(c, &nr);
		if (rc < 0)
			log_warn("index update for %s/%s after a changed version: %s",
				 o->bucket, o->key, strerror(-rc));
	}
	obj_meta_release(&nr);
	obj_meta_release(&cur);
}

/* The version a read-only descriptor reads: under `eventual` the index's
 * (no S3 request, *from_index), otherwise validated now (one HEAD). */
static int open_version(struct core_req *rq, struct core_file *f, size_t view,
			const char *path, bool *from_index)
{
	struct core *c = rq->c;
	*from_index = false;
	enum vis_policy p = core_view_policy(rq, view);
	if (vis_open_trusts_index(p)) {
		struct obj_meta o = { 0 };
		int rc = index_object(c->d.ix, core_view(rq, view), path, &o);
		if (rc == 0 && o.bucket && o.key && !strcmp(o.bucket, f->bucket) &&
		    !strcmp(o.key, f->key) && o.etag[0])
			rc = vis_version_open_known(&c->src, f->bucket, f->key, o.etag,
						    o.size, &f->ver);
		else if (rc == 0)
			rc = -ENOENT;
		obj_meta_release(&o);
		if (rc == 0) {
			stats_inc(&c->ctr.open_from_index);
			vis_version_on_moved(f->ver, moved_index, c);
			*from_index = true;
			return 0;
		}
		if (rc != -ENOENT)
			return rc;
	}
	return vis_version_open(&c->src, f->bucket, f->key, &f->ver);
}

/* Might the kernel hold another size than `size` for (view, path)? It
 * holds what a lookup or getattr answered from the index, for as long as
 * the attribute timeout unless an event invalidates it. A HEAD can find a
 * version whose event has not been applied here yet; through the page
 * cache the kernel would end its reads at the index's size (a file grown
 * by another client would read short, or empty). */
static bool kernel_size_unsure(struct core_req *rq, size_t view, const char *path,
			       uint64_t size)
{
	struct core *c = rq->c;
	struct obj_meta o = { 0 };
	bool unsure = index_object(c->d.ix, core_view(rq, view), path, &o) < 0 ||
		      (o.flags & OBJ_DELETED) || o.size != size;
	obj_meta_release(&o);
	return unsure;
}

/* A read-only descriptor: the version it reads, and how the kernel may
 * cache its pages. */
static int open_reader(struct core_req *rq, uint64_t ino, const char *path,
		       struct core_file *f, struct core_open_cache *cache)
{
	struct core *c = rq->c;
	cache->no_flush = true;          /* nothing to publish at close */
	struct ofile *of = core_ofile_find(rq, ino, false);
	if (of) {
		/* Staged here: reads take the staged copy, then the version
		 * its upload makes (read_version), never what S3 held
		 * before. Direct I/O: every read comes to the core, which
		 * alone knows when the copy leaves; the inode's pages (our
		 * own writes) stay. */
		f->pub = core_ofile_pub(c, of);
		core_ofile_put(c, of);
		if (!f->pub)
			return -ENOMEM;
		cache->direct_io = true;
		cache->keep_cache = true;
		return 0;
	}
	bool from_index;
	int rc = open_version(rq, f, file_view(rq, f), path, &from_index);
	if (rc < 0)
		return rc;
	if (core_view_policy(rq, file_view(rq, f)) == VIS_COMMIT) {
		cache->direct_io = true;     /* every read validates; no page cache */
	} else if (c->d.cold_direct && vis_version_cold(f->ver)) {
		/* A cold stream: its bytes go from the reader's buffer to
		 * the caller's, not through pages nobody reads again; the
		 * next open (stored by the burst buffer) uses the page
		 * cache. Pages of the inode, of any version, are left as
		 * they are for their own descriptors. */
		cache->direct_io = true;
		cache->keep_cache = true;
		stats_inc(&c->ctr.open_direct_cold);
	} else {
		/* Never two versions in the inode's page cache: a new version
		 * while older descriptors read the old one from it gets direct
		 * I/O (inode.h). */
		char etag[72];
		uint64_t size;
		bool direct, keep;
		vis_version_etag(f->ver, etag, &size);
		if (!from_index && kernel_size_unsure(rq, file_view(rq, f), path, size)) {
			/* Direct I/O: reads are not cut at the kernel's size.
			 * The version's event (or the next HEAD that agrees
			 * with the index) brings the page cache back. */
			cache->direct_io = true;
			cache->keep_cache = true;
			stats_inc(&c->ctr.open_direct_size);
			return 0;
		}
		inode_open_read(c->d.it, ino, etag, size, &direct, &keep);
		cache->direct_io = direct;
		cache->keep_cache = keep;
		f->cached = !direct;
		/* Pages of the inode serve this descriptor without a read
		 * reaching the core: it can never know it returned no byte, so
		 * `eventual` must not move it to another version. */
		if (f->cached)
			vis_version_served(f->ver);
	}
	return 0;
}

static int open_object(struct core_req *rq, uint64_t ino, int flags, struct core_file *f,
		       struct core_open_cache *cache)
{
	struct core *c = rq->c;
	struct inode_info info;
	int rc = inode_get(c->d.it, ino, rq, &info);
	if (rc < 0)
		return rc;
	char bucket[256], key[4096];
	bool writing = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
	f->kind = FILE_OBJECT;
	f->ino = ino;
	f->view = info.view;
	f->vname = strdup(view_name(core_view(rq, info.view)));
	if (!f->vname)
		rc = -ENOMEM;
	else if (info.is_dir)
		rc = -EISDIR;
	else if (writing && !view_writable(core_view(rq, info.view)))
		rc = -EROFS;
	else
		rc = core_path_object(rq, info.view, info.path, bucket, sizeof bucket,
				      key, sizeof key);
	if (rc == 0 && (!(f->bucket = strdup(bucket)) || !(f->key = strdup(key))))
		rc = -ENOMEM;
	if (rc == 0 && writing) {
		rc = ofile_get(rq, ino, info.view, info.path, bucket, key,
			       flags & O_TRUNC, false, NULL, &f->of);
		f->writable = rc == 0;
		cache->keep_cache = true;    /* our own writes keep the page cache right */
	} else if (rc == 0) {
		rc = open_reader(rq, ino, info.path, f, cache);
	}
	free(info.path);
	return rc;
}

int core_open(struct core_req *rq, uint64_t ino, int flags, struct core_file **out,
	      struct core_open_cache *cache)
{
	struct core *c = rq->c;
	stats_inc(&c->ctr.open);
	memset(cache, 0, sizeof *cache);
	struct core_file *f = file_new();
	if (!f)
		return -ENOMEM;
	int rc;
	if (ino == INODE_ROOT || ino == INODE_META_DIR)
		rc = -EISDIR;
	else if (ino < INODE_FIRST_DYNAMIC)
		rc = open_meta(c, ino, flags, f, cache);
	else
		rc = open_object(rq, ino, flags, f, cache);
	if (rc < 0) {
		core_ofile_put(c, core_file_close(c, f));
		return rc;
	}
	*out = f;
	return 0;
}

int core_create(struct core_req *rq, uint64_t parent, const char *name,
		const struct core_who *who, struct core_entry *e,
		struct core_file **out, struct core_open_cache *cache)
{
	struct core *c = rq->c;
	struct obj_posix px;
	core_who_posix(who, true, &px);
	size_t view;
	char path[PATH_MAX], bucket[256], key[4096] = "";
	struct core_file *f = NULL;
	memset(e, 0, sizeof *e);
	memset(cache, 0, sizeof *cache);
	int rc = core_writable_child(rq, parent, name, &view, path, sizeof path);
	if (rc == 0)
		rc = core_path_object(rq, view, path, bucket, sizeof bucket, key, sizeof key);
	if (rc == 0 && !view_key_can_match(core_view(rq, view), key))
		rc = -EINVAL;        /* the object could never be in this view */
	if (rc == 0 && !(f = file_new()))
		rc = -ENOMEM;
	if (rc == 0 && (!(f->bucket = strdup(bucket)) || !(f->key = strdup(key))))
		rc = -ENOMEM;
	if (rc == 0) {
		const char *vname = view_name(core_view(rq, view));
		e->ino = inode_ref(c->d.it, vname, path, false);
		rc = e->ino ? 0 : -ENOMEM;
	}
	if (rc == 0) {
		f->kind = FILE_OBJECT;
		f->ino = e->ino;
		f->view = view;
			f->vname = strdup(view_name(core_view(rq, view)));
		rc = ofile_get(rq, e->ino, view, path, bucket, key, true, true, &px, &f->of);
		if (rc < 0)
			inode_unref(c->d.it, e->ino, 1);
	}
	/* Listed from now on, in every view of its key, while it is written:
	 * this mount's own version with no ETag yet. */
	if (rc == 0)
		core_ofile_index(c, f->of, "", false);
	if (rc < 0) {
		if (rc == -EINVAL)
			log_info("create %s in view %s refused: key %s cannot match the view",
				 name, view < core_views(rq)->n
					       ? view_name(core_view(rq, view)) : "?", key);
		core_ofile_put(c, core_file_close(c, f));
		return rc;
	}
	f->writable = true;
	core_dir_touch(rq, view, path);
	core_attr_file(c, e->ino, 0, core_now_ns(), core_file_perm(rq, view), &e->attr);
	core_attr_posix(rq, view, &px, &e->attr);
	cache->keep_cache = true;
	*out = f;
	return 0;
}

/* The staged copy f reads and syncs, if any: a writable descriptor's own;
 * any other descriptor of an inode staged here reads it too (our own
 * writes), through a reference in *held that the caller puts (NULL when
 * none was taken). */
static struct stage_file *staged_copy(struct core_req *rq, struct core_file *f,
				      struct ofile **held)
{
	*held = f->of ? NULL : core_ofile_find(rq, f->ino, true);
	struct ofile *of = f->of ? f->of : *held;
	return of ? of->sf : NULL;
}

int core_file_sync(struct core_req *rq, struct core_file *f)
{
	struct core *c = rq->c;
	/* Not a visibility point: the staged bytes made durable here (under
	 * cache.durability "power"), also through a read-only descriptor of
	 * an inode another one writes (`sync FILE` opens it read-only). */
	if (f->kind != FILE_OBJECT)
		return 0;
	struct ofile *held;
	struct stage_file *sf = staged_copy(rq, f, &held);
	int rc = sf ? stage_file_sync(sf) : 0;
	core_ofile_put(c, held);
	return rc;
}

static ssize_t read_text(struct core_file *f, void *buf, size_t len, off_t off)
{
	mod_lock(&f->lock);
	size_t n = 0;
	if (f->text && off >= 0 && (size_t)off < f->text_len) {
		n = f->text_len - (size_t)off < len ? f->text_len - (size_t)off : len;
		memcpy(buf, f->text + off, n);
	}
	mod_unlock(&f->lock);
	return (ssize_t)n;
}

/* The S3 version f reads (*v). A descriptor opened while its file was
 * staged here takes, at its first read after the staged copy left, the
 * version of that copy's last upload (-ESTALE if none was made: the
 * name was removed before); under `commit`, whose reads validate, what
 * S3 has of its key. */
static int read_version(struct core *c, struct core_file *f, enum vis_policy p,
			struct vis_version **v)
{
	if (!f->pub) {
		*v = f->ver;
		return 0;
	}
	int rc = 0;
	mod_lock(&f->lock);
	if (!f->ver && vis_read_validates(p)) {
		rc = vis_version_open(&c->src, f->bucket, f->key, &f->ver);
	} else if (!f->ver) {
		struct obj_meta o;
		rc = core_ofile_pub_version(c, f->pub, &o);
		if (rc == 0)
			rc = vis_version_open_known(&c->src, o.bucket, o.key, o.etag,
						    o.size, &f->ver);
		obj_meta_release(&o);
	}
	*v = f->ver;
	mod_unlock(&f->lock);
	return rc;
}

ssize_t core_read(struct core_req *rq, struct core_file *f, void *buf, size_t len,
		  off_t off)
{
	struct core *c = rq->c;
	stats_inc(&c->ctr.read);
	if (f->kind != FILE_OBJECT)
		return read_text(f, buf, len, off);
	struct ofile *held;
	struct stage_file *sf = staged_copy(rq, f, &held);
	if (sf) {
		ssize_t n = stage_file_pread(sf, buf, len, (uint64_t)off);
		core_ofile_put(c, held);
		return n;
	}
	enum vis_policy p = core_view_policy(rq, file_view(rq, f));
	struct vis_version *v;
	int rc = read_version(c, f, p, &v);
	if (rc < 0)
		return rc;
	return vis_version_read(v, p, buf, len, (uint64_t)off);
}

ssize_t core_read_data(struct core_req *rq, struct core_file *f, size_t len, off_t off,
		       struct core_rdata *d)
{
	struct core *c = rq->c;
	memset(d, 0, sizeof *d);
	struct ofile *held = NULL;
	if (f->kind == FILE_OBJECT && !staged_copy(rq, f, &held)) {
		stats_inc(&c->ctr.read);
		enum vis_policy p = core_view_policy(rq, file_view(rq, f));
		struct vis_version *v;
		int rc = read_version(c, f, p, &v);
		if (rc < 0)
			return rc;
		struct reader_piece pc[READER_PIECES];
		unsigned n = 0;
		ssize_t got = vis_version_read_pieces(v, p, len, (uint64_t)off, pc, &n);
		_Static_assert(READER_PIECES <= CORE_READ_IOV, "room for the pieces");
		for (unsigned i = 0; i < n; i++) {
			d->iov[i].base = pc[i].p;
			d->iov[i].len = pc[i].len;
			d->hold[i] = pc[i].hold;
		}
		d->n = n;
		return got;
	}
	core_ofile_put(c, held);
	/* A staged copy or a .facetfs file: copied, as core_read does. */
	if (!(d->own = malloc(len ? len : 1)))
		return -ENOMEM;
	ssize_t got = core_read(rq, f, d->own, len, off);
	if (got > 0) {
		d->n = 1;
		d->iov[0].base = d->own;
		d->iov[0].len = (size_t)got;
	}
	return got;
}

void core_read_done(struct core_rdata *d)
{
	for (unsigned i = 0; i < d->n; i++) {
		struct reader_piece p = { .hold = d->hold[i] };
		reader_pieces_put(&p, p.hold ? 1 : 0);
	}
	free(d->own);
	memset(d, 0, sizeof *d);
}

static ssize_t control_write(struct core *c, struct core_file *f, const char *buf,
			     size_t len)
{
	char *cmd = strndup(buf, len);
	if (!cmd)
		return -ENOMEM;
	cmd[strcspn(cmd, "\r\n")] = '\0';
	char *answer = c->d.control ? c->d.control(c->d.ctx, cmd) : NULL;
	free(cmd);
	if (!answer)
		answer = strdup("error: no answer\n");
	mod_lock(&f->lock);
	free(f->text);
	f->text = answer;
	f->text_len = answer ? strlen(answer) : 0;
	mod_unlock(&f->lock);
	return (ssize_t)len;
}

/* A write of a staged file begins: 0, or -EBADF if f is not open for
 * writing. */
static int staged_write_begin(struct core *c, struct core_file *f)
{
	if (!f->writable)
		return -EBADF;
	mod_lock(&c->ofile_lock);
	f->of->times_set = false;    /* a write after utimensat: modified now */
	mod_unlock(&c->ofile_lock);
	return 0;
}

ssize_t core_write(struct core_req *rq, struct core_file *f, const void *buf,
		   size_t len, off_t off)
{
	struct core *c = rq->c;
	if (f->kind == FILE_CONTROL)
		return control_write(c, f, buf, len);
	int rc = staged_write_begin(c, f);
	return rc ? rc : stage_file_pwrite(f->of->sf, buf, len, (uint64_t)off);
}

bool core_write_in_memory(const struct core_file *f)
{
	return f->kind == FILE_CONTROL;
}

ssize_t core_write_pipe(struct core_req *rq, struct core_file *f, int pipe_fd,
			size_t len, off_t off)
{
	struct core *c = rq->c;
	if (core_write_in_memory(f))
		return -EINVAL;
	int rc = staged_write_begin(c, f);
	return rc ? rc : stage_file_pwrite_pipe(f->of->sf, pipe_fd, len, (uint64_t)off);
}

int core_truncate_staged(struct core_req *rq, uint64_t ino, struct core_file *f,
			 uint64_t size, struct ofile **own_out)
{
	struct core *c = rq->c;
	struct ofile *of = f && f->writable ? f->of : NULL;
	bool own = false;
	*own_out = NULL;
	struct inode_info info = { 0 };
	int rc = 0;
	if (!of) {
		char bucket[256], key[4096];
		rc = ino < INODE_FIRST_DYNAMIC ? -EACCES : inode_get(c->d.it, ino, rq, &info);
		if (rc == 0 && info.is_dir)
			rc = -EISDIR;
		else if (rc == 0 && !view_writable(core_view(rq, info.view)))
			rc = -EROFS;
		if (rc == 0)
			rc = core_path_object(rq, info.view, info.path, bucket,
					      sizeof bucket, key, sizeof key);
		if (rc == 0)
			rc = ofile_get(rq, ino, info.view, info.path, bucket, key,
				       size == 0, false, NULL, &of);
		own = rc == 0;
	}
	if (rc == 0)
		rc = stage_file_truncate(of->sf, size);
	if (own)
		*own_out = of;
	free(info.path);
	return rc;
}
