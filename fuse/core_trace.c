/* core_trace.c — the names the I/O trace records (core.h, "names for the
 * I/O trace"): what an inode or a directory entry is called in its view.
 * Called by the adapter inside a request (the view set is pinned). */
#include "fuse/core_int.h"

#include "views/filter.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int name_copy(const char *src, char *dst, size_t len)
{
	size_t n = strlen(src);
	if (n >= len)
		return -ENAMETOOLONG;
	memcpy(dst, src, n + 1);
	return 0;
}

int core_ino_name(struct core_req *rq, uint64_t ino, char *view, size_t vlen,
		  char *path, size_t plen)
{
	struct core *c = rq->c;
	if (ino < INODE_FIRST_DYNAMIC)
		return -ENOENT;
	struct inode_info info;
	int rc = inode_get(c->d.it, ino, rq, &info);
	if (rc < 0)
		return rc;
	const struct view *v = core_view(rq, info.view);
	if (!v || info.is_dir)
		rc = -ENOENT;
	else if ((rc = name_copy(view_name(v), view, vlen)) == 0)
		rc = name_copy(info.path, path, plen);
	free(info.path);
	return rc;
}

int core_child_name(struct core_req *rq, uint64_t parent, const char *name, char *view,
		    size_t vlen, char *path, size_t plen)
{
	size_t vi;
	int rc = core_child(rq, parent, name, &vi, path, plen);
	if (rc < 0)
		return rc;
	const struct view *v = core_view(rq, vi);
	return v ? name_copy(view_name(v), view, vlen) : -ENOENT;
}

bool core_file_is_object(const struct core_file *f)
{
	return f && f->kind == FILE_OBJECT;
}
