/*
 * index_read.c — the read side of the index, for FUSE threads: lookup,
 * readdir, records (and the same-version read that spares ingest and scans
 * a HEAD). Takes no lock of the index but the key filter's for a probe:
 * the caller names the view (from a set it pinned) and its key prefix is
 * 'M' name \0. Directories are implicit: a path is a
 * directory when some membership key continues it with \0 (index.h).
 */
#include "views/index_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#define KEY_MAX (IX_PATH_MAX + 512)

/* 'M' view \0 + encoded path into k. */
static int member_key(const struct view *v, const char *path, char *k, size_t *kl)
{
	if (!v)
		return -EINVAL;
	size_t pl = strlen(path);
	const char *name = view_name(v);
	size_t nl = strlen(name);
	size_t plen = nl + 2;
	if (plen + pl + 2 > KEY_MAX)
		return -ENAMETOOLONG;
	k[0] = 'M';
	memcpy(k + 1, name, nl + 1);
	for (size_t i = 0; i < pl; i++)
		k[plen + i] = path[i] == '/' ? '\0' : path[i];
	*kl = plen + pl;
	return 0;
}

static bool has_prefix(const char *k, size_t kl, const char *p, size_t pl)
{
	return kl >= pl && memcmp(k, p, pl) == 0;
}

static void attr_from_value(const char *v, size_t vl, struct index_attr *a)
{
	struct member_val mv;
	memset(a, 0, sizeof *a);
	if (member_decode(v, vl, &mv) < 0)
		return;   /* shows as an empty file; never expected */
	a->size = mv.size;
	a->mtime_ns = mv.mtime_ns;
	a->px = mv.px;
	size_t n = strlen(mv.etag);
	if (n >= sizeof a->etag)
		n = sizeof a->etag - 1;
	memcpy(a->etag, mv.etag, n);
	a->etag[n] = '\0';
}

int index_lookup(struct index *ix, const struct view *v, const char *path,
		 struct index_attr *out)
{
	char k[KEY_MAX];
	size_t kl;
	int rc = member_key(v, path, k, &kl);
	if (rc < 0)
		return rc;
	memset(out, 0, sizeof *out);
	if (!*path) {
		out->is_dir = true;
		return 0;
	}
	leveldb_iterator_t *it = leveldb_create_iterator(ix->db, ix->ro);
	leveldb_iter_seek(it, k, kl);
	rc = -ENOENT;
	if (leveldb_iter_valid(it)) {
		size_t l;
		const char *key = leveldb_iter_key(it, &l);
		if (l == kl && memcmp(key, k, kl) == 0) {
			size_t vl;
			const char *v = leveldb_iter_value(it, &vl);
			attr_from_value(v, vl, out);
			rc = 0;
			leveldb_iter_next(it);
			if (!leveldb_iter_valid(it))
				goto done;
			key = leveldb_iter_key(it, &l);
		}
		k[kl] = '\0';
		if (has_prefix(key, l, k, kl + 1)) {   /* the directory wins */
			memset(out, 0, sizeof *out);
			out->is_dir = true;
			rc = 0;
		}
	}
done:
	leveldb_iter_destroy(it);
	return rc;
}

int index_readdir(struct index *ix, const struct view *v, const char *dir,
		  const char *after, index_dir_fn fn, void *ctx)
{
	char k[KEY_MAX], name[IX_PATH_MAX];
	size_t pl;
	int rc = member_key(v, dir, k, &pl);
	if (rc < 0)
		return rc;
	if (*dir)
		k[pl++] = '\0';
	size_t al = after ? strlen(after) : 0;
	if (pl + al + 2 > KEY_MAX)
		return -ENAMETOOLONG;
	/* seek target: prefix, or prefix + after + \x01 (past after's subtree) */
	char seek[KEY_MAX];
	memcpy(seek, k, pl);
	size_t sl = pl;
	if (al) {
		memcpy(seek + sl, after, al);
		sl += al;
		seek[sl++] = '\x01';
	}
	/* A listing reads each block once, in order: the blocks stay out of
	 * the block cache, which keeps the blocks of lookups. A 1M-entry
	 * `ls -l` filled it (64 MiB) and the gateway held them after. */
	leveldb_iterator_t *it = leveldb_create_iterator(ix->db, ix->ro_list);
	leveldb_iter_seek(it, seek, sl);
	bool any = false;
	rc = 0;
	while (leveldb_iter_valid(it)) {
		size_t kl;
		const char *key = leveldb_iter_key(it, &kl);
		if (!has_prefix(key, kl, k, pl))
			break;
		any = true;
		const char *rest = key + pl;
		size_t rl = kl - pl;
		const char *z = memchr(rest, '\0', rl);
		size_t nl = z ? (size_t)(z - rest) : rl;
		if (nl >= sizeof name || nl == 0) {
			leveldb_iter_next(it);
			continue;
		}
		memcpy(name, rest, nl);
		name[nl] = '\0';
		struct index_attr a;
		bool is_dir = z != NULL;
		if (!is_dir) {
			size_t vl;
			const char *v = leveldb_iter_value(it, &vl);
			attr_from_value(v, vl, &a);
			leveldb_iter_next(it);
			/* the same name continued by \0: also a directory, which wins */
			if (leveldb_iter_valid(it)) {
				const char *nk = leveldb_iter_key(it, &kl);
				is_dir = kl > pl + nl && memcmp(nk, k, pl) == 0 &&
					 memcmp(nk + pl, name, nl) == 0 &&
					 nk[pl + nl] == '\0';
			}
		}
		if (is_dir) {
			memset(&a, 0, sizeof a);
			a.is_dir = true;
			/* skip the subtree: seek to prefix + name + \x01 */
			memcpy(seek, k, pl);
			memcpy(seek + pl, name, nl);
			seek[pl + nl] = '\x01';
			leveldb_iter_seek(it, seek, pl + nl + 1);
		}
		if (fn(ctx, name, &a) != 0)
			break;
	}
	char *err = NULL;
	leveldb_iter_get_error(it, &err);
	leveldb_iter_destroy(it);
	if (err) {
		log_error("index: readdir of %s failed: %s", dir, err);
		leveldb_free(err);
		return -EIO;
	}
	if (!any && *dir && al == 0)
		return -ENOENT;
	return 0;
}

/* Decode a stored record into a deep copy owned by out. */
/* Is the stored record r the version of the object that o describes? */
static bool same_version(const struct obj_meta *r, const struct obj_meta *o)
{
	int64_t dt = r->mtime_ns - o->mtime_ns;
	return !(r->flags & OBJ_DELETED) && strcmp(r->etag, o->etag) == 0 &&
	       dt < INDEX_TIME_SLACK_NS && dt > -INDEX_TIME_SLACK_NS;
}

/* The record of bucket/key copied into *out, or -ENOENT when there is
 * none or (version not NULL) it is not the same version as *version. A key
 * the key filter has never seen is not read at all. */
static int record_get(struct index *ix, const char *bucket, const char *key,
		      const struct obj_meta *version, struct obj_meta *out)
{
	struct ibuf k = { 0 };
	char *v;
	size_t vl;
	memset(out, 0, sizeof *out);
	if (key_object(&k, bucket, key) < 0)
		return -ENOMEM;
	int rc = ix_bloom_may_hold(ix, k.p, k.len) ? ix_get(ix, NULL, k.p, k.len, &v, &vl)
						   : -ENOENT;
	ibuf_release(&k);
	if (rc < 0)
		return rc;
	struct arena ar = { 0 };
	struct obj_meta o;
	rc = rec_decode(v, vl, &ar, &o);
	if (rc < 0) {
		log_error("index: undecodable record of %s/%s", bucket, key);
		rc = -EIO;
	} else if (version && !same_version(&o, version)) {
		rc = -ENOENT;
	} else {
		o.bucket = (char *)bucket;
		o.key = (char *)key;
		rc = obj_meta_copy(out, &o);
	}
	arena_release(&ar);
	leveldb_free(v);
	return rc;
}

int index_object_get(struct index *ix, const char *bucket, const char *key,
		     struct obj_meta *out)
{
	return record_get(ix, bucket, key, NULL, out);
}

int index_same_version(struct index *ix, const struct obj_meta *o, struct obj_meta *out)
{
	if (!o->bucket || !o->key || !o->etag[0]) {
		memset(out, 0, sizeof *out);
		return -ENOENT;
	}
	return record_get(ix, o->bucket, o->key, o, out);
}

int index_object(struct index *ix, const struct view *v, const char *path,
		 struct obj_meta *out)
{
	char k[KEY_MAX];
	size_t kl;
	memset(out, 0, sizeof *out);
	if (!*path)
		return -ENOENT;
	int rc = member_key(v, path, k, &kl);
	if (rc < 0)
		return rc;
	char *val;
	size_t vl;
	rc = ix_get(ix, NULL, k, kl, &val, &vl);
	if (rc < 0)
		return rc;
	struct member_val mv;
	if (member_decode(val, vl, &mv) < 0) {
		log_error("index: undecodable membership of %s", path);
		leveldb_free(val);
		return -EIO;
	}
	rc = index_object_get(ix, mv.bucket, mv.key, out);
	leveldb_free(val);
	if (rc == 0 && (out->flags & OBJ_DELETED)) {
		obj_meta_release(out);
		rc = -ENOENT;
	}
	return rc;
}

struct unsent_walk {
	index_unsent_fn fn;
	void *ctx;
};

static int unsent_pair(void *ctx, const char *bucket, const char *key, const char *v,
		       size_t vl)
{
	(void)v;
	(void)vl;
	struct unsent_walk *w = ctx;
	return w->fn(w->ctx, bucket, key);
}

/* 'U' keys: the records a start must check (index.h). */
int index_unsent_each(struct index *ix, index_unsent_fn fn, void *ctx)
{
	struct unsent_walk w = { fn, ctx };
	return ix_each_pair(ix, 'U', "unsent records", unsent_pair, &w);
}
