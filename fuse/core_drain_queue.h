/* core_drain_queue.h — write-back's queue, internal to the drain:
 * core_drain.c runs it (its workers, the syncs, the files taken up after a
 * start, start and stop), core_drain_queue.c keeps it (the entries and
 * their states, the heaps of the waiting ones, the syncs' waiters, the
 * gauges). The entries' state machine is written out at the top of
 * core_drain_queue.c and in docs/design.md "A pending file in the drain's
 * queue".
 *
 * Lock: drain.lock (a state lock) guards the queue, the heaps, the
 * waiters, of->drain and the gauges; the core's ofile_lock may be taken
 * under it (an ofile's names, its reference count), nothing else; no S3
 * request, sync or ofile release runs under it. The functions below are
 * called with it held (drain_now_ns needs none).
 */
#ifndef FACETFS_FUSE_CORE_DRAIN_QUEUE_H
#define FACETFS_FUSE_CORE_DRAIN_QUEUE_H

#include "fuse/core_int.h"

#include "common/stats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define DRAIN_MAX_STREAMS 64
#define DRAIN_WAITERS 64             /* syncs waiting at once (bits) */

struct drain_ent;

/* A queue entry's state (the table at the top of core_drain_queue.c). */
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
	enum drain_state state;      /* changed by drain_ent_to only */
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

/* Now on the monotonic clock, in ns: the queue's times. */
int64_t drain_now_ns(void);

/* The one change of e's state: from holds its state now (DS() bits); out
 * of that state's heap, into to's, and the count of entries being
 * uploaded kept. */
void drain_ent_to(struct core_drain *d, struct drain_ent *e, unsigned from,
		  enum drain_state to);
/* e, from one of the states in from, waits again (the waiting state its
 * error and ready time say). */
void drain_place(struct core_drain *d, struct drain_ent *e, unsigned from, int64_t now);
/* Room in every heap for n entries: 0 or -ENOMEM. */
int  drain_heaps_reserve(struct core_drain *d, size_t n);
/* A new entry n for of, closed now as close number seq, due at ready, at
 * the queue's tail (a reference on of taken). */
void drain_ent_add(struct core_drain *d, struct drain_ent *n, struct ofile *of,
		   uint64_t seq, uint64_t size, int64_t now, int64_t ready);
/* The oldest entry a worker may take now, or NULL; *wait_ns: until the
 * next one may be ready (0: none waits). */
struct drain_ent *drain_next_ready(struct core_drain *d, int64_t *wait_ns);
/* A worker takes e (DS_DUE or DS_RETRY: now uploading). */
void drain_take(struct core_drain *d, struct drain_ent *e);
/* An upload of e (size bytes) ended with rc (a PUB_ value or -errno): e
 * waits again, or is detached and its ofile returned to be put with no
 * lock held (then drain_ent_free). */
struct ofile *drain_upload_ended(struct core_drain *d, struct drain_ent *e, int rc,
				 uint64_t size);
/* e is done: its ofile detached and returned, for the caller to put with
 * no lock held, then to free e (drain_ent_free). */
struct ofile *drain_ent_detach(struct core_drain *d, struct drain_ent *e);
/* A detached e leaves the queue: its waiters count it off. */
void drain_ent_free(struct core_drain *d, struct drain_ent *e);
/* e is tried again (its last writer closed it): not failed for anyone
 * until that try ends. */
void drain_waiters_retry(struct core_drain *d, struct drain_ent *e);

/* A sync begins: every entry without a failure is due now. */
void drain_flush_begin(struct core_drain *d);
/* A waiter for the closes so far under (vname, path; all when NULL): its
 * slot, each entry it waits for marked and counted, failed ones tried
 * again now. -EAGAIN: DRAIN_WAITERS syncs wait already. */
int  drain_waiter_begin(struct core_drain *d, const char *vname, const char *path);
/* The waiter in slot b ends: the entries still marked unmarked. */
void drain_waiter_end(struct core_drain *d, unsigned b);
/* Each entry waiter b still waits for: its key and its last error
 * (malloc'ed text, or NULL). */
char *drain_waiter_report(struct core_drain *d, unsigned b);

#endif
