/*
 * fs_int.h — internals shared by the files of the FUSE adapter (not for
 * other modules). Layers, each calling only those below it:
 *   fs.c         the top: mount, session loop, unmount, the operation table,
 *                live view changes
 *   fs_ops.c     one thin handler per request: decode, make the request's
 *                handle (the view set pinned), call the core (fuse/core.h),
 *                reply exactly once
 *   fs_notify.c  the notifier thread: kernel-cache invalidation
 * The logic is in the core. Around each core call the adapter holds
 * nothing: the request's pinned view set is a reference, not a lock.
 *
 * Locks: inval_lock protects the notifier's queue and its stop flag (a
 * leaf, never held while telling the kernel). The core and the inode table
 * have their own (fuse/core_int.h, fuse/inode.h).
 *
 * Tests: no unit test (the libfuse adapter); t_mount.sh, t_write.sh,
 * t_owner.sh, t_bigdir.sh, tests/posix (pjdfstest).
 */
#ifndef FACETFS_FS_INT_H
#define FACETFS_FS_INT_H

#define FUSE_USE_VERSION 314
#include "fuse/fs.h"

#include "common/stats.h"
#include "common/trace.h"
#include "fuse/core.h"
#include "fuse/inode.h"

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define FS_TIMEOUT 3600.0   /* entry/attr timeout; made correct by invalidation */
#define FS_READAHEAD (1024u * 1024)  /* kernel read-ahead asked for (and set) */

/* Pending kernel-cache invalidations, done by the notifier thread. */
struct inval_job {
	char *view;                  /* the view's name (NULL: path is a view name
				      * and the root's entry is meant) */
	char *path;
	int what;
	struct inval_job *next;
};

struct fs {
	struct fs_deps d;
	struct fuse_session *se;
	struct inode_table *it;
	struct core *core;
	char *mountpoint;
	bool mounted;
	stats_counter inval;         /* kernel cache invalidations sent */
	struct stats_group grp;      /* inval, registered with d.st */

	pthread_mutex_t inval_lock;  /* protects the queue and stopping */
	pthread_cond_t inval_cond;
	struct inval_job *inval_head, *inval_tail;
	uint64_t inval_queued, inval_done;   /* jobs so far (fs_settle) */
	bool inval_stop;
	bool inval_running;
	pthread_t inval_thread;
};

static inline struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* fs_ops.c: the handlers; each that calls the core makes the request's
 * handle (struct core_req: the view set pinned while it runs). */
void fs_ops_init(struct fuse_lowlevel_ops *ops);

/* fs_trace.c: record a request in the I/O trace (common/trace.h); call
 * only when FS_TRACING(fs). op: an enum trace_op. By descriptor (f not an
 * object: nothing), by inode (its name), by directory entry (rename: the
 * new entry too). */
#define FS_TRACING(fs) trace_on((fs)->d.trace)
void fs_trace_fh(fuse_req_t req, int op, struct core_file *f, uint64_t off,
		 uint64_t len, int64_t result);
void fs_trace_ino(fuse_req_t req, struct core_req *rq, int op, uint64_t ino,
		  struct core_file *f, uint64_t off, int result);
void fs_trace_child(fuse_req_t req, struct core_req *rq, int op, uint64_t parent,
		    const char *name,
		    uint64_t newparent, const char *newname, struct core_file *f,
		    uint64_t off, int result);

/* fs_notify.c: the notifier thread (fs_notify_change() in fs.h queues). */
int  fs_notify_start(struct fs *fs);
void fs_notify_stop(struct fs *fs);   /* drains and joins; frees the queue */

#endif
