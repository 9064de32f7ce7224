/* fs_trace.c — the adapter's side of the I/O trace (common/trace.h): who
 * asked (the thread id FUSE gives each request; the recorder finds its
 * process) and what the core was asked and answered. Handlers call these
 * only when FS_TRACING(): off, tracing costs them one relaxed load. */
#include "fuse/fs_int.h"

#include "common/trace.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

static uint32_t req_tid(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	return ctx ? (uint32_t)ctx->pid : 0;
}

void fs_trace_fh(fuse_req_t req, int op, struct core_file *f, uint64_t off,
		 uint64_t len, int64_t result)
{
	if (!core_file_is_object(f))
		return;
	trace_record(fs_of(req)->d.trace, (enum trace_op)op, req_tid(req), (uintptr_t)f, off,
		     len, result < INT32_MIN ? INT32_MIN : (int32_t)result, NULL, NULL, NULL);
}

void fs_trace_ino(fuse_req_t req, struct core_req *rq, int op, uint64_t ino,
		  struct core_file *f, uint64_t off, int result)
{
	struct fs *fs = fs_of(req);
	char view[CORE_NAME_MAX + 1], path[PATH_MAX];
	if (f && !core_file_is_object(f))
		return;
	if (core_ino_name(rq, ino, view, sizeof view, path, sizeof path) < 0)
		return;
	trace_record(fs->d.trace, (enum trace_op)op, req_tid(req), (uintptr_t)f, off, 0,
		     result, view, path, NULL);
}

void fs_trace_child(fuse_req_t req, struct core_req *rq, int op, uint64_t parent,
		    const char *name,
		    uint64_t newparent, const char *newname, struct core_file *f,
		    uint64_t off, int result)
{
	struct fs *fs = fs_of(req);
	char view[CORE_NAME_MAX + 1], path[PATH_MAX];
	char view2[CORE_NAME_MAX + 1], path2[PATH_MAX];
	if (core_child_name(rq, parent, name, view, sizeof view, path, sizeof path) < 0)
		return;
	bool two = newname && core_child_name(rq, newparent, newname, view2,
					       sizeof view2, path2, sizeof path2) == 0 &&
		   strcmp(view, view2) == 0;
	trace_record(fs->d.trace, (enum trace_op)op, req_tid(req), (uintptr_t)f, off, 0, result,
		     view, path, two ? path2 : NULL);
}
