/*
 * reader.h — reading one object version through the mount.
 *
 * A reader belongs to one open file descriptor and one object version (its
 * ETag): every ranged GET it sends carries If-Match, so a descriptor never
 * mixes two versions: once the object changed in S3, reads that need bytes
 * the reader does not hold fail with -ESTALE.
 *
 * Sequential reads are served from windows that grow from 256 KiB to
 * 8 MiB; once the reader has read 1 MiB in sequence, ranges ahead of it
 * are fetched in parallel by helper threads (read-ahead): a range grows
 * from 2 MiB to 8 MiB and the bytes kept ahead from 4 MiB to the per-reader
 * bound, with up to `streams` GETs in flight. A random read stops it (what
 * was fetched ahead and not read is counted as wasted) and fetches just
 * what it needs (rounded up to 64 KiB). Bounds: per reader (streams,
 * max_bytes) and, through a shared struct reader_pool, across readers (GETs
 * in flight, bytes held): a range the pool refuses is not fetched ahead
 * (the read fetches it itself when it gets there), so many readers never
 * exhaust memory or connections. What readers keep between reads (their
 * last windows) counts against kept_bytes (READER_KEPT_TOTAL) across the
 * pool: past it a window is freed right after its read, so many open, idle
 * descriptors never hold more than that. Buffers no one holds any more go
 * to the pool's free list (at most 16 of them, 64 MiB) and are taken again
 * by the next ranges of about their size, so a stream does not fault in
 * fresh memory for every range.
 *
 * reader_read() copies the bytes into the caller's buffer;
 * reader_read_pieces() leaves them where they lie (the reader's ranges,
 * or one buffer read from the burst buffer's files) and returns up to
 * READER_PIECES pieces, each holding its buffer until reader_pieces_put():
 * a reply can be written from them with no copy of ours, even after the
 * reader freed the range or closed.
 *
 * With a burst buffer (sync/cache/bcache.h), blocks the buffer holds for this
 * version are read from it, the others fetched from S3 (consecutive
 * missing blocks in one ranged GET). So a descriptor keeps reading its
 * version from the buffer after S3 has a newer one: -ESTALE only for a
 * block in neither. Whether the fetched blocks are stored in it is the
 * buffer's admission rule, asked once at open (bcache_admit): a reader
 * that stores reads whole blocks (windows and ranges grown to block
 * boundaries) and stores each as it arrives; a cold reader (the first
 * open of a large version: reader_cold) stores none and fetches only the
 * ranges it reads.
 *
 * Threads: reader_read() may be called from several FUSE worker threads at
 * once; the reader's mutex is never held across an S3 request or disk I/O;
 * the pool's mutex is a leaf taken under the reader's. reader_close()
 * starts nothing more and waits for the GETs in flight (at most `streams`,
 * concurrent), then frees their buffers.
 * Ownership: reader_open() copies bucket, key and etag; src and the pool
 * are borrowed and must outlive the readers.
 *
 * Tests: test_reader.c, test_readcache.c; t_readahead.sh, t_coldread.sh.
 */
#ifndef FACETFS_READER_H
#define FACETFS_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/stats.h"

struct bcache;
struct pins;
struct s3;
struct reader;
struct reader_pool;

/* Read-ahead bounds (gateway config cache.readahead_*). */
struct reader_ra_conf {
	unsigned streams;            /* GETs ahead in flight per reader; 0: no
				      * read-ahead (one window at a time) */
	uint64_t max_bytes;          /* bytes fetched ahead held per reader */
	unsigned total_streams;      /* across all readers of the pool */
	uint64_t total_bytes;        /* across all readers of the pool */
	uint64_t kept_bytes;         /* kept between reads, all readers of
				      * the pool; 0: READER_KEPT_TOTAL */
};

#define READER_RA_STREAMS        4u
#define READER_RA_STREAMS_MAX    16u
#define READER_RA_BYTES          (64ull << 20)
#define READER_RA_TOTAL_STREAMS  16u
#define READER_RA_TOTAL_BYTES    (256ull << 20)
#define READER_KEPT_TOTAL        (256ull << 20)

/* The counters of the readers of one source, kept by the source's owner:
 * window hits and misses when it has no burst buffer (shown as the burst
 * buffer's: "cache" hits and misses), and ("readahead") ranges fetched
 * ahead, their bytes, bytes fetched ahead and never read, ranges the pool
 * refused. reader_counters_init() registers them with st (NULL: nobody),
 * reader_counters_release() removes them (no reader running). */
struct reader_counters {
	stats_counter hits, misses;
	stats_counter ra_ranges, ra_bytes, ra_wasted, ra_throttled;
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
	struct reader_pool *pool;    /* read-ahead bounds; NULL: the defaults
				      * per reader, no bound across readers */
};

/* The bounds shared by readers (a copy of *c; streams above
 * READER_RA_STREAMS_MAX are cut to it). 0 or -ENOMEM. */
int  reader_pool_new(const struct reader_ra_conf *c, struct reader_pool **out);
/* Every reader of the pool must be closed. NULL is a no-op. */
void reader_pool_free(struct reader_pool *p);
/* Now and the most ever: GETs ahead in flight, bytes fetched ahead held. */
struct reader_pool_counters {
	unsigned streams, streams_max;
	uint64_t bytes, bytes_max;
	uint64_t kept, kept_max;     /* windows kept between reads */
	unsigned free;               /* buffers on the free list, */
	uint64_t free_bytes;         /* their bytes */
	uint64_t made, reused;       /* buffers allocated, taken from the list */
};
void reader_pool_counters(struct reader_pool *p, struct reader_pool_counters *out);

/* etag "" (a version S3 does not have yet): nothing is cached. */
int reader_open(const struct reader_src *src, const char *bucket,
		const char *key, const char *etag, uint64_t size,
		struct reader **out);
/* Up to len bytes at off; returns the count (0 at or past the end; short
 * only at the end of the object) or a negative errno (-ESTALE when the
 * object changed, -EIO, -ENOENT), also when part of the range was there. */
ssize_t reader_read(struct reader *r, void *buf, size_t len, uint64_t off);
/* One piece of a read's bytes: len bytes at p, in a buffer hold keeps. */
struct reader_buf;
struct reader_piece {
	const char *p;
	size_t len;
	struct reader_buf *hold;
};
#define READER_PIECES 4
/* As reader_read, but the bytes stay where they are: up to READER_PIECES
 * pieces in pc, in order, *n of them (0 with an error or at the end).
 * Each holds its buffer until reader_pieces_put(), which any thread may
 * call, before or after reader_close(), while the pool lives. */
ssize_t reader_read_pieces(struct reader *r, size_t len, uint64_t off,
			   struct reader_piece *pc, unsigned *n);
void reader_pieces_put(struct reader_piece *pc, unsigned n);
void reader_close(struct reader *r);
/* Is r a cold reader: it has a burst buffer that does not store what it
 * fetches (bcache_admit said no at its open)? */
bool reader_cold(const struct reader *r);

#endif
