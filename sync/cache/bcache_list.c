/*
 * bcache_list.c — the block cache's start-up listing thread
 * (bcache_int.h): it lists DIR once (bcache_dir_list), inserts the blocks
 * found, oldest first, into probation within the budget, and ends the
 * loading state (puts are skipped until then; a failed listing leaves the
 * cache unlisted: no put until a restart).
 */
#include "sync/cache/bcache_int.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/lock.h"
#include "common/log.h"

#define LIST_BATCH    4096u          /* listed blocks inserted per lock */

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
			if (bcache_map_find(bc, &f[j].h, f[j].blk))
				continue;    /* learnt by a read meanwhile */
			uint64_t charge = bcache_charge(f[j].size);
			struct ent *e = bcache_ent_new(&f[j].h, f[j].blk);
			if (!e) {
				rc = -ENOMEM;
				break;
			}
			if (!bcache_room_make(bc, budget, charge, &victims)) {
				/* Larger than the whole budget: remove it. */
				bcache_ent_to(e, ENT_DYING);
				bcache_map_insert(bc, e);
				e->vnext = victims;
				victims = e;
				continue;
			}
			e->charge = charge;
			e->seq = ++bc->seq;
			bcache_ent_to(e, ENT_READY);
			bcache_map_insert(bc, e);
			bcache_lru_push(bc, e, SEG_PROBATION);
			bc->used += charge;
			bc->n_ready++;
		}
		mod_unlock(&bc->mu);
		bcache_victims_reap(bc, victims);
		if (rc)
			break;
	}
	return rc;
}

void *bcache_list_main(void *arg)
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
	if (!rc && list_insert(bc, f, n, bcache_budget_now(bc)) != 0) {
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
