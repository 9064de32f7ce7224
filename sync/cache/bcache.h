/*
 * bcache.h — the read side of the burst buffer: a persistent, bounded
 * cache of object blocks on local disk (docs/design.md "Burst buffer").
 *
 * A block is block_size bytes of one object version, keyed by bucket, key,
 * ETag and block number (block n holds bytes [n*block_size, +block_size);
 * an object's last block may be shorter). Each block is one file
 *   DIR/XX/HHHHHHHHHHHHHHHHHHHHHHHHHHHHHHHH-N
 * (H: a 128-bit hash of bucket, key and ETag in hex, XX its first two
 * digits, N the block number in hex) holding a header with the block's
 * identity (bucket, key, ETag, offset, length) and a CRC-32C of the data,
 * then the data. A block is written to a temporary file and renamed into
 * place, so a block half written at a crash is never found under its name;
 * every read checks identity and checksum: a mismatch is a miss (the file
 * is removed and counted as corrupt), never bad bytes.
 *
 * Budget: clean blocks get what the staged writes leave of max_bytes
 * (conf.staged() says how much staging holds now); a block is charged its
 * file's size rounded up to 4 KiB. Eviction is scan-resistant (segmented
 * LRU): a new block enters the probation segment, a hit promotes it to the
 * protected segment (at most 80 % of the clean budget); eviction takes the
 * least recently used probation block first, so one long sequential read
 * replaces only probation blocks and never flushes the protected ones.
 *
 * Admission: a reader asks bcache_admit() at its open whether the blocks
 * it fetches are stored. An object of at least cold_min bytes is not
 * stored at the first open of its version (a cold stream: its blocks are
 * fetched, read and forgotten), only from the next open on; smaller
 * objects, and versions the buffer holds the first block of, are stored
 * from their first read. Opens are remembered in a table of BCACHE_SEEN
 * slots in memory (one per version hash: a version may lose its slot to
 * another, and a restart forgets them all). So one long read of a large
 * object writes nothing, an object opened twice is kept (and, once its
 * first block is on disk, stays admitted after a restart), and warm puts
 * (BCACHE_WARM) are always stored.
 *
 * Restart: bcache_open() does not read blocks; a background thread lists
 * DIR to learn the blocks and their sizes (ordered by file mtime) and
 * removes temporary files left by a crash. Lookups work at once (a block
 * is found by its name); until the listing is done, puts are skipped
 * (counted) so the budget is never overrun.
 *
 * Bad state is never the reader's problem: a cache that cannot be written
 * (ENOSPC, EROFS, EIO) skips the put (counted, logged once per kind); a
 * removed DIR is made again at the next put; every failure of the cache is
 * a miss. Two processes must not share DIR: bcache_open takes an exclusive
 * lock on DIR/lock (-EBUSY, with the holder's pid in err, when held).
 *
 * Threads: every function may be called from any thread at once (one
 * internal mutex protects the table and the LRU lists; no lock is held
 * across disk I/O: victims are unlinked after the mutex is released).
 * Ownership: ids are copied when needed; the caller's buffers stay its own.
 *
 * Tests: test_bcache.c, test_readcache.c; t_cache.sh, t_coldread.sh.
 */
#ifndef FACETFS_SYNC_BCACHE_H
#define FACETFS_SYNC_BCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct bcache;
struct stats;

#define BCACHE_BLOCK_DEFAULT (1u << 20)
#define BCACHE_BLOCK_MIN     (64u * 1024)
#define BCACHE_BLOCK_MAX     (64u * 1024 * 1024)

struct bcache_conf {
	const char *dir;             /* made if missing */
	uint64_t max_bytes;          /* the burst buffer's whole budget */
	uint32_t block_size;         /* power of two, BLOCK_MIN..BLOCK_MAX */
	/* Bytes staged writes hold now (never evicted); NULL: none. */
	uint64_t (*staged)(void *ctx);
	void *staged_ctx;
	/* Called (with staged_ctx, no lock held) after a put made DIR again
	 * because it was removed while in use. May be NULL. */
	void (*dir_made)(void *ctx);
	/* Objects of at least this many bytes are not stored at the first
	 * open of their version (bcache_admit); 0: every object is. */
	uint64_t cold_min;
	struct stats *st;            /* may be NULL */
};

/* Versions whose opens bcache_admit() remembers (slots of a table). */
#define BCACHE_SEEN 8192u

/* One object version. */
struct bcache_id {
	const char *bucket, *key, *etag;
};

/* What a put is (bcache_put's flags). */
#define BCACHE_WARM 1u               /* fetched ahead by warm-on-arrival */

struct bcache_counters {
	uint64_t max_bytes;          /* the whole budget */
	uint64_t used_bytes;         /* clean blocks (charged sizes; puts
	                              * being written count already) */
	uint64_t blocks;             /* clean blocks known */
	uint64_t hits, misses;       /* bcache_read */
	uint64_t evictions;          /* blocks evicted for room */
	uint64_t corrupt;            /* blocks that failed their check */
	uint64_t put_skipped;        /* puts not done: starting, too big, errors */
	uint64_t write_errors;       /* puts that failed on the disk */
	uint64_t dropped;            /* blocks released for a changed object */
	uint64_t warm_bytes;         /* warm blocks not read yet: charged bytes */
	uint64_t warm_used;          /* warm blocks read at least once */
	uint64_t warm_wasted;        /* warm blocks evicted or dropped unread */
	uint64_t admitted;           /* blocks reads stored (not warm) */
	uint64_t not_admitted;       /* blocks cold readers fetched, not stored */
	uint64_t cold_opens;         /* opens bcache_admit() found cold */
	uint64_t drops_lost;         /* drop requests discarded because the
	                              * queue was full (their blocks stay
	                              * until evicted; never served: ETag) */
	bool loading;                /* the start-up listing still runs */
	bool unlisted;               /* it failed: no put until a restart */
};

/* Open (make) the cache in conf->dir. -EINVAL when max_bytes is smaller
 * than one block or block_size is not allowed; -EBUSY when another process
 * holds DIR; other -errno from the disk. err says why. */
int  bcache_open(const struct bcache_conf *conf, struct bcache **out,
		 char *err, size_t errlen);
/* Waits for the background threads. NULL is a no-op. */
void bcache_close(struct bcache *bc);
uint32_t bcache_block_size(const struct bcache *bc);

/* Copy bytes [boff, boff+len) of block blk of id into buf, after checking
 * the whole block: the count copied (0 when boff is at or past the block's
 * end), or -ENOENT when the block is not cached or failed its check (then
 * removed). Counts a hit or a miss. */
ssize_t bcache_read(struct bcache *bc, const struct bcache_id *id, uint64_t blk,
		    void *buf, size_t len, uint32_t boff);
/* As bcache_read, but a block that is not there, or fails its check,
 * counts no miss (a bad one still counts as corrupt and is removed): for a
 * caller that then looks again with bcache_read, which counts the miss. */
ssize_t bcache_try(struct bcache *bc, const struct bcache_id *id, uint64_t blk,
		   void *buf, size_t len, uint32_t boff);
/* Is block blk of id cached (no check, no counting)? */
bool bcache_has(struct bcache *bc, const struct bcache_id *id, uint64_t blk);
/* Ask the kernel to read block blk of id from the disk into its page
 * cache in the background (POSIX_FADV_WILLNEED), if the cache holds it: a
 * sequential reader's next blocks are then on their way while it copies
 * this one. No check, no counting, no error. */
void bcache_prefetch(struct bcache *bc, const struct bcache_id *id, uint64_t blk);
/* May a reader of version id (size bytes) that opens now store the
 * blocks it fetches? false: a cold stream (size >= cold_min, the version
 * not opened before as far as the table remembers, its first block not
 * held). Records the open; counts cold opens. */
bool bcache_admit(struct bcache *bc, const struct bcache_id *id, uint64_t size);
/* A cold reader fetched (parts of) n blocks and did not store them. */
void bcache_not_admitted(struct bcache *bc, uint64_t n);
/* Store block blk of id: len bytes (block_size, or fewer for an object's
 * last block). 0, or a negative errno when it was not stored (the caller
 * goes on: the cache is best effort). Evicts older blocks to stay inside
 * the budget. flags: 0 (a read's block: counted as admitted) or
 * BCACHE_WARM. */
int  bcache_put(struct bcache *bc, const struct bcache_id *id, uint64_t blk,
		const void *data, size_t len, unsigned flags);
/* Release every block of the object version id (size bytes long): queued,
 * done by a background thread; returns at once. */
void bcache_drop(struct bcache *bc, const struct bcache_id *id, uint64_t size);
/* Evict until clean blocks fit in what staging leaves of the budget (the
 * stage calls it after it grew). Like put and read, it calls conf.staged():
 * never call it holding a lock that staged() takes. */
void bcache_trim(struct bcache *bc);
void bcache_counters(struct bcache *bc, struct bcache_counters *out);

#endif
