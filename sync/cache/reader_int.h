/*
 * reader_int.h — the reader's internals (reader.h has the contract),
 * shared by its files.
 *
 * Layers, top first; each file calls only those below it:
 *   reader.c          open and close; reads: windows, pieces, the burst
 *                     buffer's whole blocks read straight into the reply
 *   reader_ahead.c    read-ahead: ranges fetched ahead by helper threads,
 *                     widened as they are read, stopped by a random read
 *   reader_chunks.c,  a reader's chunk slots: found, chosen, freed,
 *   reader_fetch.c    trimmed; one range fetched, from the burst buffer
 *                     where it holds the blocks, the rest by ranged GETs
 *   reader_pool.c     bounds across readers; range buffers, their free list
 * (reader.c's DESIGN has the chunks' states.)
 *
 * A chunk's bytes live in a struct reader_buf with a count of references
 * (reader.c's DESIGN); the last reference returns the buffer to its
 * pool's free list (at most FREE_MAX_N buffers, FREE_TOTAL bytes), from
 * which the next chunk of about its size takes it. The pool also grants
 * the bytes read ahead (reader_pool_take/landed/release) and the windows
 * kept between reads (reader_pool_keep/unkeep) under its bounds.
 *
 * Locks: a reader's lock protects its chunks and its stream's state and is
 * never held across a GET or disk I/O; the pool's lock is a leaf taken
 * under it.
 * Lock order (this module's; docs/design.md "Lock order" has the process's):
 *   reader lock -> reader pool lock
 *
 * Tests: test_reader.c (through reader.h), test_stats.c (the read
 * counters).
 */
#ifndef FACETFS_READER_INT_H
#define FACETFS_READER_INT_H

#include "sync/cache/reader.h"

#include "common/stats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the pool's buffers (reader_pool.c) -------------------------------- */

#define FREE_MAX_N   16u                 /* free buffers kept by a pool */
#define FREE_TOTAL   (64u * 1024 * 1024) /* and their bytes at most */
#define BUF_UNIT     (64u * 1024)        /* buffers are made in these */
/* Buffers of a huge page or more are mapped on their own, huge-page
 * aligned, and the kernel is asked to back them with huge pages: 8 MiB
 * then fault in 4 times, not 2,048, the copy from the socket into them
 * misses the TLB less, and FUSE pins a reply's pages (get_user_pages on
 * every write to /dev/fuse) a huge page at a time. */
#define HUGE_UNIT    (2u * 1024 * 1024)

struct reader_buf;

struct reader_pool {
	pthread_mutex_t lock;        /* a leaf; protects everything below */
	struct reader_ra_conf c;
	unsigned streams, streams_max;
	uint64_t bytes, bytes_max;
	uint64_t kept, kept_max;     /* c.kept_bytes at most */
	struct reader_buf *free;           /* buffers no one holds, for reuse */
	unsigned n_free;
	uint64_t free_bytes;
	uint64_t made, reused;       /* buffers allocated; taken from free */
};

/* Bytes of one chunk (or of a read of the burst buffer's files), shared
 * by references: see reader.c's DESIGN. data holds cap bytes. */
struct reader_buf {
	atomic_uint refs;
	size_t cap;
	struct reader_pool *pool;    /* where the last put returns it; NULL:
				      * freed */
	struct reader_buf *next;           /* on the pool's free list */
	bool mapped;                 /* data is a mapping of its own (map_len) */
	size_t map_len;
	char *data;                  /* after the header, or mapped */
};

/* ---- the reader: its tunables, chunks and state -------------------------- */

#define WIN_MIN      (256u * 1024)
#define WIN_MAX      (8u * 1024 * 1024)
#define RAND_UNIT    (64u * 1024)
#define SEQ_SLACK    (2u * 1024 * 1024)  /* reads this far ahead are sequential */
#define SEQ_BEHIND   (8u * 1024 * 1024)  /* and this far behind (seq_near) */
#define RA_AFTER     (1u * 1024 * 1024)  /* read in sequence before read-ahead */
#define RA_CHUNK_MIN (2u * 1024 * 1024)
#define RA_CHUNK_MAX (8u * 1024 * 1024)
#define RA_WIN_MIN   (4u * 1024 * 1024)
/* Kept behind a sequential read: a read the kernel sent earlier that a
 * thread takes late (seq_near) finds its bytes still here. With 1 MiB a
 * read 3 MiB late fetched its 1 MiB again (test_reader, out of order). */
#define TRIM_BEHIND  (4u * 1024 * 1024)
/* A sequential reader served by the burst buffer has the kernel read its
 * next blocks' files this many blocks ahead (bcache_prefetch). */
#define PF_BLOCKS    8u
#define SYNC_KEEP    4u
#define RA_SLOTS     (READER_RA_STREAMS_MAX + SYNC_KEEP + 4u)

/* A chunk's states (reader.c's DESIGN; docs/design.md "A reader's chunks"
 * has the table of transitions); reader_chunk_to() is the only function
 * that changes one. */
enum ch_state { CH_FREE, CH_FETCHING, CH_READY, CH_FAILED };

struct chunk {
	enum ch_state state;
	bool ahead;              /* fetched ahead (charged to ra_held, the pool) */
	bool used;               /* a read took bytes from it */
	bool orphan;             /* FETCHING but no longer wanted */
	uint64_t off;
	size_t len, got;
	struct reader_buf *rb;         /* its bytes; NULL until the fetch allocates */
	size_t kept;             /* bytes charged to the pool's kept (a
				  * window kept between reads) */
	uint64_t tick;           /* last use */
};

struct reader {
	struct s3 *s3;
	struct reader_counters *ctr; /* NULL: not counted */
	struct bcache *bc;       /* NULL: no burst buffer (or no ETag) */
	struct pins *pins;       /* holds this version while bc is set */
	struct reader_pool *pool;
	struct reader_ra_conf ra;
	uint32_t bs;             /* the burst buffer's block size */
	bool store;              /* bc stores what it fetches (bcache_admit);
				  * false: a cold stream, whose windows need
				  * not be whole blocks */
	char *bucket, *key;
	char etag[72];
	uint64_t size;

	pthread_mutex_t lock;    /* protects everything below */
	pthread_cond_t cv;       /* a chunk landed; a helper ended */
	struct chunk ch[RA_SLOTS];
	uint64_t tick;
	unsigned helpers;        /* helper threads running */
	bool closing;
	uint64_t next_seq_off;   /* the end of the furthest read begun (seq_near) */
	uint64_t seq_run;        /* bytes read in sequence */
	size_t seq_win;          /* the next sequential window read itself */
	uint64_t ra_end;         /* the next range ahead starts here */
	size_t ra_chunk;         /* its size */
	uint64_t ra_win;         /* bytes to keep ahead of the reader */
	uint64_t ra_held;        /* bytes of ahead chunks held */
	uint64_t pf_end;         /* blocks before this one were prefetched */
	unsigned ra_flight;      /* ahead GETs in flight */
};

/* Bump counter field of r's counters by n (none when r has none). */
#define R_COUNT(r, field, n) \
	do { if ((r)->ctr) stats_add(&(r)->ctr->field, (n)); } while (0)

static inline size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* ---- reader_ahead.c: read-ahead (the caller holds r->lock) -------------- */

/* Back to the start of a stream: no range ahead, the first window and
 * range sizes, nothing read in sequence. */
void reader_ra_reset(struct reader *r);
/* A read that is not sequential: drop what was fetched ahead and start
 * over. */
void reader_ra_stop(struct reader *r);
/* The reader took its first bytes from an ahead chunk: widen. */
void reader_ra_grow(struct reader *r);
/* Start ranges ahead of pos, a sequential reader's position, within the
 * bounds. */
void reader_ra_fill(struct reader *r, uint64_t pos);

/* ---- reader_chunks.c: the chunk slots (the caller holds r->lock) -------- */

/* c goes to state `to`, asserting the table allows it from c's state. */
void reader_chunk_to(struct chunk *c, enum ch_state to);
/* A FREE slot c starts the fetch of [off, off+len): FETCHING, its other
 * fields but `kept` reset. */
void reader_chunk_start(struct reader *r, struct chunk *c, uint64_t off,
			size_t len, bool ahead);
/* Free a chunk that no helper fetches (its slot becomes FREE). */
void reader_chunk_free(struct reader *r, struct chunk *c);
/* The chunk holding byte at: a READY one with it, else one FETCHING or
 * FAILED whose range has it; NULL: none. */
struct chunk *reader_chunk_find(struct reader *r, uint64_t at);
/* Where the first chunk starting after at begins (the object's size if
 * none): a window fetched at at stops there. */
uint64_t reader_chunk_next(struct reader *r, uint64_t at);
/* A slot for a new chunk: a free one, else (or, for a sync chunk, when
 * SYNC_KEEP sync chunks are held) the least recently used sync chunk that
 * landed; NULL when every slot is busy. */
struct chunk *reader_chunk_slot(struct reader *r, bool ahead);
/* Free what a sequential reader at pos left TRIM_BEHIND behind. */
void reader_chunks_trim(struct reader *r, uint64_t pos);

/* ---- reader_fetch.c: one range fetched (no lock held) ------------------- */

/* [at, at+want) into *rb (taken from the pool when NULL); *got bytes
 * arrived. The buffer is the caller's in every case. */
int  reader_fetch(struct reader *r, uint64_t at, size_t want,
		  struct reader_buf **rb, size_t *got);
/* With a burst buffer that stores what the reader fetches, a window is
 * whole blocks: [*at, +*want) grown to block boundaries (the object's end
 * for the last one). A cold reader's stays as asked. */
void reader_align_blocks(const struct reader *r, uint64_t *at, size_t *want);

/* ---- reader_pool.c: bounds across readers, range buffers ---------------- */

/* A buffer of at least want bytes, one reference (NULL: no memory). */
struct reader_buf *reader_rbuf_get(struct reader_pool *p, size_t want);
/* One more reference to b (returned). */
struct reader_buf *reader_rbuf_ref(struct reader_buf *b);
/* Drop one reference; the last returns b to its pool or frees it. */
void reader_rbuf_put(struct reader_buf *b);
/* One GET of len bytes ahead: granted (counted) or not; it landed; its
 * bytes are let go. */
bool reader_pool_take(struct reader_pool *p, uint64_t len);
void reader_pool_landed(struct reader_pool *p);
void reader_pool_release(struct reader_pool *p, uint64_t len);
/* len bytes kept between reads (a window): granted or not; let go. */
bool reader_pool_keep(struct reader_pool *p, uint64_t len);
void reader_pool_unkeep(struct reader_pool *p, uint64_t len);

#endif
