/* core_drain_queue.c — write-back's queue (core_drain_queue.h): the
 * pending files in the order of their first close, the state of each,
 * the heaps of the waiting ones, the syncs' waiters and the gauges. It
 * runs under the drain's lock, with no thread, S3 request or disk I/O of
 * its own: the drain's workers and syncs (core_drain.c) call it. Calls no
 * other file of the core.
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
 * drain_ent_to is the one function that changes an entry's state: it
 * asserts the state it leaves, moves the entry between heaps and keeps
 * the uploading gauge. "waiting" below is whichever of the four its error
 * and ready time say (waiting_state). enqueue, enqueue_due and
 * publish_now are core_drain.c's; the others are here.
 *
 *   from                 event                          to               function
 *   (new)                a first close                  waiting          enqueue
 *   (new)                taken up after a start         waiting (due)    enqueue_due
 *   waiting              closed again                   waiting (time    enqueue
 *                                                       renewed)
 *   WRITING              its writer's last close        waiting          enqueue
 *   UPLOADING            closed again                   UPLOADING_AGAIN  enqueue
 *   WAIT_OK, WAIT_ERR    its time comes                 DUE, RETRY       drain_next_ready
 *   DUE (not flushed)    no sync runs, time not come    WAIT_OK          drain_next_ready
 *   WAIT_OK              a sync begins                  DUE              drain_flush_begin
 *   WAIT_ERR, RETRY      a sync begins                  RETRY (now)      drain_waiter_begin
 *   DUE, RETRY           a worker takes it              UPLOADING        drain_take
 *   UPLOADING*           published, conflict, nothing   LEAVING          drain_upload_ended
 *                        to publish (not AGAIN)
 *   UPLOADING_AGAIN      published                      waiting          drain_upload_ended
 *   UPLOADING*           failed                         WAIT_ERR, RETRY  drain_upload_ended
 *   UPLOADING            a writer has it open           WRITING          drain_upload_ended
 *   UPLOADING_AGAIN      a writer had it open           waiting          drain_upload_ended
 *   waiting, WRITING     fsync published it             LEAVING          publish_now
 *
 * An entry that is done leaves in two steps: its ofile is detached (the
 * gauges no longer count it, state LEAVING) and put with no lock held,
 * then the entry goes (drain_ent_free) and the syncs waiting for it count
 * it off, so that a sync that returns finds the file gone from the core's
 * table too.
 *
 * drain_next_ready takes the older of due's top and retry's top; a burst
 * holds due's top, and then every other entry of due, whose closes are
 * later.
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
 */
#include "fuse/core_drain_queue.h"

#include <assert.h>

#include "common/lock.h"
#include "sync/stage/stage.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DRAIN_BACKOFF_MAX_S 60

int64_t drain_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
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
void drain_ent_to(struct core_drain *d, struct drain_ent *e, unsigned from,
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
int drain_heaps_reserve(struct core_drain *d, size_t n)
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
void drain_place(struct core_drain *d, struct drain_ent *e, unsigned from, int64_t now)
{
	drain_ent_to(d, e, from, waiting_state(d, e, now));
}

/* A sync begins: every entry without a failure is due now. */
void drain_flush_begin(struct core_drain *d)
{
	struct drain_ent *e;
	while ((e = heap_top(&d->wait_ok)))
		drain_ent_to(d, e, DS(DS_WAIT_OK), DS_DUE);
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
void drain_waiters_retry(struct core_drain *d, struct drain_ent *e)
{
	for (uint64_t m = e->failed_for; m; m &= m - 1)
		d->waiter[bit_index(m)].failed--;
	e->failed_for = 0;
}

/* ---- the queue (d->lock held) ------------------------------------------ */

/* The gauges from the running figures. */
static void gauges_locked(struct core_drain *d)
{
	int64_t now = drain_now_ns();
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
	int64_t sec = drain_now_ns() / 1000000000;
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
struct drain_ent *drain_next_ready(struct core_drain *d, int64_t *wait_ns)
{
	int64_t now = drain_now_ns();
	struct drain_ent *e;
	while ((e = heap_top(&d->wait_ok)) && e->ready_ns <= now)
		drain_ent_to(d, e, DS(DS_WAIT_OK), DS_DUE);
	while ((e = heap_top(&d->wait_err)) && e->ready_ns <= now)
		drain_ent_to(d, e, DS(DS_WAIT_ERR), DS_RETRY);
	while (!d->flush && (e = heap_top(&d->due)) && e->ready_ns > now)
		drain_ent_to(d, e, DS(DS_DUE), DS_WAIT_OK);    /* a sync's flush is over */
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
void drain_take(struct core_drain *d, struct drain_ent *e)
{
	drain_ent_to(d, e, DS(DS_DUE) | DS(DS_RETRY), DS_UPLOADING);
	drain_waiters_retry(d, e);
}

/* e is done: its ofile detached and returned, for the caller to put
 * with no lock held, then to free e (ent_free). */
struct ofile *drain_ent_detach(struct core_drain *d, struct drain_ent *e)
{
	drain_ent_to(d, e, DS_WAITING | DS_BUSY | DS(DS_WRITING), DS_LEAVING);
	d->files--;
	d->bytes -= e->bytes;
	struct ofile *of = e->of;
	of->drain = NULL;
	e->of = NULL;
	return of;
}

/* A detached e leaves the queue: its waiters count it off. */
void drain_ent_free(struct core_drain *d, struct drain_ent *e)
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

/* An upload of e (size bytes) ended with rc (publish's): e waits again,
 * or is detached and its ofile returned to be put (then ent_free). */
struct ofile *drain_upload_ended(struct core_drain *d, struct drain_ent *e, int rc,
				 uint64_t size)
{
	int64_t now = drain_now_ns();
	if (rc == PUB_WRITING) {
		e->ready_ns = now;
		if (e->state == DS_UPLOADING_AGAIN) {   /* its writer closed meanwhile */
			drain_place(d, e, DS(DS_UPLOADING_AGAIN), now);
		} else {                     /* its writer's close queues it */
			drain_ent_to(d, e, DS(DS_UPLOADING), DS_WRITING);
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
		drain_place(d, e, DS_BUSY, now);
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
		return drain_ent_detach(d, e);
	/* sealed again during the upload: pending since that close, uploaded
	 * after the delay */
	e->first_seq = e->again_seq;
	waiters_settle(d, e, false);
	e->ready_ns = now + (int64_t)d->conf.delay_s * 1000000000;
	drain_place(d, e, DS(DS_UPLOADING_AGAIN), now);
	return NULL;
}

/* A new entry for of, closed now as close number seq, due at ready, at
 * the queue's tail (d->lock held; a reference taken). */
void drain_ent_add(struct core_drain *d, struct drain_ent *n, struct ofile *of,
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
	drain_place(d, n, DS(DS_NEW), now);
}

/* ---- a sync's waiter (d->lock held) ------------------------------------ */

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
int drain_waiter_begin(struct core_drain *d, const char *vname, const char *path)
{
	if (d->waiters == UINT64_MAX)
		return -EAGAIN;
	unsigned b = bit_index(~d->waiters);
	uint64_t bit = 1ull << b;
	struct drain_waiter *w = &d->waiter[b];
	*w = (struct drain_waiter){ .seq = d->seq };
	d->waiters |= bit;
	int64_t now = drain_now_ns();
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
			drain_place(d, e, DS_WAITING, now);
		}
	}
	return (int)b;
}

/* The waiter in slot b ends: the entries still marked unmarked. */
void drain_waiter_end(struct core_drain *d, unsigned b)
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
char *drain_waiter_report(struct core_drain *d, unsigned b)
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

/* ---- what the queue holds, told ---------------------------------------- */

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
		int64_t now = drain_now_ns();
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
