/* core_setattr.c — setattr (core.h): mode, owner and times kept with each
 * object in s3fs's user-metadata names (common/posix.h), so they outlive
 * a restart, reach other gateways through the copy's event, and read the
 * same in s3fs and rclone.
 *
 * Where each change goes:
 *  - a file open for writing here: its staged copy's metadata, uploaded
 *    with its next commit (the file becomes dirty; no extra request);
 *    utimensat's mtime is kept by that commit unless a write follows it;
 *  - any other file: a COPY of the object onto itself with the new
 *    metadata (core_meta_change, core_metadata.c: one HEAD, one COPY);
 *  - a directory: the index ('D' key, core_mkdir.c's made directories), as
 *    S3 has no directory objects here; it keeps atime and ctime too.
 * Every change of mode, owner or times also sets ctime (now). atime is
 * kept only when set explicitly (utimensat); reads never update it, as
 * with noatime.
 */
#include "fuse/core_int.h"

#include "common/lock.h"
#include "common/posix.h"

#include <errno.h>
#include <stdlib.h>

struct attr_edit {
	struct core *c;
	const struct core_set *set;
};

static int attr_apply(void *ctx, struct obj_meta *o, struct ofile *of)
{
	struct attr_edit *a = ctx;
	struct obj_posix px = { 0 }, cur;
	core_set_posix(a->set, &px);
	posix_meta_parse(o->meta, o->n_meta, &cur);
	px.mode |= cur.mode & S_IFMT;            /* chmod keeps the file type */
	int rc = posix_meta_put(&o->meta, &o->n_meta, &px);
	if (rc == 0 && of && (px.have & POSIX_MTIME)) {
		mod_lock(&a->c->ofile_lock);
		of->times_set = true;
		mod_unlock(&a->c->ofile_lock);
	}
	return rc;
}

/* A directory's attributes: kept in the index; one listed from keys gets
 * a made-directory entry that holds them. An atime never set explicitly
 * is shown as the mtime: a new mtime keeps the atime shown so far. */
int core_setattr(struct core_req *rq, uint64_t ino, struct core_file *f,
		 const struct core_set *set, struct stat *st)
{
	struct core *c = rq->c;
	const unsigned meta = CORE_SET_MODE | CORE_SET_UID | CORE_SET_GID |
			      CORE_SET_ATIME | CORE_SET_MTIME | CORE_SET_ATIME_NOW |
			      CORE_SET_MTIME_NOW;
	int rc = 0;
	if ((set->what & meta) && ino < INODE_FIRST_DYNAMIC)
		return -EPERM;               /* the root, .facetfs: generated */
	if (set->what & CORE_SET_SIZE) {
		rc = core_truncate(rq, ino, f, set->size);
		struct ofile *of = f && f->writable ? f->of : NULL;
		if (rc == 0 && of && !(set->what & (CORE_SET_MTIME | CORE_SET_MTIME_NOW))) {
			mod_lock(&c->ofile_lock);
			of->times_set = false;   /* ftruncate modifies: now */
			mod_unlock(&c->ofile_lock);
		}
	}
	if (rc == 0 && (set->what & meta)) {
		struct inode_info info;
		rc = inode_get(c->d.it, ino, rq, &info);
		if (rc == 0) {
			struct attr_edit a = { c, set };
			rc = info.is_dir ? core_dir_setattr(rq, info.view, info.path, set)
					 : core_meta_change(rq, ino, attr_apply, &a);
			free(info.path);
		}
	}
	return rc < 0 ? rc : core_attr_of(rq, ino, st);
}
