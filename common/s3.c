/*
 * s3.c — the S3 interface's calls (s3.h): each one calls through the
 * implementation's table of operations.
 */
#include "common/s3.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

/* The flag this thread's requests watch (s3_cancel_watch). */
static _Thread_local const atomic_bool *cancel_flag;

void s3_cancel_watch(const atomic_bool *flag)
{
	cancel_flag = flag;
}

const atomic_bool *s3_cancel_flag(void)
{
	return cancel_flag;
}

bool s3_cancelled(void)
{
	return cancel_flag && atomic_load(cancel_flag);
}

void s3_free(struct s3 *s)
{
	if (s)
		s->ops->free(s);
}

int s3_get(struct s3 *s, const char *bucket, const char *key, uint64_t off,
	   size_t len, const char *if_match, void *buf, size_t *got)
{
	return s->ops->get(s, bucket, key, off, len, if_match, buf, got);
}

int s3_get_stream(struct s3 *s, const char *bucket, const char *key, uint64_t off,
		  uint64_t len, const char *if_match, s3_data_fn fn, void *ctx,
		  uint64_t *got)
{
	*got = 0;
	if (s->ops->get_stream)
		return s->ops->get_stream(s, bucket, key, off, len, if_match, fn, ctx, got);
	char *buf = malloc(S3_STREAM_UNIT);
	if (!buf)
		return -ENOMEM;
	int rc = 0;
	while (*got < len) {
		size_t want = len - *got < S3_STREAM_UNIT ? (size_t)(len - *got) : S3_STREAM_UNIT;
		size_t n = 0;
		if ((rc = s->ops->get(s, bucket, key, off + *got, want, if_match, buf, &n)) < 0 ||
		    (n && (rc = fn(ctx, buf, n)) != 0))
			break;
		*got += n;
		if (n < want)
			break;               /* the end of the object */
	}
	free(buf);
	return rc;
}

int s3_head(struct s3 *s, const char *bucket, const char *key,
	    struct obj_meta *out)
{
	return s->ops->head(s, bucket, key, out);
}

int s3_get_tagging(struct s3 *s, const char *bucket, const char *key,
		   struct obj_kv **tags, size_t *n)
{
	return s->ops->get_tagging(s, bucket, key, tags, n);
}

int s3_list_page(struct s3 *s, const char *bucket, const char *prefix,
		 const char *token, s3_list_fn fn, void *ctx,
		 char *next_token, size_t ntlen, bool *truncated)
{
	return s->ops->list_page(s, bucket, prefix, token, fn, ctx, next_token,
				 ntlen, truncated);
}

int s3_put_file(struct s3 *s, const char *bucket, const char *key, int fd,
		uint64_t size, const struct obj_kv *meta, size_t n_meta,
		const char *content_type, char etag_out[72])
{
	return s->ops->put_file(s, bucket, key, fd, size, meta, n_meta,
				content_type, NULL, etag_out);
}

int s3_put_file_if(struct s3 *s, const char *bucket, const char *key, int fd,
		   uint64_t size, const struct obj_kv *meta, size_t n_meta,
		   const char *content_type, const char *base, char etag_out[72])
{
	if (!base) {
		etag_out[0] = '\0';
		return -EINVAL;
	}
	return s->ops->put_file(s, bucket, key, fd, size, meta, n_meta,
				content_type, base, etag_out);
}

int s3_delete(struct s3 *s, const char *bucket, const char *key)
{
	return s->ops->del(s, bucket, key);
}

int s3_copy(struct s3 *s, const char *bucket, const char *src_key,
	    const char *dst_key, const struct obj_kv *meta, size_t n_meta,
	    const struct obj_meta *src_head, char etag_out[72])
{
	return s->ops->copy(s, bucket, src_key, dst_key, meta, n_meta,
			    src_head, etag_out);
}

int s3_bucket_check(struct s3 *s, const char *bucket)
{
	return s->ops->bucket_check(s, bucket);
}

bool s3_mpu_create_refused(int err)
{
	return err == -ENOENT || err == -EACCES || err == -EPERM ||
	       err == -EINVAL || err == -ENAMETOOLONG || err == -EFBIG;
}

int s3_mpu_create(struct s3 *s, const char *bucket, const char *key,
		  const struct obj_kv *meta, size_t n_meta,
		  const char *content_type, char *upload_id, size_t idlen)
{
	return s->ops->mpu_create(s, bucket, key, meta, n_meta, content_type,
				  upload_id, idlen);
}

int s3_mpu_put_part(struct s3 *s, const char *bucket, const char *key,
		    const char *upload_id, unsigned part, int fd, uint64_t off,
		    uint64_t size, char etag_out[72])
{
	return s->ops->mpu_put_part(s, bucket, key, upload_id, part, fd, off,
				    size, etag_out);
}

int s3_mpu_copy_part(struct s3 *s, const char *bucket, const char *key,
		     const char *upload_id, unsigned part, const char *src_key,
		     const char *src_if_match, uint64_t off, uint64_t size,
		     char etag_out[72])
{
	return s->ops->mpu_copy_part(s, bucket, key, upload_id, part, src_key,
				     src_if_match, off, size, etag_out);
}

int s3_mpu_complete(struct s3 *s, const char *bucket, const char *key,
		    const char *upload_id, const struct s3_part *parts,
		    size_t n, char etag_out[72])
{
	return s->ops->mpu_complete(s, bucket, key, upload_id, parts, n,
				    etag_out);
}

int s3_mpu_abort(struct s3 *s, const char *bucket, const char *key,
		 const char *upload_id)
{
	return s->ops->mpu_abort(s, bucket, key, upload_id);
}

int s3_mpu_list(struct s3 *s, const char *bucket, const char *prefix,
		s3_upload_fn fn, void *ctx)
{
	return s->ops->mpu_list(s, bucket, prefix, fn, ctx);
}
