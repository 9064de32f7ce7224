/*
 * bcache_drops.c — the block cache's drop thread (bcache_int.h): it
 * serves the bounded queue bcache_drop() fills, releasing every block of
 * each version named (a WRITING one is marked doomed; its put removes
 * it), with bc->mu dropped around each unlink.
 */
#include "sync/cache/bcache_int.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/lock.h"

/* Release every block of one object version. */
static void drop_run(struct bcache *bc, const struct drop_req *r)
{
	for (uint64_t blk = 0; blk < r->nblk; blk++) {
		struct ent *gone = NULL;
		mod_lock(&bc->mu);
		struct ent *e = bcache_map_find(bc, &r->h, blk);
		bool unl = bc->loading || bc->unlisted;   /* a file the map may not know */
		if (e && e->state == ENT_READY) {
			bcache_ent_retire(bc, e);
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
		bcache_path_of(bc, &r->h, blk, path, sizeof path);
		if (!unlink(path) && !e) {
			mod_lock(&bc->mu);
			bc->c.dropped++;
			mod_unlock(&bc->mu);
		}
		if (gone) {
			mod_lock(&bc->mu);
			bcache_map_remove(bc, gone);
			mod_unlock(&bc->mu);
			free(gone);
		}
	}
}

void *bcache_drop_main(void *arg)
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
