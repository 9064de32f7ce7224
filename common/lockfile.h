/*
 * lockfile.h — one process per directory: an exclusive flock on a file in
 * it that also names the holder's pid, so that the second process is told
 * who holds it. The lock lives as long as the descriptor (a crash releases
 * it); removing the file while it is held releases nothing for the holder
 * but lets a new file be locked by another process, so lock a file of the
 * directory that is meant to last (its top, not a subdirectory that may be
 * removed and made again).
 * No state; any thread.
 *
 * Tests: none yet (no unit test, no integration script).
 */
#ifndef FACETFS_LOCKFILE_H
#define FACETFS_LOCKFILE_H

#include <stddef.h>

/* Lock DIR/lock (made if missing; its content becomes our pid). 0 and
 * *fd_out (keep it open to hold the lock; close it to let go), -EBUSY when
 * another process holds it, or another -errno; err says why, naming the
 * holder's pid and `what` the directory is ("cache dir"). */
int lockfile_take(const char *dir, const char *what, int *fd_out, char *err,
		  size_t errlen);

#endif
