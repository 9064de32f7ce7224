/*
 * reader_int.h — the read path's buffers and the pool that bounds them
 * across readers, shared by reader.c (the reader) and reader_pool.c (the
 * pool); reader.h has the contract. reader.c calls into reader_pool.c,
 * never the reverse.
 *
 * A chunk's bytes live in a struct reader_buf with a count of references
 * (reader.c's DESIGN); the last reference returns the buffer to its
 * pool's free list (at most FREE_MAX_N buffers, FREE_TOTAL bytes), from
 * which the next chunk of about its size takes it. The pool also grants
 * the bytes read ahead (reader_pool_take/landed/release) and the windows
 * kept between reads (reader_pool_keep/unkeep) under its bounds.
 */
#ifndef FACETFS_READER_INT_H
#define FACETFS_READER_INT_H

#include "sync/reader.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
 * by references: see DESIGN above. data holds cap bytes. */
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
