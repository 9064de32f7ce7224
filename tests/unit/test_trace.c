/* test_trace.c — the recorder and reader of common/trace.h, no mount:
 * records written are read back field by field (names, rename's two
 * names, padding), the view filter keeps a view's named ops and the
 * handles opened in it (and forgets a handle at release), the bound stops
 * recording with the file under it and says so in the status, start/stop
 * errors, many threads at once lose nothing, and the reader rejects what
 * is not a trace and ignores a record cut short. Prints TAP lines. */
#include "common/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures, tests;

static void check(bool ok, const char *what)
{
	tests++;
	if (!ok)
		failures++;
	printf("%s - %s\n", ok ? "ok" : "not ok", what);
}

/* The path in "... into PATH (at most" of a start answer. */
static char *path_of(const char *msg)
{
	const char *a = strstr(msg, " into "), *b = strstr(msg, " (at most");
	return a && b && b > a ? strndup(a + 6, (size_t)(b - a - 6)) : NULL;
}

struct readback {
	unsigned n;
	struct trace_rec r[64];
	char name[64][128];
};

static int read_back(const char *path, struct readback *rb)
{
	struct trace_file f;
	int rc = trace_file_open(path, &f, NULL);
	if (rc < 0)
		return rc;
	size_t pos = 0;
	const char *name;
	const struct trace_rec *r;
	rb->n = 0;
	while ((r = trace_file_next(&f, &pos, &name)) && rb->n < 64) {
		rb->r[rb->n] = *r;
		size_t n = r->name_len < 127 ? r->name_len : 127;
		memcpy(rb->name[rb->n], name, n);
		rb->name[rb->n][n] = '\0';
		if (r->op == TRACE_RENAME && strlen(rb->name[rb->n]) < n)
			rb->name[rb->n][strlen(rb->name[rb->n])] = '>';   /* old>new */
		rb->n++;
	}
	trace_file_close(&f);
	return 0;
}

struct worker {
	struct trace *t;
	unsigned n;
};

static void *worker_main(void *p)
{
	struct worker *w = p;
	for (unsigned i = 0; i < w->n; i++)
		trace_record(w->t, TRACE_READ, (uint32_t)getpid(), 7, i, 4096, 4096, NULL, NULL,
			     NULL);
	return NULL;
}

int main(void)
{
	char dir[] = "/tmp/test_trace.XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	char tdir[64];
	snprintf(tdir, sizeof tdir, "%s/traces", dir);
	struct trace *t;
	char *msg = NULL, *status;
	if (trace_new(tdir, &t) < 0)
		return 1;
	check(!trace_on(t) && !trace_on(NULL), "off after trace_new; NULL is off");
	check(trace_stop(t, &msg) == -ENOENT && msg && strncmp(msg, "error", 5) == 0,
	      "stop without a trace: -ENOENT and an error answer");
	free(msg);
	status = trace_status(t);
	check(status && strncmp(status, "off", 3) == 0, "status: off");
	free(status);

	/* ---- every view: fields and names read back ---- */
	check(trace_start(t, NULL, 0, &msg) == 0 && trace_on(t), "start (every view)");
	char *p1 = msg ? path_of(msg) : NULL;
	free(msg);
	check(trace_start(t, NULL, 0, &msg) == -EBUSY, "a second start: -EBUSY");
	free(msg);
	uint32_t me = (uint32_t)getpid();
	trace_record(t, TRACE_OPEN, me, 11, O_RDWR, 0, 0, "v1", "dir/a.txt", NULL);
	trace_record(t, TRACE_WRITE, me, 11, 4096, 100, 100, NULL, NULL, NULL);
	trace_record(t, TRACE_READ, me, 11, 0, 8192, -5, NULL, NULL, NULL);
	trace_record(t, TRACE_RENAME, me, 0, 0, 0, 0, "v1", "dir/a.txt", "b.txt");
	trace_record(t, TRACE_EVENT, 0, 0, 0, 0, 1, "v2", "x", NULL);
	check(trace_stop(t, &msg) == 0 && msg && strstr(msg, "5 records"), "stop: 5 records");
	free(msg);
	struct readback rb;
	check(p1 && read_back(p1, &rb) == 0 && rb.n == 5, "5 records read back");
	check(rb.r[0].op == TRACE_OPEN && rb.r[0].fh == 11 && rb.r[0].off == O_RDWR &&
	      strcmp(rb.name[0], "v1/dir/a.txt") == 0 && rb.r[0].pid == me && rb.r[0].tid == me,
	      "open: handle, flags, VIEW/PATH, pid from the tid");
	check(rb.r[1].op == TRACE_WRITE && rb.r[1].off == 4096 && rb.r[1].len == 100 &&
	      rb.r[1].result == 100 && rb.r[1].name_len == 0, "write: offset, length, result");
	check(rb.r[2].result == -5, "read: a negative errno kept");
	check(strcmp(rb.name[3], "v1/dir/a.txt>v1/b.txt") == 0, "rename: old and new names");
	check(rb.r[4].op == TRACE_EVENT && rb.r[4].pid == 0 && strcmp(rb.name[4], "v2/x") == 0,
	      "event: name, no process");
	bool mono = true;
	for (unsigned i = 1; i < rb.n; i++)
		mono &= rb.r[i].t >= rb.r[i - 1].t;
	check(mono, "times do not go back (one thread)");

	/* ---- a view filter ---- */
	check(trace_start(t, "v1", 0, &msg) == 0, "start --view v1");
	char *p2 = msg ? path_of(msg) : NULL;
	free(msg);
	trace_record(t, TRACE_OPEN, me, 21, 0, 0, 0, "v1", "in.txt", NULL);
	trace_record(t, TRACE_OPEN, me, 22, 0, 0, 0, "v2", "out.txt", NULL);
	trace_record(t, TRACE_READ, me, 21, 0, 10, 10, NULL, NULL, NULL);
	trace_record(t, TRACE_READ, me, 22, 0, 10, 10, NULL, NULL, NULL);
	trace_record(t, TRACE_RELEASE, me, 21, 0, 0, 0, NULL, NULL, NULL);
	trace_record(t, TRACE_READ, me, 21, 0, 10, 10, NULL, NULL, NULL);  /* reused: not v1 */
	trace_record(t, TRACE_UNLINK, me, 0, 0, 0, 0, "v2", "out.txt", NULL);
	trace_record(t, TRACE_UNLINK, me, 0, 0, 0, 0, "v1", "in.txt", NULL);
	trace_stop(t, &msg);
	free(msg);
	check(p2 && read_back(p2, &rb) == 0 && rb.n == 4 && rb.r[0].fh == 21 &&
	      rb.r[1].fh == 21 && rb.r[1].op == TRACE_READ && rb.r[2].op == TRACE_RELEASE &&
	      rb.r[3].op == TRACE_UNLINK && strcmp(rb.name[3], "v1/in.txt") == 0,
	      "view filter: v1's open, read, release and unlink only");

	/* ---- the bound ---- */
	uint64_t bound = sizeof(struct trace_header) + 4096 + 100;
	check(trace_start(t, NULL, bound, &msg) == 0, "start with a small bound");
	char *p3 = msg ? path_of(msg) : NULL;
	free(msg);
	for (int i = 0; i < 1000; i++)
		trace_record(t, TRACE_READ, me, 9, (uint64_t)i, 1, 1, NULL, NULL, NULL);
	check(!trace_on(t), "off once the bound is reached (no cost after)");
	status = trace_status(t);
	check(status && strncmp(status, "full", 4) == 0, "status: full");
	free(status);
	trace_stop(t, &msg);
	check(msg && strstr(msg, "bound was reached"), "stop says the bound was reached");
	free(msg);
	struct stat st;
	check(p3 && stat(p3, &st) == 0 && (uint64_t)st.st_size <= bound &&
	      (uint64_t)st.st_size + sizeof(struct trace_rec) > bound, "the file fills its bound, no more");
	check(trace_start(t, NULL, 100, &msg) == -EINVAL, "a bound below a header and a page: -EINVAL");
	free(msg);

	/* ---- threads ---- */
	check(trace_start(t, NULL, 0, &msg) == 0, "start for 4 threads");
	char *p4 = msg ? path_of(msg) : NULL;
	free(msg);
	pthread_t th[4];
	struct worker w = { t, 50000 };
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, worker_main, &w);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	trace_stop(t, &msg);
	check(msg && strstr(msg, " 200000 records") && !strstr(msg, "dropped"),
	      "4 threads x 50,000 records: all written, none dropped");
	free(msg);
	struct trace_file f;
	size_t pos = 0, n = 0;
	const char *name;
	if (p4 && trace_file_open(p4, &f, NULL) == 0) {
		while (trace_file_next(&f, &pos, &name))
			n++;
		trace_file_close(&f);
	}
	check(n == 200000, "and 200,000 read back");

	/* ---- the reader's refusals ---- */
	char bad[96];
	snprintf(bad, sizeof bad, "%s/bad", dir);
	FILE *bf = fopen(bad, "w");
	fputs("{\"not\": \"a trace, but long enough to hold the header of one: "
	      "............................................................\"}", bf);
	fclose(bf);
	const char *why = NULL;
	check(trace_file_open(bad, &f, &why) == -EINVAL && why && strstr(why, "magic"),
	      "not a trace: -EINVAL, bad magic");
	/* a record cut short at the end is not returned */
	if (p1 && truncate(p1, (off_t)(sizeof(struct trace_header) + 3 * 48 + 20)) == 0 &&
	    read_back(p1, &rb) == 0)
		check(rb.n == 3, "a record cut short at the end is ignored");
	else
		check(false, "a record cut short at the end is ignored");

	trace_free(t);
	free(p1);
	free(p2);
	free(p3);
	free(p4);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		failures++;
	printf("1..%d\n", tests);
	return failures ? 1 : 0;
}
