/*
 * visibility.h — the per-view visibility policies (DESIGN.md "Visibility
 * policies") as the read side of one open descriptor sees them.
 *
 *  - `session`: the version is validated once, at open (one HEAD); every
 *    read of the descriptor reads that version (ranged GETs with If-Match:
 *    -ESTALE once it is gone from S3 and not held in the reader's window);
 *    fsync is not a visibility point, close is.
 *  - `commit`: every read validates first (one HEAD) and moves the
 *    descriptor to the version S3 has now, so a descriptor opened before
 *    another client's commit reads the new bytes; fsync and close are both
 *    visibility points.
 * The write side (staging, upload at a commit point) is sync/stage.h; the
 * file-system core (fuse/core.h) decides when to call each.
 *
 * It lives in sync/ because it is the data path's rule, written once; it
 * knows objects and versions, not names, views or inodes.
 *
 * Threads: vis_version_read() may run on several threads at once for one
 * version; a commit-policy revalidation swaps the reader under the
 * version's own mutex, which is not held across the HEAD but is held
 * across the read that follows (a swap must not free the reader a read
 * uses): reads of one commit descriptor run one at a time, as before this
 * module. Session reads take no lock of this module. open/close: one thread.
 * Ownership: vis_version_open() copies bucket and key.
 */
#ifndef FACETFS_SYNC_VISIBILITY_H
#define FACETFS_SYNC_VISIBILITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct s3;
struct stats;
struct vis_version;

enum vis_policy { VIS_SESSION, VIS_COMMIT };

/* The policy a view's "visibility" names ("commit"; anything else is
 * session, the default). */
enum vis_policy vis_policy_of(const char *visibility);
/* Is fsync/fdatasync a commit point under p? (close always is.) */
bool vis_fsync_commits(enum vis_policy p);
/* Does every read validate the version first under p? */
bool vis_read_validates(enum vis_policy p);

/* Validate the version of bucket/key now (one HEAD) and open a reader of
 * it. -ENOENT when S3 has no such object, or the HEAD's error. */
int  vis_version_open(struct s3 *s3, struct stats *st, const char *bucket,
		      const char *key, struct vis_version **out);
/* A version of an object S3 does not have yet (created here, still
 * staged): empty, reads give 0 bytes unless a commit read finds one. */
int  vis_version_open_missing(struct s3 *s3, struct stats *st, const char *bucket,
			      const char *key, struct vis_version **out);
/* Up to len bytes at off under policy p: the count (0 at the end) or a
 * negative errno (-ESTALE: the version is gone and its bytes are not held;
 * under commit the HEAD's error, e.g. -ENOENT once the object is deleted). */
ssize_t vis_version_read(struct vis_version *v, enum vis_policy p, void *buf,
			 size_t len, uint64_t off);
/* The ETag the descriptor reads now (copied into out). */
void vis_version_etag(struct vis_version *v, char out[72]);
void vis_version_close(struct vis_version *v);

#endif
