/* core_mknod.c — mknod and symlink (core.h): a FIFO, a socket, a device
 * node or a symbolic link is an object as s3fs makes it, the type in the
 * mode (common/posix.h), a link's target as its content, made whole at
 * once (created, written and committed before the reply). A node whose
 * upload failed leaves no name (core_mend_name). Calls core_drain.c (the
 * commit at close), core_io.c (create, write), core_lookup.c, core_mend.c
 * and core_ofile.c.
 */
#include "fuse/core_int.h"

#include "common/lock.h"
#include "common/log.h"
#include "sync/stage.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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
