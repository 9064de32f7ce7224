/* main.c — the facetfs command line (main_int.h): the entry point, mount,
 * check, advise, replay; the commands that talk to a running mount are in
 * main_ctl.c. */
#include "gateway/advise.h"
#include "gateway/main_int.h"
#include "gateway/gateway.h"
#include "gateway/replay.h"
#include "common/file.h"
#include "common/log.h"
#include "common/version.h"
#include "views/filter.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char mount_help[] =
	"usage: facetfs mount -c CONFIG MOUNTPOINT [-f] [-o FUSE_OPTIONS] [-v]... [-q]\n"
	"  Mount the views defined in the config's views_dir at MOUNTPOINT.\n"
	"  Exits 0 once the mount works (or, with -f, when it is unmounted);\n"
	"  non-zero with a message if the config, a filter file, S3 or Kafka\n"
	"  is not right (nothing is mounted then). Without -f the gateway\n"
	"  runs in the background, logs to STATE_DIR/facetfs.log and writes\n"
	"  its pid to STATE_DIR/facetfs.pid. Stop it with\n"
	"  `fusermount3 -u MOUNTPOINT` (or umount), SIGTERM or Ctrl-C.\n"
	"  -c, --config CONFIG   the gateway config (JSON)\n"
	"  -f, --foreground      stay in the foreground, log to stderr\n"
	"  -o OPTIONS            mount options: uid=N, gid=N, umask=OOO, file_mode=OOO,\n"
	"                        dir_mode=OOO (owner and modes shown, checked by the\n"
	"                        kernel), and FUSE's (allow_other, ro, ...)\n"
	"  -v                    debug lines too (default: errors, warnings, info)\n"
	"  -q                    errors and warnings only\n"
	"  -h, --help            this text\n";

static const char check_help[] =
	"usage: facetfs check [--explain] FILTER.json...\n"
	"  Validate filter files; print each problem as FILE: JSON.PATH: reason.\n"
	"  Exit 0 if all are right, 1 if any is wrong, 2 on bad usage.\n"
	"  --explain             print each filter normalised\n"
	"  -h, --help            this text\n";

static const char advise_help[] =
	"usage: facetfs advise TRACE... [--json] [--examples N] [--max-files N] [--skew-ms MS]\n"
	"  Which visibility policy does the traced workload need? Merges the traces\n"
	"  (aligned by their wall-clock anchors), finds overlapping accesses where\n"
	"  the first is a write (RAW/WAW, same or distinct process) and says, per\n"
	"  view and file, under which policy they conflict, the weakest policy with\n"
	"  no distinct-process conflict (or that none suffices), the first pairs of\n"
	"  each class with what would resolve them, and the access pattern.\n"
	"  --json                one JSON document for tools\n"
	"  --examples N          pairs shown per class and file (3, at most 10)\n"
	"  --max-files N         files in the text report (20)\n"
	"  --skew-ms MS          clock offset assumed between hosts (10)\n"
	"  -h, --help            this text\n";

static const char usage_text[] =
	"usage: facetfs COMMAND [ARGS]\n"
	"\n"
	"  facetfs mount -c CONFIG MOUNTPOINT [-f] [-o FUSE_OPTIONS] [-v]... [-q]\n"
	"      Mount the views of a gateway config at MOUNTPOINT.\n"
	"  facetfs check [--explain] FILTER.json...\n"
	"      Validate filter files.\n"
	"  facetfs status MOUNTPOINT [--json]\n"
	"      Counters, lag, scans and latency of a running gateway.\n"
	"  facetfs rescan MOUNTPOINT [VIEW]\n"
	"      List the bucket(s) again and reconcile the index.\n"
	"  facetfs sync MOUNTPOINT [PATH...]\n"
	"      Publish what write-back views hold pending; wait until S3 has it.\n"
	"  facetfs wait MOUNTPOINT [VIEW...] [--probe] [--timeout SECONDS]\n"
	"      Wait until every event Kafka holds now is applied to the mount.\n"
	"  facetfs trace MOUNTPOINT start [--view V] [--max-bytes N] | stop | status\n"
	"      Record the mount's I/O into a trace.\n"
	"  facetfs advise TRACE... [--json]\n"
	"      Which visibility policy the traced workload needs.\n"
	"  facetfs replay TRACE --view DIR [--processes N]\n"
	"      Replay a trace's I/O pattern against a view; time and S3 requests.\n"
	"\n"
	"  facetfs COMMAND --help    the options of one command\n"
	"  facetfs --help | --version\n"
	"See facetfs(1), facetfs-views(5), mount.facetfs(8).\n";

static int usage(FILE *f, int code)
{
	fputs(usage_text, f);
	return code;
}

/* The data path allocates buffers of 1–8 MiB per read (the FUSE reply, the
 * reader's windows and ranges) and per part sent. glibc serves those with
 * a fresh mmap each and unmaps them at free, so every page of every buffer
 * faults and is zeroed again: perf put about 15 % of a burst-buffer re-read
 * in those faults and page allocations (410 -> 645 MiB/s without them,
 * bench_cache.sh). Kept in the heap instead, freed buffers are reused (up
 * to 64 MiB of free top-of-heap per arena is kept before it goes back). */
static void heap_tune(void)
{
	if (!mallopt(M_MMAP_THRESHOLD, 32 << 20) || !mallopt(M_TRIM_THRESHOLD, 64 << 20))
		log_debug("mallopt refused: large buffers stay mapped per use");
}

static int cmd_mount(int argc, char **argv)
{
	struct mount_opts o = { .verbosity = 1 };
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "c:fo:vqh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': o.config_path = optarg; break;
		case 'f': o.foreground = true; break;
		case 'o': o.fuse_opts = optarg; break;
		case 'v': o.verbosity++; break;
		case 'q': o.verbosity = 0; break;
		case 'h': fputs(mount_help, stdout); return 0;
		default: return usage_of(mount_help);
		}
	}
	if (!o.config_path || optind != argc - 1) {
		fprintf(stderr, "facetfs mount: need -c CONFIG and one MOUNTPOINT\n");
		return usage_of(mount_help);
	}
	o.mountpoint = argv[optind];
	log_init("facetfs", o.verbosity);
	heap_tune();
	return gateway_mount(&o);
}

static int cmd_check(int argc, char **argv)
{
	bool explain = false;
	int first = 1, bad = 0;
	for (int i = 1; i < argc; i++)
		if (is_help(argv[i])) {
			fputs(check_help, stdout);
			return 0;
		}
	if (first < argc && strcmp(argv[first], "--explain") == 0) {
		explain = true;
		first++;
	}
	if (first >= argc) {
		fprintf(stderr, "facetfs check: name at least one filter file\n");
		return usage_of(check_help);
	}
	/* Names must be unique across the files checked together. */
	struct view **loaded = calloc((size_t)argc, sizeof *loaded);
	if (!loaded)
		return 1;
	for (int i = first; i < argc; i++) {
		struct diag d = { 0 };
		struct view *v = NULL;
		int rc = view_load_file(argv[i], &v, &d);
		for (size_t k = 0; k < d.n; k++)
			fprintf(stderr, "%s\n", d.lines[k]);
		if (rc < 0 || d.n)
			bad++;
		diag_release(&d);
		if (!v)
			continue;
		for (int j = first; j < i; j++)
			if (loaded[j] && strcmp(view_name(loaded[j]), view_name(v)) == 0) {
				fprintf(stderr, "%s: name: duplicate view name \"%s\" (also defined in %s)\n",
					argv[i], view_name(v), argv[j]);
				bad++;
			}
		if (explain) {
			char *text = view_explain(v);
			printf("%s: %s\n", argv[i], text ? text : "(out of memory)");
			free(text);
		}
		loaded[i] = v;
	}
	for (int i = first; i < argc; i++)
		view_free(loaded[i]);
	free(loaded);
	if (!bad && !explain)
		printf("%d filter file(s) OK\n", argc - first);
	return bad ? 1 : 0;
}

static bool parse_uint(const char *s, unsigned long *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-')
		return false;
	*out = v;
	return true;
}

static int cmd_advise(int argc, char **argv)
{
	struct advise_opts o = { .examples = 3, .max_files = 20, .skew_ms = 10 };
	const char **paths = calloc((size_t)argc, sizeof *paths);
	size_t n = 0;
	int rc = 2;
	if (!paths)
		return 1;
	for (int i = 1; i < argc; i++) {
		unsigned long v;
		if (is_help(argv[i])) {
			fputs(advise_help, stdout);
			rc = 0;
			goto out;
		} else if (strcmp(argv[i], "--json") == 0) {
			o.json = true;
		} else if (strcmp(argv[i], "--examples") == 0 && i + 1 < argc &&
			   parse_uint(argv[i + 1], &v) && v <= 10) {
			o.examples = (unsigned)v;
			i++;
		} else if (strcmp(argv[i], "--max-files") == 0 && i + 1 < argc &&
			   parse_uint(argv[i + 1], &v) && v > 0 && v < 1000000) {
			o.max_files = (unsigned)v;
			i++;
		} else if (strcmp(argv[i], "--skew-ms") == 0 && i + 1 < argc) {
			char *end;
			o.skew_ms = strtod(argv[++i], &end);
			if (*end || o.skew_ms < 0) {
				fprintf(stderr, "facetfs advise: --skew-ms: not a number of ms\n");
				goto out;
			}
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "facetfs advise: unexpected argument \"%s\"\n", argv[i]);
			rc = usage_of(advise_help);
			goto out;
		} else {
			paths[n++] = argv[i];
		}
	}
	if (!n) {
		fprintf(stderr, "facetfs advise: name at least one trace\n");
		rc = usage_of(advise_help);
		goto out;
	}
	rc = advise_run(paths, n, &o, stdout) < 0 ? 1 : 0;
out:
	free(paths);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage(stderr, 2);
	const char *cmd = argv[1];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0)
		return usage(stdout, 0);
	if (strcmp(cmd, "--version") == 0) {
		printf("facetfs %s\n", FACETFS_VERSION);
		return 0;
	}
	log_init("facetfs", 1);
	if (strcmp(cmd, "mount") == 0)
		return cmd_mount(argc - 1, argv + 1);
	if (strcmp(cmd, "check") == 0)
		return cmd_check(argc - 1, argv + 1);
	if (strcmp(cmd, "status") == 0)
		return cmd_status(argc - 1, argv + 1);
	if (strcmp(cmd, "rescan") == 0)
		return cmd_rescan(argc - 1, argv + 1);
	if (strcmp(cmd, "sync") == 0)
		return cmd_sync(argc - 1, argv + 1);
	if (strcmp(cmd, "wait") == 0)
		return cmd_wait(argc - 1, argv + 1);
	if (strcmp(cmd, "trace") == 0)
		return cmd_trace(argc - 1, argv + 1);
	if (strcmp(cmd, "advise") == 0)
		return cmd_advise(argc - 1, argv + 1);
	if (strcmp(cmd, "replay") == 0)
		return replay_main(argc - 1, argv + 1);
	fprintf(stderr, "facetfs: unknown command \"%s\"\n", cmd);
	return usage(stderr, 2);
}
