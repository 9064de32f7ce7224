/*
 * stage_write.c — what changes an open staged file: its writes (from
 * memory or from a pipe), truncate, its metadata and its name, each
 * journaled "dirty" first unless the journal says so already (op_begin,
 * journal_dirty). Calls stage.c and the files below it (stage_int.h).
 *
 * State of one file (f->lock): `dirty` says the next commit uploads;
 * `uploading` says a commit owns the file: writers (pwrite, truncate,
 * set_meta, rename) wait on f->cond until it clears, so the bytes, size and
 * metadata cannot change during an upload and the fields may be read
 * without the lock by the owner. `n_active` counts operations running with
 * the lock dropped (a pwrite's data, a journal being written); a commit
 * (and a truncate) waits for it to reach 0. `size` and `dirty` are atomic,
 * so a stat or a read never takes f->lock. A journal is written by its
 * owner (`jbusy`, stage_jnl_own) with f->lock dropped: no lock a stat,
 * read or write waits for is held across its write and syncs.
 * The transitions of a file's journal, and the function making each, are
 * in docs/design.md ("A staged file's life"). The streamed upload of a
 * file (f->sm) is fed once no write runs (op_end, stage_stream.c) and
 * broken by a write below the bytes given to parts, a metadata change or
 * a rename.
 */
#include "sync/stage/stage_int.h"

#include "common/file.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/lock.h"
#include "common/log.h"

/* ---- an operation and its journal ------------------------------------- */

/* What an operation changing f journals before it changes it. */
enum op_journal {
	OP_NO_JOURNAL,    /* nothing (the commit that follows journals it) */
	OP_DIRTY,         /* "dirty", unless it already is */
	OP_REWRITE,       /* "dirty" again: the metadata or name changed */
};

/* Whether the operation (making f end bytes long, 0: no size change)
 * must write the journal now: never for a one-shot file. f->lock held. */
static bool journal_wanted(struct stage_file *f, enum op_journal how, uint64_t end)
{
	if (how == OP_NO_JOURNAL || stage_oneshot_locked(f, end))
		return false;
	return how == OP_REWRITE || f->js != STAGE_JS_DIRTY;
}

/* Lock f and wait until no commit owns it, and (idle) no pwrite runs, and
 * the operation (making f end bytes long; 0: no size change) can own the
 * journal if it needs to write it;
 * then count the operation in n_active (a commit waits for it) and, when
 * it must journal "dirty", make it the journal's owner. Returns whether it
 * owns the journal (the caller then calls journal_dirty and op_end). */
static bool op_begin(struct stage_file *f, bool idle, enum op_journal how,
		     uint64_t end)
{
	mod_lock(&f->lock);
	for (;;) {
		bool want = journal_wanted(f, how, end);
		if (!f->uploading && !(idle && f->n_active) && !(want && f->jbusy)) {
			if (want)
				f->jbusy = true;
			f->n_active++;
			/* A rename or a metadata change of a sealed file
			 * keeps the seal's promise: "commit" again under the
			 * new name or metadata (its bytes are the sealed
			 * ones); anything else ends it. */
			f->jreseal = want && how == OP_REWRITE && f->jsealed &&
				     f->js == STAGE_JS_COMMIT;
			if (!f->jreseal)
				f->jsealed = false;
			return want;
		}
		pthread_cond_wait(&f->cond, &f->lock);
	}
}

/* The operation began by op_begin ends (f->lock held, and dropped here):
 * its journal ownership, if any, and its count go. wrote: it wrote bytes;
 * once no operation runs, the stream is fed those (only after writes, as
 * a stream's parts are bytes written, not renames or metadata). */
static void op_end(struct stage_file *f, bool owned, bool wrote)
{
	if (owned)
		stage_jnl_disown(f);
	f->unfed |= wrote;
	if (--f->n_active == 0) {
		pthread_cond_broadcast(&f->cond);
		if (f->unfed) {
			f->unfed = false;
			stage_stream_feed(f);    /* every byte below f->size is written */
		}
	}
	mod_unlock(&f->lock);
}

/* Journal f "dirty" as it stands now (its owner: op_begin said so): the
 * text is made under f->lock, written and synced with it dropped
 * (stage_jnl_put_file). Stat, read and other writes of f do not wait for
 * that I/O; a write that needs the journal too waits for its owner. */
static int journal_dirty(struct stage_file *f)
{
	bool reseal = f->jreseal;
	f->jreseal = false;
	int err = stage_jnl_file(f, reseal ? STAGE_JS_COMMIT : STAGE_JS_DIRTY, f->size,
				 true, NULL);
	if (err && reseal)
		f->jsealed = false;      /* the journal on disk may be gone */
	return err;
}

/* ---- writes and truncate ---------------------------------------------- */

/* Where the bytes of a write come from: memory, or a pipe holding them. */
struct wsrc {
	const void *buf;     /* the bytes, when pipe_fd < 0 */
	int pipe_fd;         /* >= 0: the pipe they are in */
};

/* Puts the len bytes of src into the staged file fd at off: 0 or -errno. */
static int wsrc_put(const struct wsrc *src, int fd, size_t len, uint64_t off)
{
	return src->pipe_fd < 0 ? file_pwrite_all(fd, src->buf, len, off)
				: file_splice_all(src->pipe_fd, fd, len, off);
}

/* stage_file_pwrite and stage_file_pwrite_pipe: the same write, whatever
 * src its bytes come from. */
static ssize_t file_write(struct stage_file *f, const struct wsrc *src,
			  size_t len, uint64_t off)
{
	struct stage *st = f->st;
	if (len == 0)
		return 0;
	if (len > (size_t)SSIZE_MAX || off > st->max_object ||
	    len > st->max_object - off) {
		stage_count_efbig(st);
		return -EFBIG;
	}
	uint64_t end = off + len;
	if (end > f->size)
		stage_room_wait(st, end - f->size);
	int fd = stage_data_get(f, true);
	if (fd < 0)
		return fd;
	bool owned = op_begin(f, false, OP_DIRTY, end);
	int err = owned ? journal_dirty(f) : 0;
	uint64_t grew = 0;
	if (!err && end > f->size) {
		grew = end - f->size;
		err = stage_charge(st, grew);
		if (!err)
			f->size = end;
	}
	if (err) {
		op_end(f, owned, false);
		stage_data_put(f);
		return err;
	}
	f->dirty = true;
	stage_stream_touch(f, off);
	if (owned) {                 /* other writers may go on meanwhile */
		stage_jnl_disown(f);
		owned = false;
	}
	mod_unlock(&f->lock);
	if (grew)
		stage_grown(st);

	err = wsrc_put(src, fd, len, off);
	if (!err)
		stage_kick(st, fd, off, end);

	mod_lock(&f->lock);
	if (err) {
		/* The file must stay as long as f->size says (holes read 0). */
		log_error("stage: write of %zu bytes at %" PRIu64 " to %s/%s: %s",
			  len, off, f->bucket, f->key, strerror(-err));
		struct stat sb;
		if (fstat(fd, &sb) == 0 && (uint64_t)sb.st_size < f->size &&
		    ftruncate(fd, (off_t)f->size) != 0)
			err = -EIO;
	}
	op_end(f, false, true);
	stage_data_put(f);
	return err ? err : (ssize_t)len;
}

ssize_t stage_file_pwrite(struct stage_file *f, const void *buf, size_t len,
			  uint64_t off)
{
	struct wsrc src = { .buf = buf, .pipe_fd = -1 };
	return file_write(f, &src, len, off);
}

ssize_t stage_file_pwrite_pipe(struct stage_file *f, int pipe_fd, size_t len,
			       uint64_t off)
{
	if (pipe_fd < 0)
		return -EBADF;
	struct wsrc src = { .buf = NULL, .pipe_fd = pipe_fd };
	return file_write(f, &src, len, off);
}

int stage_file_truncate(struct stage_file *f, uint64_t size)
{
	struct stage *st = f->st;
	if (size > st->max_object) {
		stage_count_efbig(st);
		return -EFBIG;
	}
	if (size > f->size)
		stage_room_wait(st, size - f->size);
	int fd = stage_data_get(f, true);
	if (fd < 0)
		return fd;
	/* Idle: no pwrite in flight. While this one owns the journal no
	 * pwrite begins either (all want the journal: it is not "dirty"). */
	bool owned = op_begin(f, true, OP_DIRTY, size);
	int err = owned ? journal_dirty(f) : 0;
	uint64_t old = f->size;
	bool charged = false;
	if (!err && size > old) {
		err = stage_charge(st, size - old);
		charged = !err;
	}
	if (!err)
		stage_stream_touch(f, size);
	/* (ftruncate under f->lock: it is not a sync, and stat and read
	 * take no lock of the file) */
	if (!err && ftruncate(fd, (off_t)size) != 0) {
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
		f->dirty = true;
	}
	op_end(f, owned, false);
	stage_data_put(f);
	if (charged && !err)
		stage_grown(st);
	return err;
}

/* ---- metadata and name ------------------------------------------------ */

/* Swap the strings/arrays of f with the ones given; used to try a change,
 * journal it, and swap back if the journal failed. */
static void swap_ptr(char **a, char **b)
{
	char *t = *a;
	*a = *b;
	*b = t;
}

/* Sets f's metadata and content type (how: OP_REWRITE journals them now,
 * OP_NO_JOURNAL leaves that to the commit that follows). The change is
 * made before the journal is written with f->lock dropped (a commit waits
 * for this operation; a stream begun meanwhile copies the new metadata)
 * and undone if the journal fails. */
static int set_meta(struct stage_file *f, const struct obj_kv *meta,
		    size_t n_meta, const char *content_type, enum op_journal how)
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
	bool owned = op_begin(f, false, how, 0);
	struct obj_kv *okv = f->meta;
	size_t on = f->n_meta;
	f->meta = kv;
	f->n_meta = n;
	swap_ptr(&f->ctype, &ct);
	if (!stage_stream_same_meta(f, f->meta, f->n_meta, f->ctype))
		stage_stream_break(f, "metadata changed");
	if (owned)
		err = journal_dirty(f);
	if (err) {
		f->meta = okv;
		f->n_meta = on;
		swap_ptr(&f->ctype, &ct);
		okv = kv;
		on = n;
		if (!stage_stream_same_meta(f, f->meta, f->n_meta, f->ctype))
			stage_stream_break(f, "metadata changed back");
	} else {
		f->dirty = true;
	}
	op_end(f, owned, false);
	obj_kv_free(okv, on);
	free(ct);
	return err;
}

int stage_file_set_meta(struct stage_file *f, const struct obj_kv *meta,
			size_t n_meta, const char *content_type)
{
	return set_meta(f, meta, n_meta, content_type, OP_REWRITE);
}

int stage_file_set_commit_meta(struct stage_file *f, const struct obj_kv *meta,
			       size_t n_meta, const char *content_type)
{
	return set_meta(f, meta, n_meta, content_type, OP_NO_JOURNAL);
}

void stage_key_replaced_but(struct stage *st, const char *bucket, const char *key,
			    struct stage_file *keep)
{
	stage_kept_replaced(st, bucket, key, keep ? keep->id : 0);
}

int stage_file_rename(struct stage_file *f, const char *bucket, const char *key)
{
	if (!bucket || !*bucket || !key || !*key)
		return -EINVAL;
	int err = 0;
	char *b = obj_strdup_opt(bucket, &err), *k = obj_strdup_opt(key, &err);
	if (!err) {
		bool owned = op_begin(f, false, OP_REWRITE, 0);
		swap_ptr(&f->bucket, &b);
		swap_ptr(&f->key, &k);
		if (!stage_stream_same_name(f, f->bucket, f->key))
			stage_stream_break(f, "renamed");
		if (owned)
			err = journal_dirty(f);
		if (err) {
			swap_ptr(&f->bucket, &b);
			swap_ptr(&f->key, &k);
			if (!stage_stream_same_name(f, f->bucket, f->key))
				stage_stream_break(f, "renamed back");
		} else {
			f->dirty = true;
			stage_kept_renamed(f->st, f->id, f->bucket, f->key);
		}
		op_end(f, owned, false);
	}
	free(b);
	free(k);
	return err;
}
