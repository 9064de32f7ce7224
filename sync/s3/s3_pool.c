/*
 * s3_pool.c — the S3 client's idle curl handles (s3_req.h): up to
 * S3_POOL_MAX under s->lock, taken LIFO so the handle with the freshest
 * keep-alive connection is reused. The lock is held only to push or pop,
 * never across a request. curl_easy_reset() at each use clears options but
 * keeps the handle's live connections.
 */
#include "sync/s3/s3_req.h"

#include <curl/curl.h>
#include <pthread.h>

#include "common/lock.h"

CURL *s3_pool_get(struct s3_http *s)
{
	CURL *h = NULL;
	mod_lock(&s->lock);
	if (s->n_pool > 0)
		h = s->pool[--s->n_pool];
	mod_unlock(&s->lock);
	if (h)
		curl_easy_reset(h);
	else
		h = curl_easy_init();
	return h;
}

void s3_pool_put(struct s3_http *s, CURL *h)
{
	mod_lock(&s->lock);
	if (s->n_pool < S3_POOL_MAX) {
		s->pool[s->n_pool++] = h;
		h = NULL;
	}
	mod_unlock(&s->lock);
	if (h)
		curl_easy_cleanup(h);
}
