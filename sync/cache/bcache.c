/*
 * bcache.c — the block cache's calls (bcache.h): open and close, reads
 * (bcache_read, bcache_try, bcache_has, bcache_prefetch), admission,
 * puts, drop requests, counters; on the table and policy of bcache_map.c
 * and bcache_lru.c (bcache_int.h has the layers, the entries' states and
 * the invariants), with the disk side in bcache_disk.c.
 *
 * Threads: the listing thread (bcache_list.c) runs once at open; the drop
 * thread (bcache_drops.c) serves the bounded drop queue bcache_drop()
 * fills. conf.staged() is called with no lock held (the stage has its
 * own).
 */
#include "sync/cache/bcache_int.h"

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

static const struct stats_def bcache_stats[] = {
	STATS_COUNTER(struct bcache_stats, hits, "cache", "hits"),
	STATS_COUNTER(struct bcache_stats, misses, "cache", "misses"),
	STATS_COUNTER(struct bcache_stats, admitted, "cache", "admitted"),
	STATS_COUNTER(struct bcache_stats, not_admitted, "cache", "not_admitted"),
	STATS_COUNTER(struct bcache_stats, cold_opens, "cache", "cold_opens"),
};

/* ---- reads ------------------------------------------------------------ */

/* A block the listing has not reached yet was read: learn it now. */
static void hit_learn(struct bcache *bc, const struct bcache_hash *h,
		      uint64_t blk, uint64_t size)
{
	struct ent *e = bcache_ent_new(h, blk);
	if (!e)
		return;
	e->charge = bcache_charge(size);
	e->seq = ++bc->seq;
	bcache_ent_to(e, ENT_READY);
	bcache_map_insert(bc, e);
	bcache_lru_push(bc, e, SEG_PROTECTED);
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
	struct ent *e = bcache_map_find(bc, &h, blk);
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
		uint64_t budget = bcache_budget_now(bc);
		mod_lock(&bc->mu);
		e = bcache_map_find(bc, &h, blk);
		if (e && e->state == ENT_READY)
			bcache_hit_promote(bc, e, budget);
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
	e = bcache_map_find(bc, &h, blk);
	if (e && e->state == ENT_READY && e->seq == seq && known &&
	    (bad || n == -ENOENT)) {
		bcache_ent_retire(bc, e);
		gone = e;
	} else if (!e && !known && bad && (gone = bcache_ent_new(&h, blk))) {
		/* A file the map did not know (read while listing): a dying
		 * entry holds the name while it is removed, so that a put
		 * meanwhile (-EBUSY) cannot lose its fresh file to the unlink. */
		bcache_ent_to(gone, ENT_DYING);
		bcache_map_insert(bc, gone);
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
		bcache_map_remove(bc, gone);
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
	struct ent *e = bcache_map_find(bc, h, blk);
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
		bcache_path_of(bc, &h, blk, path, sizeof path);
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
	bcache_path_of(bc, &h, blk, path, sizeof path);
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
		bcache_path_of(bc, &g[i].h, g[i].blk, path, sizeof path);
		if (access(path, F_OK) != 0 && errno == ENOENT)
			g[missing++] = g[i];
	}
	struct ent *victims = NULL;
	mod_lock(&bc->mu);
	for (size_t i = 0; i < missing; i++) {
		struct ent *e = bcache_map_find(bc, &g[i].h, g[i].blk);
		if (!e || e->state != ENT_READY || e->seq != g[i].seq)
			continue;
		bcache_ent_retire(bc, e);
		bc->c.dropped++;
		e->vnext = victims;
		victims = e;
	}
	mod_unlock(&bc->mu);
	bcache_victims_reap(bc, victims);       /* (their files are gone already) */
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
		bcache_ent_retire(bc, e);
	}
	bcache_ent_to(e, ENT_WRITING);
	e->seq = ++bc->seq;
	e->doomed = false;
	if (!bcache_room_make(bc, budget, charge, victims)) {
		if (fresh) {
			bcache_map_remove(bc, e);
			free(e);
		} else {
			/* Its old file goes with the victims. */
			bcache_ent_to(e, ENT_DYING);
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
	uint64_t budget = bcache_budget_now(bc);
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
		e = bcache_map_find(bc, &h, blk);
		bool fresh = !e;
		if (e && e->state != ENT_READY)
			rc = -EBUSY;          /* being written or removed */
		else if (fresh && !(e = bcache_ent_new(&h, blk)))
			rc = -ENOMEM;
		else {
			if (fresh)
				bcache_map_insert(bc, e);
			if (!put_reserve(bc, e, fresh, budget, charge, &victims))
				rc = -ENOSPC;
		}
	}
	if (rc)
		bc->c.put_skipped++;
	mod_unlock(&bc->mu);
	bcache_victims_reap(bc, victims);
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
		bcache_ent_to(e, ENT_DYING);
		if (rc) {
			bc->c.put_skipped++;
			bc->c.write_errors++;
		}
		mod_unlock(&bc->mu);
		if (rc)
			write_error_log(bc, rel, rc);
		e->vnext = NULL;
		bcache_victims_reap(bc, e);
		return rc;
	}
	bcache_ent_to(e, ENT_READY);
	bcache_lru_push(bc, e, SEG_PROBATION);
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

/* ---- drops ------------------------------------------------------------ */

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
	rc = -pthread_create(&bc->drop_thr, NULL, bcache_drop_main, bc);
	if (rc) {
		snprintf(err, errlen, "cannot start a thread: %s", strerror(-rc));
		goto fail_lock;
	}
	rc = -pthread_create(&bc->list_thr, NULL, bcache_list_main, bc);
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
