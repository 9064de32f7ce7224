/* gateway_fresh.c — how current the views are (gateway_int.h): each
 * view's freshness, from the consumer's per-partition watermarks and the
 * scans (facetfs status, the view directory's xattr, .facetfs/views,
 * /metrics), and the barrier of facetfs wait with its probe. Calls no
 * other file of the gateway.
 */
#include "gateway/gateway_int.h"

#include "common/log.h"
#include "common/s3.h"
#include "events/consumer.h"
#include "fuse/fs.h"
#include "gateway/ingest.h"
#include "sync/stage/probe.h"
#include "views/filter.h"
#include "views/index.h"
#include "views/viewset.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* ---- freshness ---- */

int64_t gw_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void gw_freshness(struct gateway *gw, const struct view *v, struct gw_fresh *out)
{
	memset(out, 0, sizeof *out);
	for (size_t b = 0; b < view_n_buckets(v); b++) {
		struct index_scan_state ss;
		if (index_scan_state_get(gw->ix, view_bucket(v, b), &ss) < 0 || !ss.done) {
			snprintf(out->text, sizeof out->text, "scanning");
			return;
		}
	}
	struct consumer_fresh cf = { 0 };
	if (gw->cons)
		consumer_freshness(gw->cons, &cf);
	if (!gw->cons || cf.assigned == 0) {
		snprintf(out->text, sizeof out->text, "no partition assigned");
	} else if (cf.partitions && cf.assigned < cf.partitions) {
		snprintf(out->text, sizeof out->text, "partitions %u of %u assigned",
			 cf.assigned, cf.partitions);
	} else if (cf.fresh_ms <= 0) {
		snprintf(out->text, sizeof out->text, "catching up");
	} else {
		out->known = true;
		out->fresh_ms = cf.fresh_ms;
		time_t s = (time_t)(cf.fresh_ms / 1000);
		struct tm tm;
		gmtime_r(&s, &tm);
		char day[40];
		strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(out->text, sizeof out->text, "%s.%03dZ", day, (int)(cf.fresh_ms % 1000));
	}
}

int gw_fresh_as_of(void *ctx, const char *vname, char *out, size_t outlen)
{
	struct gateway *gw = ctx;
	int rc = -ENODATA;
	struct viewset *vs = viewset_slot_pin(&gw->views);
	for (size_t i = 0; i < viewset_count(vs); i++) {
		const struct view *v = viewset_view(vs, i);
		if (strcmp(view_name(v), vname) != 0)
			continue;
		struct gw_fresh f;
		gw_freshness(gw, v, &f);
		snprintf(out, outlen, "%s", f.text);
		rc = 0;
	}
	viewset_unpin(vs);
	return rc;
}

/* ---- facetfs wait ---- */

/* Is view name in the set now (*found) and still scanning a bucket? */
static bool view_scanning(struct gateway *gw, const char *name, bool *found)
{
	bool scanning = false;
	*found = false;
	struct viewset *vs = viewset_slot_pin(&gw->views);
	for (size_t i = 0; i < viewset_count(vs) && !*found; i++) {
		const struct view *v = viewset_view(vs, i);
		if (strcmp(view_name(v), name) != 0)
			continue;
		*found = true;
		for (size_t b = 0; b < view_n_buckets(v); b++) {
			struct index_scan_state ss;
			if (index_scan_state_get(gw->ix, view_bucket(v, b), &ss) < 0 || !ss.done)
				scanning = true;
		}
	}
	viewset_unpin(vs);
	return scanning;
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The buckets of the views named in names[n] (all views when n is 0),
 * each once, into out[max]: how many (at most max). */
static size_t probe_buckets(struct gateway *gw, char *const *names, size_t n,
			    char out[][256], size_t max)
{
	size_t k = 0;
	struct viewset *vs = viewset_slot_pin(&gw->views);
	for (size_t i = 0; i < viewset_count(vs); i++) {
		const struct view *v = viewset_view(vs, i);
		bool named = n == 0;
		for (size_t j = 0; j < n && !named; j++)
			named = strcmp(names[j], view_name(v)) == 0;
		for (size_t b = 0; named && b < view_n_buckets(v); b++) {
			bool have = false;
			for (size_t j = 0; j < k && !have; j++)
				have = strcmp(out[j], view_bucket(v, b)) == 0;
			if (!have && k < max)
				snprintf(out[k++], 256, "%s", view_bucket(v, b));
		}
	}
	viewset_unpin(vs);
	return k;
}

/* wait --probe: an empty object of the gateway's own (sync/stage/probe.h's
 * prefix, which views never show) PUT into each bucket, and its event
 * awaited: the bucket's notification, the bridge and the topic work, and
 * every PUT that returned before the call has its event in Kafka. The
 * key is deleted after. */
static int wait_probe(struct gateway *gw, char *const *names, size_t n, int64_t deadline,
		      char *why, size_t whylen)
{
	char buckets[INGEST_PROBES][256], key[256], base[200];
	size_t nb = probe_buckets(gw, names, n, buckets, INGEST_PROBES);
	int slot[INGEST_PROBES], rc = 0;
	size_t made = 0;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	probe_key(base, sizeof base);
	snprintf(key, sizeof key, "%s-wait-%lld%09ld", base, (long long)ts.tv_sec, ts.tv_nsec);
	int fd = memfd_create("facetfs-wait", MFD_CLOEXEC);
	if (fd < 0) {
		snprintf(why, whylen, "probe: %s", strerror(errno));
		return -errno;
	}
	for (; made < nb && rc == 0; made++) {
		char etag[72];
		rc = ingest_probe_expect(gw->ing, buckets[made], key, &slot[made]);
		if (rc == 0 && (rc = s3_put_file(gw->s3, buckets[made], key, fd, 0, NULL, 0,
						 NULL, etag)) < 0)
			ingest_probe_wait(gw->ing, slot[made], 0);    /* frees the slot */
		if (rc < 0)
			snprintf(why, whylen, "probe: PUT %s/%s: %s", buckets[made], key,
				 strerror(-rc));
	}
	close(fd);
	if (rc < 0)
		made--;                  /* the failed one's slot is free */
	for (size_t i = 0; i < made; i++) {
		int64_t left = deadline - mono_ms();
		int w = ingest_probe_wait(gw->ing, slot[i], left > 0 ? (int)left : 0);
		if (w < 0 && rc == 0) {
			snprintf(why, whylen, "no event of the probe %s/%s came: look at the "
				 "bucket's notification, the bridge and the topic", buckets[i], key);
			rc = w;
		}
		int d = s3_delete(gw->s3, buckets[i], key);
		if (d < 0)
			log_warn("facetfs wait: DELETE of the probe %s/%s: %s", buckets[i], key,
				 strerror(-d));
	}
	if (rc == 0 && nb == 0) {
		snprintf(why, whylen, "probe: no bucket to probe");
		rc = -ENOENT;
	}
	return rc;
}

/* "wait TIMEOUT_MS [--probe] [VIEW...]": a barrier between S3 clients and
 * the mount (facetfs wait): with --probe, an event of the gateway's own
 * through each bucket's notification first; every event Kafka held then
 * applied, the kernel told of what changed, the views named done
 * scanning. */
char *gw_control_wait(struct gateway *gw, const char *args)
{
	char *answer = NULL, *dup = strdup(args), *save = NULL;
	if (!dup)
		return NULL;
	char *tok = strtok_r(dup, " ", &save), *end = NULL;
	long timeout = tok ? strtol(tok, &end, 10) : -1;
	if (!tok || *end || timeout < 0 || timeout > 86400000) {
		free(dup);
		return strdup("error: wait: usage: wait TIMEOUT_MS [--probe] [VIEW...]\n");
	}
	int64_t t0 = mono_ms(), deadline = t0 + timeout;
	char why[512] = "", *names[64];
	size_t n = 0;
	bool probe = false;
	int rc = gw->cons ? 0 : -ENOTCONN;
	if (rc)
		snprintf(why, sizeof why, "the gateway reads no event stream");
	for (char *v = strtok_r(NULL, " ", &save); v && rc == 0; v = strtok_r(NULL, " ", &save)) {
		if (strcmp(v, "--probe") == 0) {
			probe = true;
		} else if (n < sizeof names / sizeof names[0]) {
			names[n++] = v;
		} else {
			snprintf(why, sizeof why, "more than %zu views named", n);
			rc = -E2BIG;
		}
	}
	/* The views named, scanned. */
	for (size_t i = 0; i < n && rc == 0; i++) {
		bool found;
		while (view_scanning(gw, names[i], &found) && found && mono_ms() < deadline)
			usleep(20000);
		if (!found) {
			snprintf(why, sizeof why, "no view named \"%s\"", names[i]);
			rc = -ENOENT;
		} else if (view_scanning(gw, names[i], &found)) {
			snprintf(why, sizeof why, "view %s is still scanning", names[i]);
			rc = -ETIMEDOUT;
		}
	}
	if (rc == 0 && probe)
		rc = wait_probe(gw, names, n, deadline, why, sizeof why);
	struct consumer_marks mk = { 0 };
	if (rc == 0) {
		int64_t left = deadline - mono_ms();
		rc = consumer_barrier(gw->cons, left > 0 ? (int)left : 0, &mk, why, sizeof why);
	}
	if (rc == 0 && gw->fs) {
		int64_t left = deadline - mono_ms();
		rc = fs_settle(gw->fs, left > 0 ? (int)left : 0);
		if (rc < 0)
			snprintf(why, sizeof why, "the kernel's caches were not all updated");
	}
	free(dup);
	int64_t took = mono_ms() - t0;
	int got;
	if (rc == 0)
		got = asprintf(&answer, "ok: applied every event of %u partition(s) up to their "
			       "high-water marks (%" PRIu64 " records)%s in %" PRId64 " ms\n",
			       mk.partitions, mk.records, probe ? ", the probes' too" : "", took);
	else if (rc == -ETIMEDOUT)
		got = asprintf(&answer, "error: wait: not within %ld ms: %s\n", timeout, why);
	else
		got = asprintf(&answer, "error: wait: %s\n", why[0] ? why : strerror(-rc));
	return got < 0 ? NULL : answer;
}

