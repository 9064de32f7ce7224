/* core_drain.c — the commit points of a descriptor (close, fsync) and the
 * drain of write-back views (docs/semantics.md "Write-back").
 *
 * DESIGN. In a view with "write_back", close seals the file instead of
 * uploading it (core_ofile_seal: durable in the burst buffer, journaled
 * "commit", indexed as this gateway's own), and the file's ofile joins the
 * drain's queue, which holds a reference on it: the ofile stays in the
 * core's table after its last descriptor, so this mount lists it and any
 * descriptor reads its staged bytes (read-your-writes as for an open
 * file). drain_streams workers publish the queue oldest close first:
 * each takes the oldest entry that is not being uploaded and whose time
 * has come (drain_delay after its close; after a failure, a backoff of 1,
 * 2, 4 ... 60 s; during a burst, below), and uploads it with the ofile's
 * commit (core_commit.c), which serializes against a close, an unlink or a
 * rename of the same file. A file sealed again while its upload runs is
 * uploaded again after it (`again`); one sealed again before its upload
 * began is uploaded once. An unlinked file is dropped from the queue
 * without an upload.
 *
 * Bursts: while files are being closed one after another (the last close
 * less than quiet_ms ago, DRAIN_QUIET_MS by default), a file closed less
 * than hold_ms ago (DRAIN_HOLD_MS) waits, so that the writing program has
 * the CPU, the disk and the network to itself, and the drain runs behind
 * the burst: at its end, or on the files older than hold_ms while it goes
 * on. A burst holds nothing once half the staging budget is used, so that
 * writes never wait for room while the drain idles; a sync, an fsync and
 * a stop do not wait.
 *
 * Every upload is checked against the version the file was based on (its
 * ETag at open, none for a new file, this gateway's last upload after
 * one): a single PUT carries If-Match: base (If-None-Match: * for none)
 * where the store honours it (the probe at mount, core_deps.cond); else,
 * for uploads in parts, and after a refusal, a HEAD just before. If
 * another client wrote the key in between, the local bytes go to
 * recovered/ (stage_file_set_aside), the file no longer stands for its
 * name (core_ofile_displace) and the store's version is indexed: counted
 * in drain.conflicts. A base another client deleted is published over
 * (docs/semantics.md). fsync takes the same path (publish).
 *
 * fsync of a write-back file publishes it at once. core_drain_sync
 * publishes what was pending when it began (everything, or under one
 * path) and waits for that only: a file closed again and again meanwhile
 * keeps no sync waiting. At the core's end the drain runs for up to
 * stop_drain seconds, then cancels the uploads in flight (the workers
 * watch d->cancel, common/s3.h: a request ends within about a second) and
 * joins its workers; what is left, the cancelled uploads with it, stays
 * journaled "commit" for the next start: its recovery leaves such files
 * staged, and core_drain_adopt_all queues them again after the mount
 * (before its first request), due at once, each under the view that
 * shows its key and checked against the base its journal names. (Workers
 * left running past the stop instead would write the journal and the
 * index after the core and the stage are freed.)
 *
 * The queue. An entry is a pending file: found from its ofile
 * (of->drain), it sits in a list in the order of its first close
 * (`order`: the listing, the oldest age, a sync's start walk) and is in
 * exactly one state (enum drain_state). The four waiting states are four
 * binary heaps, so that a close, an upload's end and a worker's choice
 * cost O(log n), not a walk of the backlog:
 *
 *   state           holds                                  heap, ordered by
 *   WAIT_OK         no failure, its time not come (delay)  wait_ok, ready time
 *   DUE             no failure, due (or flushed by a sync) due, oldest close
 *   WAIT_ERR        failed, its backoff not over           wait_err, ready time
 *   RETRY           failed, its backoff over               retry, oldest close
 *   UPLOADING       a worker publishes it                  -
 *   UPLOADING_AGAIN the same, closed again meanwhile       -
 *   WRITING         a writer has it open: only a closed    -
 *                   version is published
 *   LEAVING         published, conflicted or dropped: its  -
 *                   reference being put, freed next
 *
 * ent_to is the one function that changes an entry's state: it asserts
 * the state it leaves, moves the entry between heaps and keeps the
 * uploading gauge. "waiting" below is whichever of the four its error
 * and ready time say (waiting_state).
 *
 *   from                 event                          to               function
 *   (new)                a first close                  waiting          enqueue
 *   (new)                taken up after a start         waiting (due)    enqueue_due
 *   waiting              closed again                   waiting (time    enqueue
 *                                                       renewed)
 *   WRITING              its writer's last close        waiting          enqueue
 *   UPLOADING            closed again                   UPLOADING_AGAIN  enqueue
 *   WAIT_OK, WAIT_ERR    its time comes                 DUE, RETRY       next_ready
 *   DUE (not flushed)    no sync runs, time not come    WAIT_OK          next_ready
 *   WAIT_OK              a sync begins                  DUE              flush_begin
 *   WAIT_ERR, RETRY      a sync begins                  RETRY (now)      waiter_begin
 *   DUE, RETRY           a worker takes it              UPLOADING        take
 *   UPLOADING*           published, conflict, nothing   LEAVING          upload_ended
 *                        to publish (not AGAIN)
 *   UPLOADING_AGAIN      published                      waiting          upload_ended
 *   UPLOADING*           failed                         WAIT_ERR, RETRY  upload_ended
 *   UPLOADING            a writer has it open           WRITING          upload_ended
 *   UPLOADING_AGAIN      a writer had it open           waiting          upload_ended
 *   waiting, WRITING     fsync published it             LEAVING          publish_now
 *
 * An entry that is done leaves in two steps: its ofile is detached (the
 * gauges no longer count it, state LEAVING) and put with no lock held,
 * then the entry goes (ent_free) and the syncs waiting for it count it
 * off, so that a sync that returns finds the file gone from the core's
 * table too.
 *
 * next_ready takes the older of due's top and retry's top; a burst holds
 * due's top, and then every other entry of due, whose closes are later.
 * With no sync running, a top of due whose time has not come goes back
 * to wait_ok. The gauges (pending files and bytes, uploading, oldest)
 * are running figures.
 *
 * Syncs. Every close takes the next number of d->seq; an entry's
 * first_seq is the number of its oldest close not published. A sync takes
 * a waiter (one of DRAIN_WAITERS bits) holding the number at its start,
 * marks the entries it waits for (under its path, first_seq not after
 * that number) in one walk and counts them. An entry counts itself off
 * when it leaves the queue, or when an upload ends after a close during
 * it that came after the sync began (first_seq = that close's number):
 * that upload began after the sync's closes and carried them. The sync
 * returns when its count is 0, or fails once each entry it counts has
 * failed since it began or is open for writing (a writer's file is not
 * published: its close queues it).
 *
 * Lock: drain.lock (a state lock) guards the queue, the heaps, the
 * waiters, of->drain and the gauges; the core's ofile_lock may be taken
 * under it (an ofile's names, its reference count), nothing else; no S3
 * request, sync or ofile release runs under it.
 */
#include "fuse/core_int.h"

#include <assert.h>

#include "common/lock.h"
#include "common/log.h"
#include "common/s3.h"
#include "common/stats.h"
#include "sync/stage.h"
#include "views/filter.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define DRAIN_MAX_STREAMS 64
#define DRAIN_BACKOFF_MAX_S 60
#define DRAIN_QUIET_MS 100           /* closes this close together: a burst */
#define DRAIN_HOLD_MS 3000           /* how long a burst holds a closed file */
#define DRAIN_WAITERS 64             /* syncs waiting at once (bits) */

struct drain_ent;

/* A queue entry's state (the table above). */
enum drain_state {
	DS_NEW,                      /* made, not queued yet (calloc's zero) */
	DS_WAIT_OK,
	DS_DUE,
	DS_WAIT_ERR,
	DS_RETRY,
	DS_UPLOADING,
	DS_UPLOADING_AGAIN,
	DS_WRITING,
	DS_LEAVING,
};
#define DS(s) (1u << (s))
#define DS_WAITING (DS(DS_WAIT_OK) | DS(DS_DUE) | DS(DS_WAIT_ERR) | DS(DS_RETRY))
#define DS_BUSY (DS(DS_UPLOADING) | DS(DS_UPLOADING_AGAIN))

struct drain_heap {                  /* a binary min-heap of entries */
	struct drain_ent **v;
	size_t n, cap;
	bool by_time;                /* ready time first; else oldest close */
};

struct drain_ent {
	struct ofile *of;            /* a reference the drain holds; of->drain;
				      * NULL: leaving, its reference being put */
	uint64_t order;              /* d->seq of its first close */
	uint64_t first_seq;          /* d->seq of its oldest close not published */
	uint64_t again_seq;          /* of the first close during the upload
				      * (UPLOADING_AGAIN) */
	int64_t closed_ns;           /* its first close (grows with order) */
	int64_t ready_ns;            /* not before (delay, backoff) */
	uint64_t bytes;              /* its size at its last close */
	unsigned tries;
	int err;                     /* the last failure, 0: none */
	enum drain_state state;      /* changed by ent_to only */
	size_t hpos;                 /* its index in its state's heap */
	uint64_t waited;             /* the waiters (bits) counting it */
	uint64_t failed_for;         /* of those, the ones it failed for */
	struct drain_ent *prev, *next;   /* the queue, oldest close first */
};

struct drain_waiter {                /* a core_drain_sync */
	uint64_t seq;                /* the closes up to this number */
	unsigned left;               /* entries it waits for */
	unsigned failed;             /* of those, failed since it began */
};

struct drain_counters {
	stats_counter pending_files, pending_bytes, uploading, oldest_seconds;
	stats_counter done, done_bytes, failed, conflicts;
	stats_counter blocked_ms;    /* writes waited for room (the stage's) */
	stats_counter bytes_per_second;   /* uploaded over the last RATE_S seconds */
};

static const struct stats_def drain_stats[] = {
	STATS_GAUGE(struct drain_counters, pending_files, "drain", "pending_files"),
	STATS_GAUGE(struct drain_counters, pending_bytes, "drain", "pending_bytes"),
	STATS_GAUGE(struct drain_counters, uploading, "drain", "uploading"),
	STATS_GAUGE(struct drain_counters, oldest_seconds, "drain", "oldest_seconds"),
	STATS_COUNTER(struct drain_counters, done, "drain", "done"),
	STATS_COUNTER(struct drain_counters, done_bytes, "drain", "done_bytes"),
	STATS_COUNTER(struct drain_counters, failed, "drain", "failed"),
	STATS_COUNTER(struct drain_counters, conflicts, "drain", "conflicts"),
	STATS_MS(struct drain_counters, blocked_ms, "drain", "blocked_ms",
		 "facetfs_drain_blocked_seconds_total"),
	STATS_GAUGE(struct drain_counters, bytes_per_second, "drain", "bytes_per_second"),
};

#define RATE_S 10                    /* the rate's window, seconds */

struct core_drain {
	struct core *c;
	struct core_drain_conf conf;
	pthread_mutex_t lock;
	pthread_cond_t work;         /* an entry is ready, or stop */
	pthread_cond_t progress;     /* an upload ended, or a waiter left */
	struct drain_ent *head, *tail;   /* oldest close first */
	struct drain_heap wait_ok, due, wait_err, retry;
	uint64_t seq;                /* closes so far */
	uint64_t files, bytes;       /* in the queue (gauges) */
	unsigned busy;               /* entries being uploaded */
	uint64_t steps;              /* entries the queue visited (tests) */
	struct drain_waiter waiter[DRAIN_WAITERS];
	uint64_t waiters;            /* the waiter slots in use (bits) */
	bool flush;                  /* delays ignored: a sync or a stop */
	unsigned syncing;            /* core_drain_sync calls waiting */
	bool stop;
	atomic_bool cancel;          /* the workers' S3 requests end (a stop) */
	int64_t last_close_ns;       /* the last enqueue: a burst runs while
				      * the next comes within quiet_ms */
	unsigned n_threads;
	pthread_t tid[DRAIN_MAX_STREAMS];
	struct drain_counters ctr;
	struct stats_group grp;
	uint64_t win[RATE_S];        /* bytes uploaded in each of the last
				      * RATE_S seconds (win[s % RATE_S]) */
	int64_t win_s[RATE_S];       /* the second each slot counts */
};

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Wait on cv (d->lock held) for at most ns (1 s when ns is 0 or more). */
static void cond_wait_for(struct core_drain *d, pthread_cond_t *cv, int64_t ns)
{
	if (ns <= 0 || ns > 1000000000)
		ns = 1000000000;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t t = (int64_t)ts.tv_nsec + ns;
	ts.tv_sec += t / 1000000000;
	ts.tv_nsec = t % 1000000000;
	pthread_cond_timedwait(cv, &d->lock, &ts);
}

/* ---- the heaps (d->lock held) ------------------------------------------ */

static bool ent_before(const struct drain_heap *h, const struct drain_ent *a,
		       const struct drain_ent *b)
{
	if (h->by_time && a->ready_ns != b->ready_ns)
		return a->ready_ns < b->ready_ns;
	return a->order < b->order;
}

static void heap_set(struct drain_heap *h, size_t i, struct drain_ent *e)
{
	h->v[i] = e;
	e->hpos = i;
}

static void heap_up(struct core_drain *d, struct drain_heap *h, size_t i)
{
	struct drain_ent *e = h->v[i];
	while (i > 0 && ent_before(h, e, h->v[(i - 1) / 2])) {
		heap_set(h, i, h->v[(i - 1) / 2]);
		i = (i - 1) / 2;
		d->steps++;
	}
	heap_set(h, i, e);
}

static void heap_down(struct core_drain *d, struct drain_heap *h, size_t i)
{
	struct drain_ent *e = h->v[i];
	for (;;) {
		size_t k = 2 * i + 1;
		if (k >= h->n)
			break;
		if (k + 1 < h->n && ent_before(h, h->v[k + 1], h->v[k]))
			k++;
		if (!ent_before(h, h->v[k], e))
			break;
		heap_set(h, i, h->v[k]);
		i = k;
		d->steps++;
	}
	heap_set(h, i, e);
}

static struct drain_ent *heap_top(const struct drain_heap *h)
{
	return h->n ? h->v[0] : NULL;
}

/* e (in no heap) into h; room was reserved (heaps_reserve). */
static void heap_push(struct core_drain *d, struct drain_heap *h, struct drain_ent *e)
{
	d->steps++;
	heap_set(h, h->n++, e);
	heap_up(d, h, e->hpos);
}

/* e out of h, which holds it. */
static void heap_remove(struct core_drain *d, struct drain_heap *h, struct drain_ent *e)
{
	size_t i = e->hpos;
	d->steps++;
	struct drain_ent *last = h->v[--h->n];
	if (i == h->n)
		return;
	heap_set(h, i, last);
	heap_up(d, h, i);
	heap_down(d, h, last->hpos);
}

/* The heap of a waiting state, NULL for the others. */
static struct drain_heap *state_heap(struct core_drain *d, enum drain_state s)
{
	switch (s) {
	case DS_WAIT_OK:
		return &d->wait_ok;
	case DS_DUE:
		return &d->due;
	case DS_WAIT_ERR:
		return &d->wait_err;
	case DS_RETRY:
		return &d->retry;
	default:
		return NULL;
	}
}

/* The one change of e's state (the table above): from must hold its
 * state now (DS() bits); out of that state's heap, into to's (again,
 * for a waiting state left for itself: its order changed), and the
 * count of entries being uploaded kept. */
static void ent_to(struct core_drain *d, struct drain_ent *e, unsigned from,
		   enum drain_state to)
{
	assert(from & DS(e->state));
	assert(e->state != DS_LEAVING);
	struct drain_heap *h = state_heap(d, e->state);
	if (h)
		heap_remove(d, h, e);
	d->busy -= (DS(e->state) & DS_BUSY) != 0;
	d->busy += (DS(to) & DS_BUSY) != 0;
	e->state = to;
	if ((h = state_heap(d, to)))
		heap_push(d, h, e);
}

/* Room in every heap for n entries (any may hold them all): 0 or -ENOMEM. */
static int heaps_reserve(struct core_drain *d, size_t n)
{
	struct drain_heap *hs[] = { &d->wait_ok, &d->due, &d->wait_err, &d->retry };
	for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) {
		if (hs[i]->cap >= n)
			continue;
		size_t cap = hs[i]->cap ? hs[i]->cap * 2 : 64;
		if (cap < n)
			cap = n;
		struct drain_ent **v = realloc(hs[i]->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		hs[i]->v = v;
		hs[i]->cap = cap;
	}
	return 0;
}

/* The waiting state e's error and ready time say (table above). */
static enum drain_state waiting_state(const struct core_drain *d,
				      const struct drain_ent *e, int64_t now)
{
	if (e->err)
		return e->ready_ns <= now ? DS_RETRY : DS_WAIT_ERR;
	return d->flush || e->ready_ns <= now ? DS_DUE : DS_WAIT_OK;
}

/* e, from one of the states in from, waits again. */
static void place(struct core_drain *d, struct drain_ent *e, unsigned from, int64_t now)
{
	ent_to(d, e, from, waiting_state(d, e, now));
}

/* A sync begins: every entry without a failure is due now. */
static void flush_begin(struct core_drain *d)
{
	struct drain_ent *e;
	while ((e = heap_top(&d->wait_ok)))
		ent_to(d, e, DS(DS_WAIT_OK), DS_DUE);
}

/* ---- the waiters of syncs (d->lock held) ------------------------------- */

static unsigned bit_index(uint64_t m)
{
	return (unsigned)__builtin_ctzll(m);
}

/* e left the queue (gone), or an upload of it ended and its first_seq
 * moved on: the waiters it no longer concerns count it off. */
static void waiters_settle(struct core_drain *d, struct drain_ent *e, bool gone)
{
	for (uint64_t m = e->waited; m; m &= m - 1) {
		unsigned b = bit_index(m);
		struct drain_waiter *w = &d->waiter[b];
		uint64_t bit = 1ull << b;
		if (!gone && e->first_seq <= w->seq)
			continue;
		e->waited &= ~bit;
		w->left--;
		if (e->failed_for & bit) {
			e->failed_for &= ~bit;
			w->failed--;
		}
	}
}

/* An upload of e failed: each of its waiters counts it failed (once
 * until it is tried again). */
static void waiters_failed(struct core_drain *d, struct drain_ent *e)
{
	for (uint64_t m = e->waited & ~e->failed_for; m; m &= m - 1)
		d->waiter[bit_index(m)].failed++;
	e->failed_for = e->waited;
}

/* e is tried again: not failed for anyone until that try ends. */
static void waiters_retry(struct core_drain *d, struct drain_ent *e)
{
	for (uint64_t m = e->failed_for; m; m &= m - 1)
		d->waiter[bit_index(m)].failed--;
	e->failed_for = 0;
}

/* ---- the queue (d->lock held) ------------------------------------------ */

/* The gauges from the running figures. */
static void gauges_locked(struct core_drain *d)
{
	int64_t now = now_ns();
	stats_set(&d->ctr.pending_files, d->files);
	stats_set(&d->ctr.pending_bytes, d->bytes);
	stats_set(&d->ctr.uploading, d->busy);
	stats_set(&d->ctr.oldest_seconds, d->head ? (uint64_t)((now - d->head->closed_ns) /
								  1000000000) : 0);
	struct stage_counters sc;
	stage_counters_get(d->c->d.stage, &sc);
	stats_set(&d->ctr.blocked_ms, sc.blocked_ms);
	int64_t sec = now / 1000000000;
	uint64_t sum = 0;
	for (unsigned i = 0; i < RATE_S; i++)
		if (sec - d->win_s[i] < RATE_S)
			sum += d->win[i];
	stats_set(&d->ctr.bytes_per_second, sum / RATE_S);
}

/* size bytes uploaded now, for the rate (d->lock held). */
static void rate_add(struct core_drain *d, uint64_t size)
{
	int64_t sec = now_ns() / 1000000000;
	unsigned i = (unsigned)(sec % RATE_S);
	if (d->win_s[i] != sec) {
		d->win_s[i] = sec;
		d->win[i] = 0;
	}
	d->win[i] += size;
}

/* When a burst holds due's top until (0: none holds it). */
static int64_t burst_until(struct core_drain *d, const struct drain_ent *e, int64_t now)
{
	int64_t burst_end = d->last_close_ns + (int64_t)d->conf.quiet_ms * 1000000;
	if (d->flush || burst_end <= now)
		return 0;
	/* half the budget staged: the burst holds nothing */
	struct stage_counters sc;
	stage_counters_get(d->c->d.stage, &sc);
	if (sc.used_bytes >= sc.max_bytes / 2)
		return 0;
	int64_t held = e->closed_ns + (int64_t)d->conf.hold_ms * 1000000;
	return burst_end < held ? burst_end : held;
}

/* The oldest entry a worker may take now, or NULL; *wait_ns: until the
 * next one may be ready (0: none waits). */
static struct drain_ent *next_ready(struct core_drain *d, int64_t *wait_ns)
{
	int64_t now = now_ns();
	struct drain_ent *e;
	while ((e = heap_top(&d->wait_ok)) && e->ready_ns <= now)
		ent_to(d, e, DS(DS_WAIT_OK), DS_DUE);
	while ((e = heap_top(&d->wait_err)) && e->ready_ns <= now)
		ent_to(d, e, DS(DS_WAIT_ERR), DS_RETRY);
	while (!d->flush && (e = heap_top(&d->due)) && e->ready_ns > now)
		ent_to(d, e, DS(DS_DUE), DS_WAIT_OK);    /* a sync's flush is over */
	int64_t until = 0;
	struct drain_ent *pick = heap_top(&d->due), *r = heap_top(&d->retry);
	if (pick && (until = burst_until(d, pick, now)) > now)
		pick = NULL;
	if (r && (!pick || r->order < pick->order))
		pick = r;
	*wait_ns = 0;
	if (pick)
		return pick;
	int64_t next[3] = { until, 0, 0 };
	if ((e = heap_top(&d->wait_ok)))
		next[1] = e->ready_ns;
	if ((e = heap_top(&d->wait_err)))
		next[2] = e->ready_ns;
	for (int i = 0; i < 3; i++)
		if (next[i] > now && (!*wait_ns || next[i] - now < *wait_ns))
			*wait_ns = next[i] - now;
	return NULL;
}

/* A worker takes e. */
static void take(struct core_drain *d, struct drain_ent *e)
{
	ent_to(d, e, DS(DS_DUE) | DS(DS_RETRY), DS_UPLOADING);
	waiters_retry(d, e);
}

/* e is done: its ofile detached and returned, for the caller to put
 * with no lock held, then to free e (ent_free). */
static struct ofile *ent_detach(struct core_drain *d, struct drain_ent *e)
{
	ent_to(d, e, DS_WAITING | DS_BUSY | DS(DS_WRITING), DS_LEAVING);
	d->files--;
	d->bytes -= e->bytes;
	struct ofile *of = e->of;
	of->drain = NULL;
	e->of = NULL;
	return of;
}

/* A detached e leaves the queue: its waiters count it off. */
static void ent_free(struct core_drain *d, struct drain_ent *e)
{
	waiters_settle(d, e, true);
	if (e->prev)
		e->prev->next = e->next;
	else
		d->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		d->tail = e->prev;
	free(e);
}

/* Whether another client wrote of's key since the version the file is
 * based on: then its bytes are set aside (recovered/) and the store's
 * version indexed. 1: conflict handled, 0: go on, -errno: the HEAD
 * failed (retried later). */
static int conflict_check(struct core *c, struct ofile *of, bool by_writer)
{
	char bucket[256], key[4096], base[72];
	mod_lock(&c->ofile_lock);
	snprintf(bucket, sizeof bucket, "%s", of->bucket);
	snprintf(key, sizeof key, "%s", of->key);
	snprintf(base, sizeof base, "%s", of->base_etag);
	mod_unlock(&c->ofile_lock);
	if (strcmp(base, CORE_BASE_ANY) == 0)
		return 0;            /* its base is not known: not checked */
	struct obj_meta cur = { 0 };
	int rc = s3_head(c->d.s3, bucket, key, &cur);
	if (rc == -ENOENT)
		return 0;            /* none there (deleted meanwhile: nothing lost) */
	if (rc < 0)
		return rc;
	bool theirs = strcmp(cur.etag, base) != 0;
	char ours[33];
	if (theirs && stage_file_md5(of->sf, ours) == 0 && !strcasecmp(ours, cur.etag) &&
	    cur.size == stage_file_size(of->sf)) {
		/* These very bytes: an upload of this file that reached S3
		 * before a stop cancelled it or a crash, the journal not
		 * removed. It is the base now; not another client's. */
		log_info("write-back: %s/%s already holds this file's bytes (ETag %s): "
			 "an upload before a stop or a crash", bucket, key, cur.etag);
		mod_lock(&c->ofile_lock);
		snprintf(of->base_etag, sizeof of->base_etag, "%s", cur.etag);
		mod_unlock(&c->ofile_lock);
		theirs = false;
	}
	if (theirs) {
		char *note = NULL;
		if (asprintf(&note, "facetfs-conflict 1\nbucket %s\nkey %s\n"
			     "based_on %s\nstore %s\n", bucket, key, *base ? base : "none",
			     cur.etag) < 0)
			note = NULL;
		rc = note ? stage_file_set_aside(of->sf, note) : -ENOMEM;
		free(note);
		if (rc == 0 && !by_writer)   /* the name shows the store's version */
			core_ofile_displace(c, of);
		if (rc == 0) {
			log_warn("write-back: %s/%s was written by another client (ETag %s, "
				 "this file was based on %s): the local version is in "
				 "recovered/, the store's is kept", bucket, key, cur.etag,
				 *base ? base : "none");
			cur.flags |= OBJ_HAS_META;
			if (core_index_local(c, &cur) < 0)
				log_warn("write-back: index update of %s/%s after a conflict "
					 "failed: the event will bring it", bucket, key);
		}
	}
	obj_meta_release(&cur);
	return rc < 0 ? rc : theirs;
}

enum { PUB_DONE, PUB_CONFLICT, PUB_NOTHING, PUB_WRITING };

/* Upload e's file: PUB_DONE, PUB_CONFLICT (set aside), PUB_NOTHING (not
 * dirty: published by an fsync; or unlinked: its data dropped),
 * PUB_WRITING (open for writing: only a closed version is published; its
 * last writer's close queues it again), or -errno (kept, retried). The
 * check and the upload run as one commit of the file: a rename, an
 * unlink or a writer's open waits for both. */
static int publish(struct core *c, struct ofile *of, bool by_writer)
{
	switch (core_ofile_publish_begin(c, of, by_writer)) {
	case CORE_PUB_GONE:
		stage_file_drop(of->sf);     /* deleted: never uploaded */
		return PUB_NOTHING;
	case CORE_PUB_WRITING:
		return PUB_WRITING;
	}
	int rc = PUB_NOTHING;
	if (stage_file_dirty(of->sf)) {
		/* If-Match or If-None-Match where the store honours it; else,
		 * and after a refusal (to learn what the key holds now), a
		 * HEAD just before */
		rc = core_ofile_commit_begun(c, of, true);
		if (rc == -EOPNOTSUPP || rc == -ESTALE) {
			rc = conflict_check(c, of, by_writer);
			if (rc == 0)
				rc = core_ofile_commit_begun(c, of, false);
		}
		rc = rc < 0 ? rc : rc ? PUB_CONFLICT : PUB_DONE;
	}
	core_ofile_commit_end(c, of);
	return rc;
}

/* An upload of e (size bytes) ended with rc (publish's): e waits again,
 * or is detached and its ofile returned to be put (then ent_free). */
static struct ofile *upload_ended(struct core_drain *d, struct drain_ent *e, int rc,
				  uint64_t size)
{
	int64_t now = now_ns();
	if (rc == PUB_WRITING) {
		e->ready_ns = now;
		if (e->state == DS_UPLOADING_AGAIN) {   /* its writer closed meanwhile */
			place(d, e, DS(DS_UPLOADING_AGAIN), now);
		} else {                     /* its writer's close queues it */
			ent_to(d, e, DS(DS_UPLOADING), DS_WRITING);
			waiters_failed(d, e);
		}
		return NULL;
	}
	if (rc < 0) {
		if (rc != -ECANCELED)        /* the stop's: not a failure */
			stats_inc(&d->ctr.failed);
		e->tries++;
		e->err = rc;
		unsigned s = e->tries < 7 ? 1u << (e->tries - 1) : DRAIN_BACKOFF_MAX_S;
		e->ready_ns = now + (int64_t)(s > DRAIN_BACKOFF_MAX_S
					      ? DRAIN_BACKOFF_MAX_S : s) * 1000000000;
		waiters_failed(d, e);
		place(d, e, DS_BUSY, now);
		return NULL;
	}
	if (rc == PUB_CONFLICT)
		stats_inc(&d->ctr.conflicts);
	if (rc == PUB_DONE) {
		stats_inc(&d->ctr.done);
		stats_add(&d->ctr.done_bytes, size);
		rate_add(d, size);
	}
	e->err = 0;
	e->tries = 0;
	if (e->state != DS_UPLOADING_AGAIN || rc != PUB_DONE)
		return ent_detach(d, e);
	/* sealed again during the upload: pending since that close, uploaded
	 * after the delay */
	e->first_seq = e->again_seq;
	waiters_settle(d, e, false);
	e->ready_ns = now + (int64_t)d->conf.delay_s * 1000000000;
	place(d, e, DS(DS_UPLOADING_AGAIN), now);
	return NULL;
}

static void *drain_main(void *arg)
{
	struct core_drain *d = arg;
	s3_cancel_watch(&d->cancel);
	mod_lock(&d->lock);
	while (!d->stop) {
		int64_t wait;
		struct drain_ent *e = next_ready(d, &wait);
		if (!e) {
			cond_wait_for(d, &d->work, wait);
			continue;
		}
		take(d, e);
		struct ofile *of = e->of;
		mod_unlock(&d->lock);
		uint64_t size = stage_file_size(of->sf);
		int rc = publish(d->c, of, false);
		mod_lock(&d->lock);
		struct ofile *put = upload_ended(d, e, rc, size);
		if (put) {
			mod_unlock(&d->lock);
			core_ofile_put(d->c, put);   /* may release the staged file */
			mod_lock(&d->lock);
			ent_free(d, e);
		}
		pthread_cond_broadcast(&d->progress);
	}
	mod_unlock(&d->lock);
	s3_cancel_watch(NULL);
	return NULL;
}

int core_drain_new(struct core *c, const struct core_drain_conf *conf)
{
	struct core_drain *d = calloc(1, sizeof *d);
	if (!d)
		return -ENOMEM;
	d->c = c;
	d->conf = *conf;
	if (!d->conf.streams)
		d->conf.streams = 8;
	if (d->conf.streams > DRAIN_MAX_STREAMS)
		d->conf.streams = DRAIN_MAX_STREAMS;
	if (!d->conf.quiet_ms)
		d->conf.quiet_ms = DRAIN_QUIET_MS;
	if (!d->conf.hold_ms)
		d->conf.hold_ms = DRAIN_HOLD_MS;
	d->wait_ok.by_time = d->wait_err.by_time = true;
	atomic_init(&d->cancel, false);
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->work, NULL);
	pthread_cond_init(&d->progress, NULL);
	stats_group_add(c->d.st, &d->grp, drain_stats,
			sizeof drain_stats / sizeof drain_stats[0], &d->ctr);
	c->drain = d;
	return 0;
}

/* Start the workers on first use (d->lock held). */
static void threads_start(struct core_drain *d)
{
	while (d->n_threads < d->conf.streams &&
	       pthread_create(&d->tid[d->n_threads], NULL, drain_main, d) == 0)
		d->n_threads++;
	if (!d->n_threads)
		log_error("write-back: cannot start a drain thread; files stay "
			  "pending for the next start");
}

/* A new entry for of, closed now as close number seq, due at ready, at
 * the queue's tail (d->lock held; a reference taken). */
static void ent_add(struct core_drain *d, struct drain_ent *n, struct ofile *of,
		    uint64_t seq, uint64_t size, int64_t now, int64_t ready)
{
	mod_lock(&d->c->ofile_lock);
	of->refs++;
	mod_unlock(&d->c->ofile_lock);
	*n = (struct drain_ent){ .of = of, .order = seq, .first_seq = seq,
		.closed_ns = now, .bytes = size, .prev = d->tail, .ready_ns = ready };
	if (d->tail)
		d->tail->next = n;
	else
		d->head = n;
	d->tail = n;
	of->drain = n;
	d->files++;
	d->bytes += size;
	place(d, n, DS(DS_NEW), now);
}

/* of joins the queue (a reference taken), or its entry is refreshed. */
static void enqueue(struct core_drain *d, struct ofile *of)
{
	struct drain_ent *n = calloc(1, sizeof *n);
	uint64_t size = stage_file_size(of->sf);
	mod_lock(&d->lock);
	int64_t now = now_ns();
	d->last_close_ns = now;
	uint64_t seq = ++d->seq;
	struct drain_ent *e = of->drain;
	if (e) {
		d->bytes = d->bytes - e->bytes + size;
		e->bytes = size;
		if (e->state == DS_WRITING)  /* its last writer closed */
			waiters_retry(d, e);
		if (e->state == DS_UPLOADING) {
			e->again_seq = seq;
			ent_to(d, e, DS(DS_UPLOADING), DS_UPLOADING_AGAIN);
		} else if (e->state != DS_UPLOADING_AGAIN) {
			if (!e->err)
				e->ready_ns = now + (int64_t)d->conf.delay_s * 1000000000;
			place(d, e, DS_WAITING | DS(DS_WRITING), now);
		}
	} else if (n && heaps_reserve(d, (size_t)d->files + 1) == 0) {
		ent_add(d, n, of, seq, size, now,
			now + (int64_t)d->conf.delay_s * 1000000000);
		n = NULL;
	} else {
		log_error("write-back: out of memory: %s/%s stays pending until it is "
			  "closed again or the next start", of->bucket, of->key);
	}
	if (!d->n_threads)
		threads_start(d);
	pthread_cond_signal(&d->work);
	mod_unlock(&d->lock);
	free(n);
}

int core_truncate(struct core *c, uint64_t ino, struct core_file *f, uint64_t size)
{
	struct ofile *of = NULL;
	int rc = core_truncate_staged(c, ino, f, size, &of);
	if (!of)
		return rc;
	/* truncate(2) on a path is its own commit point: in a write-back
	 * view a close (sealed and queued: the drain's checked upload) */
	size_t v = core_view_index(c, of->vname);
	bool wb = c->drain && v < core_views(c)->n && view_write_back(core_view(c, v));
	if (rc == 0 && wb) {
		rc = core_ofile_seal(c, of);
		if (rc == 0 && stage_file_dirty(of->sf))
			enqueue(c->drain, of);
	} else if (rc == 0) {
		rc = core_ofile_commit(c, of);
	}
	stage_file_park(of->sf);
	if (core_ofile_writer_end(c, of) && c->drain)
		enqueue(c->drain, of);
	core_ofile_put(c, of);
	return rc;
}

void core_release(struct core *c, struct core_file *f)
{
	struct ofile *of = core_file_close(c, f);
	if (of && c->drain)
		enqueue(c->drain, of);       /* its last writer: published after */
	core_ofile_put(c, of);
}

/* The view of a descriptor now. */
static bool file_write_back(struct core *c, struct core_file *f)
{
	size_t v = core_view_follow(c, &f->view, f->vname);
	return v < core_views(c)->n && view_write_back(core_view(c, v));
}

int core_flush(struct core *c, struct core_file *f)
{
	if (!f->writable)
		return 0;
	if (!c->drain || !file_write_back(c, f))
		return core_ofile_commit(c, f->of);
	int rc = core_ofile_seal(c, f->of);
	if (rc == 0 && stage_file_dirty(f->of->sf))
		enqueue(c->drain, f->of);
	return rc;
}

int core_drain_reseal(struct core *c, struct ofile *of)
{
	struct core_drain *d = c->drain;
	if (!d)
		return 0;
	mod_lock(&d->lock);
	bool queued = of->drain != NULL;
	mod_unlock(&d->lock);
	if (!queued && core_ofile_writing(c, of))
		return 0;            /* open for writing: its close seals it */
	int rc = core_ofile_seal(c, of);
	if (rc == 0 && stage_file_dirty(of->sf))
		enqueue(d, of);
	return rc;
}

/* Publish of now (fsync of a write-back file), by the drain's checked
 * path: its entry, if any, is done when the upload succeeds. A conflict
 * (another client wrote the key since the file's base: the local bytes
 * went to recovered/) is the fsync's EIO. */
static int publish_now(struct core *c, struct ofile *of)
{
	struct core_drain *d = c->drain;
	int rc = publish(c, of, true);
	if (rc < 0)
		return rc;
	struct ofile *put = NULL;
	mod_lock(&d->lock);
	if (rc == PUB_CONFLICT)
		stats_inc(&d->ctr.conflicts);
	struct drain_ent *e = of->drain;
	if (e && !(DS(e->state) & DS_BUSY) && !stage_file_dirty(of->sf))
		put = ent_detach(d, e);
	mod_unlock(&d->lock);
	if (put)
		core_ofile_put(c, put);
	mod_lock(&d->lock);
	if (put)
		ent_free(d, e);
	pthread_cond_broadcast(&d->progress);
	mod_unlock(&d->lock);
	return rc == PUB_CONFLICT ? -EIO : 0;   /* S3 keeps the other version */
}

int core_fsync(struct core *c, struct core_file *f)
{
	if (f->writable && c->drain && file_write_back(c, f))
		return publish_now(c, f->of);
	if (f->writable && vis_fsync_commits(core_view_policy(c, core_view_follow(
							   c, &f->view, f->vname))))
		return core_ofile_commit(c, f->of);
	return core_file_sync(c, f);
}

/* Whether e is under prefix (vname/path or all when NULL). */
static bool ent_under(struct core *c, struct drain_ent *e, const char *vname,
		      const char *path)
{
	if (!vname || !e->of)
		return true;         /* one leaving counts until it is gone */
	mod_lock(&c->ofile_lock);
	size_t n = strlen(path);
	bool in = !strcmp(e->of->vname, vname) &&
		  (!n || (!strncmp(e->of->path, path, n) &&
			  (e->of->path[n] == '\0' || e->of->path[n] == '/')));
	mod_unlock(&c->ofile_lock);
	return in;
}

/* A waiter for the closes so far under (vname, path): its slot, each
 * entry it waits for marked and counted, failed ones tried again now
 * (d->lock held). -EAGAIN: DRAIN_WAITERS syncs wait already. */
static int waiter_begin(struct core_drain *d, const char *vname, const char *path)
{
	if (d->waiters == UINT64_MAX)
		return -EAGAIN;
	unsigned b = bit_index(~d->waiters);
	uint64_t bit = 1ull << b;
	struct drain_waiter *w = &d->waiter[b];
	*w = (struct drain_waiter){ .seq = d->seq };
	d->waiters |= bit;
	int64_t now = now_ns();
	for (struct drain_ent *e = d->head; e; e = e->next) {
		d->steps++;
		if (e->first_seq > w->seq || !ent_under(d->c, e, vname, path))
			continue;
		e->waited |= bit;
		w->left++;
		if (e->state == DS_WRITING) {   /* counts as failed (open for writing) */
			e->failed_for |= bit;
			w->failed++;
		}
		if (e->err && (DS(e->state) & DS_WAITING)) {
			e->ready_ns = 0;     /* failed before: once more now */
			place(d, e, DS_WAITING, now);
		}
	}
	return (int)b;
}

/* The waiter in slot b ends: the entries still marked unmarked. */
static void waiter_end(struct core_drain *d, unsigned b)
{
	uint64_t bit = 1ull << b;
	for (struct drain_ent *e = d->head; e && d->waiter[b].left; e = e->next) {
		d->steps++;
		if (!(e->waited & bit))
			continue;
		e->waited &= ~bit;
		e->failed_for &= ~bit;
		d->waiter[b].left--;
	}
	d->waiters &= ~bit;
	pthread_cond_broadcast(&d->progress);
}

/* Each entry waiter b still waits for: its key and its last error
 * (malloc'ed; d->lock held). */
static char *waiter_report(struct core_drain *d, unsigned b)
{
	char *text = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&text, &len);
	for (struct drain_ent *e = d->head; fp && e; e = e->next) {
		if (!(e->waited & (1ull << b)) || !e->of)
			continue;
		mod_lock(&d->c->ofile_lock);
		fprintf(fp, "%s/%s: %s\n", e->of->bucket, e->of->key,
			e->state == DS_WRITING ? "open for writing"
			: e->err ? strerror(-e->err) : "not uploaded yet");
		mod_unlock(&d->c->ofile_lock);
	}
	if (fp)
		fclose(fp);
	return text;
}

/* core_drain_sync; persist: keep retrying failures until timeout_s (a
 * stop) instead of returning once every file left has failed. */
static int drain_sync(struct core *c, const char *vname, const char *path,
		      int timeout_s, bool persist, char **report)
{
	struct core_drain *d = c->drain;
	*report = NULL;
	if (!d)
		return 0;
	int64_t end = now_ns() + (int64_t)timeout_s * 1000000000;
	mod_lock(&d->lock);
	int b;
	while ((b = waiter_begin(d, vname, path)) < 0 && now_ns() < end)
		cond_wait_for(d, &d->progress, end - now_ns());
	if (b < 0) {
		mod_unlock(&d->lock);
		*report = strdup("too many syncs at once\n");
		return -ETIMEDOUT;
	}
	struct drain_waiter *w = &d->waiter[b];
	d->syncing++;
	d->flush = true;
	flush_begin(d);
	pthread_cond_broadcast(&d->work);
	int rc = 0;
	while (w->left) {
		bool failed = w->failed == w->left && !persist;
		if (failed || now_ns() >= end) {
			*report = waiter_report(d, (unsigned)b);
			rc = failed ? -EIO : -ETIMEDOUT;
			break;
		}
		cond_wait_for(d, &d->progress, end - now_ns());
	}
	waiter_end(d, (unsigned)b);
	if (--d->syncing == 0 && !d->stop)
		d->flush = false;
	mod_unlock(&d->lock);
	return rc;
}

int core_drain_sync(struct core *c, const char *vname, const char *path,
		    int timeout_s, char **report)
{
	return drain_sync(c, vname, path, timeout_s, false, report);
}

void core_drain_gauges(struct core *c)
{
	if (!c->drain)
		return;
	mod_lock(&c->drain->lock);
	gauges_locked(c->drain);
	mod_unlock(&c->drain->lock);
}

void core_drain_pending(struct core *c, uint64_t *files, uint64_t *bytes)
{
	*files = *bytes = 0;
	if (!c->drain)
		return;
	mod_lock(&c->drain->lock);
	*files = c->drain->files;
	*bytes = c->drain->bytes;
	mod_unlock(&c->drain->lock);
}

uint64_t core_drain_steps(struct core *c)
{
	if (!c->drain)
		return 0;
	mod_lock(&c->drain->lock);
	uint64_t n = c->drain->steps;
	mod_unlock(&c->drain->lock);
	return n;
}

char *core_drain_list(struct core *c)
{
	char *text = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&text, &len);
	if (!fp)
		return NULL;
	struct core_drain *d = c->drain;
	if (d) {
		int64_t now = now_ns();
		mod_lock(&d->lock);
		for (struct drain_ent *e = d->head; e; e = e->next) {
			if (!e->of)
				continue;
			mod_lock(&c->ofile_lock);
			fprintf(fp, "%s/%s\t%" PRIu64 " bytes\tage %.1f s\ttries %u\t%s\n",
				e->of->bucket, e->of->key, stage_file_size(e->of->sf),
				(double)(now - e->closed_ns) / 1e9, e->tries,
				DS(e->state) & DS_BUSY ? "uploading"
				: e->state == DS_WRITING ? "open for writing"
				: e->err ? strerror(-e->err) : "waiting");
			mod_unlock(&c->ofile_lock);
		}
		mod_unlock(&d->lock);
	}
	fclose(fp);
	return text;
}

/* ---- files the start's recovery left (adoption) ---- */

/* The view that shows bucket/key for a file taken up: of the views whose
 * buckets and key conditions hold it, a write-back one first, then a
 * writable one, then any; its path there in path. INODE_NO_VIEW: none. */
static size_t adopt_view(struct core *c, const char *bucket, const char *key,
			 char *path, size_t len)
{
	const struct core_views *vs = core_views(c);
	size_t best = INODE_NO_VIEW;
	int best_rank = 0;
	char p[PATH_MAX];
	for (size_t i = 0; i < vs->n; i++) {
		const struct view *v = vs->views[i];
		if (!view_uses_bucket(v, bucket) || !view_key_can_match(v, key) ||
		    view_key_path(v, key, p, sizeof p) != 0)
			continue;
		int rank = view_write_back(v) ? 3 : view_writable(v) ? 2 : 1;
		if (rank > best_rank && strlen(p) < len) {
			best = i;
			best_rank = rank;
			snprintf(path, len, "%s", p);
		}
	}
	return best;
}

/* of (a reference taken here) at the queue's tail, due now: no
 * drain_delay, and no burst is begun by it (d->lock not held). */
static void enqueue_due(struct core_drain *d, struct ofile *of)
{
	struct drain_ent *n = calloc(1, sizeof *n);
	uint64_t size = stage_file_size(of->sf);
	mod_lock(&d->lock);
	if (!n || heaps_reserve(d, (size_t)d->files + 1) < 0) {
		mod_unlock(&d->lock);
		free(n);
		log_error("write-back: out of memory: %s/%s stays pending until the "
			  "next start", of->bucket, of->key);
		return;
	}
	int64_t now = now_ns();
	ent_add(d, n, of, ++d->seq, size, now, now);
	if (!d->n_threads)
		threads_start(d);
	pthread_cond_signal(&d->work);
	mod_unlock(&d->lock);
}

/* The record a taken-up file shows until its upload: this mount's own,
 * with no ETag, as its seal made it (the index may have lost it, or
 * hold another version since). */
static void adopt_index(struct core *c, const struct obj_meta *what)
{
	struct obj_meta o = *what;
	o.etag[0] = '\0';
	o.mtime_ns = core_now_ns();
	o.tags = NULL;
	o.n_tags = 0;
	o.flags = OBJ_HAS_META | OBJ_HAS_CTYPE;
	if (core_index_local(c, &o) < 0)
		log_warn("write-back: index update of %s/%s taken up after the start "
			 "failed", what->bucket, what->key);
}

int core_drain_adopt(struct core *c, struct stage_file *sf, struct obj_meta *what,
		     bool base_known)
{
	struct core_drain *d = c->drain;
	char path[PATH_MAX];
	core_req_begin(c);
	size_t v = adopt_view(c, what->bucket, what->key, path, sizeof path);
	const char *vname = v == INODE_NO_VIEW ? "" : view_name(core_view(c, v));
	struct ofile *of = calloc(1, sizeof *of);
	int rc = of ? 0 : -ENOMEM;
	if (of) {
		of->vname = obj_strdup_opt(vname, &rc);
		of->path = obj_strdup_opt(v == INODE_NO_VIEW ? what->key : path, &rc);
		of->bucket = obj_strdup_opt(what->bucket, &rc);
		of->key = obj_strdup_opt(what->key, &rc);
	}
	core_req_end(c);
	if (rc < 0 || !d) {
		if (of)
			core_ofile_free(of);     /* not of->sf yet */
		stage_file_release(sf);      /* stays pending: the next start */
		return rc < 0 ? rc : -EINVAL;
	}
	of->ino = inode_number(of->vname, of->path);
	of->sf = sf;
	of->refs = 1;
	of->times_set = true;        /* the journal holds the time of its close */
	snprintf(of->base_etag, sizeof of->base_etag, "%s",
		 base_known ? what->etag : CORE_BASE_ANY);
	adopt_index(c, what);
	of->meta = *what;            /* what the upload carries (ownership moves) */
	memset(what, 0, sizeof *what);
	struct ofile *other = core_ofile_insert(c, of);
	if (other) {
		log_error("write-back: %s/%s is open already; the copy of an earlier "
			  "run stays for the next start", of->bucket, of->key);
		core_ofile_put(c, other);
		core_ofile_free(of);         /* releases sf: pending again */
		return -EEXIST;
	}
	if (v == INODE_NO_VIEW)
		log_warn("write-back: %s/%s, pending since an earlier run, is in no view "
			 "now: published all the same", of->bucket, of->key);
	enqueue_due(d, of);
	core_ofile_put(c, of);       /* the queue holds it now */
	return 0;
}

int core_drain_adopt_all(struct core *c)
{
	if (!c->drain)
		return 0;
	int n = 0;
	for (;;) {
		struct stage_file *sf;
		struct obj_meta what;
		bool known;
		int rc = stage_file_adopt(c->d.stage, &sf, &what, &known);
		if (rc == -ENOENT)
			break;
		if (rc == 0 && core_drain_adopt(c, sf, &what, known) == 0)
			n++;
		obj_meta_release(&what);
	}
	if (n)
		log_info("write-back: %d file(s) pending since an earlier run queued "
			 "for the drain", n);
	return n;
}

/* The end of the stop's drain: the uploads in flight cancelled, the
 * workers joined. */
static void workers_stop(struct core_drain *d)
{
	mod_lock(&d->lock);
	d->stop = true;
	d->flush = false;
	unsigned busy = d->busy;
	atomic_store(&d->cancel, true);
	pthread_cond_broadcast(&d->work);
	mod_unlock(&d->lock);
	if (busy)
		log_warn("write-back: the stop's drain ended with %u upload(s) in "
			 "flight: cancelled, they stay pending", busy);
	for (unsigned i = 0; i < d->n_threads; i++)
		pthread_join(d->tid[i], NULL);
}

void core_drain_free(struct core *c)
{
	struct core_drain *d = c->drain;
	if (!d)
		return;
	mod_lock(&d->lock);
	bool any = d->head != NULL;
	if (any)
		log_info("write-back: draining %" PRIu64 " file(s), %" PRIu64 " bytes, "
			 "for up to %u s", d->files, d->bytes, d->conf.stop_s);
	mod_unlock(&d->lock);
	if (any) {
		char *report = NULL;
		int rc = drain_sync(c, NULL, NULL, (int)d->conf.stop_s, true, &report);
		if (rc < 0)
			log_warn("write-back: the stop's drain ended with files pending "
				 "(%s):\n%s", strerror(-rc), report ? report : "");
		free(report);
	}
	workers_stop(d);
	uint64_t files = d->files, bytes = d->bytes;
	while (d->head) {                /* no thread left: no lock */
		struct drain_ent *e = d->head;
		core_ofile_put(c, ent_detach(d, e));   /* stays journaled */
		ent_free(d, e);
	}
	if (files)
		log_warn("write-back: %" PRIu64 " file(s), %" PRIu64 " bytes, stay "
			 "pending: the next start publishes them", files, bytes);
	free(d->wait_ok.v);
	free(d->due.v);
	free(d->wait_err.v);
	free(d->retry.v);
	stats_group_remove(&d->grp);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->work);
	pthread_cond_destroy(&d->progress);
	free(d);
	c->drain = NULL;
}
