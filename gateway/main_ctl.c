/* main_ctl.c — the facetfs commands that talk to a running mount through
 * its .facetfs/ files (main_int.h): status, rescan, trace, sync, wait. */
#include "gateway/main_int.h"

#include "common/file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define META_FILE_MAX (16u << 20)   /* .facetfs/stats, views: a few KiB each */

static const char status_help[] =
	"usage: facetfs status MOUNTPOINT [--json]\n"
	"  Counters, Kafka lag, scan progress and event-to-visible latency of\n"
	"  the gateway mounted at MOUNTPOINT (read from MOUNTPOINT/.facetfs/).\n"
	"  --json                print {\"stats\":...,\"views\":...} instead\n"
	"  -h, --help            this text\n";

static const char rescan_help[] =
	"usage: facetfs rescan MOUNTPOINT [VIEW]\n"
	"  Ask the gateway mounted at MOUNTPOINT to list the bucket(s) of VIEW\n"
	"  (of every view without it) again and reconcile its index; prints\n"
	"  what was fixed. Exit 1 if a bucket could not be reconciled.\n"
	"  -h, --help            this text\n";

static const char sync_help[] =
	"usage: facetfs sync MOUNTPOINT [PATH...]\n"
	"  Publish what the write-back views of the gateway mounted at MOUNTPOINT\n"
	"  hold pending (closed files not in S3 yet): everything, or what is under\n"
	"  each PATH (a view, a directory or a file of the mount, given inside\n"
	"  MOUNTPOINT or relative to it). Returns once S3 has it all (exit 0), or\n"
	"  exits 1 naming each key that failed and why (it stays pending). On a\n"
	"  terminal, prints the files and bytes left while it waits.\n"
	"  -h, --help            this text\n";

static const char wait_help[] =
	"usage: facetfs wait MOUNTPOINT [VIEW...] [--probe] [--timeout SECONDS]\n"
	"  A barrier between S3 clients and the mount: asks Kafka for the end of\n"
	"  every partition the gateway mounted at MOUNTPOINT reads, and returns\n"
	"  once the gateway has applied every event up to there and told the\n"
	"  kernel, and each VIEW named has finished its scan. An object whose\n"
	"  PUT returned before the call (and whose event reached Kafka by then)\n"
	"  is then in the mount. Exit 0; exit 1 with what is missing when\n"
	"  SECONDS pass (default 30).\n"
	"  --probe               first PUT an empty object of the gateway's own\n"
	"                        (.facetfs-probe/...) into each bucket of the views\n"
	"                        (named, or all) and wait for its event, then DELETE\n"
	"                        it: fails if the event path (notification, bridge,\n"
	"                        topic) is broken. Needs write access to the buckets.\n"
	"  --timeout SECONDS     how long to wait (0 to 86400)\n"
	"  -h, --help            this text\n";

static const char trace_help[] =
	"usage: facetfs trace MOUNTPOINT start [--view VIEW] [--max-bytes N] | stop | status\n"
	"  Record every open, read, write, fsync, close, truncate, rename and unlink\n"
	"  on the mount's files (or one view's), with process and thread ids, times,\n"
	"  offsets, lengths and results, and the apply time of each S3 event that\n"
	"  changed a file, into STATE_DIR/traces/ (no data bytes). Recording stops\n"
	"  at --max-bytes (default 1 GiB; suffixes K, M, G). Feed the file to\n"
	"  `facetfs advise` and `facetfs replay`.\n"
	"  -h, --help            this text\n";

/* Read a whole .facetfs/ file of a mount. */
static char *read_meta(const char *mountpoint, const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/.facetfs/%s", mountpoint, name);
	char *buf;
	int rc = file_read_all(path, META_FILE_MAX, &buf, NULL);
	if (rc == -EFBIG)
		fprintf(stderr, "facetfs: %s: larger than %u bytes\n", path, META_FILE_MAX);
	else if (rc < 0)
		fprintf(stderr, "facetfs: %s: %s (is a facetfs gateway mounted there?)\n",
			path, strerror(-rc));
	return buf;
}

static double num(const cJSON *o, const char *a, const char *b)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
	if (b)
		x = cJSON_GetObjectItemCaseSensitive(x, b);
	return cJSON_IsNumber(x) ? x->valuedouble : 0;
}

int cmd_status(int argc, char **argv)
{
	bool json = false;
	const char *mp = NULL;
	for (int i = 1; i < argc; i++) {
		if (is_help(argv[i])) {
			fputs(status_help, stdout);
			return 0;
		} else if (strcmp(argv[i], "--json") == 0) {
			json = true;
		} else if (argv[i][0] == '-' || mp) {
			fprintf(stderr, "facetfs status: unexpected argument \"%s\"\n", argv[i]);
			return usage_of(status_help);
		} else {
			mp = argv[i];
		}
	}
	if (!mp)
		return usage_of(status_help);
	char *stats = read_meta(mp, "stats");
	if (!stats)
		return 1;
	char *views = read_meta(mp, "views");
	if (json) {
		printf("{\"stats\":%s,\"views\":%s}\n", stats, views ? views : "null");
		free(stats);
		free(views);
		return 0;
	}
	cJSON *s = cJSON_Parse(stats), *v = views ? cJSON_Parse(views) : NULL;
	if (!s) {
		fprintf(stderr, "facetfs status: %s/.facetfs/stats is not JSON\n", mp);
		free(stats);
		free(views);
		return 1;
	}
	printf("events    consumed %.0f  applied %.0f  ignored %.0f  malformed %.0f\n",
	       num(s, "events", "consumed"), num(s, "events", "applied"),
	       num(s, "events", "ignored"), num(s, "events", "malformed"));
	printf("kafka     partitions assigned %.0f  lag ", num(s, "kafka", "partitions_assigned"));
	const cJSON *lag = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(s, "kafka"), "lag");
	int nlag = 0;
	for (const cJSON *p = lag ? lag->child : NULL; p; p = p->next, nlag++)
		printf("%s %.0f  ", p->string, p->valuedouble);
	printf("%s\n", nlag ? "" : "(not measured yet)");
	printf("s3        list %.0f  head %.0f  get_tagging %.0f  get %.0f  put %.0f  copy %.0f  "
	       "delete %.0f  errors %.0f\n",
	       num(s, "s3", "list"), num(s, "s3", "head"), num(s, "s3", "get_tagging"),
	       num(s, "s3", "get"), num(s, "s3", "put"), num(s, "s3", "copy"),
	       num(s, "s3", "delete"), num(s, "s3", "errors"));
	printf("scans     running %.0f  completed %.0f  objects listed %.0f\n",
	       num(s, "scans", "running"), num(s, "scans", "completed"),
	       num(s, "scans", "objects"));
	printf("fuse      lookup %.0f  getattr %.0f  readdir %.0f  read %.0f\n",
	       num(s, "fuse", "lookup"), num(s, "fuse", "getattr"),
	       num(s, "fuse", "readdir"), num(s, "fuse", "read"));
	/* Events from before the consumer's assignment are not latencies. */
	printf("latency   event->visible ms: count %.0f  p50 %.3f  p99 %.3f  max %.3f  "
	       "(backlog of %.0f not counted)\n",
	       num(s, "visible_latency_ms", "count"), num(s, "visible_latency_ms", "p50"),
	       num(s, "visible_latency_ms", "p99"), num(s, "visible_latency_ms", "max"),
	       num(s, "events", "backlog"));
	printf("latency   S3 request ms: count %.0f  p50 %.3f  p99 %.3f  max %.3f  total %.0f\n",
	       num(s, "s3_latency_ms", "count"), num(s, "s3_latency_ms", "p50"),
	       num(s, "s3_latency_ms", "p99"), num(s, "s3_latency_ms", "max"),
	       num(s, "s3_latency_ms", "total"));
	double hits = num(s, "cache", "hits"), misses = num(s, "cache", "misses");
	printf("cache     used %.0f of %.0f bytes (staged %.0f)  blocks %.0f  hits %.0f  "
	       "misses %.0f  hit ratio %s%.1f%s  evictions %.0f  corrupt %.0f\n",
	       num(s, "cache", "used_bytes"), num(s, "cache", "max_bytes"),
	       num(s, "cache", "staged_bytes"), num(s, "cache", "blocks"), hits, misses,
	       hits + misses > 0 ? "" : "(none yet) ",
	       hits + misses > 0 ? 100.0 * hits / (hits + misses) : 0.0,
	       hits + misses > 0 ? " %" : "",
	       num(s, "cache", "evictions"), num(s, "cache", "corrupt"));
	if (cJSON_GetObjectItemCaseSensitive(s, "drain"))
		printf("drain     pending %.0f files, %.0f bytes  oldest %.0f s  uploading %.0f  "
		       "done %.0f (%.0f bytes)  failed %.0f  conflicts %.0f  %.1f MiB/s\n",
		       num(s, "drain", "pending_files"), num(s, "drain", "pending_bytes"),
		       num(s, "drain", "oldest_seconds"), num(s, "drain", "uploading"),
		       num(s, "drain", "done"), num(s, "drain", "done_bytes"),
		       num(s, "drain", "failed"), num(s, "drain", "conflicts"),
		       num(s, "drain", "bytes_per_second") / 1048576.0);
	const cJSON *warm = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(s, "cache"), "warm");
	if (warm)
		printf("warm      fetched %.0f  used %.0f blocks  wasted %.0f blocks  skipped %.0f  "
		       "queued %.0f\n", num(warm, "fetched", NULL), num(warm, "used", NULL),
		       num(warm, "wasted", NULL), num(warm, "skipped", NULL),
		       num(warm, "queued", NULL));
	const double mib = 1024.0 * 1024.0;
	printf("memory    RSS %.1f MiB  inodes %.0f (%.1f MiB)  dir handles %.0f (%.1f MiB)  "
	       "index cache %.1f MiB  key filter %.1f MiB  read-ahead %.1f MiB\n",
	       num(s, "memory", "rss_bytes") / mib, num(s, "memory", "inodes"),
	       num(s, "memory", "inode_bytes") / mib, num(s, "memory", "dir_handles"),
	       num(s, "memory", "dir_bytes") / mib, num(s, "memory", "index_cache_bytes") / mib,
	       num(s, "memory", "index_filter_bytes") / mib,
	       num(s, "memory", "readahead_bytes") / mib);
	const cJSON *probe = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(s, "store"), "cond_probe");
	if (cJSON_IsString(probe) && strcmp(probe->valuestring, "done") == 0)
		printf("store     conditional PUT: If-None-Match %s, If-Match %s\n",
		       num(s, "store", "if_none_match") ? "yes" : "no",
		       num(s, "store", "if_match") ? "yes" : "no");
	else if (cJSON_IsString(probe))
		printf("store     conditional PUT: not probed (%s): none sent\n",
		       probe->valuestring);
	const cJSON *cs = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(s, "credentials"), "source");
	if (cJSON_IsString(cs)) {
		double exp = num(s, "credentials", "expires");
		char when[64] = "";
		time_t t = (time_t)exp;
		struct tm tm;
		if (exp > 0 && gmtime_r(&t, &tm))
			strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
		if (when[0])
			printf("creds     from %s, expire %s (in %.0f s)\n", cs->valuestring,
			       when, exp - (double)time(NULL));
		else
			printf("creds     from %s, do not expire\n", cs->valuestring);
	}
	printf("keys      not mappable to a path: %.0f\n", num(s, "keys", "not_a_path"));
	const cJSON *rl = cJSON_GetObjectItemCaseSensitive(v, ".reloads");
	if (rl)
		printf("views     reloads %.0f  last %.1f ms  max %.1f ms\n", num(rl, "count", NULL),
		       num(rl, "last_ms", NULL), num(rl, "max_ms", NULL));
	for (const cJSON *x = v ? v->child : NULL; x; x = x->next) {
		if (x->string && x->string[0] == '.')
			continue;    /* .errors, .reloads: not views */
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(x, "state");
		const cJSON *vis = cJSON_GetObjectItemCaseSensitive(x, "visibility");
		printf("view %-20s %-9s objects %.0f  %s%s", x->string,
		       cJSON_IsString(st) ? st->valuestring : "?", num(x, "objects", NULL),
		       cJSON_IsString(vis) ? vis->valuestring : "?",
		       cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(x, "warm")) ? ", warm" : "");
		const cJSON *bs = cJSON_GetObjectItemCaseSensitive(x, "buckets");
		for (const cJSON *b = bs ? bs->child : NULL; b; b = b->next) {
			const cJSON *nm = cJSON_GetObjectItemCaseSensitive(b, "name");
			const cJSON *sc = cJSON_GetObjectItemCaseSensitive(b, "scan");
			printf("  [%s: %s, %.0f listed]", cJSON_IsString(nm) ? nm->valuestring : "?",
			       cJSON_IsString(sc) ? sc->valuestring : "?",
			       num(b, "scanned_objects", NULL));
		}
		printf("\n");
		/* How fresh: "fresh as of 12:00:01.234 (UTC), 3 ms behind", or why
		 * not known ("scanning", "partitions 3 of 4 assigned"). */
		const cJSON *fa = cJSON_GetObjectItemCaseSensitive(x, "fresh_as_of");
		const cJSON *fr = cJSON_GetObjectItemCaseSensitive(x, "freshness");
		if (cJSON_IsString(fa) && strlen(fa->valuestring) >= 23)
			printf("     %-20s fresh as of %.12s (UTC), %.0f ms behind\n", "",
			       fa->valuestring + 11, num(x, "staleness_ms", NULL));
		else if (cJSON_IsString(fr))
			printf("     %-20s fresh as of: not known (%s)\n", "", fr->valuestring);
	}
	cJSON_Delete(s);
	cJSON_Delete(v);
	free(stats);
	free(views);
	return 0;
}

/* Write one command to MOUNTPOINT/.facetfs/control and print the answer;
 * 1 when it begins with "error". */
static int control_call(const char *prog, const char *mountpoint, const char *cmd)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/.facetfs/control", mountpoint);
	size_t n = strlen(cmd);
	int fd = open(path, O_RDWR);
	if (fd < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
		return 1;
	}
	if (write(fd, cmd, n) != (ssize_t)n) {
		fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
		close(fd);
		return 1;
	}
	char answer[65536];
	ssize_t got = pread(fd, answer, sizeof answer - 1, 0);
	close(fd);
	if (got < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
		return 1;
	}
	answer[got] = '\0';
	fputs(answer, stdout);
	return strncmp(answer, "error", 5) == 0 ? 1 : 0;
}

int cmd_trace(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (is_help(argv[i])) {
			fputs(trace_help, stdout);
			return 0;
		}
	if (argc < 3)
		return usage_of(trace_help);
	const char *mp = argv[1], *verb = argv[2];
	char cmd[1024];
	if (strcmp(verb, "stop") == 0 || strcmp(verb, "status") == 0) {
		if (argc != 3)
			return usage_of(trace_help);
		snprintf(cmd, sizeof cmd, "trace %s\n", verb);
		return control_call("facetfs trace", mp, cmd);
	}
	if (strcmp(verb, "start") != 0) {
		fprintf(stderr, "facetfs trace: unknown action \"%s\" (start, stop, status)\n", verb);
		return usage_of(trace_help);
	}
	const char *view = NULL, *max = NULL;
	for (int i = 3; i < argc; i++) {
		if (strcmp(argv[i], "--view") == 0 && i + 1 < argc) {
			view = argv[++i];
		} else if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc) {
			max = argv[++i];
		} else {
			fprintf(stderr, "facetfs trace: unexpected argument \"%s\"\n", argv[i]);
			return usage_of(trace_help);
		}
	}
	if ((view && strpbrk(view, " \n")) || (max && strpbrk(max, " \n"))) {
		fprintf(stderr, "facetfs trace: a view name or size with a space or newline\n");
		return 2;
	}
	snprintf(cmd, sizeof cmd, "trace start%s%s%s%s\n", view ? " --view " : "",
		 view ? view : "", max ? " --max-bytes " : "", max ? max : "");
	return control_call("facetfs trace", mp, cmd);
}

int cmd_rescan(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (is_help(argv[i])) {
			fputs(rescan_help, stdout);
			return 0;
		}
		if (argv[i][0] == '-') {
			fprintf(stderr, "facetfs rescan: unknown option \"%s\"\n", argv[i]);
			return usage_of(rescan_help);
		}
	}
	if (argc < 2 || argc > 3)
		return usage_of(rescan_help);
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rescan%s%s\n", argc == 3 ? " " : "",
		 argc == 3 ? argv[2] : "");
	return control_call("facetfs rescan", argv[1], cmd);
}

/* One `sync` control call, run by a thread while the caller shows the
 * drain's progress. */
struct sync_call {
	const char *mountpoint;
	char cmd[4200];
	int rc;
	atomic_bool done;
};

static void *sync_call_main(void *arg)
{
	struct sync_call *sc = arg;
	sc->rc = control_call("facetfs sync", sc->mountpoint, sc->cmd);
	sc->done = true;
	return NULL;
}

/* The drain's pending files and bytes from MOUNTPOINT/.facetfs/stats. */
static bool drain_left(const char *mountpoint, double *files, double *bytes)
{
	char path[4096], *text = NULL;
	size_t len = 0;
	snprintf(path, sizeof path, "%s/.facetfs/stats", mountpoint);
	if (file_read_all(path, 1 << 24, &text, &len) != 0)
		return false;
	cJSON *s = cJSON_Parse(text);
	free(text);
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(s, "drain");
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(d, "pending_files");
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(d, "pending_bytes");
	bool ok = cJSON_IsNumber(f) && cJSON_IsNumber(b);
	if (ok) {
		*files = f->valuedouble;
		*bytes = b->valuedouble;
	}
	cJSON_Delete(s);
	return ok;
}

int cmd_wait(int argc, char **argv)
{
	const char *mp = NULL;
	double timeout = 30;
	bool probe = false;
	char views[4000] = "";
	size_t at = 0;
	for (int i = 1; i < argc; i++)
		if (is_help(argv[i])) {
			fputs(wait_help, stdout);
			return 0;
		}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--timeout") == 0) {
			char *end = NULL;
			if (i + 1 >= argc) {
				fprintf(stderr, "facetfs wait: --timeout needs SECONDS\n");
				return usage_of(wait_help);
			}
			timeout = strtod(argv[++i], &end);
			if (!*argv[i] || *end || !(timeout >= 0 && timeout <= 86400)) {
				fprintf(stderr, "facetfs wait: --timeout \"%s\": SECONDS from 0 "
					"to 86400\n", argv[i]);
				return usage_of(wait_help);
			}
		} else if (strcmp(argv[i], "--probe") == 0) {
			probe = true;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "facetfs wait: unknown option \"%s\"\n", argv[i]);
			return usage_of(wait_help);
		} else if (!mp) {
			mp = argv[i];
		} else if (strchr(argv[i], ' ') || strchr(argv[i], '\n')) {
			fprintf(stderr, "facetfs wait: \"%s\" is not a view name\n", argv[i]);
			return usage_of(wait_help);
		} else {
			int n = snprintf(views + at, sizeof views - at, " %s", argv[i]);
			if (n < 0 || (size_t)n >= sizeof views - at) {
				fprintf(stderr, "facetfs wait: too many views\n");
				return usage_of(wait_help);
			}
			at += (size_t)n;
		}
	}
	if (!mp)
		return usage_of(wait_help);
	char cmd[4100];
	snprintf(cmd, sizeof cmd, "wait %ld%s%s\n", (long)(timeout * 1000),
		 probe ? " --probe" : "", views);
	return control_call("facetfs wait", mp, cmd);
}

int cmd_sync(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (is_help(argv[i])) {
			fputs(sync_help, stdout);
			return 0;
		}
		if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "facetfs sync: unknown option \"%s\"\n", argv[i]);
			return usage_of(sync_help);
		}
	}
	if (argc < 2)
		return usage_of(sync_help);
	const char *mp = argv[1];
	char real_mp[4096];
	if (!realpath(mp, real_mp)) {
		fprintf(stderr, "facetfs sync: %s: %s\n", mp, strerror(errno));
		return 1;
	}
	bool tty = isatty(2);
	int rc = 0;
	for (int i = 2; i == 2 || i < argc; i++) {
		struct sync_call sc = { .mountpoint = mp };
		const char *rel = NULL;
		char real_p[4096];
		if (i < argc) {
			/* inside the mount: absolute (resolved), or relative to it */
			rel = argv[i];
			if (argv[i][0] == '/' || !strncmp(argv[i], "./", 2)) {
				size_t n = strlen(real_mp);
				if (!realpath(argv[i], real_p) || strncmp(real_p, real_mp, n) ||
				    (real_p[n] && real_p[n] != '/')) {
					fprintf(stderr, "facetfs sync: %s is not inside %s\n",
						argv[i], mp);
					rc = 1;
					continue;
				}
				rel = real_p[n] ? real_p + n + 1 : NULL;
			}
		}
		snprintf(sc.cmd, sizeof sc.cmd, "sync%s%s\n", rel ? " " : "", rel ? rel : "");
		pthread_t t;
		if (pthread_create(&t, NULL, sync_call_main, &sc) != 0) {
			sync_call_main(&sc);
		} else {
			while (!sc.done) {
				double files, bytes;
				if (tty && drain_left(mp, &files, &bytes))
					fprintf(stderr, "\rfacetfs sync: %.0f files, %.0f bytes pending   ",
						files, bytes);
				usleep(200000);
			}
			pthread_join(t, NULL);
			if (tty)
				fputc('\n', stderr);
		}
		rc |= sc.rc;
	}
	return rc;
}
