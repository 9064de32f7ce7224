/*
 * core.h — the file-system core of the mount, below the FUSE adapter:
 * every operation as a function that returns 0 (or a count) or a negative
 * errno, takes inode numbers, names and buffers (or a pipe holding a
 * write's bytes: core_write_pipe), and knows no libfuse type.
 * fuse/fs*.c decode each request, call one of these and reply exactly once;
 * tests/unit/test_fscore.c drives it with no mount at all.
 *
 * It lives in fuse/ (it is the mount's namespace over the index: inodes,
 * lookup counts, open files, made directories) but builds as its own
 * library without libfuse; the per-view visibility rule it applies is
 * sync/cache/visibility.h, the staging of writes sync/stage/stage.h.
 *
 * Lookup counts: every function that fills a struct core_entry (lookup,
 * create, mkdir) and every readdirplus entry adds one to its inode;
 * core_forget() subtracts. The caller hands each such entry to the kernel.
 * Views: every operation of a request takes the request's handle, a
 * struct core_req on the caller's stack: core_req_begin() pins the
 * current view set of the gateway's slot (views/viewset.h) into it and
 * core_req_end() unpins it (the adapter makes one per FUSE request,
 * fuse/fs_ops.c; a test makes its own). The core reads the set only
 * through the handle (core_views(), core_int.h), so one request sees one
 * set, and a reload never waits for a request. View indexes live only
 * inside the request whose set they index; what outlives a request (open
 * files, made directories, descriptors, inodes, invalidations) keeps the
 * view's name and finds it again in the next request's set (a view that is
 * gone: ENOENT).
 * Threads: any thread may call any function at the same time, except
 * core_new/core_free; a struct core_req belongs to one thread. No lock
 * of the core is held across an S3, index or staging call that blocks.
 * Ownership: a struct core_file / core_dir belongs to the caller from the
 * open that made it to its release; deps' pointers must outlive the core.
 *
 * Tests: test_fscore.c (model), test_fscore_cases.c, test_fscore_dir.c,
 * test_fscore_copy.c, test_drain.c, test_drain_fds.c, test_wbmodel.c,
 * test_wbcrash.c; t_mount.sh, t_write.sh, t_writeback.sh, t_posix.sh.
 */
#ifndef FACETFS_FUSE_CORE_H
#define FACETFS_FUSE_CORE_H

/* The xattr of a view's directory saying how fresh it is (fresh_as_of). */
#define CORE_XATTR_FRESH "user.facetfs.fresh_as_of"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/s3.h"
#include "sync/stage/copy.h"

struct bcache;
struct pins;
struct reader_pool;
struct core;
struct core_dir;
struct core_file;
struct index;
struct inode_table;
struct s3;
struct stage;
struct stats;
struct view;
struct viewset;
struct viewset_slot;

#define CORE_NAME_MAX 255

/* Who owns what the mount shows, and its modes (mount options uid=, gid=,
 * umask=, file_mode=, dir_mode=); the kernel checks them (the mount always
 * has default_permissions). Defaults: the mounting user, directories
 * 0755 (0555 in a read-only view), files 0644 (0444), umask 0. A
 * read-only view never shows write bits. */
struct core_owner {
	bool has_uid, has_gid;       /* else the mounting user's */
	uid_t uid;
	gid_t gid;
	mode_t umask;
	mode_t file_mode, dir_mode;  /* 0: the defaults above */
};

#define CORE_CHANGE_REPLIED 0x100

/* Write-back views' drain (core_drain.c): uploads in parallel (0: 8, at
 * most 64), seconds a closed file waits before its upload, seconds the
 * core's end keeps draining; a burst's closes (at most quiet_ms apart,
 * 0: 100) hold a file up to hold_ms after its close (0: 3,000), unless
 * half the staging budget is used. */
struct core_drain_conf {
	unsigned streams, delay_s, stop_s;
	unsigned quiet_ms, hold_ms;
};

struct core_deps {
	struct core_owner owner;     /* all zero: the mounting user, defaults */
	struct index *ix;
	struct s3 *s3;
	struct bcache *bc;           /* the burst buffer's blocks; NULL: none */
	struct pins *pins;           /* versions open readers hold (with bc) */
	struct reader_pool *rpool;   /* read-ahead bounds across readers; NULL: none */
	bool cold_direct;            /* a cold stream (the first open of a large
				      * version, sync/cache/reader.h) gets direct I/O */
	struct stage *stage;         /* write staging (sync/stage/stage.h) */
	/* The conditions on a PUT the store honours (the probe at mount,
	 * sync/stage/probe.h): a commit sends them with stage_file_commit_if and
	 * checks with a HEAD what they cannot cover. All false: none. */
	struct s3_cond_caps cond;
	struct stats *st;
	struct copy_conf copy;       /* server-side copies: when in parts (sync/stage/copy.h) */
	struct viewset_slot *views;  /* the current view set (the gateway's) */
	struct inode_table *it;      /* the inodes the kernel holds (fuse/inode.h) */
	/* The membership of the view called view changed at path (own
	 * changes, applied to the index at once): INDEX_ADDED/REMOVED/CHANGED,
	 * with CORE_CHANGE_REPLIED when the kernel has that name's entry
	 * from the reply to the request that made it (a file created here:
	 * its own entry needs no invalidation). May be NULL. */
	void (*changed)(void *ctx, const char *view, const char *path, int what);
	void *changed_ctx;
	/* Providers of the .facetfs/ files: malloc'ed text (caller frees) or
	 * NULL; control() answers one command written to .facetfs/control. */
	void *ctx;
	char *(*stats_json)(void *ctx);
	char *(*views_json)(void *ctx);
	char *(*control)(void *ctx, const char *command);
	/* The xattr user.facetfs.fresh_as_of of view vname's directory: its
	 * text into out[outlen] (0), or -ENODATA while not known. */
	int (*fresh_as_of)(void *ctx, const char *vname, char *out, size_t outlen);
	/* .facetfs/pending: write-back's pending files, one a line (the
	 * adapter's: core_drain_list); NULL: the file is empty. */
	char *(*pending_text)(void *ctx);
	void *pending_ctx;
};

/* Who makes a file or directory (create, mkdir, mknod): the mode asked
 * (the kernel applied the caller's umask) and the caller's ids. Kept with
 * the object (common/posix.h). NULL: the mount's defaults. */
struct core_who {
	mode_t mode;
	uid_t uid;
	gid_t gid;
};

/* What setattr changes (chmod, chown, truncate, utimensat): the fields
 * named in what. */
enum core_set_what {
	CORE_SET_SIZE      = 1u << 0,
	CORE_SET_MODE      = 1u << 1,
	CORE_SET_UID       = 1u << 2,
	CORE_SET_GID       = 1u << 3,
	CORE_SET_ATIME     = 1u << 4,
	CORE_SET_MTIME     = 1u << 5,
	CORE_SET_ATIME_NOW = 1u << 6,
	CORE_SET_MTIME_NOW = 1u << 7,
};
struct core_set {
	unsigned what;               /* enum core_set_what */
	uint64_t size;
	mode_t mode;
	uid_t uid;
	gid_t gid;
	struct timespec atime, mtime;
};

/* What a lookup, create or mkdir answers: the inode (one lookup added) and
 * its attributes; attr_uncached for generated files. */
struct core_entry {
	uint64_t ino;
	struct stat attr;
	bool attr_uncached;
};

/* How the kernel may cache an opened file's pages. */
struct core_open_cache {
	bool direct_io;
	bool keep_cache;
	bool no_flush;               /* close need not call core_flush (read-only) */
};

/* Makes the core; loads the directories made with mkdir from the index. */
int  core_new(const struct core_deps *deps, struct core **out);
void core_free(struct core *c);
/* A request's view set: the views of the set core_req_begin() pinned. */
struct core_views {
	struct view *const *views;
	size_t n;
};
/* One request of the core: the core and the view set pinned for it. */
struct core_req {
	struct core *c;
	struct viewset *vs;          /* NULL: no set installed yet (no views) */
	struct core_views cv;
};
/* A request begins: rq (the caller's) gets c's current view set, pinned
 * until core_req_end(rq). Every call of the request takes rq. */
void core_req_begin(struct core *c, struct core_req *rq);
void core_req_end(struct core_req *rq);
/* The index of the view called name in rq's set, or INODE_NO_VIEW
 * (fuse/inode.h): the inode table's resolver, rq its context. */
size_t core_view_find(const struct core_req *rq, const char *name);
/* Is (view called vname, path) a directory made with mkdir here? It then
 * exists whatever is added or removed below it (any thread; no view set
 * needed). */
bool core_dir_made(struct core *c, const char *vname, const char *path);
/* An event changed (vname, path) (its index record is the new version):
 * if the kernel's inode of it serves readers of an older version from its
 * page cache and nobody writes it here, retire that inode for them
 * (fuse/inode.h inode_retire) and return true with *ino: the caller then
 * invalidates the name's entry, not the inode, and the next lookup makes
 * a new inode. Any thread (it pins the view set itself when needed). */
bool core_retire_changed(struct core *c, const char *vname, const char *path,
			 uint64_t *ino);
/* The target of .facetfs/recovered (an absolute path). */
const char *core_recovered(struct core *c);

/* ---- names and attributes ---- */
int  core_lookup(struct core_req *rq, uint64_t parent, const char *name,
		 struct core_entry *e);            /* -ENOENT: cache a negative entry */
void core_forget(struct core_req *rq, uint64_t ino, uint64_t nlookup);
int  core_getattr(struct core_req *rq, uint64_t ino, struct stat *st);
/* Is ino one of the generated .facetfs files (attributes never cached)? */
bool core_ino_generated(uint64_t ino);

/* ---- directories ---- */
/* A handle holds the directory's path and the names of its last reply,
 * never the listing (fuse/core_readdir.c). */
int  core_opendir(struct core_req *rq, uint64_t ino, struct core_dir **out);
void core_releasedir(struct core_req *rq, struct core_dir *d);
/* One entry for the caller's buffer: next is the offset after it; ino is
 * the inode to hand to the kernel with readdirplus (one lookup added by
 * the core; 0: none, for "." and ".."). fill returns 0 when the entry was
 * taken, 1 when the buffer is full (the core then drops the lookup). */
struct core_dirent {
	const char *name;
	struct stat attr;
	uint64_t ino;
	off_t next;
};
typedef int (*core_fill_fn)(void *ctx, const struct core_dirent *e);
/* Entries after offset off, in byte order of their names (0: from the
 * start; "." is 1, ".." 2, every other entry's offset is
 * core_dir_cookie(name), so a listing resumed from an offset goes on
 * after that name whatever was added or removed meanwhile). 0, or a
 * negative errno (entries filled before it stand: a caller with some
 * replies with them); -EINVAL for an offset that stands for no name. */
int  core_readdir(struct core_req *rq, struct core_dir *d, off_t off, bool plus,
		  core_fill_fn fill, void *ctx);
uint64_t core_dir_cookie(const char *name);
/* The name path of the view called vname left the index: open handles of
 * its directory, or of an ancestor (the component below it, which may
 * have gone with its last child), that returned that name keep it, so
 * that a seekdir to its offset still resumes after it. Any thread, also under the index's
 * write lock (a change callback): it takes only a leaf lock. */
void core_dir_removed(struct core *c, const char *vname, const char *path);
/* Open directory handles and the bytes they hold. */
void core_dir_mem(struct core *c, size_t *handles, size_t *bytes);

/* ---- files ---- */
/* flags: open(2)'s (O_ACCMODE, O_TRUNC). */
int  core_open(struct core_req *rq, uint64_t ino, int flags, struct core_file **out,
	       struct core_open_cache *cache);
int  core_create(struct core_req *rq, uint64_t parent, const char *name,
		 const struct core_who *who, struct core_entry *e,
		 struct core_file **out, struct core_open_cache *cache);
/* mknod(2) (FIFO, socket, device, regular file) and symlink(2): an object
 * made at once, as s3fs makes them: empty, or holding the link's target,
 * with the type in its mode (common/posix.h); device numbers are not kept
 * (rdev 0). The kernel serves a FIFO's or a device's data itself. */
int  core_mknod(struct core_req *rq, uint64_t parent, const char *name,
		const struct core_who *who, dev_t rdev, struct core_entry *e);
int  core_symlink(struct core_req *rq, uint64_t parent, const char *name,
		  const char *target, const struct core_who *who, struct core_entry *e);
ssize_t core_read(struct core_req *rq, struct core_file *f, void *buf, size_t len,
		  off_t off);
/* The bytes of one read where they lie (core_read_data): iov[0..n) in
 * order, held until core_read_done(). */
#define CORE_READ_IOV 4
struct reader_buf;
struct core_rdata {
	unsigned n;
	struct { const void *base; size_t len; } iov[CORE_READ_IOV];
	struct reader_buf *hold[CORE_READ_IOV];   /* the readers' buffers */
	void *own;                   /* or a buffer of the core's */
};
/* As core_read, but an object's bytes are not copied: they stay in the
 * reader's buffers (sync/cache/reader.h reader_read_pieces) for the reply to be
 * written from; other files' bytes go into a buffer of the core's. The
 * count or a negative errno; call core_read_done() in every case. */
ssize_t core_read_data(struct core_req *rq, struct core_file *f, size_t len, off_t off,
		       struct core_rdata *d);
void core_read_done(struct core_rdata *d);
ssize_t core_write(struct core_req *rq, struct core_file *f, const void *buf,
		   size_t len, off_t off);
/* core_write with the len bytes in the pipe pipe_fd (the adapter's
 * spliced WRITE), moved from it into the staged file by splice
 * (stage_file_pwrite_pipe: it says what an error leaves in the pipe). Only
 * for a file whose writes do not need their bytes in memory
 * (core_write_in_memory() false; else -EINVAL, the pipe untouched). */
ssize_t core_write_pipe(struct core_req *rq, struct core_file *f, int pipe_fd,
			size_t len, off_t off);
/* Whether f's writes need their bytes in memory (core_write), as
 * .facetfs/control's do: it reads them as a command. */
bool core_write_in_memory(const struct core_file *f);
int  core_flush(struct core_req *rq, struct core_file *f);   /* close: a commit point */
/* fsync: a commit point under `commit`; otherwise the staged bytes of the
 * inode (written through this or another descriptor) made durable. */
int  core_fsync(struct core_req *rq, struct core_file *f);
void core_release(struct core_req *rq, struct core_file *f);
/* truncate(2) (f NULL: by path, its own commit point) or ftruncate(2). */
int  core_truncate(struct core_req *rq, uint64_t ino, struct core_file *f, uint64_t size);
/* setattr (fuse/core_setattr.c): the size first (core_truncate), then mode,
 * owner and times, kept with the object as user metadata in s3fs's names
 * (common/posix.h): on a file open for writing here they ride on its next
 * upload (it becomes dirty), otherwise S3 copies the object onto itself
 * with the new metadata (one HEAD, one COPY). A directory's are kept in
 * the index (S3 has none). Read-only view: -EROFS; a view's root: -EPERM.
 * The kernel checked the caller's rights (default_permissions). The
 * attributes after it in *st. */
int  core_setattr(struct core_req *rq, uint64_t ino, struct core_file *f,
		  const struct core_set *set, struct stat *st);
/* readlink: .facetfs/recovered, or a symbolic link's object (its content,
 * at most size - 1 bytes, NUL-terminated in buf). 0 or a negative errno. */
int  core_readlink(struct core_req *rq, uint64_t ino, char *buf, size_t size);

/* ---- namespace ---- */
int  core_mkdir(struct core_req *rq, uint64_t parent, const char *name,
		const struct core_who *who, struct core_entry *e);
int  core_rmdir(struct core_req *rq, uint64_t parent, const char *name);
int  core_unlink(struct core_req *rq, uint64_t parent, const char *name);
/* flags: 0 or RENAME_NOREPLACE. */
int  core_rename(struct core_req *rq, uint64_t parent, const char *name,
		 uint64_t newparent, const char *newname, unsigned flags);

/* ---- user metadata as xattrs ---- */
/* The POSIX attribute names (common/posix.h) are not user.* xattrs: get
 * answers -ENODATA, list leaves them out, set and remove -EPERM. */
/* getxattr(2)/listxattr(2) conventions: size 0 asks for the length; the
 * value's length, -ERANGE if size is too small, -ENODATA, -EOPNOTSUPP. */
ssize_t core_getxattr(struct core_req *rq, uint64_t ino, const char *name, char *buf,
		      size_t size);
ssize_t core_listxattr(struct core_req *rq, uint64_t ino, char *buf, size_t size);
/* flags: XATTR_CREATE / XATTR_REPLACE. */
int  core_setxattr(struct core_req *rq, uint64_t ino, const char *name,
		   const char *value, size_t size, int flags);
int  core_removexattr(struct core_req *rq, uint64_t ino, const char *name);

/* ---- names for the I/O trace (fuse/core_trace.c) ---- */
/* The view name and path of a file inode (0), -ENOENT for generated files
 * and inodes the kernel does not hold; -ENAMETOOLONG if they do not fit. */
int  core_ino_name(struct core_req *rq, uint64_t ino, char *view, size_t vlen,
		   char *path, size_t plen);
/* The same for the entry name in directory parent (it need not exist). */
int  core_child_name(struct core_req *rq, uint64_t parent, const char *name, char *view,
		     size_t vlen, char *path, size_t plen);
/* Is f a descriptor of an object (not of a .facetfs/ file)? */
bool core_file_is_object(const struct core_file *f);

/* Write-back (core_drain.c; what the queue holds, core_drain_pending,
 * _gauges, _list and _steps: core_drain_queue.c). core_drain_new: the drain of c (its threads
 * start at the first sealed file); without one, a close in a write-back
 * view uploads as in any other. core_drain_free: before core_free, drains
 * for up to conf.stop_s, then cancels the uploads in flight (each ends
 * within about a second: common/s3.h) and stops; what is left stays
 * journaled "commit" for the next start (core_drain_adopt_all queues it
 * again). core_drain_sync:
 * publishes what was pending when it began in view vname under path (""
 * the whole view; vname NULL: every view) and waits until S3 has it,
 * not for closes that come after: 0; -EIO when each file it waits for
 * has failed a try since it began, -ETIMEDOUT after timeout_s; then
 * *report (malloc'ed) names each key left with its last error.
 * core_drain_pending: files and bytes pending now (each file's size at
 * its last close). core_drain_gauges: brings the "drain" gauges of the
 * stats up to date (call it before rendering them). core_drain_list: one
 * line per pending file (key, bytes, age, tries, state), malloc'ed.
 * core_drain_steps: how many queue entries the drain's queue operations
 * have visited so far (heap steps, the walks at a sync's start and end),
 * for tests of its cost. */
int  core_drain_new(struct core *c, const struct core_drain_conf *conf);
/* Every file the stage's recovery left for the drain (stage_conf's
 * defer_commits: files whose commit had begun when the previous run
 * stopped) taken up again and queued, due at once, oldest first; a file
 * that cannot be is logged and stays pending for the next start. Local
 * work only (no S3 request): call it once, after core_drain_new, before
 * the mount serves, so that the mount shows those files from its first
 * request. The number queued. */
int  core_drain_adopt_all(struct core *c);
/* After core_drain_adopt_all, before the mount serves: each name the
 * index shows as this mount's own version not uploaded yet (index.h 'U')
 * that no pending file holds now, left so by a crash, gets what S3 holds
 * of its key (a HEAD: that version, or none) (core_mend.c). Stops at the
 * first HEAD that fails other than "not found" (S3 down: the next start
 * tries again). The number of names mended, or a negative errno. */
int  core_mend_unsent(struct core *c);
void core_drain_free(struct core *c);
int  core_drain_sync(struct core *c, const char *vname, const char *path,
		     int timeout_s, char **report);
void core_drain_pending(struct core *c, uint64_t *files, uint64_t *bytes);
void core_drain_gauges(struct core *c);
char *core_drain_list(struct core *c);
uint64_t core_drain_steps(struct core *c);

#endif
