/*
 * visibility.h — the per-view visibility policies (docs/design.md
 * "Visibility policies") as the read side of one open descriptor sees them.
 *
 *  - `session`: the version is validated once, at open (one HEAD); every
 *    read of the descriptor reads that version (ranged GETs with If-Match,
 *    or the burst buffer's blocks of it): -ESTALE once it is gone from S3
 *    and its bytes are held neither in the reader's window nor in the
 *    burst buffer; fsync is not a visibility point, close is.
 *  - `commit`: every read validates first (one HEAD) and moves the
 *    descriptor to the version S3 has now, so a descriptor opened before
 *    another client's commit reads the new bytes; fsync and close are both
 *    visibility points.
 *  - `eventual`: open trusts the index (the version the last applied event
 *    or scan named: no S3 request); reads carry If-Match with it. A 412
 *    before the descriptor returned any byte moves it to the version S3
 *    has now (one HEAD; moved() tells the caller, which updates its
 *    index); after that it behaves like `session`. Writes publish at close
 *    as under `session`.
 * The write side (staging, upload at a commit point) is sync/stage/stage.h; the
 * file-system core (fuse/core.h) decides when to call each.
 *
 * It lives in sync/ because it is the data path's rule, written once; it
 * knows objects and versions, not names, views or inodes.
 *
 * Threads: vis_version_read() may run on several threads at once for one
 * version; a revalidation (commit, or eventual's first 412) swaps the
 * reader under the version's own mutex, which is not held across the HEAD
 * but is held across the read that follows (a swap must not free the
 * reader a read uses): reads of one commit descriptor run one at a time.
 * Session reads take no lock of this module. open/close: one thread.
 * Ownership: vis_version_open*() copy bucket, key and etag; src is
 * borrowed and must outlive the version.
 *
 * Tests: test_readcache.c (named after the read cache, not this file);
 * t_write.sh, t_cache.sh.
 */
#ifndef FACETFS_SYNC_VISIBILITY_H
#define FACETFS_SYNC_VISIBILITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sync/cache/reader.h"

struct obj_meta;
struct vis_version;

enum vis_policy { VIS_SESSION, VIS_COMMIT, VIS_EVENTUAL };

/* The policy a view's "visibility" names ("commit", "eventual"; anything
 * else is session, the default). */
enum vis_policy vis_policy_of(const char *visibility);
/* Is fsync/fdatasync a commit point under p? (close always is.) */
bool vis_fsync_commits(enum vis_policy p);
/* Does every read validate the version first under p? */
bool vis_read_validates(enum vis_policy p);
/* Does open trust the index's version (no HEAD) under p? */
bool vis_open_trusts_index(enum vis_policy p);

/* Told when a read found (by HEAD) that S3 has another version than the
 * one the descriptor was opened on (eventual): o is what the HEAD said,
 * with bucket and key set. Runs on the reading thread, no lock held. */
typedef void (*vis_moved_fn)(void *ctx, const struct obj_meta *o);

/* Validate the version of bucket/key now (one HEAD) and open a reader of
 * it. -ENOENT when S3 has no such object, or the HEAD's error. */
int  vis_version_open(const struct reader_src *src, const char *bucket,
		      const char *key, struct vis_version **out);
/* Open the version etag/size the caller knows (eventual: the index's),
 * with no S3 request. */
int  vis_version_open_known(const struct reader_src *src, const char *bucket,
			    const char *key, const char *etag, uint64_t size,
			    struct vis_version **out);
/* The descriptor's bytes may reach its reader without a read of this
 * module (the kernel's page cache, shared by the inode's descriptors):
 * eventual must not move it then (-ESTALE instead, as under session). */
void vis_version_served(struct vis_version *v);
/* Where eventual's moves are told (before the first read; fn may be NULL). */
void vis_version_on_moved(struct vis_version *v, vis_moved_fn fn, void *ctx);
/* Up to len bytes at off under policy p: the count (0 at the end) or a
 * negative errno (-ESTALE: the version is gone and its bytes are not held;
 * under commit the HEAD's error, e.g. -ENOENT once the object is deleted). */
ssize_t vis_version_read(struct vis_version *v, enum vis_policy p, void *buf,
			 size_t len, uint64_t off);
/* As vis_version_read, with the bytes left in the reader's buffers as
 * up to READER_PIECES pieces (sync/cache/reader.h reader_read_pieces; *n of
 * them, 0 on an error), each held until reader_pieces_put(). */
ssize_t vis_version_read_pieces(struct vis_version *v, enum vis_policy p, size_t len,
				uint64_t off, struct reader_piece *pc, unsigned *n);
/* The ETag the descriptor reads now (copied into out) and, size not
 * NULL, that version's size. */
void vis_version_etag(struct vis_version *v, char out[72], uint64_t *size);
/* Is the descriptor's reader cold: the first open of a large version,
 * whose blocks the burst buffer does not store (sync/cache/reader.h)? The core
 * gives such a descriptor direct I/O. */
bool vis_version_cold(struct vis_version *v);
void vis_version_close(struct vis_version *v);

#endif
