/* core_metadata.c — an object's user metadata changed through the mount
 * (core_meta_change): chmod, chown and utimensat (core_setattr.c),
 * setxattr and removexattr (core_xattr.c). On the staged copy of a file
 * open here with changes not committed yet, which its commit uploads;
 * else in S3 at once by a COPY of the object onto itself with the new
 * metadata (x-amz-metadata-directive: REPLACE), which the index takes at
 * once. The source of a copy (core_copy_source: the index's record when
 * complete, else a HEAD) serves a rename's copy too. Calls core_drain.c
 * (a file waiting in the drain sealed again), core_ofile.c and core.c.
 */
#include "fuse/core_int.h"

#include "common/lock.h"
#include "common/log.h"
#include "common/stats.h"
#include "sync/stage/stage.h"
#include "views/filter.h"
#include "views/index.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------- the source of a copy ---------- */

/* Does the index's record hold all a copy carries over (ETag, user
 * metadata, content type: known, or known to be none)? */
static bool record_complete(const struct obj_meta *r)
{
	const uint32_t need = OBJ_HAS_META | OBJ_HAS_CTYPE;
	return !(r->flags & OBJ_DELETED) && (r->flags & need) == need && r->etag[0];
}

/* What a copy of bucket/key starts from: the index's record when it is
 * complete and use_index (no request: the copy names its ETag, so a
 * record older than the object gives -ESTALE there), else a HEAD. *from
 * says which (true: the index). Released by the caller. */
int core_copy_source(struct core *c, const char *bucket, const char *key,
		     bool use_index, struct obj_meta *src, bool *from)
{
	*from = false;
	if (use_index && index_object_get(c->d.ix, bucket, key, src) == 0) {
		if (record_complete(src)) {
			*from = true;
			stats_inc(&c->ctr.copy_from_index);
			return 0;
		}
		obj_meta_release(src);
	}
	int rc = s3_head(c->d.s3, bucket, key, src);
	if (rc == 0 && !(src->flags & OBJ_HAS_CTYPE))
		src->flags |= OBJ_HAS_CTYPE;     /* none sent: the store's default */
	return rc;
}

/* ---------- user metadata changed ---------- */

/* Swap the user metadata arrays of a and b. */
static void meta_swap(struct obj_meta *a, struct obj_meta *b)
{
	struct obj_kv *kv = a->meta;
	size_t n = a->n_meta;
	a->meta = b->meta;
	a->n_meta = b->n_meta;
	b->meta = kv;
	b->n_meta = n;
}

/* The new metadata of a file not open here (or open and clean: of, whose
 * metadata then follows): a copy of the object onto itself. Its source is the index's record when complete, so the usual
 * change is one COPY; a record older than the object (-ESTALE) or an
 * incomplete one costs a HEAD first. On success the index takes the new
 * record at once. */
static int meta_copy(struct core *c, uint64_t ino, const char *bucket, const char *key,
		     core_meta_edit_fn edit, void *ctx, struct ofile *of)
{
	struct obj_meta o = { 0 }, nm = { 0 };
	char etag[72] = "";
	bool from_index = false;
	int rc = 0;
	for (int round = 0; round < 2; round++) {
		obj_meta_release(&o);
		obj_meta_release(&nm);
		rc = core_copy_source(c, bucket, key, round == 0, &o, &from_index);
		if (rc == 0)
			rc = obj_kv_copy(&nm.meta, &nm.n_meta, o.meta, o.n_meta);
		if (rc == 0)
			rc = edit(ctx, &nm, NULL);
		if (rc == 0 && copy_in_parts(&c->d.copy, o.size))
			stats_inc(&c->ctr.copy_in_parts);
		if (rc == 0)
			rc = copy_object(c->d.s3, &c->d.copy, bucket, key, key, &o,
					 nm.meta, nm.n_meta, etag);
		if (rc != -ESTALE || !from_index)
			break;
		stats_inc(&c->ctr.copy_stale_index);
		log_debug("metadata of %s/%s: the index had an older version; "
			  "reading the object", bucket, key);
	}
	struct obj_kv *kv = NULL;
	size_t n = 0;
	if (rc == 0 && of && obj_kv_copy(&kv, &n, nm.meta, nm.n_meta) == 0) {
		mod_lock(&c->ofile_lock);
		obj_kv_free(of->meta.meta, of->meta.n_meta);
		of->meta.meta = kv;
		of->meta.n_meta = n;
		mod_unlock(&c->ofile_lock);
	}
	if (rc == 0) {
		meta_swap(&o, &nm);
		/* Same bytes under a new ETag (a copy of a multipart object):
		 * pages the inode holds of the old one are of this one too, so
		 * the change's event must not retire it (inode_retire). */
		if (etag[0] && strcmp(etag, o.etag) != 0)
			inode_etag_moved(c->d.it, ino, o.etag, etag);
		if (etag[0])
			snprintf(o.etag, sizeof o.etag, "%s", etag);
		o.seq[0] = '\0';
		o.mtime_ns = core_now_ns();
		o.flags |= OBJ_HAS_META | OBJ_HAS_CTYPE;
		o.flags &= ~(uint32_t)OBJ_FROM_SCAN;
		core_index_local(c, &o);
	}
	obj_meta_release(&o);
	obj_meta_release(&nm);
	return rc;
}

int core_meta_change(struct core_req *rq, uint64_t ino, core_meta_edit_fn edit, void *ctx)
{
	struct core *c = rq->c;
	if (ino < INODE_FIRST_DYNAMIC)
		return -EOPNOTSUPP;
	struct inode_info info;
	int rc = inode_get(c->d.it, ino, rq, &info);
	if (rc < 0)
		return rc;
	char bucket[256], key[4096];
	struct obj_meta o = { 0 }, nm = { 0 };
	struct ofile *of = NULL;
	if (info.is_dir)
		rc = -EOPNOTSUPP;           /* S3 has no directories to tag */
	else if (!view_writable(core_view(rq, info.view)))
		rc = -EROFS;
	if (rc == 0)
		rc = core_path_object(rq, info.view, info.path, bucket, sizeof bucket,
				      key, sizeof key);
	if (rc == 0 && !(of = core_ofile_find(rq, ino, true))) {
		rc = meta_copy(c, ino, bucket, key, edit, ctx, NULL);
		goto out;
	}
	/* Open for writing here and all of it committed: no later commit is
	 * sure to come (the kernel sends a setattr between a close's flush
	 * and its release, as rsync's utimensat after close): a COPY now, and
	 * the open file's metadata follows for its next commit. */
	if (rc == 0 && !core_ofile_unlinked(c, of) && !stage_file_dirty(of->sf)) {
		rc = meta_copy(c, ino, bucket, key, edit, ctx, of);
		goto out;
	}
	/* Open with changes not yet committed: the staged copy takes it, the
	 * commit uploads it (no request now). */
	if (rc == 0) {
		mod_lock(&c->ofile_lock);
		rc = obj_meta_copy(&o, &of->meta);
		mod_unlock(&c->ofile_lock);
	}
	if (rc == 0)
		rc = obj_kv_copy(&nm.meta, &nm.n_meta, o.meta, o.n_meta);
	if (rc == 0)
		rc = edit(ctx, &nm, of);
	if (rc == 0)
		rc = stage_file_set_meta(of->sf, nm.meta, nm.n_meta, o.content_type);
	if (rc == 0) {
		mod_lock(&c->ofile_lock);
		meta_swap(&of->meta, &nm);
		mod_unlock(&c->ofile_lock);
		/* closed and waiting in write-back's drain: durable again with
		 * the change (its journal said "dirty" since) */
		rc = core_drain_reseal(c, of);
	}
out:
	core_ofile_put(c, of);
	obj_meta_release(&o);
	obj_meta_release(&nm);
	free(info.path);
	return rc;
}
