/*
 * s3fill — fill a bucket with many small objects quickly, for tests and
 * benchmarks (aws s3 cp takes about half a second per object).
 *
 *   s3fill BUCKET PREFIX COUNT [--size N] [--threads T] [--start I]
 *          [--suffix .txt] [--meta NAME=V1,V2,...] [--dirs D]
 *
 * Keys are PREFIX + zero-padded number + suffix; with --dirs D, PREFIX +
 * "d" + the number mod D (5 digits) + "/" + number + suffix, so that the
 * objects spread evenly over D directories; with --meta, object i gets
 * NAME = the (i mod n)-th value. Endpoint and credentials come from
 * S3_ENDPOINT, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. Prints progress
 * every second and the PUT rate at the end; exits non-zero if any PUT failed.
 */
#include "sync/s3/s3_http.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct job {
	struct s3 *s3;
	const char *bucket, *prefix, *suffix, *meta_name;
	char **meta_vals;
	size_t n_vals;
	long start, count, dirs;
	int fd;
	uint64_t size;
	atomic_long next, done, failed;
};

static void *worker(void *arg)
{
	struct job *j = arg;
	for (;;) {
		long i = atomic_fetch_add(&j->next, 1);
		if (i >= j->count)
			break;
		char key[1024], etag[72];
		if (j->dirs > 0)
			snprintf(key, sizeof key, "%sd%05ld/%07ld%s", j->prefix,
				 (j->start + i) % j->dirs, j->start + i, j->suffix);
		else
			snprintf(key, sizeof key, "%s%07ld%s", j->prefix, j->start + i, j->suffix);
		struct obj_kv kv = { (char *)j->meta_name,
				     j->n_vals ? j->meta_vals[(size_t)i % j->n_vals] : NULL };
		int rc = s3_put_file(j->s3, j->bucket, key, j->fd, j->size,
				     j->n_vals ? &kv : NULL, j->n_vals ? 1 : 0, NULL, etag);
		if (rc < 0) {
			fprintf(stderr, "s3fill: PUT %s/%s: %s\n", j->bucket, key, strerror(-rc));
			atomic_fetch_add(&j->failed, 1);
		}
		atomic_fetch_add(&j->done, 1);
	}
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: s3fill BUCKET PREFIX COUNT [--size N] [--threads T] "
				"[--start I] [--suffix S] [--meta NAME=V1,V2,...] [--dirs D]\n");
		return 2;
	}
	struct job j = { .bucket = argv[1], .prefix = argv[2], .count = atol(argv[3]),
			 .suffix = "", .size = 100 };
	int threads = 16;
	for (int i = 4; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--size") == 0)
			j.size = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--threads") == 0)
			threads = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--start") == 0)
			j.start = atol(argv[i + 1]);
		else if (strcmp(argv[i], "--dirs") == 0)
			j.dirs = atol(argv[i + 1]);
		else if (strcmp(argv[i], "--suffix") == 0)
			j.suffix = argv[i + 1];
		else if (strcmp(argv[i], "--meta") == 0) {
			char *spec = strdup(argv[i + 1]), *eq = strchr(spec, '=');
			if (!eq) {
				fprintf(stderr, "s3fill: --meta wants NAME=V1,V2\n");
				return 2;
			}
			*eq = '\0';
			j.meta_name = spec;
			j.meta_vals = calloc(64, sizeof *j.meta_vals);
			for (char *save = NULL, *v = strtok_r(eq + 1, ",", &save);
			     v && j.n_vals < 64; v = strtok_r(NULL, ",", &save))
				j.meta_vals[j.n_vals++] = v;
		} else {
			fprintf(stderr, "s3fill: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (threads < 1 || threads > 256 || j.count < 0)
		return 2;
	struct s3_conf c = { .endpoint = getenv("S3_ENDPOINT"), .region = "default",
			     .access_key = getenv("AWS_ACCESS_KEY_ID"),
			     .secret_key = getenv("AWS_SECRET_ACCESS_KEY") };
	if (s3_http_new(&c, NULL, &j.s3) < 0) {
		fprintf(stderr, "s3fill: set S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY\n");
		return 2;
	}
	j.fd = memfd_create("s3fill", 0);
	char *data = malloc(j.size ? j.size : 1);
	for (uint64_t i = 0; i < j.size; i++)
		data[i] = (char)('a' + i % 26);
	if (j.fd < 0 || write(j.fd, data, j.size) != (ssize_t)j.size) {
		perror("s3fill: memfd");
		return 1;
	}
	pthread_t *tid = calloc((size_t)threads, sizeof *tid);
	double t0 = now_s();
	for (int i = 0; i < threads; i++)
		pthread_create(&tid[i], NULL, worker, &j);
	while (atomic_load(&j.done) < j.count) {
		usleep(200000);
		static double last;
		if (now_s() - last >= 1.0 && isatty(STDERR_FILENO)) {
			last = now_s();
			fprintf(stderr, "\rs3fill: %ld/%ld", atomic_load(&j.done), j.count);
		}
	}
	for (int i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	double dt = now_s() - t0;
	printf("s3fill: %ld objects of %llu B in %.2f s (%.0f PUT/s), %ld failed\n",
	       j.count, (unsigned long long)j.size, dt, dt > 0 ? (double)j.count / dt : 0.0,
	       atomic_load(&j.failed));
	s3_free(j.s3);
	free(data);
	free(tid);
	return atomic_load(&j.failed) ? 1 : 0;
}
