/*
 * s3_http.c — the real S3 client of s3_http.h: its creation
 * (s3_http_new), its table of operations (common/s3.h; the operations are
 * in s3_ops.c and s3_mpu.c), its counters and its free. The credentials it
 * starts with are installed by s3_http_set_credentials (s3_creds.c).
 */
#include "sync/s3/s3_http.h"
#include "sync/s3/s3_req.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/stats.h"

static pthread_once_t s3_curl_once = PTHREAD_ONCE_INIT;

static void s3_curl_global(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* Requests by kind: one metric family, the kind as its label. */
#define S3_KIND(field, kind) \
	STATS_FAMILY(struct s3_counters, field, "s3", kind, \
		     "facetfs_s3_requests_total", "kind=\"" kind "\"")
static const struct stats_def s3_stats[] = {
	S3_KIND(s3_list, "list"),
	S3_KIND(s3_head, "head"),
	S3_KIND(s3_get_tagging, "get_tagging"),
	S3_KIND(s3_get, "get"),
	S3_KIND(s3_put, "put"),
	S3_KIND(s3_copy, "copy"),
	S3_KIND(s3_delete, "delete"),
	STATS_COUNTER(struct s3_counters, s3_errors, "s3", "errors"),
	STATS_COUNTER(struct s3_counters, s3_retries, "s3", "retries"),
	STATS_FAMILY(struct s3_counters, s3_bytes_read, "s3", "bytes_read",
		     "facetfs_s3_read_bytes_total", NULL),
};
#undef S3_KIND

static void s3_http_free(struct s3 *iface);

static const struct s3_ops s3_http_ops = {
	.get = s3_http_get,
	.get_stream = s3_http_get_stream,
	.head = s3_http_head,
	.get_tagging = s3_http_get_tagging,
	.list_page = s3_http_list_page,
	.put_file = s3_http_put_file,
	.del = s3_http_del,
	.copy = s3_http_copy,
	.bucket_check = s3_http_bucket_check,
	.mpu_create = s3_http_mpu_create,
	.mpu_put_part = s3_http_mpu_put_part,
	.mpu_copy_part = s3_http_mpu_copy_part,
	.mpu_complete = s3_http_mpu_complete,
	.mpu_abort = s3_http_mpu_abort,
	.mpu_list = s3_http_mpu_list,
	.free = s3_http_free,
};

int s3_http_new(const struct s3_conf *c, struct stats *st, struct s3 **out)
{
	*out = NULL;
	if (!c || !c->endpoint || !*c->endpoint || !c->access_key ||
	    !c->secret_key)
		return -EINVAL;
	pthread_once(&s3_curl_once, s3_curl_global);
	struct s3_http *s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	s->iface.ops = &s3_http_ops;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->cred_lock, NULL);
	pthread_mutex_init(&s->refresh_lock, NULL);
	s->st = st;
	stats_group_add(st, &s->grp, s3_stats, sizeof s3_stats / sizeof s3_stats[0],
			&s->ctr);
	s->refresh = c->refresh;
	s->refresh_ctx = c->refresh_ctx;
	const char *scheme = strstr(c->endpoint, "://") ? "" :
			     c->https ? "https://" : "http://";
	const char *region = c->region && *c->region ? c->region : "us-east-1";
	int err = -ENOMEM;
	if (asprintf(&s->base, "%s%s", scheme, c->endpoint) < 0)
		s->base = NULL;
	s->region = strdup(region);
	s->stall_s = c->stall_s ? (long)c->stall_s : S3_STALL_S;
	s->insecure = c->insecure;
	if (c->ca_file && !(s->ca_file = strdup(c->ca_file)))
		goto fail;
	if (!s->base || !s->region)
		goto fail;
	err = s3_http_set_credentials(&s->iface, c->access_key, c->secret_key,
				      c->session_token);
	if (err)
		goto fail;
	err = -EINVAL;
	size_t bl = strlen(s->base);
	while (bl > 0 && s->base[bl - 1] == '/')
		s->base[--bl] = '\0';
	const char *hs = strstr(s->base, "://") + 3;
	if (strchr(hs, '/') || !*hs)
		goto fail;         /* a path after the host is not supported */
	err = -ENOMEM;
	if (asprintf(&s->host, "Host: %s", hs) < 0) {
		s->host = NULL;
		goto fail;
	}
	if (!(s->hostport = strdup(hs)))
		goto fail;
	s->vhost = c->virtual_host;
	if (s->vhost) {
		/* every connection to the endpoint's host, whatever the name */
		const char *colon = hs[0] == '[' ? strchr(hs, ']') : strrchr(hs, ':');
		size_t hl = colon && *colon == ':' ? (size_t)(colon - hs) :
			    colon ? (size_t)(colon - hs) + 1 : strlen(hs);
		char *line = NULL;
		if (asprintf(&line, "::%.*s:", (int)hl, hs) < 0)
			goto fail;
		s->connect_to = curl_slist_append(NULL, line);
		free(line);
		if (!s->connect_to)
			goto fail;
	}
	*out = &s->iface;
	return 0;
fail:
	s3_http_free(&s->iface);
	return err;
}

static void s3_http_free(struct s3 *iface)
{
	struct s3_http *s = (struct s3_http *)iface;
	stats_group_remove(&s->grp);
	for (int i = 0; i < s->n_pool; i++)
		curl_easy_cleanup(s->pool[i]);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->cred_lock);
	pthread_mutex_destroy(&s->refresh_lock);
	s3_cred_put(s->cred);
	free(s->ca_file);
	free(s->base);
	free(s->host);
	free(s->hostport);
	curl_slist_free_all(s->connect_to);
	free(s->region);
	free(s);
}
