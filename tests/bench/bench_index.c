/*
 * bench_index.c — events applied per second by the index (DESIGN.md target:
 * >= 200K/s with 100 views, 1M objects, 2 cores).
 *
 * Synthetic RGW-shaped put events (distinct keys, etag, Ceph-normalised
 * sequencer, one user-metadata pair) over VIEWS prefix views p000/..; each
 * key falls under one prefix. Events are applied in batches of BATCH with a
 * Kafka offset each, as the consumer does. Only index_apply() is timed.
 *
 * usage: bench-index [-n OBJECTS] [-v VIEWS] [-b BATCH] [-d DIR] [-s]
 *   -s  synchronous writes (fsync per batch)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "views/filter.h"
#include "views/index.h"

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_s(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

int main(int argc, char **argv)
{
	long n_obj = 1000000, n_views = 100, batch = 1000;
	const char *dir = NULL;
	bool sync = false;
	int c;
	while ((c = getopt(argc, argv, "n:v:b:d:s")) != -1) {
		switch (c) {
		case 'n': n_obj = atol(optarg); break;
		case 'v': n_views = atol(optarg); break;
		case 'b': batch = atol(optarg); break;
		case 'd': dir = optarg; break;
		case 's': sync = true; break;
		default:
			fprintf(stderr, "usage: bench-index [-n OBJECTS] [-v VIEWS] [-b BATCH] [-d DIR] [-s]\n");
			return 2;
		}
	}
	if (n_obj < 1 || n_views < 1 || n_views > 1000 || batch < 1)
		return 2;
	char tmpl[] = "/tmp/facetfs-bench-index-XXXXXX";
	if (!dir && !(dir = mkdtemp(tmpl))) {
		perror("mkdtemp");
		return 2;
	}

	struct view **views = calloc((size_t)n_views, sizeof *views);
	for (long i = 0; i < n_views; i++) {
		char js[256];
		snprintf(js, sizeof js,
			 "{\"name\":\"p%03ld\",\"bucket\":\"bench\",\"match\":{\"prefix\":\"p%03ld/\"}}",
			 i, i);
		struct diag d = { 0 };
		if (view_load_buf("bench.json", js, strlen(js), &views[i], &d) < 0) {
			fprintf(stderr, "view: %s\n", d.n ? d.lines[0] : "?");
			return 1;
		}
		diag_release(&d);
	}
	struct index *ix;
	char err[256];
	if (index_open(dir, NULL, &ix, err, sizeof err) < 0) {
		fprintf(stderr, "index_open: %s\n", err);
		return 1;
	}
	index_set_sync(ix, sync);
	if (index_set_views(ix, views, (size_t)n_views) < 0)
		return 1;

	/* one reusable batch of events with fixed-size string storage */
	struct obj_meta *ev = calloc((size_t)batch, sizeof *ev);
	char (*keys)[96] = calloc((size_t)batch, sizeof *keys);
	struct obj_kv *kv = calloc((size_t)batch, sizeof *kv);
	char bucket[] = "bench", mname[] = "tag", mval[] = "alpha";
	double t_apply = 0, c_apply = 0, t0 = now_s(), p0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	long done = 0, stale = 0;
	int64_t offset = 0;
	uint64_t rng = 88172645463325252ULL;
	while (done < n_obj) {
		long nb = n_obj - done < batch ? n_obj - done : batch;
		for (long i = 0; i < nb; i++) {
			long id = done + i;
			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			struct obj_meta *o = &ev[i];
			memset(o, 0, sizeof *o);
			/* scattered over views and directories, not in key order */
			snprintf(keys[i], sizeof keys[i], "p%03lu/run%04lu/sample-%08ld.fastq",
				 (unsigned long)(rng % (uint64_t)n_views),
				 (unsigned long)((rng >> 20) % 1000), id);
			o->bucket = bucket;
			o->key = keys[i];
			o->size = 1000 + (uint64_t)(rng % 100000);
			o->mtime_ns = 1795311652000000000LL + id * 1000;
			snprintf(o->etag, sizeof o->etag, "%016llx%016llx",
				 (unsigned long long)rng, (unsigned long long)(rng * 31));
			snprintf(o->seq, sizeof o->seq, "%016llX",
				 (unsigned long long)(1795311652000000000ULL + (uint64_t)id));
			kv[i].name = mname;
			kv[i].value = mval;
			o->meta = &kv[i];
			o->n_meta = 1;
			o->flags = OBJ_HAS_META;
		}
		offset += nb;
		struct index_pos pos = { "s3events", 0, offset };
		double a = now_s(), ca = clock_s(CLOCK_THREAD_CPUTIME_ID);
		int rc = index_apply(ix, ev, (size_t)nb, &pos, 1, NULL, NULL);
		t_apply += now_s() - a;
		c_apply += clock_s(CLOCK_THREAD_CPUTIME_ID) - ca;
		if (rc < 0) {
			fprintf(stderr, "index_apply: %s\n", strerror(-rc));
			return 1;
		}
		stale += rc;
		done += nb;
	}
	double wall = now_s() - t0, pcpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - p0;
	uint64_t members = 0;
	for (long i = 0; i < n_views; i++)
		members += index_members(ix, (size_t)i);
	printf("bench-index: %ld events, %ld views, batch %ld, %s writes\n", n_obj, n_views,
	       batch, sync ? "sync" : "async");
	printf("  applied: %.0f events/s (index_apply only: %.2f s), %.0f events/s wall (%.2f s)\n",
	       (double)n_obj / t_apply, t_apply, (double)n_obj / wall, wall);
	/* on a loaded machine wall time lies: the applying thread's CPU time
	 * is what one core spends; LevelDB compacts on another thread */
	printf("  cpu: %.0f events per CPU-second of the applying thread (%.2f s); "
	       "process CPU %.2f s (compaction and event generation included)\n",
	       (double)n_obj / c_apply, c_apply, pcpu);
	printf("  objects %llu, members %llu, stale %ld\n",
	       (unsigned long long)index_objects(ix), (unsigned long long)members, stale);
	int ok = index_objects(ix) == (uint64_t)n_obj && members == (uint64_t)n_obj && stale == 0;

	/* lookups and a listing on the result, for a feel of the read side */
	struct index_attr at;
	double r0 = now_s();
	long hits = 0;
	for (long i = 0; i < 100000; i++) {
		char path[96];
		snprintf(path, sizeof path, "p%03ld/run%04ld", i % n_views, i % 1000);
		hits += index_lookup(ix, (size_t)(i % n_views), path, &at) == 0;
	}
	double r = now_s() - r0;
	printf("  lookups: %.0f/s (%ld hits of 100000)\n", 100000 / r, hits);

	/* a new view over everything: membership built from the records */
	struct view **more = calloc((size_t)n_views + 1, sizeof *more);
	memcpy(more, views, (size_t)n_views * sizeof *more);
	struct diag d = { 0 };
	const char *js = "{\"name\":\"everything\",\"bucket\":\"bench\"}";
	if (view_load_buf("bench.json", js, strlen(js), &more[n_views], &d) < 0)
		return 1;
	double b0 = now_s();
	if (index_set_views(ix, more, (size_t)n_views + 1) < 0)
		return 1;
	double bt = now_s() - b0;
	printf("  new view built from %llu records in %.2f s (%llu members)\n",
	       (unsigned long long)index_objects(ix), bt,
	       (unsigned long long)index_members(ix, (size_t)n_views));
	ok = ok && index_members(ix, (size_t)n_views) == (uint64_t)n_obj;
	view_free(more[n_views]);
	free(more);

	index_close(ix);
	for (long i = 0; i < n_views; i++)
		view_free(views[i]);
	free(views);
	free(ev);
	free(keys);
	free(kv);
	if (dir == tmpl) {
		char cmd[128];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmpl);
	}
	return ok ? 0 : 1;
}
