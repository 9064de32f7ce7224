/*
 * bcache.c — the block cache's table and policy (bcache.h): a hash map of
 * the blocks on disk, the segmented LRU, the budget, the start-up listing
 * thread and the drop thread. The disk side is in bcache_disk.c.
 *
 * An entry (struct ent) is in one of three states, changed under bc->mu:
 *   READY    its file is on disk; it is on one LRU list (probation or
 *            protected) and its charge is in bc->used;
 *   WRITING  a put reserved its charge (in bc->used) and writes the file
 *            with no lock held; on no list, so never chosen for eviction;
 *            a second put of the block is skipped; a drop marks it doomed
 *            and the put removes the file once written;
 *   DYING    chosen for removal (evicted, dropped, failed its check): its
 *            charge is already out of bc->used, on no list; whoever made
 *            it DYING unlinks the file with no lock held, then takes it
 *            out of the map and frees it. A put of a DYING block is skipped.
 * Invariants (under mu): used = sum of the charges of READY and WRITING
 * entries; seg[s].bytes = sum over READY entries of segment s; n_ready
 * counts READY entries; nents every entry in the map (at most ENTRIES_MAX
 * plus the puts in flight). When nothing runs, the READY entries are
 * exactly the block files on disk (drops of blocks the listing had not
 * reached yet may leave an entry without a file: its first read removes it).
 *
 * Threads: the listing thread (list_main) runs once at open; the drop
 * thread (drop_main) serves the bounded drop queue. conf.staged() is
 * called with no lock held (the stage has its own).
 */
#include "sync/bcache_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/lock.h"
#include "common/lockfile.h"
#include "common/file.h"
#include "common/log.h"
#include "common/stats.h"

/* Entries the map holds at most (about 80 bytes each: 320 MiB at the cap).
 * A budget allows at most max_bytes / 4 KiB anyway. */
#define ENTRIES_MAX   (1u << 22)
#define BUCKETS_FIRST 1024u
#define DROP_QUEUE    4096u          /* drop requests waiting at most */
#define LIST_BATCH    4096u          /* listed blocks inserted per lock */

enum ent_state { ENT_READY, ENT_WRITING, ENT_DYING };
enum { SEG_PROBATION, SEG_PROTECTED, SEG_N };

struct ent {
	struct bcache_hash h;
	uint64_t blk;
	struct ent *hnext;           /* hash chain */
	struct ent *prev, *next;     /* LRU list (READY): prev is more recent */
	struct ent *vnext;           /* list of victims (DYING) */
	uint64_t charge;
	uint64_t seq;                /* new at every (re)write */
	uint8_t state, seg;
	bool warm;                   /* put by warm-on-arrival, unread */
	bool doomed;                 /* WRITING, dropped meanwhile */
};

struct lru {
	struct ent *head, *tail;     /* head: most recently used */
	uint64_t bytes;
};

struct drop_req {
	struct bcache_hash h;
	uint64_t nblk;
};

/* The burst buffer's counters (common/stats.h): blocks read from it, and
 * blocks a read wanted that it did not hold (the reader counts its window
 * hits and misses under the same names when there is no burst buffer);
 * what the admission rule did: blocks reads stored, blocks cold readers
 * fetched and did not store, opens found cold. */
struct bcache_stats {
	stats_counter hits, misses;
	stats_counter admitted, not_admitted, cold_opens;
};

static const struct stats_def bcache_stats[] = {
	STATS_COUNTER(struct bcache_stats, hits, "cache", "hits"),
	STATS_COUNTER(struct bcache_stats, misses, "cache", "misses"),
	STATS_COUNTER(struct bcache_stats, admitted, "cache", "admitted"),
	STATS_COUNTER(struct bcache_stats, not_admitted, "cache", "not_admitted"),
	STATS_COUNTER(struct bcache_stats, cold_opens, "cache", "cold_opens"),
};

struct bcache {
	char *dir;
	uint32_t block_size;
	uint64_t max_bytes;
	uint64_t (*staged)(void *ctx);
	void *staged_ctx;
	void (*dir_made)(void *ctx);
	uint64_t cold_min;           /* bcache_admit: see bcache.h */
	struct bcache_stats ctr;
	struct stats_group grp;      /* ctr, registered with conf.st */
	int lock_fd;                 /* DIR/lock, flock'ed */
	pthread_t list_thr, drop_thr;
	atomic_bool stop;            /* close: the listing gives up */
	atomic_uint_fast64_t tmp_seq;
	atomic_uint_fast64_t logged; /* errnos of write errors logged (bits) */

	pthread_mutex_t mu;          /* protects everything below */
	pthread_cond_t drop_cv;      /* drop queue not empty, or stopping */
	struct ent **buckets;
	size_t nbuckets, nents;
	struct lru seg[SEG_N];
	uint64_t used, n_ready, seq;
	bool loading, stopping;
	bool unlisted;               /* the listing failed: DIR's contents are
				      * unknown, so no put (the budget could
				      * not be kept); reads look on disk */
	struct bcache_counters c;    /* the event counters */
	struct bcache_hash *seen;    /* BCACHE_SEEN slots: versions opened
				      * (bcache_admit); all zero: empty */
	struct drop_req drops[DROP_QUEUE];
	size_t d_head, d_len;
};

/* ---- the map ---------------------------------------------------------- */

static size_t slot_of(const struct bcache *bc, const struct bcache_hash *h,
		      uint64_t blk)
{
	uint64_t x = h->h[1] ^ (blk * 0x9e3779b97f4a7c15ull);
	x ^= x >> 31;
	return (size_t)(x & (bc->nbuckets - 1));
}

static struct ent *map_find(struct bcache *bc, const struct bcache_hash *h,
			    uint64_t blk)
{
	for (struct ent *e = bc->buckets[slot_of(bc, h, blk)]; e; e = e->hnext)
		if (e->blk == blk && e->h.h[0] == h->h[0] && e->h.h[1] == h->h[1])
			return e;
	return NULL;
}

/* Double the buckets when the chains grow long (silently keeps the old
 * ones when memory is short: chains are only longer). */
static void map_grow(struct bcache *bc)
{
	size_t n = bc->nbuckets * 2;
	struct ent **b = calloc(n, sizeof *b);
	if (!b)
		return;
	struct ent **old = bc->buckets;
	size_t on = bc->nbuckets;
	bc->buckets = b;
	bc->nbuckets = n;
	for (size_t i = 0; i < on; i++) {
		struct ent *e = old[i];
		while (e) {
			struct ent *nx = e->hnext;
			size_t s = slot_of(bc, &e->h, e->blk);
			e->hnext = b[s];
			b[s] = e;
			e = nx;
		}
	}
	free(old);
}

static void map_insert(struct bcache *bc, struct ent *e)
{
	if (bc->nents >= bc->nbuckets && bc->nbuckets < ENTRIES_MAX)
		map_grow(bc);
	size_t s = slot_of(bc, &e->h, e->blk);
	e->hnext = bc->buckets[s];
	bc->buckets[s] = e;
	bc->nents++;
}

static void map_remove(struct bcache *bc, struct ent *e)
{
	struct ent **pp = &bc->buckets[slot_of(bc, &e->h, e->blk)];
	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp) {
		*pp = e->hnext;
		bc->nents--;
	}
}

static struct ent *ent_new(const struct bcache_hash *h, uint64_t blk)
{
	struct ent *e = calloc(1, sizeof *e);
	if (e) {
		e->h = *h;
		e->blk = blk;
	}
	return e;
}

/* ---- LRU lists -------------------------------------------------------- */

static void lru_push(struct bcache *bc, struct ent *e, int seg)
{
	struct lru *l = &bc->seg[seg];
	e->seg = (uint8_t)seg;
	e->prev = NULL;
	e->next = l->head;
	if (l->head)
		l->head->prev = e;
	else
		l->tail = e;
	l->head = e;
	l->bytes += e->charge;
}

static void lru_unlink(struct bcache *bc, struct ent *e)
{
	struct lru *l = &bc->seg[e->seg];
	if (e->prev)
		e->prev->next = e->next;
	else
		l->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		l->tail = e->prev;
	e->prev = e->next = NULL;
	l->bytes -= e->charge;
}

/* A READY entry leaves the table's accounting: it becomes DYING (the
 * caller unlinks its file, then reaps it). */
static void ent_retire(struct bcache *bc, struct ent *e)
{
	lru_unlink(bc, e);
	bc->used -= e->charge;
	bc->n_ready--;
	e->state = ENT_DYING;
	if (e->warm) {
		e->warm = false;
		bc->c.warm_bytes -= e->charge;
		bc->c.warm_wasted++;
	}
}

/* The clean budget now. Called with no lock held. */
static uint64_t budget_now(const struct bcache *bc)
{
	uint64_t s = bc->staged ? bc->staged(bc->staged_ctx) : 0;
	return s >= bc->max_bytes ? 0 : bc->max_bytes - s;
}

/* Evict READY entries (probation's LRU end first, then protected's) until
 * need more bytes and one more entry fit; the victims are pushed on
 * *victims for victims_reap(). false when not enough could be evicted. */
static bool room_make(struct bcache *bc, uint64_t budget, uint64_t need,
		      struct ent **victims)
{
	while (bc->used + need > budget ||
	       (need && bc->nents + 1 > ENTRIES_MAX)) {
		struct ent *v = bc->seg[SEG_PROBATION].tail;
		if (!v)
			v = bc->seg[SEG_PROTECTED].tail;
		if (!v)
			return false;
		ent_retire(bc, v);
		bc->c.evictions++;
		v->vnext = *victims;
		*victims = v;
	}
	return true;
}

/* Keep the protected segment at most 80 % of the clean budget. */
static void protected_cap(struct bcache *bc, uint64_t budget)
{
	uint64_t cap = budget / 5 * 4;
	struct lru *p = &bc->seg[SEG_PROTECTED];
	while (p->bytes > cap && p->tail) {
		struct ent *e = p->tail;
		lru_unlink(bc, e);
		lru_push(bc, e, SEG_PROBATION);
	}
}

static void path_of(const struct bcache *bc, const struct bcache_hash *h,
		    uint64_t blk, char *path, size_t size)
{
	char rel[BCACHE_NAME_MAX + 4];
	bcache_name_format(h, blk, rel);
	snprintf(path, size, "%s/%s", bc->dir, rel);
}

/* Unlink the victims' files (no lock held), then free them. */
static void victims_reap(struct bcache *bc, struct ent *victims)
{
	if (!victims)
		return;
	for (struct ent *v = victims; v; v = v->vnext) {
		char path[PATH_MAX];
		path_of(bc, &v->h, v->blk, path, sizeof path);
		unlink(path);
	}
	mod_lock(&bc->mu);
	for (struct ent *v = victims; v; v = v->vnext)
		map_remove(bc, v);
	mod_unlock(&bc->mu);
	while (victims) {
		struct ent *nx = victims->vnext;
		free(victims);
		victims = nx;
	}
}

/* ---- reads ------------------------------------------------------------ */

/* A hit: move e to the most recent end of the protected segment. */
static void hit_promote(struct bcache *bc, struct ent *e, uint64_t budget)
{
	lru_unlink(bc, e);
	lru_push(bc, e, SEG_PROTECTED);
	protected_cap(bc, budget);
	if (e->warm) {
		e->warm = false;
		bc->c.warm_bytes -= e->charge;
		bc->c.warm_used++;
	}
}

/* A block the listing has not reached yet was read: learn it now. */
static void hit_learn(struct bcache *bc, const struct bcache_hash *h,
		      uint64_t blk, uint64_t size)
{
	struct ent *e = ent_new(h, blk);
	if (!e)
		return;
	e->charge = bcache_charge(size);
	e->seq = ++bc->seq;
	e->state = ENT_READY;
	map_insert(bc, e);
	lru_push(bc, e, SEG_PROTECTED);
	bc->used += e->charge;
	bc->n_ready++;
}

/* bcache_read and bcache_try: count_miss says whether a block not there
 * (or bad) counts a miss here. */
static ssize_t read_block(struct bcache *bc, const struct bcache_id *id, uint64_t blk,
			  void *buf, size_t len, uint32_t boff, bool count_miss)
{
	struct bcache_hash h;
	char rel[BCACHE_NAME_MAX + 4];
	bcache_hash_id(id, &h);
	bcache_name_format(&h, blk, rel);

	mod_lock(&bc->mu);
	struct ent *e = map_find(bc, &h, blk);
	bool look = e ? e->state == ENT_READY : bc->loading || bc->unlisted;
	uint64_t seq = e ? e->seq : 0;
	bool known = e != NULL;
	if (!look && count_miss)
		bc->c.misses++;
	mod_unlock(&bc->mu);
	if (!look)
		goto missed;

	uint64_t size = 0;
	ssize_t n = bcache_file_read(bc->dir, rel, id, blk * bc->block_size,
				     bc->block_size, buf, len, boff, &size);
	if (n >= 0) {
		uint64_t budget = budget_now(bc);
		mod_lock(&bc->mu);
		e = map_find(bc, &h, blk);
		if (e && e->state == ENT_READY)
			hit_promote(bc, e, budget);
		else if (!e && (bc->loading || bc->unlisted))
			hit_learn(bc, &h, blk, size);
		bc->c.hits++;
		mod_unlock(&bc->mu);
		stats_inc(&bc->ctr.hits);
		return n;
	}

	/* A miss: a file gone (ENOENT), bad (EBADMSG) or unreadable (EIO)
	 * takes its entry with it, unless a put replaced the block meanwhile
	 * (seq changed). Other errors (ENOMEM, EMFILE) leave it. */
	bool bad = n == -EBADMSG || n == -EIO;
	struct ent *gone = NULL;
	mod_lock(&bc->mu);
	if (count_miss)
		bc->c.misses++;
	if (n == -EBADMSG)
		bc->c.corrupt++;
	e = map_find(bc, &h, blk);
	if (e && e->state == ENT_READY && e->seq == seq && known &&
	    (bad || n == -ENOENT)) {
		ent_retire(bc, e);
		gone = e;
	} else if (!e && !known && bad && (gone = ent_new(&h, blk))) {
		/* A file the map did not know (read while listing): a dying
		 * entry holds the name while it is removed, so that a put
		 * meanwhile (-EBUSY) cannot lose its fresh file to the unlink. */
		gone->state = ENT_DYING;
		map_insert(bc, gone);
	}
	mod_unlock(&bc->mu);
	if (bad) {
		log_warn("bcache: block %" PRIu64 " of %s/%s (ETag %s) %s; "
			 "removed", blk, id->bucket, id->key, id->etag,
			 n == -EIO ? "cannot be read (EIO)" : "failed its check");
		if (gone) {
			char path[PATH_MAX];
			snprintf(path, sizeof path, "%s/%s", bc->dir, rel);
			unlink(path);
		}
	}
	if (gone) {
		mod_lock(&bc->mu);
		map_remove(bc, gone);
		mod_unlock(&bc->mu);
		free(gone);
	}
missed:
	if (count_miss)
		stats_inc(&bc->ctr.misses);
	return -ENOENT;
}

ssize_t bcache_read(struct bcache *bc, const struct bcache_id *id, uint64_t blk,
		    void *buf, size_t len, uint32_t boff)
{
	return read_block(bc, id, blk, buf, len, boff, true);
}

ssize_t bcache_try(struct bcache *bc, const struct bcache_id *id, uint64_t blk,
		   void *buf, size_t len, uint32_t boff)
{
	return read_block(bc, id, blk, buf, len, boff, false);
}

/* Is block blk of h ready in the map? *look: it is not in the map while
 * the start-up listing runs (the disk may have it). */
static bool map_ready(struct bcache *bc, const struct bcache_hash *h, uint64_t blk,
		      bool *look)
{
	mod_lock(&bc->mu);
	struct ent *e = map_find(bc, h, blk);
	bool has = e && e->state == ENT_READY;
	*look = !e && (bc->loading || bc->unlisted);
	mod_unlock(&bc->mu);
	return has;
}

bool bcache_has(struct bcache *bc, const struct bcache_id *id, uint64_t blk)
{
	struct bcache_hash h;
	bool look;
	bcache_hash_id(id, &h);
	bool has = map_ready(bc, &h, blk, &look);
	if (look) {
		char path[PATH_MAX];
		path_of(bc, &h, blk, path, sizeof path);
		has = access(path, F_OK) == 0;
	}
	return has;
}

void bcache_prefetch(struct bcache *bc, const struct bcache_id *id, uint64_t blk)
{
	struct bcache_hash h;
	bool look;
	bcache_hash_id(id, &h);
	if (!map_ready(bc, &h, blk, &look))
		return;
	char path[PATH_MAX];
	path_of(bc, &h, blk, path, sizeof path);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		(void)posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
		close(fd);
	}
}

/* ---- admission --------------------------------------------------------- */

bool bcache_admit(struct bcache *bc, const struct bcache_id *id, uint64_t size)
{
	if (!bc->cold_min || size < bc->cold_min)
		return true;
	struct bcache_hash h;
	bcache_hash_id(id, &h);
	struct bcache_hash *slot = &bc->seen[h.h[0] & (BCACHE_SEEN - 1)];
	mod_lock(&bc->mu);
	bool seen = slot->h[0] == h.h[0] && slot->h[1] == h.h[1];
	*slot = h;
	mod_unlock(&bc->mu);
	/* The table forgets (a restart, a slot taken by another version);
	 * a version read twice before has its first block here. */
	if (seen || bcache_has(bc, id, 0))
		return true;
	stats_inc(&bc->ctr.cold_opens);
	return false;
}

void bcache_not_admitted(struct bcache *bc, uint64_t n)
{
	stats_add(&bc->ctr.not_admitted, n);
}

/* ---- puts ------------------------------------------------------------- */

/* DIR was removed under us (a put had to make it again): the READY
 * entries whose files are gone leave the table, so that the budget counts
 * only what is on disk and no lookup says a block is held that is not.
 * Their names are copied under the lock and looked for with none held; an
 * entry rewritten meanwhile (seq changed) stays. */
static void forget_missing(struct bcache *bc)
{
	struct gone { struct bcache_hash h; uint64_t blk, seq; } *g = NULL;
	size_t n = 0;
	mod_lock(&bc->mu);
	size_t cap = (size_t)bc->n_ready;
	g = cap ? malloc(cap * sizeof *g) : NULL;
	for (int s = 0; g && s < SEG_N; s++)
		for (struct ent *e = bc->seg[s].head; e && n < cap; e = e->next)
			g[n++] = (struct gone){ e->h, e->blk, e->seq };
	mod_unlock(&bc->mu);
	size_t missing = 0;
	for (size_t i = 0; i < n; i++) {
		char path[PATH_MAX];
		path_of(bc, &g[i].h, g[i].blk, path, sizeof path);
		if (access(path, F_OK) != 0 && errno == ENOENT)
			g[missing++] = g[i];
	}
	struct ent *victims = NULL;
	mod_lock(&bc->mu);
	for (size_t i = 0; i < missing; i++) {
		struct ent *e = map_find(bc, &g[i].h, g[i].blk);
		if (!e || e->state != ENT_READY || e->seq != g[i].seq)
			continue;
		ent_retire(bc, e);
		bc->c.dropped++;
		e->vnext = victims;
		victims = e;
	}
	mod_unlock(&bc->mu);
	victims_reap(bc, victims);       /* (their files are gone already) */
	free(g);
	if (missing)
		log_warn("bcache: %s was removed while in use; it is made again and "
			 "the %zu blocks it held are forgotten", bc->dir, missing);
}

static void write_error_log(struct bcache *bc, const char *rel, int rc)
{
	unsigned bit = -rc < 63 ? (unsigned)-rc : 63;
	uint64_t m = 1ull << bit;
	if (atomic_fetch_or(&bc->logged, m) & m)
		return;
	log_warn("bcache: cannot write block %s/%s: %s (reads go on from S3; "
		 "further errors of this kind are only counted)", bc->dir, rel,
		 strerror(-rc));
}

/* Reserve e (new or READY) for a put of charge bytes: WRITING. false when
 * no room could be made (e is then retired or freed). */
static bool put_reserve(struct bcache *bc, struct ent *e, bool fresh,
			uint64_t budget, uint64_t charge, struct ent **victims)
{
	if (!fresh) {
		/* Replaced: the old block leaves (unread warm: wasted). */
		ent_retire(bc, e);
	}
	e->state = ENT_WRITING;
	e->seq = ++bc->seq;
	e->doomed = false;
	if (!room_make(bc, budget, charge, victims)) {
		if (fresh) {
			map_remove(bc, e);
			free(e);
		} else {
			/* DYING already: its old file goes with the victims. */
			e->vnext = *victims;
			*victims = e;
		}
		return false;
	}
	e->charge = charge;
	bc->used += charge;
	return true;
}

int bcache_put(struct bcache *bc, const struct bcache_id *id, uint64_t blk,
	       const void *data, size_t len, unsigned flags)
{
	if (len == 0 || len > bc->block_size)
		return -EINVAL;
	struct bcache_hash h;
	char rel[BCACHE_NAME_MAX + 4];
	size_t hlen = bcache_hdr_len(id);
	uint64_t charge = bcache_charge(hlen + len);
	uint64_t budget = budget_now(bc);
	bcache_hash_id(id, &h);
	bcache_name_format(&h, blk, rel);

	struct ent *victims = NULL, *e = NULL;
	int rc = 0;
	mod_lock(&bc->mu);
	if (bc->loading || bc->unlisted)
		rc = -EAGAIN;
	else if (!hlen)
		rc = -ENAMETOOLONG;
	else if (charge > budget)
		rc = -ENOSPC;
	if (!rc) {
		e = map_find(bc, &h, blk);
		bool fresh = !e;
		if (e && e->state != ENT_READY)
			rc = -EBUSY;          /* being written or removed */
		else if (fresh && !(e = ent_new(&h, blk)))
			rc = -ENOMEM;
		else {
			if (fresh)
				map_insert(bc, e);
			if (!put_reserve(bc, e, fresh, budget, charge, &victims))
				rc = -ENOSPC;
		}
	}
	if (rc)
		bc->c.put_skipped++;
	mod_unlock(&bc->mu);
	victims_reap(bc, victims);
	if (rc)
		return rc;

	uint64_t size = 0;
	bool dir_made = false;
	rc = bcache_file_write(bc->dir, rel,
			       atomic_fetch_add(&bc->tmp_seq, 1) + 1, id,
			       blk * bc->block_size, data, (uint32_t)len, &size,
			       &dir_made);
	if (dir_made) {
		forget_missing(bc);
		if (bc->dir_made)
			bc->dir_made(bc->staged_ctx);
	}
	mod_lock(&bc->mu);
	if (rc || e->doomed) {
		/* Failed (the old file of a replaced block must go too), or
		 * dropped while written: the block leaves. */
		bc->used -= e->charge;
		e->state = ENT_DYING;
		if (rc) {
			bc->c.put_skipped++;
			bc->c.write_errors++;
		}
		mod_unlock(&bc->mu);
		if (rc)
			write_error_log(bc, rel, rc);
		e->vnext = NULL;
		victims_reap(bc, e);
		return rc;
	}
	e->state = ENT_READY;
	lru_push(bc, e, SEG_PROBATION);
	bc->n_ready++;
	if (flags & BCACHE_WARM) {
		e->warm = true;
		bc->c.warm_bytes += e->charge;
	}
	mod_unlock(&bc->mu);
	if (!(flags & BCACHE_WARM))
		stats_inc(&bc->ctr.admitted);
	return 0;
}

void bcache_trim(struct bcache *bc)
{
	struct ent *victims = NULL;
	uint64_t budget = budget_now(bc);
	mod_lock(&bc->mu);
	room_make(bc, budget, 0, &victims);
	protected_cap(bc, budget);
	mod_unlock(&bc->mu);
	victims_reap(bc, victims);
}

/* ---- drops ------------------------------------------------------------ */

/* Release every block of one object version. */
static void drop_run(struct bcache *bc, const struct drop_req *r)
{
	for (uint64_t blk = 0; blk < r->nblk; blk++) {
		struct ent *gone = NULL;
		mod_lock(&bc->mu);
		struct ent *e = map_find(bc, &r->h, blk);
		bool unl = bc->loading || bc->unlisted;   /* a file the map may not know */
		if (e && e->state == ENT_READY) {
			ent_retire(bc, e);
			bc->c.dropped++;
			gone = e;
			unl = true;
		} else if (e && e->state == ENT_WRITING) {
			e->doomed = true;
			bc->c.dropped++;
			unl = true;
		} else if (e) {
			unl = false;             /* DYING: its remover unlinks */
		}
		mod_unlock(&bc->mu);
		if (!unl)
			continue;
		char path[PATH_MAX];
		path_of(bc, &r->h, blk, path, sizeof path);
		if (!unlink(path) && !e) {
			mod_lock(&bc->mu);
			bc->c.dropped++;
			mod_unlock(&bc->mu);
		}
		if (gone) {
			mod_lock(&bc->mu);
			map_remove(bc, gone);
			mod_unlock(&bc->mu);
			free(gone);
		}
	}
}

static void *drop_main(void *arg)
{
	struct bcache *bc = arg;
	mod_lock(&bc->mu);
	for (;;) {
		while (!bc->d_len && !bc->stopping)
			pthread_cond_wait(&bc->drop_cv, &bc->mu);
		if (!bc->d_len)
			break;               /* stopping, queue drained */
		struct drop_req r = bc->drops[bc->d_head];
		bc->d_head = (bc->d_head + 1) % DROP_QUEUE;
		bc->d_len--;
		mod_unlock(&bc->mu);
		drop_run(bc, &r);
		mod_lock(&bc->mu);
	}
	mod_unlock(&bc->mu);
	return NULL;
}

void bcache_drop(struct bcache *bc, const struct bcache_id *id, uint64_t size)
{
	struct drop_req r;
	bcache_hash_id(id, &r.h);
	r.nblk = size ? (size + bc->block_size - 1) / bc->block_size : 1;
	mod_lock(&bc->mu);
	if (bc->d_len == DROP_QUEUE) {
		/* Full: the oldest request is given up (its blocks are never
		 * served again, ETags differ; eviction reclaims them). */
		bc->d_head = (bc->d_head + 1) % DROP_QUEUE;
		bc->d_len--;
		bc->c.drops_lost++;
	}
	bc->drops[(bc->d_head + bc->d_len) % DROP_QUEUE] = r;
	bc->d_len++;
	pthread_cond_signal(&bc->drop_cv);
	mod_unlock(&bc->mu);
}

/* ---- start-up --------------------------------------------------------- */

/* Insert listed blocks (oldest first: the newest end at the recent end of
 * probation), evicting when the budget or the entry cap is reached. */
static int list_insert(struct bcache *bc, const struct bcache_found *f,
		       size_t n, uint64_t budget)
{
	int rc = 0;
	for (size_t i = 0; i < n; i += LIST_BATCH) {
		struct ent *victims = NULL;
		size_t end = n - i < LIST_BATCH ? n : i + LIST_BATCH;
		mod_lock(&bc->mu);
		for (size_t j = i; j < end; j++) {
			if (map_find(bc, &f[j].h, f[j].blk))
				continue;    /* learnt by a read meanwhile */
			uint64_t charge = bcache_charge(f[j].size);
			struct ent *e = ent_new(&f[j].h, f[j].blk);
			if (!e) {
				rc = -ENOMEM;
				break;
			}
			if (!room_make(bc, budget, charge, &victims)) {
				/* Larger than the whole budget: remove it. */
				e->state = ENT_DYING;
				map_insert(bc, e);
				e->vnext = victims;
				victims = e;
				continue;
			}
			e->charge = charge;
			e->seq = ++bc->seq;
			e->state = ENT_READY;
			map_insert(bc, e);
			lru_push(bc, e, SEG_PROBATION);
			bc->used += charge;
			bc->n_ready++;
		}
		mod_unlock(&bc->mu);
		victims_reap(bc, victims);
		if (rc)
			break;
	}
	return rc;
}

static void *list_main(void *arg)
{
	struct bcache *bc = arg;
	struct bcache_found *f = NULL;
	size_t n = 0, tmp = 0;
	double t0 = 0;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = (double)ts.tv_sec + ts.tv_nsec / 1e9;
	unsigned dirs_failed = 0;
	char failed[PATH_MAX + 64] = "";
	int rc = bcache_dir_list(bc->dir, &bc->stop, &f, &n, &tmp, &dirs_failed,
				 failed, sizeof failed);
	if (rc && rc != -ECANCELED)
		log_error("bcache: cannot list %s: %s; the burst buffer stores "
			  "nothing more until the gateway restarts (what it holds "
			  "is unknown, so its budget could not be kept); blocks "
			  "there are still read", bc->dir, strerror(-rc));
	if (dirs_failed)
		log_warn("bcache: %u of the 256 subdirectories of %s could not be "
			 "listed (%s): the blocks in them are neither used nor "
			 "counted in the budget", dirs_failed, bc->dir, failed);
	if (!rc && list_insert(bc, f, n, budget_now(bc)) != 0) {
		log_error("bcache: out of memory while learning %s; the burst "
			  "buffer stores nothing more until the gateway restarts",
			  bc->dir);
		rc = -ENOMEM;
	}
	free(f);
	mod_lock(&bc->mu);
	bc->loading = false;
	bc->unlisted = rc && rc != -ECANCELED;
	uint64_t blocks = bc->n_ready, used = bc->used;
	mod_unlock(&bc->mu);
	if (!rc) {
		bcache_trim(bc);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		log_info("bcache: %s: %" PRIu64 " blocks (%" PRIu64 " bytes) "
			 "listed in %.3f s, %zu temporary files removed",
			 bc->dir, blocks, used,
			 (double)ts.tv_sec + ts.tv_nsec / 1e9 - t0, tmp);
	}
	return NULL;
}

static int conf_check(const struct bcache_conf *conf, char *err, size_t errlen)
{
	uint32_t b = conf->block_size;
	if (!conf->dir || !conf->dir[0]) {
		snprintf(err, errlen, "cache.dir is not set");
		return -EINVAL;
	}
	if (b < BCACHE_BLOCK_MIN || b > BCACHE_BLOCK_MAX || (b & (b - 1))) {
		snprintf(err, errlen, "cache.block_size (%" PRIu32 ") must be a "
			 "power of two from %u to %u", b, BCACHE_BLOCK_MIN,
			 BCACHE_BLOCK_MAX);
		return -EINVAL;
	}
	if (conf->max_bytes < b) {
		snprintf(err, errlen, "cache.max_bytes (%" PRIu64 ") is smaller "
			 "than one block (cache.block_size %" PRIu32 ")",
			 conf->max_bytes, b);
		return -EINVAL;
	}
	return 0;
}

int bcache_open(const struct bcache_conf *conf, struct bcache **out,
		char *err, size_t errlen)
{
	*out = NULL;
	int rc = conf_check(conf, err, errlen);
	if (rc)
		return rc;
	rc = file_mkdir_p(conf->dir, 0755);
	if (rc) {
		snprintf(err, errlen, "cannot make cache dir %s: %s", conf->dir,
			 strerror(-rc));
		return rc;
	}
	struct bcache *bc = calloc(1, sizeof *bc);
	if (!bc || !(bc->dir = strdup(conf->dir)) ||
	    !(bc->buckets = calloc(BUCKETS_FIRST, sizeof *bc->buckets)) ||
	    !(bc->seen = calloc(BCACHE_SEEN, sizeof *bc->seen))) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto fail_mem;
	}
	bc->nbuckets = BUCKETS_FIRST;
	bc->block_size = conf->block_size;
	bc->max_bytes = conf->max_bytes;
	bc->staged = conf->staged;
	bc->staged_ctx = conf->staged_ctx;
	bc->dir_made = conf->dir_made;
	bc->cold_min = conf->cold_min;
	bc->loading = true;
	atomic_init(&bc->stop, false);
	atomic_init(&bc->tmp_seq, 0);
	atomic_init(&bc->logged, 0);
	rc = lockfile_take(bc->dir, "cache dir", &bc->lock_fd, err, errlen);
	if (rc)
		goto fail_mem;
	pthread_mutex_init(&bc->mu, NULL);
	pthread_cond_init(&bc->drop_cv, NULL);
	rc = -pthread_create(&bc->drop_thr, NULL, drop_main, bc);
	if (rc) {
		snprintf(err, errlen, "cannot start a thread: %s", strerror(-rc));
		goto fail_lock;
	}
	rc = -pthread_create(&bc->list_thr, NULL, list_main, bc);
	if (rc) {
		snprintf(err, errlen, "cannot start a thread: %s", strerror(-rc));
		mod_lock(&bc->mu);
		bc->stopping = true;
		pthread_cond_signal(&bc->drop_cv);
		mod_unlock(&bc->mu);
		pthread_join(bc->drop_thr, NULL);
		goto fail_lock;
	}
	stats_group_add(conf->st, &bc->grp, bcache_stats,
			sizeof bcache_stats / sizeof bcache_stats[0], &bc->ctr);
	*out = bc;
	return 0;

fail_lock:
	pthread_cond_destroy(&bc->drop_cv);
	pthread_mutex_destroy(&bc->mu);
	close(bc->lock_fd);
fail_mem:
	if (bc) {
		free(bc->seen);
		free(bc->buckets);
		free(bc->dir);
		free(bc);
	}
	return rc;
}

void bcache_close(struct bcache *bc)
{
	if (!bc)
		return;
	atomic_store(&bc->stop, true);
	pthread_join(bc->list_thr, NULL);
	mod_lock(&bc->mu);
	bc->stopping = true;
	pthread_cond_signal(&bc->drop_cv);
	mod_unlock(&bc->mu);
	pthread_join(bc->drop_thr, NULL);
	stats_group_remove(&bc->grp);
	for (size_t i = 0; i < bc->nbuckets; i++) {
		struct ent *e = bc->buckets[i];
		while (e) {
			struct ent *nx = e->hnext;
			free(e);
			e = nx;
		}
	}
	free(bc->buckets);
	free(bc->seen);
	pthread_cond_destroy(&bc->drop_cv);
	pthread_mutex_destroy(&bc->mu);
	close(bc->lock_fd);          /* releases the flock */
	free(bc->dir);
	free(bc);
}

uint32_t bcache_block_size(const struct bcache *bc)
{
	return bc->block_size;
}

void bcache_counters(struct bcache *bc, struct bcache_counters *out)
{
	mod_lock(&bc->mu);
	*out = bc->c;
	out->max_bytes = bc->max_bytes;
	out->used_bytes = bc->used;
	out->blocks = bc->n_ready;
	out->loading = bc->loading;
	out->unlisted = bc->unlisted;
	mod_unlock(&bc->mu);
	out->admitted = stats_get(&bc->ctr.admitted);
	out->not_admitted = stats_get(&bc->ctr.not_admitted);
	out->cold_opens = stats_get(&bc->ctr.cold_opens);
}
