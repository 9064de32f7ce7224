/* core_mknod.c — mknod, symlink and readlink (core.h): a FIFO, a socket, a
 * device node or a symbolic link is an object as s3fs makes it, the type
 * in the mode (common/posix.h), a link's target as its content, made
 * whole at once (created, written and committed before the reply). A node
 * whose upload failed leaves no name (core_mend_name). A link's target is
 * read like a file's bytes, unless the mount keeps it (links.h). Calls
 * core_drain.c (the commit at close), core_io.c (create, open, read,
 * write), core_lookup.c, core_mend.c, core_ofile.c and core.c.
 */
#include "fuse/core_int.h"

#include "common/lock.h"
#include "common/log.h"
#include "sync/stage/stage.h"
#include "views/index.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------- symbolic links' targets ---------- */

/* The ETag the index holds for ino's object now, if it is a name the
 * index knows and (unless staged_too) no writer of this mount stages it:
 * 0, else -ENOENT. */
static int indexed_etag(struct core_req *rq, uint64_t ino, bool staged_too, char etag[72],
			uint64_t *size)
{
	struct core *c = rq->c;
	struct inode_info info;
	int rc = inode_get(c->d.it, ino, rq, &info);
	if (rc < 0)
		return rc;
	struct index_attr a;
	struct ofile *of = info.gone || staged_too ? NULL : core_ofile_find(rq, ino, false);
	core_ofile_put(c, of);
	rc = info.gone || of ? -ENOENT
			     : index_lookup(c->d.ix, core_view(rq, info.view), info.path, &a);
	if (rc == 0 && (a.is_dir || !a.etag[0]))
		rc = -ENOENT;
	if (rc == 0) {
		memcpy(etag, a.etag, 72);
		*size = a.size;
	}
	free(info.path);
	return rc;
}

/* A link's target is read like a file's bytes (open, read), unless the
 * mount keeps the target of the version the index holds (links.h): then
 * no request, as the kernel's own cache of it, which the event of a
 * change invalidates. */
int core_readlink(struct core_req *rq, uint64_t ino, char *buf, size_t size)
{
	struct core *c = rq->c;
	if (size == 0)
		return -ERANGE;
	if (ino == INODE_META_RECOVERED) {
		snprintf(buf, size, "%s", core_recovered(c));
		return 0;
	}
	struct stat st;
	int rc = ino < INODE_FIRST_DYNAMIC ? -EINVAL : core_attr_of(rq, ino, &st);
	if (rc == 0 && !S_ISLNK(st.st_mode))
		rc = -EINVAL;
	char etag[72];
	uint64_t isize;
	if (rc == 0 && indexed_etag(rq, ino, false, etag, &isize) == 0 &&
	    links_get(c->links, etag, (size_t)isize, buf, size))
		return 0;
	struct core_file *f = NULL;
	struct core_open_cache cache;
	if (rc == 0)
		rc = core_open(rq, ino, O_RDONLY, &f, &cache);
	ssize_t n = rc == 0 ? core_read(rq, f, buf, size - 1, 0) : rc;
	if (n >= 0) {
		buf[n] = '\0';
		uint64_t vsize;
		if (f->ver) {                /* not a staged copy's bytes */
			vis_version_etag(f->ver, etag, &vsize);
			if (vsize == (uint64_t)n)    /* the whole target: keep it */
				links_put(c->links, etag, buf);
		}
	}
	core_ofile_put(c, core_file_close(c, f));
	return n < 0 ? (int)n : 0;
}

/* So the first readlink of a link made here costs no request either (its
 * committed copy may still be held a moment by a request that looked at
 * it: the index has the version just uploaded all the same). */
static void core_link_made(struct core_req *rq, uint64_t ino, const char *target)
{
	struct core *c = rq->c;
	char etag[72];
	uint64_t isize;
	if (indexed_etag(rq, ino, true, etag, &isize) == 0 && isize == strlen(target))
		links_put(c->links, etag, target);
}

/* ---------- nodes made whole at once ---------- */

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
static int node_make(struct core_req *rq, uint64_t parent, const char *name,
		     const struct core_who *who, const char *data, size_t len,
		     struct core_entry *e)
{
	struct core *c = rq->c;
	struct core_file *f;
	struct core_open_cache cache;
	int rc = core_create(rq, parent, name, who, e, &f, &cache);
	if (rc < 0)
		return rc;
	/* Written and committed before the reply: nothing to journal. */
	if (f->of)
		stage_file_oneshot(f->of->sf);
	ssize_t n = len ? core_write(rq, f, data, len, 0) : 0;
	rc = n < 0 ? (int)n : core_flush(rq, f);
	if (rc < 0 && f->of)
		node_unmade(c, f->of);
	core_release(rq, f);
	if (rc == 0)
		rc = core_attr_of(rq, e->ino, &e->attr);
	if (rc < 0) {
		core_forget(rq, e->ino, 1);
		memset(e, 0, sizeof *e);
	}
	return rc;
}

int core_mknod(struct core_req *rq, uint64_t parent, const char *name,
	       const struct core_who *who, dev_t rdev, struct core_entry *e)
{
	(void)rdev;                      /* not kept (s3fs keeps none either) */
	memset(e, 0, sizeof *e);
	mode_t type = who ? who->mode & S_IFMT : 0;
	if (!who || (type != S_IFREG && type != S_IFIFO && type != S_IFSOCK &&
		     type != S_IFCHR && type != S_IFBLK))
		return -EINVAL;
	return node_make(rq, parent, name, who, NULL, 0, e);
}

int core_symlink(struct core_req *rq, uint64_t parent, const char *name,
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
	int rc = node_make(rq, parent, name, &w, target, len, e);
	if (rc == 0)
		core_link_made(rq, e->ino, target);
	return rc;
}
