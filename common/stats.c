/* stats.c — see stats.h. */
#include "common/stats.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

void stats_init(struct stats *st)
{
	memset(st, 0, sizeof *st);
	pthread_mutex_init(&st->lock, NULL);
}

void stats_release(struct stats *st)
{
	pthread_mutex_destroy(&st->lock);
}

/* Bucket b holds latencies in [2^(b-1), 2^b) microseconds; bucket 0 is < 1 µs. */
static int lat_bucket(double ms)
{
	double us = ms * 1000.0;
	if (!(us >= 1.0))
		return 0;
	if (us >= 0x1p62)
		return STATS_LAT_BUCKETS - 1;
	/* halving us until it is below 1 takes (bits of (uint64_t)us) steps */
	int b = 64 - __builtin_clzll((unsigned long long)us);
	return b < STATS_LAT_BUCKETS - 1 ? b : STATS_LAT_BUCKETS - 1;
}

void stats_latency_add_batch(struct stats *st, const double *ms, size_t n)
{
	if (n == 0)
		return;
	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < n; i++) {
		double v = ms[i] < 0 ? 0 : ms[i];
		st->lat_hist[lat_bucket(v)]++;
		if (v > st->lat_max_ms)
			st->lat_max_ms = v;
	}
	st->lat_count += n;
	pthread_mutex_unlock(&st->lock);
}

double stats_latency_pct(struct stats *st, double pct)
{
	pthread_mutex_lock(&st->lock);
	double res = 0;
	if (st->lat_count) {
		uint64_t want = (uint64_t)ceil(st->lat_count * pct / 100.0);
		if (want == 0)
			want = 1;
		uint64_t seen = 0;
		for (int b = 0; b < STATS_LAT_BUCKETS; b++) {
			seen += st->lat_hist[b];
			if (seen >= want) {
				/* report the bucket's upper bound, capped by the max */
				res = b == 0 ? 0.001 : ldexp(1.0, b) / 1000.0;
				if (res > st->lat_max_ms)
					res = st->lat_max_ms;
				break;
			}
		}
	}
	pthread_mutex_unlock(&st->lock);
	return res;
}

void stats_lag_set(struct stats *st, const char *name, int64_t lag)
{
	pthread_mutex_lock(&st->lock);
	int i;
	for (i = 0; i < st->n_lag; i++)
		if (strcmp(st->lag[i].name, name) == 0)
			break;
	if (i == st->n_lag && st->n_lag < STATS_MAX_PARTS) {
		snprintf(st->lag[i].name, sizeof st->lag[i].name, "%s", name);
		st->n_lag++;
	}
	if (i < st->n_lag)
		st->lag[i].lag = lag;
	pthread_mutex_unlock(&st->lock);
}

#define PUT(obj, name, st, field) \
	cJSON_AddNumberToObject(obj, name, (double)stats_get(st, field))

char *stats_to_json(struct stats *st, void (*extra)(void *ctx, struct cJSON *root),
		    void *ctx)
{
	cJSON *root = cJSON_CreateObject();
	if (!root)
		return NULL;
	cJSON *ev = cJSON_AddObjectToObject(root, "events");
	PUT(ev, "consumed", st, ev_consumed);
	PUT(ev, "applied", st, ev_applied);
	PUT(ev, "ignored", st, ev_ignored);
	PUT(ev, "malformed", st, ev_malformed);

	cJSON *kafka = cJSON_AddObjectToObject(root, "kafka");
	PUT(kafka, "partitions_assigned", st, kafka_partitions);
	cJSON *lag = cJSON_AddObjectToObject(kafka, "lag");
	pthread_mutex_lock(&st->lock);
	for (int i = 0; i < st->n_lag; i++)
		cJSON_AddNumberToObject(lag, st->lag[i].name, (double)st->lag[i].lag);
	pthread_mutex_unlock(&st->lock);

	cJSON *s3 = cJSON_AddObjectToObject(root, "s3");
	PUT(s3, "list", st, s3_list);
	PUT(s3, "head", st, s3_head);
	PUT(s3, "get", st, s3_get);
	PUT(s3, "put", st, s3_put);
	PUT(s3, "copy", st, s3_copy);
	PUT(s3, "delete", st, s3_delete);
	PUT(s3, "errors", st, s3_errors);
	PUT(s3, "retries", st, s3_retries);
	PUT(s3, "bytes_read", st, s3_bytes_read);

	cJSON *scans = cJSON_AddObjectToObject(root, "scans");
	PUT(scans, "running", st, scans_running);
	PUT(scans, "completed", st, scans_completed);
	PUT(scans, "objects", st, scan_objects);

	cJSON *fuse = cJSON_AddObjectToObject(root, "fuse");
	PUT(fuse, "lookup", st, fuse_lookup);
	PUT(fuse, "getattr", st, fuse_getattr);
	PUT(fuse, "readdir", st, fuse_readdir);
	PUT(fuse, "read", st, fuse_read);
	PUT(fuse, "open", st, fuse_open);
	PUT(fuse, "getxattr", st, fuse_getxattr);
	PUT(fuse, "invalidations", st, fuse_inval);

	cJSON *cache = cJSON_AddObjectToObject(root, "cache");
	PUT(cache, "hits", st, cache_hits);
	PUT(cache, "misses", st, cache_misses);

	cJSON *keys = cJSON_AddObjectToObject(root, "keys");
	PUT(keys, "not_a_path", st, bad_keys);

	cJSON *lat = cJSON_AddObjectToObject(root, "visible_latency_ms");
	pthread_mutex_lock(&st->lock);
	uint64_t count = st->lat_count;
	double max = st->lat_max_ms;
	pthread_mutex_unlock(&st->lock);
	cJSON_AddNumberToObject(lat, "count", (double)count);
	cJSON_AddNumberToObject(lat, "p50", stats_latency_pct(st, 50));
	cJSON_AddNumberToObject(lat, "p99", stats_latency_pct(st, 99));
	cJSON_AddNumberToObject(lat, "max", max);

	if (extra)
		extra(ctx, root);
	char *text = cJSON_Print(root);
	cJSON_Delete(root);
	return text;
}
