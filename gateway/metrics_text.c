/* metrics_text.c — the gateway's state in the Prometheus text exposition
 * format (version 0.0.4) for /metrics: every counter a module registered
 * with common/stats.h (named by its stats_def: facetfs_SECTION_NAME_total,
 * without _total for a gauge, or the row's own family and label), the
 * per-partition Kafka lag, the event-to-visible latency and S3 request
 * latency histograms (seconds), the staging area's counters and the
 * scans' state. */
#include "gateway/metrics_text.h"
#include "common/stats.h"
#include "sync/cache/bcache.h"
#include "sync/stage/stage.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing text; out of memory leaves it NULL for good. */
struct mtext {
	char *p;
	size_t len, cap;
};

__attribute__((format(printf, 2, 3)))
static void mt_printf(struct mtext *t, const char *fmt, ...)
{
	if (!t->p && t->cap)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		size_t room = t->cap - t->len;
		int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if (t->p && (size_t)n < room) {
			t->len += (size_t)n;
			return;
		}
		size_t cap = t->cap ? t->cap * 2 : 16384;
		while (cap < t->len + (size_t)n + 1)
			cap *= 2;
		char *g = realloc(t->p, cap);
		if (!g) {
			free(t->p);
			t->p = NULL;
			t->cap = 1;     /* marks the failure */
			return;
		}
		t->p = g;
		t->cap = cap;
	}
}

/* The metric family of one counter into fam and its label (`k="v"`, "" for
 * none) into label: the row's own, else facetfs_SECTION_NAME, with _total
 * unless a gauge. */
static void def_family(const struct stats_def *d, char *fam, size_t flen,
		       char *label, size_t llen)
{
	snprintf(label, llen, "%s", d->label ? d->label : "");
	if (d->family)
		snprintf(fam, flen, "%s", d->family);
	else
		snprintf(fam, flen, "facetfs_%s_%s%s", d->section, d->name,
			 d->gauge ? "" : "_total");
}

static void mt_family(struct mtext *t, const char *fam, const char *type,
		      const char *help)
{
	mt_printf(t, "# HELP %s %s\n# TYPE %s %s\n", fam, help, fam, type);
}

static void mt_fail(struct mtext *t)
{
	free(t->p);
	t->p = NULL;
	t->cap = 1;
}

static void mt_counters(struct mtext *t, struct stats *st)
{
	struct stats_sample *s;
	int rc = stats_samples(st, &s);
	if (rc < 0) {
		mt_fail(t);
		return;
	}
	size_t n = (size_t)rc;
	bool *done = calloc(n ? n : 1, sizeof *done);
	if (!done) {
		free(s);
		mt_fail(t);
		return;
	}
	/* One family at a time, in the order of its first counter. */
	for (size_t i = 0; i < n; i++) {
		if (done[i])
			continue;
		const struct stats_def *d = s[i].def;
		char fam[96], label[64];
		def_family(d, fam, sizeof fam, label, sizeof label);
		char help[160];
		snprintf(help, sizeof help, "%s %s (.facetfs/stats %s.%s%s)",
			 d->section, label[0] ? "requests by kind" : d->name,
			 d->section, label[0] ? "*" : d->name,
			 d->gauge ? ", now" : "");
		mt_family(t, fam, d->gauge ? "gauge" : "counter", help);
		for (size_t j = i; j < n; j++) {
			char f2[96], l2[64];
			def_family(s[j].def, f2, sizeof f2, l2, sizeof l2);
			if (strcmp(f2, fam))
				continue;
			done[j] = true;
			if (s[j].def->ms)
				mt_printf(t, "%s %.3f\n", fam, (double)s[j].v / 1e3);
			else if (l2[0])
				mt_printf(t, "%s{%s} %" PRIu64 "\n", fam, l2, s[j].v);
			else
				mt_printf(t, "%s %" PRIu64 "\n", fam, s[j].v);
		}
	}
	free(done);
	free(s);
}

/* A log2 histogram of microseconds as a Prometheus histogram in seconds
 * (buckets from 1 µs to about 1.1 hours, then +Inf). */
static void mt_hist(struct mtext *t, struct stats *st, enum stats_hist_kind k,
		    const char *fam, const char *help)
{
	struct stats_hist h;
	stats_hist_get(st, k, &h);
	mt_family(t, fam, "histogram", help);
	uint64_t cum = 0;
	for (int b = 0; b < 33 && b < STATS_LAT_BUCKETS; b++) {
		cum += h.bucket[b];
		mt_printf(t, "%s_bucket{le=\"%.9g\"} %" PRIu64 "\n", fam,
			  (double)(1ull << b) / 1e6, cum);
	}
	mt_printf(t, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", fam, h.count);
	mt_printf(t, "%s_sum %.9g\n%s_count %" PRIu64 "\n", fam, h.sum_ms / 1e3,
		  fam, h.count);
}

/* Label values escaped as the format wants (\\, \", \n). */
static void mt_label_value(struct mtext *t, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			mt_printf(t, "\\%c", *v);
		else if (*v == '\n')
			mt_printf(t, "\\n");
		else
			mt_printf(t, "%c", *v);
	}
}

/* One family with one sample per entry. */
struct mt_sample { const char *name, *type, *help; uint64_t v; };

static void mt_samples(struct mtext *t, const struct mt_sample *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		mt_family(t, s[i].name, s[i].type, s[i].help);
		mt_printf(t, "%s %" PRIu64 "\n", s[i].name, s[i].v);
	}
}

char *metrics_text(struct stats *st, struct stage *stage, struct bcache *bc,
		   const struct metrics_view *views, size_t n)
{
	struct mtext t = { 0 };
	mt_counters(&t, st);

	mt_family(&t, "facetfs_view_staleness_seconds", "gauge",
		  "seconds since the time every event before which is applied to the view");
	for (size_t i = 0; i < n; i++) {
		if (views[i].staleness_s < 0)
			continue;
		mt_printf(&t, "facetfs_view_staleness_seconds{view=\"");
		mt_label_value(&t, views[i].name);
		mt_printf(&t, "\"} %.3f\n", views[i].staleness_s);
	}

	struct stats_lag *lg = calloc(STATS_MAX_PARTS, sizeof *lg);
	int nl = lg ? stats_lag_get(st, lg, STATS_MAX_PARTS) : 0;
	mt_family(&t, "facetfs_kafka_lag_messages", "gauge",
		  "messages behind the end of each partition (topic/partition)");
	for (int i = 0; i < nl; i++) {
		mt_printf(&t, "facetfs_kafka_lag_messages{partition=\"");
		mt_label_value(&t, lg[i].name);
		mt_printf(&t, "\"} %" PRId64 "\n", lg[i].lag);
	}
	free(lg);

	mt_hist(&t, st, STATS_HIST_VISIBLE, "facetfs_visible_latency_seconds",
		"event time to visible in the mount");
	mt_hist(&t, st, STATS_HIST_S3, "facetfs_s3_request_duration_seconds",
		"S3 requests, retries included");

	if (stage) {
		struct stage_counters c;
		stage_counters_get(stage, &c);
		const struct mt_sample sg[] = {
			{ "facetfs_staging_used_bytes", "gauge", "bytes staged now", c.used_bytes },
			{ "facetfs_staging_max_bytes", "gauge", "staging budget", c.max_bytes },
			{ "facetfs_staging_open_files", "gauge", "staged files open", c.open_files },
			{ "facetfs_staging_data_fds", "gauge", "staged files holding a descriptor", c.data_fds },
			{ "facetfs_staging_pending_files", "gauge", "released with uncommitted data", c.pending_files },
			{ "facetfs_staging_uploads_total", "counter", "uploads", c.uploads },
			{ "facetfs_staging_upload_bytes_total", "counter", "bytes uploaded", c.upload_bytes },
			{ "facetfs_staging_upload_errors_total", "counter", "failed uploads", c.upload_errors },
			{ "facetfs_staging_enospc_total", "counter", "writes refused: budget", c.enospc },
			{ "facetfs_staging_efbig_total", "counter", "writes refused: too large", c.efbig },
			{ "facetfs_staging_recovered_files_total", "counter", "moved to recovered/", c.recovered_files },
			{ "facetfs_staging_reuploaded_files_total", "counter", "uploaded again by recovery", c.reuploaded_files },
			{ "facetfs_staging_syncs_total", "counter", "fsync/fdatasync calls of the staging journal and data", c.syncs },
		};
		mt_samples(&t, sg, sizeof sg / sizeof sg[0]);
	}
	if (bc) {
		struct bcache_counters c;
		bcache_counters(bc, &c);
		const struct mt_sample bg[] = {
			{ "facetfs_cache_clean_bytes", "gauge", "cached object blocks (charged bytes)", c.used_bytes },
			{ "facetfs_cache_blocks", "gauge", "cached object blocks", c.blocks },
			{ "facetfs_cache_evictions_total", "counter", "blocks evicted for room", c.evictions },
			{ "facetfs_cache_corrupt_total", "counter", "blocks that failed their check", c.corrupt },
			{ "facetfs_cache_dropped_total", "counter", "blocks of replaced versions released", c.dropped },
			{ "facetfs_cache_write_errors_total", "counter", "blocks the disk refused", c.write_errors },
			{ "facetfs_cache_warm_unread_bytes", "gauge", "warm blocks not read yet (charged bytes)", c.warm_bytes },
			{ "facetfs_cache_warm_used_total", "counter", "warm blocks read", c.warm_used },
			{ "facetfs_cache_warm_wasted_total", "counter", "warm blocks gone unread", c.warm_wasted },
		};
		mt_samples(&t, bg, sizeof bg / sizeof bg[0]);
	}
	if (!t.p && t.cap)
		return NULL;
	return t.p ? t.p : strdup("");
}
