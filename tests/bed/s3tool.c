/*
 * s3tool — a command-line driver of the S3 client (sync/s3/s3_http.h), for the
 * integration tests (tests/integration/t_s3.sh) and measurements.
 *
 * Endpoint and credentials come from the environment: S3_ENDPOINT,
 * AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN), and S3_REGION or
 * AWS_DEFAULT_REGION; for https endpoints S3_CA_FILE (a CA bundle) or
 * S3_INSECURE (set: no certificate checks); S3_ADDRESSING=virtual for
 * virtual-hosted-style requests. On failure it prints "s3tool: OP: ERRNO-TEXT" to
 * stderr and exits with the errno number (ENOENT 2, EACCES 13, ESTALE 116,
 * EHOSTUNREACH 113), so tests can tell failures apart.
 *
 *   s3tool get [-t] [-i ETAG] BUCKET KEY [OFF [LEN]]  bytes to stdout as they
 *                                      arrive; no LEN: to the end (one
 *                                      request); -t: MiB/s
 *   s3tool head BUCKET KEY             size=, mtime_ns=, etag=, ctype=, meta.N=
 *   s3tool list [-l] [-c] BUCKET [PREFIX]  keys, one a line (-l: "size etag
 *                                      mtime_ns key"; -c: count and keys/s)
 *   s3tool put [-c CTYPE] [-m N=V]... BUCKET KEY FILE   prints the ETag
 *   s3tool copy [-R] [-m N=V]... BUCKET SRC DST  -m/-R: replace metadata
 *   s3tool delete BUCKET KEY
 *   s3tool check BUCKET
 *   s3tool par [-n THREADS] [-r ROUNDS] BUCKET KEY   THREADS threads share one
 *                                      client, each GETs and HEADs KEY ROUNDS
 *                                      times, every copy compared; prints req/s
 *   s3tool batch [-n THREADS] BUCKET   one request per line of stdin, on
 *                                      THREADS threads (tab-separated):
 *                                      "put KEY SIZE CTYPE META" (CTYPE "-":
 *                                      none; META "n=v;n=v" or "-"; SIZE at
 *                                      most 1 MiB of a fixed pattern) or
 *                                      "delete KEY"; prints "batch: N done,
 *                                      N failed", exits EIO if any failed
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/stats.h"
#include "sync/s3/s3_http.h"

#define MAX_META 64

struct tool {
	struct s3 *s3;
	struct stats st;
	bool timing, longfmt, count, replace;
	int threads, rounds;
	const char *if_match, *ctype;
	struct obj_kv meta[MAX_META];
	size_t n_meta;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int fail(const char *op, int err)
{
	fprintf(stderr, "s3tool: %s: %s\n", op, strerror(-err));
	return -err;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -errno;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int out_fd(void *ctx, const void *p, size_t n)
{
	return write_all(*(int *)ctx, p, n);
}

/* The body goes to stdout as it arrives (s3_get_stream): no buffer of the
 * object's size, so the tool runs at the speed of one GET, as curl does.
 * No LEN: one plain GET to the end (no HEAD first). */
static int cmd_get(struct tool *t, char **a, int n)
{
	if (n < 2)
		return fail("get", -EINVAL);
	uint64_t off = n > 2 ? strtoull(a[2], NULL, 10) : 0;
	uint64_t len = n > 3 ? strtoull(a[3], NULL, 10) : UINT64_MAX;
	int fd = 1;
	uint64_t got = 0;
	double t0 = now_s();
	int err = s3_get_stream(t->s3, a[0], a[1], off, len, t->if_match, out_fd, &fd, &got);
	double dt = now_s() - t0;
	if (err)
		return fail("get", err);
	if (t->timing)
		fprintf(stderr, "get: %" PRIu64 " bytes in %.3f s = %.1f MiB/s\n", got,
			dt, got / 1048576.0 / (dt > 0 ? dt : 1e-9));
	return 0;
}

static int cmd_head(struct tool *t, char **a, int n)
{
	if (n < 2)
		return fail("head", -EINVAL);
	struct obj_meta o;
	int err = s3_head(t->s3, a[0], a[1], &o);
	if (err)
		return fail("head", err);
	printf("size=%" PRIu64 "\nmtime_ns=%" PRId64 "\netag=%s\n", o.size,
	       o.mtime_ns, o.etag);
	if (o.flags & OBJ_HAS_CTYPE)
		printf("ctype=%s\n", o.content_type);
	for (size_t i = 0; i < o.n_meta; i++)
		printf("meta.%s=%s\n", o.meta[i].name, o.meta[i].value);
	obj_meta_release(&o);
	return 0;
}

static int list_one(void *ctx, const struct obj_meta *o)
{
	struct tool *t = ctx;
	if (!(o->flags & OBJ_FROM_SCAN))
		return -EPROTO;
	if (t->count)
		return 0;
	if (t->longfmt)
		printf("%" PRIu64 " %s %" PRId64 " %s\n", o->size, o->etag,
		       o->mtime_ns, o->key);
	else
		printf("%s\n", o->key);
	return 0;
}

static int list_count(void *ctx, const struct obj_meta *o)
{
	(void)o;
	(*(uint64_t *)ctx)++;
	return 0;
}

static int cmd_list(struct tool *t, char **a, int n)
{
	if (n < 1)
		return fail("list", -EINVAL);
	char token[4096] = "";
	bool more = true;
	uint64_t keys = 0, pages = 0;
	double t0 = now_s();
	while (more) {
		char next[4096];
		int err = t->count ?
			s3_list_page(t->s3, a[0], n > 1 ? a[1] : NULL, token,
				     list_count, &keys, next, sizeof next, &more) :
			s3_list_page(t->s3, a[0], n > 1 ? a[1] : NULL, token,
				     list_one, t, next, sizeof next, &more);
		if (err)
			return fail("list", err);
		memcpy(token, next, sizeof token);
		pages++;
	}
	double dt = now_s() - t0;
	if (t->count)
		printf("%" PRIu64 " keys, %" PRIu64 " pages, %.3f s, %.0f keys/s\n",
		       keys, pages, dt, keys / (dt > 0 ? dt : 1e-9));
	return 0;
}

static int cmd_put(struct tool *t, char **a, int n)
{
	if (n < 3)
		return fail("put", -EINVAL);
	int fd = open(a[2], O_RDONLY);
	if (fd < 0)
		return fail("put (open)", -errno);
	struct stat sb;
	fstat(fd, &sb);
	char etag[72];
	double t0 = now_s();
	int err = s3_put_file(t->s3, a[0], a[1], fd, (uint64_t)sb.st_size,
			      t->meta, t->n_meta, t->ctype, etag);
	double dt = now_s() - t0;
	close(fd);
	if (err)
		return fail("put", err);
	printf("%s\n", etag);
	if (t->timing)
		fprintf(stderr, "put: %jd bytes in %.3f s = %.1f MiB/s\n",
			(intmax_t)sb.st_size, dt,
			sb.st_size / 1048576.0 / (dt > 0 ? dt : 1e-9));
	return 0;
}

static int cmd_copy(struct tool *t, char **a, int n)
{
	if (n < 3)
		return fail("copy", -EINVAL);
	char etag[72];
	int err = s3_copy(t->s3, a[0], a[1], a[2],
			  t->replace || t->n_meta ? t->meta : NULL, t->n_meta,
			  NULL, etag);
	if (err)
		return fail("copy", err);
	printf("%s\n", etag);
	return 0;
}

static int cmd_delete(struct tool *t, char **a, int n)
{
	int err = n < 2 ? -EINVAL : s3_delete(t->s3, a[0], a[1]);
	return err ? fail("delete", err) : 0;
}

static int cmd_check(struct tool *t, char **a, int n)
{
	int err = n < 1 ? -EINVAL : s3_bucket_check(t->s3, a[0]);
	return err ? fail("check", err) : 0;
}

/* ---- multipart: mput, mcopy, mstart, mlist, mabort ---- */

static uint64_t parse_size_arg(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (*end == 'K' || *end == 'k')
		v <<= 10;
	else if (*end == 'M' || *end == 'm')
		v <<= 20;
	return v;
}

/* mput BUCKET KEY FILE PARTSIZE: the file as parts of PARTSIZE bytes. */
static int cmd_mput(struct tool *t, char **a, int n)
{
	if (n < 4 || parse_size_arg(a[3]) == 0)
		return fail("mput", -EINVAL);
	uint64_t psz = parse_size_arg(a[3]);
	int fd = open(a[2], O_RDONLY);
	if (fd < 0)
		return fail("mput (open)", -errno);
	struct stat sb;
	fstat(fd, &sb);
	uint64_t size = (uint64_t)sb.st_size;
	size_t np = size ? (size_t)((size + psz - 1) / psz) : 1;
	struct s3_part *parts = calloc(np, sizeof *parts);
	char id[1024], etag[72];
	int err = parts ? s3_mpu_create(t->s3, a[0], a[1], t->meta, t->n_meta,
					 t->ctype, id, sizeof id) : -ENOMEM;
	for (size_t i = 0; !err && i < np; i++) {
		uint64_t off = i * psz;
		uint64_t len = size - off < psz ? size - off : psz;
		parts[i].number = (unsigned)i + 1;
		err = s3_mpu_put_part(t->s3, a[0], a[1], id, parts[i].number, fd,
				      off, len, parts[i].etag);
	}
	if (!err)
		err = s3_mpu_complete(t->s3, a[0], a[1], id, parts, np, etag);
	else if (parts)
		s3_mpu_abort(t->s3, a[0], a[1], id);
	close(fd);
	free(parts);
	if (err)
		return fail("mput", err);
	printf("%s\n", etag);
	return 0;
}

/* mcopy BUCKET SRC DST PARTSIZE: a server-side copy in parts (-i ETAG:
 * only of that version of SRC); the metadata of -m options, or none. */
static int cmd_mcopy(struct tool *t, char **a, int n)
{
	if (n < 4 || parse_size_arg(a[3]) == 0)
		return fail("mcopy", -EINVAL);
	uint64_t psz = parse_size_arg(a[3]);
	struct obj_meta src = { 0 };
	int err = s3_head(t->s3, a[0], a[1], &src);
	if (err)
		return fail("mcopy (head)", err);
	size_t np = src.size ? (size_t)((src.size + psz - 1) / psz) : 1;
	struct s3_part *parts = calloc(np, sizeof *parts);
	char id[1024], etag[72];
	err = parts ? s3_mpu_create(t->s3, a[0], a[2], t->meta, t->n_meta,
				    src.content_type, id, sizeof id) : -ENOMEM;
	for (size_t i = 0; !err && i < np; i++) {
		uint64_t off = i * psz;
		uint64_t len = src.size - off < psz ? src.size - off : psz;
		parts[i].number = (unsigned)i + 1;
		err = s3_mpu_copy_part(t->s3, a[0], a[2], id, parts[i].number,
				       a[1], t->if_match, off, len,
				       parts[i].etag);
	}
	if (!err)
		err = s3_mpu_complete(t->s3, a[0], a[2], id, parts, np, etag);
	else if (parts)
		s3_mpu_abort(t->s3, a[0], a[2], id);
	obj_meta_release(&src);
	free(parts);
	if (err)
		return fail("mcopy", err);
	printf("%s\n", etag);
	return 0;
}

/* mstart BUCKET KEY: begin an upload and leave it open; prints its id. */
static int cmd_mstart(struct tool *t, char **a, int n)
{
	char id[1024];
	int err = n < 2 ? -EINVAL : s3_mpu_create(t->s3, a[0], a[1], t->meta,
						   t->n_meta, t->ctype, id,
						   sizeof id);
	if (err)
		return fail("mstart", err);
	printf("%s\n", id);
	return 0;
}

static int print_upload(void *ctx, const char *key, const char *id,
			int64_t initiated_ns)
{
	(void)ctx;
	printf("%s\t%s\t%s\n", key, id, initiated_ns > 0 ? "dated" : "undated");
	return 0;
}

/* mlist BUCKET [PREFIX]: one "KEY<TAB>ID<TAB>dated" line per open upload. */
static int cmd_mlist(struct tool *t, char **a, int n)
{
	int err = n < 1 ? -EINVAL : s3_mpu_list(t->s3, a[0], n > 1 ? a[1] : NULL,
						print_upload, NULL);
	return err ? fail("mlist", err) : 0;
}

/* mabort BUCKET KEY ID */
static int cmd_mabort(struct tool *t, char **a, int n)
{
	int err = n < 3 ? -EINVAL : s3_mpu_abort(t->s3, a[0], a[1], a[2]);
	return err ? fail("mabort", err) : 0;
}

struct par_job {
	struct tool *t;
	const char *bucket, *key;
	const char *want;
	size_t size;
	int bad, failed;
};

static void *par_main(void *arg)
{
	struct par_job *j = arg;
	char *buf = malloc(j->size ? j->size : 1);
	for (int r = 0; buf && r < j->t->rounds; r++) {
		size_t got = 0;
		struct obj_meta o;
		if (s3_get(j->t->s3, j->bucket, j->key, 0, j->size, NULL, buf, &got))
			j->failed++;
		else if (got != j->size || memcmp(buf, j->want, got) != 0)
			j->bad++;
		if (s3_head(j->t->s3, j->bucket, j->key, &o))
			j->failed++;
		else if (o.size != j->size)
			j->bad++;
		obj_meta_release(&o);
	}
	if (!buf)
		j->failed++;
	free(buf);
	return NULL;
}

static int cmd_par(struct tool *t, char **a, int n)
{
	if (n < 2 || t->threads < 1 || t->threads > 256 || t->rounds < 1)
		return fail("par", -EINVAL);
	struct obj_meta o;
	int err = s3_head(t->s3, a[0], a[1], &o);
	if (err)
		return fail("par (head)", err);
	size_t size = o.size, got = 0;
	obj_meta_release(&o);
	char *want = malloc(size ? size : 1);
	if (!want)
		return fail("par", -ENOMEM);
	err = s3_get(t->s3, a[0], a[1], 0, size, NULL, want, &got);
	if (err || got != size) {
		free(want);
		return fail("par (get)", err ? err : -EIO);
	}
	struct par_job jobs[256];
	pthread_t th[256];
	double t0 = now_s();
	for (int i = 0; i < t->threads; i++) {
		jobs[i] = (struct par_job){ .t = t, .bucket = a[0], .key = a[1],
					    .want = want, .size = size };
		pthread_create(&th[i], NULL, par_main, &jobs[i]);
	}
	int bad = 0, failed = 0;
	for (int i = 0; i < t->threads; i++) {
		pthread_join(th[i], NULL);
		bad += jobs[i].bad;
		failed += jobs[i].failed;
	}
	double dt = now_s() - t0;
	long reqs = 2L * t->threads * t->rounds;
	printf("par: %d threads, %ld requests in %.3f s = %.0f req/s, %d failed, "
	       "%d wrong\n", t->threads, reqs, dt, reqs / (dt > 0 ? dt : 1e-9),
	       failed, bad);
	free(want);
	return bad || failed ? EIO : 0;
}

/* ---- batch --------------------------------------------------------- */

#define BATCH_BODY_MAX (1u << 20)

struct batch {
	struct tool *t;
	const char *bucket;
	char **lines;
	size_t n_lines;
	int body_fd;
	pthread_mutex_t lock;
	size_t next, done, failed;
};

/* One line, split in place at tabs: 0 or a negative errno. */
static int batch_line(struct batch *b, char *line)
{
	char *f[5];
	int nf = 0;
	for (char *p = line; nf < 5; nf++) {
		f[nf] = p;
		p = strchr(p, '\t');
		if (!p) {
			nf++;
			break;
		}
		*p++ = '\0';
	}
	if (nf == 2 && strcmp(f[0], "delete") == 0)
		return s3_delete(b->t->s3, b->bucket, f[1]);
	if (nf != 5 || strcmp(f[0], "put") != 0)
		return -EINVAL;
	uint64_t size = strtoull(f[2], NULL, 10);
	if (size > BATCH_BODY_MAX)
		return -EFBIG;
	struct obj_kv meta[MAX_META];
	size_t n_meta = 0;
	char *save = NULL;
	for (char *kv = strcmp(f[4], "-") ? strtok_r(f[4], ";", &save) : NULL;
	     kv; kv = strtok_r(NULL, ";", &save)) {
		char *eq = strchr(kv, '=');
		if (!eq || n_meta == MAX_META)
			return -EINVAL;
		*eq = '\0';
		meta[n_meta++] = (struct obj_kv){ .name = kv, .value = eq + 1 };
	}
	char etag[72];
	return s3_put_file(b->t->s3, b->bucket, f[1], b->body_fd, size, meta,
			   n_meta, strcmp(f[3], "-") ? f[3] : NULL, etag);
}

static void *batch_main(void *arg)
{
	struct batch *b = arg;
	for (;;) {
		pthread_mutex_lock(&b->lock);
		size_t i = b->next < b->n_lines ? b->next++ : SIZE_MAX;
		pthread_mutex_unlock(&b->lock);
		if (i == SIZE_MAX)
			return NULL;
		char *copy = strdup(b->lines[i]);
		int err = copy ? batch_line(b, copy) : -ENOMEM;
		if (err)
			fprintf(stderr, "s3tool: batch: line %zu (%s): %s\n", i + 1,
				b->lines[i], strerror(-err));
		free(copy);
		pthread_mutex_lock(&b->lock);
		if (err)
			b->failed++;
		else
			b->done++;
		pthread_mutex_unlock(&b->lock);
	}
}

static int cmd_batch(struct tool *t, char **a, int n)
{
	if (n < 1 || t->threads < 1 || t->threads > 256)
		return fail("batch", -EINVAL);
	struct batch b = { .t = t, .bucket = a[0], .body_fd = -1 };
	pthread_mutex_init(&b.lock, NULL);
	size_t cap = 0;
	char *line = NULL;
	size_t lcap = 0;
	ssize_t len;
	int err = 0;
	while ((len = getline(&line, &lcap, stdin)) >= 0) {
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (!len)
			continue;
		if (b.n_lines == cap) {
			cap = cap ? 2 * cap : 1024;
			char **nl = realloc(b.lines, cap * sizeof *nl);
			if (!nl) {
				err = -ENOMEM;
				break;
			}
			b.lines = nl;
		}
		if (!(b.lines[b.n_lines] = strdup(line))) {
			err = -ENOMEM;
			break;
		}
		b.n_lines++;
	}
	free(line);
	char *body = malloc(BATCH_BODY_MAX);
	if (!err && body) {
		for (size_t i = 0; i < BATCH_BODY_MAX; i++)
			body[i] = (char)('a' + i % 26);
		b.body_fd = memfd_create("s3tool-batch", 0);
		if (b.body_fd < 0 || write_all(b.body_fd, body, BATCH_BODY_MAX))
			err = -EIO;
	} else if (!err) {
		err = -ENOMEM;
	}
	free(body);
	pthread_t th[256];
	int started = 0;
	for (; !err && started < t->threads; started++)
		if (pthread_create(&th[started], NULL, batch_main, &b))
			break;
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	for (size_t i = 0; i < b.n_lines; i++)
		free(b.lines[i]);
	free(b.lines);
	if (b.body_fd >= 0)
		close(b.body_fd);
	pthread_mutex_destroy(&b.lock);
	if (err)
		return fail("batch", err);
	printf("batch: %zu done, %zu failed\n", b.done, b.failed);
	return b.failed ? EIO : 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: s3tool get|head|list|put|copy|delete|check|par|batch|"
		"mput|mcopy|mstart|mlist|mabort "
		"[options] BUCKET ... (see tests/bed/s3tool.c)\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct tool t = { .threads = 8, .rounds = 100 };
	if (argc < 2)
		return usage();
	const char *cmd = argv[1];
	int opt;
	optind = 2;
	while ((opt = getopt(argc, argv, "tlcRi:m:C:n:r:")) != -1) {
		switch (opt) {
		case 't': t.timing = true; break;
		case 'l': t.longfmt = true; break;
		case 'c':
			if (strcmp(cmd, "list") == 0)
				t.count = true;
			else
				return usage();
			break;
		case 'C': t.ctype = optarg; break;
		case 'R': t.replace = true; break;
		case 'i': t.if_match = optarg; break;
		case 'n': t.threads = atoi(optarg); break;
		case 'r': t.rounds = atoi(optarg); break;
		case 'm': {
			char *eq = strchr(optarg, '=');
			if (!eq || t.n_meta == MAX_META)
				return usage();
			*eq = '\0';
			t.meta[t.n_meta].name = optarg;
			t.meta[t.n_meta].value = eq + 1;
			t.n_meta++;
			break;
		}
		default:
			return usage();
		}
	}
	const char *ep = getenv("S3_ENDPOINT");
	const char *region = getenv("S3_REGION");
	if (!region)
		region = getenv("AWS_DEFAULT_REGION");
	struct s3_conf c = {
		.endpoint = ep, .region = region,
		.access_key = getenv("AWS_ACCESS_KEY_ID"),
		.secret_key = getenv("AWS_SECRET_ACCESS_KEY"),
		.session_token = getenv("AWS_SESSION_TOKEN"),
		.ca_file = getenv("S3_CA_FILE"),
		.insecure = getenv("S3_INSECURE") != NULL,
		.virtual_host = getenv("S3_ADDRESSING") &&
				strcmp(getenv("S3_ADDRESSING"), "virtual") == 0,
	};
	log_init("s3tool", getenv("S3TOOL_DEBUG") ? 2 : 0);
	stats_init(&t.st);
	int err = s3_http_new(&c, &t.st, &t.s3);
	if (err) {
		fprintf(stderr, "s3tool: set S3_ENDPOINT, AWS_ACCESS_KEY_ID, "
			"AWS_SECRET_ACCESS_KEY\n");
		return -err;
	}
	char **a = argv + optind;
	int n = argc - optind, rc;
	if (strcmp(cmd, "get") == 0)
		rc = cmd_get(&t, a, n);
	else if (strcmp(cmd, "head") == 0)
		rc = cmd_head(&t, a, n);
	else if (strcmp(cmd, "list") == 0)
		rc = cmd_list(&t, a, n);
	else if (strcmp(cmd, "put") == 0)
		rc = cmd_put(&t, a, n);
	else if (strcmp(cmd, "copy") == 0)
		rc = cmd_copy(&t, a, n);
	else if (strcmp(cmd, "delete") == 0)
		rc = cmd_delete(&t, a, n);
	else if (strcmp(cmd, "check") == 0)
		rc = cmd_check(&t, a, n);
	else if (strcmp(cmd, "batch") == 0)
		rc = cmd_batch(&t, a, n);
	else if (strcmp(cmd, "par") == 0)
		rc = cmd_par(&t, a, n);
	else if (strcmp(cmd, "mput") == 0)
		rc = cmd_mput(&t, a, n);
	else if (strcmp(cmd, "mcopy") == 0)
		rc = cmd_mcopy(&t, a, n);
	else if (strcmp(cmd, "mstart") == 0)
		rc = cmd_mstart(&t, a, n);
	else if (strcmp(cmd, "mlist") == 0)
		rc = cmd_mlist(&t, a, n);
	else if (strcmp(cmd, "mabort") == 0)
		rc = cmd_mabort(&t, a, n);
	else
		rc = usage();
	fflush(stdout);
	if (getenv("S3TOOL_STATS"))
		fprintf(stderr, "stats: get=%ju head=%ju list=%ju put=%ju "
			"copy=%ju delete=%ju errors=%ju retries=%ju read=%ju\n",
			(uintmax_t)stats_value(&t.st, "s3", "get"),
			(uintmax_t)stats_value(&t.st, "s3", "head"),
			(uintmax_t)stats_value(&t.st, "s3", "list"),
			(uintmax_t)stats_value(&t.st, "s3", "put"),
			(uintmax_t)stats_value(&t.st, "s3", "copy"),
			(uintmax_t)stats_value(&t.st, "s3", "delete"),
			(uintmax_t)stats_value(&t.st, "s3", "errors"),
			(uintmax_t)stats_value(&t.st, "s3", "retries"),
			(uintmax_t)stats_value(&t.st, "s3", "bytes_read"));
	s3_free(t.s3);
	stats_release(&t.st);
	return rc;
}
