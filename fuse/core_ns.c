/* core_ns.c — changes to the namespace through the mount (unlink, rename,
 * mkdir, rmdir), and the change of an object's user metadata
 * (core_meta_change) that chmod, chown, utimensat and the xattrs
 * (core_xattr.c) make.
 *
 * Every change is made in S3 first and then applied to the index at once,
 * so this mount sees it before the event arrives; other mounts follow the
 * event. Read-only views answer EROFS.
 *
 * A name unlinked or renamed over while a file staged under it is open
 * here leaves with it: the descriptors keep the staged bytes, nothing
 * publishes them, and a file made again under the name is another file.
 *
 * What is not atomic (S3 has no rename): rename is a server-side COPY then
 * a DELETE of the source; a crash between the two leaves both names.
 * Renaming a directory that holds objects is refused with EXDEV, so mv(1)
 * falls back to copying file by file. Directories made with mkdir are in
 * c->mkdirs and stored in the index (S3 has no directories: index_dir_add),
 * so an empty one outlives a restart; rmdir and rename update both.
 * A change of user metadata is a COPY of the object onto itself with the
 * new metadata (x-amz-metadata-directive: REPLACE): setxattr and
 * removexattr of user.* (core_xattr.c), chmod, chown and utimensat
 * (core_attr.c), through core_meta_change.
 */
#include "fuse/core_int.h"

#include "common/lock.h"
#include "common/log.h"
#include "common/s3.h"
#include "common/stats.h"
#include "sync/stage.h"
#include "views/filter.h"
#include "views/index.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------- what is there ---------- */

static int first_child(void *ctx, const char *name, const struct index_attr *a)
{
	(void)name;
	(void)a;
	*(bool *)ctx = true;
	return 1;
}

/* Does the directory hold anything (in the index or made here)? */
static bool dir_has_children(struct core *c, size_t view, const char *path)
{
	bool any = false;
	index_readdir(c->d.ix, core_view(c, view), path, NULL, first_child, &any);
	return any || core_tables_have_child(c, view, path);
}

static bool name_exists(struct core *c, size_t view, const char *path, bool *is_dir)
{
	struct index_attr a;
	*is_dir = false;
	if (index_lookup(c->d.ix, core_view(c, view), path, &a) == 0) {
		*is_dir = a.is_dir;
		return true;
	}
	if (core_mkdir_exists(c, view, path)) {
		*is_dir = true;
		return true;
	}
	struct ofile *of = core_ofile_find_path(c, view, path);
	core_ofile_put(c, of);
	return of != NULL;
}

/* ---------- mkdir, rmdir ---------- */

int core_mkdir(struct core *c, uint64_t parent, const char *name,
	       const struct core_who *who, struct core_entry *e)
{
	size_t view;
	char path[PATH_MAX];
	bool is_dir;
	memset(e, 0, sizeof *e);
	int rc = core_writable_child(c, parent, name, &view, path, sizeof path);
	if (rc == 0 && name_exists(c, view, path, &is_dir))
		rc = -EEXIST;
	const char *vname = rc == 0 ? view_name(core_view(c, view)) : NULL;
	struct obj_posix px;
	core_who_posix(who, true, &px);
	if (px.have & POSIX_MTIME) {     /* a new directory: every time is now */
		px.have |= POSIX_ATIME | POSIX_CTIME;
		px.atime_ns = px.ctime_ns = px.mtime_ns;
	}
	if (rc == 0 && (rc = index_dir_add(c->d.ix, vname, path, &px)) == 0 &&
	    (rc = core_mkdir_remember(c, vname, path, &px)) < 0)
		index_dir_remove(c->d.ix, vname, path);
	if (rc < 0)
		return rc;
	core_dir_touch(c, view, path);
	e->ino = inode_ref(c->d.it, vname, path, true);
	return e->ino ? core_attr_of(c, e->ino, &e->attr) : -ENOMEM;
}

int core_rmdir(struct core *c, uint64_t parent, const char *name)
{
	size_t view;
	char path[PATH_MAX];
	bool is_dir;
	int rc = core_writable_child(c, parent, name, &view, path, sizeof path);
	if (rc == 0 && !name_exists(c, view, path, &is_dir))
		rc = -ENOENT;
	else if (rc == 0 && !is_dir)
		rc = -ENOTDIR;
	else if (rc == 0 && dir_has_children(c, view, path))
		rc = -ENOTEMPTY;
	if (rc == 0 && core_mkdir_exists(c, view, path))
		rc = index_dir_remove(c->d.ix, view_name(core_view(c, view)), path);
	if (rc == 0) {
		core_mkdir_forget(c, view, path);
		core_dir_touch(c, view, path);
	}
	return rc;
}

/* ---------- unlink, rename ---------- */

static int delete_object_but(struct core *c, const char *bucket, const char *key,
			     struct ofile *keep)
{
	int rc = s3_delete(c->d.s3, bucket, key);
	if (rc < 0)
		return rc;
	if (c->d.stage)
		stage_key_replaced_but(c->d.stage, bucket, key, keep ? keep->sf : NULL);
	struct obj_meta o = { 0 };
	o.bucket = (char *)bucket;
	o.key = (char *)key;
	o.mtime_ns = core_now_ns();
	o.flags = OBJ_DELETED;
	core_index_local(c, &o);
	return 0;
}

static int delete_object(struct core *c, const char *bucket, const char *key)
{
	return delete_object_but(c, bucket, key, NULL);
}

/* The DELETE of a pending file's old name after a rename: only the
 * version the file was based on (base) is deleted. One another client
 * wrote since stays, and the index learns it; none there is nothing to
 * do. S3 has no conditional DELETE: a HEAD just before. */
static int delete_if_base(struct core *c, const char *bucket, const char *key,
			  const char *base, struct ofile *of)
{
	struct obj_meta cur = { 0 };
	int rc = s3_head(c->d.s3, bucket, key, &cur);
	if (rc == 0 && strcmp(cur.etag, base) != 0) {
		log_warn("rename: %s/%s was written by another client (ETag %s, the "
			 "renamed file was based on %s): it stays", bucket, key,
			 cur.etag, base);
		cur.flags |= OBJ_HAS_META;
		core_index_newer(c, &cur);
	} else if (rc == 0) {
		rc = delete_object_but(c, bucket, key, of);
	} else if (rc == -ENOENT) {
		rc = 0;
	}
	obj_meta_release(&cur);
	return rc;
}

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
static int copy_source(struct core *c, const char *bucket, const char *key,
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

int core_unlink(struct core *c, uint64_t parent, const char *name)
{
	size_t view;
	char path[PATH_MAX], bucket[256], key[4096];
	bool is_dir;
	int rc = core_writable_child(c, parent, name, &view, path, sizeof path);
	if (rc == 0 && !name_exists(c, view, path, &is_dir))
		rc = -ENOENT;
	else if (rc == 0 && is_dir)
		rc = -EISDIR;
	if (rc == 0)
		rc = core_path_object(c, view, path, bucket, sizeof bucket, key, sizeof key);
	/* What fstat of a descriptor still open shows after the unlink. */
	const char *vname = rc == 0 ? view_name(core_view(c, view)) : NULL;
	uint64_t held;
	struct stat gst;
	bool snap = rc == 0 && inode_find(c->d.it, vname, path, &held) &&
		    core_attr_of(c, held, &gst) == 0;
	if (rc == 0) {
		/* Open descriptors keep their data but never publish it again. */
		struct ofile *of = core_ofile_find_path(c, view, path);
		core_ofile_unlink(c, of);
		core_ofile_put(c, of);
		rc = delete_object(c, bucket, key);
	}
	/* The kernel's inode of the name stays with its open descriptors. */
	if (rc == 0) {
		inode_unname_gone(c->d.it, vname, path, snap ? &gst : NULL);
		core_dir_touch(c, view, path);
	}
	return rc;
}

/* After a rename: the kernel keeps the moved inode, which now stands for
 * npath (and an inode that stood for npath no longer does). Files and
 * directories alike: without it a GETATTR of the moved node asks about
 * the old path, which is gone (ENOENT). */
static void rename_inode(struct core *c, size_t view, const char *path, const char *npath,
			 const struct stat *dst_st)
{
	uint64_t ino;
	const char *vname = view_name(core_view(c, view));
	/* The inode that stood for npath keeps, for its open descriptors,
	 * what it was (nlink 0), as after an unlink: the name is another
	 * file's now. */
	if (dst_st)
		inode_unname_gone(c->d.it, vname, npath, dst_st);
	if (inode_find(c->d.it, vname, path, &ino))
		inode_rename(c->d.it, ino, npath);
	else
		inode_unname(c->d.it, vname, npath);
}

/* Only an empty directory made here can move (in memory and in the index). */
static int rename_dir(struct core *c, size_t view, const char *path, const char *npath,
		      bool dst_exists, bool n_is_dir)
{
	int rc = 0;
	if (dir_has_children(c, view, path) || !core_mkdir_exists(c, view, path))
		rc = -EXDEV;
	else if (dst_exists)
		rc = n_is_dir && !dir_has_children(c, view, npath) ? 0 : -ENOTEMPTY;
	const char *vname = view_name(core_view(c, view));
	struct obj_posix px = { 0 };
	core_mkdir_attr(c, view, path, &px);
	if (rc == 0 && (rc = index_dir_add(c->d.ix, vname, npath, &px)) == 0)
		index_dir_remove(c->d.ix, vname, path);
	if (rc == 0) {
		core_mkdir_move(c, view, path, npath);
		rename_inode(c, view, path, npath, NULL);
	}
	return rc;
}

/* The new name's index record: the old one's under the new key (the copy
 * keeps data, metadata and type: no HEAD needed). */
static void rename_record(struct core *c, struct obj_meta *rec, const char *nkey,
			  const char *etag)
{
	free(rec->key);
	rec->key = strdup(nkey);
	if (!rec->key)
		return;
	if (etag[0])
		snprintf(rec->etag, sizeof rec->etag, "%s", etag);
	rec->seq[0] = '\0';
	rec->mtime_ns = core_now_ns();
	rec->flags &= ~(uint32_t)OBJ_FROM_SCAN;
	core_index_local(c, rec);
}

/* A file staged here follows its new name. */
static void rename_ofile(struct core *c, struct ofile *of, const char *bucket,
			 const char *npath, const char *nkey)
{
	stage_file_rename(of->sf, bucket, nkey);
	char *np = strdup(npath), *nk = strdup(nkey);
	if (np && nk) {
		core_ofile_rename(c, of, np, nk);
	} else {
		free(np);
		free(nk);
	}
}

/* Rename of a file of a write-back view staged here: it moves under its
 * new name, where the drain uploads it (no upload and no COPY now); the
 * old key is deleted in S3 only if S3 had a version of it (the file's
 * base), and only forgotten by the index otherwise. An upload of either
 * file under way ends first and none begins until the names have moved
 * (core_ofile_hold), so the old name's upload never lands after its
 * DELETE. The file is based on what the new name held: the replaced
 * file's base (its upload's ETag, if it had one), else the index's
 * version. A file waiting in the drain is sealed again under the new
 * name. */
static int rename_pending(struct core *c, struct ofile *of, struct ofile *dof,
			  const char *bucket, const char *key, const char *npath,
			  const char *nkey)
{
	core_ofile_hold(c, of);
	core_ofile_hold(c, dof);
	char base[72], dbase[72] = "";
	mod_lock(&c->ofile_lock);
	snprintf(base, sizeof base, "%s", of->base_etag);
	if (dof)
		snprintf(dbase, sizeof dbase, "%s", dof->base_etag);
	mod_unlock(&c->ofile_lock);
	struct obj_meta rec = { 0 }, dst = { 0 };
	bool have_rec = index_object_get(c->d.ix, bucket, key, &rec) == 0 &&
			!(rec.flags & OBJ_DELETED);
	bool have_dst = index_object_get(c->d.ix, bucket, nkey, &dst) == 0 &&
			!(dst.flags & OBJ_DELETED);
	int rc = 0;
	/* The old name's older staged copies are replaced; not this file,
	 * whose "commit" journal names it until it is renamed below. */
	if (*base) {
		rc = delete_if_base(c, bucket, key, base, of);
	} else if (have_rec) {
		if (c->d.stage)
			stage_key_replaced_but(c->d.stage, bucket, key, of->sf);
		struct obj_meta o = { .bucket = (char *)bucket, .key = (char *)key,
				      .mtime_ns = core_now_ns(), .flags = OBJ_DELETED };
		core_index_local(c, &o);
	}
	if (rc == 0) {
		if (c->d.stage)
			stage_key_replaced(c->d.stage, bucket, nkey);
		core_ofile_unlink(c, dof);
		/* The journal first, then the index: a crash between them
		 * leaves the file under its old name, which the index no
		 * longer lists but its adoption at the next start does. */
		rename_ofile(c, of, bucket, npath, nkey);
		if (have_rec) {
			rec.etag[0] = '\0';     /* not in S3 under nkey yet */
			rename_record(c, &rec, nkey, "");
		}
		mod_lock(&c->ofile_lock);
		snprintf(of->base_etag, sizeof of->base_etag, "%s",
			 dof ? dbase : have_dst ? dst.etag : "");
		mod_unlock(&c->ofile_lock);
	}
	core_ofile_unhold(c, dof);
	core_ofile_unhold(c, of);
	if (rc == 0)
		rc = core_drain_reseal(c, of);
	obj_meta_release(&rec);
	obj_meta_release(&dst);
	return rc;
}

/* The copy of a rename: one COPY of the version the index's record (rec)
 * names, keeping what it holds; or, with no record, a record another
 * version has overtaken (-ESTALE: changed, maybe grown past one COPY), or
 * an object too large for one COPY, a copy (in parts if need be) of the
 * version a HEAD describes, which then goes into *fresh (the caller
 * releases it; left empty when rec was copied). */
static int rename_copy(struct core *c, const char *bucket, const char *key,
		       const char *nkey, const struct obj_meta *rec, char etag[72],
		       struct obj_meta *fresh)
{
	if (rec && !copy_in_parts(&c->d.copy, rec->size)) {
		int rc = s3_copy(c->d.s3, bucket, key, nkey, NULL, 0, rec, etag);
		if (rc != -ESTALE)
			return rc;
	}
	struct obj_meta src = { 0 };
	bool from;
	int rc = copy_source(c, bucket, key, false, &src, &from);
	if (rc == 0 && copy_in_parts(&c->d.copy, src.size))
		stats_inc(&c->ctr.copy_in_parts);
	if (rc == 0)
		rc = copy_object(c->d.s3, &c->d.copy, bucket, key, nkey, &src,
				 NULL, 0, etag);
	if (rc == 0)
		*fresh = src;
	else
		obj_meta_release(&src);
	return rc;
}

int core_rename(struct core *c, uint64_t parent, const char *name,
		uint64_t newparent, const char *newname, unsigned flags)
{
	size_t view, nview;
	char path[PATH_MAX], npath[PATH_MAX], bucket[256], nbucket[256];
	char key[4096], nkey[4096];
	bool is_dir = false, n_is_dir = false;
	int rc = core_writable_child(c, parent, name, &view, path, sizeof path);
	if (rc == 0)
		rc = core_writable_child(c, newparent, newname, &nview, npath, sizeof npath);
	if (rc == 0 && (flags & ~RENAME_NOREPLACE))
		rc = -EINVAL;                /* RENAME_EXCHANGE, WHITEOUT */
	if (rc == 0 && nview != view)
		rc = -EXDEV;
	if (rc == 0 && !name_exists(c, view, path, &is_dir))
		rc = -ENOENT;
	if (rc == 0 && strcmp(path, npath) == 0)
		return 0;                    /* rename(2) of a name onto itself */
	bool dst_exists = rc == 0 && name_exists(c, nview, npath, &n_is_dir);
	if (rc == 0 && dst_exists && (flags & RENAME_NOREPLACE))
		rc = -EEXIST;
	if (rc == 0 && is_dir) {
		rc = rename_dir(c, view, path, npath, dst_exists, n_is_dir);
		goto out;
	}
	if (rc == 0 && dst_exists && n_is_dir)
		rc = -EISDIR;
	/* What fstat of a descriptor of the replaced file shows after it. */
	uint64_t dheld;
	struct stat dst_st;
	bool dsnap = rc == 0 && dst_exists &&
		     inode_find(c->d.it, view_name(core_view(c, nview)), npath, &dheld) &&
		     core_attr_of(c, dheld, &dst_st) == 0;
	if (rc == 0)
		rc = core_path_object(c, view, path, bucket, sizeof bucket, key, sizeof key);
	if (rc == 0)
		rc = core_path_object(c, nview, npath, nbucket, sizeof nbucket, nkey, sizeof nkey);
	if (rc == 0 && (strcmp(bucket, nbucket) != 0))
		rc = -EXDEV;
	if (rc == 0 && !view_key_can_match(core_view(c, view), nkey))
		rc = -EINVAL;
	/* A file open for writing here: publish it first, then move it. One
	 * staged under the new name is replaced: its name is gone. */
	struct ofile *of = rc == 0 ? core_ofile_find_path(c, view, path) : NULL;
	struct ofile *dof = rc == 0 && dst_exists ? core_ofile_find_path(c, nview, npath) : NULL;
	if (of && view_write_back(core_view(c, view))) {
		rc = rename_pending(c, of, dof, bucket, key, npath, nkey);
		core_ofile_put(c, of);
		core_ofile_put(c, dof);
		if (rc == 0)
			rename_inode(c, view, path, npath, dsnap ? &dst_st : NULL);
		goto out;
	}
	if (of)
		rc = core_ofile_commit(c, of);
	core_ofile_hold(c, dof);             /* no commit of it over the COPY */
	char etag[72] = "";
	struct obj_meta rec = { 0 }, fresh = { 0 };
	bool have_rec = rc == 0 && index_object_get(c->d.ix, bucket, key, &rec) == 0 &&
			!(rec.flags & OBJ_DELETED);
	if (rc == 0)
		rc = rename_copy(c, bucket, key, nkey, have_rec ? &rec : NULL, etag, &fresh);
	if (rc == 0 && c->d.stage)
		stage_key_replaced(c->d.stage, bucket, nkey);
	if (rc == 0 && have_rec)
		rename_record(c, fresh.key ? &fresh : &rec, nkey, etag);
	obj_meta_release(&fresh);
	obj_meta_release(&rec);
	if (rc == 0)
		rc = delete_object(c, bucket, key);
	if (rc == 0)
		core_ofile_unlink(c, dof);
	if (rc == 0 && of)
		rename_ofile(c, of, bucket, npath, nkey);
	core_ofile_unhold(c, dof);
	core_ofile_put(c, of);
	core_ofile_put(c, dof);
	if (rc == 0)
		rename_inode(c, view, path, npath, dsnap ? &dst_st : NULL);
out:
	if (rc == 0) {
		core_dir_touch(c, view, path);
		core_dir_touch(c, nview, npath);
	}
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
		rc = copy_source(c, bucket, key, round == 0, &o, &from_index);
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

int core_meta_change(struct core *c, uint64_t ino, core_meta_edit_fn edit, void *ctx)
{
	if (ino < INODE_FIRST_DYNAMIC)
		return -EOPNOTSUPP;
	struct inode_info info;
	int rc = inode_get(c->d.it, ino, &info);
	if (rc < 0)
		return rc;
	char bucket[256], key[4096];
	struct obj_meta o = { 0 }, nm = { 0 };
	struct ofile *of = NULL;
	if (info.is_dir)
		rc = -EOPNOTSUPP;           /* S3 has no directories to tag */
	else if (!view_writable(core_view(c, info.view)))
		rc = -EROFS;
	if (rc == 0)
		rc = core_path_object(c, info.view, info.path, bucket, sizeof bucket,
				      key, sizeof key);
	if (rc == 0 && !(of = core_ofile_find(c, ino, true))) {
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
