/*
 * stage_commit.c — the commit side of a staged file: its commit (the
 * upload whole, or the end of its stream), the seal of a write-back file,
 * its set-aside and drop, and taking up again a file recovery deferred
 * (stage_file_adopt). The top of the stage's chain (stage_int.h): calls
 * stage.c and the files below it (none of stage_write.c), never the
 * reverse, and upload.c (the upload whole).
 *
 * A commit owns its file (f->uploading, set under f->lock once no
 * operation runs: n_active 0, no journal owner, no stream creation in
 * flight); writers wait on f->cond until it clears (stage_write.c), so
 * the owner reads the bytes, size, name and metadata without the lock. The
 * upload journals "commit" first (the data synced before, unless the
 * seal's stand holds: jsealed) and removes the journal after it; a commit
 * that fails having journaled "commit" stays on the kept list
 * (stage_kept.c) for a retry or the next start. The transitions, and the
 * function making each, are in docs/design.md ("A staged file's life").
 */
#include "sync/stage/stage_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/lock.h"
#include "common/log.h"

/* ---- the upload of a commit ------------------------------------------- */

/* upload_file for a commit of f's data (its descriptor fd), counted, a
 * failure logged: 0 or its error. base: the condition sent with it (NULL:
 * none); its refusal (-ESTALE) is the caller's to report, not an upload
 * error. No hooks: a one-shot file, whose data is not kept after a failure
 * (its release deletes it). */
static int upload_counted(struct stage_file *f, int fd, uint64_t size, const char *base,
			  const struct upload_hooks *hooks, char etag[72])
{
	struct stage *st = f->st;
	int err = upload_file(st->s3, &st->up, f->bucket, f->key, fd, size,
			      f->meta, f->n_meta, f->ctype, base, hooks, etag);
	mod_lock(&st->lock);
	if (err && err != -ESTALE) {
		st->cnt.upload_errors++;
	} else if (!err) {
		st->cnt.uploads++;
		st->cnt.upload_bytes += size;
	}
	mod_unlock(&st->lock);
	if (err == -ESTALE)
		log_debug("stage: %s/%s: the store refused the upload: the key does "
			  "not hold %s; data kept", f->bucket, f->key,
			  base && *base ? base : "no object");
	else if (err && hooks)
		log_error("stage: upload of %s/%s (%" PRIu64 " bytes) failed: %s; "
			  "data kept in %s", f->bucket, f->key, size,
			  strerror(-err), st->dir);
	else if (err)
		log_error("stage: upload of %s/%s (%" PRIu64 " bytes, made in one "
			  "call) failed: %s; the call fails", f->bucket, f->key,
			  size, strerror(-err));
	return err;
}

/* A failed upload as a commit returns it. */
static int commit_error(int err)
{
	return !err || err == -EFBIG || err == -ESTALE ? err : -EIO;
}

/* The upload of a commit that owns f (f->uploading), from f's descriptor
 * fd: data durable (under POWER), journal "commit", PUT (with the
 * condition base, if not NULL), journal removed. A one-shot file under one
 * part, never journaled: the PUT alone (no hooks: one PUT creates no
 * multipart upload). */
static int upload_from(struct stage_file *f, int fd, uint64_t size, const char *base,
		       char etag[72])
{
	struct stage *st = f->st;
	mod_lock(&f->lock);
	bool quick = stage_oneshot_locked(f, 0) && f->js == STAGE_JS_NONE;
	/* Sealed and not changed since: its data is synced and its journal
	 * says "commit" with what goes up (a write-back file's upload). */
	bool sealed = stage_sealed_locked(f) && f->size == size && !f->sm.id;
	mod_unlock(&f->lock);
	if (quick)
		return commit_error(upload_counted(f, fd, size, base, NULL, etag));
	int err = sealed ? 0 : stage_sync(st, fd, true);
	if (err) {
		log_error("stage: fdatasync of %s/%s before upload: %s", f->bucket,
			  f->key, strerror(-err));
		return -EIO;
	}
	/* The commit owns f: no other thread changes what j borrows. */
	struct stage_jnl j;
	mod_lock(&f->lock);
	if (sealed) {
		j = (struct stage_jnl){ .state = STAGE_JS_COMMIT, .size = size,
			.bucket = f->bucket, .key = f->key, .ctype = f->ctype,
			.meta = f->meta, .n_meta = f->n_meta,
			.base = f->has_base ? f->base : NULL };
	} else {
		stage_jnl_own(f);
		err = stage_jnl_file(f, STAGE_JS_COMMIT, size, false, &j);
		stage_jnl_disown(f);
	}
	mod_unlock(&f->lock);
	if (err)
		return -EIO;

	/* An intent journaled before a multipart upload is created, its id
	 * once it exists (stage_orphans.c). */
	struct jnl_started js = { .st = st, .id = f->id, .j = &j, .f = f };
	struct upload_hooks hooks = { .creating = stage_jnl_creating,
				      .started = stage_jnl_started,
				      .abandoned = stage_jnl_abandoned, .ctx = &js };
	err = upload_counted(f, fd, size, base, &hooks, etag);
	if (err)
		stage_intent_dropped(f, js.fresh, err);
	stage_jnl_hooks_done(&js);
	if (err)
		return commit_error(err);
	stage_commit_unjournal(f);
	return 0;
}

/* upload_from with f's descriptor taken for the upload (reopened if f is
 * parked; -EIO if it cannot be). */
static int commit_upload(struct stage_file *f, uint64_t size, const char *base,
			 char etag[72])
{
	int fd = stage_data_get(f, false);
	if (fd < 0)
		return -EIO;
	int err = upload_from(f, fd, size, base, etag);
	stage_data_put(f);
	return err;
}

/* A commit that fails before its upload (a streamed part or creation
 * failed, or aborting the stream did): "commit" is journaled all the same,
 * naming the upload if one is still open, so that the next start uploads
 * the data as after any failed commit, and it counts as the key's newest.
 * If the data cannot be made durable first it stays "dirty" (moved to
 * recovered/ at the next start). The commit owns f. */
static void commit_journal_failed(struct stage_file *f, uint64_t size)
{
	if (stage_data_sync(f) != 0)
		return;
	mod_lock(&f->lock);
	stage_jnl_own(f);
	stage_jnl_file(f, STAGE_JS_COMMIT, size, true, NULL);
	stage_jnl_disown(f);
	mod_unlock(&f->lock);
}

/* ---- commit, seal, set-aside, drop ------------------------------------ */

/* Whether the upload of a commit of size bytes (no stream open) can carry
 * cond: one PUT, and a condition the store honours. */
static bool cond_sendable(const struct stage_file *f, const struct stage_cond *cond,
			  uint64_t size)
{
	bool honoured = *cond->base ? cond->caps.if_match : cond->caps.if_none_match;
	return honoured && upload_single(&f->st->up, size);
}

/* stage_file_commit, and with cond (not NULL) stage_file_commit_if. */
static int file_commit(struct stage_file *f, const struct stage_cond *cond,
		       char etag_out[72])
{
	struct stage *st = f->st;
	char etag[72] = "";
	mod_lock(&f->lock);
	while (f->uploading)
		pthread_cond_wait(&f->cond, &f->lock);
	if (!f->dirty) {
		/* Nothing written since the last upload (or fill). */
		if (etag_out)
			snprintf(etag_out, 72, "%s", f->etag);
		mod_unlock(&f->lock);
		return 0;
	}
	f->uploading = true;
	/* writes, a journal being written, a creation */
	while (f->n_active || f->jbusy || (f->sm.inflight && !f->sm.id))
		pthread_cond_wait(&f->cond, &f->lock);
	uint64_t size = f->size;
	const struct stage_stream *sm = &f->sm;
	bool stream = sm->id && stage_sm_live(sm);
	bool failed = sm->state == SM_FAILED;
	bool drop = !stream && (sm->id || sm->n_parts);
	if (cond && (stream || !cond_sendable(f, cond, size))) {
		/* Not sendable: given back untouched, for a HEAD and a plain
		 * commit. */
		f->uploading = false;
		pthread_cond_broadcast(&f->cond);
		mod_unlock(&f->lock);
		return -EOPNOTSUPP;
	}
	char *c_bucket = strdup(f->bucket), *c_key = strdup(f->key);
	mod_unlock(&f->lock);

	/* This commit is the key's newest from now on: older failed ones are
	 * not uploaded by the next start (marked before this one journals
	 * "commit"), and this file's own mark, if any, goes. */
	if (c_bucket && c_key)
		stage_kept_replaced(st, c_bucket, c_key, f->id);
	stage_kept_begin(st, f->id);
	/* Known from now on, so that a later commit of the key that begins
	 * while this one uploads marks it, should it fail. */
	if (c_bucket && c_key)
		stage_kept_add(st, f->id, c_bucket, c_key, true);
	int err = 0;
	if (size > st->max_object) {
		stage_count_efbig(st);
		log_error("stage: %s/%s is %" PRIu64 " bytes, over the %" PRIu64
			  "-byte object limit: not uploaded, data kept",
			  f->bucket, f->key, size, st->max_object);
		err = -EFBIG;
	} else if (stream) {
		err = stage_stream_commit(f, size, etag);
	} else {
		/* A stream given up or failed: abort it, then (given up)
		 * upload whole; a failed part is this commit's -EIO. An
		 * abort the store refuses for good (403: the credentials may
		 * not abort) does not hold the data back: it stays named in
		 * f's journals and is logged. */
		int derr = drop ? stage_stream_drop(f) : 0;
		if (derr == -EACCES || derr == -EPERM)
			log_warn("stage: %s/%s: the store refuses to abort an earlier "
				 "upload of it (%s): it stays open there; uploading the "
				 "file anyway", f->bucket, f->key, strerror(-derr));
		else if (derr)
			err = -EIO;
		if (!err && failed) {
			log_error("stage: %s/%s: a streamed part failed; upload "
				  "aborted, data kept in %s", f->bucket, f->key,
				  st->dir);
			mod_lock(&st->lock);
			st->cnt.upload_errors++;
			mod_unlock(&st->lock);
			err = -EIO;
		}
		if (err)
			commit_journal_failed(f, size);
		else
			err = commit_upload(f, size, cond ? cond->base : NULL, etag);
	}

	mod_lock(&f->lock);
	f->uploading = false;
	/* A failed commit that journaled "commit" waits for a retry or the
	 * next start (stage_kept.c). */
	bool kept = err && f->js == STAGE_JS_COMMIT;
	if (!err) {
		f->dirty = false;
		f->oneshot = false;
		f->js = STAGE_JS_NONE;
		f->jsealed = false;
		if (!f->sm.id && !f->sm.n_parts && f->sm.state == SM_BROKEN) {
			stage_sm_to(&f->sm, SM_OPEN);   /* the next writes may stream */
			f->sm.err = 0;
		}
		snprintf(f->etag, sizeof f->etag, "%s", etag);
		if (etag_out)
			snprintf(etag_out, 72, "%s", etag);
	}
	bool adopted_done = !err && f->adopted;   /* stage_file_adopt's */
	if (adopted_done)
		f->adopted = false;
	pthread_cond_broadcast(&f->cond);
	mod_unlock(&f->lock);
	if (adopted_done) {
		mod_lock(&st->lock);
		st->cnt.reuploaded_files++;
		mod_unlock(&st->lock);
	}
	if (!kept)          /* in S3, or not journaled "commit": nothing waits */
		stage_kept_forget(st, f->id);
	if (!err)
		stage_sealed_set(f, 0);
	free(c_bucket);
	free(c_key);
	return err;
}

int stage_file_commit(struct stage_file *f, char etag_out[72])
{
	return file_commit(f, NULL, etag_out);
}

int stage_file_commit_if(struct stage_file *f, const struct stage_cond *cond,
			 char etag_out[72])
{
	if (!cond || !cond->base)
		return -EINVAL;
	return file_commit(f, cond, etag_out);
}

/* Own f as a commit does (f->uploading): no write, truncate, metadata
 * change or journal write runs until commit_disown. Whether f is dirty. */
static bool commit_own(struct stage_file *f)
{
	mod_lock(&f->lock);
	while (f->uploading)
		pthread_cond_wait(&f->cond, &f->lock);
	bool dirty = f->dirty;
	if (dirty) {
		f->uploading = true;
		while (f->n_active || f->jbusy || (f->sm.inflight && !f->sm.id))
			pthread_cond_wait(&f->cond, &f->lock);
	}
	mod_unlock(&f->lock);
	return dirty;
}

static void commit_disown(struct stage_file *f)
{
	mod_lock(&f->lock);
	f->uploading = false;
	pthread_cond_broadcast(&f->cond);
	mod_unlock(&f->lock);
}

int stage_file_seal(struct stage_file *f)
{
	struct stage *st = f->st;
	if (!commit_own(f))
		return 0;
	uint64_t size = f->size;
	stage_kept_replaced(st, f->bucket, f->key, f->id);
	stage_kept_begin(st, f->id);
	stage_kept_add(st, f->id, f->bucket, f->key, true);
	int err = stage_data_sync(f);
	if (err)
		log_error("stage: fdatasync of %s/%s at its close: %s", f->bucket,
			  f->key, strerror(-err));
	if (!err) {
		mod_lock(&f->lock);
		stage_jnl_own(f);
		err = stage_jnl_file(f, STAGE_JS_COMMIT, size, true, NULL);
		f->jsealed = !err;
		f->oneshot = false;
		stage_jnl_disown(f);
		mod_unlock(&f->lock);
	}
	if (!err)
		stage_sealed_set(f, size ? size : 1);
	commit_disown(f);
	return err ? -EIO : 0;
}

int stage_file_set_aside(struct stage_file *f, const char *note)
{
	struct stage *st = f->st;
	if (!commit_own(f))
		return 0;
	int fd = stage_data_get(f, false);
	int err = fd < 0 ? fd : stage_recover_fd(st, f->id, f->bucket, f->key, fd,
						 f->size, note);
	if (fd >= 0)
		stage_data_put(f);
	if (!err && stage_stream_drop(f) != 0)
		log_warn("stage: %s/%s set aside with a streamed upload open", f->bucket,
			 f->key);
	if (!err && (err = stage_jnl_remove(st, f->id)) != 0)
		log_error("stage: %s/%s set aside, but its journal remains: %s",
			  f->bucket, f->key, strerror(-err));
	if (!err) {
		mod_lock(&f->lock);
		f->dirty = false;
		f->js = STAGE_JS_NONE;
		f->jsealed = false;
		mod_unlock(&f->lock);
		stage_kept_forget(st, f->id);
		stage_sealed_set(f, 0);
	}
	commit_disown(f);
	return err;
}

void stage_file_drop(struct stage_file *f)
{
	if (!commit_own(f))
		return;
	if (stage_stream_drop(f) != 0)
		log_warn("stage: %s/%s dropped with a streamed upload open", f->bucket,
			 f->key);
	if (stage_jnl_remove(f->st, f->id) != 0)
		log_warn("stage: %s/%s deleted, but its journal remains: the next start "
			 "moves its data to %s", f->bucket, f->key, f->st->rec_dir);
	mod_lock(&f->lock);
	f->dirty = false;
	f->js = STAGE_JS_NONE;
	f->jsealed = false;
	mod_unlock(&f->lock);
	stage_kept_forget(f->st, f->id);
	stage_sealed_set(f, 0);
	commit_disown(f);
}

/* ---- files recovery deferred ------------------------------------------ */

/* What the upload of the file journal j stands for carries, copied into
 * *what (the base as its ETag). 0 or -ENOMEM. */
static int adopt_what(const struct stage_jnl *j, struct obj_meta *what)
{
	int err = 0;
	memset(what, 0, sizeof *what);
	what->bucket = obj_strdup_opt(j->bucket, &err);
	what->key = obj_strdup_opt(j->key, &err);
	what->content_type = obj_strdup_opt(j->ctype, &err);
	if (!err)
		err = obj_kv_copy(&what->meta, &what->n_meta, j->meta, j->n_meta);
	what->size = j->size;
	what->flags = OBJ_HAS_META | OBJ_HAS_CTYPE;
	snprintf(what->etag, sizeof what->etag, "%s", j->base ? j->base : "");
	if (err)
		obj_meta_release(what);
	return err;
}

/* Deferred file d as an open staged file, sealed as the journal on disk
 * says (d->j's strings move into it). 0 or -errno (nothing made). */
static int adopt_file(struct stage *st, struct stage_deferred *d,
		      struct stage_file **out)
{
	struct stage_jnl *j = &d->j;
	struct stage_file *f = calloc(1, sizeof *f);
	if (!f)
		return -ENOMEM;
	f->st = st;
	f->id = d->id;
	f->data_fd = -1;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	pthread_mutex_init(&f->fd_lock, NULL);
	char name[32];
	stage_name(d->id, ".data", name);
	int fd = openat(st->dir_fd, name, O_RDWR | O_CLOEXEC);
	int err = fd < 0 ? -errno : 0;
	if (!err) {              /* there; held by no descriptor of the mount */
		stage_data_set(f, fd);
		stage_data_park(f);
	}
	if (!err && j->upload_id) {
		/* Its commit aborts the upload the journal names first. */
		err = 0;
		f->sm.bucket = obj_strdup_opt(j->upload_bucket ? j->upload_bucket
					      : j->bucket, &err);
		f->sm.key = obj_strdup_opt(j->upload_key ? j->upload_key : j->key, &err);
		f->sm.id = j->upload_id;
		j->upload_id = NULL;
		stage_sm_to(&f->sm, SM_BROKEN);
	}
	if (err) {
		stage_file_free(f);
		return err;
	}
	f->bucket = j->bucket;
	f->key = j->key;
	f->ctype = j->ctype;
	f->meta = j->meta;
	f->n_meta = j->n_meta;
	j->bucket = j->key = j->ctype = NULL;
	j->meta = NULL;
	j->n_meta = 0;
	f->size = j->size;
	f->dirty = true;
	f->js = STAGE_JS_COMMIT;
	f->jsynced = true;
	/* The seal's stand: what goes up is what the journal holds (an
	 * upload it names is aborted first; aborting one already gone is 0,
	 * so the name may stay in it until the journal goes). */
	f->jsealed = true;
	f->nostream = true;
	f->has_base = j->base != NULL;
	snprintf(f->base, sizeof f->base, "%s", j->base ? j->base : "");
	f->adopted = true;
	*out = f;
	return 0;
}

int stage_file_adopt(struct stage *st, struct stage_file **out, struct obj_meta *what,
		     bool *base_known)
{
	*out = NULL;
	memset(what, 0, sizeof *what);
	*base_known = false;
	struct stage_deferred d;
	int err = stage_deferred_take(st, &d);
	if (err)
		return err;
	char stale[32];
	stage_name(d.id, ".stale", stale);
	if (faccessat(st->dir_fd, stale, F_OK, 0) == 0)
		err = -ESTALE;       /* replaced since: the next start moves it */
	if (!err)
		err = adopt_what(&d.j, what);
	bool known = d.j.base != NULL;
	struct stage_file *f = NULL;
	if (!err && (err = adopt_file(st, &d, &f)) != 0)
		obj_meta_release(what);
	if (err) {
		log_error("stage: %s/%016" PRIx64 " (%s/%s, commit had begun): cannot "
			  "be taken up again: %s; it stays for the next start", st->dir,
			  d.id, d.j.bucket ? d.j.bucket : "?", d.j.key ? d.j.key : "?",
			  strerror(-err));
		stage_jnl_release(&d.j);
		return err;
	}
	stage_jnl_release(&d.j);
	mod_lock(&st->lock);
	stage_open_add_locked(st, f);
	if (st->cnt.pending_files)       /* released with a journal no more */
		st->cnt.pending_files--;
	st->pending_bytes -= f->size < st->pending_bytes ? f->size : st->pending_bytes;
	mod_unlock(&st->lock);
	stage_kept_add(st, f->id, f->bucket, f->key, true);
	stage_sealed_set(f, f->size ? f->size : 1);
	log_info("stage: %s/%s (%" PRIu64 " bytes, commit had begun before the "
		 "stop) taken up again for the drain", f->bucket, f->key,
		 (uint64_t)f->size);
	*out = f;
	*base_known = known;
	return 0;
}
