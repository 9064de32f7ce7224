/*
 * s3_fake_store.c — the in-memory store's objects and the helpers every
 * request of the fake shares (s3_fake_int.h): the object table, its
 * search and its writes, the checks of keys and metadata, the answer of a
 * HEAD, and the start of a request (the test's hook, the count, the
 * bucket check).
 *
 * Objects live in one array sorted by (bucket, key) in byte order, so a
 * listing is a walk from a binary-search position. A deleted key stays in
 * the array as a tombstone (gone) so that its version counter goes on when
 * the key is written again; listings and reads skip tombstones. Everything
 * is under f->mu.
 */
#include "common/lock.h"
#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fake_int.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

bool fake_bucket_has(const struct s3_fake *f, const char *bucket)
{
	for (size_t i = 0; i < f->n_buckets; i++)
		if (!strcmp(f->buckets[i], bucket))
			return true;
	return false;
}

static int obj_cmp(const struct fake_obj *o, const char *bucket, const char *key)
{
	int c = strcmp(o->m.bucket, bucket);
	return c ? c : strcmp(o->m.key, key);
}

/* Index of the first object >= (bucket, key); *found if it is that one. */
size_t fake_find(const struct s3_fake *f, const char *bucket,
		 const char *key, bool *found)
{
	size_t lo = 0, hi = f->n_objs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (obj_cmp(&f->objs[mid], bucket, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < f->n_objs && obj_cmp(&f->objs[lo], bucket, key) == 0;
	return lo;
}

/* The live object at (bucket, key) or NULL. */
struct fake_obj *fake_live(struct s3_fake *f, const char *bucket,
				  const char *key)
{
	bool found;
	size_t i = fake_find(f, bucket, key, &found);
	return found && !f->objs[i].gone ? &f->objs[i] : NULL;
}

/* The slot for (bucket, key), inserted as a tombstone if new. */
static int fake_slot(struct s3_fake *f, const char *bucket, const char *key,
		     struct fake_obj **out)
{
	bool found;
	size_t i = fake_find(f, bucket, key, &found);
	if (found) {
		*out = &f->objs[i];
		return 0;
	}
	if (f->n_objs == f->cap_objs) {
		size_t cap = f->cap_objs ? 2 * f->cap_objs : 64;
		struct fake_obj *g = realloc(f->objs, cap * sizeof *g);
		if (!g)
			return -ENOMEM;
		f->objs = g;
		f->cap_objs = cap;
	}
	struct fake_obj o = { .gone = true };
	o.m.bucket = strdup(bucket);
	o.m.key = strdup(key);
	if (!o.m.bucket || !o.m.key) {
		obj_meta_release(&o.m);
		return -ENOMEM;
	}
	memmove(&f->objs[i + 1], &f->objs[i], (f->n_objs - i) * sizeof *f->objs);
	f->objs[i] = o;
	f->n_objs++;
	*out = &f->objs[i];
	return 0;
}

void fake_md5_hex(const void *buf, size_t len, char out[72])
{
	unsigned char d[16];
	unsigned dl = 0;
	EVP_Digest(buf, len, d, &dl, EVP_md5(), NULL);
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

int fake_check_key(const char *key)
{
	if (!key || !*key)
		return -EINVAL;
	return strlen(key) > FAKE_KEY_MAX ? -ENAMETOOLONG : 0;
}

/* Metadata as the real client accepts it (s3_ops.c), names lower-cased. */
int fake_kv_build(const struct obj_kv *in, size_t n, struct obj_kv **out,
		    size_t *nout)
{
	*out = NULL;
	*nout = 0;
	for (size_t i = 0; i < n; i++) {
		const char *v = in[i].value ? in[i].value : "";
		if (!in[i].name || !*in[i].name ||
		    strpbrk(in[i].name, ":\r\n \t") || strpbrk(v, "\r\n") ||
		    strlen(in[i].name) > 280)
			goto invalid;
		char name[300];
		size_t l = strlen(in[i].name);
		for (size_t k = 0; k <= l; k++)
			name[k] = (char)tolower((unsigned char)in[i].name[k]);
		if (obj_kv_add(out, nout, name, v)) {
			obj_kv_free(*out, *nout);
			*out = NULL;
			*nout = 0;
			return -ENOMEM;
		}
	}
	return 0;
invalid:
	obj_kv_free(*out, *nout);
	*out = NULL;
	*nout = 0;
	return -EINVAL;
}

/* Store a new version at (bucket, key): takes data, meta and tags (freed
 * here on failure); ctype is copied. */
int fake_write(struct s3_fake *f, const char *bucket, const char *key,
		      unsigned char *data, size_t len, struct obj_kv *meta,
		      size_t n_meta, const char *ctype, struct obj_kv *tags,
		      size_t n_tags, char etag_out[72])
{
	struct fake_obj *o;
	char *ct = strdup(ctype && *ctype ? ctype : "binary/octet-stream");
	int err = ct ? 0 : -ENOMEM;
	if (!err)
		err = fake_slot(f, bucket, key, &o);
	if (err) {
		free(ct);
		free(data);
		obj_kv_free(meta, n_meta);
		obj_kv_free(tags, n_tags);
		return err;
	}
	free(o->data);
	free(o->m.content_type);
	obj_kv_free(o->m.meta, o->m.n_meta);
	obj_kv_free(o->m.tags, o->m.n_tags);
	o->data = data;
	o->m.size = len;
	o->m.mtime_ns = f->clock_ns;
	fake_md5_hex(data, len, o->m.etag);
	o->m.content_type = ct;
	o->m.meta = meta;
	o->m.n_meta = n_meta;
	o->m.tags = tags;
	o->m.n_tags = n_tags;
	o->version++;
	o->gone = false;
	if (etag_out)
		memcpy(etag_out, o->m.etag, sizeof o->m.etag);
	return 0;
}

/* What a HEAD answers (tags too when with_tags). */
int fake_head_fill(const struct fake_obj *o, struct obj_meta *out,
		   bool with_tags)
{
	int err = obj_meta_copy(out, &o->m);
	if (err)
		return err;
	out->mtime_ns -= out->mtime_ns % 1000000000LL;   /* an HTTP date */
	if (!with_tags) {
		obj_kv_free(out->tags, out->n_tags);
		out->tags = NULL;
		out->n_tags = 0;
	}
	out->flags = OBJ_HAS_META | OBJ_HAS_CTYPE;
	if (o->m.n_tags == 0 || with_tags)
		out->flags |= OBJ_HAS_TAGS;
	return 0;
}

void fake_hook(struct s3_fake *f, enum s3_kind k, const char *bucket,
		      const char *key)
{
	mod_lock(&f->mu);
	s3_fake_hook_fn fn = f->hook;
	void *ctx = f->hook_ctx;
	mod_unlock(&f->mu);
	if (fn)
		fn(ctx, k, bucket, key);
}

/* The hook, then the lock (held on success) and the bucket check. */
int fake_begin(struct s3_fake *f, enum s3_kind k, const char *bucket,
		      const char *key)
{
	fake_hook(f, k, bucket, key);
	mod_lock(&f->mu);
	f->counts[k]++;
	if (!bucket || !fake_bucket_has(f, bucket)) {
		mod_unlock(&f->mu);
		return -ENOENT;
	}
	return 0;
}
