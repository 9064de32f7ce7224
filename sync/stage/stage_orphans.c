/*
 * stage_orphans.c — multipart uploads a crash kept out of the journal
 * (the intents of stage_int.h), found again by listing the store.
 *
 * DESIGN. Before each CreateMultipartUpload the stage journals an intent:
 * the bucket, the key and the time (this machine's wall clock). Once the
 * creation answered, its id replaces the intent in the journal. A crash
 * in between (or an answer lost on the way) leaves a journal with the
 * intent and no id; recovery then lists the bucket's multipart uploads
 * under prefix = key (every page), keeps those whose key is exactly the
 * intent's and that were initiated at or after intent.ns minus
 * STAGE_INTENT_SKEW_NS, and aborts each, logging it.
 *
 * The margin: the store stamps Initiated with its own clock. S3 refuses a
 * signed request whose time is more than 15 minutes off the server's
 * (RequestTimeTooSkewed; RGW does the same), so any store that answered
 * the creation has a clock within 15 minutes of ours: 900 s covers every
 * skew that can have happened. Neither ListMultipartUploads nor ListParts
 * shows back anything the creator chose (no metadata, no tag; the
 * initiator is the credentials' user, shared by every client with the
 * same keys), so the time and the key are the only discriminators.
 * What it may wrongly abort: another client's (or another gateway's)
 * multipart upload of the very same key, initiated from 15 minutes before
 * the intent up to this recovery. That client then fails its completion
 * (NoSuchUpload) and sees an error; nothing is silently lost, and two
 * writers of one key at once lose one of the two versions anyway.
 *
 * Listing runs only before the stage's first stage_file_new (the
 * gateway's start, nothing mounted yet): later, a live upload of this run
 * for the same key could be among those listed. Later recoveries keep
 * such a file staged for the next start.
 *
 * A creation whose answer was lost while the gateway runs leaves its
 * intent with the file; a later commit of that file that succeeds removes
 * the file's journal, so the intent moves to the file ORPHANS_FILE in the
 * staging directory (one record appended per intent, under the stage's
 * durability rule; at most ORPHANS_MAX_BYTES, beyond which the upload is
 * only logged). The next start aborts what those records name, as for a
 * journal's intent, and keeps the records whose listing or abort failed.
 * Record: "NS BLEN KLEN\n", the bucket's and the key's bytes, "\n".
 * Uploads no staged file holds (a server-side copy in parts, sync/stage/copy.c,
 * whose creation's answer was lost or whose abort failed) are recorded
 * the same way by stage_upload_left, with the time taken before their
 * creation.
 *
 * The journal's side of an upload (the hooks of upload_file, upload.h):
 * an intent journaled before the creation, the id once it exists, a
 * failed abort's id kept with the file, and the journal's removal once
 * the commit's upload succeeded (stage_commit_unjournal) are here too.
 * Calls stage_journal.c and stage_dir.c only.
 */
#include "sync/stage/stage_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/lock.h"
#include "common/log.h"
#include "common/s3.h"

int stage_intent_set(struct stage *st, struct stage_intent *in, const char *bucket,
		     const char *key, bool *fresh)
{
	*fresh = false;
	if (in->ns && strcmp(in->bucket, bucket) == 0 && strcmp(in->key, key) == 0)
		return 0;            /* the oldest of this key covers this one */
	/* One of another key (the file was renamed since): into the orphans
	 * file, so that this creation gets an intent of its own. If that
	 * cannot be written, the old one stays (it is still journaled). */
	if (in->ns && stage_orphans_defer(st, in) != 0)
		return 0;
	stage_intent_clear(in);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	char *b = strdup(bucket), *k = strdup(key);
	if (!b || !k) {
		free(b);
		free(k);
		return -ENOMEM;
	}
	in->ns = (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
	in->bucket = b;
	in->key = k;
	*fresh = true;
	return 0;
}

int stage_file_intent_set(struct stage_file *f, const char *bucket, const char *key,
			  bool *fresh)
{
	struct stage_intent *in = &f->intent;
	if (in->ns && (strcmp(in->bucket, bucket) != 0 || strcmp(in->key, key) != 0)) {
		/* Deferred with f->lock dropped: the journal's owner is the
		 * only thread that changes f->intent. */
		struct stage_intent old = *in;
		mod_unlock(&f->lock);
		int err = stage_orphans_defer(f->st, &old);
		mod_lock(&f->lock);
		if (err) {
			*fresh = false;
			return 0;            /* the old one stays (journaled) */
		}
		stage_intent_clear(in);
	}
	return stage_intent_set(f->st, in, bucket, key, fresh);
}

void stage_intent_clear(struct stage_intent *in)
{
	free(in->bucket);
	free(in->key);
	*in = (struct stage_intent){ 0 };
}

void stage_intent_refused(struct stage_intent *in, bool fresh, int err)
{
	if (fresh && s3_mpu_create_refused(err))
		stage_intent_clear(in);
}

/* The uploads to abort, collected during the listing (aborting while a
 * listing pages through them would move its markers). */
struct orphan_list {
	const char *key;
	int64_t since_ns;
	char **ids;
	int64_t *when;
	size_t n, cap;
};

static int orphan_take(void *ctx, const char *key, const char *upload_id,
		       int64_t initiated_ns)
{
	struct orphan_list *l = ctx;
	if (strcmp(key, l->key) != 0)
		return 0;            /* a longer key under the same prefix */
	/* Unknown time (-1): taken, since it cannot be shown older. */
	if (initiated_ns >= 0 && initiated_ns < l->since_ns)
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4;
		char **ids = realloc(l->ids, cap * sizeof *ids);
		if (!ids)
			return -ENOMEM;
		l->ids = ids;
		int64_t *when = realloc(l->when, cap * sizeof *when);
		if (!when)
			return -ENOMEM;
		l->when = when;
		l->cap = cap;
	}
	l->ids[l->n] = strdup(upload_id);
	if (!l->ids[l->n])
		return -ENOMEM;
	l->when[l->n++] = initiated_ns;
	return 0;
}

int stage_orphans_abort(struct stage *st, const struct stage_jnl *j,
			struct stage_recovery_report *rep)
{
	const struct stage_intent *in = &j->intent;
	mod_lock(&st->lock);
	bool late = st->files_made;
	mod_unlock(&st->lock);
	if (late) {
		log_warn("stage: %s/%s: an upload may have been created without "
			 "its id journaled; it is looked for at the next start "
			 "(the file stays staged)", in->bucket, in->key);
		return -EAGAIN;
	}
	struct orphan_list l = { .key = in->key,
				 .since_ns = in->ns - STAGE_INTENT_SKEW_NS };
	int err = s3_mpu_list(st->s3, in->bucket, in->key, orphan_take, &l);
	if (err)
		log_warn("stage: listing the multipart uploads of %s/%s (an upload "
			 "may exist whose id a crash kept from the journal): %s; kept "
			 "for the next start", in->bucket, in->key, strerror(-err));
	for (size_t i = 0; !err && i < l.n; i++) {
		err = s3_mpu_abort(st->s3, in->bucket, in->key, l.ids[i]);
		if (err) {
			log_warn("stage: aborting upload %s of %s/%s (not journaled, "
				 "found by listing): %s; kept for the next start",
				 l.ids[i], in->bucket, in->key, strerror(-err));
			break;
		}
		log_info("stage: upload %s of %s/%s (initiated %" PRId64 " s after "
			 "the journaled intent; no id journaled) aborted", l.ids[i],
			 in->bucket, in->key,
			 (int64_t)(l.when[i] < 0 ? 0 : (l.when[i] - in->ns) / 1000000000));
		rep->orphans_aborted++;
	}
	if (!err && !l.n)
		log_info("stage: %s/%s: no multipart upload left by the creation a "
			 "crash interrupted", in->bucket, in->key);
	for (size_t i = 0; i < l.n; i++)
		free(l.ids[i]);
	free(l.ids);
	free(l.when);
	return err;
}

/* ---- intents left by a commit that succeeded ------------------------- */

#define ORPHANS_FILE "orphans"
#define ORPHANS_TMP "orphans.tmp"
#define ORPHANS_MAX_BYTES (1u << 20)

/* One record of in, appended to buf (malloc'd, *len updated). */
static int record_add(char **buf, size_t *len, const struct stage_intent *in)
{
	size_t bl = strlen(in->bucket), kl = strlen(in->key);
	char head[80];
	int hl = snprintf(head, sizeof head, "%" PRId64 " %zu %zu\n", in->ns, bl, kl);
	char *nb = realloc(*buf, *len + (size_t)hl + bl + kl + 1);
	if (!nb)
		return -ENOMEM;
	char *p = nb + *len;
	memcpy(p, head, (size_t)hl);
	memcpy(p + hl, in->bucket, bl);
	memcpy(p + hl + bl, in->key, kl);
	p[hl + bl + kl] = '\n';
	*buf = nb;
	*len += (size_t)hl + bl + kl + 1;
	return 0;
}

int stage_orphans_defer(struct stage *st, const struct stage_intent *in)
{
	char *rec = NULL;
	size_t len = 0;
	int err = record_add(&rec, &len, in);
	/* O_APPEND: one write() per record, so concurrent commits do not
	 * interleave (no lock held across the disk I/O). */
	int fd = err ? -1 : stage_create_at(st, ORPHANS_FILE, O_WRONLY | O_APPEND);
	struct stat sb;
	if (!err && fd < 0) {
		err = fd;
		fd = -1;
	}
	if (!err && fstat(fd, &sb) != 0)
		err = -errno;
	if (!err && (uint64_t)sb.st_size + len > ORPHANS_MAX_BYTES)
		err = -ENOSPC;
	if (!err && write(fd, rec, len) != (ssize_t)len)
		err = -EIO;
	if (!err)
		err = stage_sync(st, fd, true);
	if (!err && sb.st_size == 0)
		err = stage_sync(st, st->dir_fd, false);   /* the new name */
	if (fd >= 0)
		close(fd);
	free(rec);
	if (err)
		log_warn("stage: %s/%s: a multipart upload may stay open in the "
			 "store (a creation's answer was lost, or an abort failed); "
			 "cannot note it in %s/%s: %s", in->bucket, in->key, st->dir,
			 ORPHANS_FILE, strerror(-err));
	else
		log_info("stage: %s/%s: a multipart upload may be open in the store "
			 "(a creation's answer was lost, or an abort failed); the "
			 "next start looks for it", in->bucket, in->key);
	return err;
}

int stage_upload_left(struct stage *st, const char *bucket, const char *key,
		      int64_t since_ns)
{
	/* (A record reads its strings only: the casts drop no ownership.) */
	const struct stage_intent in = { .ns = since_ns, .bucket = (char *)bucket,
					 .key = (char *)key };
	return stage_orphans_defer(st, &in);
}

/* n bytes (no NUL among them needed) as a string. */
static char *bytes_dup(const char *p, size_t n)
{
	char *s = malloc(n + 1);
	if (s) {
		memcpy(s, p, n);
		s[n] = '\0';
	}
	return s;
}

/* The next record of buf[*off, len) into in (pointing into a copy it
 * owns); 1 at the end, -EINVAL if malformed. */
static int record_next(const char *buf, size_t len, size_t *off, struct stage_intent *in)
{
	if (*off >= len)
		return 1;
	const char *p = buf + *off, *nl = memchr(p, '\n', len - *off);
	long long ns;
	size_t bl, kl;
	int used = 0;
	if (!nl || sscanf(p, "%lld %zu %zu%n", &ns, &bl, &kl, &used) != 3 ||
	    p + used != nl || bl == 0 || kl == 0 ||
	    bl + kl + 1 > len - (size_t)(nl + 1 - buf) || nl[1 + bl + kl] != '\n')
		return -EINVAL;
	char *b = bytes_dup(nl + 1, bl), *k = bytes_dup(nl + 1 + bl, kl);
	if (!b || !k) {
		free(b);
		free(k);
		return -ENOMEM;
	}
	*in = (struct stage_intent){ .ns = ns, .bucket = b, .key = k };
	*off = (size_t)(nl + 1 - buf) + bl + kl + 1;
	return 0;
}

int stage_orphans_recover(struct stage *st, struct stage_recovery_report *rep)
{
	mod_lock(&st->lock);
	bool late = st->files_made;
	mod_unlock(&st->lock);
	if (late)
		return 0;            /* the next start's (commits may append) */
	int fd = openat(st->dir_fd, ORPHANS_FILE, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	struct stat sb;
	char *buf = NULL, *keep = NULL;
	size_t len = 0, klen = 0, off = 0;
	int err = fstat(fd, &sb) == 0 ? 0 : -errno;
	if (!err && !(buf = malloc((size_t)sb.st_size + 1)))
		err = -ENOMEM;
	if (!err && pread(fd, buf, (size_t)sb.st_size, 0) != sb.st_size)
		err = -EIO;
	close(fd);
	if (!err) {
		len = (size_t)sb.st_size;
		buf[len] = '\0';        /* sscanf stops there at the latest */
	}
	while (!err) {
		struct stage_intent in;
		int r = record_next(buf, len, &off, &in);
		if (r == 1)
			break;
		if (r == -EINVAL) {
			log_error("stage: %s/%s: a malformed record at byte %zu; the "
				  "rest is dropped (an upload it named may stay open)",
				  st->dir, ORPHANS_FILE, off);
			break;
		}
		if (r < 0) {
			err = r;
			break;
		}
		struct stage_jnl j = { .intent = in };
		if (stage_orphans_abort(st, &j, rep) != 0)
			err = record_add(&keep, &klen, &in);     /* the next start */
		stage_intent_clear(&in);
	}
	if (!err && klen) {
		/* what failed, for the next start: replaced whole */
		int tfd = openat(st->dir_fd, ORPHANS_TMP,
				 O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		err = tfd < 0 ? -errno : 0;
		if (!err && write(tfd, keep, klen) != (ssize_t)klen)
			err = -EIO;
		if (!err)
			err = stage_sync(st, tfd, true);
		if (tfd >= 0)
			close(tfd);
		if (!err && renameat(st->dir_fd, ORPHANS_TMP, st->dir_fd, ORPHANS_FILE) != 0)
			err = -errno;
	} else if (!err && unlinkat(st->dir_fd, ORPHANS_FILE, 0) != 0) {
		err = -errno;
	}
	if (err)
		log_error("stage: %s/%s: %s (its records stay for the next start)",
			  st->dir, ORPHANS_FILE, strerror(-err));
	free(buf);
	free(keep);
	return err;
}

/* ---- the journal of an upload ---------------------------------------- */

void stage_jnl_intent_drop(struct stage *st, uint64_t id)
{
	lock_assert_none("stage_jnl_intent_drop");
	struct stage_jnl j;
	if (stage_jnl_read(st, id, &j) != 0)
		return;
	if (j.intent.ns) {
		int64_t ns = j.intent.ns;
		j.intent.ns = 0;             /* not written; freed by the release */
		if (stage_jnl_write(st, id, &j, true) != 0)
			log_warn("stage: %s/%s: the journal still names a creation the "
				 "store refused (intent %" PRId64 "); the next start lists "
				 "the key's uploads", j.bucket, j.key, ns);
	}
	stage_jnl_release(&j);
}

int stage_jnl_creating(void *ctx)
{
	struct jnl_started *js = ctx;
	struct stage_jnl *j = js->j;
	struct stage_file *f = js->f;
	struct stage_intent *in = f ? &f->intent : &js->own;
	if (f) {
		mod_lock(&f->lock);
		stage_jnl_own(f);
	}
	int err = f ? stage_file_intent_set(f, j->bucket, j->key, &js->fresh)
		    : stage_intent_set(js->st, in, j->bucket, j->key, &js->fresh);
	if (!err) {
		j->intent = *in;
		err = f ? stage_jnl_put_file(f, j) : stage_jnl_write(js->st, js->id, j, true);
		j->intent = (struct stage_intent){ 0 };
	}
	if (f) {
		stage_jnl_disown(f);
		mod_unlock(&f->lock);
	}
	if (err)
		log_error("stage: cannot journal the upload of %s/%s about to be "
			  "created: %s", j->bucket, j->key, strerror(-err));
	return err ? -EIO : 0;
}

int stage_jnl_started(void *ctx, const char *upload_id)
{
	struct jnl_started *js = ctx;
	struct stage_file *f = js->f;
	struct stage_intent *in = f ? &f->intent : &js->own;
	if (f) {
		mod_lock(&f->lock);
		stage_jnl_own(f);
	}
	/* An older intent (a creation that failed) stays journaled. */
	if (!js->fresh)
		js->j->intent = *in;
	js->j->upload_id = (char *)upload_id;
	int err = f ? stage_jnl_put_file(f, js->j)
		    : stage_jnl_write(js->st, js->id, js->j, true);
	js->j->upload_id = NULL;
	js->j->intent = (struct stage_intent){ 0 };
	if (!err && js->fresh)
		stage_intent_clear(in);
	if (f) {
		stage_jnl_disown(f);
		mod_unlock(&f->lock);
	}
	if (err)
		log_error("stage: cannot journal upload %s: %s", upload_id,
			  strerror(-err));
	return err ? -EIO : 0;
}

void stage_jnl_abandoned(void *ctx, const char *upload_id)
{
	struct jnl_started *js = ctx;
	struct stage_file *f = js->f;
	if (!f)
		return;
	mod_lock(&f->lock);
	struct stage_stream *sm = &f->sm;
	if (!sm->id && !sm->n_parts) {
		sm->id = strdup(upload_id);
		sm->bucket = strdup(js->j->bucket);
		sm->key = strdup(js->j->key);
		if (!sm->id || !sm->bucket || !sm->key) {
			free(sm->id);
			free(sm->bucket);
			free(sm->key);
			sm->id = sm->bucket = sm->key = NULL;
			log_error("stage: out of memory: upload %s of %s/%s will be "
				  "aborted only at the next start", upload_id,
				  js->j->bucket, js->j->key);
		}
		if (sm->state != SM_BROKEN)
			stage_sm_to(sm, SM_BROKEN);
	}
	mod_unlock(&f->lock);
}

void stage_jnl_hooks_done(struct jnl_started *js)
{
	stage_intent_clear(&js->own);
}

void stage_commit_unjournal(struct stage_file *f)
{
	mod_lock(&f->lock);
	stage_jnl_own(f);
	struct stage_intent left = f->intent;
	f->intent = (struct stage_intent){ 0 };
	stage_jnl_disown(f);
	mod_unlock(&f->lock);
	if (left.ns)
		stage_orphans_defer(f->st, &left);    /* logs a failure */
	stage_intent_clear(&left);
	if (stage_jnl_remove(f->st, f->id) != 0)
		log_warn("stage: %s/%s uploaded, but its journal remains: a "
			 "recovery would upload it again", f->bucket, f->key);
}

void stage_intent_dropped(struct stage_file *f, bool fresh, int err)
{
	mod_lock(&f->lock);
	stage_jnl_own(f);
	bool had = f->intent.ns != 0;
	stage_intent_refused(&f->intent, fresh, err);
	if (had && !f->intent.ns) {
		/* the journal's rewrite, with f->lock dropped */
		mod_unlock(&f->lock);
		stage_jnl_intent_drop(f->st, f->id);
		mod_lock(&f->lock);
	}
	stage_jnl_disown(f);
	mod_unlock(&f->lock);
}
