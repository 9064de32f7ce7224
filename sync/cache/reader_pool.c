/* reader_pool.c — the read path's buffers and their pool (see
 * reader_int.h). */
#include "sync/cache/reader_int.h"

#include "common/lock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* A buffer of cap bytes with no pool yet; NULL: no memory. */
static struct reader_buf *rbuf_make(size_t cap)
{
	struct reader_buf *b;
	if (cap < HUGE_UNIT) {
		cap = (cap + BUF_UNIT - 1) / BUF_UNIT * BUF_UNIT;
		if (!cap)
			cap = BUF_UNIT;
		if (!(b = malloc(sizeof *b + cap)))
			return NULL;
		*b = (struct reader_buf){ .cap = cap, .data = (char *)(b + 1) };
		return b;
	}
	cap = (cap + HUGE_UNIT - 1) / HUGE_UNIT * HUGE_UNIT;
	if (!(b = malloc(sizeof *b)))
		return NULL;
	/* One huge page more than needed, so an aligned start is in it; the
	 * ends around it are unmapped again. */
	size_t over = cap + HUGE_UNIT;
	char *m = mmap(NULL, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		free(b);
		return NULL;
	}
	char *a = (char *)(((uintptr_t)m + HUGE_UNIT - 1) & ~(uintptr_t)(HUGE_UNIT - 1));
	if (a > m)
		munmap(m, (size_t)(a - m));
	if (a + cap < m + over)
		munmap(a + cap, (size_t)(m + over - (a + cap)));
	(void)madvise(a, cap, MADV_HUGEPAGE);   /* advice: small pages else */
	*b = (struct reader_buf){ .cap = cap, .mapped = true, .map_len = cap, .data = a };
	return b;
}

static void rbuf_free(struct reader_buf *b)
{
	if (b && b->mapped)
		munmap(b->data, b->map_len);
	free(b);
}

int reader_pool_new(const struct reader_ra_conf *c, struct reader_pool **out)
{
	struct reader_pool *p = calloc(1, sizeof *p);
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	p->c = *c;
	if (!p->c.kept_bytes)
		p->c.kept_bytes = READER_KEPT_TOTAL;
	if (p->c.streams > READER_RA_STREAMS_MAX)
		p->c.streams = READER_RA_STREAMS_MAX;
	*out = p;
	return 0;
}

void reader_pool_free(struct reader_pool *p)
{
	if (!p)
		return;
	while (p->free) {
		struct reader_buf *b = p->free;
		p->free = b->next;
		rbuf_free(b);
	}
	pthread_mutex_destroy(&p->lock);
	free(p);
}

void reader_pool_counters(struct reader_pool *p, struct reader_pool_counters *out)
{
	mod_lock(&p->lock);
	*out = (struct reader_pool_counters){ p->streams, p->streams_max, p->bytes,
					      p->bytes_max, p->kept, p->kept_max,
					      p->n_free, p->free_bytes, p->made, p->reused };
	mod_unlock(&p->lock);
}

/* A buffer of at least want bytes, one reference: a free one of the
 * pool's no larger than twice want (the smallest), else a new one. NULL:
 * no memory. No lock held by the caller but perhaps the reader's (the
 * pool's is a leaf). */
struct reader_buf *reader_rbuf_get(struct reader_pool *p, size_t want)
{
	struct reader_buf *b = NULL;
	if (p) {
		mod_lock(&p->lock);
		struct reader_buf **best = NULL;
		for (struct reader_buf **pp = &p->free; *pp; pp = &(*pp)->next)
			if ((*pp)->cap >= want && (*pp)->cap / 2 <= want &&
			    (!best || (*pp)->cap < (*best)->cap))
				best = pp;
		if (best) {
			b = *best;
			*best = b->next;
			p->n_free--;
			p->free_bytes -= b->cap;
			p->reused++;
		} else {
			p->made++;
		}
		mod_unlock(&p->lock);
	}
	if (!b) {
		if (!(b = rbuf_make(want)))
			return NULL;
		b->pool = p;
	}
	b->next = NULL;
	atomic_init(&b->refs, 1);
	return b;
}

struct reader_buf *reader_rbuf_ref(struct reader_buf *b)
{
	atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
	return b;
}

/* Drop one reference; the last returns b to its pool (if it has room)
 * or frees it. Any thread, any lock (the pool's is a leaf). */
void reader_rbuf_put(struct reader_buf *b)
{
	if (!b || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
		return;
	struct reader_pool *p = b->pool;
	if (p) {
		mod_lock(&p->lock);
		bool keep = p->n_free < FREE_MAX_N && p->free_bytes + b->cap <= FREE_TOTAL;
		if (keep) {
			b->next = p->free;
			p->free = b;
			p->n_free++;
			p->free_bytes += b->cap;
		}
		mod_unlock(&p->lock);
		if (keep)
			return;
	}
	rbuf_free(b);
}

/* One GET of len bytes ahead: granted (counted) or not. */
bool reader_pool_take(struct reader_pool *p, uint64_t len)
{
	if (!p)
		return true;
	bool ok = false;
	mod_lock(&p->lock);
	if (p->streams < p->c.total_streams && p->bytes + len <= p->c.total_bytes) {
		ok = true;
		p->streams++;
		p->bytes += len;
		if (p->streams > p->streams_max)
			p->streams_max = p->streams;
		if (p->bytes > p->bytes_max)
			p->bytes_max = p->bytes;
	}
	mod_unlock(&p->lock);
	return ok;
}

/* The GET landed (its bytes stay held until pool_release). */
void reader_pool_landed(struct reader_pool *p)
{
	if (!p)
		return;
	mod_lock(&p->lock);
	p->streams--;
	mod_unlock(&p->lock);
}

void reader_pool_release(struct reader_pool *p, uint64_t len)
{
	if (!p)
		return;
	mod_lock(&p->lock);
	p->bytes -= len;
	mod_unlock(&p->lock);
}

/* len bytes kept between reads (a window): granted
 * (counted) or not. No pool: always. */
bool reader_pool_keep(struct reader_pool *p, uint64_t len)
{
	if (!p)
		return true;
	mod_lock(&p->lock);
	bool ok = p->kept + len <= p->c.kept_bytes;
	if (ok) {
		p->kept += len;
		if (p->kept > p->kept_max)
			p->kept_max = p->kept;
	}
	mod_unlock(&p->lock);
	return ok;
}

void reader_pool_unkeep(struct reader_pool *p, uint64_t len)
{
	if (!p || !len)
		return;
	mod_lock(&p->lock);
	p->kept -= len;
	mod_unlock(&p->lock);
}
