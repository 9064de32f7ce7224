/*
 * index.h — the persistent index of facetfs (LevelDB under STATE_DIR/index):
 * object records, view membership, consumed Kafka offsets, scan progress.
 *
 * Keys ("\0" is a zero byte; every value is a compact binary record,
 * views/index_codec.h):
 *   'O' bucket \0 key            object record (obj_meta minus bucket/key);
 *                                tombstones keep OBJ_DELETED, seq, mtime
 *   'M' view \0 path             membership: attrs (size, mtime, etag) +
 *                                bucket, key. In `path` every '/' is stored
 *                                as \0, so a name sorts just before its own
 *                                subtree and readdir skips a subtree with
 *                                one Seek (to name \x01). A view with more
 *                                than one bucket shows "BUCKET/" + path.
 *   'K' topic \0 partition(be32) next offset to consume (int64 be)
 *   'S' bucket                   scan state (done flag, objects, token)
 *   'V' view                     view_hash the membership was built from
 *   'C' 'o' / 'C' 'v' view       live objects / members of view (u64 be)
 *   'D' view \0 path             a directory made with mkdir, or whose mode
 *                                was set (its attributes; index_dirs.c),
 *                                '/' kept as it is
 *   'U' bucket \0 key            unsent: the 'O' record is live with no
 *                                ETag (the gateway's own version, made or
 *                                staged here, not uploaded yet); written
 *                                and deleted in the batch that changes
 *                                the record, so that a start finds the
 *                                names a crash left unsent without a walk
 *                                of every record (index_unsent_each)
 * A name that is both an object and a directory is shown as the directory
 * (lookup and readdir agree); the object stays reachable by its key in S3.
 *
 * View sets (views/viewset.h): the writers compute memberships for the
 * INSTALLED set, the one index_set_views() last installed (the index holds
 * a reference to it until the next one or index_close). Readers name the
 * view itself (a view of a set the caller pinned, found by name: its key
 * prefix is 'M' name \0), so a reader that pinned an older set reads that
 * view's memberships by its name, whatever is installed meanwhile. Change
 * callbacks name the view too: a view index would need its set.
 *
 * Threads and locks: writers (index_apply*, index_scan_apply,
 * index_set_views) take the index's write mutex (LevelDB writes happen
 * under it: it is the one lock held across disk I/O; only writers wait for
 * it: event batches, scan pages, and FUSE requests applying the mount's
 * own change, e.g. a flush after its upload); readers (lookup, readdir,
 * object, offset, stats) take no lock of the index, they use LevelDB's own
 * thread safety (a readdir iterates one implicit snapshot). Change
 * callbacks run on the writer's thread with the write mutex held, after
 * the batch is written: they may call readers, never writers, and take
 * only leaf locks. Process-wide lock order: docs/design.md "Lock order".
 * index_open starts one background thread that builds an in-memory
 * filter of the stored 'O' keys (index_bloom.c: applies then skip the read
 * of keys never stored); index_close joins it.
 * Errors: 0 or a negative errno; LevelDB failures are logged once here and
 * returned as -EIO.
 *
 * Tests: test_index.c, test_index_rules.c, test_viewset.c, test_scan.c;
 * t_crash.sh, t_restart.sh.
 */
#ifndef FACETFS_INDEX_H
#define FACETFS_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/object.h"
#include "common/posix.h"
#include "views/filter.h"

struct index;
struct stats;

/* Clock slack between an event's time and an object's Last-Modified (two
 * clocks, S3's and the event source's, and Last-Modified's whole seconds):
 * index_apply's stale rule, index_same_version's "same version" and the
 * rescan's "fresh" (index_reconcile.h) all allow this much. */
#define INDEX_TIME_SLACK_NS 1000000000LL

struct viewset;
struct viewset_slot;

/* Open (create) STATE_DIR/index. st may be NULL. On error err holds why. */
int  index_open(const char *state_dir, struct stats *st, struct index **out,
		char *err, size_t errlen);
/* Close; no other call may be running. NULL is a no-op. */
void index_close(struct index *ix);
/* Write batches with fsync (power-loss safe) or not (default: a process
 * crash, even kill -9, never loses a written batch; a power loss may). */
void index_set_sync(struct index *ix, bool sync);

/* Install a sealed view set (the index takes a reference). For every view
 * that is new or whose view_hash changed, its membership is dropped and
 * rebuilt from the stored object records (no S3 request); memberships of
 * views no longer present are dropped. Holds the write mutex for the
 * rebuild (writers wait; readers of a changed view meanwhile see its
 * membership half built). Once vs is installed, if publish is not NULL,
 * vs is made current in it before the write mutex is released, so the
 * published set is always the installed one whenever no writer runs
 * (index_apply_for relies on it). A rebuild that fails (-EIO, -ENOMEM)
 * leaves vs installed and published, its memberships incomplete: install
 * a set again (the previous one) to rebuild; -ENOMEM before anything was
 * installed changes nothing. */
int  index_set_views(struct index *ix, struct viewset *vs, struct viewset_slot *publish);

enum index_change { INDEX_ADDED = 1, INDEX_REMOVED = 2, INDEX_CHANGED = 3 };
/* view: the name of the view whose membership changed (valid during the
 * call). */
typedef void (*index_change_fn)(void *ctx, const char *view, const char *path,
				int what);

/* An object's version changed (after the write that changed it, on the
 * writer's thread, write mutex held: enqueue and return, call no index
 * function). old_etag: the version that was live before (NULL: none);
 * new_etag: the live one now (NULL: deleted). warm_max: the largest
 * "warm" max_object among the views the new version is a member of (0:
 * no warm view wants it; a scan counts only views with "on_scan"). The
 * strings are valid during the call. */
struct index_version {
	const char *bucket, *key;
	const char *old_etag, *new_etag;
	uint64_t old_size, new_size;
	uint64_t warm_max;
	bool from_scan;
};
typedef void (*index_version_fn)(void *ctx, const struct index_version *v);
/* Set once, before the first apply (the burst buffer's hook). */
void index_set_version_hook(struct index *ix, index_version_fn fn, void *ctx);

struct index_pos { const char *topic; int32_t partition; int64_t next_offset; };

/* Apply events (obj_meta as decoded; deletes carry OBJ_DELETED) in order,
 * and store the offsets, in ONE WriteBatch. Per key an event is skipped as
 * stale only when provably older than the stored record: seq_cmp < 0, or
 * (sequencers incomparable) the record came from a scan and the event's
 * time is more than INDEX_TIME_SLACK_NS before its Last-Modified. Deletes leave tombstones.
 * Events without bucket or key are skipped (counted as stale).
 * Returns the number of stale events (>= 0) or a negative errno (nothing
 * written). Counts events.applied / events.ignored / keys.not_a_path in the
 * index's counters (common/stats.h), and events.redelivered
 * for applied events that were the stored record already. */
int  index_apply(struct index *ix, const struct obj_meta *ev, size_t n,
		 const struct index_pos *pos, size_t npos,
		 index_change_fn fn, void *ctx);
/* One change the gateway itself made (its PUT, COPY or DELETE returned;
 * o has no sequencer): applied as an event is, and remembered until its
 * event arrives (views/index_own.h), so that event, or the late event of
 * an earlier write of the gateway's to the same key, does not replace it.
 * Such events are skipped and counted as events.own (and events.ignored).
 * Returns as index_apply. */
int  index_apply_own(struct index *ix, const struct obj_meta *o,
		     index_change_fn fn, void *ctx);
/* A version read from S3 outside the event stream (a HEAD that found
 * another version than the index named): written as a scan record
 * (OBJ_FROM_SCAN) only when a live record is stored and o's Last-Modified
 * is more than INDEX_TIME_SLACK_NS after it, decided under the write lock
 * so that an event applied meanwhile is never undone. 1 written, 0 kept,
 * or -errno (views/index_reconcile.c). */
int  index_apply_newer(struct index *ix, const struct obj_meta *o,
		       index_change_fn fn, void *ctx);
/* index_apply for events prepared (enriched with what its views need) for
 * the set vs: -EAGAIN, nothing written, when vs is not the installed set
 * (a reload came in between): prepare them for the current set, retry. */
int  index_apply_for(struct index *ix, const struct viewset *vs,
		     const struct obj_meta *ev, size_t n,
		     const struct index_pos *pos, size_t npos,
		     index_change_fn fn, void *ctx);

/* Stored next offset of a partition; -ENOENT if none. */
int  index_offset_get(struct index *ix, const char *topic, int32_t partition,
		      int64_t *next);

/* Scan progress of a bucket (views/scan.c). */
struct index_scan_state {
	bool done;             /* the first complete listing finished */
	uint64_t objects;      /* objects listed so far */
	char token[1024];      /* continuation token of the next page, "" = start */
};
int  index_scan_state_get(struct index *ix, const char *bucket,
			  struct index_scan_state *out);  /* -ENOENT: never started */
/* Insert one listed page (objects with OBJ_FROM_SCAN; HEAD fields if known)
 * and the state after it in one batch. Rule per object: no record -> insert;
 * a live record written by an event -> kept; a tombstone at or after the
 * listed Last-Modified -> kept; otherwise (older scan record or older
 * tombstone) -> replaced. Returns the number kept (>= 0) or -errno. */
int  index_scan_apply(struct index *ix, const char *bucket,
		      const struct obj_meta *objs, size_t n,
		      const struct index_scan_state *after,
		      index_change_fn fn, void *ctx);

/* What a listing shows of one name. */
/* px: the object's POSIX attributes from its user metadata (common/posix.h;
 * have 0 for none), kept in the membership so a listing needs no read of
 * the record. */
struct index_attr { bool is_dir; uint64_t size; int64_t mtime_ns; char etag[72];
		    struct obj_posix px; };

/* v: a view of a set the caller holds (see above). path is relative to
 * the view root ("a/b", "" = the root, which always exists). -ENOENT if
 * nothing is there; -EINVAL for a NULL view. */
int  index_lookup(struct index *ix, const struct view *v, const char *path,
		  struct index_attr *out);
/* Children of dir, in byte order of their names, with names > after (NULL
 * or "" = from the start), until fn returns nonzero. 0, or -ENOENT when a
 * non-root dir has no children at all (and after is empty). */
typedef int (*index_dir_fn)(void *ctx, const char *name, const struct index_attr *a);
int  index_readdir(struct index *ix, const struct view *v, const char *dir,
		   const char *after, index_dir_fn fn, void *ctx);
/* Full record of the object stored at path (deep copy: obj_meta_release it).
 * -ENOENT if no object is there (a pure directory); a name that is both an
 * object and a directory still gives the object here. */
int  index_object(struct index *ix, const struct view *v, const char *path,
		  struct obj_meta *out);
/* Record by bucket/key, tombstones included (check OBJ_DELETED). */
int  index_object_get(struct index *ix, const char *bucket, const char *key,
		      struct obj_meta *out);
/* The stored record of the same version of the object o describes (by
 * o->bucket, o->key): live, the same ETag, a Last-Modified within
 * INDEX_TIME_SLACK_NS of o->mtime_ns (a copy with new metadata keeps the
 * ETag, not the time). For reusing what an earlier event or scan fetched
 * (metadata, content type, tags) instead of asking S3 again. 0 with a deep
 * copy in *out (obj_meta_release it); -ENOENT when there is no such record
 * (none, a tombstone, another version, o without an ETag); -ENOMEM, -EIO.
 * Any thread. Both reads consult the key filter first: a key never stored
 * (a first scan, a new object's event) costs no LevelDB read. */
int  index_same_version(struct index *ix, const struct obj_meta *o,
			struct obj_meta *out);

/* Counters for `facetfs status` (cheap: kept up to date by the writers). */
uint64_t index_objects(struct index *ix);                     /* live objects */
/* Members of the installed view called view_name(v); 0 if none is. */
uint64_t index_members(struct index *ix, const struct view *v);
size_t   index_n_views(struct index *ix);
/* Is the in-memory key filter complete (applies then skip the read of keys
 * never stored)? Built in the background after index_open; for status/tests. */
bool     index_filter_ready(struct index *ix);
/* What the index holds in memory now: LevelDB's block cache and memtables
 * (its "approximate-memory-usage"; the cache is bounded by
 * INDEX_CACHE_BYTES, each memtable by INDEX_MEMTABLE_BYTES) and the key
 * filter (10 to 40 bits per stored object: it has 10 bits a key of its
 * capacity, and is rebuilt at 4 times the keys once full; while it is
 * rebuilt the old one stays too). Any thread. */
#define INDEX_CACHE_BYTES (8u << 20)
#define INDEX_MEMTABLE_BYTES (16u << 20)
struct index_mem { uint64_t store_bytes, filter_bytes; };
void     index_mem(struct index *ix, struct index_mem *out);

/* Directories made with mkdir in a view (by view name, so they follow the
 * view through reloads) and their attributes (mode, owner, mtime; px NULL
 * or have 0: none): stored (again: replaced), removed, and each one listed
 * (fn returns 0 to go on, negative to stop with that error). 0 or a
 * negative errno. */
typedef int (*index_madedir_fn)(void *ctx, const char *view, const char *path,
				const struct obj_posix *px);
int  index_dir_add(struct index *ix, const char *view, const char *path,
		   const struct obj_posix *px);
int  index_dir_remove(struct index *ix, const char *view, const char *path);
int  index_dirs_each(struct index *ix, index_madedir_fn fn, void *ctx);

/* Each unsent record ('U' above) by bucket and key, in key order, from
 * one snapshot (fn returns 0 to go on, negative to stop with that error).
 * 0 or a negative errno. */
typedef int (*index_unsent_fn)(void *ctx, const char *bucket, const char *key);
int  index_unsent_each(struct index *ix, index_unsent_fn fn, void *ctx);

#endif
