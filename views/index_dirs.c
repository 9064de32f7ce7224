/*
 * index_dirs.c — directories made with mkdir in a writable view that hold
 * no object (index.h: 'D' keys). S3 has no directories: such a directory
 * exists only here, so it survives a restart of the gateway and goes away
 * with rmdir. Single Puts and Deletes: no batch, no write lock (nothing
 * else writes 'D' keys and each write is atomic in LevelDB).
 * Value: empty (no attributes: made before they were kept), or the text
 * "1 HAVE MODE UID GID MTIME_NS ATIME_NS CTIME_NS" (decimal; common/posix.h's
 * fields; values written before atime and ctime were kept end at MTIME_NS
 * and read as such).
 */
#include "views/index_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

/* What a 'D' value keeps, and its longest text (7 numbers of at most 20
 * characters, their spaces, the version). */
#define DIR_KEPT (POSIX_MODE | POSIX_UID | POSIX_GID | POSIX_MTIME | POSIX_ATIME | POSIX_CTIME)
#define DIR_VALUE_MAX 176

/* 'D' view \0 path into a malloc'ed key. */
static char *dir_key(const char *view, const char *path, size_t *kl)
{
	size_t vl = strlen(view), pl = strlen(path);
	char *k = malloc(1 + vl + 1 + pl);
	if (!k)
		return NULL;
	k[0] = 'D';
	memcpy(k + 1, view, vl);
	k[1 + vl] = '\0';
	memcpy(k + 2 + vl, path, pl);
	*kl = 2 + vl + pl;
	return k;
}

static int dir_write(struct index *ix, const char *view, const char *path, bool add,
		     const struct obj_posix *px)
{
	size_t kl;
	char *k = dir_key(view, path, &kl), *err = NULL;
	if (!k)
		return -ENOMEM;
	char val[DIR_VALUE_MAX] = "";
	if (add && px && px->have)
		snprintf(val, sizeof val,
			 "1 %" PRIu32 " %" PRIu32 " %" PRIu32 " %" PRIu32 " %" PRId64 " %" PRId64 " %" PRId64,
			 px->have & DIR_KEPT, px->mode, px->uid, px->gid, px->mtime_ns,
			 px->atime_ns, px->ctime_ns);
	if (add)
		leveldb_put(ix->db, ix->wo, k, kl, val, strlen(val), &err);
	else
		leveldb_delete(ix->db, ix->wo, k, kl, &err);
	free(k);
	if (err) {
		log_error("index: %s directory %s/%s: %s", add ? "storing" : "removing",
			  view, path, err);
		leveldb_free(err);
		return -EIO;
	}
	return 0;
}

int index_dir_add(struct index *ix, const char *view, const char *path,
		  const struct obj_posix *px)
{
	return dir_write(ix, view, path, true, px);
}

int index_dir_remove(struct index *ix, const char *view, const char *path)
{
	return dir_write(ix, view, path, false, NULL);
}

/* The attributes of a 'D' value (none if empty or not understood). */
static void dir_value(const char *v, size_t vl, struct obj_posix *px)
{
	char buf[DIR_VALUE_MAX];
	memset(px, 0, sizeof *px);
	if (vl == 0 || vl >= sizeof buf)
		return;
	memcpy(buf, v, vl);
	buf[vl] = '\0';
	struct obj_posix p = { 0 };
	int n = sscanf(buf, "1 %" SCNu32 " %" SCNu32 " %" SCNu32 " %" SCNu32 " %" SCNd64
			    " %" SCNd64 " %" SCNd64,
		       &p.have, &p.mode, &p.uid, &p.gid, &p.mtime_ns, &p.atime_ns, &p.ctime_ns);
	if (n == 5)                      /* written before atime and ctime were kept */
		p.have &= ~(uint32_t)(POSIX_ATIME | POSIX_CTIME);
	if (n == 5 || n == 7) {
		p.have &= DIR_KEPT;
		*px = p;
	}
}

struct dirs_walk {
	index_madedir_fn fn;
	void *ctx;
};

static int dirs_pair(void *ctx, const char *view, const char *path, const char *v,
		     size_t vl)
{
	struct dirs_walk *w = ctx;
	struct obj_posix px;
	dir_value(v, vl, &px);
	return w->fn(w->ctx, view, path, &px);
}

int index_dirs_each(struct index *ix, index_madedir_fn fn, void *ctx)
{
	struct dirs_walk w = { fn, ctx };
	return ix_each_pair(ix, 'D', "made directories", dirs_pair, &w);
}
