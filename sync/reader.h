/*
 * reader.h — reading one object version through the mount.
 *
 * A reader belongs to one open file descriptor and one object version (its
 * ETag): every ranged GET it sends carries If-Match, so a descriptor never
 * mixes two versions: once the object changed in S3, reads that need bytes
 * the reader does not hold fail with -ESTALE.
 *
 * Sequential reads are detected and served from a read-ahead window that
 * grows from 256 KiB to 8 MiB; the next window is fetched by a helper
 * thread while the caller copies from the current one. Random reads fetch
 * just what they need (rounded up to 64 KiB).
 *
 * With a burst buffer (sync/bcache.h), windows are whole blocks: blocks
 * the buffer holds for this version are read from it, the others fetched
 * from S3 (consecutive missing blocks in one ranged GET) and stored in it.
 * So a descriptor keeps reading its version from the buffer after S3 has
 * a newer one: -ESTALE only for a block that is in neither.
 *
 * Threads: reader_read() may be called from several FUSE worker threads at
 * once; the reader's mutex is never held across an S3 request.
 * Ownership: reader_open() copies bucket, key and etag.
 */
#ifndef FACETFS_READER_H
#define FACETFS_READER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/stats.h"

struct bcache;
struct pins;
struct s3;
struct reader;

/* Window hits and misses of the readers of one source that has no burst
 * buffer (shown as the burst buffer's: "cache" hits and misses), kept by
 * the source's owner: reader_counters_init() registers them with st (NULL:
 * nobody), reader_counters_release() removes them (no reader running). */
struct reader_counters {
	stats_counter hits, misses;
	struct stats_group grp;
};
void reader_counters_init(struct reader_counters *c, struct stats *st);
void reader_counters_release(struct reader_counters *c);

/* Where a reader's bytes come from (borrowed: must outlive the readers). */
struct reader_src {
	struct s3 *s3;
	struct reader_counters *ctr; /* NULL: not counted */
	struct bcache *bc;           /* the burst buffer; NULL: none */
	struct pins *pins;           /* versions readers hold (with bc) */
};

/* etag "" (a version S3 does not have yet): nothing is cached. */
int reader_open(const struct reader_src *src, const char *bucket,
		const char *key, const char *etag, uint64_t size,
		struct reader **out);
/* Up to len bytes at off; returns the count (0 at or past the end) or a
 * negative errno (-ESTALE when the object changed, -EIO, -ENOENT). */
ssize_t reader_read(struct reader *r, void *buf, size_t len, uint64_t off);
void reader_close(struct reader *r);

#endif
