/* visibility.c — see visibility.h. */
#include "sync/cache/visibility.h"

#include "common/lock.h"
#include "common/object.h"
#include "common/s3.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vis_version {
	const struct reader_src *src;
	char *bucket, *key;
	vis_moved_fn moved;
	void *moved_ctx;
	atomic_bool served;          /* a read returned bytes (eventual) */
	pthread_mutex_t lock;        /* protects rd and etag (a revalidation
				      * swaps them) */
	struct reader *rd;
	char etag[72];
	uint64_t size;               /* of the version etag names */
};

enum vis_policy vis_policy_of(const char *visibility)
{
	if (visibility && strcmp(visibility, "commit") == 0)
		return VIS_COMMIT;
	if (visibility && strcmp(visibility, "eventual") == 0)
		return VIS_EVENTUAL;
	return VIS_SESSION;
}

bool vis_fsync_commits(enum vis_policy p)
{
	return p == VIS_COMMIT;
}

bool vis_read_validates(enum vis_policy p)
{
	return p == VIS_COMMIT;
}

bool vis_open_trusts_index(enum vis_policy p)
{
	return p == VIS_EVENTUAL;
}

int vis_version_open_known(const struct reader_src *src, const char *bucket,
			   const char *key, const char *etag, uint64_t size,
			   struct vis_version **out)
{
	struct vis_version *v = calloc(1, sizeof *v);
	if (!v)
		return -ENOMEM;
	pthread_mutex_init(&v->lock, NULL);
	atomic_init(&v->served, false);
	v->src = src;
	int rc = -ENOMEM;
	if (!(v->bucket = strdup(bucket)) || !(v->key = strdup(key)))
		goto fail;
	snprintf(v->etag, sizeof v->etag, "%s", etag);
	v->size = size;
	if ((rc = reader_open(src, bucket, key, etag, size, &v->rd)) < 0)
		goto fail;
	*out = v;
	return 0;
fail:
	vis_version_close(v);
	return rc;
}

int vis_version_open(const struct reader_src *src, const char *bucket,
		     const char *key, struct vis_version **out)
{
	struct obj_meta o = { 0 };
	int rc = s3_head(src->s3, bucket, key, &o);
	if (rc == 0)
		rc = vis_version_open_known(src, bucket, key, o.etag, o.size, out);
	obj_meta_release(&o);
	return rc;
}

void vis_version_served(struct vis_version *v)
{
	atomic_store(&v->served, true);
}

void vis_version_on_moved(struct vis_version *v, vis_moved_fn fn, void *ctx)
{
	v->moved = fn;
	v->moved_ctx = ctx;
}

/* Make sure the descriptor reads the version S3 has now (one HEAD);
 * *moved: it did not before. unserved_only (eventual): move only if no
 * read of the descriptor has returned a byte yet, checked under the lock
 * that every read holds, so that no read of another thread can have
 * returned bytes of the old version in between (else -ESTALE). */
static int revalidate(struct vis_version *v, bool unserved_only,
		      struct obj_meta *o, bool *moved)
{
	*moved = false;
	int rc = s3_head(v->src->s3, v->bucket, v->key, o);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&v->lock);
	if (strcmp(o->etag, v->etag) != 0) {
		struct reader *nr;
		if (unserved_only && atomic_load(&v->served))
			rc = -ESTALE;
		else if ((rc = reader_open(v->src, v->bucket, v->key, o->etag,
					   o->size, &nr)) == 0) {
			reader_close(v->rd);
			v->rd = nr;
			snprintf(v->etag, sizeof v->etag, "%s", o->etag);
			v->size = o->size;
			*moved = true;
		}
	}
	pthread_mutex_unlock(&v->lock);
	return rc;
}

/* Where a read's bytes go: copied into buf, or left in the reader's
 * buffers as pieces (pc, *n: sync/cache/reader.h reader_read_pieces). */
struct dst {
	void *buf;
	struct reader_piece *pc;
	unsigned *n;
};

static ssize_t rd_read(struct reader *rd, const struct dst *d, size_t len, uint64_t off)
{
	return d->pc ? reader_read_pieces(rd, len, off, d->pc, d->n)
		     : reader_read(rd, d->buf, len, off);
}

/* Read under the version's lock (a revalidation may swap the reader).
 * Bytes returned mark the version served before the lock is let go, so a
 * revalidation that follows sees them. Pieces hold their buffers, not
 * the reader: a swap after the lock is let go leaves them good. */
static ssize_t read_locked(struct vis_version *v, const struct dst *d, size_t len,
			   uint64_t off)
{
	pthread_mutex_lock(&v->lock);
	ssize_t n = rd_read(v->rd, d, len, off);
	if (n > 0)
		atomic_store(&v->served, true);
	pthread_mutex_unlock(&v->lock);
	return n;
}

/* `eventual`: a 412 before any byte was returned moves the descriptor to
 * the current version once; after that it is `session`. */
static ssize_t read_eventual(struct vis_version *v, const struct dst *d, size_t len,
			     uint64_t off)
{
	ssize_t n = read_locked(v, d, len, off);
	if (n == -ESTALE && !atomic_load(&v->served)) {
		struct obj_meta o = { 0 };
		bool moved;
		int rc = revalidate(v, true, &o, &moved);
		if (rc == 0 && moved && v->moved)
			v->moved(v->moved_ctx, &o);   /* the HEAD set bucket and key */
		obj_meta_release(&o);
		n = rc < 0 ? rc : read_locked(v, d, len, off);
	}
	return n;
}

static ssize_t version_read(struct vis_version *v, enum vis_policy p,
			    const struct dst *d, size_t len, uint64_t off)
{
	if (p == VIS_EVENTUAL)
		return read_eventual(v, d, len, off);
	if (!vis_read_validates(p))
		return rd_read(v->rd, d, len, off);
	struct obj_meta o = { 0 };
	bool moved;
	int rc = revalidate(v, false, &o, &moved);
	obj_meta_release(&o);
	return rc < 0 ? rc : read_locked(v, d, len, off);
}

ssize_t vis_version_read(struct vis_version *v, enum vis_policy p, void *buf,
			 size_t len, uint64_t off)
{
	const struct dst d = { .buf = buf };
	return version_read(v, p, &d, len, off);
}

ssize_t vis_version_read_pieces(struct vis_version *v, enum vis_policy p, size_t len,
				uint64_t off, struct reader_piece *pc, unsigned *n)
{
	*n = 0;
	const struct dst d = { .pc = pc, .n = n };
	return version_read(v, p, &d, len, off);
}

void vis_version_etag(struct vis_version *v, char out[72], uint64_t *size)
{
	pthread_mutex_lock(&v->lock);
	snprintf(out, 72, "%s", v->etag);
	if (size)
		*size = v->size;
	pthread_mutex_unlock(&v->lock);
}

bool vis_version_cold(struct vis_version *v)
{
	pthread_mutex_lock(&v->lock);
	bool cold = reader_cold(v->rd);
	pthread_mutex_unlock(&v->lock);
	return cold;
}

void vis_version_close(struct vis_version *v)
{
	if (!v)
		return;
	reader_close(v->rd);
	free(v->bucket);
	free(v->key);
	pthread_mutex_destroy(&v->lock);
	free(v);
}
