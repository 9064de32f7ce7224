/*
 * fs_int.h — internals shared by the files of the mount (not for other
 * modules): fs.c (lookup, getattr, readdir, change notification, mount),
 * fs_io.c (open, read, write, commit points, .facetfs files), fs_ns.c
 * (unlink, rename, mkdir, rmdir, xattrs), fs_views.c (the view set pinned
 * around every request, live view changes).
 *
 * Views: a `size_t view` in a function of these files is an index into the
 * set pinned by the request the calling thread serves (fs_req_view()); the
 * structs below that outlive a request keep the view's name (vname) and
 * compare or resolve by name (fs_view_index()).
 *
 * Locks: fs->ofile_lock protects the open-file table (ofiles) and the
 * made-directories list (mkdirs); it is a leaf: nothing else is taken while
 * it is held and it is never held across an S3, index or stage call that
 * blocks (stage_file_* calls are made with an ofile reference, not the lock).
 * The inode table has its own lock (fuse/inode.h).
 *
 * Open files: an inode opened for writing gets one struct ofile holding its
 * staged version (sync/stage.h), shared by every descriptor of this mount
 * (read-your-writes inside a mount). It lives while any descriptor holds it
 * (refs) and is released after the last close.
 */
#ifndef FACETFS_FS_INT_H
#define FACETFS_FS_INT_H

#define FUSE_USE_VERSION 314
#include "fuse/fs.h"

#include "fuse/inode.h"
#include "common/object.h"

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#define FS_TIMEOUT 3600.0   /* entry/attr timeout; made correct by invalidation */
#define FS_READAHEAD (1024u * 1024)  /* kernel read-ahead asked for (and set: fs_set_readahead) */
#define NAME_MAX_BYTES 255

struct reader;
struct stage_file;

struct ofile {
	uint64_t ino;
	char *vname;                 /* the view's name (outlives view sets) */
	char *path;                  /* inside the view */
	char *bucket, *key;
	struct stage_file *sf;
	struct obj_meta meta;        /* what the upload carries: metadata, type */
	int refs;                    /* descriptors holding it */
	bool unlinked;               /* unlinked while open: never uploaded again */
	struct ofile *next;
};

struct mkdir_ent {                   /* a directory made with mkdir, still empty */
	char *vname;
	char *path;
	struct mkdir_ent *next;
};

/* Pending kernel-cache invalidations, done by the notifier thread. */
struct inval_job {
	char *vname;                 /* NULL: path is a view name (whole view) */
	char *path;
	int what;
	struct inval_job *next;
};

struct fs {
	struct fs_deps d;
	struct fuse_session *se;
	struct inode_table *it;
	char *mountpoint;
	bool mounted;
	uid_t uid;
	gid_t gid;
	struct timespec start;

	struct fuse_lowlevel_ops real; /* the operations the pinning wrappers call */

	pthread_mutex_t ofile_lock;  /* protects ofiles and mkdirs */
	struct ofile *ofiles;
	struct mkdir_ent *mkdirs;
	char *recovered;             /* absolute: target of .facetfs/recovered */

	pthread_mutex_t inval_lock;  /* protects the queue and stopping */
	pthread_cond_t inval_cond;
	struct inval_job *inval_head, *inval_tail;
	bool inval_stop;
	bool inval_running;
	pthread_t inval_thread;
};

enum fh_kind { FH_OBJECT, FH_TEXT, FH_CONTROL };

struct fh {
	enum fh_kind kind;
	/* FH_OBJECT */
	char *vname;                 /* the view, found by name per request */
	char *bucket, *key;
	char etag[72];               /* version this descriptor reads */
	uint64_t size;
	struct reader *rd;           /* S3 version (read-only descriptors) */
	struct ofile *of;            /* staged version (writable descriptors) */
	bool writable;
	bool cached;                 /* counted in the inode's cached_opens */
	uint64_t ino;
	pthread_mutex_t lock;        /* protects rd/etag/size for commit reads */
	/* FH_TEXT: snapshot; FH_CONTROL: last answer */
	char *text;
	size_t text_len;
};

static inline struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* fs_views.c: the view set pinned by the request this thread serves (a
 * thread-local pointer written only by fs_req_pin/fs_req_unpin: the
 * wrappers of fs_wrap_ops call them around the real operation; code that
 * runs a request's logic without those wrappers calls them itself). Only
 * code running inside such a request may call the accessors below. */
struct viewset *fs_req_pin(struct fs *fs);          /* returns the previous */
void fs_req_unpin(struct viewset *prev);
const struct viewset *fs_req_views(void);
struct view *fs_req_view(size_t view);       /* NULL for INODE_NO_VIEW */
size_t fs_req_n_views(void);
/* The view index of a name in the request's set, or INODE_NO_VIEW. */
size_t fs_view_index(struct fs *fs, const char *name);

/* fs.c */
void fs_attr_dir(struct fs *fs, uint64_t ino, struct stat *st);
void fs_attr_file(struct fs *fs, uint64_t ino, uint64_t size, int64_t mtime_ns,
		  mode_t perm, struct stat *st);
mode_t fs_file_perm(struct fs *fs, size_t view);
int fs_attr_of(struct fs *fs, uint64_t ino, struct stat *st);
int fs_path_join(const char *dir, const char *name, char *out, size_t outlen);
/* The (view, path) of a directory inode and the path of its child name. */
int fs_child(struct fs *fs, fuse_ino_t parent, const char *name, size_t *view,
	     char *path, size_t pathlen);
/* bucket + key of (view, path); -EINVAL if the path cannot be a key. */
int fs_path_object(struct fs *fs, size_t view, const char *path, char *bucket,
		   size_t blen, char *key, size_t klen);
/* Apply a change made through this mount to the index at once (own
 * changes visible to this mount before the event arrives). */
int fs_index_local(struct fs *fs, const struct obj_meta *o);

/* fs_views.c: replace every view-reading operation by a wrapper that pins
 * the current view set around the real one (fs->real). */
void fs_wrap_ops(struct fuse_lowlevel_ops *ops);

/* fs_io.c */
struct ofile *fs_ofile_find(struct fs *fs, uint64_t ino);       /* ref taken */
struct ofile *fs_ofile_find_path(struct fs *fs, size_t view, const char *path);
/* Is this open file / made directory in view (of the request's set)? */
bool fs_in_view(const char *vname, size_t view);
void fs_ofile_put(struct fs *fs, struct ofile *of);
int fs_ofile_commit(struct fs *fs, struct ofile *of);
void fs_io_init_ops(struct fuse_lowlevel_ops *ops);
/* Raise the mount's read-ahead to kib (the kernel's per-device cap);
 * abs_mountpoint: the realpath taken before mounting. Makes no request
 * to the mount (safe before the session loop runs). */
void fs_set_readahead(const char *abs_mountpoint, unsigned kib);

/* fs_ns.c */
bool fs_mkdir_exists(struct fs *fs, size_t view, const char *path);
/* The directories made with mkdir before (stored in the index), at mount. */
int  fs_mkdirs_load(struct fs *fs);
void fs_ns_init_ops(struct fuse_lowlevel_ops *ops);

#endif
