/* core_attr.c — setattr, mknod and symlink (core.h): mode, owner and times kept
 * with each object in s3fs's user-metadata names (common/posix.h), so they
 * outlive a restart, reach other gateways through the copy's event, and
 * read the same in s3fs and rclone.
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
 * with noatime. FIFOs, sockets, device nodes and symbolic links are
 * objects as s3fs makes them: the type in the mode, a link's target as
 * its content.
 */
#include "fuse/core_int.h"

#include "common/lock.h"
#include "common/log.h"
#include "common/posix.h"
#include "sync/stage.h"
#include "views/filter.h"
#include "views/index.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
int core_setattr(struct core *c, uint64_t ino, struct core_file *f,
		 const struct core_set *set, struct stat *st)
{
	const unsigned meta = CORE_SET_MODE | CORE_SET_UID | CORE_SET_GID |
			      CORE_SET_ATIME | CORE_SET_MTIME | CORE_SET_ATIME_NOW |
			      CORE_SET_MTIME_NOW;
	int rc = 0;
	if ((set->what & meta) && ino < INODE_FIRST_DYNAMIC)
		return -EPERM;               /* the root, .facetfs: generated */
	if (set->what & CORE_SET_SIZE) {
		rc = core_truncate(c, ino, f, set->size);
		struct ofile *of = f && f->writable ? f->of : NULL;
		if (rc == 0 && of && !(set->what & (CORE_SET_MTIME | CORE_SET_MTIME_NOW))) {
			mod_lock(&c->ofile_lock);
			of->times_set = false;   /* ftruncate modifies: now */
			mod_unlock(&c->ofile_lock);
		}
	}
	if (rc == 0 && (set->what & meta)) {
		struct inode_info info;
		rc = inode_get(c->d.it, ino, &info);
		if (rc == 0) {
			struct attr_edit a = { c, set };
			rc = info.is_dir ? core_dir_setattr(c, info.view, info.path, set)
					 : core_meta_change(c, ino, attr_apply, &a);
			free(info.path);
		}
	}
	return rc < 0 ? rc : core_attr_of(c, ino, st);
}

/* A one-shot node whose upload failed: its create listed the name (this
 * mount's version, no ETag) and nothing stands for it now: the name shows
 * what S3 holds of its key (core_mend_name), as after a crash. */
static void node_unmade(struct core *c, struct ofile *of)
{
	char bucket[256], key[4096];
	mod_lock(&c->ofile_lock);
	snprintf(bucket, sizeof bucket, "%s", of->bucket);
	snprintf(key, sizeof key, "%s", of->key);
	mod_unlock(&c->ofile_lock);
	int rc = core_mend_name(c, bucket, key);
	if (rc < 0)
		log_warn("%s/%s: its upload failed, and S3 cannot be asked what it holds "
			 "(%s): listed until the next start", bucket, key, strerror(-rc));
}

/* An object made whole at once: data (len bytes), the type in who's mode. */
static int node_make(struct core *c, uint64_t parent, const char *name,
		     const struct core_who *who, const char *data, size_t len,
		     struct core_entry *e)
{
	struct core_file *f;
	struct core_open_cache cache;
	int rc = core_create(c, parent, name, who, e, &f, &cache);
	if (rc < 0)
		return rc;
	/* Written and committed before the reply: nothing to journal. */
	if (f->of)
		stage_file_oneshot(f->of->sf);
	ssize_t n = len ? core_write(c, f, data, len, 0) : 0;
	rc = n < 0 ? (int)n : core_flush(c, f);
	if (rc < 0 && f->of)
		node_unmade(c, f->of);
	core_release(c, f);
	if (rc == 0)
		rc = core_attr_of(c, e->ino, &e->attr);
	if (rc < 0) {
		core_forget(c, e->ino, 1);
		memset(e, 0, sizeof *e);
	}
	return rc;
}

int core_mknod(struct core *c, uint64_t parent, const char *name,
	       const struct core_who *who, dev_t rdev, struct core_entry *e)
{
	(void)rdev;                      /* not kept (s3fs keeps none either) */
	memset(e, 0, sizeof *e);
	mode_t type = who ? who->mode & S_IFMT : 0;
	if (!who || (type != S_IFREG && type != S_IFIFO && type != S_IFSOCK &&
		     type != S_IFCHR && type != S_IFBLK))
		return -EINVAL;
	return node_make(c, parent, name, who, NULL, 0, e);
}

int core_symlink(struct core *c, uint64_t parent, const char *name,
		 const char *target, const struct core_who *who, struct core_entry *e)
{
	memset(e, 0, sizeof *e);
	size_t len = strlen(target);
	if (len == 0)
		return -ENOENT;
	if (len >= PATH_MAX)
		return -ENAMETOOLONG;
	struct core_who w = { S_IFLNK | 0777, who ? who->uid : 0, who ? who->gid : 0 };
	if (!who) {
		w.uid = getuid();
		w.gid = getgid();
	}
	int rc = node_make(c, parent, name, &w, target, len, e);
	if (rc == 0)
		core_link_made(c, e->ino, target);
	return rc;
}
