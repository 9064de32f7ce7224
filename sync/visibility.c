/* visibility.c — see visibility.h. */
#include "sync/visibility.h"

#include "common/object.h"
#include "common/s3.h"
#include "sync/reader.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vis_version {
	struct s3 *s3;
	struct stats *st;
	char *bucket, *key;
	pthread_mutex_t lock;        /* protects rd and etag (commit swaps them) */
	struct reader *rd;
	char etag[72];
};

enum vis_policy vis_policy_of(const char *visibility)
{
	return visibility && strcmp(visibility, "commit") == 0 ? VIS_COMMIT : VIS_SESSION;
}

bool vis_fsync_commits(enum vis_policy p)
{
	return p == VIS_COMMIT;
}

bool vis_read_validates(enum vis_policy p)
{
	return p == VIS_COMMIT;
}

static int version_new(struct s3 *s3, struct stats *st, const char *bucket,
		       const char *key, const char *etag, uint64_t size,
		       struct vis_version **out)
{
	struct vis_version *v = calloc(1, sizeof *v);
	if (!v)
		return -ENOMEM;
	pthread_mutex_init(&v->lock, NULL);
	v->s3 = s3;
	v->st = st;
	int rc = -ENOMEM;
	if (!(v->bucket = strdup(bucket)) || !(v->key = strdup(key)))
		goto fail;
	snprintf(v->etag, sizeof v->etag, "%s", etag);
	if ((rc = reader_open(s3, st, bucket, key, etag, size, &v->rd)) < 0)
		goto fail;
	*out = v;
	return 0;
fail:
	vis_version_close(v);
	return rc;
}

int vis_version_open(struct s3 *s3, struct stats *st, const char *bucket,
		     const char *key, struct vis_version **out)
{
	struct obj_meta o = { 0 };
	int rc = s3_head(s3, bucket, key, &o);
	if (rc == 0)
		rc = version_new(s3, st, bucket, key, o.etag, o.size, out);
	obj_meta_release(&o);
	return rc;
}

int vis_version_open_missing(struct s3 *s3, struct stats *st, const char *bucket,
			     const char *key, struct vis_version **out)
{
	return version_new(s3, st, bucket, key, "", 0, out);
}

/* `commit`: make sure the descriptor reads the version S3 has now. */
static int revalidate(struct vis_version *v)
{
	struct obj_meta o = { 0 };
	int rc = s3_head(v->s3, v->bucket, v->key, &o);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&v->lock);
	if (strcmp(o.etag, v->etag) != 0) {
		struct reader *nr;
		rc = reader_open(v->s3, v->st, v->bucket, v->key, o.etag, o.size, &nr);
		if (rc == 0) {
			reader_close(v->rd);
			v->rd = nr;
			snprintf(v->etag, sizeof v->etag, "%s", o.etag);
		}
	}
	pthread_mutex_unlock(&v->lock);
	obj_meta_release(&o);
	return rc;
}

ssize_t vis_version_read(struct vis_version *v, enum vis_policy p, void *buf,
			 size_t len, uint64_t off)
{
	if (!vis_read_validates(p))
		return reader_read(v->rd, buf, len, off);
	int rc = revalidate(v);
	if (rc < 0)
		return rc;
	/* A read may race with another read's revalidation swapping the
	 * reader: under commit the read holds the version's lock. */
	pthread_mutex_lock(&v->lock);
	ssize_t n = reader_read(v->rd, buf, len, off);
	pthread_mutex_unlock(&v->lock);
	return n;
}

void vis_version_etag(struct vis_version *v, char out[72])
{
	pthread_mutex_lock(&v->lock);
	snprintf(out, 72, "%s", v->etag);
	pthread_mutex_unlock(&v->lock);
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
