/*
 * stage_kept.c — staged files waiting for the next start, and what makes
 * them stale.
 *
 * DESIGN. A file released with its journal still on disk (its last
 * commit failed: close got EIO, S3 down) waits for the next start, whose
 * recovery uploads a "commit" journal's data again (stage_journal.c); so
 * does one a start could not finish. If this gateway meanwhile writes the
 * same key anew (a later commit of another file succeeded), renames onto
 * it or deletes it, that upload would put the older bytes back over the
 * newer version, or bring back a deleted object. So each such file is
 * remembered here (id, bucket, key; one entry per kept file, which the
 * staging budget bounds) and, when its key is written or removed through
 * this gateway, its journal is rewritten from "commit" to "dirty": the next
 * start then moves its data to recovered/ (nothing is lost) instead of
 * uploading it. A change of the key by another S3 client is not seen here
 * (README: the next start's upload wins over it).
 */
#include "sync/stage_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

struct stage_kept {
	uint64_t id;
	char *bucket, *key;
	struct stage_kept *next;
};

static void kept_free(struct stage_kept *k)
{
	free(k->bucket);
	free(k->key);
	free(k);
}

void stage_kept_add(struct stage *st, uint64_t id, const char *bucket, const char *key)
{
	struct stage_kept *k = calloc(1, sizeof *k);
	if (!k || !(k->bucket = strdup(bucket)) || !(k->key = strdup(key))) {
		if (k)
			kept_free(k);
		log_warn("stage: out of memory: a later write of %s/%s will not stop "
			 "the next start from uploading its staged copy", bucket, key);
		return;
	}
	k->id = id;
	pthread_mutex_lock(&st->lock);
	bool known = false;
	for (struct stage_kept *o = st->kept; o && !known; o = o->next)
		known = o->id == id;
	if (!known) {
		k->next = st->kept;
		st->kept = k;
	}
	pthread_mutex_unlock(&st->lock);
	if (known)
		kept_free(k);
}

/* The kept file id no longer waits (recovery uploaded or moved it). */
void stage_kept_forget(struct stage *st, uint64_t id)
{
	struct stage_kept *gone = NULL;
	pthread_mutex_lock(&st->lock);
	for (struct stage_kept **p = &st->kept; *p; p = &(*p)->next) {
		if ((*p)->id == id) {
			gone = *p;
			*p = gone->next;
			break;
		}
	}
	pthread_mutex_unlock(&st->lock);
	if (gone)
		kept_free(gone);
}

/* Journal id: "commit" -> "dirty". */
static void kept_demote(struct stage *st, const struct stage_kept *k)
{
	struct stage_jnl j;
	int err = stage_jnl_read(st, k->id, &j);
	if (err) {
		if (err != -ENOENT)
			log_warn("stage: %016" PRIx64 ".jnl (%s/%s): %s", k->id, k->bucket,
				 k->key, strerror(-err));
		return;
	}
	if (j.state == STAGE_JS_COMMIT) {
		j.state = STAGE_JS_DIRTY;
		err = stage_jnl_write(st, k->id, &j, true);
		if (err)
			log_error("stage: %s/%s changed through the mount, but the "
				  "journal of its older staged copy %s/%016" PRIx64
				  ".data cannot be rewritten (%s): the next start may "
				  "upload that copy over it", k->bucket, k->key, st->dir,
				  k->id, strerror(-err));
		else
			log_warn("stage: %s/%s changed through the mount: its older "
				 "staged copy (a failed commit) will not be uploaded; the "
				 "next start moves it to %s", k->bucket, k->key, st->rec_dir);
	}
	stage_jnl_release(&j);
}

void stage_key_replaced(struct stage *st, const char *bucket, const char *key)
{
	struct stage_kept *hit = NULL;
	pthread_mutex_lock(&st->lock);
	for (struct stage_kept **p = &st->kept; *p;) {
		struct stage_kept *k = *p;
		if (strcmp(k->bucket, bucket) == 0 && strcmp(k->key, key) == 0) {
			*p = k->next;
			k->next = hit;
			hit = k;
		} else {
			p = &k->next;
		}
	}
	pthread_mutex_unlock(&st->lock);
	while (hit) {
		struct stage_kept *k = hit;
		hit = k->next;
		kept_demote(st, k);
		kept_free(k);
	}
}

void stage_kept_free_all(struct stage *st)
{
	while (st->kept) {
		struct stage_kept *k = st->kept;
		st->kept = k->next;
		kept_free(k);
	}
}
