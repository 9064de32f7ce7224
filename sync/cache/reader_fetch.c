/*
 * reader_fetch.c — one range of a reader fetched (reader_int.h): from the
 * burst buffer where it holds the blocks, the rest with ranged GETs that
 * carry If-Match (consecutive missing blocks in one), stored in the burst
 * buffer as they arrive when the reader stores; and a window grown to
 * whole blocks. No lock held.
 */
#include "sync/cache/reader_int.h"

#include "sync/cache/bcache.h"
#include "common/s3.h"

#include <errno.h>

/* [at, at+want) from the burst buffer where it has the blocks, the rest
 * with GETs (the missing blocks in a row in one), stored in it as they
 * arrive when the reader stores (whole blocks only: a cold reader's
 * window need not start on one). *got: the bytes from at on that are
 * there; a GET that fails after blocks were found gives those (the
 * caller asks again for the rest and gets the error then). */
static int fetch_blocks(struct reader *r, uint64_t at, size_t want, char *nb,
			size_t *got)
{
	const struct bcache_id id = { r->bucket, r->key, r->etag };
	size_t done = 0;
	int rc = 0;
	while (done < want) {
		uint64_t pos = at + done;
		uint32_t boff = (uint32_t)(pos % r->bs);
		size_t blen = min_sz(r->bs - boff, want - done);   /* to the block's end */
		if (bcache_read(r->bc, &id, pos / r->bs, nb + done, blen, boff) ==
		    (ssize_t)blen) {
			done += blen;
			continue;
		}
		size_t run = blen;   /* the missing blocks from here: one GET */
		while (done + run < want && !bcache_has(r->bc, &id, (pos + run) / r->bs))
			run += min_sz(r->bs, want - done - run);
		size_t g = 0;
		if ((rc = s3_get(r->s3, r->bucket, r->key, pos, run, r->etag,
				 nb + done, &g)) < 0)
			break;
		if (g && !r->store) {
			bcache_not_admitted(r->bc, (pos + g - 1) / r->bs - pos / r->bs + 1);
		} else if (g) {
			/* The whole blocks among [pos, pos + g). */
			uint64_t b = (pos + r->bs - 1) / r->bs * r->bs;
			for (; b < pos + g; b += r->bs) {
				size_t l = (size_t)(r->size - b < r->bs ? r->size - b : r->bs);
				if (b + l > pos + g)
					break;
				bcache_put(r->bc, &id, b / r->bs, nb + done + (b - pos), l, 0);
			}
		}
		done += g;
		if (g < run)
			break;           /* the object is shorter than the index said */
	}
	*got = done;
	return done ? 0 : rc;
}

/* [at, at+want) into *rb (taken from the pool when NULL); *got bytes
 * arrived. The buffer is the caller's in every case. No lock held. */
int reader_fetch(struct reader *r, uint64_t at, size_t want, struct reader_buf **rb,
		 size_t *got)
{
	*got = 0;
	if (!*rb && !(*rb = reader_rbuf_get(r->pool, want)))
		return -ENOMEM;
	return r->bc ? fetch_blocks(r, at, want, (*rb)->data, got)
		     : s3_get(r->s3, r->bucket, r->key, at, want,
			      r->etag[0] ? r->etag : NULL, (*rb)->data, got);
}

/* With a burst buffer that stores what the reader fetches, a window is
 * whole blocks: [*at, +*want) grown to block boundaries (the object's end
 * for the last one). A cold reader's stays as asked: a 64 KiB random read
 * fetches 64 KiB, not a block. */
void reader_align_blocks(const struct reader *r, uint64_t *at, size_t *want)
{
	if (!r->bc || !r->store)
		return;
	uint64_t start = *at / r->bs * r->bs;
	uint64_t end = (*at + *want + r->bs - 1) / r->bs * r->bs;
	if (end > r->size)
		end = r->size;
	*at = start;
	*want = (size_t)(end - start);
}
