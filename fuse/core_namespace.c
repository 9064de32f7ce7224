/* core_namespace.c — changes to the namespace through the mount (unlink,
 * rename, mkdir, rmdir).
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
static bool dir_has_children(struct core_req *rq, size_t view, const char *path)
{
	struct core *c = rq->c;
	bool any = false;
	index_readdir(c->d.ix, core_view(rq, view), path, NULL, first_child, &any);
	return any || core_tables_have_child(rq, view, path);
}

static bool name_exists(struct core_req *rq, size_t view, const char *path, bool *is_dir)
{
	struct core *c = rq->c;
	struct index_attr a;
	*is_dir = false;
	if (index_lookup(c->d.ix, core_view(rq, view), path, &a) == 0) {
		*is_dir = a.is_dir;
		return true;
	}
	if (core_mkdir_exists(rq, view, path)) {
		*is_dir = true;
		return true;
	}
	struct ofile *of = core_ofile_find_path(rq, view, path);
	core_ofile_put(c, of);
	return of != NULL;
}

/* ---------- mkdir, rmdir ---------- */

int core_mkdir(struct core_req *rq, uint64_t parent, const char *name,
	       const struct core_who *who, struct core_entry *e)
{
	struct core *c = rq->c;
	size_t view;
	char path[PATH_MAX];
	bool is_dir;
	memset(e, 0, sizeof *e);
	int rc = core_writable_child(rq, parent, name, &view, path, sizeof path);
	if (rc == 0 && name_exists(rq, view, path, &is_dir))
		rc = -EEXIST;
	const char *vname = rc == 0 ? view_name(core_view(rq, view)) : NULL;
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
	core_dir_touch(rq, view, path);
	e->ino = inode_ref(c->d.it, vname, path, true);
	return e->ino ? core_attr_of(rq, e->ino, &e->attr) : -ENOMEM;
}

int core_rmdir(struct core_req *rq, uint64_t parent, const char *name)
{
	struct core *c = rq->c;
	size_t view;
	char path[PATH_MAX];
	bool is_dir;
	int rc = core_writable_child(rq, parent, name, &view, path, sizeof path);
	if (rc == 0 && !name_exists(rq, view, path, &is_dir))
		rc = -ENOENT;
	else if (rc == 0 && !is_dir)
		rc = -ENOTDIR;
	else if (rc == 0 && dir_has_children(rq, view, path))
		rc = -ENOTEMPTY;
	if (rc == 0 && core_mkdir_exists(rq, view, path))
		rc = index_dir_remove(c->d.ix, view_name(core_view(rq, view)), path);
	if (rc == 0) {
		core_mkdir_forget(rq, view, path);
		core_dir_touch(rq, view, path);
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

int core_unlink(struct core_req *rq, uint64_t parent, const char *name)
{
	struct core *c = rq->c;
	size_t view;
	char path[PATH_MAX], bucket[256], key[4096];
	bool is_dir;
	int rc = core_writable_child(rq, parent, name, &view, path, sizeof path);
	if (rc == 0 && !name_exists(rq, view, path, &is_dir))
		rc = -ENOENT;
	else if (rc == 0 && is_dir)
		rc = -EISDIR;
	if (rc == 0)
		rc = core_path_object(rq, view, path, bucket, sizeof bucket, key, sizeof key);
	/* What fstat of a descriptor still open shows after the unlink. */
	const char *vname = rc == 0 ? view_name(core_view(rq, view)) : NULL;
	uint64_t held;
	struct stat gst;
	bool snap = rc == 0 && inode_find(c->d.it, vname, path, &held) &&
		    core_attr_of(rq, held, &gst) == 0;
	if (rc == 0) {
		/* Open descriptors keep their data but never publish it again. */
		struct ofile *of = core_ofile_find_path(rq, view, path);
		core_ofile_unlink(c, of);
		core_ofile_put(c, of);
		rc = delete_object(c, bucket, key);
	}
	/* The kernel's inode of the name stays with its open descriptors. */
	if (rc == 0) {
		inode_unname_gone(c->d.it, vname, path, snap ? &gst : NULL);
		core_dir_touch(rq, view, path);
	}
	return rc;
}

/* After a rename: the kernel keeps the moved inode, which now stands for
 * npath (and an inode that stood for npath no longer does). Files and
 * directories alike: without it a GETATTR of the moved node asks about
 * the old path, which is gone (ENOENT). */
static void rename_inode(struct core_req *rq, size_t view, const char *path, const char *npath,
			 const struct stat *dst_st)
{
	struct core *c = rq->c;
	uint64_t ino;
	const char *vname = view_name(core_view(rq, view));
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
static int rename_dir(struct core_req *rq, size_t view, const char *path, const char *npath,
		      bool dst_exists, bool n_is_dir)
{
	struct core *c = rq->c;
	int rc = 0;
	if (dir_has_children(rq, view, path) || !core_mkdir_exists(rq, view, path))
		rc = -EXDEV;
	else if (dst_exists)
		rc = n_is_dir && !dir_has_children(rq, view, npath) ? 0 : -ENOTEMPTY;
	const char *vname = view_name(core_view(rq, view));
	struct obj_posix px = { 0 };
	core_mkdir_attr(rq, view, path, &px);
	if (rc == 0 && (rc = index_dir_add(c->d.ix, vname, npath, &px)) == 0)
		index_dir_remove(c->d.ix, vname, path);
	if (rc == 0) {
		core_mkdir_move(rq, view, path, npath);
		rename_inode(rq, view, path, npath, NULL);
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
	int rc = core_copy_source(c, bucket, key, false, &src, &from);
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

int core_rename(struct core_req *rq, uint64_t parent, const char *name,
		uint64_t newparent, const char *newname, unsigned flags)
{
	struct core *c = rq->c;
	size_t view, nview;
	char path[PATH_MAX], npath[PATH_MAX], bucket[256], nbucket[256];
	char key[4096], nkey[4096];
	bool is_dir = false, n_is_dir = false;
	int rc = core_writable_child(rq, parent, name, &view, path, sizeof path);
	if (rc == 0)
		rc = core_writable_child(rq, newparent, newname, &nview, npath, sizeof npath);
	if (rc == 0 && (flags & ~RENAME_NOREPLACE))
		rc = -EINVAL;                /* RENAME_EXCHANGE, WHITEOUT */
	if (rc == 0 && nview != view)
		rc = -EXDEV;
	if (rc == 0 && !name_exists(rq, view, path, &is_dir))
		rc = -ENOENT;
	if (rc == 0 && strcmp(path, npath) == 0)
		return 0;                    /* rename(2) of a name onto itself */
	bool dst_exists = rc == 0 && name_exists(rq, nview, npath, &n_is_dir);
	if (rc == 0 && dst_exists && (flags & RENAME_NOREPLACE))
		rc = -EEXIST;
	if (rc == 0 && is_dir) {
		rc = rename_dir(rq, view, path, npath, dst_exists, n_is_dir);
		goto out;
	}
	if (rc == 0 && dst_exists && n_is_dir)
		rc = -EISDIR;
	/* What fstat of a descriptor of the replaced file shows after it. */
	uint64_t dheld;
	struct stat dst_st;
	bool dsnap = rc == 0 && dst_exists &&
		     inode_find(c->d.it, view_name(core_view(rq, nview)), npath, &dheld) &&
		     core_attr_of(rq, dheld, &dst_st) == 0;
	if (rc == 0)
		rc = core_path_object(rq, view, path, bucket, sizeof bucket, key, sizeof key);
	if (rc == 0)
		rc = core_path_object(rq, nview, npath, nbucket, sizeof nbucket, nkey, sizeof nkey);
	if (rc == 0 && (strcmp(bucket, nbucket) != 0))
		rc = -EXDEV;
	if (rc == 0 && !view_key_can_match(core_view(rq, view), nkey))
		rc = -EINVAL;
	/* A file open for writing here: publish it first, then move it. One
	 * staged under the new name is replaced: its name is gone. */
	struct ofile *of = rc == 0 ? core_ofile_find_path(rq, view, path) : NULL;
	struct ofile *dof = rc == 0 && dst_exists ? core_ofile_find_path(rq, nview, npath) : NULL;
	if (of && view_write_back(core_view(rq, view))) {
		rc = rename_pending(c, of, dof, bucket, key, npath, nkey);
		core_ofile_put(c, of);
		core_ofile_put(c, dof);
		if (rc == 0)
			rename_inode(rq, view, path, npath, dsnap ? &dst_st : NULL);
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
		rename_inode(rq, view, path, npath, dsnap ? &dst_st : NULL);
out:
	if (rc == 0) {
		core_dir_touch(rq, view, path);
		core_dir_touch(rq, nview, npath);
	}
	return rc;
}
