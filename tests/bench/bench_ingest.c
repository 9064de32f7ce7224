/*
 * bench_ingest.c — the consumer thread's work per event without Kafka:
 * decode (record_decode, events/record.c) and apply (index_apply,
 * views/index_write.c), each timed on its own, over evgen's records
 * (Ceph RGW ObjectCreated:Put, one record per document).
 *
 *   bench-ingest FILE [VIEWS] [BATCH] [--decode-only|--pipeline|--no-prepare]
 *
 * FILE holds evgen lines ("BUCKET/KEY<TAB>JSON"), e.g.
 *   build/tests/bench/evgen bench 100 0 100000 > /tmp/ev.txt
 * The index is a fresh temp dir with VIEWS (100) prefix views vNN = pNN/ (vNNN = pNNN/ over 100 views)
 * over the bucket (as bench_events.sh). Messages are decoded and applied in
 * batches of BATCH (1000) with one Kafka offset per batch, as the consumer
 * thread would alone (no decoder thread, no enrichment: the records carry
 * their metadata). Prints events per CPU-second of decode and of apply.
 * For instruction counts run it under valgrind --tool=callgrind and read
 * the inclusive cost of record_decode and index_apply.
 * --pipeline runs the batches as events/consumer.c does, through its
 * decoder (events/decoder.h) and gateway/ingest.c: post batch N+1, then
 * finish batch N (decoded on the decoder thread meanwhile), apply it with
 * ingest_batch_apply() and release it; --no-prepare posts each batch only
 * when it is applied (both threads decode it, then it is applied). Both
 * print events/s of wall time, per CPU-s of the calling ("consumer")
 * thread and of the process; under callgrind --separate-threads=yes the
 * consumer thread's instructions / N.
 * Exits 1 when an event was not decoded or applied.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "events/decoder.h"
#include "events/record.h"
#include "gateway/ingest.h"
#include "common/stats.h"
#include "views/filter.h"
#include "views/index.h"
#include "views/viewset.h"
#include "tests/unit/unit.h"

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct msg { const char *p; size_t len; };

/* Batches of the whole file through the decoder and ingest, in the
 * consumer's order: post(N+1) before finish/apply(N) when pipeline.
 * Returns the number of failed applies. */
static int run_ingest(struct index *ix, struct viewset_slot *views,
		      const struct msg *m, size_t n, size_t batch, bool pipeline)
{
	struct stats st;
	struct ingest *g = NULL;
	struct decoder *dec = NULL;
	struct decoder_msg *dm = calloc(n, sizeof *dm);
	struct decoder_job *job[2] = { NULL, NULL };
	int failed = 0;
	stats_init(&st);
	if (!dm || decoder_new(&st, &dec) < 0 ||
	    ingest_new(ix, NULL, views, &st, &g) < 0)
		return 1;
	for (size_t i = 0; i < n; i++)
		dm[i] = (struct decoder_msg){ "bench", 0, (int64_t)i, -1, m[i].p, m[i].len, 0 };
	size_t nb = (n + batch - 1) / batch;
#define BATCH_LEN(b) ((b) + 1 < nb ? batch : n - (b) * batch)
	double t0 = cpu_s(), w0 = clock_s(CLOCK_MONOTONIC), p0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	if (pipeline && nb)
		job[0] = decoder_post(dec, dm, BATCH_LEN(0));
	for (size_t b = 0; b < nb; b++) {
		struct ev_batch *eb;
		if (pipeline && b + 1 < nb)
			job[(b + 1) % 2] = decoder_post(dec, &dm[(b + 1) * batch], BATCH_LEN(b + 1));
		if (!pipeline)
			job[b % 2] = decoder_post(dec, &dm[b * batch], BATCH_LEN(b));
		if (!job[b % 2]) {
			failed++;
			continue;
		}
		failed += decoder_finish(dec, job[b % 2], &eb) < 0 ||
			  ingest_batch_apply(g, eb) != 0;
		decoder_release(dec, job[b % 2]);
	}
#undef BATCH_LEN
	double t = cpu_s() - t0, w = clock_s(CLOCK_MONOTONIC) - w0;
	double p = clock_s(CLOCK_PROCESS_CPUTIME_ID) - p0;
	printf("figure: ingest %s %zu events, batch %zu: %.0f events/s wall; %.0f per CPU-s of "
	       "the consumer thread (%.2f s), %.0f per process CPU-s (%.2f s); latency "
	       "samples %llu\n", pipeline ? "--pipeline" : "--no-prepare", n, batch,
	       (double)n / w, (double)n / t, t, (double)n / p, p,
	       (unsigned long long)st.visible.count);
	ingest_free(g);
	decoder_free(dec);
	stats_release(&st);
	free(dm);
	return failed;
}

static void change_count(void *ctx, const char *view, const char *path, int what)
{
	(void)view;
	(void)path;
	if (what == INDEX_ADDED)
		(*(long *)ctx)++;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench-ingest FILE [VIEWS] [BATCH] [--decode-only]\n");
		return 2;
	}
	long n_views = argc > 2 ? atol(argv[2]) : 100, batch = argc > 3 ? atol(argv[3]) : 1000;
	bool decode_only = argc > 4 && strcmp(argv[4], "--decode-only") == 0;
	bool pipeline = argc > 4 && strcmp(argv[4], "--pipeline") == 0;
	bool no_prepare = argc > 4 && strcmp(argv[4], "--no-prepare") == 0;
	struct viewset_slot slot;
	viewset_slot_init(&slot, NULL);
	size_t len;
	char *buf = unit_read_file(argv[1], &len);
	if (!buf || n_views < 1 || n_views > 1000 || batch < 1) {
		fprintf(stderr, "bench-ingest: cannot read %s or bad arguments\n", argv[1]);
		return 2;
	}
	/* split lines; JSON after the TAB; bucket before the first '/' */
	size_t n = 0, cap = 1024;
	struct msg *m = malloc(cap * sizeof *m);
	char bucket[64] = "";
	for (char *p = buf; p < buf + len;) {
		char *nl = memchr(p, '\n', (size_t)(buf + len - p));
		char *end = nl ? nl : buf + len;
		char *tab = memchr(p, '\t', (size_t)(end - p));
		if (tab) {
			if (!bucket[0]) {
				char *sl = memchr(p, '/', (size_t)(tab - p));
				if (sl && (size_t)(sl - p) < sizeof bucket)
					memcpy(bucket, p, (size_t)(sl - p));
			}
			if (n == cap)
				m = realloc(m, (cap *= 2) * sizeof *m);
			m[n].p = tab + 1;
			m[n].len = (size_t)(end - tab - 1);
			n++;
		}
		p = end + 1;
	}

	char tmpl[] = "/tmp/facetfs-bench-ingest-XXXXXX";
	struct index *ix = NULL;
	struct view **views = calloc((size_t)n_views, sizeof *views);
	char err[256];
	if (!decode_only) {
		if (!mkdtemp(tmpl) || index_open(tmpl, NULL, &ix, err, sizeof err) < 0) {
			fprintf(stderr, "index: %s\n", err);
			return 1;
		}
		int w = n_views > 100 ? 3 : 2;   /* evgen's prefix width */
		for (long i = 0; i < n_views; i++) {
			char js[256];
			snprintf(js, sizeof js,
				 "{\"name\":\"v%0*ld\",\"bucket\":\"%s\",\"match\":{\"prefix\":"
				 "\"p%0*ld/\"},\"layout\":{\"strip_prefix\":\"p%0*ld/\"}}",
				 w, i, bucket, w, i, w, i);
			struct diag d = { 0 };
			if (view_load_buf("bench.json", js, strlen(js), &views[i], &d) < 0) {
				fprintf(stderr, "view: %s\n", d.n ? d.lines[0] : "?");
				return 1;
			}
			diag_release(&d);
		}
		/* the gateway's arrangement: a slot holding the current set,
		 * made current by the index (the set borrows the views) */
		struct viewset *vs;
		int rc = viewset_new((size_t)n_views, &vs);
		for (long i = 0; rc == 0 && i < n_views; i++)
			rc = viewset_add_borrowed(vs, views[i]);
		if (rc == 0)
			rc = viewset_seal(vs);
		if (rc == 0)
			rc = index_set_views(ix, vs, &slot);
		viewset_unpin(vs);
		if (rc < 0)
			return 1;
	}

	if (pipeline || no_prepare) {
		int failed = run_ingest(ix, &slot, m, n, (size_t)batch, pipeline);
		int ok = failed == 0 && index_objects(ix) == (uint64_t)n;
		if (!ok)
			fprintf(stderr, "bench-ingest: %d failed applies, %llu objects of %zu\n",
				failed, (unsigned long long)index_objects(ix), n);
		index_close(ix);
		char cmd[128];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmpl);
		viewset_slot_release(&slot);
		view_free_all(views, (size_t)n_views);
		free(m);
		free(buf);
		return ok ? 0 : 1;
	}

	struct ev_doc *docs = calloc((size_t)batch, sizeof *docs);
	struct obj_meta *evs = calloc((size_t)batch, sizeof *evs);
	double t_dec = 0, t_app = 0;
	long decoded = 0, bad = 0, added = 0, stale = 0;
	for (size_t at = 0; at < n; at += (size_t)batch) {
		size_t nb = n - at < (size_t)batch ? n - at : (size_t)batch, nev = 0;
		double c0 = cpu_s();
		for (size_t i = 0; i < nb; i++) {
			int rc = record_decode(m[at + i].p, m[at + i].len, &docs[i]);
			if (rc < 0 || docs[i].n != 1)
				bad++;
		}
		double c1 = cpu_s();
		t_dec += c1 - c0;
		for (size_t i = 0; i < nb; i++)
			for (size_t j = 0; j < docs[i].n; j++)
				evs[nev++] = docs[i].ev[j];
		decoded += (long)nev;
		if (ix) {
			struct index_pos pos = { "bench", 0, (int64_t)(at + nb) };
			c0 = cpu_s();
			int rc = index_apply(ix, evs, nev, &pos, 1, change_count, &added);
			t_app += cpu_s() - c0;
			if (rc < 0) {
				fprintf(stderr, "index_apply failed\n");
				return 1;
			}
			stale += rc;
		}
		c0 = cpu_s();
		for (size_t i = 0; i < nb; i++)
			ev_doc_release(&docs[i]);
		t_dec += cpu_s() - c0;
	}
	printf("figure: decode %ld events: %.0f events per CPU-s (incl. release)\n", decoded,
	       (double)decoded / t_dec);
	if (ix)
		printf("figure: apply %ld events, %ld views, batch %ld: %.0f events per CPU-s; "
		       "both: %.0f per CPU-s\n", decoded, n_views, batch,
		       (double)decoded / t_app, (double)decoded / (t_dec + t_app));
	int ok = bad == 0 && decoded == (long)n;
	if (ix) {
		ok = ok && added == decoded && stale == 0 && index_objects(ix) == (uint64_t)n;
		index_close(ix);
		char cmd[128];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmpl);
	}
	viewset_slot_release(&slot);
	view_free_all(views, ix ? (size_t)n_views : 0);
	free(docs);
	free(evs);
	free(m);
	free(buf);
	if (!ok)
		fprintf(stderr, "bench-ingest: %ld bad, %ld decoded of %zu, %ld added, %ld stale\n",
			bad, decoded, n, added, stale);
	return ok ? 0 : 1;
}
