/*
 * s3_fake_int.h — internals of the in-memory store (s3_fake.c) shared with
 * its multipart half (s3_fake_mpu.c). Not for other files. Every helper
 * below runs with f->mu held unless it says otherwise.
 */
#ifndef FACETFS_S3_FAKE_INT_H
#define FACETFS_S3_FAKE_INT_H

#include "sync/s3_fake.h"

#include <pthread.h>
#include <stdbool.h>

#define FAKE_PAGE_DEFAULT 1000
#define FAKE_KEY_MAX 1024

struct fake_obj {
	struct obj_meta m;       /* bucket, key, size, mtime_ns, etag, ctype, meta, tags */
	unsigned char *data;     /* m.size bytes (never NULL) */
	uint64_t version;
	bool gone;               /* a tombstone */
};

/* A bucket whose listing is generated (s3_fake_bucket_generate). */
struct fake_gen {
	char *bucket, *prefix;
	uint64_t count;
};

struct s3_fake {
	struct s3 iface;
	pthread_mutex_t mu;
	char **buckets;
	size_t n_buckets;
	struct fake_obj *objs;   /* sorted by (bucket, key) */
	size_t n_objs, cap_objs;
	int64_t clock_ns;
	size_t page_size;
	uint64_t counts[S3K_N];
	s3_fake_hook_fn hook;
	void *hook_ctx;
	struct fake_upload *uploads;   /* multipart uploads in progress */
	size_t n_uploads;
	uint64_t next_upload;          /* ids: "fake-upload-N" */
	uint64_t min_part;             /* smallest part but the last */
	struct fake_gen *gens;         /* generated buckets */
	size_t n_gens;
	bool ignore_if_none_match;     /* s3_fake_cond_ignore */
	bool ignore_if_match;
};

static inline struct s3_fake *fake_of(struct s3 *s)
{
	return (struct s3_fake *)s;
}

/* The live object at (bucket, key) or NULL. */
struct fake_obj *fake_live(struct s3_fake *f, const char *bucket,
			   const char *key);
void fake_md5_hex(const void *buf, size_t len, char out[72]);
/* 0, -EINVAL (empty) or -ENAMETOOLONG. No lock needed. */
int  fake_check_key(const char *key);
/* Metadata as the real client accepts it, names lower-cased; no lock
 * needed. 0, -EINVAL or -ENOMEM. */
int  fake_kv_build(const struct obj_kv *in, size_t n, struct obj_kv **out,
	      size_t *nout);
/* Store a new version at (bucket, key): takes data, meta and tags (freed
 * on failure); ctype is copied. */
int  fake_write(struct s3_fake *f, const char *bucket, const char *key,
		unsigned char *data, size_t len, struct obj_kv *meta,
		size_t n_meta, const char *ctype, struct obj_kv *tags,
		size_t n_tags, char etag_out[72]);
/* Called without the lock: the hook, then the lock (held on success),
 * the count of kind k and the bucket check (-ENOENT, lock released). */
int  fake_begin(struct s3_fake *f, enum s3_kind k, const char *bucket,
		const char *key);
/* Called without the lock: the test's hook. */
void fake_hook(struct s3_fake *f, enum s3_kind k, const char *bucket,
	       const char *key);

/* s3_fake_mpu.c: the multipart operations and the release of uploads. */
int  fake_mpu_create(struct s3 *s, const char *bucket, const char *key,
		     const struct obj_kv *meta, size_t n_meta,
		     const char *content_type, char *upload_id, size_t idlen);
int  fake_mpu_put_part(struct s3 *s, const char *bucket, const char *key,
		       const char *upload_id, unsigned part, int fd,
		       uint64_t off, uint64_t size, char etag_out[72]);
int  fake_mpu_copy_part(struct s3 *s, const char *bucket, const char *key,
			const char *upload_id, unsigned part,
			const char *src_key, const char *src_if_match,
			uint64_t off, uint64_t size, char etag_out[72]);
int  fake_mpu_complete(struct s3 *s, const char *bucket, const char *key,
		       const char *upload_id, const struct s3_part *parts,
		       size_t n, char etag_out[72]);
int  fake_mpu_abort(struct s3 *s, const char *bucket, const char *key,
		    const char *upload_id);
int  fake_mpu_list(struct s3 *s, const char *bucket, const char *prefix,
		   s3_upload_fn fn, void *ctx);
/* Frees every upload (at fake_free). */
void fake_mpu_release(struct s3_fake *f);

#endif
