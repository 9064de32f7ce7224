/*
 * s3_fake_int.h — internals of the in-memory store (s3_fake.h) shared by
 * its files. Not for other files.
 *
 * Layers, top first; each file calls only those below it:
 *   s3_fake.c          creation, the table of operations, free; the
 *                      test's side (s3_fake_*)
 *   s3_fake_ops.c,     the object operations (fake_get, ...); the
 *   s3_fake_mpu.c      multipart operations and their test side
 *   s3_fake_store.c    the object table and what every request shares
 *                      (its start, key and metadata checks, writes)
 *
 * Every helper below runs with f->mu held unless it says otherwise.
 *
 * Tests: test_s3_fake.c, test_s3_mpu.c (through s3_fake.h).
 */
#ifndef FACETFS_S3_FAKE_INT_H
#define FACETFS_S3_FAKE_INT_H

#include "sync/s3/s3_fake.h"

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

/* ---- s3_fake_store.c: the object table, what requests share ---------- */

/* Whether bucket exists (a generated one too). */
bool fake_bucket_has(const struct s3_fake *f, const char *bucket);
/* Index of the first object >= (bucket, key); *found if it is that one. */
size_t fake_find(const struct s3_fake *f, const char *bucket,
		 const char *key, bool *found);
/* The live object at (bucket, key) or NULL. */
struct fake_obj *fake_live(struct s3_fake *f, const char *bucket,
			   const char *key);
/* What a HEAD answers of o into out (tags too when with_tags; released
 * with obj_meta_release). 0 or -ENOMEM. */
int  fake_head_fill(const struct fake_obj *o, struct obj_meta *out,
		    bool with_tags);
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

/* ---- s3_fake_ops.c: the object operations, as common/s3.h's s3_* ----- */

int  fake_get(struct s3 *s, const char *bucket, const char *key,
	      uint64_t off, size_t len, const char *if_match, void *buf,
	      size_t *got);
int  fake_head(struct s3 *s, const char *bucket, const char *key,
	       struct obj_meta *out);
int  fake_get_tagging(struct s3 *s, const char *bucket, const char *key,
		      struct obj_kv **tags, size_t *n);
int  fake_list_page(struct s3 *s, const char *bucket, const char *prefix,
		    const char *token, s3_list_fn fn, void *ctx,
		    char *next_token, size_t ntlen, bool *truncated);
int  fake_put_file(struct s3 *s, const char *bucket, const char *key,
		   int fd, uint64_t size, const struct obj_kv *meta,
		   size_t n_meta, const char *content_type,
		   const char *base, char etag_out[72]);
int  fake_del(struct s3 *s, const char *bucket, const char *key);
int  fake_copy(struct s3 *s, const char *bucket, const char *src_key,
	       const char *dst_key, const struct obj_kv *meta,
	       size_t n_meta, const struct obj_meta *src_head,
	       char etag_out[72]);
int  fake_bucket_check(struct s3 *s, const char *bucket);

/* ---- s3_fake_mpu.c: the multipart operations, the release of uploads -- */

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
