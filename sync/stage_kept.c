/*
 * stage_kept.c — staged files whose commit failed, and what makes them
 * stale.
 *
 * DESIGN. A file whose commit failed keeps its "commit" journal: a retry
 * (the next commit of the open file) or, once released, the next start's
 * recovery uploads its data again (stage_journal.c). If the same key is
 * meanwhile committed, renamed onto or deleted through this gateway, or a
 * later commit of it began (another file, the same key), that upload
 * would put older bytes over the newer version or bring back a deleted
 * object. So each such file is remembered here (id, bucket, key; one entry
 * per file with a failed commit, which the staging budget bounds) from
 * the moment its commit failed; when its key is replaced by something
 * newer, a released file's journal is rewritten from "commit" to "dirty"
 * at once (the next start then moves its data to recovered/: nothing is
 * lost), and an open file's entry is marked stale: its release does that
 * rewrite, unless a later commit of the file itself came first (then it
 * is the newest again). Entries go when the file's data leaves (a commit
 * succeeds, recovery uploads or moves it). A change of the key by another
 * S3 client is not seen here (README: the next start's upload wins).
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
	bool open;                   /* not released yet */
	bool stale;                  /* open, and its key was replaced since */
	struct stage_kept *next;
};

static void kept_free(struct stage_kept *k)
{
	free(k->bucket);
	free(k->key);
	free(k);
}

void stage_kept_add(struct stage *st, uint64_t id, const char *bucket, const char *key,
		    bool open)
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
	k->open = open;
	pthread_mutex_lock(&st->lock);
	struct stage_kept *o = st->kept;
	while (o && o->id != id)
		o = o->next;
	if (o) {                     /* a later commit of the same file */
		o->open = open;
		o->stale = false;
	} else {
		k->next = st->kept;
		st->kept = k;
	}
	pthread_mutex_unlock(&st->lock);
	if (o)
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

void stage_kept_replaced(struct stage *st, const char *bucket, const char *key,
			 uint64_t except)
{
	struct stage_kept *hit = NULL;
	pthread_mutex_lock(&st->lock);
	for (struct stage_kept **p = &st->kept; *p;) {
		struct stage_kept *k = *p;
		if (k->id == except || strcmp(k->bucket, bucket) != 0 ||
		    strcmp(k->key, key) != 0) {
			p = &k->next;
		} else if (k->open) {
			k->stale = true;     /* its release rewrites the journal */
			p = &k->next;
		} else {
			*p = k->next;
			k->next = hit;
			hit = k;
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

void stage_key_replaced(struct stage *st, const char *bucket, const char *key)
{
	stage_kept_replaced(st, bucket, key, 0);
}

void stage_kept_release(struct stage *st, uint64_t id)
{
	struct stage_kept *stale = NULL;
	pthread_mutex_lock(&st->lock);
	for (struct stage_kept **p = &st->kept; *p; p = &(*p)->next) {
		struct stage_kept *k = *p;
		if (k->id != id)
			continue;
		k->open = false;
		if (k->stale) {
			*p = k->next;
			stale = k;
		}
		break;
	}
	pthread_mutex_unlock(&st->lock);
	if (stale) {
		kept_demote(st, stale);
		kept_free(stale);
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
