/*
 * mount_helper.c — mount.facetfs, the helper mount(8) runs for fstab lines
 * of type facetfs:
 *
 *     /etc/facetfs/gateway.json  /mnt/views  facetfs  _netdev,nofail,allow_other  0 0
 *
 * mount(8) calls it as `mount.facetfs CONFIG MOUNTPOINT [-sfnv] [-o OPTS]`
 * (systemd mount units do the same, with an empty environment). It drops
 * the options that belong to mount(8) and systemd, maps its own (verbose,
 * quiet), and runs `facetfs mount -c CONFIG MOUNTPOINT -o REST`, which
 * returns only once the mount works (or fails with a message): this
 * program's exit status is that command's.
 *
 * The facetfs executable is looked for beside this one (a build tree, or
 * both installed in one directory), then in FACETFS_BINDIR (set at build
 * time). No PATH or HOME is needed; a PATH is set for the gateway if there
 * is none (it may run fusermount3).
 */
#include "common/version.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FACETFS_BINDIR
#define FACETFS_BINDIR "/usr/local/bin"
#endif

#define OPTS_MAX 4096

static const char usage_text[] =
	"usage: mount.facetfs CONFIG MOUNTPOINT [-sfnv] [-o OPTIONS]\n"
	"       mount.facetfs --help | --version\n"
	"  Mount the facetfs gateway configured by CONFIG at MOUNTPOINT (as\n"
	"  mount(8) does for an fstab line of type facetfs). OPTIONS: verbose,\n"
	"  quiet; mount(8)/systemd options (_netdev, nofail, auto, noauto,\n"
	"  defaults, rw, user, nouser, users, owner, group, comment=,\n"
	"  x-systemd.*, x-*) are ignored; the rest go to FUSE (allow_other,\n"
	"  default_permissions, ro, ...). -f: do nothing (fake); -v: verbose;\n"
	"  -s and -n are accepted and ignored.\n";

/* Options mount(8) and systemd use themselves. */
static bool opt_is_mounts(const char *o)
{
	static const char *const plain[] = {
		"_netdev", "nofail", "auto", "noauto", "defaults", "rw", "user",
		"nouser", "users", "owner", "group", "sloppy",
	};
	for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
		if (strcmp(o, plain[i]) == 0)
			return true;
	return strncmp(o, "x-", 2) == 0 || strncmp(o, "comment=", 8) == 0;
}

/* Append o to the comma-separated list out; false if it does not fit. */
static bool opts_add(char *out, size_t cap, const char *o)
{
	size_t l = strlen(out), ol = strlen(o);
	if (l + ol + 2 > cap)
		return false;
	if (l)
		out[l++] = ',';
	memcpy(out + l, o, ol + 1);
	return true;
}

/* The facetfs executable: beside this one, else in FACETFS_BINDIR. */
static int find_facetfs(char *out, size_t cap)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			if ((size_t)snprintf(out, cap, "%s/facetfs", self) < cap &&
			    access(out, X_OK) == 0)
				return 0;
		}
	}
	if ((size_t)snprintf(out, cap, "%s/facetfs", FACETFS_BINDIR) < cap &&
	    access(out, X_OK) == 0)
		return 0;
	return -ENOENT;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 ||
			  strcmp(argv[1], "-h") == 0)) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
		printf("mount.facetfs %s\n", FACETFS_VERSION);
		return 0;
	}
	if (argc < 3 || argv[1][0] == '-' || argv[2][0] == '-') {
		fputs(usage_text, stderr);
		return 1;   /* mount(8): 1 = incorrect invocation */
	}
	const char *config = argv[1], *mountpoint = argv[2];
	char fuse_opts[OPTS_MAX] = "";
	bool fake = false;
	int verbosity = 0;   /* -v count beyond the default */
	bool quiet = false;
	for (int i = 3; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-o") == 0 && i + 1 < argc) {
			char *list = strdup(argv[++i]);
			if (!list) {
				fprintf(stderr, "mount.facetfs: out of memory\n");
				return 1;
			}
			char *save = NULL;
			for (char *o = strtok_r(list, ",", &save); o;
			     o = strtok_r(NULL, ",", &save)) {
				if (opt_is_mounts(o))
					continue;
				if (strcmp(o, "verbose") == 0) {
					verbosity++;
				} else if (strcmp(o, "quiet") == 0) {
					quiet = true;
				} else if (!opts_add(fuse_opts, sizeof fuse_opts, o)) {
					fprintf(stderr, "mount.facetfs: options too long\n");
					free(list);
					return 1;
				}
			}
			free(list);
		} else if (strcmp(a, "-t") == 0 || strcmp(a, "-N") == 0) {
			i++;     /* type / namespace: ours, or not supported */
		} else if (a[0] == '-' && a[1] && strspn(a + 1, "sfnv") == strlen(a + 1)) {
			fake |= strchr(a, 'f') != NULL;
			verbosity += strchr(a, 'v') != NULL;
		} else {
			fprintf(stderr, "mount.facetfs: unexpected argument \"%s\"\n", a);
			fputs(usage_text, stderr);
			return 1;
		}
	}
	char conf_abs[PATH_MAX], mnt_abs[PATH_MAX], exe[PATH_MAX];
	if (!realpath(config, conf_abs)) {
		fprintf(stderr, "mount.facetfs: config %s: %s\n", config, strerror(errno));
		return 32;   /* mount(8): mount failure */
	}
	if (!realpath(mountpoint, mnt_abs)) {
		fprintf(stderr, "mount.facetfs: mountpoint %s: %s\n", mountpoint,
			strerror(errno));
		return 32;
	}
	if (find_facetfs(exe, sizeof exe) < 0) {
		fprintf(stderr, "mount.facetfs: no facetfs executable beside %s or "
			"in %s\n", argv[0], FACETFS_BINDIR);
		return 32;
	}
	if (fake)
		return 0;
	if (!getenv("PATH"))
		setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin", 1);
	char *args[12];
	int n = 0;
	args[n++] = exe;
	args[n++] = "mount";
	args[n++] = "-c";
	args[n++] = conf_abs;
	args[n++] = mnt_abs;
	if (fuse_opts[0]) {
		args[n++] = "-o";
		args[n++] = fuse_opts;
	}
	if (quiet)
		args[n++] = "-q";
	else if (verbosity)
		args[n++] = "-v";
	args[n] = NULL;
	execv(exe, args);
	fprintf(stderr, "mount.facetfs: %s: %s\n", exe, strerror(errno));
	return 32;
}
