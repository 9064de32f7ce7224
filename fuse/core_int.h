/*
 * core_int.h — internals shared by the files of the file-system core (not
 * for other modules). Layers, the bottom first, each file calling only
 * those listed before it:
 *   core.c      the bottom: the core's lifecycle, the view set, attributes
 *               and paths, the mount's own changes into the index
 *   core_ofile.c  the open-file table, and what an open file shows
 *   core_mkdir.c  the made directories and the attributes kept for them
 *               (core_ofile.c and core_mkdir.c call only core.c)
 *   core_mend.c the mend of names left unsent (a crash, a failed one-shot
 *               upload) from what S3 holds
 *   core_lookup.c  lookup, getattr, forget; the attributes of a name and
 *               of an inode, the files of .facetfs/
 *   core_readdir.c  directory handles, readdir
 *   core_commit.c  an open file's commit (its upload), seal and publish
 *               (the commit checked against its base: conflicts)
 *   core_io.c   open, read, write, truncate, fsync's sync of the staged
 *               bytes, .facetfs files
 *   core_drain_queue.c  write-back's queue: its entries' states, heaps,
 *               the syncs' waiters, the gauges (calls no other file;
 *               core_drain_queue.h, for core_drain.c only)
 *   core_drain.c  the commit points (close, fsync) and write-back's drain:
 *               its workers, syncs, adoption, start and stop (uses
 *               core_commit's commit and seal, core_drain_queue.c's queue)
 *   core_metadata.c  the change of an object's user metadata (a COPY onto
 *               itself, or the staged copy's), the source of a copy
 *   core_namespace.c  mkdir, rmdir, unlink, rename (uses core_commit's
 *               commit, core_metadata's copy source)
 *   core_xattr.c  xattrs: user metadata (uses core_metadata's change)
 *   core_mknod.c  mknod, symlink, readlink (uses core_io's create, open
 *               and read, core_drain's commit at close, core_mend's mend
 *               of a name)
 *   core_setattr.c  setattr: mode, owner, times kept in S3 (uses
 *               core_metadata's change, core_drain's truncate)
 *   core_trace.c  the names the I/O trace records (uses core.c only)
 *
 * Locks: c->ofile_lock protects the open-file table (ofiles_by_*) and the
 * made-directories list (mkdirs); it is a leaf: nothing else is taken while
 * it is held and it is never held across an S3, index or stage call that
 * blocks (stage_file_* calls are made with an ofile reference, not the lock).
 * c->dir_lock protects the list of open directory handles and what the
 * change callbacks add to them (core_dir_removed); a leaf too, taken
 * under the index's write lock by those callbacks.
 * The inode table has its own lock (fuse/inode.h).
 * Lock order (this module's; docs/design.md "Lock order" has the process's):
 *   core drain lock -> core ofile_lock
 *
 * Open files: an object opened for writing gets one struct ofile holding
 * its staged version (sync/stage/stage.h), shared by every descriptor of this
 * mount in any view (read-your-writes inside a mount). It is found by its
 * bucket and key while its name lasts, by inode after (ofiles_gone). It
 * lives while any descriptor or the drain holds it (refs) and is released
 * after the last.
 *
 * Made directories: c->mkdirs is what the index stores under 'D' (loaded at
 * core_new, changed together with it); one entry per (view, path). A
 * directory listed from keys gets an entry when its mode is set (chmod).
 *
 * POSIX attributes (common/posix.h) come with the object's user metadata:
 * the index's membership (struct index_attr px) for what it shows, the
 * ofile's meta for a file staged here (times_set: its mtime was set by
 * utimensat after its last write, so the commit keeps it instead of now).
 *
 * Tests: the test_fscore*.c, test_drain*.c and test_wb*.c files (through
 * core.h).
 */
#ifndef FACETFS_FUSE_CORE_INT_H
#define FACETFS_FUSE_CORE_INT_H

#include "fuse/core.h"

#include "common/object.h"
#include "common/posix.h"
#include "fuse/inode.h"
#include "fuse/links.h"
#include "sync/cache/visibility.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct stage_file;
struct drain_ent;

/* The version of an ofile's last upload, shared with the read-only
 * descriptors opened while it was staged: they read the staged copy while
 * it lasts and this version after (core_io.c), never the version S3 had
 * before. Fields under c->ofile_lock; refs atomic (the ofile, each such
 * descriptor). */
struct ofile_pub {
	atomic_int refs;
	char *bucket, *key;          /* NULL until an upload */
	char etag[72];
	uint64_t size;
};

struct ofile {
	uint64_t ino;                /* the inode it was last found under (lock) */
	char *vname;                 /* the view's name (view indexes change) */
	char *path;                  /* inside the view */
	char *bucket, *key;          /* what names it in the table (lock) */
	struct stage_file *sf;
	struct obj_meta meta;        /* what the upload carries: metadata, type */
	int refs;                    /* descriptors holding it, and the drain */
	int writers;                 /* writable descriptors open (lock): the
				      * drain publishes nothing while one is */
	bool pub_held;               /* the drain found a writer (lock) */
	bool unlinked;               /* its name is gone (unlink, renamed over):
				      * never uploaded again, found by inode only */
	bool times_set;              /* mtime set since the last write (lock) */
	int committing;              /* commits under way (core_ofile_commit) */
	int held;                    /* a rename onto or of its name runs:
				      * commits wait */
	char base_etag[72];          /* the version it is based on: the ETag at
				      * open or of this mount's last upload;
				      * "" for a new object; CORE_BASE_ANY
				      * (lock) */
	bool tabled;                 /* in the open-file table (lock) */
	struct ofile_pub *pub;       /* NULL until a reader needs it (lock) */
	struct drain_ent *drain;     /* its entry in write-back's queue, or
				      * NULL (the drain's lock,
				      * core_drain_queue.h) */
	struct ofile *next;          /* its chain: by key while named, by
				      * inode once unlinked */
};

/* The base_etag of a file taken up from a journal that named no base
 * (written by a gateway before journals had one): its upload is not
 * checked against another client's write, as that gateway would not
 * have checked it either. */
#define CORE_BASE_ANY "*"

#define CORE_OFILE_SLOTS 1024        /* a power of two */

struct mkdir_ent {                   /* a directory made with mkdir */
	char *vname;
	char *path;
	struct obj_posix px;         /* its mode, owner, mtime (have 0: defaults) */
	struct mkdir_ent *next;
};

/* The core's counters (common/stats.h, rows in core.c): requests by kind
 * (open_from_index: opens answered from the index without a HEAD;
 * open_direct_cold: opens of a cold stream given direct I/O;
 * open_direct_size: opens of a version whose size the index does not
 * have yet, given direct I/O, core_io.c); the
 * copies of metadata changes (core_metadata.c) whose source was the index's
 * record (no HEAD), of which the object had moved on (-ESTALE: a HEAD and
 * a second COPY), and copies made in parts (shown under "s3"). */
struct core_counters {
	stats_counter lookup, getattr, readdir, read, open, open_from_index,
		      open_direct_cold, open_direct_size, getxattr;
	stats_counter copy_from_index, copy_stale_index, copy_in_parts;
};

struct core {
	struct core_deps d;
	struct reader_src src;       /* d.s3, rctr, d.bc: what readers read */
	struct reader_counters rctr; /* readers' window hits without d.bc */
	struct core_counters ctr;
	struct stats_group grp;      /* ctr, registered with d.st */
	uid_t uid;
	gid_t gid;
	struct timespec start;
	char *recovered;             /* absolute: target of .facetfs/recovered */
	struct links *links;         /* link targets by version (links.h) */

	pthread_mutex_t dir_lock;    /* protects dirs, n_dirs, dirs_bytes and
				      * the handles' shared fields
				      * (core_readdir.c) */
	struct core_dir *dirs;       /* open directory handles */
	size_t n_dirs, dirs_bytes;

	pthread_mutex_t ofile_lock;  /* protects the ofile tables and mkdirs */
	pthread_cond_t ofile_cv;     /* an ofile's commit ended, or its hold,
				      * or its last writer left */
	/* The open-file table: a file staged here is found by its bucket
	 * and key from any view, whatever inode the kernel holds for it
	 * (renamed, forgotten, another view of the same prefix); one whose
	 * name is gone only by the inode its descriptors hold. Hashed, so a
	 * write-back backlog of thousands of files costs each lookup a
	 * short chain. n_ofiles (both tables) lets a read of a file no
	 * writer stages skip the inode table. */
	struct ofile *ofiles_by_key[CORE_OFILE_SLOTS];
	struct ofile *ofiles_gone[CORE_OFILE_SLOTS];
	size_t n_ofiles;
	struct mkdir_ent *mkdirs;
	struct core_drain *drain;    /* write-back (core_drain.c) */
};

enum file_kind { FILE_OBJECT, FILE_TEXT, FILE_CONTROL };

struct core_file {
	enum file_kind kind;
	/* FILE_OBJECT */
	uint64_t ino;
	size_t view;                 /* in the set of the request that set it;
				      * core_view_follow() finds it again by vname */
	char *vname;
	char *bucket, *key;
	struct vis_version *ver;     /* S3 version (read-only descriptors);
				      * with pub, NULL until the first read
				      * after the staged copy left (lock) */
	struct ofile_pub *pub;       /* opened while staged here (set at open) */
	struct ofile *of;            /* staged version (writable descriptors) */
	bool writable;
	bool cached;                 /* counted in the inode's cached_opens */
	/* FILE_TEXT: snapshot; FILE_CONTROL: last answer */
	pthread_mutex_t lock;        /* protects text, and ver when pub */
	char *text;
	size_t text_len;
};

/* The one accessor of the view set (see core.h "Views"): the set the
 * request rq pinned (core_req_begin). */
const struct core_views *core_views(const struct core_req *rq);

/* View view of this request's set; NULL for INODE_NO_VIEW or beyond. */
static inline const struct view *core_view(const struct core_req *rq, size_t view)
{
	const struct core_views *vs = core_views(rq);
	return view < vs->n ? vs->views[view] : NULL;
}

/* core.c */
/* The view index of a descriptor or directory handle in this request's
 * set, found again by its name (the view set may have changed). */
size_t core_view_follow(const struct core_req *rq, size_t *view, const char *vname);
/* Is view (an index in this request's set) the view called vname? Stored
 * entries (open files, made directories) know their view by name. */
bool core_in_view(const struct core_req *rq, const char *vname, size_t view);
bool core_view_writable(const struct core_req *rq, size_t view);
enum vis_policy core_view_policy(const struct core_req *rq, size_t view);
int64_t core_now_ns(void);
/* A made directory into c->mkdirs (its view by name: INODE_NO_VIEW until a
 * view of that name exists); at core_new, for each the index stores. */
int  core_mkdir_remember(struct core *c, const char *vname, const char *path,
			 const struct obj_posix *px);
/* Free of and all it holds (its staged file released); core_free frees the
 * open files left in the table with it. */
void core_ofile_free(struct ofile *of);
/* Drop a reference to p (freed with the last). */
void core_ofile_pub_put(struct ofile_pub *p);
void core_attr_dir(struct core *c, uint64_t ino, struct stat *st);
void core_attr_view_dir(struct core_req *rq, size_t view, uint64_t ino, struct stat *st);
void core_attr_file(struct core *c, uint64_t ino, uint64_t size, int64_t mtime_ns,
		    mode_t perm, struct stat *st);
/* Overlay what px holds (mode, owner, times) on st, filled for view; a
 * read-only view never shows write bits. */
void core_attr_posix(struct core_req *rq, size_t view, const struct obj_posix *px,
		     struct stat *st);
mode_t core_file_perm(struct core_req *rq, size_t view);
int  core_path_join(const char *dir, const char *name, char *out, size_t outlen);
/* The attributes a create, mknod or mkdir by who keeps (have 0 for who
 * NULL): its mode (with the file type), ids and, with_mtime, now. */
void core_who_posix(const struct core_who *who, bool with_mtime, struct obj_posix *px);
/* The attributes set changes into px, and ctime: now. */
void core_set_posix(const struct core_set *set, struct obj_posix *px);
/* The (view, path) of a directory inode and the path of its child name. */
int  core_child(struct core_req *rq, uint64_t parent, const char *name, size_t *view,
		char *path, size_t pathlen);
/* core_child() in a writable view (-EROFS otherwise). */
int  core_writable_child(struct core_req *rq, uint64_t parent, const char *name,
			 size_t *view, char *path, size_t pathlen);
/* bucket + key of (view, path); -EINVAL if the path cannot be a key. */
int  core_path_object(struct core_req *rq, size_t view, const char *path, char *bucket,
		      size_t blen, char *key, size_t klen);
/* Apply a change made through this mount to the index at once (own
 * changes visible to this mount before the event arrives; the index
 * keeps it over the late events of this mount's earlier writes).
 * core_index_made(): the same for the object of a file created here as
 * (vname, path), whose entry the kernel has from the create's reply. */
int  core_index_local(struct core *c, const struct obj_meta *o);
int  core_index_made(struct core *c, const struct obj_meta *o, const char *vname,
		     const char *path);
/* The same for the upload of a file sealed here (write-back) as (vname,
 * path): the bytes and attributes the kernel holds of it are the ones
 * uploaded, so the change of its record (the ETag now known) invalidates
 * nothing of that name. */
int  core_index_uploaded(struct core *c, const struct obj_meta *o, const char *vname,
			 const char *path);
/* Apply a version this mount saw (a HEAD's answer), not one it wrote,
 * only if provably newer than the record stored at that moment
 * (index_apply_newer: decided under the index's write lock). */
int  core_index_newer(struct core *c, const struct obj_meta *o);

/* core_ofile.c */
/* The staged file of an inode (ref taken): the one staged under the key
 * its name stands for, if the kernel holds this inode for that name now
 * (an inode renamed over or unlinked is not the name's); with
 * unlinked_too, else the one whose name went while this inode's
 * descriptors held it. Called in a request (the view set pinned). */
struct ofile *core_ofile_find(struct core_req *rq, uint64_t ino, bool unlinked_too);
/* The staged file a name shows (never an unlinked one), in any view. */
struct ofile *core_ofile_find_path(struct core_req *rq, size_t view, const char *path);
struct ofile *core_ofile_find_key(struct core *c, const char *bucket, const char *key);
/* of is known by a new path and key from now on (takes both strings). */
void core_ofile_rename(struct core *c, struct ofile *of, char *path, char *key);
/* The name of of is gone (unlink, or renamed over): its descriptors keep
 * its bytes, no name leads to it and it is never uploaded again. Waits
 * for a commit of it under way (its upload would land after the caller's
 * DELETE or COPY and bring the old name's object back); no lock held
 * meanwhile. */
void core_ofile_unlink(struct core *c, struct ofile *of);
/* A rename onto of's name: commits of of wait from now until the unhold
 * (one under way is waited for here), so that none lands over the COPY. */
void core_ofile_hold(struct core *c, struct ofile *of);
void core_ofile_unhold(struct core *c, struct ofile *of);
bool core_ofile_unlinked(struct core *c, struct ofile *of);
bool core_ofile_writing(struct core *c, struct ofile *of);   /* a writer is open */
/* A writable descriptor of of opens (waits while a commit of it runs, so
 * that an O_TRUNC never meets an upload; false, not counted: its name
 * went meanwhile, find the name's file again) and closes; the close of the
 * last one answers whether the drain was held back meanwhile
 * (core_ofile_publish_begin), so its caller queues the file again. */
bool core_ofile_writer_begin(struct core *c, struct ofile *of);
/* A writable descriptor opens of through inode ino: its descriptors'
 * inode from now on (where an unlink leaves it to be found). */
void core_ofile_set_ino(struct core *c, struct ofile *of, uint64_t ino);
/* of no longer stands for its name (its bytes were set aside after a
 * conflict: the name shows the store's version): found by inode only,
 * never published again. Does not wait (its caller's commit runs). */
void core_ofile_displace(struct core *c, struct ofile *of);
bool core_ofile_writer_end(struct core *c, struct ofile *of);
/* A publish of of begins (the drain's, or a writer's fsync: by_writer):
 * CORE_PUB_GO (committing, as core_ofile_commit_begin), CORE_PUB_GONE
 * (its name is gone) or, not by_writer, CORE_PUB_WRITING (a writable
 * descriptor is open: only a closed version is published; noted, so
 * that the last writer's close says so). */
enum { CORE_PUB_GO, CORE_PUB_GONE, CORE_PUB_WRITING };
int  core_ofile_publish_begin(struct core *c, struct ofile *of, bool by_writer);
/* A commit of of begins (false: its name is gone, nothing to publish;
 * waits while a rename holds it) and ends. */
bool core_ofile_commit_begin(struct core *c, struct ofile *of);
void core_ofile_commit_end(struct core *c, struct ofile *of);
void core_ofile_put(struct core *c, struct ofile *of);
/* The record of's uploads are told to (ref taken; NULL: no memory). */
struct ofile_pub *core_ofile_pub(struct core *c, struct ofile *of);
void core_ofile_pub_set_locked(struct ofile *of, const char *etag, uint64_t size);
/* Copy the version p names (0), or -ESTALE when none was uploaded. */
int  core_ofile_pub_version(struct core *c, struct ofile_pub *p, struct obj_meta *o);
/* Put of into the table unless another (not unlinked) ofile of its key
 * is there: then that one (ref taken) is returned and of is not inserted. */
struct ofile *core_ofile_insert(struct core *c, struct ofile *of);
/* What a file staged here shows (its size, mode, owner, times). */
void core_ofile_attr(struct core_req *rq, size_t view, struct ofile *of, uint64_t ino,
		     struct stat *st);

/* core_mkdir.c */
bool core_mkdir_exists(struct core_req *rq, size_t view, const char *path);
/* The attributes kept for the made directory (view, path): false if none. */
bool core_mkdir_attr(struct core_req *rq, size_t view, const char *path, struct obj_posix *px);
/* Replace them (the entry must exist: false otherwise). */
bool core_mkdir_set_attr(struct core_req *rq, size_t view, const char *path,
			 const struct obj_posix *px);
void core_mkdir_forget(struct core_req *rq, size_t view, const char *path);
/* The made directory (view, path) is now npath (an entry there already is
 * dropped: one per name). */
void core_mkdir_move(struct core_req *rq, size_t view, const char *path, const char *npath);
/* Names of the made directories directly under dir (malloc'ed array of
 * malloc'ed names; the caller frees both). */
int  core_mkdir_children(struct core_req *rq, size_t view, const char *dir,
			 char ***names, size_t *n);

/* Does (view, path) hold something staged here, or a made directory, below
 * it? (for rmdir and rename) */
bool core_tables_have_child(struct core_req *rq, size_t view, const char *path);

/* core_attr_view_dir for the directory at path, with the attributes kept
 * for it (made or chmod'ed here). */
void core_attr_dir_at(struct core_req *rq, size_t view, const char *path, uint64_t ino,
		      struct stat *st);
/* setattr of the directory at path (not a view's root: -EPERM; -EROFS in
 * a read-only view): the index keeps its attributes, and the made
 * directories list them. 0 or -errno. */
int  core_dir_setattr(struct core_req *rq, size_t view, const char *path,
		      const struct core_set *set);
/* An entry was made or removed at path: its parent directory's mtime and
 * ctime are now, when the index keeps that directory's attributes (made
 * with mkdir, or given attributes here); a directory known only from keys
 * (and a view's root) keeps none. Failures are logged, never returned. */
void core_dir_touch(struct core_req *rq, size_t view, const char *path);

/* core_mend.c */
/* What S3 holds of bucket/key (a HEAD: that version, or a tombstone when
 * it has none) in place of the index's record of this mount's unsent
 * version, if the index still holds one. 0, or the HEAD's or the index's
 * -errno. */
int core_mend_name(struct core *c, const char *bucket, const char *key);

/* core_lookup.c */
/* The files of .facetfs/, in name order, and their inodes. */
#define CORE_META_FILES 5
extern const char *const core_meta_names[CORE_META_FILES];
extern const uint64_t core_meta_inos[CORE_META_FILES];
/* What (view, path) is for this mount: a file staged here (created or
 * being written), what the index shows, or a directory made here. */
int  core_node_attr(struct core_req *rq, size_t view, const char *path, uint64_t ino,
		    struct stat *st, bool *is_dir);
/* Attributes of an inode the kernel holds. */
int  core_attr_of(struct core_req *rq, uint64_t ino, struct stat *st);

/* core_commit.c */
/* Commit point: upload the staged copy if it changed (its mtime metadata
 * set to now unless times_set), then show the new version in the index at
 * once. */
int  core_ofile_commit(struct core *c, struct ofile *of);
/* core_ofile_commit for a caller that began it (core_ofile_publish_begin)
 * and ends it; cond: a single PUT conditional on the file's base where the
 * store honours it (stage_file_commit_if: -EOPNOTSUPP, not sent: check
 * and commit without; -ESTALE: the key holds another version). */
int  core_ofile_commit_begun(struct core *c, struct ofile *of, bool cond);
/* The close of a file of a write-back view: sealed (stage_file_seal:
 * durable here, journaled "commit", not uploaded) and indexed as this
 * mount's own with no ETag yet. 0 or -EIO. */
int  core_ofile_seal(struct core *c, struct ofile *of);
/* of's version as this mount's own in the index: its size and metadata
 * now, etag (the upload's, or "" while it is only sealed here); sealed:
 * the upload of what was sealed (the kernel's pages and attributes of it
 * stay right). Failures are logged (S3 has it; the event brings the
 * index up to date). */
void core_ofile_index(struct core *c, struct ofile *of, const char *etag, bool sealed);
/* Publish of: a commit checked against its base (the drain's upload;
 * by_writer: a write-back fsync's, on a file a writer holds open).
 * PUB_DONE, PUB_CONFLICT (another client wrote the key since the base:
 * the local bytes set aside in recovered/, the store's version indexed),
 * PUB_NOTHING (not dirty: an fsync published it; or its name is gone:
 * its data dropped), PUB_WRITING (not by_writer, and a writer has it
 * open: nothing done), or -errno (kept, to be tried again). */
enum { PUB_DONE, PUB_CONFLICT, PUB_NOTHING, PUB_WRITING };
int  core_ofile_publish(struct core *c, struct ofile *of, bool by_writer);

/* core_io.c */
/* truncate(2) (f NULL) or ftruncate(2) of the staged copy; for a path,
 * the file opened for it (a writer counted) in *own, which the caller
 * publishes (its commit point), ends the writer of and puts. */
int  core_truncate_staged(struct core_req *rq, uint64_t ino, struct core_file *f,
			 uint64_t size, struct ofile **own);
/* Free a descriptor. A writable one's close may be the last writer of a
 * file the drain held back (core_ofile_writer_end): that ofile is
 * returned with the descriptor's reference, for the caller to queue again
 * and put; else NULL. */
struct ofile *core_file_close(struct core *c, struct core_file *f);
/* fsync of a descriptor where it publishes nothing: its staged bytes made
 * durable here (stage_file_sync). */
int  core_file_sync(struct core_req *rq, struct core_file *f);

/* core_drain.c */
/* A file waiting in the write-back drain whose name changed (rename):
 * sealed again under the new name. 0, or core_ofile_seal's error. */
int  core_drain_reseal(struct core *c, struct ofile *of);
/* A file the start's recovery left staged (sf from stage_file_adopt, with
 * what and base_known as it gave them) joins the drain, due at once: an
 * ofile for its bucket/key under the view that shows it (a write-back view
 * whose prefix holds it first; in no view: published all the same), based
 * on the version its journal named (CORE_BASE_ANY when none), indexed as
 * this mount's own pending version, so that every view lists and reads
 * the staged bytes until the drain publishes them. what's strings move
 * into the ofile (release what all the same). 0, or -errno: sf released
 * (pending again, for the next start). */
int  core_drain_adopt(struct core *c, struct stage_file *sf, struct obj_meta *what,
		      bool base_known);

/* core_metadata.c */
/* Change the user metadata of an object inode (edit gets a copy of the
 * current pairs to change in place; ctx is its): on its staged copy if it
 * is open for writing here (published at its commit), else in S3 now by a
 * COPY onto itself (one HEAD first). EOPNOTSUPP for a directory, EROFS in
 * a read-only view; edit's negative errno stops it. */
typedef int (*core_meta_edit_fn)(void *ctx, struct obj_meta *o, struct ofile *of);
int  core_meta_change(struct core_req *rq, uint64_t ino, core_meta_edit_fn edit, void *ctx);
/* What a copy of bucket/key starts from: the index's record when it is
 * complete (ETag, user metadata, content type) and use_index, with no
 * request, else a HEAD; *from says which (true: the index). src is
 * released by the caller. 0 or the HEAD's -errno. */
int  core_copy_source(struct core *c, const char *bucket, const char *key,
		      bool use_index, struct obj_meta *src, bool *from);

#endif
