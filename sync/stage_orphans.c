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
 */
#include "sync/stage_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/s3.h"

int stage_intent_set(struct stage_intent *in, const char *bucket,
		     const char *key, bool *fresh)
{
	*fresh = false;
	if (in->ns)
		return 0;
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

void stage_intent_clear(struct stage_intent *in)
{
	free(in->bucket);
	free(in->key);
	*in = (struct stage_intent){ 0 };
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
	pthread_mutex_lock(&st->lock);
	bool late = st->files_made;
	pthread_mutex_unlock(&st->lock);
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
			 "may exist whose id a crash kept from the journal): %s; the "
			 "file stays staged", in->bucket, in->key, strerror(-err));
	for (size_t i = 0; !err && i < l.n; i++) {
		err = s3_mpu_abort(st->s3, in->bucket, in->key, l.ids[i]);
		if (err) {
			log_warn("stage: aborting upload %s of %s/%s (not journaled, "
				 "found by listing): %s; the file stays staged",
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
