/*
 * bcache_int.h — private to the block cache (bcache.h), shared by its
 * files. Tests include it for the CRC and the name hash.
 *
 * Layers, top first; each file calls only those below it:
 *   bcache.c          the cache's calls: open and close, reads,
 *                     admission, puts, drop requests, counters
 *   bcache_list.c,    the start-up listing thread; the drop thread, which
 *   bcache_drops.c    serves the drop queue
 *   bcache_lru.c      the segmented LRU, the budget and eviction
 *                     (bcache_trim), the victims' reaping
 *   bcache_map.c      the block table: a hash map of entries
 *   bcache_disk.c     checksums, names, the block file format, the
 *                     listing of DIR (no lock, no struct bcache)
 *
 * An entry (struct ent) is in one of three states, changed under bc->mu:
 *   READY    its file is on disk; it is on one LRU list (probation or
 *            protected) and its charge is in bc->used;
 *   WRITING  a put reserved its charge (in bc->used) and writes the file
 *            with no lock held; on no list, so never chosen for eviction;
 *            a second put of the block is skipped; a drop marks it doomed
 *            and the put removes the file once written;
 *   DYING    chosen for removal (evicted, dropped, failed its check): its
 *            charge is already out of bc->used, on no list; whoever made
 *            it DYING unlinks the file with no lock held, then takes it
 *            out of the map and frees it. A put of a DYING block is skipped.
 * Invariants (under mu): used = sum of the charges of READY and WRITING
 * entries; seg[s].bytes = sum over READY entries of segment s; n_ready
 * counts READY entries; nents every entry in the map (at most ENTRIES_MAX
 * plus the puts in flight). When nothing runs, the READY entries are
 * exactly the block files on disk (drops of blocks the listing had not
 * reached yet may leave an entry without a file: its first read removes it).
 *
 * Locks: bc->mu, a leaf, protects the table, the LRU lists, the budget and
 * the drop queue; no disk I/O under it, and conf.staged() is called with
 * no lock held (bcache_budget_now). The process-wide order is in
 * docs/design.md "Lock order".
 *
 * Block file (little-endian), bcache_disk.c:
 *   0  magic "FBC1"      4  u16 version (1)    6  u16 header length (H)
 *   8  u64 block offset  16 u32 data length    20 u32 CRC-32C of the data
 *   24 u16 bucket len    26 u16 key len        28 u16 ETag len  30 u16 0
 *   32 u32 CRC-32C of bytes [0, H) with this field zero   36 u32 0
 *   40 bucket, key, ETag (no NULs)   H: the data
 * The disk functions take no lock; they touch only their arguments and
 * the disk (the CRC tables are built once, under pthread_once).
 *
 * Tests: test_bcache.c.
 */
#ifndef FACETFS_SYNC_BCACHE_INT_H
#define FACETFS_SYNC_BCACHE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/stats.h"
#include "sync/cache/bcache.h"

#define BCACHE_MAGIC       0x31434246u   /* "FBC1" read as little-endian */
#define BCACHE_VERSION     1u
#define BCACHE_HDR_FIXED   40u
#define BCACHE_STR_MAX     4096u         /* longest bucket, key or ETag */
#define BCACHE_CHARGE_UNIT 4096u
/* Length of a block file's name: 32 hex digits, '-', up to 16 hex digits. */
#define BCACHE_NAME_MAX    50u

/* CRC-32C (Castagnoli, reflected, init and final xor ~0): crc is the
 * value so far (0 to start). _sw: tables; _hw: the SSE4.2 instruction
 * (call it only when bcache_crc32c_hw_ok()); bcache_crc32c picks. */
uint32_t bcache_crc32c(uint32_t crc, const void *buf, size_t len);
uint32_t bcache_crc32c_sw(uint32_t crc, const void *buf, size_t len);
uint32_t bcache_crc32c_hw(uint32_t crc, const void *buf, size_t len);
bool bcache_crc32c_hw_ok(void);

/* The 128-bit name hash of one object version. */
struct bcache_hash {
	uint64_t h[2];
};
void bcache_hash_id(const struct bcache_id *id, struct bcache_hash *out);
/* "XX/HHHH...-N" (relative to DIR) into buf[BCACHE_NAME_MAX + 4]. */
void bcache_name_format(const struct bcache_hash *h, uint64_t blk, char *buf);
/* Parse a file name "HHHH...-N" (no directory): 0, or -EINVAL. */
int bcache_name_parse(const char *name, struct bcache_hash *h, uint64_t *blk);

/* A block file's header length for id, or 0 when a string is too long. */
size_t bcache_hdr_len(const struct bcache_id *id);
/* The bytes a block file of len data bytes takes on disk, charged. */
uint64_t bcache_charge(uint64_t file_size);

/* Write block file DIR/REL through a temporary name in the same directory
 * (tmp_seq makes it unique in the process). Makes DIR and DIR/XX when
 * missing (once; *dir_made: DIR itself was missing, so every block file
 * it held is gone). 0 or -errno; never leaves the temporary file. *size:
 * the file's length. */
int bcache_file_write(const char *dir, const char *rel, uint64_t tmp_seq,
		      const struct bcache_id *id, uint64_t off,
		      const void *data, uint32_t len, uint64_t *size,
		      bool *dir_made);

/* Read and check block file DIR/REL against id and off (the data must be
 * at most block_size): copy [boff, boff+len) of the data into buf. Returns
 * the count copied, -ENOENT when there is no file, -EBADMSG when the file
 * fails any check (the caller removes it), other -errno. *size: the file's
 * length when it was found. */
ssize_t bcache_file_read(const char *dir, const char *rel,
			 const struct bcache_id *id, uint64_t off,
			 uint32_t block_size, void *buf, size_t len,
			 uint32_t boff, uint64_t *size);

/* One block file found by the start-up listing. */
struct bcache_found {
	struct bcache_hash h;
	uint64_t blk;
	uint64_t size;
	struct timespec mtime;
};
/* List DIR/00 .. DIR/ff (readdir + fstatat, no block opened), removing
 * temporary files (counted in *tmp_removed). *out: malloc'ed, sorted by
 * mtime, oldest first. A subdirectory that cannot be opened (EIO,
 * EACCES, ELOOP...) is skipped: counted in *dirs_failed, the first one's
 * name and error in failed[] (may be NULL); all 256 failing, or one
 * failing with EMFILE/ENFILE, fails the listing. Stops early (returns
 * -ECANCELED) when *stop turns true. 0 or -errno. */
int bcache_dir_list(const char *dir, atomic_bool *stop,
		    struct bcache_found **out, size_t *n, size_t *tmp_removed,
		    unsigned *dirs_failed, char *failed, size_t failed_len);

/* ---- the table (bcache_map.c, bcache_lru.c) ----------------------------- */

/* Entries the map holds at most (about 80 bytes each: 320 MiB at the cap).
 * A budget allows at most max_bytes / 4 KiB anyway. */
#define ENTRIES_MAX   (1u << 22)
#define BUCKETS_FIRST 1024u
#define DROP_QUEUE    4096u          /* drop requests waiting at most */

/* An entry's states (docs/design.md "Burst buffer": the table of its
 * transitions); bcache_ent_to() is the only function that changes one. NEW:
 * made, in no map yet; READY: its file is whole, on the LRU; WRITING: a put
 * writes its file; DYING: its file is being removed, then the entry freed. */
enum ent_state { ENT_NEW, ENT_READY, ENT_WRITING, ENT_DYING };
enum { SEG_PROBATION, SEG_PROTECTED, SEG_N };

struct ent {
	struct bcache_hash h;
	uint64_t blk;
	struct ent *hnext;           /* hash chain */
	struct ent *prev, *next;     /* LRU list (READY): prev is more recent */
	struct ent *vnext;           /* list of victims (DYING) */
	uint64_t charge;
	uint64_t seq;                /* new at every (re)write */
	uint8_t state, seg;
	bool warm;                   /* put by warm-on-arrival, unread */
	bool doomed;                 /* WRITING, dropped meanwhile */
};

struct lru {
	struct ent *head, *tail;     /* head: most recently used */
	uint64_t bytes;
};

/* A request to drop the blocks of one version: queued by bcache_drop
 * (bcache.c), served by the drop thread (bcache_drops.c). */
struct drop_req {
	struct bcache_hash h;
	uint64_t nblk;
};

/* The burst buffer's counters (common/stats.h): blocks read from it, and
 * blocks a read wanted that it did not hold (the reader counts its window
 * hits and misses under the same names when there is no burst buffer);
 * what the admission rule did: blocks reads stored, blocks cold readers
 * fetched and did not store, opens found cold. */
struct bcache_stats {
	stats_counter hits, misses;
	stats_counter admitted, not_admitted, cold_opens;
};

struct bcache {
	char *dir;
	uint32_t block_size;
	uint64_t max_bytes;
	uint64_t (*staged)(void *ctx);
	void *staged_ctx;
	void (*dir_made)(void *ctx);
	uint64_t cold_min;           /* bcache_admit: see bcache.h */
	struct bcache_stats ctr;
	struct stats_group grp;      /* ctr, registered with conf.st */
	int lock_fd;                 /* DIR/lock, flock'ed */
	pthread_t list_thr, drop_thr;
	atomic_bool stop;            /* close: the listing gives up */
	atomic_uint_fast64_t tmp_seq;
	atomic_uint_fast64_t logged; /* errnos of write errors logged (bits) */

	pthread_mutex_t mu;          /* protects everything below */
	pthread_cond_t drop_cv;      /* drop queue not empty, or stopping */
	struct ent **buckets;
	size_t nbuckets, nents;
	struct lru seg[SEG_N];
	uint64_t used, n_ready, seq;
	bool loading, stopping;
	bool unlisted;               /* the listing failed: DIR's contents are
				      * unknown, so no put (the budget could
				      * not be kept); reads look on disk */
	struct bcache_counters c;    /* the event counters */
	struct bcache_hash *seen;    /* BCACHE_SEEN slots: versions opened
				      * (bcache_admit); all zero: empty */
	struct drop_req drops[DROP_QUEUE];
	size_t d_head, d_len;
};

/* ---- bcache_map.c: the block table -------------------------------------- */

/* The entry of block blk of h, or NULL. */
struct ent *bcache_map_find(struct bcache *bc, const struct bcache_hash *h,
			    uint64_t blk);
/* Add e (grows the buckets when chains grow long); take e out. */
void bcache_map_insert(struct bcache *bc, struct ent *e);
void bcache_map_remove(struct bcache *bc, struct ent *e);
/* A zeroed entry for block blk of h (NEW: in no map, no list); NULL: no
 * memory. */
struct ent *bcache_ent_new(const struct bcache_hash *h, uint64_t blk);
/* e goes to state `to`, asserting the table allows it from e's state. */
void bcache_ent_to(struct ent *e, enum ent_state to);
/* The path of the file of block blk of h into path[size]. No lock. */
void bcache_path_of(const struct bcache *bc, const struct bcache_hash *h,
		    uint64_t blk, char *path, size_t size);

/* ---- bcache_lru.c: the segmented LRU, the budget, eviction -------------- */

/* Put e at the most recent end of segment seg; take it off its list. */
void bcache_lru_push(struct bcache *bc, struct ent *e, int seg);
void bcache_lru_unlink(struct bcache *bc, struct ent *e);
/* A READY entry leaves the table's accounting: it becomes DYING (the
 * caller unlinks its file, then reaps it). */
void bcache_ent_retire(struct bcache *bc, struct ent *e);
/* The clean budget now. Called with no lock held. */
uint64_t bcache_budget_now(const struct bcache *bc);
/* Evict READY entries (probation's LRU end first, then protected's) until
 * need more bytes and one more entry fit; the victims are pushed on
 * *victims for bcache_victims_reap(). false when not enough could be
 * evicted. */
bool bcache_room_make(struct bcache *bc, uint64_t budget, uint64_t need,
		      struct ent **victims);
/* Keep the protected segment at most 80 % of the clean budget. */
void bcache_protected_cap(struct bcache *bc, uint64_t budget);
/* A hit: move e to the most recent end of the protected segment. */
void bcache_hit_promote(struct bcache *bc, struct ent *e, uint64_t budget);
/* Unlink the victims' files (no lock held), then free them. */
void bcache_victims_reap(struct bcache *bc, struct ent *victims);

/* ---- bcache_list.c, bcache_drops.c: the threads (arg: the bcache) ------- */

/* Learns the blocks on disk once, at open; then loading is false. */
void *bcache_list_main(void *arg);
/* Serves the drop queue until stopping and the queue is empty. */
void *bcache_drop_main(void *arg);

#endif
