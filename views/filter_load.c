/*
 * filter_load.c — reading filter files from disk: one file, or every filter
 * file of views_dir ("*.json" not starting with '.': docs/design.md
 * "Filter-definition files"), with the cross-file check that view names
 * are unique.
 */
#include "views/filter_int.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file.h"

#define FILTER_FILE_MAX (1u << 20) /* a filter file is a few hundred bytes */

int view_load_file(const char *path, struct view **out, struct diag *d)
{
	char *buf = NULL;
	size_t len = 0;
	*out = NULL;
	int rc = file_read_all(path, FILTER_FILE_MAX, &buf, &len);
	if (rc < 0) {
		if (rc == -EFBIG)
			diag_add(d, "%s: $: file larger than %u bytes", path, FILTER_FILE_MAX);
		else
			diag_add(d, "%s: $: cannot read: %s", path, strerror(-rc));
		return rc;
	}
	rc = view_load_buf(path, buf, len, out, d);
	free(buf);
	return rc;
}

static bool is_filter_name(const char *n)
{
	size_t len = strlen(n);
	return n[0] != '.' && len > 5 && !strcmp(n + len - 5, ".json");
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void view_free_all(struct view **views, size_t n)
{
	for (size_t i = 0; i < n; i++)
		view_free(views[i]);
	free(views);
}

int view_load_dir(const char *dir, struct view ***out, size_t *n, struct diag *d)
{
	char **names = NULL;
	size_t n_names = 0;
	struct view **views = NULL;
	size_t nv = 0;
	bool bad = false;
	int rc = 0;
	*out = NULL;
	*n = 0;

	DIR *dh = opendir(dir);
	if (!dh) {
		rc = -errno;
		diag_add(d, "%s: $: cannot open directory: %s", dir, strerror(-rc));
		return rc;
	}
	struct dirent *de;
	errno = 0;
	while ((de = readdir(dh))) {
		if (!is_filter_name(de->d_name))
			continue;
		char **g = realloc(names, (n_names + 1) * sizeof *g);
		if (!g || !(g[n_names] = strdup(de->d_name))) {
			names = g ? g : names;
			rc = -ENOMEM;
			goto out;
		}
		names = g;
		n_names++;
	}
	if (errno) {
		rc = -errno;
		diag_add(d, "%s: $: cannot read directory: %s", dir, strerror(-rc));
		goto out;
	}
	qsort(names, n_names, sizeof *names, cmp_name);
	views = calloc(n_names ? n_names : 1, sizeof *views);
	if (!views) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n_names; i++) {
		char *path = NULL;
		if (asprintf(&path, "%s/%s", dir, names[i]) < 0) {
			rc = -ENOMEM;
			goto out;
		}
		struct view *v = NULL;
		int lr = view_load_file(path, &v, d);
		if (lr == -ENOMEM) {
			free(path);
			rc = lr;
			goto out;
		}
		if (lr < 0) {
			bad = true;
		} else {
			const struct view *twin = NULL;
			for (size_t j = 0; j < nv && !twin; j++)
				if (!strcmp(views[j]->name, v->name))
					twin = views[j];
			if (twin) {
				diag_add(d, "%s: name: duplicate view name \"%s\" (also defined in %s)",
					 path, v->name, twin->source);
				view_free(v);
				bad = true;
			} else {
				views[nv++] = v;
			}
		}
		free(path);
	}
	rc = bad ? -EINVAL : 0;
	*out = views;
	*n = nv;
	views = NULL;
out:
	closedir(dh);
	for (size_t i = 0; i < n_names; i++)
		free(names[i]);
	free(names);
	if (views)
		view_free_all(views, nv);
	if (rc == -ENOMEM)
		diag_add(d, "%s: $: out of memory", dir);
	return rc;
}
