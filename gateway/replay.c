/* replay.c — see replay.h. */
#include "gateway/replay.h"

#include "common/file.h"
#include "common/trace.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char replay_help[] =
	"usage: facetfs replay TRACE --view DIR [--processes N]\n"
	"  Replay the trace's I/O (same files, offsets, sizes, per-process order\n"
	"  and timing; synthetic data; one thread per traced process) against the\n"
	"  view directory DIR of a facetfs mount; print the time it took and the S3\n"
	"  requests it caused. Run it on a `session` and a `commit` view to see\n"
	"  what each costs for the workload.\n"
	"  --processes N         replay only the N busiest traced processes\n"
	"  -h, --help            this text\n";

#define IO_MAX (16u << 20)     /* larger traced lengths are cut to this */

struct rop {
	int64_t t;                 /* ns after the trace's first replayed op */
	uint64_t fh, off, len;
	uint16_t op;
	char *path, *path2;        /* DIR/...; rename's target */
};

struct rproc {
	uint32_t pid;
	struct rop *ops;
	size_t n, cap;
	/* results (the thread's own until joined) */
	uint64_t done, failed, bytes_read, bytes_written;
	int first_errno;
	const char *first_op;
	int64_t start_ns;
	char *buf;
};

struct fdmap {
	uint64_t fh;
	int fd;
};

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t at)
{
	int64_t d = at - now_ns();
	if (d <= 0)
		return;
	struct timespec ts = { .tv_sec = d / 1000000000, .tv_nsec = d % 1000000000 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int fd_find(struct fdmap *m, size_t n, uint64_t fh)
{
	for (size_t i = n; i-- > 0;)
		if (m[i].fh == fh)
			return (int)i;
	return -1;
}

static void note(struct rproc *p, bool ok, const char *op)
{
	if (ok) {
		p->done++;
		return;
	}
	p->failed++;
	if (!p->first_errno) {
		p->first_errno = errno ? errno : EIO;
		p->first_op = op;
	}
}

static void *proc_main(void *arg)
{
	struct rproc *p = arg;
	struct fdmap *fds = NULL;
	size_t nfds = 0, capfds = 0;
	for (size_t i = 0; i < p->n; i++) {
		struct rop *o = &p->ops[i];
		sleep_until(p->start_ns + o->t);
		int k = o->fh ? fd_find(fds, nfds, o->fh) : -1;
		errno = 0;
		switch (o->op) {
		case TRACE_OPEN:
		case TRACE_CREATE: {
			int flags = (int)o->off & (O_ACCMODE | O_APPEND | O_TRUNC);
			if (o->op == TRACE_CREATE)
				flags |= O_CREAT;
			int fd = open(o->path, flags | O_CLOEXEC, 0644);
			note(p, fd >= 0, "open");
			if (fd < 0)
				break;
			if (nfds == capfds) {
				size_t nc = capfds ? capfds * 2 : 16;
				struct fdmap *m = realloc(fds, nc * sizeof *m);
				if (!m) {
					close(fd);
					break;
				}
				fds = m;
				capfds = nc;
			}
			fds[nfds++] = (struct fdmap){ .fh = o->fh, .fd = fd };
			break;
		}
		case TRACE_READ:
		case TRACE_WRITE: {
			if (k < 0)
				break;     /* opened before the trace: not replayable */
			size_t len = o->len > IO_MAX ? IO_MAX : (size_t)o->len;
			ssize_t n = o->op == TRACE_READ ? pread(fds[k].fd, p->buf, len, (off_t)o->off)
							: pwrite(fds[k].fd, p->buf, len, (off_t)o->off);
			note(p, n >= 0, o->op == TRACE_READ ? "read" : "write");
			if (n > 0 && o->op == TRACE_READ)
				p->bytes_read += (uint64_t)n;
			else if (n > 0)
				p->bytes_written += (uint64_t)n;
			break;
		}
		case TRACE_FSYNC:
			if (k >= 0)
				note(p, fsync(fds[k].fd) == 0, "fsync");
			break;
		case TRACE_FLUSH:
			if (k >= 0) {
				note(p, close(fds[k].fd) == 0, "close");
				fds[k] = fds[--nfds];
			}
			break;
		case TRACE_TRUNCATE:
			if (k >= 0)
				note(p, ftruncate(fds[k].fd, (off_t)o->off) == 0, "ftruncate");
			else if (o->path)
				note(p, truncate(o->path, (off_t)o->off) == 0, "truncate");
			break;
		case TRACE_RENAME:
			if (o->path && o->path2)
				note(p, rename(o->path, o->path2) == 0, "rename");
			break;
		case TRACE_UNLINK:
			if (o->path)
				note(p, unlink(o->path) == 0, "unlink");
			break;
		default:
			break;
		}
	}
	for (size_t i = 0; i < nfds; i++)
		close(fds[i].fd);
	free(fds);
	return NULL;
}

/* DIR + the part of "VIEW/PATH" after the view; NULL when another view. */
static char *map_path(const char *dir, const char *name, size_t n, char **view)
{
	const char *slash = memchr(name, '/', n);
	if (!slash)
		return NULL;
	size_t vn = (size_t)(slash - name);
	if (!*view && !(*view = strndup(name, vn)))
		return NULL;
	if (strlen(*view) != vn || memcmp(*view, name, vn) != 0)
		return NULL;
	char *p;
	if (asprintf(&p, "%s/%.*s", dir, (int)(n - vn - 1), slash + 1) < 0)
		return NULL;
	return p;
}

static struct rproc *proc_get(struct rproc **ps, size_t *n, uint32_t pid)
{
	for (size_t i = 0; i < *n; i++)
		if ((*ps)[i].pid == pid)
			return &(*ps)[i];
	struct rproc *m = realloc(*ps, (*n + 1) * sizeof *m);
	if (!m)
		return NULL;
	*ps = m;
	memset(&m[*n], 0, sizeof m[*n]);
	m[*n].pid = pid;
	return &m[(*n)++];
}

/* Which handles belong to the replayed view (opened in it). */
static bool fh_in(const uint64_t *fhs, size_t n, uint64_t fh)
{
	for (size_t i = n; i-- > 0;)
		if (fhs[i] == fh)
			return true;
	return false;
}

static int load(const char *trace, const char *dir, struct rproc **ps, size_t *nps,
		char **view)
{
	struct trace_file tf;
	const char *why = NULL;
	int rc = trace_file_open(trace, &tf, &why);
	if (rc < 0) {
		fprintf(stderr, "facetfs replay: %s: %s\n", trace, why ? why : strerror(-rc));
		return rc;
	}
	uint64_t *fhs = NULL;
	size_t nfhs = 0, capfhs = 0;
	size_t pos = 0;
	const char *name;
	const struct trace_rec *r;
	int64_t t0 = INT64_MIN;
	rc = 0;
	while ((r = trace_file_next(&tf, &pos, &name))) {
		if (r->op == TRACE_EVENT || r->op == TRACE_RELEASE || !r->pid)
			continue;
		char *path = NULL, *path2 = NULL;
		size_t n1 = strnlen(name, r->name_len);
		if (n1) {
			if (!(path = map_path(dir, name, n1, view)))
				continue;
			if (r->op == TRACE_RENAME && n1 + 1 < r->name_len &&
			    !(path2 = map_path(dir, name + n1 + 1, r->name_len - n1 - 1, view))) {
				free(path);
				continue;
			}
			if (r->op == TRACE_OPEN || r->op == TRACE_CREATE) {
				if (r->result < 0) {
					free(path);
					continue;
				}
				if (nfhs == capfhs) {
					size_t nc = capfhs ? capfhs * 2 : 64;
					uint64_t *m = realloc(fhs, nc * sizeof *m);
					if (!m) {
						free(path);
						rc = -ENOMEM;
						break;
					}
					fhs = m;
					capfhs = nc;
				}
				fhs[nfhs++] = r->fh;
			}
		} else if (!r->fh || !fh_in(fhs, nfhs, r->fh)) {
			continue;
		}
		struct rproc *p = proc_get(ps, nps, r->pid);
		if (!p || (p->n == p->cap &&
			   !(p->ops = realloc(p->ops, (p->cap = p->cap ? p->cap * 2 : 256) *
						sizeof *p->ops)))) {
			free(path);
			free(path2);
			rc = -ENOMEM;
			break;
		}
		if (t0 == INT64_MIN)
			t0 = r->t;
		p->ops[p->n++] = (struct rop){ .t = r->t - t0, .fh = r->fh, .off = r->off,
			.len = r->len, .op = r->op, .path = path, .path2 = path2 };
	}
	free(fhs);
	trace_file_close(&tf);
	if (rc == -ENOMEM)
		fprintf(stderr, "facetfs replay: out of memory\n");
	return rc;
}

/* The mount's .facetfs/stats above dir, parsed; NULL if none is found. */
static cJSON *mount_stats(const char *dir)
{
	char path[PATH_MAX + 32], real[PATH_MAX];
	if (!realpath(dir, real))
		return NULL;
	for (;;) {
		snprintf(path, sizeof path, "%s/.facetfs/stats", real);
		char *text;
		if (access(path, R_OK) == 0 && file_read_all(path, 16u << 20, &text, NULL) == 0) {
			cJSON *j = cJSON_Parse(text);
			free(text);
			return j;
		}
		char *slash = strrchr(real, '/');
		if (!slash || slash == real)
			return NULL;
		*slash = '\0';
	}
}

static double s3_count(const cJSON *st, const char *name)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(st, "s3"), name);
	return cJSON_IsNumber(x) ? x->valuedouble : 0;
}

static int cmp_busy(const void *x, const void *y)
{
	const struct rproc *a = x, *b = y;
	return (a->n < b->n) - (a->n > b->n);
}

int replay_main(int argc, char **argv)
{
	const char *trace = NULL, *dir = NULL;
	unsigned long maxp = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(replay_help, stdout);
			return 0;
		} else if (strcmp(argv[i], "--view") == 0 && i + 1 < argc) {
			dir = argv[++i];
		} else if (strcmp(argv[i], "--processes") == 0 && i + 1 < argc) {
			char *end;
			maxp = strtoul(argv[++i], &end, 10);
			if (*end || !maxp) {
				fprintf(stderr, "facetfs replay: --processes: a number above 0\n");
				return 2;
			}
		} else if (argv[i][0] == '-' || trace) {
			fprintf(stderr, "facetfs replay: unexpected argument \"%s\"\n", argv[i]);
			fputs(replay_help, stderr);
			return 2;
		} else {
			trace = argv[i];
		}
	}
	if (!trace || !dir) {
		fputs(replay_help, stderr);
		return 2;
	}
	struct rproc *ps = NULL;
	size_t nps = 0;
	char *view = NULL;
	int code = 1;
	if (load(trace, dir, &ps, &nps, &view) < 0)
		goto out;
	if (!nps) {
		fprintf(stderr, "facetfs replay: %s: no replayable operation\n", trace);
		goto out;
	}
	qsort(ps, nps, sizeof *ps, cmp_busy);
	size_t run = maxp && maxp < nps ? maxp : nps;
	cJSON *before = mount_stats(dir);
	pthread_t *th = calloc(run, sizeof *th);
	if (!th)
		goto out;
	int64_t start = now_ns() + 1000000;
	size_t started = 0;
	for (; started < run; started++) {
		ps[started].start_ns = start;
		if (!(ps[started].buf = malloc(IO_MAX)))
			break;
		memset(ps[started].buf, 'r', IO_MAX);
		if (pthread_create(&th[started], NULL, proc_main, &ps[started]) != 0)
			break;
	}
	for (size_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	double secs = (double)(now_ns() - start) / 1e9;
	free(th);
	cJSON *after = mount_stats(dir);
	uint64_t done = 0, failed = 0, rb = 0, wb = 0;
	for (size_t i = 0; i < started; i++) {
		done += ps[i].done;
		failed += ps[i].failed;
		rb += ps[i].bytes_read;
		wb += ps[i].bytes_written;
	}
	printf("replayed %s (view %s) on %s: %zu process(es), %llu operations in %.3f s, "
	       "%llu failed; %llu bytes read, %llu written\n", trace, view ? view : "?", dir,
	       started, (unsigned long long)done + failed, secs, (unsigned long long)failed,
	       (unsigned long long)rb, (unsigned long long)wb);
	for (size_t i = 0; i < started; i++)
		if (ps[i].failed)
			printf("  process %u: %llu failed, first: %s: %s\n", ps[i].pid,
			       (unsigned long long)ps[i].failed, ps[i].first_op,
			       strerror(ps[i].first_errno));
	if (before && after) {
		static const char *const names[] = { "head", "get", "put", "list", "copy", "delete" };
		printf("s3 requests:");
		for (size_t k = 0; k < sizeof names / sizeof *names; k++)
			printf(" %s %.0f", names[k], s3_count(after, names[k]) - s3_count(before, names[k]));
		printf(" (the whole gateway's, during the replay)\n");
	} else {
		printf("s3 requests: unknown (no .facetfs/stats above %s)\n", dir);
	}
	cJSON_Delete(before);
	cJSON_Delete(after);
	code = failed ? 1 : 0;
out:
	for (size_t i = 0; i < nps; i++) {
		for (size_t k = 0; k < ps[i].n; k++) {
			free(ps[i].ops[k].path);
			free(ps[i].ops[k].path2);
		}
		free(ps[i].ops);
		free(ps[i].buf);
	}
	free(ps);
	free(view);
	return code;
}
