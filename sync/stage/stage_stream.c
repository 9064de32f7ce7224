/*
 * stage_stream.c — streamed multipart uploads of staged files (the rule is
 * in stage.h): the pool of part senders, feeding it as a file grows, the
 * commit of a streamed file, and giving a stream up.
 *
 * DESIGN. A file's stream (struct stage_stream, under f->lock) numbers its
 * parts in order: part n covers upload_stream_part_size(n) bytes after
 * part n-1, and is queued (stage_stream_feed) only when those bytes are all
 * written (no pwrite of the file in flight, f->n_active == 0), at most
 * up.threads parts in flight. Part 1 is queued alone: its job creates the
 * upload (with the name and metadata the file had when part 1 was queued)
 * and journals its id; the other parts follow once the id exists. A job
 * sends its part with s3_mpu_put_part straight from the staging file and
 * records the ETag (the file's descriptor taken for that part only:
 * stage_data_get); when it ends it feeds the file again. Any write or
 * truncate below queued_end, or another name or metadata, sets `broken`:
 * no part is queued any more, and the commit aborts the upload
 * (stage_stream_drop) and uploads the file whole. A failed part or
 * creation sets `err`: the commit aborts and returns -EIO.
 * Commit (stage_stream_commit, the file owned by its commit, so no write
 * runs): journal "commit" with the id, set `final` so that the tail goes
 * too (the last part may be short), wait for every part, complete.
 * Threads: the pool's threads (started on first use, joined by
 * stage_pool_stop) take jobs from one FIFO under pool.lock, which is never
 * held across a request and is taken under f->lock, never the reverse.
 * The journal is written with f->lock dropped, owned by the writer
 * (stage_jnl_own), like every journal write of an open file.
 * Calls stage_orphans.c, stage_journal.c and stage_dir.c, and upload.c
 * for part sizes; nothing above.
 * The upload's strings and id do not change while a part is in flight
 * (inflight > 0), so the jobs read them without f->lock.
 */
#include "sync/stage/stage_int.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/lock.h"
#include "common/log.h"
#include "common/s3.h"

#define POOL_DEFAULT 4
#define POOL_MAX 16

/* ---- counters ------------------------------------------------------- */

enum stream_count {
	SC_STREAMED, SC_TAIL, SC_FALLBACK, SC_ABORT, SC_DONE, SC_ERROR,
};

static void count(struct stage *st, enum stream_count c, uint64_t bytes)
{
	mod_lock(&st->lock);
	switch (c) {
	case SC_STREAMED: st->cnt.parts_streamed++; break;
	case SC_TAIL:     st->cnt.parts_tail++; break;
	case SC_FALLBACK: st->cnt.stream_fallbacks++; break;
	case SC_ABORT:    st->cnt.stream_aborts++; break;
	case SC_DONE:
		st->cnt.streams++;
		st->cnt.stream_bytes += bytes;
		st->cnt.uploads++;
		st->cnt.upload_bytes += bytes;
		break;
	case SC_ERROR:    st->cnt.upload_errors++; break;
	}
	mod_unlock(&st->lock);
}

/* ---- the pool ------------------------------------------------------- */

static void part_run(struct stage_job *j);

static void *pool_main(void *arg)
{
	struct stage_pool *p = arg;
	mod_lock(&p->lock);
	for (;;) {
		while (!p->head && !p->stop)
			pthread_cond_wait(&p->cond, &p->lock);
		struct stage_job *j = p->head;
		if (!j)
			break;
		p->head = j->next;
		if (!p->head)
			p->tail = NULL;
		mod_unlock(&p->lock);
		part_run(j);
		free(j);
		mod_lock(&p->lock);
	}
	mod_unlock(&p->lock);
	return NULL;
}

/* Queue j, starting the threads on first use. pool.lock is a leaf. */
static int pool_push(struct stage *st, struct stage_job *j)
{
	struct stage_pool *p = &st->pool;
	int err = 0;
	mod_lock(&p->lock);
	if (!p->started) {
		unsigned want = p->n_threads ? p->n_threads : POOL_DEFAULT;
		if (want > POOL_MAX)
			want = POOL_MAX;
		unsigned n = 0;
		while (n < want && pthread_create(&p->tid[n], NULL, pool_main, p) == 0)
			n++;
		p->n_threads = n;
		p->started = n > 0;
		if (!n) {
			log_error("stage: cannot start a thread to stream parts");
			err = -EAGAIN;
		}
	}
	if (!err) {
		j->next = NULL;
		if (p->tail)
			p->tail->next = j;
		else
			p->head = j;
		p->tail = j;
		pthread_cond_signal(&p->cond);
	}
	mod_unlock(&p->lock);
	return err;
}

void stage_pool_stop(struct stage *st)
{
	struct stage_pool *p = &st->pool;
	mod_lock(&p->lock);
	bool started = p->started;
	p->stop = true;
	pthread_cond_broadcast(&p->cond);
	mod_unlock(&p->lock);
	for (unsigned i = 0; started && i < p->n_threads; i++)
		pthread_join(p->tid[i], NULL);
	assert(!p->head);
}

/* ---- one file's stream -------------------------------------------- */

static void stream_reset_locked(struct stage_stream *sm)
{
	free(sm->id);
	free(sm->bucket);
	free(sm->key);
	free(sm->ctype);
	obj_kv_free(sm->meta, sm->n_meta);
	free(sm->parts);
	memset(sm, 0, sizeof *sm);
}

void stage_stream_free(struct stage_file *f)
{
	assert(!f->sm.inflight);
	stream_reset_locked(&f->sm);
}

void stage_stream_break(struct stage_file *f, const char *why)
{
	struct stage_stream *sm = &f->sm;
	if (sm->state == SM_BROKEN || !sm->n_parts)
		return;
	stage_sm_to(sm, SM_BROKEN);
	count(f->st, SC_FALLBACK, 0);
	log_debug("stage: %s/%s: streamed upload given up (%s); the commit "
		  "uploads the file whole", f->bucket, f->key, why);
}

/* The name and metadata the upload will carry: the file's now. */
static int stream_begin_locked(struct stage_file *f)
{
	struct stage_stream *sm = &f->sm;
	int err = 0;
	sm->bucket = obj_strdup_opt(f->bucket, &err);
	sm->key = obj_strdup_opt(f->key, &err);
	sm->ctype = obj_strdup_opt(f->ctype, &err);
	if (!err)
		err = obj_kv_copy(&sm->meta, &sm->n_meta, f->meta, f->n_meta);
	return err;
}

void stage_stream_feed(struct stage_file *f)
{
	struct stage *st = f->st;
	struct stage_stream *sm = &f->sm;
	if (st->stream_off || f->nostream || !stage_sm_live(sm) || f->n_active ||
	    (f->uploading && sm->state != SM_FINAL))
		return;
	unsigned limit = st->up.threads ? st->up.threads : UPLOAD_THREADS_DEFAULT;
	while (sm->inflight < limit && (sm->id || sm->n_parts == 0)) {
		unsigned n = sm->n_parts + 1;
		uint64_t want = upload_stream_part_size(&st->up, n);
		uint64_t avail = f->size - sm->queued_end;
		if (avail == 0 || (avail < want && sm->state != SM_FINAL))
			return;
		if (n > S3_MAX_PARTS) {
			stage_stream_break(f, "too many parts");
			return;
		}
		int err = 0;
		if (n == 1)
			err = stream_begin_locked(f);
		if (!err && n > sm->cap) {
			size_t cap = sm->cap ? sm->cap * 2 : 64;
			struct s3_part *p = realloc(sm->parts, cap * sizeof *p);
			if (p) {
				sm->parts = p;
				sm->cap = cap;
			} else {
				err = -ENOMEM;
			}
		}
		uint64_t len = avail < want ? avail : want;
		struct stage_job *j = err ? NULL : calloc(1, sizeof *j);
		if (j) {
			*j = (struct stage_job){ .f = f, .number = n,
				.off = sm->queued_end, .len = len,
				.tail = sm->state == SM_FINAL };
			err = pool_push(st, j);
		}
		if (!j || err) {
			free(j);
			if (n == 1) {
				/* Nothing sent: no stream for this file until
				 * its next commit. */
				stream_reset_locked(sm);
				stage_sm_to(sm, SM_BROKEN);
			} else {
				stage_stream_break(f, "no memory or thread");
			}
			return;
		}
		/* The job waits for f->lock (held) before it looks at sm. */
		sm->parts[n - 1] = (struct s3_part){ .number = n };
		sm->n_parts = n;
		sm->queued_end += len;
		sm->inflight++;
	}
}

void stage_stream_touch(struct stage_file *f, uint64_t off)
{
	if (f->sm.n_parts && off < f->sm.queued_end)
		stage_stream_break(f, "bytes already sent change");
}

static bool str_same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

bool stage_stream_same_meta(struct stage_file *f, const struct obj_kv *meta,
			    size_t n_meta, const char *ctype)
{
	const struct stage_stream *sm = &f->sm;
	if (!sm->n_parts)
		return true;
	if (sm->n_meta != n_meta || !str_same(sm->ctype, ctype))
		return false;
	for (size_t i = 0; i < n_meta; i++)
		if (!str_same(sm->meta[i].name, meta[i].name) ||
		    !str_same(sm->meta[i].value, meta[i].value))
			return false;
	return true;
}

bool stage_stream_same_name(struct stage_file *f, const char *bucket,
			    const char *key)
{
	const struct stage_stream *sm = &f->sm;
	return !sm->n_parts || (str_same(sm->bucket, bucket) &&
				str_same(sm->key, key));
}

/* The journal of f as it stands, naming the stream's upload (if any) and
 * f's intent, written with f->lock dropped (stage_jnl_put_file). f->lock
 * held and f's journal owned (stage_jnl_own). */
static int stream_journal(struct stage_file *f)
{
	enum stage_jstate state = f->js == STAGE_JS_COMMIT ? STAGE_JS_COMMIT
							   : STAGE_JS_DIRTY;
	return stage_jnl_file(f, state, f->size, true, NULL) ? -EIO : 0;
}

/* Part 1's job: journal the intent, create the upload, journal its id
 * (dropping the intent this creation set). On failure nothing stays open
 * (or, if even the abort failed, the id stays in sm; after a failed
 * creation the intent stays: the store may have made the upload). */
static int stream_create(struct stage_file *f)
{
	struct stage *st = f->st;
	struct stage_stream *sm = &f->sm;
	char id[1024];
	mod_lock(&f->lock);
	stage_jnl_own(f);
	int err = stage_file_intent_set(f, sm->bucket, sm->key, &f->intent_fresh);
	if (!err)
		err = stream_journal(f);
	bool fresh = f->intent_fresh;
	stage_jnl_disown(f);
	mod_unlock(&f->lock);
	if (err) {
		log_error("stage: %s/%s: cannot journal a streamed upload about to "
			  "be created: %s", sm->bucket, sm->key, strerror(-err));
		return err;
	}
	err = s3_mpu_create(st->s3, sm->bucket, sm->key, sm->meta, sm->n_meta,
			    sm->ctype, id, sizeof id);
	if (err) {
		log_error("stage: %s/%s: cannot create a streamed upload: %s",
			  sm->bucket, sm->key, strerror(-err));
		stage_intent_dropped(f, fresh, err);
		return err;
	}
	/* sm->id is set only with the journal naming it: a part queued
	 * meanwhile never sends with an id that is about to be aborted
	 * (sm->err, set before the lock is dropped, makes it skip). */
	mod_lock(&f->lock);
	stage_jnl_own(f);
	sm->id = strdup(id);
	if (!sm->id) {
		err = -ENOMEM;
	} else {
		struct stage_intent kept = f->intent;
		if (fresh)
			f->intent = (struct stage_intent){ 0 };
		err = stream_journal(f);
		if (err || !fresh)
			f->intent = kept;       /* still journaled */
		else
			stage_intent_clear(&kept);
		if (err) {
			free(sm->id);
			sm->id = NULL;
		}
	}
	if (err)
		stage_sm_fail(sm, err);
	stage_jnl_disown(f);
	mod_unlock(&f->lock);
	if (err) {
		int aerr = s3_mpu_abort(st->s3, sm->bucket, sm->key, id);
		if (aerr) {
			log_error("stage: %s/%s: aborting upload %s (not journaled) "
				  "failed: %s", sm->bucket, sm->key, id, strerror(-aerr));
			/* Kept for the next commit's or the release's abort
			 * (stage_stream_drop); no part sends with it: sm->err. */
			mod_lock(&f->lock);
			if (!sm->id)
				sm->id = strdup(id);
			mod_unlock(&f->lock);
		}
	} else {
		log_debug("stage: %s/%s: streamed upload %s created", sm->bucket,
			  sm->key, id);
	}
	return err;
}

static void part_run(struct stage_job *j)
{
	struct stage_file *f = j->f;
	struct stage *st = f->st;
	struct stage_stream *sm = &f->sm;
	mod_lock(&f->lock);
	bool skip = !stage_sm_live(sm);
	bool create = !sm->id;
	mod_unlock(&f->lock);
	int err = 0;
	char etag[72] = "";
	if (!skip && create)
		err = stream_create(f);
	int fd = skip || err ? -1 : stage_data_get(f, false);
	if (!skip && !err && fd < 0)
		err = fd;
	if (fd >= 0) {
		err = s3_mpu_put_part(st->s3, sm->bucket, sm->key, sm->id, j->number,
				      fd, j->off, j->len, etag);
		stage_data_put(f);
	}

	mod_lock(&f->lock);
	if (err && stage_sm_live(sm)) {
		stage_sm_fail(sm, err);
		log_error("stage: %s/%s: streamed part %u (%" PRIu64 " bytes at %"
			  PRIu64 ") failed: %s", sm->bucket, sm->key, j->number,
			  j->len, j->off, strerror(-err));
	}
	if (!skip && !err) {
		snprintf(sm->parts[j->number - 1].etag, sizeof sm->parts[0].etag,
			 "%s", etag);
		count(st, j->tail ? SC_TAIL : SC_STREAMED, 0);
	}
	sm->inflight--;
	stage_stream_feed(f);
	pthread_cond_broadcast(&f->cond);
	mod_unlock(&f->lock);
}

int stage_stream_drop(struct stage_file *f)
{
	struct stage *st = f->st;
	struct stage_stream *sm = &f->sm;
	mod_lock(&f->lock);
	if (!sm->n_parts && !sm->id) {
		mod_unlock(&f->lock);
		return 0;
	}
	if (sm->state != SM_BROKEN)
		stage_sm_to(sm, SM_BROKEN);
	while (sm->inflight)
		pthread_cond_wait(&f->cond, &f->lock);
	mod_unlock(&f->lock);
	/* No part in flight: the strings and id stay as they are. */
	int err = sm->id ? s3_mpu_abort(st->s3, sm->bucket, sm->key, sm->id) : 0;
	mod_lock(&f->lock);
	if (err) {
		log_error("stage: %s/%s: aborting streamed upload %s failed: %s; it "
			  "stays journaled for the next commit or recovery",
			  sm->bucket, sm->key, sm->id, strerror(-err));
	} else {
		if (sm->id) {
			count(st, SC_ABORT, 0);
			log_debug("stage: %s/%s: streamed upload %s aborted",
				  sm->bucket, sm->key, sm->id);
		}
		stream_reset_locked(sm);
	}
	mod_unlock(&f->lock);
	return err;
}

int stage_stream_commit(struct stage_file *f, uint64_t size, char etag[72])
{
	struct stage *st = f->st;
	struct stage_stream *sm = &f->sm;
	int err = stage_data_sync(f);     /* none under PROCESS */
	if (err)
		log_error("stage: fdatasync of %s/%s before upload: %s", f->bucket,
			  f->key, strerror(-err));
	mod_lock(&f->lock);
	if (!err) {
		stage_jnl_own(f);
		err = stage_jnl_file(f, STAGE_JS_COMMIT, size, true, NULL);
		stage_jnl_disown(f);
	}
	if (!err) {
		if (stage_sm_live(sm))
			stage_sm_to(sm, SM_FINAL);
		stage_stream_feed(f);
		while (sm->inflight || (stage_sm_live(sm) && sm->queued_end < size))
			pthread_cond_wait(&f->cond, &f->lock);
		if (sm->state == SM_FINAL)
			stage_sm_to(sm, SM_OPEN);
		err = sm->err ? sm->err : sm->state == SM_BROKEN ? -EIO : 0;
	}
	mod_unlock(&f->lock);
	/* Every part is in; nothing changes sm until this commit ends. */
	if (!err)
		err = s3_mpu_complete(st->s3, sm->bucket, sm->key, sm->id, sm->parts,
				      sm->n_parts, etag);
	if (err) {
		log_error("stage: streamed upload of %s/%s (%" PRIu64 " bytes, %u "
			  "parts) failed: %s; data kept in %s", f->bucket, f->key,
			  size, sm->n_parts, strerror(-err), st->dir);
		count(st, SC_ERROR, 0);
		etag[0] = '\0';
		stage_stream_drop(f);
		return -EIO;
	}
	log_debug("stage: %s/%s: %" PRIu64 " bytes streamed in %u parts", f->bucket,
		  f->key, size, sm->n_parts);
	count(st, SC_DONE, size);
	mod_lock(&f->lock);
	stream_reset_locked(sm);
	mod_unlock(&f->lock);
	stage_commit_unjournal(f);
	return 0;
}
