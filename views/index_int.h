/*
 * index_int.h — the inside of struct index, shared by the index's files.
 * Not for other modules. Layers, each calling only those below it:
 *   index.c            open, close
 *   index_views.c      installing a view set, rebuilding memberships
 *   index_reconcile.c  a rescan's page against the index
 *   index_read.c       lookup, readdir, records
 *   index_write.c      the write path (ix_run: events, own changes, scan
 *                      pages); offsets and scan state
 *   index_batch.c      the batch overlay of one write
 *   index_bloom.c      the key filter
 *   index_table.c      the table of views: freed, a key's path in a view
 *   index_db.c         LevelDB helpers: write the batch, get a value
 * index_dirs.c (made directories) calls index_db.c only. Below them all:
 * index_own.c, index_codec.c, index_env.cc, route.c, viewset.c and the
 * filters (filter_int.h).
 *
 * Locks: wmu serialises every writer and guards the scratch fields and
 * the installed set (set: the view set the table was built from, pinned);
 * vlock guards the view table (views, buckets) for index_members, which
 * takes it shared; index_set_views takes it exclusive while swapping
 * tables; bloom_mu guards the key filter's pointer for readers (a probe).
 * Readers (index_read.c) use neither wmu nor vlock: they get the view from
 * the caller. The publishing slot's mutex is views/viewset.h's; the
 * change callbacks run under wmu.
 * Lock order (this module's; docs/design.md "Lock order" has the process's):
 *   index wmu -> index vlock -> view-set slot mutex
 *   index wmu -> index bloom_mu
 *
 * Tests: test_index.c, test_index_rules.c (through index.h).
 */
#ifndef FACETFS_INDEX_INT_H
#define FACETFS_INDEX_INT_H

#include <leveldb/c.h>
#include <pthread.h>
#include <stdatomic.h>

#include "common/stats.h"
#include "common/hash.h"
#include "views/index.h"
#include "views/index_codec.h"
#include "views/viewset.h"

struct ix_change;
struct ix_bloom;
struct route;
struct own_table;

struct ixview {
	const struct view *v;
	char *name;
	char *prefix;          /* 'M' name \0 */
	size_t plen;
	bool multi;            /* more than one bucket: paths start "BUCKET/" */
	size_t rank;           /* of prefix among the table's (ix_table_rank) */
	_Atomic uint64_t members;
};

/* One key of a write (index_batch.c): its record as the call sees it. */
struct ix_slot {
	const char *okey;          /* 'O' key (arena) */
	size_t oklen;
	uint64_t h;
	bool exists;               /* a record (live or tombstone) is stored */
	bool was_unsent;           /* the stored record is unsent (its 'U' key) */
	struct obj_meta rec;       /* current record; strings in arena or caller's */
	const char *enc;           /* its encoding (arena) */
	size_t enclen;
	bool dirty;                /* enc must be written */
	uint64_t sk;               /* sort key: see key_head() */
};

/* A membership write, kept until the end of the call so that the batch
 * reaches LevelDB's memtable in key order (neighbouring skiplist searches
 * share their cache-hot upper levels: measurably cheaper than random order). */
struct ix_op {
	const char *k, *v;         /* arena; v NULL = delete */
	size_t kl, vl;
	uint32_t seq;              /* order of the op in the call: later wins */
	uint32_t rank;             /* of its view's prefix (ixview.rank) */
	uint64_t sk;               /* sort key: see key_head() */
};

struct ixbucket {          /* a bucket and the views that use it */
	char *name;
	size_t *views;
	size_t n;
};

/* The index's counters (common/stats.h, rows in index.c): events applied,
 * skipped as stale and applied again (the stored record already), events
 * of the gateway's own writes skipped for its newer record (also counted
 * as skipped), keys that cannot be paths in a view that matches them. */
struct index_counters {
	stats_counter applied, ignored, redelivered, own, bad_keys;
};

struct index {
	leveldb_t *db;
	leveldb_options_t *opts;
	leveldb_filterpolicy_t *fpolicy;
	leveldb_cache_t *cache;
	leveldb_env_t *env;        /* tables read, not mapped (index_env.h) */
	leveldb_readoptions_t *ro;
	leveldb_readoptions_t *ro_list; /* a listing's: leaves the block cache
				     * to point reads (index_readdir) */
	leveldb_writeoptions_t *wo;
	struct index_counters ctr;
	struct stats_group grp;    /* ctr, registered with index_open's st */

	pthread_mutex_t wmu;
	pthread_rwlock_t vlock;
	struct viewset *set;       /* installed set (pinned); views[i] is its view i */
	struct ixview *views;
	size_t n_views;
	struct ixbucket *buckets;
	size_t n_buckets;
	struct route *route;       /* candidate views of a (bucket, key); under wmu */
	_Atomic uint64_t objects;

	struct own_table *own;     /* own writes awaiting events, under wmu
				    * (index_own.h); NULL: none kept */
	int64_t run_ns;            /* CLOCK_MONOTONIC at the apply's start */

	/* writer scratch, under wmu (index_write.c, index_batch.c) */
	leveldb_writebatch_t *wb;
	struct arena ar;
	struct ibuf kbuf, vbuf, tbuf;
	struct ix_slot *slots;     /* in-batch overlay: records by 'O' key */
	size_t slots_cap;
	int32_t *tab;              /* open addressing into slots, -1 = empty */
	size_t tab_cap;
	struct ix_change *chg;     /* changes to report after the write */
	size_t n_chg, chg_cap;
	struct index_version *vchg; /* version changes for the hook (strings
				     * in the arena) */
	size_t n_vchg, vchg_cap;
	index_version_fn vhook;    /* set before the first apply */
	void *vhook_ctx;
	int64_t *mdelta;           /* member count change per view */
	size_t mdelta_cap;
	int32_t *evslot;           /* slot of each input record, -1 = skipped */
	int32_t *order;            /* slots sorted by key */
	size_t ev_cap;
	struct ix_op *ops;         /* membership puts/deletes, sorted before writing */
	size_t n_ops, ops_cap;
	struct ix_op *ops_tmp;     /* the ops grouped by view (index_batch.c, ops_group) */
	size_t ops_tmp_cap;
	size_t *vstart;            /* per prefix rank: where its ops go (ops_group) */
	size_t vstart_cap;
	size_t *cand;              /* route_find output, route_max entries */
	size_t cand_cap;

	/* key filter (index_bloom.c): bloom answers "surely absent" once
	 * complete; bloom_building is being filled by the builder thread.
	 * Pointers and flags under wmu; bloom is also replaced under
	 * bloom_mu, which readers take to probe it (ix_bloom_may_hold).
	 * Order: wmu before bloom_mu. */
	pthread_mutex_t bloom_mu;
	struct ix_bloom *bloom, *bloom_building;
	pthread_t bloom_thread;
	bool bloom_running, bloom_joinable;
	atomic_bool bloom_stop;
};

/* LevelDB helpers (index_db.c). */
/* Write the batch ix->wb (then clears it). 0 or -EIO (logged). */
int  ix_write(struct index *ix, const char *what);
/* Get a value: 0 with *val (leveldb_free it), -ENOENT, or -EIO. */
int  ix_get(struct index *ix, const leveldb_readoptions_t *ro,
	    const char *k, size_t kl, char **val, size_t *vl);
/* Each key tag "A\0B" in key order: fn(ctx, A, B, value) with copies of
 * A and B, until it returns non-zero (a negative errno stops the walk and
 * is returned). Keys of the tag without the NUL are skipped. 0, the
 * error, or -EIO (logged as a listing of what). */
typedef int (*ix_pair_fn)(void *ctx, const char *a, const char *b,
			  const char *val, size_t vl);
int  ix_each_pair(struct index *ix, char tag, const char *what, ix_pair_fn fn,
		  void *ctx);

/* The write path (index_write.c). */
/* The scan page rule (index_scan_apply): keep the stored record rec instead
 * of the listed object? A tombstone at or after the listed Last-Modified
 * (deleted later) and a record written by an event are kept. The rescan's
 * rules (index_reconcile.c) start from it. */
bool ix_scan_keeps_record(const struct obj_meta *rec, const struct obj_meta *listed);
/* Writes with the caller's rule (index_reconcile.c): under the write lock,
 * decide() sees each input record with the stored one (NULL if none;
 * tombstones carry OBJ_DELETED) and returns true to write o (a live o as a
 * scan record, OBJ_FROM_SCAN; a tombstone as a tombstone with o's mtime),
 * false to keep what is stored. One batch, memberships and counters as
 * index_scan_apply. Returns the number kept (>= 0) or -errno. */
typedef bool (*ix_decide_fn)(void *dctx, const struct obj_meta *stored,
			     const struct obj_meta *o);
int  ix_run_decided(struct index *ix, const struct obj_meta *objs, size_t n,
		    ix_decide_fn decide, void *dctx, index_change_fn fn, void *ctx);

/* The batch overlay (index_batch.c), under wmu. */
/* Mask of the overlay's table for n keys (its size less one). */
size_t ix_tab_mask(size_t n);
/* Reset the scratch for a call of n records. 0 or -ENOMEM. */
int  ix_scratch_prepare(struct index *ix, size_t n);
/* The slot of the 'O' key in ix->kbuf (*out), created (not loaded) if new. */
int  ix_slot_find_add(struct index *ix, size_t mask, size_t *nslots, int32_t *out);
/* Read the stored record of every slot, in key order. *in_order: the
 * input was in key order already. 0 or -errno. */
int  ix_slots_load(struct index *ix, size_t nslots, bool *in_order);
/* Keep a membership put (v: in the arena) or delete (v NULL) of view xv. */
int  ix_op_add(struct index *ix, const struct ixview *xv, const char *k, size_t kl,
	       const char *v, size_t vl);
/* Records and memberships into the batch, both in key order. */
int  ix_ops_flush(struct index *ix, size_t nslots, bool in_order);
/* Set each view's rank: the order of its prefix among the n views' (the
 * writers group membership keys by it). 0 or -ENOMEM. */
int  ix_table_rank(struct ixview *views, size_t n);

/* Delete every key starting with prefix, in batches (index_views.c). */
int  ix_drop_prefix(struct index *ix, const char *prefix, size_t plen);

/* The table of views (index_table.c). */
/* Free a view table and its router. */
void ix_table_free(struct ixview *views, size_t n, struct ixbucket *b, size_t nb,
		   struct route *r);
/* Membership path of key in view vi into out (with "BUCKET/" for multi-
 * bucket views): 0, -ENOENT (not in the view's namespace), -EINVAL (key
 * cannot be a path), -ENAMETOOLONG. */
int  ix_member_path(const struct index *ix, size_t vi, const char *bucket,
		    const char *key, char *out, size_t outlen);

/* FNV-1a 64 of an 'O' key: the overlay's and the key filter's hash. */
static inline uint64_t ix_key_hash(const char *p, size_t n)
{
	return hash_fnv_bytes(HASH_FNV_SEED, p, n);
}

/* Key filter (index_bloom.c). add/maybe: any thread; the rest under wmu,
 * except ix_bloom_stop (index_close, no writer running). */
void ix_bloom_add(struct ix_bloom *b, uint64_t h);
bool ix_bloom_maybe(const struct ix_bloom *b, uint64_t h);
void ix_bloom_free(struct ix_bloom *b);
/* May the index hold the 'O' key k? false only when the complete filter
 * says it surely does not. Any thread (takes bloom_mu for the probe). */
bool ix_bloom_may_hold(struct index *ix, const char *k, size_t kl);
/* Start building a filter if there is none or it is over capacity. */
void ix_bloom_maybe_rebuild(struct index *ix, uint64_t capacity);
void ix_bloom_stop(struct index *ix);

#define IX_PATH_MAX 4096

#endif
