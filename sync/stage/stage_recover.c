/*
 * stage_recover.c — crash recovery: the rule of stage.h applied to every
 * staged file not open now (uploaded again or left for stage_file_adopt,
 * moved to recovered/, deleted), and the saving of a file whose staging
 * file went with a removed directory. Calls stage_orphans.c (intents and
 * the orphans file), stage_kept.c, stage_journal.c and stage_dir.c, and
 * upload.c (a file uploaded again); nothing above it.
 */
#include "sync/stage/stage_int.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/array.h"
#include "common/lock.h"
#include "common/log.h"
#include "common/s3.h"

/* Journaled file id (bytes long) left the staging area (uploaded, moved
 * or dropped). */
static void pending_done(struct stage *st, uint64_t id, uint64_t bytes)
{
	mod_lock(&st->lock);
	if (st->cnt.pending_files)
		st->cnt.pending_files--;
	st->pending_bytes -= bytes < st->pending_bytes ? bytes : st->pending_bytes;
	mod_unlock(&st->lock);
	stage_kept_forget(st, id);
}

struct rec_entry {
	uint64_t id;
	bool data, jnl, tmp;
	bool stale;                  /* ID.stale: a newer version was made */
};

static int entries_add(struct rec_entry **arr, size_t *n, size_t *cap,
		       uint64_t id, const char *ext)
{
	size_t i;
	for (i = 0; i < *n && (*arr)[i].id != id; i++)
		;
	if (i == *n) {
		if (*n == *cap) {
			size_t nc = *cap ? *cap * 2 : 16;
			struct rec_entry *a = realloc(*arr, nc * sizeof *a);
			if (!a)
				return -ENOMEM;
			*arr = a;
			*cap = nc;
		}
		(*arr)[i] = (struct rec_entry){ .id = id };
		(*n)++;
	}
	if (strcmp(ext, ".data") == 0)
		(*arr)[i].data = true;
	else if (strcmp(ext, ".jnl") == 0)
		(*arr)[i].jnl = true;
	else if (strcmp(ext, ".stale") == 0)
		(*arr)[i].stale = true;
	else
		(*arr)[i].tmp = true;
	return 0;
}

/* The staged files on disk, by id. */
static int entries_scan(struct stage *st, struct rec_entry **arr, size_t *n)
{
	size_t cap = 0;
	*arr = NULL;
	*n = 0;
	DIR *d;
	int err = stage_dir_open(st, &d);
	if (err)
		return err;
	struct dirent *de;
	while (!err && (de = readdir(d))) {
		char *end;
		if (strlen(de->d_name) < 17 || !isxdigit((unsigned char)de->d_name[0]))
			continue;
		uint64_t id = strtoull(de->d_name, &end, 16);
		if (end != de->d_name + 16)
			continue;
		if (strcmp(end, ".data") && strcmp(end, ".jnl") &&
		    strcmp(end, ".jnl.tmp") && strcmp(end, ".stale"))
			continue;
		err = entries_add(arr, n, &cap, id, end);
	}
	closedir(d);
	return err;
}

static bool id_open(struct stage *st, uint64_t id)
{
	bool found = false;
	mod_lock(&st->lock);
	for (struct stage_file *f = st->open; f && !found; f = f->next)
		found = f->id == id;
	mod_unlock(&st->lock);
	return found;
}

/* "bucket%2Fkey" with '/', '%' and control bytes escaped, at most ~200
 * bytes (longer ones are cut and end in ~ID), then "@TIME". */
static void recovered_name(const struct stage_jnl *j, uint64_t id, time_t t,
			   char *out, size_t outlen)
{
	char base[256];
	size_t n = 0;
	if (!j || !j->bucket) {
		n = (size_t)snprintf(base, sizeof base, "unknown-%016" PRIx64, id);
	} else {
		const char *parts[2] = { j->bucket, j->key };
		for (int k = 0; k < 2; k++) {
			if (k == 1)
				n += (size_t)snprintf(base + n, sizeof base - n, "%%2F");
			for (const unsigned char *p = (const unsigned char *)parts[k];
			     *p && n < 200; p++) {
				if (*p < 0x20 || *p == '/' || *p == '%' || *p == 0x7f)
					n += (size_t)snprintf(base + n, sizeof base - n,
							      "%%%02X", *p);
				else
					base[n++] = (char)*p;
			}
			base[n] = '\0';
		}
		if (n >= 200)
			n = (size_t)snprintf(base + 180, sizeof base - 180,
					     "~%016" PRIx64, id) + 180;
	}
	struct tm tm;
	gmtime_r(&t, &tm);
	char ts[32];
	strftime(ts, sizeof ts, "%Y%m%dT%H%M%SZ", &tm);
	snprintf(out, outlen, "%s@%s", base, ts);
}

/* journaled: the file had a journal (counted in pending_files). */
static int move_recovered(struct stage *st, uint64_t id, bool journaled,
			  const struct stage_jnl *j, const struct stat *sb,
			  struct stage_recovery_report *rep)
{
	char data[32], jnl[32], name[300], dst[320];
	stage_name(id, ".data", data);
	stage_name(id, ".jnl", jnl);
	recovered_name(j, id, sb->st_mtim.tv_sec, name, sizeof name);
	int err = 0;
	for (int i = 0; i < 1000; i++) {
		if (i == 0)
			snprintf(dst, sizeof dst, "%s", name);
		else
			snprintf(dst, sizeof dst, "%s.%d", name, i);
		err = renameat2(st->dir_fd, data, st->rec_fd, dst, RENAME_NOREPLACE)
			? -errno : 0;
		if (err != -EEXIST)
			break;
	}
	if (err) {
		log_error("stage: cannot move %s/%s to %s/: %s", st->dir, data,
			  st->rec_dir, strerror(-err));
		return err;
	}
	char jdst[340];
	snprintf(jdst, sizeof jdst, "%s.journal", dst);
	if (journaled &&
	    renameat2(st->dir_fd, jnl, st->rec_fd, jdst, RENAME_NOREPLACE) != 0)
		unlinkat(st->dir_fd, jnl, 0);
	fsync(st->rec_fd);
	fsync(st->dir_fd);
	log_warn("stage: %s data of %s/%s (%" PRIu64 " bytes) moved to %s/%s",
		 st->distrust ? "untrusted (no fsync, then a reboot)" :
		 "uncommitted", j && j->bucket ? j->bucket : "?",
		 j && j->key ? j->key : "?", (uint64_t)sb->st_size, st->rec_dir, dst);
	stage_uncharge(st, (uint64_t)sb->st_size);
	mod_lock(&st->lock);
	st->cnt.recovered_files++;
	mod_unlock(&st->lock);
	if (journaled)
		pending_done(st, id, (uint64_t)sb->st_size);
	rep->recovered++;
	rep->recovered_bytes += (uint64_t)sb->st_size;
	return 0;
}

/* NAME.journal in recovered/ with text (synced with the data). */
static int note_write(struct stage *st, const char *name, const char *text)
{
	char jn[340];
	snprintf(jn, sizeof jn, "%s.journal", name);
	int fd = openat(st->rec_fd, jn, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	size_t len = strlen(text);
	int err = write(fd, text, len) == (ssize_t)len ? 0 : -EIO;
	if (!err)
		err = stage_sync(st, fd, true);
	close(fd);
	return err;
}

int stage_recover_fd(struct stage *st, uint64_t id, const char *bucket,
		     const char *key, int fd, uint64_t size, const char *note)
{
	const struct stage_jnl j = { .bucket = (char *)bucket, .key = (char *)key };
	char name[300], dst[320];
	recovered_name(&j, id, time(NULL), name, sizeof name);
	int out = -1, err = 0;
	for (int i = 0; i < 1000 && out < 0; i++) {
		if (i == 0)
			snprintf(dst, sizeof dst, "%s", name);
		else
			snprintf(dst, sizeof dst, "%s.%d", name, i);
		out = openat(st->rec_fd, dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			     0600);
		/* recovered/ gone with the directory, not made again yet */
		if (out < 0 && errno == ENOENT && i == 0 && stage_dir_renew(st) == 0)
			out = openat(st->rec_fd, dst,
				     O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (out < 0 && errno != EEXIST)
			break;
	}
	size_t cap = 1u << 20;
	char *buf = out >= 0 ? malloc(cap) : NULL;
	if (out < 0)
		err = -errno;
	else if (!buf)
		err = -ENOMEM;
	for (uint64_t off = 0; !err && off < size;) {
		size_t want = size - off < cap ? (size_t)(size - off) : cap;
		ssize_t n = pread(fd, buf, want, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : -EIO;
			break;
		}
		for (ssize_t w = 0; !err && w < n;) {
			ssize_t k = pwrite(out, buf + w, (size_t)(n - w), (off_t)(off + (uint64_t)w));
			if (k < 0 && errno != EINTR)
				err = -errno;
			else if (k > 0)
				w += k;
		}
		off += (uint64_t)n;
	}
	free(buf);
	if (!err)
		err = stage_sync(st, out, true);
	if (out >= 0)
		close(out);
	if (!err && note)
		err = note_write(st, dst, note);
	if (err) {
		if (out >= 0)
			unlinkat(st->rec_fd, dst, 0);
		log_error("stage: %s/%s (%" PRIu64 " bytes, not in S3) cannot be saved "
			  "to %s: %s%s", bucket, key, size, st->rec_dir, strerror(-err),
			  note ? "" : "; its staging file went with the removed directory: "
			  "the data are lost");
		return err;
	}
	stage_sync(st, st->rec_fd, false);
	log_warn("stage: %s/%s (%" PRIu64 " bytes, not in S3): %s; saved to %s/%s",
		 bucket, key, size, note ? "set aside" :
		 "its staging file was removed with the directory", st->rec_dir, dst);
	mod_lock(&st->lock);
	st->cnt.recovered_files++;
	mod_unlock(&st->lock);
	return 0;
}

/* Abort the multipart upload journal j names; 0 or its error (logged). */
static int abort_journaled(struct stage *st, const struct stage_jnl *j,
			   struct stage_recovery_report *rep)
{
	const char *b = j->upload_bucket ? j->upload_bucket : j->bucket;
	const char *k = j->upload_key ? j->upload_key : j->key;
	int err = s3_mpu_abort(st->s3, b, k, j->upload_id);
	if (err) {
		log_warn("stage: aborting the interrupted upload %s of %s/%s: %s; "
			 "the file stays staged until it can be", j->upload_id, b, k,
			 strerror(-err));
		return err;
	}
	log_info("stage: interrupted upload %s of %s/%s aborted", j->upload_id,
		 b, k);
	rep->aborted++;
	return 0;
}

static int reupload(struct stage *st, uint64_t id, const struct stage_jnl *j,
		    const struct stat *sb, struct stage_recovery_report *rep)
{
	char data[32], etag[72];
	stage_name(id, ".data", data);
	int fd = openat(st->dir_fd, data, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* A multipart upload the crash interrupted: drop its parts first (if
	 * that fails, keep the file: its id is only in this journal). */
	if (j->upload_id && abort_journaled(st, j, rep) != 0) {
		close(fd);
		rep->reupload_failed++;
		stage_kept_add(st, id, j->bucket, j->key, false);
		return 0;
	}
	/* The intent, if any, was dealt with (stage_orphans_abort): this
	 * upload journals its own. */
	struct stage_jnl jc = *j;
	jc.upload_id = jc.upload_bucket = jc.upload_key = NULL;
	jc.intent = (struct stage_intent){ 0 };
	struct jnl_started js = { .st = st, .id = id, .j = &jc };
	struct upload_hooks hooks = { .creating = stage_jnl_creating,
				      .started = stage_jnl_started, .ctx = &js };
	int err = upload_file(st->s3, &st->up, j->bucket, j->key, fd, j->size,
			      j->meta, j->n_meta, j->ctype, NULL, &hooks, etag);
	stage_jnl_hooks_done(&js);
	close(fd);
	mod_lock(&st->lock);
	if (err) {
		st->cnt.upload_errors++;
	} else {
		st->cnt.uploads++;
		st->cnt.upload_bytes += j->size;
		st->cnt.reuploaded_files++;
	}
	mod_unlock(&st->lock);
	if (err) {
		log_error("stage: re-upload of %s/%s (%" PRIu64 " bytes, commit had "
			  "begun before a crash) failed: %s; kept in %s/%s",
			  j->bucket, j->key, j->size, strerror(-err), st->dir, data);
		rep->reupload_failed++;
		stage_kept_add(st, id, j->bucket, j->key, false);
		return 0;
	}
	log_info("stage: %s/%s (%" PRIu64 " bytes, commit had begun before a "
		 "crash) uploaded, ETag %s", j->bucket, j->key, j->size, etag);
	err = stage_jnl_remove(st, id);
	if (!err && unlinkat(st->dir_fd, data, 0) != 0)
		err = -errno;
	if (!err)
		stage_uncharge(st, (uint64_t)sb->st_size);
	pending_done(st, id, (uint64_t)sb->st_size);
	rep->reuploaded++;
	return err;
}

/* File id's "commit" journal j (its data as journaled) is left staged
 * for stage_file_adopt (defer_commits): j moves into the stage's list
 * (zeroed here). The file is on the kept list from now on, so that its
 * key replaced before its adoption marks it stale (stage_kept.c). */
static int defer_commit(struct stage *st, uint64_t id, struct stage_jnl *j,
			struct stage_recovery_report *rep)
{
	mod_lock(&st->lock);
	int err = ARRAY_GROW(&st->deferred, &st->cap_deferred, st->n_deferred + 1);
	if (!err) {
		st->deferred[st->n_deferred++] = (struct stage_deferred){ .id = id, .j = *j };
		memset(j, 0, sizeof *j);
	}
	mod_unlock(&st->lock);
	if (err)
		return err;
	const struct stage_jnl *dj = &st->deferred[st->n_deferred - 1].j;
	stage_kept_add(st, id, dj->bucket, dj->key, false);
	log_debug("stage: %s/%s (%" PRIu64 " bytes, commit had begun) left for the "
		  "drain", dj->bucket, dj->key, dj->size);
	rep->deferred++;
	return 0;
}

static int deferred_by_name(const void *a, const void *b)
{
	const struct stage_deferred *x = a, *y = b;
	int c = strcmp(x->j.bucket, y->j.bucket);
	if (!c)
		c = strcmp(x->j.key, y->j.key);
	return c ? c : x->id < y->id ? -1 : x->id > y->id;
}

static int deferred_by_id(const void *a, const void *b)
{
	const struct stage_deferred *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Of deferred files of one key only the newest (the highest id: ids grow
 * with each file made) is the key's next version: an older one (its
 * stale mark was lost) goes to recovered/ instead. The list is left in
 * the order of ids. No other thread uses the stage yet. */
static void deferred_dedupe(struct stage *st, struct stage_recovery_report *rep)
{
	struct stage_deferred *todo = st->deferred + st->next_deferred;
	size_t n = st->n_deferred - st->next_deferred;   /* not taken yet */
	qsort(todo, n, sizeof *todo, deferred_by_name);
	size_t kept = st->next_deferred;
	for (size_t i = st->next_deferred; i < st->n_deferred; i++) {
		struct stage_deferred *d = &st->deferred[i];
		struct stage_deferred *next = i + 1 < st->n_deferred ? d + 1 : NULL;
		if (!next || strcmp(d->j.bucket, next->j.bucket) ||
		    strcmp(d->j.key, next->j.key)) {
			st->deferred[kept++] = *d;
			continue;
		}
		char data[32];
		struct stat sb;
		stage_name(d->id, ".data", data);
		log_warn("stage: %s/%s has two copies whose commit had begun; the "
			 "older is not uploaded", d->j.bucket, d->j.key);
		rep->deferred--;
		if (fstatat(st->dir_fd, data, &sb, 0) == 0)
			move_recovered(st, d->id, true, &d->j, &sb, rep);
		stage_jnl_release(&d->j);
	}
	st->n_deferred = kept;
	qsort(todo, kept - st->next_deferred, sizeof *todo, deferred_by_id);
}

int stage_deferred_take(struct stage *st, struct stage_deferred *out)
{
	mod_lock(&st->lock);
	int err = st->next_deferred < st->n_deferred ? 0 : -ENOENT;
	if (!err) {
		*out = st->deferred[st->next_deferred];
		memset(&st->deferred[st->next_deferred], 0, sizeof *out);
		st->next_deferred++;
	}
	mod_unlock(&st->lock);
	return err;
}

void stage_deferred_free(struct stage *st)
{
	for (size_t i = st->next_deferred; i < st->n_deferred; i++)
		stage_jnl_release(&st->deferred[i].j);
	free(st->deferred);
	st->deferred = NULL;
	st->n_deferred = st->next_deferred = st->cap_deferred = 0;
}

static int recover_one(struct stage *st, const struct rec_entry *e,
		       struct stage_recovery_report *rep);

/* recover_one, then the marker goes once the journal has (uploaded,
 * moved or dropped). */
static int recover_entry(struct stage *st, const struct rec_entry *e,
			 struct stage_recovery_report *rep)
{
	if (!e->data && !e->jnl && !e->tmp) {   /* a marker alone */
		stage_kept_unmark(st, e->id);
		return 0;
	}
	int err = recover_one(st, e, rep);
	char jnl[32];
	stage_name(e->id, ".jnl", jnl);
	if (e->stale && faccessat(st->dir_fd, jnl, F_OK, 0) != 0 && errno == ENOENT)
		stage_kept_unmark(st, e->id);
	return err;
}

static int recover_one(struct stage *st, const struct rec_entry *e,
		       struct stage_recovery_report *rep)
{
	char data[32], jnl[32], tmp[32];
	stage_name(e->id, ".data", data);
	stage_name(e->id, ".jnl", jnl);
	stage_name(e->id, ".jnl.tmp", tmp);
	if (e->tmp)
		unlinkat(st->dir_fd, tmp, 0);
	struct stat sb;
	if (e->data && fstatat(st->dir_fd, data, &sb, 0) != 0)
		return -errno;
	if (!e->jnl) {
		if (e->data && st->distrust)
			return move_recovered(st, e->id, false, NULL, &sb, rep);
		if (e->data) {
			/* Never journaled (no write accepted) or committed. */
			if (unlinkat(st->dir_fd, data, 0) != 0)
				return -errno;
			stage_uncharge(st, (uint64_t)sb.st_size);
		}
		rep->deleted++;
		return 0;
	}
	struct stage_jnl j;
	int err = stage_jnl_read(st, e->id, &j);
	if (err && err != -EINVAL && err != -EBADMSG)
		return err;
	/* A creation whose id the crash kept from the journal: list and
	 * abort first; the file stays staged while that fails. */
	if (!err && j.intent.ns && stage_orphans_abort(st, &j, rep) != 0 &&
	    !st->distrust) {
		rep->abort_failed++;
		if (j.state == STAGE_JS_COMMIT)
			stage_kept_add(st, e->id, j.bucket, j.key, false);
		stage_jnl_release(&j);
		return 0;
	}
	if (!e->data) {
		log_warn("stage: journal %s/%s without data (%s/%s); removed",
			 st->dir, jnl, err ? "?" : j.bucket, err ? "?" : j.key);
		stage_jnl_release(&j);
		pending_done(st, e->id, 0);
		rep->deleted++;
		return stage_jnl_remove(st, e->id);
	}
	if (err == -EBADMSG) {
		/* Torn by a crash during its rewrite in place, which was only
		 * ever done over a plain "dirty" journal: that is the state
		 * (stage_journal.c). Its name, if readable, names the file. */
		log_warn("stage: journal %s/%s is torn (a crash while it was "
			 "written): read as \"dirty\"; the name %s/%s is unchecked",
			 st->dir, jnl, j.bucket ? j.bucket : "?", j.key ? j.key : "?");
		err = move_recovered(st, e->id, true, j.bucket && j.key ? &j : NULL,
				     &sb, rep);
		stage_jnl_release(&j);
		return err;
	}
	if (err) {
		log_error("stage: journal %s/%s is malformed", st->dir, jnl);
		return move_recovered(st, e->id, true, NULL, &sb, rep);
	}
	/* A newer version of the key was made after this commit failed
	 * (stage_kept.c): the data is not uploaded over it. */
	if (e->stale && j.state == STAGE_JS_COMMIT) {
		log_info("stage: %s/%s: a newer version was made after this staged "
			 "copy's commit failed; not uploaded", j.bucket, j.key);
		j.state = STAGE_JS_DIRTY;
	}
	if (st->distrust) {
		/* Nothing of a PROCESS run survives a reboot as trusted: the
		 * data moves even when the abort fails (logged), since the next
		 * run would trust this journal. */
		if (j.upload_id && abort_journaled(st, &j, rep) != 0)
			rep->abort_failed++;
		err = move_recovered(st, e->id, true, &j, &sb, rep);
	} else if (j.state == STAGE_JS_COMMIT && j.size == (uint64_t)sb.st_size &&
		   st->defer_commits)
		err = defer_commit(st, e->id, &j, rep);
	else if (j.state == STAGE_JS_COMMIT && j.size == (uint64_t)sb.st_size)
		err = reupload(st, e->id, &j, &sb, rep);
	else if (j.upload_id && abort_journaled(st, &j, rep) != 0)
		rep->abort_failed++;     /* kept: a later recovery aborts it */
	else
		err = move_recovered(st, e->id, true, &j, &sb, rep);
	stage_jnl_release(&j);
	return err;
}

int stage_recover(struct stage *st, struct stage_recovery_report *rep)
{
	struct stage_recovery_report dummy;
	if (!rep)
		rep = &dummy;
	memset(rep, 0, sizeof *rep);
	/* Failures are logged, the records kept: not this recovery's error. */
	(void)stage_orphans_recover(st, rep);
	struct rec_entry *e;
	size_t n;
	int err = entries_scan(st, &e, &n);
	if (err) {
		log_error("stage: cannot list %s: %s", st->dir, strerror(-err));
		return err;
	}
	for (size_t i = 0; i < n; i++) {
		if (id_open(st, e[i].id))
			continue;
		int r = recover_entry(st, &e[i], rep);
		if (r && !err) {
			log_error("stage: recovery of %s/%016" PRIx64 ": %s", st->dir,
				  e[i].id, strerror(-r));
			err = r;
		}
	}
	free(e);
	if (st->n_deferred - st->next_deferred > 1)
		deferred_dedupe(st, rep);
	if (n)
		log_info("stage: recovery of %s: %u left for the drain, %u re-uploaded, "
			 "%u re-upload failed, %u moved to %s, %u deleted, %u uploads "
			 "aborted (%u kept: abort failed), %u found by listing aborted",
			 st->dir, rep->deferred, rep->reuploaded, rep->reupload_failed,
			 rep->recovered, st->rec_dir, rep->deleted, rep->aborted,
			 rep->abort_failed, rep->orphans_aborted);
	/* Everything untrusted has moved: this run's setting and boot may
	 * now be written (until then a crash repeats the distrust). */
	if (!err && st->distrust)
		err = stage_durability_trust(st);
	return err;
}
