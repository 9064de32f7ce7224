/*
 * upload.c — see upload.h.
 *
 * DESIGN. A multipart upload: CreateMultipartUpload, then `threads`
 * workers take part numbers from a shared counter (under up.lock) and
 * send each with s3_mpu_put_part (pread from the file inside the S3
 * client); the first failure stops the others from taking more parts;
 * after the join, either CompleteMultipartUpload with every part's ETag
 * in order, or AbortMultipartUpload. The lock guards only the counter,
 * the first error and nothing else; it is never held across a request.
 */
#include "sync/stage/upload.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/lock.h"
#include "common/log.h"

uint64_t upload_part_size(const struct upload_conf *c, uint64_t size)
{
	uint64_t part = c && c->part_size ? c->part_size : UPLOAD_PART_DEFAULT;
	if (part > S3_MAX_PART)
		part = S3_MAX_PART;
	if (size > part * (uint64_t)S3_MAX_PARTS) {
		const uint64_t mib = 1ull << 20;
		part = (size + S3_MAX_PARTS - 1) / S3_MAX_PARTS;
		part = (part + mib - 1) / mib * mib;
	}
	return part;
}

uint64_t upload_stream_part_size(const struct upload_conf *c, unsigned n)
{
	uint64_t part = c && c->part_size ? c->part_size : UPLOAD_PART_DEFAULT;
	unsigned group = n ? (n - 1) / 1000 : 0;
	if (group >= 8)
		return S3_MAX_PART;
	for (unsigned g = 0; g < group && part < S3_MAX_PART; g++)
		part *= 2;
	return part < S3_MAX_PART ? part : S3_MAX_PART;
}

struct up {
	struct s3 *s;
	const char *bucket, *key, *id;
	int fd;
	uint64_t size, part;
	size_t n_parts;
	struct s3_part *parts;

	const atomic_bool *cancel;   /* the caller's (common/s3.h): the
				      * part threads watch it too */
	pthread_mutex_t lock;        /* protects next and err */
	size_t next;                 /* the next part index to send */
	int err;                     /* the first failure */
};

static void *up_worker(void *arg)
{
	struct up *u = arg;
	s3_cancel_watch(u->cancel);
	for (;;) {
		mod_lock(&u->lock);
		size_t i = u->next;
		bool go = !u->err && i < u->n_parts;
		if (go)
			u->next++;
		mod_unlock(&u->lock);
		if (!go)
			return NULL;
		uint64_t off = (uint64_t)i * u->part;
		uint64_t len = u->size - off < u->part ? u->size - off : u->part;
		u->parts[i].number = (unsigned)i + 1;
		int err = s3_mpu_put_part(u->s, u->bucket, u->key, u->id,
					  u->parts[i].number, u->fd, off, len,
					  u->parts[i].etag);
		if (err) {
			mod_lock(&u->lock);
			if (!u->err)
				u->err = err;
			mod_unlock(&u->lock);
			log_error("upload: %s/%s part %zu of %zu failed: %s", u->bucket,
				  u->key, i + 1, u->n_parts, strerror(-err));
		}
	}
}

static int upload_parts(struct up *u, unsigned threads)
{
	pthread_t tid[64];
	if (threads > 64)
		threads = 64;
	if (threads > u->n_parts)
		threads = (unsigned)u->n_parts;
	unsigned started = 0;
	for (; started < threads; started++)
		if (pthread_create(&tid[started], NULL, up_worker, u) != 0)
			break;
	if (started == 0)
		up_worker(u);    /* no thread to be had: send them here */
	for (unsigned t = 0; t < started; t++)
		pthread_join(tid[t], NULL);
	return u->err;
}

bool upload_single(const struct upload_conf *c, uint64_t size)
{
	return size <= upload_part_size(c, size);
}

int upload_file(struct s3 *s, const struct upload_conf *c, const char *bucket,
		const char *key, int fd, uint64_t size, const struct obj_kv *meta,
		size_t n_meta, const char *content_type, const char *base,
		const struct upload_hooks *hooks, char etag[72])
{
	etag[0] = '\0';
	if (size > S3_MAX_OBJECT)
		return -EFBIG;
	uint64_t part = upload_part_size(c, size);
	if (size <= part && base)
		return s3_put_file_if(s, bucket, key, fd, size, meta, n_meta,
				      content_type, base, etag);
	if (size <= part)
		return s3_put_file(s, bucket, key, fd, size, meta, n_meta,
				   content_type, etag);
	if (base)
		return -EOPNOTSUPP;      /* a completion is sent with none */

	char id[1024];
	int err = hooks && hooks->creating ? hooks->creating(hooks->ctx) : 0;
	if (err)
		return err;
	err = s3_mpu_create(s, bucket, key, meta, n_meta, content_type, id,
				sizeof id);
	if (err)
		return err;
	struct up u = {
		.s = s, .bucket = bucket, .key = key, .id = id, .fd = fd,
		.size = size, .part = part,
		.n_parts = (size_t)((size + part - 1) / part),
		.cancel = s3_cancel_flag(),
	};
	pthread_mutex_init(&u.lock, NULL);
	u.parts = calloc(u.n_parts, sizeof *u.parts);
	if (!u.parts)
		err = -ENOMEM;
	if (!err && hooks && hooks->started)
		err = hooks->started(hooks->ctx, id);
	if (!err)
		err = upload_parts(&u, c && c->threads ? c->threads :
					 UPLOAD_THREADS_DEFAULT);
	if (!err)
		err = s3_mpu_complete(s, bucket, key, id, u.parts, u.n_parts, etag);
	if (err) {
		int aerr = s3_mpu_abort(s, bucket, key, id);
		if (aerr)
			log_error("upload: %s/%s: aborting upload %s failed: %s; its "
				  "parts stay until aborted", bucket, key, id,
				  strerror(-aerr));
		if (aerr && hooks && hooks->abandoned)
			hooks->abandoned(hooks->ctx, id);
		etag[0] = '\0';
	} else {
		log_debug("upload: %s/%s: %" PRIu64 " bytes in %zu parts of %" PRIu64,
			  bucket, key, size, u.n_parts, part);
	}
	free(u.parts);
	pthread_mutex_destroy(&u.lock);
	return err;
}
