/*
 * lock.c — the guard's per-thread count of state locks held (lock.h).
 * Compiled to nothing without -Dlock_guard=true.
 */
#include "common/lock.h"

#ifdef FACETFS_LOCK_GUARD
#include <stdio.h>
#include <stdlib.h>

/* The count of this thread: a debug check's, read by no other thread. */
static _Thread_local unsigned held;

void lock_count_add(int n)
{
	if (n < 0 && held == 0) {
		fprintf(stderr, "lock guard: a state lock dropped that was not "
			"counted as taken\n");
		abort();
	}
	held += (unsigned)n;
}

void lock_assert_none(const char *where)
{
	if (held == 0)
		return;
	fprintf(stderr, "lock guard: %s called with %u state lock%s held\n", where,
		held, held == 1 ? "" : "s");
	abort();
}

unsigned lock_held(void)
{
	return held;
}
#endif
