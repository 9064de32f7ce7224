/* stats.c — see stats.h. */
#include "common/lock.h"
#include "common/stats.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void stats_init(struct stats *st)
{
	memset(st, 0, sizeof *st);
	pthread_mutex_init(&st->lock, NULL);
}

void stats_release(struct stats *st)
{
	assert(!st->groups);
	pthread_mutex_destroy(&st->lock);
}

void stats_group_add(struct stats *st, struct stats_group *g,
		     const struct stats_def *defs, size_t n, const void *base)
{
	assert(!g->st);
	if (!st)
		return;
	*g = (struct stats_group){ defs, n, base, st, NULL };
	mod_lock(&st->lock);
	struct stats_group **p = &st->groups;
	while (*p)
		p = &(*p)->next;
	*p = g;
	mod_unlock(&st->lock);
}

void stats_group_remove(struct stats_group *g)
{
	struct stats *st = g->st;
	if (!st)
		return;
	mod_lock(&st->lock);
	struct stats_group **p = &st->groups;
	while (*p && *p != g)
		p = &(*p)->next;
	assert(*p == g);
	*p = g->next;
	mod_unlock(&st->lock);
	g->st = NULL;
	g->next = NULL;
}

static uint64_t group_value(const struct stats_group *g, size_t i)
{
	const stats_counter *c =
		(const stats_counter *)((const char *)g->base + g->defs[i].off);
	return stats_get(c);
}

static bool def_same(const struct stats_def *a, const struct stats_def *b)
{
	return !strcmp(a->section, b->section) && !strcmp(a->name, b->name);
}

int stats_samples(struct stats *st, struct stats_sample **out)
{
	mod_lock(&st->lock);
	size_t max = 0;
	for (const struct stats_group *g = st->groups; g; g = g->next)
		max += g->n;
	struct stats_sample *s = malloc((max ? max : 1) * sizeof *s);
	size_t n = 0;
	for (const struct stats_group *g = s ? st->groups : NULL; g; g = g->next) {
		for (size_t i = 0; i < g->n; i++) {
			size_t j = 0;
			while (j < n && !def_same(s[j].def, &g->defs[i]))
				j++;
			if (j == n)
				s[n++] = (struct stats_sample){ &g->defs[i], 0 };
			s[j].v += group_value(g, i);
		}
	}
	mod_unlock(&st->lock);
	*out = s;
	return s ? (int)n : -ENOMEM;
}

uint64_t stats_value(struct stats *st, const char *section, const char *name)
{
	const struct stats_def want = { .section = section, .name = name };
	uint64_t v = 0;
	mod_lock(&st->lock);
	for (const struct stats_group *g = st->groups; g; g = g->next)
		for (size_t i = 0; i < g->n; i++)
			if (def_same(&g->defs[i], &want))
				v += group_value(g, i);
	mod_unlock(&st->lock);
	return v;
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

static void lat_add(struct stats_lat *l, double ms)
{
	double v = ms < 0 ? 0 : ms;
	l->hist[lat_bucket(v)]++;
	l->count++;
	l->sum_ms += v;
	if (v > l->max_ms)
		l->max_ms = v;
}

void stats_latency_add_batch(struct stats *st, const double *ms, size_t n)
{
	if (n == 0)
		return;
	mod_lock(&st->lock);
	for (size_t i = 0; i < n; i++)
		lat_add(&st->visible, ms[i]);
	mod_unlock(&st->lock);
}

void stats_s3_latency_add(struct stats *st, double ms)
{
	mod_lock(&st->lock);
	lat_add(&st->s3, ms);
	mod_unlock(&st->lock);
}

void stats_hist_get(struct stats *st, enum stats_hist_kind k,
		    struct stats_hist *out)
{
	mod_lock(&st->lock);
	const struct stats_lat *l = k == STATS_HIST_S3 ? &st->s3 : &st->visible;
	memcpy(out->bucket, l->hist, sizeof out->bucket);
	out->count = l->count;
	out->sum_ms = l->sum_ms;
	mod_unlock(&st->lock);
}

int stats_lag_get(struct stats *st, struct stats_lag *out, int max)
{
	mod_lock(&st->lock);
	int n = st->n_lag < max ? st->n_lag : max;
	memcpy(out, st->lag, (size_t)n * sizeof *out);
	mod_unlock(&st->lock);
	return n;
}

/* Percentile (0..100) of l: the upper bound of the bucket it falls in,
 * capped by the largest value; 0 when empty. l: a copy, or st->lock held. */
static double lat_pct(const struct stats_lat *l, double pct)
{
	if (!l->count)
		return 0;
	uint64_t want = (uint64_t)ceil((double)l->count * pct / 100.0);
	if (want == 0)
		want = 1;
	uint64_t seen = 0;
	for (int b = 0; b < STATS_LAT_BUCKETS; b++) {
		seen += l->hist[b];
		if (seen >= want) {
			double res = b == 0 ? 0.001 : ldexp(1.0, b) / 1000.0;
			return res > l->max_ms ? l->max_ms : res;
		}
	}
	return l->max_ms;
}

double stats_latency_pct(struct stats *st, double pct)
{
	mod_lock(&st->lock);
	double res = lat_pct(&st->visible, pct);
	mod_unlock(&st->lock);
	return res;
}

void stats_lag_set(struct stats *st, const char *name, int64_t lag)
{
	mod_lock(&st->lock);
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
	mod_unlock(&st->lock);
}

struct stats_writer {
	cJSON *root;
	cJSON *obj;
	bool oom;
};

static cJSON *section_of(cJSON *root, const char *section);

void stats_write_num(struct stats_writer *w, const char *name, double v)
{
	if (!cJSON_AddNumberToObject(w->obj, name, v))
		w->oom = true;
}

void stats_write_str(struct stats_writer *w, const char *name, const char *s)
{
	if (!cJSON_AddStringToObject(w->obj, name, s ? s : ""))
		w->oom = true;
}

void stats_write_section(struct stats_writer *w, const char *section)
{
	if (!w->oom && !(w->obj = section_of(w->root, section)))
		w->oom = true;
}

void stats_write_sub(struct stats_writer *w, const char *name)
{
	if (!w->oom && !(w->obj = section_of(w->obj, name)))
		w->oom = true;
}

/* The object named section of root, made if it is not there yet. */
static cJSON *section_of(cJSON *root, const char *section)
{
	cJSON *o = cJSON_GetObjectItemCaseSensitive(root, section);
	return o ? o : cJSON_AddObjectToObject(root, section);
}

static void write_counters(struct stats *st, cJSON *root, struct stats_writer *w)
{
	struct stats_sample *s;
	int n = stats_samples(st, &s);
	if (n < 0) {
		w->oom = true;
		return;
	}
	for (int i = 0; i < n && !w->oom; i++) {
		w->obj = section_of(root, s[i].def->section);
		if (!w->obj) {
			w->oom = true;
			break;
		}
		stats_write_num(w, s[i].def->name, (double)s[i].v);
	}
	free(s);
}

static void write_lag(struct stats *st, cJSON *root, struct stats_writer *w)
{
	cJSON *kafka = section_of(root, "kafka");
	w->obj = kafka ? cJSON_AddObjectToObject(kafka, "lag") : NULL;
	if (!w->obj) {
		w->oom = true;
		return;
	}
	mod_lock(&st->lock);
	for (int i = 0; i < st->n_lag; i++)
		stats_write_num(w, st->lag[i].name, (double)st->lag[i].lag);
	mod_unlock(&st->lock);
}

/* name: { count, p50, p99, max, total } of l (total: the sum, ms). */
static void write_latency(struct stats *st, cJSON *root, struct stats_writer *w,
			  const char *name, const struct stats_lat *l)
{
	w->obj = cJSON_AddObjectToObject(root, name);
	if (!w->obj) {
		w->oom = true;
		return;
	}
	mod_lock(&st->lock);
	struct stats_lat copy = *l;
	mod_unlock(&st->lock);
	stats_write_num(w, "count", (double)copy.count);
	stats_write_num(w, "p50", lat_pct(&copy, 50));
	stats_write_num(w, "p99", lat_pct(&copy, 99));
	stats_write_num(w, "max", copy.max_ms);
	stats_write_num(w, "total", copy.sum_ms);
}

char *stats_to_json(struct stats *st, const char *section, stats_section_fn fn,
		    void *ctx)
{
	cJSON *root = cJSON_CreateObject();
	if (!root)
		return NULL;
	struct stats_writer w = { root, root, false };
	write_counters(st, root, &w);
	if (!w.oom)
		write_lag(st, root, &w);
	if (!w.oom)
		write_latency(st, root, &w, "visible_latency_ms", &st->visible);
	if (!w.oom)
		write_latency(st, root, &w, "s3_latency_ms", &st->s3);
	if (!w.oom && section && fn) {
		stats_write_section(&w, section);
		if (!w.oom)
			fn(ctx, &w);
	}
	char *text = w.oom ? NULL : cJSON_Print(root);
	cJSON_Delete(root);
	return text;
}
