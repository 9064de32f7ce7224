/*
 * bench_index.c — events applied per second by the index (the target of
 * docs/design.md "Targets": >= 200K/s with 100 views, 1M objects, 2 cores;
 * the cost of one event must not grow with the number of prefix views:
 * compare 100 and 1,000).
 *
 * Synthetic RGW-shaped put events (distinct keys, etag, Ceph-normalised
 * sequencer, one user-metadata pair) over VIEWS prefix views p000/..; each
 * key falls under one prefix. Events are applied in batches of BATCH with a
 * Kafka offset each, as the consumer does, with a change callback (counting
 * them). Only index_apply() is timed.
 *
 * usage: bench-index [--objects N] [--views N] [--batch N] [--dir DIR]
 *                    [--sync] [--apply-only] [--matrix]
 *   (short forms -n -v -b -d -s -a -m)
 *   --sync        synchronous writes (fsync per batch)
 *   --apply-only  skip the lookups and the view rebuild after applying
 *   --matrix      views 100 and 1,000 x batch 1,000 and 10,000, each into a
 *                 fresh index, apply only
 * Every run prints one "figure:" line with its parameters: events/s of
 * index_apply in wall time and per CPU-second of the applying thread (the
 * latter is steadier on a shared machine; LevelDB compacts on a second
 * thread, counted in process cpu), and, where perf events are allowed, one
 * with instructions and cycles per event of the applying thread (the
 * steadiest: preemption by other processes does not count).
 */
#include <errno.h>
#include <getopt.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "views/filter.h"
#include "views/index.h"
#include "tests/unit/unit_views.h"

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

/* Hardware counters of the calling thread only (instructions, cycles), so
 * that a figure holds on a loaded machine: -1 when perf events are not
 * available (then only the times are printed). */
struct hwc { int fd[2]; uint64_t v[2]; };

static void hwc_open(struct hwc *h)
{
	static const uint64_t what[2] = { PERF_COUNT_HW_INSTRUCTIONS, PERF_COUNT_HW_CPU_CYCLES };
	for (int i = 0; i < 2; i++) {
		struct perf_event_attr a;
		memset(&a, 0, sizeof a);
		a.size = sizeof a;
		a.type = PERF_TYPE_HARDWARE;
		a.config = what[i];
		a.disabled = 1;
		h->fd[i] = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
		if (h->fd[i] < 0) {   /* kernel side not allowed: user space only */
			a.exclude_kernel = 1;
			a.exclude_hv = 1;
			h->fd[i] = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
		}
		h->v[i] = 0;
	}
}

static void hwc_enable(struct hwc *h, bool on)
{
	for (int i = 0; i < 2; i++)
		if (h->fd[i] >= 0)
			ioctl(h->fd[i], on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
}

static void hwc_close(struct hwc *h)
{
	for (int i = 0; i < 2; i++) {
		if (h->fd[i] < 0)
			continue;
		if (read(h->fd[i], &h->v[i], sizeof h->v[i]) != (ssize_t)sizeof h->v[i])
			h->v[i] = 0;
		close(h->fd[i]);
	}
}

struct cfg {
	long n_obj, n_views, batch;
	const char *dir;   /* NULL: a fresh temporary directory */
	bool sync, apply_only;
};

static void remove_dir(const char *dir)
{
	char cmd[256];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

static struct view **views_make(long n)
{
	struct view **views = calloc((size_t)n, sizeof *views);
	for (long i = 0; views && i < n; i++) {
		char js[256];
		snprintf(js, sizeof js,
			 "{\"name\":\"p%03ld\",\"bucket\":\"bench\",\"match\":{\"prefix\":\"p%03ld/\"}}",
			 i, i);
		struct diag d = { 0 };
		if (view_load_buf("bench.json", js, strlen(js), &views[i], &d) < 0) {
			fprintf(stderr, "view: %s\n", d.n ? d.lines[0] : "?");
			diag_release(&d);
			view_free_all(views, (size_t)i);
			return NULL;
		}
		diag_release(&d);
	}
	return views;
}

/* Fill ev[0..nb) with the put events done .. done+nb-1. */
static void events_make(struct obj_meta *ev, char (*keys)[96], struct obj_kv *kv,
			long nb, long done, long n_views, uint64_t *rng)
{
	static char bucket[] = "bench", mname[] = "tag", mval[] = "alpha";
	for (long i = 0; i < nb; i++) {
		long id = done + i;
		uint64_t r = *rng;
		r ^= r << 13;
		r ^= r >> 7;
		r ^= r << 17;
		*rng = r;
		struct obj_meta *o = &ev[i];
		memset(o, 0, sizeof *o);
		/* scattered over views and directories, not in key order */
		snprintf(keys[i], sizeof keys[i], "p%03lu/run%04lu/sample-%08ld.fastq",
			 (unsigned long)(r % (uint64_t)n_views),
			 (unsigned long)((r >> 20) % 1000), id);
		o->bucket = bucket;
		o->key = keys[i];
		o->size = 1000 + (uint64_t)(r % 100000);
		o->mtime_ns = 1795311652000000000LL + id * 1000;
		snprintf(o->etag, sizeof o->etag, "%016llx%016llx",
			 (unsigned long long)r, (unsigned long long)(r * 31));
		snprintf(o->seq, sizeof o->seq, "%016llX",
			 (unsigned long long)(1795311652000000000ULL + (uint64_t)id));
		kv[i].name = mname;
		kv[i].value = mval;
		o->meta = &kv[i];
		o->n_meta = 1;
		o->flags = OBJ_HAS_META;
	}
}

/* The change callback, as the gateway's (which hands each change to the
 * mount): here it only counts. */
static void change_count(void *ctx, const char *view, const char *path, int what)
{
	(void)view;
	(void)path;
	if (what == INDEX_ADDED)
		(*(long *)ctx)++;
}

/* One benchmark run; 0 when every check on the result held. */
static int run(const struct cfg *c)
{
	char tmpl[] = "/tmp/facetfs-bench-index-XXXXXX";
	const char *dir = c->dir;
	if (!dir && !(dir = mkdtemp(tmpl))) {
		perror("mkdtemp");
		return 2;
	}
	struct view **views = views_make(c->n_views);
	if (!views)
		return 1;
	struct index *ix;
	char err[256];
	if (index_open(dir, NULL, &ix, err, sizeof err) < 0) {
		fprintf(stderr, "index_open: %s\n", err);
		return 1;
	}
	index_set_sync(ix, c->sync);
	if (unit_set_views(ix, views, (size_t)c->n_views) < 0)
		return 1;
	/* the key filter is built in the background: timed applies start once
	 * it answers, so no run pays LevelDB reads for keys never stored only
	 * because the builder thread was scheduled late (figures then differ
	 * from run to run, callgrind's too) */
	for (int i = 0; i < 1000 && !index_filter_ready(ix); i++)
		usleep(10000);

	/* one reusable batch of events with fixed-size string storage */
	struct obj_meta *ev = calloc((size_t)c->batch, sizeof *ev);
	char (*keys)[96] = calloc((size_t)c->batch, sizeof *keys);
	struct obj_kv *kv = calloc((size_t)c->batch, sizeof *kv);
	if (!ev || !keys || !kv)
		return 1;
	struct hwc hw;
	hwc_open(&hw);
	double t_apply = 0, c_apply = 0, t0 = now_s(), p0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	long done = 0, stale = 0, added = 0;
	int64_t offset = 0;
	uint64_t rng = 88172645463325252ULL;
	while (done < c->n_obj) {
		long nb = c->n_obj - done < c->batch ? c->n_obj - done : c->batch;
		events_make(ev, keys, kv, nb, done, c->n_views, &rng);
		offset += nb;
		struct index_pos pos = { "s3events", 0, offset };
		double a = now_s(), ca = clock_s(CLOCK_THREAD_CPUTIME_ID);
		hwc_enable(&hw, true);
		int rc = index_apply(ix, ev, (size_t)nb, &pos, 1, change_count, &added);
		hwc_enable(&hw, false);
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
	hwc_close(&hw);
	uint64_t members = 0;
	for (long i = 0; i < c->n_views; i++)
		members += index_members(ix, unit_v((size_t)i));
	printf("figure: views=%ld batch=%ld objects=%ld %s: %.0f events/s per CPU-s of the "
	       "applying thread, %.0f events/s wall (index_apply %.2f s, cpu %.2f s, "
	       "process cpu %.2f s, run %.2f s)\n",
	       c->n_views, c->batch, c->n_obj, c->sync ? "sync" : "async",
	       (double)c->n_obj / c_apply, (double)c->n_obj / t_apply, t_apply, c_apply,
	       pcpu, wall);
	if (hw.v[0] && hw.v[1])
		printf("figure: views=%ld batch=%ld objects=%ld: %.0f instructions, %.0f cycles "
		       "per event in the applying thread (IPC %.2f)\n", c->n_views, c->batch,
		       c->n_obj, (double)hw.v[0] / (double)c->n_obj,
		       (double)hw.v[1] / (double)c->n_obj, (double)hw.v[0] / (double)hw.v[1]);
	else
		printf("  (no hardware counters here: instructions/cycles per event not shown)\n");
	printf("  objects %llu, members %llu, added %ld, stale %ld\n",
	       (unsigned long long)index_objects(ix), (unsigned long long)members, added,
	       stale);
	fflush(stdout);
	int ok = index_objects(ix) == (uint64_t)c->n_obj && members == (uint64_t)c->n_obj &&
		 added == c->n_obj && stale == 0;

	if (!c->apply_only) {
		/* lookups and a listing on the result, for a feel of the read side */
		struct index_attr at;
		double r0 = now_s();
		long hits = 0;
		for (long i = 0; i < 100000; i++) {
			char path[96];
			snprintf(path, sizeof path, "p%03ld/run%04ld", i % c->n_views, i % 1000);
			hits += index_lookup(ix, unit_v((size_t)(i % c->n_views)), path, &at) == 0;
		}
		double r = now_s() - r0;
		printf("  lookups: %.0f/s (%ld hits of 100000)\n", 100000 / r, hits);

		/* a new view over everything: membership built from the records */
		struct view **more = calloc((size_t)c->n_views + 2, sizeof *more);
		memcpy(more, views, (size_t)c->n_views * sizeof *more);
		struct diag d = { 0 };
		const char *js = "{\"name\":\"everything\",\"bucket\":\"bench\"}";
		if (view_load_buf("bench.json", js, strlen(js), &more[c->n_views], &d) < 0)
			return 1;
		double b0 = now_s();
		if (unit_set_views(ix, more, (size_t)c->n_views + 1) < 0)
			return 1;
		double bt = now_s() - b0;
		printf("  new view built from %llu records in %.2f s (%llu members)\n",
		       (unsigned long long)index_objects(ix), bt,
		       (unsigned long long)index_members(ix, unit_v((size_t)c->n_views)));
		ok = ok && index_members(ix, unit_v((size_t)c->n_views)) == (uint64_t)c->n_obj;

		/* a new prefix view: only its key range is read */
		js = "{\"name\":\"again\",\"bucket\":\"bench\",\"match\":{\"prefix\":\"p000/run00\"}}";
		if (view_load_buf("bench.json", js, strlen(js), &more[c->n_views + 1], &d) < 0)
			return 1;
		b0 = now_s();
		if (unit_set_views(ix, more, (size_t)c->n_views + 2) < 0)
			return 1;
		bt = now_s() - b0;
		uint64_t m = index_members(ix, unit_v((size_t)c->n_views + 1));
		printf("  new prefix view (p000/run00) built in %.3f s (%llu members)\n", bt,
		       (unsigned long long)m);
		ok = ok && m > 0 && m <= index_members(ix, unit_v(0));
		view_free(more[c->n_views]);
		view_free(more[c->n_views + 1]);
		free(more);
	}

	index_close(ix);
	view_free_all(views, (size_t)c->n_views);
	free(ev);
	free(keys);
	free(kv);
	if (dir == tmpl)
		remove_dir(tmpl);
	if (!ok)
		fprintf(stderr, "bench-index: wrong counts after the run\n");
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct cfg c = { .n_obj = 1000000, .n_views = 100, .batch = 1000 };
	bool matrix = false;
	static const struct option longopts[] = {
		{ "objects", required_argument, NULL, 'n' },
		{ "views", required_argument, NULL, 'v' },
		{ "batch", required_argument, NULL, 'b' },
		{ "dir", required_argument, NULL, 'd' },
		{ "sync", no_argument, NULL, 's' },
		{ "apply-only", no_argument, NULL, 'a' },
		{ "matrix", no_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 },
	};
	int o;
	while ((o = getopt_long(argc, argv, "n:v:b:d:sam", longopts, NULL)) != -1) {
		switch (o) {
		case 'n': c.n_obj = atol(optarg); break;
		case 'v': c.n_views = atol(optarg); break;
		case 'b': c.batch = atol(optarg); break;
		case 'd': c.dir = optarg; break;
		case 's': c.sync = true; break;
		case 'a': c.apply_only = true; break;
		case 'm': matrix = true; break;
		default:
			fprintf(stderr, "usage: bench-index [--objects N] [--views N] [--batch N] "
				"[--dir DIR] [--sync] [--apply-only] [--matrix]\n");
			return 2;
		}
	}
	if (c.n_obj < 1 || c.n_views < 1 || c.n_views > 1000 || c.batch < 1)
		return 2;
	if (!matrix)
		return run(&c);
	static const long mviews[] = { 100, 1000 }, mbatch[] = { 1000, 10000 };
	int rc = 0;
	c.dir = NULL;
	c.apply_only = true;
	for (size_t i = 0; i < 2; i++) {
		for (size_t j = 0; j < 2; j++) {
			c.n_views = mviews[i];
			c.batch = mbatch[j];
			int r = run(&c);
			if (r)
				rc = r;
		}
	}
	return rc;
}
