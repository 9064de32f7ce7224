/*
 * decoder.c — see decoder.h.
 *
 * DESIGN. A fixed table of DECODER_JOBS + 1 jobs, each in one state:
 *
 *   FREE --decoder_post--> POSTED --decoder_release--> SPENT
 *     ^                                                  |
 *     +------------------ CLEANING <---------------------+
 *                 (decoder_main, or decoder_post when no job is free)
 *
 * A POSTED job's messages are claimed one at a time (atomic next) by the
 * decoder thread and by the caller inside decoder_finish()/release(); the
 * thread that decodes the last one (atomic done reaches n) builds the batch
 * (job_build: moves every record into one array, notes timestamps and
 * partition positions) and sets complete. So the caller usually finds the
 * batch built by the decoder thread, and the records it gives back are
 * freed there too (the thread decodes first, cleans when idle); the spare
 * job lets the caller post while one is still being cleaned.
 *
 * Locks: d->lock protects state, workers, seq, complete and stop; it is
 * never held while decoding, building or freeing records. A job's messages
 * and arrays are set at post under the lock and not resized until the job
 * is FREE again and no worker is inside it (workers == 0). The per-message
 * outputs are written by whichever thread claimed the message; the builder
 * reads them after its increment of done, which orders it after every
 * other decoder's writes (read-modify-writes extend a release sequence).
 */
#include "events/decoder.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/lock.h"
#include "common/log.h"
#include "common/stats.h"
#include "events/record.h"

#define DECODER_SLOTS (DECODER_JOBS + 1)

/* A job's states; job_to() is the only function that changes one
 * (docs/design.md "Events": the decoder's jobs). */
enum job_state { JOB_FREE, JOB_POSTED, JOB_SPENT, JOB_CLEANING };

struct decoder_job {
	/* under decoder.lock */
	enum job_state state;
	unsigned workers;             /* threads inside job_decode() */
	uint64_t seq;                 /* post order: the thread takes the oldest */
	bool complete;                /* every message decoded, batch built */

	/* set at post, fixed while posted */
	const struct decoder_msg *msgs;
	size_t n;
	atomic_size_t next;           /* next message to claim */
	atomic_size_t done;           /* messages decoded */

	/* per message, written by the thread that claimed it */
	struct ev_doc *docs;
	int *rcs;                     /* record_decode's result */
	size_t msg_cap;

	/* written by the builder before complete */
	int err;
	struct ev_batch batch;
	struct obj_meta *ev;
	int64_t *ts, *since;
	size_t ev_cap;
	struct ev_pos *pos;
	size_t pos_cap;

	bool counted;                 /* caller only: stats counted */
};

/* The decoder's counters (common/stats.h): messages or records that are
 * not S3 events, and records ignored (not Put/Copy/Delete, or test events). */
struct decoder_counters {
	stats_counter malformed, ignored;
};

static const struct stats_def decoder_stats[] = {
	STATS_COUNTER(struct decoder_counters, malformed, "events", "malformed"),
	STATS_COUNTER(struct decoder_counters, ignored, "events", "ignored"),
};

struct decoder {
	struct decoder_counters ctr;
	struct stats_group grp;       /* ctr, registered with decoder_new's st */
	pthread_t thread;
	bool running;
	pthread_mutex_t lock;
	pthread_cond_t work_cv;       /* a job posted or released, or stop */
	pthread_cond_t done_cv;       /* a job complete or cleaned, a worker left */
	bool stop;
	uint64_t seq;
	struct decoder_job jobs[DECODER_SLOTS];
};

/* Make room for want elements of size elem in *arr (at least one). */
static int decoder_grow(void **arr, size_t *cap, size_t want, size_t elem)
{
	size_t n = *cap ? *cap : 64;
	void *p;

	if (want <= *cap && *arr)
		return 0;
	while (n < want)
		n *= 2;
	p = realloc(*arr, n * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = n;
	return 0;
}

/* Move every decoded record into one array, in message order, with its
 * message's timestamp and assignment time, and note each partition's next offset. Runs once,
 * on the thread that decoded the last message. */
static void job_build(struct decoder_job *j)
{
	size_t n_ev = 0, k = 0, n_pos = 0;
	size_t ev_cap = j->ev_cap, ts_cap = j->ev_cap, since_cap = j->ev_cap;

	for (size_t i = 0; i < j->n; i++) {
		if (j->rcs[i] == -ENOMEM) {   /* not malformed: decode again later */
			j->err = -ENOMEM;
			return;
		}
		n_ev += j->docs[i].n;
	}
	if (decoder_grow((void **)&j->ev, &ev_cap, n_ev, sizeof *j->ev) < 0 ||
	    decoder_grow((void **)&j->ts, &ts_cap, n_ev, sizeof *j->ts) < 0 ||
	    decoder_grow((void **)&j->since, &since_cap, n_ev, sizeof *j->since) < 0) {
		j->err = -ENOMEM;
		return;
	}
	j->ev_cap = ev_cap < ts_cap ? ev_cap : ts_cap;
	if (since_cap < j->ev_cap)
		j->ev_cap = since_cap;
	for (size_t i = 0; i < j->n; i++) {
		const struct decoder_msg *m = &j->msgs[i];
		struct ev_doc *doc = &j->docs[i];
		size_t p;

		if (doc->n) {
			memcpy(&j->ev[k], doc->ev, doc->n * sizeof *doc->ev);
			for (size_t r = 0; r < doc->n; r++) {
				j->ts[k + r] = m->timestamp_ms;
				j->since[k + r] = m->since_ms;
			}
			k += doc->n;
			free(doc->ev);    /* the records are the batch's now */
			doc->ev = NULL;
			doc->n = 0;
		}
		for (p = 0; p < n_pos; p++)
			if (j->pos[p].partition == m->partition &&
			    (j->pos[p].topic == m->topic || strcmp(j->pos[p].topic, m->topic) == 0))
				break;
		if (p == n_pos)
			j->pos[n_pos++] = (struct ev_pos){ m->topic, m->partition, m->offset + 1 };
		else if (m->offset + 1 > j->pos[p].next)
			j->pos[p].next = m->offset + 1;
	}
	j->batch = (struct ev_batch){ .ev = j->ev, .ts_ms = j->ts, .since_ms = j->since,
				      .n_ev = n_ev, .pos = j->pos, .n_pos = n_pos,
				      .n_msgs = j->n };
}

/* Claim and decode messages of j until none is left unclaimed; the thread
 * that decodes the last one builds the batch and wakes the waiters. */
static void job_decode(struct decoder *d, struct decoder_job *j)
{
	for (;;) {
		size_t i = atomic_fetch_add(&j->next, 1);

		if (i >= j->n)
			return;
		j->rcs[i] = record_decode(j->msgs[i].payload, j->msgs[i].len, &j->docs[i]);
		if (atomic_fetch_add(&j->done, 1) + 1 == j->n) {
			job_build(j);
			mod_lock(&d->lock);
			j->complete = true;
			pthread_cond_broadcast(&d->done_cv);
			mod_unlock(&d->lock);
		}
	}
}

/* Free what a released job holds (its state is CLEANING: only this thread
 * touches it). */
static void job_clean(struct decoder_job *j)
{
	for (size_t k = 0; k < j->batch.n_ev; k++)
		obj_meta_release(&j->ev[k]);
	for (size_t i = 0; i < j->n; i++)
		if (j->docs[i].ev)    /* not moved: the build failed */
			ev_doc_release(&j->docs[i]);
	memset(&j->batch, 0, sizeof j->batch);
}

/* Count and log what the batch skipped, in message order. */
static void job_count(struct decoder *d, const struct decoder_job *j)
{
	for (size_t i = 0; i < j->n; i++) {
		const struct decoder_msg *m = &j->msgs[i];
		const struct ev_doc *doc = &j->docs[i];

		if (j->rcs[i] < 0 || doc->n_malformed) {
			stats_add(&d->ctr.malformed, doc->n_malformed ? doc->n_malformed : 1);
			log_warn("%s/%d offset %lld: malformed event skipped: %s", m->topic,
				 (int)m->partition, (long long)m->offset,
				 doc->err[0] ? doc->err : "not an S3 event");
		}
		if (doc->n_ignored)
			stats_add(&d->ctr.ignored, doc->n_ignored);
	}
}

/* Move j from the state `from` to `to`, the one step the table allows
 * after `from`; d->lock held. */
static void job_to(struct decoder_job *j, enum job_state from, enum job_state to)
{
	static const enum job_state next[] = {
		[JOB_FREE] = JOB_POSTED, [JOB_POSTED] = JOB_SPENT,
		[JOB_SPENT] = JOB_CLEANING, [JOB_CLEANING] = JOB_FREE,
	};
	assert(j->state == from && next[from] == to);
	(void)from;
	j->state = to;
}

/* The oldest posted job with messages left to claim; lock held. */
static struct decoder_job *decoder_next_posted(struct decoder *d)
{
	struct decoder_job *best = NULL;

	for (size_t i = 0; i < DECODER_SLOTS; i++) {
		struct decoder_job *j = &d->jobs[i];

		if (j->state == JOB_POSTED && atomic_load(&j->next) < j->n &&
		    (!best || j->seq < best->seq))
			best = j;
	}
	return best;
}

static struct decoder_job *decoder_find(struct decoder *d, enum job_state state)
{
	for (size_t i = 0; i < DECODER_SLOTS; i++)
		if (d->jobs[i].state == state)
			return &d->jobs[i];
	return NULL;
}

/* Clean a SPENT job on this thread; lock held on entry and on return. */
static void decoder_clean(struct decoder *d, struct decoder_job *j)
{
	job_to(j, JOB_SPENT, JOB_CLEANING);
	mod_unlock(&d->lock);
	job_clean(j);
	mod_lock(&d->lock);
	job_to(j, JOB_CLEANING, JOB_FREE);
	pthread_cond_broadcast(&d->done_cv);
}

/* The decoder thread: decode posted jobs, oldest first; clean spent ones
 * when there is nothing to decode. */
static void *decoder_main(void *arg)
{
	struct decoder *d = arg;

	mod_lock(&d->lock);
	while (!d->stop) {
		struct decoder_job *j = decoder_next_posted(d);

		if (j) {
			j->workers++;
			mod_unlock(&d->lock);
			job_decode(d, j);
			mod_lock(&d->lock);
			if (--j->workers == 0)
				pthread_cond_broadcast(&d->done_cv);
		} else if ((j = decoder_find(d, JOB_SPENT))) {
			decoder_clean(d, j);
		} else {
			pthread_cond_wait(&d->work_cv, &d->lock);
		}
	}
	mod_unlock(&d->lock);
	return NULL;
}

int decoder_new(struct stats *st, struct decoder **out)
{
	struct decoder *d = calloc(1, sizeof *d);
	int rc;

	*out = NULL;
	if (!d)
		return -ENOMEM;
	stats_group_add(st, &d->grp, decoder_stats,
			sizeof decoder_stats / sizeof decoder_stats[0], &d->ctr);
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->work_cv, NULL);
	pthread_cond_init(&d->done_cv, NULL);
	for (size_t i = 0; i < DECODER_SLOTS; i++) {
		atomic_init(&d->jobs[i].next, 0);
		atomic_init(&d->jobs[i].done, 0);
	}
	rc = pthread_create(&d->thread, NULL, decoder_main, d);
	if (rc)
		log_warn("events: no decoder thread (%s): decoding on the consumer thread",
			 strerror(rc));
	d->running = rc == 0;
	*out = d;
	return 0;
}

void decoder_free(struct decoder *d)
{
	if (!d)
		return;
	if (d->running) {
		mod_lock(&d->lock);
		d->stop = true;
		pthread_cond_broadcast(&d->work_cv);
		mod_unlock(&d->lock);
		pthread_join(d->thread, NULL);
	}
	for (size_t i = 0; i < DECODER_SLOTS; i++) {
		struct decoder_job *j = &d->jobs[i];

		if (j->state == JOB_SPENT)
			job_clean(j);
		free(j->docs);
		free(j->rcs);
		free(j->ev);
		free(j->ts);
		free(j->since);
		free(j->pos);
	}
	stats_group_remove(&d->grp);
	pthread_cond_destroy(&d->done_cv);
	pthread_cond_destroy(&d->work_cv);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

struct decoder_job *decoder_post(struct decoder *d, const struct decoder_msg *msgs, size_t n)
{
	struct decoder_job *j;
	size_t docs_cap, rcs_cap;

	if (n == 0)
		return NULL;
	mod_lock(&d->lock);
	for (;;) {
		size_t posted = 0;

		for (size_t i = 0; i < DECODER_SLOTS; i++)
			posted += d->jobs[i].state == JOB_POSTED;
		if (posted >= DECODER_JOBS) {
			j = NULL;             /* the caller's bug */
			break;
		}
		if ((j = decoder_find(d, JOB_FREE)))
			break;
		if ((j = decoder_find(d, JOB_SPENT))) {
			decoder_clean(d, j);
			break;
		}
		pthread_cond_wait(&d->done_cv, &d->lock);   /* one is being cleaned */
	}
	while (j && j->workers)       /* the thread still leaving its last claim */
		pthread_cond_wait(&d->done_cv, &d->lock);
	docs_cap = rcs_cap = j ? j->msg_cap : 0;
	if (j && (decoder_grow((void **)&j->docs, &docs_cap, n, sizeof *j->docs) < 0 ||
		  decoder_grow((void **)&j->rcs, &rcs_cap, n, sizeof *j->rcs) < 0 ||
		  decoder_grow((void **)&j->pos, &j->pos_cap, n, sizeof *j->pos) < 0))
		j = NULL;
	else if (j)
		j->msg_cap = docs_cap < rcs_cap ? docs_cap : rcs_cap;
	if (j) {
		j->msgs = msgs;
		j->n = n;
		j->seq = ++d->seq;
		j->complete = false;
		j->err = 0;
		j->counted = false;
		atomic_store(&j->next, 0);
		atomic_store(&j->done, 0);
		job_to(j, JOB_FREE, JOB_POSTED);
		pthread_cond_signal(&d->work_cv);
	}
	mod_unlock(&d->lock);
	return j;
}

/* Decode along, then wait until the job is complete: its messages are not
 * read any more afterwards. */
static void decoder_wait(struct decoder *d, struct decoder_job *j)
{
	job_decode(d, j);
	mod_lock(&d->lock);
	while (!j->complete)
		pthread_cond_wait(&d->done_cv, &d->lock);
	mod_unlock(&d->lock);
}

int decoder_finish(struct decoder *d, struct decoder_job *j, struct ev_batch **out)
{
	decoder_wait(d, j);
	if (j->err)
		return j->err;
	if (!j->counted) {
		job_count(d, j);
		j->counted = true;
	}
	*out = &j->batch;
	return 0;
}

void decoder_release(struct decoder *d, struct decoder_job *j)
{
	decoder_wait(d, j);
	mod_lock(&d->lock);
	job_to(j, JOB_POSTED, JOB_SPENT);
	if (d->running)
		pthread_cond_signal(&d->work_cv);
	else
		decoder_clean(d, j);
	mod_unlock(&d->lock);
}
