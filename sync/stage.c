/*
 * stage.c — staged files: writes, reads, the byte budget and the commit
 * (upload whole). Journal I/O and crash recovery are in stage_journal.c.
 *
 * State of one file (f->lock): `dirty` says the next commit uploads;
 * `uploading` says a commit owns the file: writers (pwrite, truncate,
 * set_meta, rename) wait on f->cond until it clears, so the bytes, size and
 * metadata cannot change during an upload and the fields may be read
 * without the lock by the owner. `n_active` counts pwrites running outside
 * the lock; a commit (and a truncate) waits for it to reach 0.
 * Transitions: stage_file_new -> dirty; stage_file_fill -> clean;
 * a write -> dirty (journal "dirty" first); stage_file_commit -> journal
 * "commit", upload, then clean and journal removed, or dirty on failure.
 * The streamed upload of a file (f->sm) is fed after each write and
 * finished or given up by the commit: stage_stream.c.
 */
#include "sync/stage_int.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file.h"
#include "common/log.h"
#include "common/s3.h"

#define FILL_CHUNK (8u << 20)

/* ---- the stage -------------------------------------------------------- */

static int charge(struct stage *st, uint64_t n)
{
	int err = 0;
	pthread_mutex_lock(&st->lock);
	if (st->used > st->max_bytes || n > st->max_bytes - st->used) {
		/* (used may be past max: a smaller budget at a start that
		 * found more staged; then nothing fits) */
		st->cnt.enospc++;
		err = -ENOSPC;
	} else {
		st->used += n;
	}
	pthread_mutex_unlock(&st->lock);
	if (err == 0 && n && st->grew)
		st->grew(st->grew_ctx);
	return err;
}

void stage_uncharge(struct stage *st, uint64_t n)
{
	pthread_mutex_lock(&st->lock);
	assert(st->used >= n);
	st->used -= n;
	pthread_mutex_unlock(&st->lock);
}

static void count_efbig(struct stage *st)
{
	pthread_mutex_lock(&st->lock);
	st->cnt.efbig++;
	pthread_mutex_unlock(&st->lock);
}

int stage_dir_open(struct stage *st, DIR **out)
{
	int dfd = openat(st->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	*out = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (*out)
		return 0;
	int err = -errno;
	if (dfd >= 0)
		close(dfd);
	return err;
}

/* Charges what is already staged and finds the next free id. */
static int stage_scan(struct stage *st)
{
	DIR *d;
	int err = stage_dir_open(st, &d);
	if (err)
		return err;
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		uint64_t id = strtoull(de->d_name, &end, 16);
		if (end != de->d_name + 16)
			continue;
		if (id >= st->next_id)
			st->next_id = id + 1;
		struct stat sb;
		if (strcmp(end, ".data") == 0 &&
		    fstatat(st->dir_fd, de->d_name, &sb, 0) == 0)
			st->used += (uint64_t)sb.st_size;
		char dn[32];
		if (strcmp(end, ".jnl") == 0) {
			st->cnt.pending_files++;
			stage_name(id, ".data", dn);
			if (fstatat(st->dir_fd, dn, &sb, 0) == 0)
				st->pending_bytes += (uint64_t)sb.st_size;
		}
	}
	closedir(d);
	return 0;
}

/* mkdir -p path, then open it. */
static int open_dir(const char *path, int *fd)
{
	int err = file_mkdir_p(path, 0700);
	if (err)
		return err;
	*fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return *fd < 0 ? -errno : 0;
}

int stage_dir_renew(struct stage *st)
{
	pthread_mutex_lock(&st->renew_lock);
	struct stat sb;
	int err = 0, dfd = -1, rfd = -1;
	if (fstat(st->dir_fd, &sb) == 0 && sb.st_nlink > 0)
		goto out;                    /* there (renewed meanwhile) */
	if (st->n_renewed == STAGE_RENEW_MAX) {
		err = -ENOENT;
		goto out;
	}
	err = open_dir(st->dir, &dfd);
	if (!err)
		err = open_dir(st->rec_dir, &rfd);
	if (err) {
		if (dfd >= 0)
			close(dfd);
		log_error("stage: %s was removed while in use and cannot be made "
			  "again: %s", st->dir, strerror(-err));
		goto out;
	}
	st->retired[2 * st->n_renewed] = atomic_exchange(&st->dir_fd, dfd);
	st->retired[2 * st->n_renewed + 1] = atomic_exchange(&st->rec_fd, rfd);
	st->n_renewed++;
	/* Files released with uncommitted data went with the directory. */
	pthread_mutex_lock(&st->lock);
	uint64_t lost = st->pending_bytes < st->used ? st->pending_bytes : st->used;
	uint64_t lost_files = st->cnt.pending_files;
	st->used -= lost;
	st->pending_bytes = 0;
	st->cnt.pending_files = 0;
	pthread_mutex_unlock(&st->lock);
	if (lost_files)
		log_error("stage: %" PRIu64 " staged files released with uncommitted "
			  "data (%" PRIu64 " bytes) went with the removed %s", lost_files,
			  lost, st->dir);
	log_warn("stage: %s was removed while in use: made again; files open at "
		 "that moment keep their data in their descriptors only (their "
		 "commits still upload it; a crash before would lose it)", st->dir);
	if (stage_durability_open(st) != 0)
		log_warn("stage: cannot write the durability file in %s", st->dir);
	if (st->renewed)
		st->renewed(st->grew_ctx);
out:
	pthread_mutex_unlock(&st->renew_lock);
	return err;
}

int stage_create_at(struct stage *st, const char *name, int flags)
{
	int fd = openat(st->dir_fd, name, flags | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 && errno == ENOENT && stage_dir_renew(st) == 0)
		fd = openat(st->dir_fd, name, flags | O_CREAT | O_CLOEXEC, 0600);
	return fd < 0 ? -errno : fd;
}

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
	pthread_mutex_init(&st->renew_lock, NULL);
	pthread_mutex_init(&st->kept_io, NULL);
	st->max_bytes = conf->max_bytes;
	st->grew = conf->grew;
	st->renewed = conf->renewed;
	st->grew_ctx = conf->grew_ctx;
	st->max_object = conf->max_object ? conf->max_object : STAGE_MAX_OBJECT;
	st->durability = conf->durability;
	st->up = conf->up;
	st->s3 = conf->s3;
	st->stream_off = conf->stream_off;
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
	int dfd = -1, rfd = -1;
	err = open_dir(st->dir, &dfd);
	st->dir_fd = dfd;
	if (!err)
		err = open_dir(st->rec_dir, &rfd);
	st->rec_fd = rfd;
	if (!err)
		err = stage_scan(st);
	if (!err)
		err = stage_durability_open(st);
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
	stage_kept_free_all(st);
	pthread_mutex_destroy(&st->pool.lock);
	pthread_cond_destroy(&st->pool.cond);
	if (st->dir_fd >= 0)
		close(st->dir_fd);
	if (st->rec_fd >= 0)
		close(st->rec_fd);
	for (unsigned i = 0; i < 2 * st->n_renewed; i++)
		if (st->retired[i] >= 0)
			close(st->retired[i]);
	pthread_mutex_destroy(&st->renew_lock);
	pthread_mutex_destroy(&st->kept_io);
	pthread_mutex_destroy(&st->lock);
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
	pthread_mutex_lock(&st->lock);
	*out = st->cnt;
	out->used_bytes = st->used;
	out->max_bytes = st->max_bytes;
	out->open_files = 0;
	for (struct stage_file *f = st->open; f; f = f->next)
		out->open_files++;
	pthread_mutex_unlock(&st->lock);
}

/* ---- one staged file -------------------------------------------------- */

static void file_free(struct stage_file *f)
{
	stage_stream_free(f);
	if (f->fd >= 0)
		close(f->fd);
	free(f->bucket);
	free(f->key);
	free(f->ctype);
	obj_kv_free(f->meta, f->n_meta);
	stage_intent_clear(&f->intent);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
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
	f->fd = -1;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	int err = 0;
	f->bucket = obj_strdup_opt(bucket, &err);
	f->key = obj_strdup_opt(key, &err);
	f->ctype = obj_strdup_opt(content_type, &err);
	if (!err)
		err = obj_kv_copy(&f->meta, &f->n_meta, meta, n_meta);
	if (err)
		goto fail;
	f->dirty = true;
	pthread_mutex_lock(&st->lock);
	f->id = st->next_id++;
	st->files_made = true;
	pthread_mutex_unlock(&st->lock);
	char name[32];
	stage_name(f->id, ".data", name);
	f->fd = stage_create_at(st, name, O_RDWR | O_EXCL);
	if (f->fd < 0) {
		err = f->fd;
		log_error("stage: cannot create %s/%s for %s/%s: %s", st->dir, name,
			  bucket, key, strerror(-err));
		goto fail;
	}
	pthread_mutex_lock(&st->lock);
	f->next = st->open;
	if (st->open)
		st->open->prev = f;
	st->open = f;
	pthread_mutex_unlock(&st->lock);
	*out = f;
	return 0;
fail:
	file_free(f);
	return err;
}

static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;
	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int stage_file_fill(struct stage_file *f, const char *bucket, const char *key,
		    uint64_t size, const char *etag)
{
	struct stage *st = f->st;
	assert(f->size == 0 && !f->uploading && f->js == STAGE_JS_NONE);
	if (size > st->max_object) {
		count_efbig(st);
		log_error("stage: %s/%s is %" PRIu64 " bytes, over the %" PRIu64
			  "-byte single-PUT limit: cannot be written", f->bucket,
			  f->key, size, st->max_object);
		return -EFBIG;
	}
	int err = charge(st, size);
	if (err)
		return err;
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
			err = pwrite_all(f->fd, buf, want, off);
		off += want;
	}
	free(buf);
	if (err) {
		if (ftruncate(f->fd, 0) != 0)
			log_error("stage: %s/%s: cannot empty staged file: %s",
				  f->bucket, f->key, strerror(errno));
		stage_uncharge(st, size);
		return err;
	}
	pthread_mutex_lock(&f->lock);
	f->size = size;
	f->dirty = false;
	snprintf(f->etag, sizeof f->etag, "%s", etag ? etag : "");
	pthread_mutex_unlock(&f->lock);
	return 0;
}

void stage_file_oneshot(struct stage_file *f)
{
	pthread_mutex_lock(&f->lock);
	f->oneshot = true;
	pthread_mutex_unlock(&f->lock);
}

/* Whether f is still one-shot: under one part (one PUT, no stream, so no
 * upload id to journal). f->lock held. */
static bool oneshot_locked(struct stage_file *f)
{
	if (f->oneshot && f->size >= upload_part_size(&f->st->up, f->size))
		f->oneshot = false;
	return f->oneshot;
}

/* Journal the file as "dirty" unless it already is (force: rewrite it, the
 * metadata or name changed), or it is one-shot. f->lock held. */
static int mark_dirty_locked(struct stage_file *f, bool force)
{
	if (oneshot_locked(f)) {
		f->dirty = true;
		return 0;
	}
	if (f->js != STAGE_JS_DIRTY || force) {
		struct stage_jnl j = {
			.state = STAGE_JS_DIRTY, .size = f->size,
			.bucket = f->bucket, .key = f->key, .ctype = f->ctype,
			.meta = f->meta, .n_meta = f->n_meta,
			.upload_id = f->sm.id, .upload_bucket = f->sm.bucket,
			.upload_key = f->sm.key, .intent = f->intent,
		};
		int err = stage_jnl_write(f->st, f->id, &j, f->js != STAGE_JS_NONE);
		if (err)
			return err;
		f->js = STAGE_JS_DIRTY;
	}
	f->dirty = true;
	return 0;
}

/* Lock f and wait until no commit owns it (and, if idle, no pwrite runs). */
static void writer_lock(struct stage_file *f, bool idle)
{
	pthread_mutex_lock(&f->lock);
	while (f->uploading || (idle && f->n_active))
		pthread_cond_wait(&f->cond, &f->lock);
}

ssize_t stage_file_pwrite(struct stage_file *f, const void *buf, size_t len,
			  uint64_t off)
{
	struct stage *st = f->st;
	if (len == 0)
		return 0;
	if (len > (size_t)SSIZE_MAX || off > st->max_object ||
	    len > st->max_object - off) {
		count_efbig(st);
		return -EFBIG;
	}
	uint64_t end = off + len;
	writer_lock(f, false);
	uint64_t old = f->size;
	int err = end > old ? charge(st, end - old) : 0;
	if (!err && end > old)
		f->size = end;
	if (!err) {
		err = mark_dirty_locked(f, false);
		if (err && end > old) {
			f->size = old;
			stage_uncharge(st, end - old);
		}
	}
	if (err) {
		pthread_mutex_unlock(&f->lock);
		return err;
	}
	stage_stream_touch(f, off);
	f->n_active++;
	pthread_mutex_unlock(&f->lock);

	err = pwrite_all(f->fd, buf, len, off);

	pthread_mutex_lock(&f->lock);
	if (err) {
		/* The file must stay as long as f->size says (holes read 0). */
		log_error("stage: write of %zu bytes at %" PRIu64 " to %s/%s: %s",
			  len, off, f->bucket, f->key, strerror(-err));
		struct stat sb;
		if (fstat(f->fd, &sb) == 0 && (uint64_t)sb.st_size < f->size &&
		    ftruncate(f->fd, (off_t)f->size) != 0)
			err = -EIO;
	}
	if (--f->n_active == 0) {
		pthread_cond_broadcast(&f->cond);
		stage_stream_feed(f);    /* every byte below f->size is written */
	}
	pthread_mutex_unlock(&f->lock);
	return err ? err : (ssize_t)len;
}

ssize_t stage_file_pread(struct stage_file *f, void *buf, size_t len,
			 uint64_t off)
{
	pthread_mutex_lock(&f->lock);
	uint64_t size = f->size;
	pthread_mutex_unlock(&f->lock);
	if (off >= size)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
	if (len > (size_t)SSIZE_MAX)
		len = (size_t)SSIZE_MAX;
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(f->fd, (char *)buf + done, len - done,
				  (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = -errno;
			log_error("stage: read of %zu bytes at %" PRIu64 " from %s/%s: %s",
				  len, off, f->bucket, f->key, strerror(-err));
			return err;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

int stage_file_truncate(struct stage_file *f, uint64_t size)
{
	struct stage *st = f->st;
	if (size > st->max_object) {
		count_efbig(st);
		return -EFBIG;
	}
	writer_lock(f, true);
	uint64_t old = f->size;
	int err = size > old ? charge(st, size - old) : 0;
	bool charged = !err && size > old;
	if (!err)
		err = mark_dirty_locked(f, false);
	if (!err)
		stage_stream_touch(f, size);
	if (!err && ftruncate(f->fd, (off_t)size) != 0) {
		err = -errno;
		log_error("stage: truncate of %s/%s to %" PRIu64 ": %s", f->bucket,
			  f->key, size, strerror(-err));
	}
	if (err) {
		if (charged)
			stage_uncharge(st, size - old);
	} else {
		if (size < old)
			stage_uncharge(st, old - size);
		f->size = size;
	}
	pthread_mutex_unlock(&f->lock);
	return err;
}

uint64_t stage_file_size(struct stage_file *f)
{
	pthread_mutex_lock(&f->lock);
	uint64_t s = f->size;
	pthread_mutex_unlock(&f->lock);
	return s;
}

bool stage_file_streaming(struct stage_file *f)
{
	pthread_mutex_lock(&f->lock);
	bool on = f->sm.n_parts > 0 && !f->sm.broken && !f->sm.err;
	pthread_mutex_unlock(&f->lock);
	return on;
}

bool stage_file_dirty(struct stage_file *f)
{
	pthread_mutex_lock(&f->lock);
	bool d = f->dirty;
	pthread_mutex_unlock(&f->lock);
	return d;
}

/* Swap the strings/arrays of f with the ones given; used to try a change,
 * journal it, and swap back if the journal failed. */
static void swap_ptr(char **a, char **b)
{
	char *t = *a;
	*a = *b;
	*b = t;
}

/* journal: rewrite the journal now (set_meta), or leave it to the commit
 * that follows (set_commit_meta). */
static int set_meta(struct stage_file *f, const struct obj_kv *meta,
		    size_t n_meta, const char *content_type, bool journal)
{
	struct obj_kv *kv;
	size_t n;
	int err = obj_kv_copy(&kv, &n, meta, n_meta);
	char *ct = obj_strdup_opt(content_type, &err);
	if (err) {
		obj_kv_free(kv, n);
		free(ct);
		return err;
	}
	writer_lock(f, false);
	struct obj_kv *okv = f->meta;
	size_t on = f->n_meta;
	f->meta = kv;
	f->n_meta = n;
	swap_ptr(&f->ctype, &ct);
	if (!stage_stream_same_meta(f, f->meta, f->n_meta, f->ctype))
		stage_stream_break(f, "metadata changed");
	if (journal)
		err = mark_dirty_locked(f, true);
	else
		f->dirty = true;
	if (err) {
		f->meta = okv;
		f->n_meta = on;
		swap_ptr(&f->ctype, &ct);
		okv = kv;
		on = n;
	}
	pthread_mutex_unlock(&f->lock);
	obj_kv_free(okv, on);
	free(ct);
	return err;
}

int stage_file_set_meta(struct stage_file *f, const struct obj_kv *meta,
			size_t n_meta, const char *content_type)
{
	return set_meta(f, meta, n_meta, content_type, true);
}

int stage_file_set_commit_meta(struct stage_file *f, const struct obj_kv *meta,
			       size_t n_meta, const char *content_type)
{
	return set_meta(f, meta, n_meta, content_type, false);
}

int stage_file_rename(struct stage_file *f, const char *bucket, const char *key)
{
	if (!bucket || !*bucket || !key || !*key)
		return -EINVAL;
	int err = 0;
	char *b = obj_strdup_opt(bucket, &err), *k = obj_strdup_opt(key, &err);
	if (!err) {
		writer_lock(f, false);
		swap_ptr(&f->bucket, &b);
		swap_ptr(&f->key, &k);
		if (!stage_stream_same_name(f, f->bucket, f->key))
			stage_stream_break(f, "renamed");
		err = mark_dirty_locked(f, true);
		if (err) {
			swap_ptr(&f->bucket, &b);
			swap_ptr(&f->key, &k);
		}
		pthread_mutex_unlock(&f->lock);
	}
	free(b);
	free(k);
	return err;
}

/* upload_file for a commit, counted, a failure logged: 0 or its error.
 * No hooks: a one-shot file, whose data is not kept after a failure (its
 * release deletes it). */
static int upload_counted(struct stage_file *f, uint64_t size,
			  const struct upload_hooks *hooks, char etag[72])
{
	struct stage *st = f->st;
	int err = upload_file(st->s3, &st->up, f->bucket, f->key, f->fd, size,
			      f->meta, f->n_meta, f->ctype, hooks, etag);
	pthread_mutex_lock(&st->lock);
	if (err) {
		st->cnt.upload_errors++;
	} else {
		st->cnt.uploads++;
		st->cnt.upload_bytes += size;
	}
	pthread_mutex_unlock(&st->lock);
	if (err && hooks)
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
	return !err || err == -EFBIG ? err : -EIO;
}

/* The upload of a commit that owns f (f->uploading): data durable (under
 * POWER), journal "commit", PUT, journal removed. A one-shot file under
 * one part, never journaled: the PUT alone (no hooks: one PUT creates no
 * multipart upload). */
static int commit_upload(struct stage_file *f, uint64_t size, char etag[72])
{
	struct stage *st = f->st;
	pthread_mutex_lock(&f->lock);
	bool quick = oneshot_locked(f) && f->js == STAGE_JS_NONE;
	pthread_mutex_unlock(&f->lock);
	if (quick)
		return commit_error(upload_counted(f, size, NULL, etag));
	int err = stage_sync(st, f->fd, true);
	if (err) {
		log_error("stage: fdatasync of %s/%s before upload: %s", f->bucket,
			  f->key, strerror(-err));
		return -EIO;
	}
	/* The commit owns f: no other thread changes what j borrows. */
	pthread_mutex_lock(&f->lock);
	struct stage_jnl j = {
		.state = STAGE_JS_COMMIT, .size = size,
		.bucket = f->bucket, .key = f->key, .ctype = f->ctype,
		.meta = f->meta, .n_meta = f->n_meta, .intent = f->intent,
	};
	err = stage_jnl_write(st, f->id, &j, f->js != STAGE_JS_NONE);
	if (!err)
		f->js = STAGE_JS_COMMIT;
	j.intent = (struct stage_intent){ 0 };
	pthread_mutex_unlock(&f->lock);
	if (err)
		return -EIO;

	/* An intent journaled before a multipart upload is created, its id
	 * once it exists (stage_orphans.c). */
	struct jnl_started js = { .st = st, .id = f->id, .j = &j, .f = f };
	struct upload_hooks hooks = { .creating = stage_jnl_creating,
				      .started = stage_jnl_started,
				      .abandoned = stage_jnl_abandoned, .ctx = &js };
	err = upload_counted(f, size, &hooks, etag);
	if (err) {
		pthread_mutex_lock(&f->lock);
		bool had = f->intent.ns != 0;
		stage_intent_refused(&f->intent, js.fresh, err);
		if (had && !f->intent.ns)
			stage_jnl_intent_drop(st, f->id);
		pthread_mutex_unlock(&f->lock);
	}
	stage_jnl_hooks_done(&js);
	if (err)
		return commit_error(err);
	stage_commit_unjournal(f);
	return 0;
}

void stage_commit_unjournal(struct stage_file *f)
{
	pthread_mutex_lock(&f->lock);
	struct stage_intent left = f->intent;
	f->intent = (struct stage_intent){ 0 };
	pthread_mutex_unlock(&f->lock);
	if (left.ns)
		stage_orphans_defer(f->st, &left);    /* logs a failure */
	stage_intent_clear(&left);
	if (stage_jnl_remove(f->st, f->id) != 0)
		log_warn("stage: %s/%s uploaded, but its journal remains: a "
			 "recovery would upload it again", f->bucket, f->key);
}

/* A commit that fails before its upload (a streamed part or creation
 * failed, or aborting the stream did): "commit" is journaled all the same,
 * naming the upload if one is still open, so that the next start uploads
 * the data as after any failed commit, and it counts as the key's newest.
 * If the data cannot be made durable first it stays "dirty" (moved to
 * recovered/ at the next start). The commit owns f. */
static void commit_journal_failed(struct stage_file *f, uint64_t size)
{
	struct stage *st = f->st;
	if (stage_sync(st, f->fd, true) != 0)
		return;
	pthread_mutex_lock(&f->lock);
	struct stage_jnl j = {
		.state = STAGE_JS_COMMIT, .size = size,
		.bucket = f->bucket, .key = f->key, .ctype = f->ctype,
		.meta = f->meta, .n_meta = f->n_meta, .upload_id = f->sm.id,
		.upload_bucket = f->sm.bucket, .upload_key = f->sm.key,
		.intent = f->intent,
	};
	if (stage_jnl_write(st, f->id, &j, f->js != STAGE_JS_NONE) == 0)
		f->js = STAGE_JS_COMMIT;
	pthread_mutex_unlock(&f->lock);
}

int stage_file_sync(struct stage_file *f)
{
	pthread_mutex_lock(&f->lock);
	bool journaled = f->js != STAGE_JS_NONE;
	pthread_mutex_unlock(&f->lock);
	if (!journaled)
		return 0;    /* nothing written since the last commit */
	int err = stage_sync(f->st, f->fd, true);
	if (err)         /* the id only: a rename may swap the names meanwhile */
		log_error("stage: fdatasync of staged file %016" PRIx64 " in %s "
			  "(fsync): %s", f->id, f->st->dir, strerror(-err));
	return err ? -EIO : 0;
}

int stage_file_commit(struct stage_file *f, char etag_out[72])
{
	struct stage *st = f->st;
	char etag[72] = "";
	pthread_mutex_lock(&f->lock);
	while (f->uploading)
		pthread_cond_wait(&f->cond, &f->lock);
	if (!f->dirty) {
		/* Nothing written since the last upload (or fill). */
		if (etag_out)
			snprintf(etag_out, 72, "%s", f->etag);
		pthread_mutex_unlock(&f->lock);
		return 0;
	}
	f->uploading = true;
	while (f->n_active || (f->sm.inflight && !f->sm.id))
		pthread_cond_wait(&f->cond, &f->lock);    /* writes, a creation */
	char *c_bucket = strdup(f->bucket), *c_key = strdup(f->key);
	uint64_t size = f->size;
	const struct stage_stream *sm = &f->sm;
	bool stream = sm->id && !sm->broken && !sm->err;
	bool failed = sm->err && !sm->broken;
	bool drop = !stream && (sm->id || sm->n_parts);
	pthread_mutex_unlock(&f->lock);

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
		count_efbig(st);
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
			pthread_mutex_lock(&st->lock);
			st->cnt.upload_errors++;
			pthread_mutex_unlock(&st->lock);
			err = -EIO;
		}
		if (err)
			commit_journal_failed(f, size);
		else
			err = commit_upload(f, size, etag);
	}

	pthread_mutex_lock(&f->lock);
	f->uploading = false;
	/* A failed commit that journaled "commit" waits for a retry or the
	 * next start (stage_kept.c). */
	bool kept = err && f->js == STAGE_JS_COMMIT;
	if (!err) {
		f->dirty = false;
		f->oneshot = false;
		f->js = STAGE_JS_NONE;
		if (!f->sm.id && !f->sm.n_parts)
			f->sm.broken = false;    /* the next writes may stream */
		snprintf(f->etag, sizeof f->etag, "%s", etag);
		if (etag_out)
			snprintf(etag_out, 72, "%s", etag);
	}
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	if (!kept)          /* in S3, or not journaled "commit": nothing waits */
		stage_kept_forget(st, f->id);
	free(c_bucket);
	free(c_key);
	return err;
}

void stage_file_release(struct stage_file *f)
{
	if (!f)
		return;
	struct stage *st = f->st;
	assert(!f->uploading && !f->n_active);
	/* Uncommitted streamed parts: abort them (if that fails, the journal
	 * keeps the id for stage_recover). */
	if (stage_stream_drop(f) != 0)
		log_warn("stage: %s/%s released with a streamed upload open",
			 f->bucket, f->key);
	char name[32];
	stage_name(f->id, ".data", name);
	/* Uncommitted data whose staging file went with a removed directory
	 * (stage_dir_renew): only f->fd holds them now. */
	pthread_mutex_lock(&st->renew_lock);    /* no renewal in between */
	bool orphaned = f->js != STAGE_JS_NONE &&
			faccessat(st->dir_fd, name, F_OK, 0) != 0 && errno == ENOENT;
	pthread_mutex_lock(&st->lock);
	if (f->prev)
		f->prev->next = f->next;
	else
		st->open = f->next;
	if (f->next)
		f->next->prev = f->prev;
	if (f->js != STAGE_JS_NONE && !orphaned) {
		st->cnt.pending_files++;
		st->pending_bytes += f->size;
	}
	pthread_mutex_unlock(&st->lock);
	pthread_mutex_unlock(&st->renew_lock);

	if (orphaned) {
		stage_recover_fd(st, f->id, f->bucket, f->key, f->fd, f->size);
		stage_jnl_remove(st, f->id);   /* one written since, if any */
		stage_kept_forget(st, f->id);
		stage_uncharge(st, f->size);
	} else if (f->js == STAGE_JS_NONE) {
		/* (ENOENT: the directory was removed with it: gone all the same) */
		if (unlinkat(st->dir_fd, name, 0) != 0 && errno != ENOENT)
			log_warn("stage: cannot remove %s/%s: %s", st->dir, name,
				 strerror(errno));
		else
			stage_uncharge(st, f->size);
	} else {
		log_warn("stage: %s/%s released with uncommitted data (%" PRIu64
			 " bytes); kept as %s/%s for recovery", f->bucket, f->key,
			 f->size, st->dir, name);
		stage_kept_release(st, f->id);
	}
	file_free(f);
}
