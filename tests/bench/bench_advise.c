/* bench_advise.c — `facetfs advise` on a large synthetic trace.
 *
 * usage: bench-advise [RECORDS] [FILE]   (default 10,000,000 records)
 *        bench-advise --record [N]        (the recorder: N calls, 2 threads)
 * Writes a synthetic trace of RECORDS records to FILE (default a temporary
 * file, removed after) and runs the advisor on it, printing how long the
 * generation and the analysis took (figures, never asserted). The workload:
 * 64 processes over 20,000 files of two views; each session opens a file,
 * reads or writes 4 KiB blocks (half sequential runs, half random, within
 * the first 1 MiB), sometimes fsyncs, and closes; an event record follows
 * some closes. Overlaps between processes are frequent, so every class and
 * policy is exercised.
 */
#include "common/trace.h"
#include "gateway/advise.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NPROC 64
#define NFILES 20000

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int put(FILE *f, int64_t t, unsigned op, uint32_t pid, uint64_t fh, uint64_t off,
	       uint64_t len, int32_t result, const char *name)
{
	struct trace_rec r = { .t = t, .fh = fh, .off = off, .len = len, .pid = pid, .tid = pid,
			       .result = result, .op = (uint16_t)op };
	size_t n = name ? strlen(name) : 0;
	r.name_len = (uint16_t)n;
	static const char pad[8];
	if (fwrite(&r, sizeof r, 1, f) != 1 || (n && fwrite(name, 1, n, f) != n) ||
	    fwrite(pad, 1, trace_rec_size(n) - sizeof r - n, f) != trace_rec_size(n) - sizeof r - n)
		return -EIO;
	return 0;
}

static int generate(const char *path, uint64_t records)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -errno;
	static char buf[1 << 20];
	setvbuf(f, buf, _IOFBF, sizeof buf);
	struct trace_header h;
	trace_header_init(&h);
	fwrite(&h, sizeof h, 1, f);
	uint64_t seed = 88172645463325252ull, n = 0, fh = 1;
	int64_t t = h.mono_ns;
	char name[64];
	int rc = 0;
	while (n < records && !rc) {
		uint32_t pid = 1000 + (uint32_t)(rnd(&seed) % NPROC);
		unsigned file = (unsigned)(rnd(&seed) % NFILES);
		snprintf(name, sizeof name, "%s/dir%u/file%u.dat", file % 2 ? "raw" : "results",
			 file % 100, file);
		bool writer = rnd(&seed) % 3 == 0, sequential = rnd(&seed) % 2;
		unsigned ops = 1 + (unsigned)(rnd(&seed) % 12);
		uint64_t off = (rnd(&seed) % 256) * 4096;
		t += 1000 + (int64_t)(rnd(&seed) % 5000);
		rc |= put(f, t, TRACE_OPEN, pid, fh, writer ? 2 : 0, 0, 0, name);
		n++;
		for (unsigned k = 0; k < ops && n < records; k++, n++) {
			t += 500 + (int64_t)(rnd(&seed) % 20000);
			if (!sequential)
				off = (rnd(&seed) % 256) * 4096;
			bool w = writer && rnd(&seed) % 4 != 0;
			rc |= put(f, t, w ? TRACE_WRITE : TRACE_READ, pid, fh, off, 4096, 4096, NULL);
			off += 4096;
			if (w && rnd(&seed) % 8 == 0 && n + 1 < records) {
				t += 100000;
				rc |= put(f, t, TRACE_FSYNC, pid, fh, 0, 0, 0, NULL);
				n++;
			}
		}
		if (n < records) {
			t += 1000;
			rc |= put(f, t, TRACE_FLUSH, pid, fh, 0, 0, 0, NULL);
			n++;
		}
		if (n < records) {
			rc |= put(f, t + 10, TRACE_RELEASE, pid, fh, 0, 0, 0, NULL);
			n++;
		}
		if (writer && n < records) {
			rc |= put(f, t + 2000000, TRACE_EVENT, 0, 0, 0, 0, 0, name);
			n++;
		}
		fh++;
	}
	if (fclose(f) != 0 && !rc)
		rc = -errno;
	return rc;
}

struct rec_arg {
	struct trace *t;
	uint64_t n;
	uint32_t tid;
};

static void *rec_thread(void *p)
{
	struct rec_arg *a = p;
	for (uint64_t i = 0; i < a->n; i++)
		if (trace_on(a->t))
			trace_record(a->t, TRACE_READ, a->tid, 0x1000 + (i & 63), (i & 255) * 4096,
				     4096, 4096, NULL, NULL, NULL);
	return NULL;
}

static int bench_record(uint64_t n)
{
	char dir[] = "/tmp/bench-trace.XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	struct trace *t;
	char *msg = NULL;
	if (trace_new(dir, &t) < 0)
		return 1;
	struct rec_arg args[2] = { { t, n / 2, (uint32_t)getpid() }, { t, n / 2, (uint32_t)getpid() } };
	double t0 = now_s();
	rec_thread(&args[0]);   /* off: trace_on() only */
	double off = now_s() - t0;
	if (trace_start(t, NULL, 1ull << 34, &msg) < 0) {
		fprintf(stderr, "%s", msg ? msg : "trace_start failed\n");
		return 1;
	}
	free(msg);
	pthread_t th[2];
	t0 = now_s();
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, rec_thread, &args[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	double on = now_s() - t0;
	trace_stop(t, &msg);
	printf("bench-advise --record: off %.2f ns per call; on %.0f ns per record "
	       "(%.0f records/s, 2 threads); %s", off * 1e9 / (double)(n / 2),
	       on * 1e9 / (double)n, (double)n / on, msg ? msg : "\n");
	free(msg);
	trace_free(t);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--record") == 0)
		return bench_record(argc > 2 ? strtoull(argv[2], NULL, 10) : 4000000);
	uint64_t records = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000;
	char tmpl[] = "/tmp/bench-advise.XXXXXX";
	const char *path = argc > 2 ? argv[2] : NULL;
	if (!path) {
		int fd = mkstemp(tmpl);
		if (fd < 0) {
			perror("mkstemp");
			return 1;
		}
		close(fd);
		path = tmpl;
	}
	double t0 = now_s();
	int rc = generate(path, records);
	if (rc < 0) {
		fprintf(stderr, "bench-advise: %s: %s\n", path, strerror(-rc));
		return 1;
	}
	double t1 = now_s();
	FILE *out = fopen("/dev/null", "w");
	struct advise_opts o = { .examples = 3, .max_files = 20, .skew_ms = 10 };
	const char *paths[] = { path };
	rc = advise_run(paths, 1, &o, out ? out : stdout);
	double t2 = now_s();
	if (out)
		fclose(out);
	printf("bench-advise: %llu records: generated in %.2f s, advise took %.2f s "
	       "(%.0f records/s)\n", (unsigned long long)records, t1 - t0, t2 - t1,
	       (double)records / (t2 - t1));
	if (argc <= 2)
		unlink(path);
	return rc < 0 ? 1 : 0;
}
