/*
 * index_table.c — the index's table of views (struct ixview, struct
 * ixbucket, index_int.h) as index_views.c builds it: freeing one, and the
 * path a key has in one of its views. Below the write path, the rebuild
 * and open/close, which all use it.
 */
#include "views/index_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "views/route.h"

void ix_table_free(struct ixview *views, size_t n, struct ixbucket *b, size_t nb,
		   struct route *r)
{
	route_free(r);
	for (size_t i = 0; i < n; i++) {
		free(views[i].name);
		free(views[i].prefix);
	}
	free(views);
	for (size_t i = 0; i < nb; i++) {
		free(b[i].name);
		free(b[i].views);
	}
	free(b);
}

int ix_member_path(const struct index *ix, size_t vi, const char *bucket,
		   const char *key, char *out, size_t outlen)
{
	const struct ixview *xv = &ix->views[vi];
	size_t off = 0;
	if (xv->multi) {
		size_t bl = strlen(bucket);
		if (bl + 2 > outlen)
			return -ENAMETOOLONG;
		memcpy(out, bucket, bl);
		out[bl] = '/';
		off = bl + 1;
	}
	return view_key_path(xv->v, key, out + off, outlen - off);
}
