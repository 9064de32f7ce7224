/*
 * stage.c — the stage and the lives of its staged files: the stage's
 * open and close; a file's creation, fill, reads, state, fsync, park and
 * release. What changes a file is stage_write.c's and its commit
 * stage_commit.c's; both call this file, which calls only the files below
 * it (stage_int.h) and upload.c (a one-shot file's part size).
 *
 * `size` and `dirty` are atomic, so a stat or a read never takes f->lock
 * (stage_write.c says what the lock guards and how a write, a commit and
 * the journal's owner wait for each other). Every use of the file's data
 * takes its descriptor for that use (stage_data_get, stage_dir.c) and
 * gives it back: a file parked by stage_file_park holds none between
 * uses. The transitions of a file's journal, and the function making
 * each, are in docs/design.md ("A staged file's life").
 */
#include "sync/stage/stage_int.h"

#include "common/file.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "common/lock.h"
#include "common/log.h"
#include "common/s3.h"

#define FILL_CHUNK (8u << 20)

/* ---- the stage -------------------------------------------------------- */

int stage_open(const struct stage_conf *conf, struct stage **out)
{
	*out = NULL;
	if (!conf || !conf->dir || !*conf->dir || !conf->s3)
		return -EINVAL;
	struct stage *st = calloc(1, sizeof *st);
	if (!st)
		return -ENOMEM;
	st->dir_fd = st->rec_fd = -1;
	pthread_mutex_init(&st->lock, NULL);
	pthread_cond_init(&st->room, NULL);
	st->full_timeout_ns = (int64_t)conf->full_timeout_s * 1000000000;
	pthread_mutex_init(&st->renew_lock, NULL);
	pthread_mutex_init(&st->kept_io, NULL);
	st->max_bytes = conf->max_bytes;
	st->grew = conf->grew;
	st->renewed = conf->renewed;
	st->grew_ctx = conf->grew_ctx;
	st->jnl_changed = conf->jnl_changed;
	st->jnl_ctx = conf->jnl_ctx;
	st->max_object = conf->max_object ? conf->max_object : STAGE_MAX_OBJECT;
	st->durability = conf->durability;
	st->up = conf->up;
	st->s3 = conf->s3;
	st->stream_off = conf->stream_off;
	st->defer_commits = conf->defer_commits;
	pthread_mutex_init(&st->pool.lock, NULL);
	pthread_cond_init(&st->pool.cond, NULL);
	st->pool.n_threads = conf->stream_threads;
	st->next_id = 1;
	int err = -ENOMEM;
	st->dir = strdup(conf->dir);
	if (!st->dir || asprintf(&st->rec_dir, "%s/recovered", conf->dir) < 0) {
		st->rec_dir = NULL;
		goto fail;
	}
	err = stage_dir_setup(st);
	if (err) {
		log_error("stage: cannot open staging directory %s: %s", conf->dir,
			  strerror(-err));
		goto fail;
	}
	if (st->used > st->max_bytes)
		log_warn("stage: %s already holds %" PRIu64 " bytes, over its budget "
			 "of %" PRIu64, st->dir, st->used, st->max_bytes);
	*out = st;
	return 0;
fail:
	stage_close(st);
	return err;
}

void stage_close(struct stage *st)
{
	if (!st)
		return;
	assert(!st->open);
	stage_pool_stop(st);
	stage_deferred_free(st);
	stage_kept_free_all(st);
	pthread_mutex_destroy(&st->pool.lock);
	pthread_cond_destroy(&st->pool.cond);
	stage_dir_close(st);
	pthread_mutex_destroy(&st->renew_lock);
	pthread_mutex_destroy(&st->kept_io);
	pthread_mutex_destroy(&st->lock);
	pthread_cond_destroy(&st->room);
	free(st->dir);
	free(st->rec_dir);
	free(st);
}

const char *stage_recovered_dir(const struct stage *st)
{
	return st->rec_dir;
}

void stage_counters_get(struct stage *st, struct stage_counters *out)
{
	mod_lock(&st->lock);
	*out = st->cnt;
	out->used_bytes = st->used;
	out->max_bytes = st->max_bytes;
	out->open_files = st->n_open;
	mod_unlock(&st->lock);
}

/* ---- one staged file -------------------------------------------------- */

void stage_open_add_locked(struct stage *st, struct stage_file *f)
{
	f->next = st->open;
	if (st->open)
		st->open->prev = f;
	st->open = f;
	st->n_open++;
}

void stage_file_free(struct stage_file *f)
{
	stage_stream_free(f);
	stage_data_close(f);
	free(f->bucket);
	free(f->key);
	free(f->ctype);
	obj_kv_free(f->meta, f->n_meta);
	stage_intent_clear(&f->intent);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->fd_lock);
	free(f);
}

int stage_file_new(struct stage *st, const char *bucket, const char *key,
		   const struct obj_kv *meta, size_t n_meta,
		   const char *content_type, struct stage_file **out)
{
	*out = NULL;
	if (!bucket || !*bucket || !key || !*key)
		return -EINVAL;
	struct stage_file *f = calloc(1, sizeof *f);
	if (!f)
		return -ENOMEM;
	f->st = st;
	f->data_fd = -1;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	pthread_mutex_init(&f->fd_lock, NULL);
	int err = 0;
	f->bucket = obj_strdup_opt(bucket, &err);
	f->key = obj_strdup_opt(key, &err);
	f->ctype = obj_strdup_opt(content_type, &err);
	if (!err)
		err = obj_kv_copy(&f->meta, &f->n_meta, meta, n_meta);
	if (err)
		goto fail;
	f->dirty = true;
	mod_lock(&st->lock);
	f->id = st->next_id++;
	st->files_made = true;
	mod_unlock(&st->lock);
	char name[32];
	stage_name(f->id, ".data", name);
	int fd = stage_create_at(st, name, O_RDWR | O_EXCL);
	if (fd < 0) {
		err = fd;
		log_error("stage: cannot create %s/%s for %s/%s: %s", st->dir, name,
			  bucket, key, strerror(-err));
		goto fail;
	}
	stage_data_set(f, fd);
	mod_lock(&st->lock);
	stage_open_add_locked(st, f);
	mod_unlock(&st->lock);
	*out = f;
	return 0;
fail:
	stage_file_free(f);
	return err;
}

int stage_file_fill(struct stage_file *f, const char *bucket, const char *key,
		    uint64_t size, const char *etag)
{
	struct stage *st = f->st;
	assert(f->size == 0 && !f->uploading && f->js == STAGE_JS_NONE);
	if (size > st->max_object) {
		stage_count_efbig(st);
		log_error("stage: %s/%s is %" PRIu64 " bytes, over the %" PRIu64
			  "-byte single-PUT limit: cannot be written", f->bucket,
			  f->key, size, st->max_object);
		return -EFBIG;
	}
	int fd = stage_data_get(f, true);
	if (fd < 0)
		return fd;
	int err = stage_charge(st, size);
	if (err) {
		stage_data_put(f);
		return err;
	}
	stage_grown(st);
	size_t chunk = size < FILL_CHUNK ? (size_t)size : FILL_CHUNK;
	char *buf = size ? malloc(chunk) : NULL;
	if (size && !buf)
		err = -ENOMEM;
	for (uint64_t off = 0; !err && off < size;) {
		size_t want = size - off < chunk ? (size_t)(size - off) : chunk;
		size_t got = 0;
		err = s3_get(st->s3, bucket, key, off, want, etag, buf, &got);
		if (!err && got != want) {
			log_error("stage: fill of %s/%s from %s/%s: GET at %" PRIu64
				  " gave %zu of %zu bytes", f->bucket, f->key, bucket,
				  key, off, got, want);
			err = -EIO;
		}
		if (!err)
			err = file_pwrite_all(fd, buf, want, off);
		off += want;
	}
	free(buf);
	if (err && ftruncate(fd, 0) != 0)
		log_error("stage: %s/%s: cannot empty staged file: %s",
			  f->bucket, f->key, strerror(errno));
	stage_data_put(f);
	if (err) {
		stage_uncharge(st, size);
		return err;
	}
	mod_lock(&f->lock);
	f->size = size;
	f->dirty = false;
	snprintf(f->etag, sizeof f->etag, "%s", etag ? etag : "");
	mod_unlock(&f->lock);
	return 0;
}

void stage_file_nostream(struct stage_file *f)
{
	mod_lock(&f->lock);
	f->nostream = true;
	mod_unlock(&f->lock);
}

void stage_file_oneshot(struct stage_file *f)
{
	mod_lock(&f->lock);
	f->oneshot = true;
	mod_unlock(&f->lock);
}

/* Whether f is still one-shot once it holds end bytes (or its size, if
 * larger): under one part (one PUT, no stream, so no upload id to
 * journal). f->lock held. */
bool stage_oneshot_locked(struct stage_file *f, uint64_t end)
{
	uint64_t size = f->size > end ? f->size : end;
	if (f->oneshot && size >= upload_part_size(&f->st->up, size))
		f->oneshot = false;
	return f->oneshot;
}

/* ---- reads and state -------------------------------------------------- */

ssize_t stage_file_pread(struct stage_file *f, void *buf, size_t len,
			 uint64_t off)
{
	uint64_t size = f->size;     /* atomic: no lock, no wait */
	if (off >= size)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
	if (len > (size_t)SSIZE_MAX)
		len = (size_t)SSIZE_MAX;
	int fd = stage_data_get(f, false);
	if (fd < 0)
		return fd;
	size_t done = 0;
	int err = 0;
	while (done < len && !err) {
		ssize_t n = pread(fd, (char *)buf + done, len - done,
				  (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			log_error("stage: read of %zu bytes at %" PRIu64 " from %s/%s: %s",
				  len, off, f->bucket, f->key, strerror(-err));
		}
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	stage_data_put(f);
	return err ? err : (ssize_t)done;
}

uint64_t stage_file_size(struct stage_file *f)
{
	return f->size;              /* atomic: never waits for a lock */
}

bool stage_file_streaming(struct stage_file *f)
{
	mod_lock(&f->lock);
	bool on = f->sm.n_parts > 0 && stage_sm_live(&f->sm);
	mod_unlock(&f->lock);
	return on;
}

bool stage_file_dirty(struct stage_file *f)
{
	return f->dirty;             /* atomic: never waits for a lock */
}

/* The journal on disk is the seal's, and f unchanged since (f->lock). */
bool stage_sealed_locked(const struct stage_file *f)
{
	return f->jsealed && f->js == STAGE_JS_COMMIT;
}

bool stage_file_sealed(struct stage_file *f)
{
	mod_lock(&f->lock);
	bool sealed = stage_sealed_locked(f);
	mod_unlock(&f->lock);
	return sealed;
}

int stage_file_md5(struct stage_file *f, char hex[33])
{
	mod_lock(&f->lock);
	uint64_t size = f->size;
	mod_unlock(&f->lock);
	if (size > f->st->up.part_size && f->st->up.part_size)
		return -EOPNOTSUPP;  /* uploaded in parts: its ETag is no MD5 */
	int fd = stage_data_get(f, false);
	if (fd < 0)
		return fd;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	int err = md && EVP_DigestInit_ex(md, EVP_md5(), NULL) == 1 ? 0 : -ENOMEM;
	static const size_t chunk = 1 << 20;
	char *buf = err ? NULL : malloc(chunk);
	if (!err && !buf)
		err = -ENOMEM;
	for (uint64_t off = 0; !err && off < size;) {
		size_t want = size - off < chunk ? (size_t)(size - off) : chunk;
		ssize_t n = pread(fd, buf, want, (off_t)off);
		if (n <= 0)
			err = n < 0 ? -errno : -EIO;
		else if (EVP_DigestUpdate(md, buf, (size_t)n) != 1)
			err = -EIO;
		else
			off += (uint64_t)n;
	}
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dl = 0;
	if (!err && (EVP_DigestFinal_ex(md, d, &dl) != 1 || dl != 16))
		err = -EIO;
	for (unsigned i = 0; !err && i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	free(buf);
	EVP_MD_CTX_free(md);
	stage_data_put(f);
	return err;
}

/* ---- fsync, park and release ------------------------------------------ */

int stage_file_sync(struct stage_file *f)
{
	mod_lock(&f->lock);
	bool journaled = f->js != STAGE_JS_NONE;
	mod_unlock(&f->lock);
	if (!journaled)
		return 0;    /* nothing written since the last commit */
	int err = stage_data_sync(f);
	if (err)         /* the id only: a rename may swap the names meanwhile */
		log_error("stage: fdatasync of staged file %016" PRIx64 " in %s "
			  "(fsync): %s", f->id, f->st->dir, strerror(-err));
	/* Its journal, written unsynced at the first write, so that the
	 * bytes just synced reach recovered/ after a power loss. Owned:
	 * no other journal write runs meanwhile. */
	mod_lock(&f->lock);
	if (!err && f->js != STAGE_JS_NONE && !f->jsynced &&
	    f->st->durability != STAGE_DURABLE_PROCESS) {
		stage_jnl_own(f);
		if (f->js != STAGE_JS_NONE && !f->jsynced) {
			mod_unlock(&f->lock);
			err = stage_jnl_sync(f->st, f->id);
			mod_lock(&f->lock);
			if (!err)
				f->jsynced = true;
		}
		stage_jnl_disown(f);
	}
	mod_unlock(&f->lock);
	return err ? -EIO : 0;
}

/* f's bytes counted as sealed (n) or no longer (0). f->lock not held. */
void stage_sealed_set(struct stage_file *f, uint64_t n)
{
	struct stage *st = f->st;
	mod_lock(&f->lock);
	uint64_t was = f->sealed;
	f->sealed = n;
	mod_unlock(&f->lock);
	if (was == n)
		return;
	mod_lock(&st->lock);
	st->cnt.sealed_bytes = st->cnt.sealed_bytes - was + n;
	st->cnt.sealed_files = st->cnt.sealed_files - (was != 0) + (n != 0);
	mod_unlock(&st->lock);
}

void stage_file_park(struct stage_file *f)
{
	stage_data_park(f);
}

void stage_file_release(struct stage_file *f)
{
	if (!f)
		return;
	struct stage *st = f->st;
	assert(!f->uploading && !f->n_active);
	stage_sealed_set(f, 0);      /* released: the next start's, if journaled */
	/* Uncommitted streamed parts: abort them (if that fails, the journal
	 * keeps the id for stage_recover). */
	if (stage_stream_drop(f) != 0)
		log_warn("stage: %s/%s released with a streamed upload open",
			 f->bucket, f->key);
	char name[32];
	stage_name(f->id, ".data", name);
	/* Uncommitted data whose staging file went with a removed directory
	 * (stage_dir_renew): only f's descriptor holds them now (a park
	 * keeps such a descriptor; a file parked before the removal has
	 * none: lost). */
	mod_lock(&st->renew_lock);    /* no renewal in between */
	bool orphaned = f->js != STAGE_JS_NONE &&
			faccessat(st->dir_fd, name, F_OK, 0) != 0 && errno == ENOENT;
	mod_lock(&st->lock);
	if (f->prev)
		f->prev->next = f->next;
	else
		st->open = f->next;
	if (f->next)
		f->next->prev = f->prev;
	st->n_open--;
	if (f->js != STAGE_JS_NONE && !orphaned) {
		st->cnt.pending_files++;
		st->pending_bytes += f->size;
	}
	mod_unlock(&st->lock);
	mod_unlock(&st->renew_lock);

	if (orphaned) {
		int fd = stage_data_get(f, false);
		if (fd >= 0) {
			stage_recover_fd(st, f->id, f->bucket, f->key, fd, f->size, NULL);
			stage_data_put(f);
		} else {
			log_error("stage: %s/%s released with uncommitted data (%" PRIu64
				  " bytes) that went with the removed %s: lost", f->bucket,
				  f->key, f->size, st->dir);
		}
		stage_jnl_remove(st, f->id);   /* one written since, if any */
		stage_kept_forget(st, f->id);
		stage_uncharge(st, f->size);
	} else if (f->js == STAGE_JS_NONE) {
		/* (ENOENT: the directory was removed with it: gone all the same) */
		int err = stage_remove_at(st, name);
		if (err && err != -ENOENT)
			log_warn("stage: cannot remove %s/%s: %s", st->dir, name,
				 strerror(-err));
		else
			stage_uncharge(st, f->size);
	} else {
		log_warn("stage: %s/%s released with uncommitted data (%" PRIu64
			 " bytes); kept as %s/%s for recovery", f->bucket, f->key,
			 f->size, st->dir, name);
		stage_kept_release(st, f->id);
	}
	stage_file_free(f);
}

/* ---- the version a file is based on ----------------------------------- */

void stage_file_set_base(struct stage_file *f, const char *etag)
{
	mod_lock(&f->lock);
	f->has_base = etag != NULL;
	snprintf(f->base, sizeof f->base, "%s", etag ? etag : "");
	mod_unlock(&f->lock);
}
