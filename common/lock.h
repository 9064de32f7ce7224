/*
 * lock.h — the module locks, and a debug guard that no thread holds one
 * where it waits for the disk, S3 or Kafka.
 *
 * Two kinds of mutex live in the modules (docs/design.md "Lock order"):
 *  - state locks guard fields in memory and are held for a few
 *    instructions: never across disk I/O that syncs, an S3 request or a
 *    Kafka call, so that a stat, a read or an event never waits for one.
 *    Take and drop them with mod_lock/mod_unlock (mod_rdlock, mod_wrlock,
 *    mod_rwunlock for rwlocks); wait on a condition with pthread_cond_wait
 *    as usual (the count does not change across the wait).
 *  - I/O locks exist to serialize one kind of I/O (the index's writer
 *    lock across its LevelDB writes, a commit-view descriptor's version
 *    lock across its read, the credentials' refresh lock, the staging
 *    area's kept-mark lock): plain pthread calls, each named in the lock
 *    order, none taken by a stat or a read of a file being written.
 *
 * Built with -Dlock_guard=true (the sanitizer build of tests/run), every
 * thread counts the state locks it holds and lock_assert_none() aborts
 * with the place's name when the count is not zero; it is called in
 * stage_sync, s3_req_run and around every Kafka call. Without the option
 * these are the plain pthread calls and lock_assert_none does nothing.
 * lock_held() is the count (0 without the option), for tests.
 *
 * Tests: test_lock_guard.c (the guard, in the -Dlock_guard=true build).
 */
#ifndef FACETFS_LOCK_H
#define FACETFS_LOCK_H

#include <pthread.h>

#ifdef FACETFS_LOCK_GUARD
void lock_count_add(int n);
void lock_assert_none(const char *where);
unsigned lock_held(void);
#else
static inline void lock_count_add(int n) { (void)n; }
static inline void lock_assert_none(const char *where) { (void)where; }
static inline unsigned lock_held(void) { return 0; }
#endif

static inline void mod_lock(pthread_mutex_t *m)
{
	pthread_mutex_lock(m);
	lock_count_add(1);
}

static inline void mod_unlock(pthread_mutex_t *m)
{
	lock_count_add(-1);
	pthread_mutex_unlock(m);
}

static inline void mod_rdlock(pthread_rwlock_t *l)
{
	pthread_rwlock_rdlock(l);
	lock_count_add(1);
}

static inline void mod_wrlock(pthread_rwlock_t *l)
{
	pthread_rwlock_wrlock(l);
	lock_count_add(1);
}

static inline void mod_rwunlock(pthread_rwlock_t *l)
{
	lock_count_add(-1);
	pthread_rwlock_unlock(l);
}

#endif
