/*
 * warm.h — warm on arrival: objects that events newly bring into a view
 * with "warm" (views/facetfs-views.5) are fetched into the burst buffer
 * (sync/cache/bcache.h) in the background, so that a user's first open is local.
 *
 * Bounds: a queue of at most queue_max objects, served newest first (under
 * a backlog the oldest wanted object is dropped, counted as skipped); a
 * few fetch threads (conf.threads), each holding at most one 8 MiB chunk;
 * objects above the view's max_object skipped; and warm data not read yet
 * never past conf.max_unread bytes of the budget (further fetches wait
 * for reads or evictions: skipped). Nothing is fetched twice: a version
 * queued again replaces the queued one, and blocks already cached are not
 * fetched. Fetches are ranged GETs with If-Match (a version replaced
 * meanwhile is abandoned) from threads at a lower scheduling priority;
 * users' reads never wait for them. A block the burst buffer's disk
 * refuses (full, read-only: counted in its write_errors) fails that fetch
 * and pauses fetching for WARM_PAUSE_S seconds (wants meanwhile are
 * skipped, no GET): a cache that cannot be written does not cost a GET
 * per arrival. A block refused for the budget is skipped, no pause.
 *
 * Threads: warm_want() may be called from any thread (the consumer's:
 * it only queues, under a leaf mutex); warm_free() waits for the fetch
 * threads (a fetch in flight finishes its chunk, not its object) and
 * drops the queue. A fetch pins its version (sync/cache/pins.h) while it runs,
 * so that a drop of that version cannot come between its GET and its
 * stores and leave blocks nobody drops.
 * Ownership: warm_want() copies its strings.
 *
 * Tests: test_warm.c; t_cache.sh.
 */
#ifndef FACETFS_SYNC_WARM_H
#define FACETFS_SYNC_WARM_H

#define WARM_PAUSE_S 30

#include <stddef.h>
#include <stdint.h>

struct bcache;
struct pins;
struct s3;
struct stats;
struct warm;

struct warm_conf {
	struct s3 *s3;               /* borrowed, like bc and st */
	struct bcache *bc;
	struct pins *pins;           /* may be NULL: a fetch pins its version */
	struct stats *st;            /* may be NULL */
	unsigned threads;            /* fetch threads; 0 -> 2 */
	size_t queue_max;            /* objects waiting; 0 -> 256 */
	uint64_t max_unread;         /* warm bytes not read yet; 0 -> no bound */
};

struct warm_counters {
	uint64_t queued;             /* waiting now */
	uint64_t running;            /* being fetched now */
	uint64_t fetched;            /* objects fetched whole */
	uint64_t fetched_bytes;
	uint64_t skipped;            /* too big, backlog, share used up, paused */
	uint64_t failed;             /* GET or store failed, version changed */
	uint64_t held;               /* held whole already: nothing fetched */
};

int  warm_new(const struct warm_conf *conf, struct warm **out);
void warm_free(struct warm *w);
/* Fetch version etag of bucket/key (size bytes) ahead unless it is larger
 * than max_object. Fetches wait for the burst buffer's start-up listing
 * (it takes no blocks before). Counted fetched when blocks were fetched
 * and stored, skipped (too big, backlog, share), failed (a GET, a store
 * or the version changed), held (the buffer holds that version whole
 * already: no GET). */
void warm_want(struct warm *w, const char *bucket, const char *key,
	       const char *etag, uint64_t size, uint64_t max_object);
void warm_counters(struct warm *w, struct warm_counters *out);

#endif
