/*
 * bench_scan.c — the index side of a bucket's first scan: listed pages
 * applied per second by index_scan_apply() (views/index.h), which bounds the
 * scan once the listing is faster than the apply (bench_listing: 1,000 keys
 * listed in ~11 ms).
 *
 * PAGES pages of PAGE listed objects ("data/0000000".., in key order, as a
 * ListObjectsV2 returns them: size, Last-Modified, ETag, no sequencer) are
 * applied to a fresh index holding VIEWS views of the bucket (the first is
 * the bench_listing view: prefix data/, size 1 B..1 MiB, strip_prefix; the
 * others a whole-bucket view, a size view, a narrower prefix view and a
 * view of another bucket, repeated), each page with the scan state after it
 * and a change callback that counts, as views/scan.c does. Only
 * index_scan_apply() is timed.
 *
 * usage: bench-scan [--pages N] [--page N] [--views N] [--dir DIR]
 *                   [--pipeline MS [--generate] [--every N]]
 *   --pipeline MS  instead: the whole first scan (views/scan.h) of a
 *                  bucket in the in-memory store (sync/s3/s3_fake.h) whose
 *                  every LIST page takes MS ms more (sync/s3/s3_fault.h) (11 = the raw
 *                  LIST of bench_listing), from scan_start to scan_wait;
 *                  the ideal is PAGES x MS plus one page's apply
 *   --generate     the bucket's listing is generated as it is listed
 *                  (s3_fake_bucket_generate: keys data/ + 10 digits, no
 *                  object stored), so that ten million objects fit: the
 *                  process's memory is then the scan's and the index's
 *   --every N      with --pipeline, a "progress:" line every N objects
 *                  listed (default 1,000,000): objects, seconds, objects/s
 *                  since the last line, the process's RSS (flat when the
 *                  scan's memory does not grow with the bucket) and the
 *                  index's size on disk, also per object
 * Prints one "figure:" line with objects/s (wall and per CPU-second of the
 * applying thread) and, where perf events are allowed, instructions per
 * object of the applying thread. Where they are not, run it under
 *   valgrind --tool=callgrind --toggle-collect=index_scan_apply bench-scan
 * and divide the Ir total by the objects (the repeatable figure).
 * Exit status 1 when the index does not hold what was listed.
 */
#include <errno.h>
#include <getopt.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"
#include "views/filter.h"
#include "views/index.h"
#include "tests/unit/unit_views.h"
#include "views/scan.h"

/* The first three fields of /proc/loadavg, in a static buffer. */
static const char *loadavg(void)
{
	static char buf[64];
	snprintf(buf, sizeof buf, "?");
	FILE *f = fopen("/proc/loadavg", "r");
	if (f) {
		double a, b, c;
		if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3)
			snprintf(buf, sizeof buf, "%.2f %.2f %.2f", a, b, c);
		fclose(f);
	}
	return buf;
}

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Instructions of the calling thread; fd -1 when perf events are refused. */
static int hwc_open(void)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof a);
	a.size = sizeof a;
	a.type = PERF_TYPE_HARDWARE;
	a.config = PERF_COUNT_HW_INSTRUCTIONS;
	a.disabled = 1;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}

static void hwc_enable(int fd, bool on)
{
	if (fd >= 0)
		ioctl(fd, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
}

static uint64_t hwc_read(int fd)
{
	uint64_t v = 0;
	if (fd >= 0 && read(fd, &v, sizeof v) != (ssize_t)sizeof v)
		v = 0;
	return v;
}

static const char *const view_json[] = {
	"{\"name\":\"big\",\"bucket\":\"bench\",\"match\":{\"prefix\":\"data/\","
	"\"size\":{\"min\":1,\"max\":\"1MiB\"}},\"layout\":{\"strip_prefix\":\"data/\"}}",
	"{\"name\":\"all\",\"bucket\":\"bench\"}",
	"{\"name\":\"small\",\"bucket\":\"bench\",\"match\":{\"size\":{\"max\":500}}}",
	"{\"name\":\"some\",\"bucket\":\"bench\",\"match\":{\"prefix\":\"data/00\"}}",
	"{\"name\":\"other\",\"bucket\":\"elsewhere\"}",
};
#define N_KINDS (sizeof view_json / sizeof view_json[0])

static struct view **views_make(long n)
{
	struct view **views = calloc((size_t)n, sizeof *views);
	for (long i = 0; views && i < n; i++) {
		char js[512], name[32];
		snprintf(name, sizeof name, "\"v%ld-", i);
		const char *t = view_json[(size_t)i % N_KINDS];
		const char *q = strstr(t, "\"name\":\"") + 7;   /* unique names */
		snprintf(js, sizeof js, "%.*s%s%s", (int)(q - t), t, name, q + 1);
		struct diag d = { 0 };
		if (view_load_buf("bench.json", js, strlen(js), &views[i], &d) < 0) {
			fprintf(stderr, "view %s: %s\n", js, d.n ? d.lines[0] : "?");
			diag_release(&d);
			view_free_all(views, (size_t)i);
			return NULL;
		}
		diag_release(&d);
	}
	return views;
}

/* Fill pg[0..n) with the listed objects first .. first+n-1. */
static void page_make(struct obj_meta *pg, char (*keys)[32], long n, long first)
{
	static char bucket[] = "bench";
	for (long i = 0; i < n; i++) {
		long id = first + i;
		struct obj_meta *o = &pg[i];
		memset(o, 0, sizeof *o);
		snprintf(keys[i], sizeof keys[i], "data/%07ld", id);
		o->bucket = bucket;
		o->key = keys[i];
		o->size = 100;
		o->mtime_ns = 1795311652000000000LL + id * 1000000LL;
		snprintf(o->etag, sizeof o->etag, "%016llx%016llx",
			 (unsigned long long)id * 0x9e3779b97f4a7c15ULL,
			 (unsigned long long)id * 31);
		o->flags = OBJ_FROM_SCAN;
	}
}

static void change_count(void *ctx, const char *view, const char *path, int what)
{
	(void)view;
	(void)path;
	if (what == INDEX_ADDED)
		(*(long *)ctx)++;
}

struct cfg { long pages, page, n_views; const char *dir; long list_ms; bool generate;
	     long every; const char *dir_used; };

/* The bucket of --pipeline: the in-memory store (sync/s3/s3_fake.h) holding
 * the same keys with 100 bytes each, behind the fault wrapper
 * (sync/s3/s3_fault.h) that makes every LIST page take list_ms. */
static int store_make(const struct cfg *c, struct s3 **out)
{
	struct s3 *fake, *s;
	if (s3_fake_new(&fake) < 0)
		return -1;
	if (s3_fault_new(fake, true, &s) < 0) {
		s3_free(fake);
		return -1;
	}
	s3_fake_page_size_set(fake, (size_t)c->page);
	struct s3_fault_rule slow = { .kind = S3K_LIST, .type = S3F_DELAY,
				      .delay_ms = (unsigned)c->list_ms };
	char body[100];
	int rc = c->generate ? s3_fake_bucket_generate(fake, "bench", "data/",
						       (uint64_t)(c->pages * c->page))
			     : s3_fake_bucket_add(fake, "bench");
	if (rc == 0 && c->list_ms > 0)
		rc = s3_fault_add(s, &slow);
	for (long id = 0; rc == 0 && !c->generate && id < c->pages * c->page; id++) {
		char key[32];
		snprintf(key, sizeof key, "data/%07ld", id);
		memset(body, (int)('a' + id % 26), sizeof body);
		rc = s3_fake_object_put(fake, "bench", key, body, sizeof body, NULL, 0, NULL);
	}
	if (rc < 0) {
		s3_free(s);
		return -1;
	}
	*out = s;
	return 0;
}

/* Resident bytes of this process. */
static uint64_t rss_bytes(void)
{
	long pages = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Bytes of the files in dir (the index: no subdirectories). */
static uint64_t dir_size(const char *dir)
{
	uint64_t total = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, 0) == 0 && S_ISREG(st.st_mode))
			total += (uint64_t)st.st_size;
	}
	if (d)
		closedir(d);
	return total;
}

static void progress(const char *dir, uint64_t done, double t, double rate)
{
	char ix[4096];
	snprintf(ix, sizeof ix, "%s/index", dir);
	uint64_t rss = rss_bytes(), disk = dir_size(ix);
	printf("progress: %llu objects, %.1f s, %.0f objects/s since the last line, "
	       "RSS %.1f MiB, index %.1f MiB (%.1f bytes/object); load %s\n",
	       (unsigned long long)done, t, rate, (double)rss / 1048576.0,
	       (double)disk / 1048576.0, (double)disk / (double)done, loadavg());
	fflush(stdout);
}

static int run_pipeline(const struct cfg *c, struct index *ix, long *added)
{
	struct s3 *s3;
	if (store_make(c, &s3) < 0)
		return -1;
	struct scanner *sc;
	if (scan_new(ix, s3, NULL, change_count, added, &sc) < 0) {
		s3_free(s3);
		return -1;
	}
	long n = c->pages * c->page;
	double t0 = clock_s(CLOCK_MONOTONIC), p0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	int rc = scan_start(sc, "bench", 0);
	uint64_t next = (uint64_t)c->every, last_n = 0;
	double last_t = t0;
	while (rc == 0) {
		if ((rc = scan_wait(sc, "bench", 200)) != -ETIMEDOUT)
			break;
		rc = 0;
		struct scan_info *si;
		size_t ns;
		if (scan_status(sc, &si, &ns) < 0 || ns == 0)
			continue;
		uint64_t done = si[0].objects;
		free(si);
		if (done < next)
			continue;
		double now = clock_s(CLOCK_MONOTONIC);
		progress(c->dir_used, done, now - t0, (double)(done - last_n) / (now - last_t));
		last_n = done;
		last_t = now;
		while (next <= done)
			next += (uint64_t)c->every;
	}
	double t = clock_s(CLOCK_MONOTONIC) - t0, pcpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - p0;
	scan_free(sc);
	s3_free(s3);
	if (rc < 0) {
		fprintf(stderr, "scan: %s\n", strerror(-rc));
		return -1;
	}
	printf("figure: pipeline pages=%ld page=%ld views=%ld list=%ld ms%s: first scan %.3f s "
	       "(ideal %.3f s), %.0f objects/s, process cpu %.3f s; load %s\n", c->pages, c->page,
	       c->n_views, c->list_ms, c->generate ? " (generated)" : "", t,
	       (double)(c->pages * c->list_ms) / 1000, (double)n / t, pcpu, loadavg());
	progress(c->dir_used, (uint64_t)n, t, 0);
	return 0;
}

static int run(const struct cfg *c)
{
	char tmpl[] = "/tmp/facetfs-bench-scan-XXXXXX";
	const char *dir = c->dir;
	if (!dir && !(dir = mkdtemp(tmpl))) {
		perror("mkdtemp");
		return 2;
	}
	((struct cfg *)c)->dir_used = dir;
	struct view **views = views_make(c->n_views);
	struct index *ix;
	char err[256];
	if (!views)
		return 1;
	if (index_open(dir, NULL, &ix, err, sizeof err) < 0) {
		fprintf(stderr, "index_open: %s\n", err);
		return 1;
	}
	if (unit_set_views(ix, views, (size_t)c->n_views) < 0)
		return 1;
	/* as at a mount: the key filter of the empty index is built at once */
	for (int i = 0; i < 1000 && !index_filter_ready(ix); i++)
		usleep(1000);

	long added = 0, kept = 0, n = c->pages * c->page;
	if (c->list_ms >= 0) {
		if (run_pipeline(c, ix, &added) < 0)
			return 1;
		goto check;
	}
	struct obj_meta *pg = calloc((size_t)c->page, sizeof *pg);
	char (*keys)[32] = calloc((size_t)c->page, sizeof *keys);
	if (!pg || !keys)
		return 1;
	int fd = hwc_open();
	double t = 0, cpu = 0, p0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	struct index_scan_state st = { 0 };
	for (long p = 0; p < c->pages; p++) {
		page_make(pg, keys, c->page, p * c->page);
		st.objects += (uint64_t)c->page;
		st.done = p + 1 == c->pages;
		snprintf(st.token, sizeof st.token, "%s", st.done ? "" : keys[c->page - 1]);
		double a = clock_s(CLOCK_MONOTONIC), ca = clock_s(CLOCK_THREAD_CPUTIME_ID);
		hwc_enable(fd, true);
		int rc = index_scan_apply(ix, "bench", pg, (size_t)c->page, &st,
					  change_count, &added);
		hwc_enable(fd, false);
		t += clock_s(CLOCK_MONOTONIC) - a;
		cpu += clock_s(CLOCK_THREAD_CPUTIME_ID) - ca;
		if (rc < 0) {
			fprintf(stderr, "index_scan_apply: %s\n", strerror(-rc));
			return 1;
		}
		kept += rc;
	}
	double pcpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - p0;   /* + LevelDB's compactions */
	uint64_t ins = hwc_read(fd);
	if (fd >= 0)
		close(fd);
	printf("figure: pages=%ld page=%ld views=%ld objects=%ld: %.0f objects/s per CPU-s "
	       "of the applying thread, %.0f objects/s wall (index_scan_apply %.3f s, "
	       "cpu %.3f s, %.1f ms a page; process cpu %.3f s)\n", c->pages, c->page,
	       c->n_views, n, (double)n / cpu, (double)n / t, t, cpu,
	       1000 * t / (double)c->pages, pcpu);
	if (ins)
		printf("figure: %.0f instructions per object in the applying thread\n",
		       (double)ins / (double)n);
	else
		printf("  (no hardware counters here: use callgrind, see the header)\n");
	free(pg);
	free(keys);
check:;

	/* what a view shows must be what was listed */
	uint64_t members = 0, want = 0;
	for (long i = 0; i < c->n_views; i++) {
		members += index_members(ix, unit_v((size_t)i));
		size_t kind = (size_t)i % N_KINDS;
		/* "some" is prefix data/00: 7 digits from 0, or 10 with --generate */
		uint64_t some = c->generate ? (uint64_t)(n < 100000000 ? n : 100000000)
					    : (uint64_t)(n < 100000 ? n : 100000);
		want += kind == 0 || kind == 1 || kind == 2 ? (uint64_t)n
		      : kind == 3 ? some : 0;
	}
	struct index_scan_state got;
	int ok = index_objects(ix) == (uint64_t)n && members == want &&
		 (uint64_t)added == want && kept == 0 &&
		 index_scan_state_get(ix, "bench", &got) == 0 && got.done &&
		 got.objects == (uint64_t)n;
	printf("  objects %llu, members %llu (want %llu), added %ld, kept %ld\n",
	       (unsigned long long)index_objects(ix), (unsigned long long)members,
	       (unsigned long long)want, added, kept);
	index_close(ix);
	view_free_all(views, (size_t)c->n_views);
	if (dir == tmpl) {
		char cmd[128];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmpl);
	}
	if (!ok)
		fprintf(stderr, "bench-scan: the index does not hold what was listed\n");
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct cfg c = { .pages = 100, .page = 1000, .n_views = 5, .list_ms = -1,
			 .every = 1000000 };
	static const struct option longopts[] = {
		{ "pages", required_argument, NULL, 'p' },
		{ "page", required_argument, NULL, 'n' },
		{ "views", required_argument, NULL, 'v' },
		{ "dir", required_argument, NULL, 'd' },
		{ "pipeline", required_argument, NULL, 'P' },
		{ "generate", no_argument, NULL, 'g' },
		{ "every", required_argument, NULL, 'e' },
		{ NULL, 0, NULL, 0 },
	};
	int o;
	while ((o = getopt_long(argc, argv, "p:n:v:d:P:ge:", longopts, NULL)) != -1) {
		switch (o) {
		case 'p': c.pages = atol(optarg); break;
		case 'n': c.page = atol(optarg); break;
		case 'v': c.n_views = atol(optarg); break;
		case 'd': c.dir = optarg; break;
		case 'P': c.list_ms = atol(optarg); break;
		case 'g': c.generate = true; break;
		case 'e': c.every = atol(optarg) > 0 ? atol(optarg) : 1000000; break;
		default:
			fprintf(stderr, "usage: bench-scan [--pages N] [--page N] [--views N] "
				"[--dir DIR] [--pipeline MS [--generate] [--every N]]\n");
			return 2;
		}
	}
	if (c.pages < 1 || c.page < 1 || c.n_views < 1 || c.n_views > 1000)
		return 2;
	return run(&c);
}
