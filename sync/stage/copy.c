/*
 * copy.c — see copy.h.
 *
 * DESIGN. A multipart copy: CreateMultipartUpload with the metadata and
 * content type the new object gets, then `threads` workers take part
 * indexes from a shared counter (under cp.lock) and copy each range with
 * s3_mpu_copy_part conditioned on the source's ETag; the first failure
 * stops the others from taking more; after the join, either
 * CompleteMultipartUpload with every part's ETag in order, or
 * AbortMultipartUpload. Parts are sized by upload_part_size(), so a
 * 5 TiB object still fits in S3_MAX_PARTS. The lock guards only the
 * counter and the first error; it is never held across a request.
 */
#include "sync/stage/copy.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/lock.h"
#include "common/log.h"
#include "sync/stage/upload.h"

#define COPY_THREADS_MAX 64

static uint64_t copy_threshold(const struct copy_conf *c)
{
	uint64_t t = c && c->threshold ? c->threshold : COPY_THRESHOLD_DEFAULT;
	return t > S3_MAX_PART ? S3_MAX_PART : t;
}

bool copy_in_parts(const struct copy_conf *c, uint64_t size)
{
	return size > copy_threshold(c);
}

struct cp {
	struct s3 *s;
	const char *bucket, *src_key, *dst_key, *id, *if_match;
	uint64_t size, part;
	size_t n_parts;
	struct s3_part *parts;

	const atomic_bool *cancel;   /* the caller's (common/s3.h): the
				      * part threads watch it too */
	pthread_mutex_t lock;        /* protects next and err */
	size_t next;                 /* the next part index to copy */
	int err;                     /* the first failure */
};

static void *cp_worker(void *arg)
{
	struct cp *p = arg;
	s3_cancel_watch(p->cancel);
	for (;;) {
		mod_lock(&p->lock);
		size_t i = p->next;
		bool go = !p->err && i < p->n_parts;
		if (go)
			p->next++;
		mod_unlock(&p->lock);
		if (!go)
			return NULL;
		uint64_t off = (uint64_t)i * p->part;
		uint64_t len = p->size - off < p->part ? p->size - off : p->part;
		p->parts[i].number = (unsigned)i + 1;
		int err = s3_mpu_copy_part(p->s, p->bucket, p->dst_key, p->id,
					   p->parts[i].number, p->src_key,
					   p->if_match, off, len, p->parts[i].etag);
		if (err) {
			mod_lock(&p->lock);
			if (!p->err)
				p->err = err;
			mod_unlock(&p->lock);
			if (err == -ESTALE)
				log_info("copy: %s/%s changed during its copy to %s "
					 "(part %zu of %zu)", p->bucket, p->src_key,
					 p->dst_key, i + 1, p->n_parts);
			else
				log_error("copy: %s/%s to %s: part %zu of %zu failed: %s",
					  p->bucket, p->src_key, p->dst_key, i + 1,
					  p->n_parts, strerror(-err));
		}
	}
}

static int copy_parts(struct cp *p, unsigned threads)
{
	pthread_t tid[COPY_THREADS_MAX];
	if (threads > COPY_THREADS_MAX)
		threads = COPY_THREADS_MAX;
	if (threads > p->n_parts)
		threads = (unsigned)p->n_parts;
	unsigned started = 0;
	for (; started < threads; started++)
		if (pthread_create(&tid[started], NULL, cp_worker, p) != 0)
			break;
	if (started == 0)
		cp_worker(p);    /* no thread to be had: copy them here */
	for (unsigned t = 0; t < started; t++)
		pthread_join(tid[t], NULL);
	return p->err;
}

/* An upload of bucket/key created since since_ns may stay open. */
static void left_open(const struct copy_conf *c, const char *bucket,
		      const char *key, int64_t since_ns)
{
	if (c && c->left_open)
		c->left_open(c->left_ctx, bucket, key, since_ns);
}

static int copy_multipart(struct s3 *s, const struct copy_conf *c,
			  const char *bucket, const char *src_key,
			  const char *dst_key, const struct obj_meta *src,
			  const struct obj_kv *meta, size_t n_meta, char etag[72])
{
	struct upload_conf uc = { .part_size = c ? c->part_size : 0 };
	uint64_t part = upload_part_size(&uc, src->size);
	char id[1024];
	struct timespec t0;
	clock_gettime(CLOCK_REALTIME, &t0);
	int64_t since_ns = (int64_t)t0.tv_sec * 1000000000ll + t0.tv_nsec;
	int err = s3_mpu_create(s, bucket, dst_key, meta, n_meta,
				src->content_type, id, sizeof id);
	if (err) {
		if (!s3_mpu_create_refused(err))
			left_open(c, bucket, dst_key, since_ns);
		return err;
	}
	struct cp p = {
		.s = s, .bucket = bucket, .src_key = src_key, .dst_key = dst_key,
		.id = id, .if_match = src->etag, .size = src->size, .part = part,
		.n_parts = (size_t)((src->size + part - 1) / part),
		.cancel = s3_cancel_flag(),
	};
	pthread_mutex_init(&p.lock, NULL);
	p.parts = calloc(p.n_parts, sizeof *p.parts);
	if (!p.parts)
		err = -ENOMEM;
	if (!err)
		err = copy_parts(&p, c && c->threads ? c->threads :
				 UPLOAD_THREADS_DEFAULT);
	if (!err)
		err = s3_mpu_complete(s, bucket, dst_key, id, p.parts, p.n_parts,
				      etag);
	if (err) {
		int aerr = s3_mpu_abort(s, bucket, dst_key, id);
		if (aerr) {
			log_error("copy: %s/%s: aborting upload %s failed: %s; its "
				  "parts stay until aborted", bucket, dst_key, id,
				  strerror(-aerr));
			left_open(c, bucket, dst_key, since_ns);
		}
		etag[0] = '\0';
	} else {
		log_debug("copy: %s/%s to %s: %" PRIu64 " bytes in %zu parts of %"
			  PRIu64, bucket, src_key, dst_key, src->size, p.n_parts,
			  part);
	}
	free(p.parts);
	pthread_mutex_destroy(&p.lock);
	return err;
}

int copy_object(struct s3 *s, const struct copy_conf *c, const char *bucket,
		const char *src_key, const char *dst_key,
		const struct obj_meta *src, const struct obj_kv *meta,
		size_t n_meta, char etag[72])
{
	etag[0] = '\0';
	if (!src || !src->etag[0])
		return -EINVAL;
	if (src->size > S3_MAX_OBJECT)
		return -EFBIG;
	if (!copy_in_parts(c, src->size))
		return s3_copy(s, bucket, src_key, dst_key, meta, n_meta, src, etag);
	if (!meta) {                 /* the new upload carries the source's */
		meta = src->meta;
		n_meta = src->n_meta;
	}
	return copy_multipart(s, c, bucket, src_key, dst_key, src, meta, n_meta,
			      etag);
}
