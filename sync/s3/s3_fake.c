/*
 * s3_fake.c — the in-memory store of s3_fake.h: its creation, its table
 * of operations (s3_fake_ops.c, s3_fake_mpu.c), its free, and the test's
 * side (s3_fake_*: acting as another client, the clock, the counters),
 * on the object table of s3_fake_store.c.
 */
#include "common/lock.h"
#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fake_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static void fake_free(struct s3 *s)
{
	struct s3_fake *f = fake_of(s);
	for (size_t i = 0; i < f->n_objs; i++) {
		obj_meta_release(&f->objs[i].m);
		free(f->objs[i].data);
	}
	free(f->objs);
	fake_mpu_release(f);
	for (size_t i = 0; i < f->n_buckets; i++)
		free(f->buckets[i]);
	free(f->buckets);
	for (size_t i = 0; i < f->n_gens; i++) {
		free(f->gens[i].bucket);
		free(f->gens[i].prefix);
	}
	free(f->gens);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

static const struct s3_ops fake_ops = {
	.get = fake_get,
	.head = fake_head,
	.get_tagging = fake_get_tagging,
	.list_page = fake_list_page,
	.put_file = fake_put_file,
	.del = fake_del,
	.copy = fake_copy,
	.bucket_check = fake_bucket_check,
	.mpu_create = fake_mpu_create,
	.mpu_put_part = fake_mpu_put_part,
	.mpu_copy_part = fake_mpu_copy_part,
	.mpu_complete = fake_mpu_complete,
	.mpu_abort = fake_mpu_abort,
	.mpu_list = fake_mpu_list,
	.free = fake_free,
};

/* ---- the test side ---------------------------------------------------------- */

int s3_fake_new(struct s3 **out)
{
	struct s3_fake *f = calloc(1, sizeof *f);
	if (!f)
		return -ENOMEM;
	f->iface.ops = &fake_ops;
	pthread_mutex_init(&f->mu, NULL);
	f->clock_ns = S3_FAKE_CLOCK_START_NS;
	f->page_size = FAKE_PAGE_DEFAULT;
	f->min_part = S3_MIN_PART;
	*out = &f->iface;
	return 0;
}

int s3_fake_bucket_add(struct s3 *s, const char *bucket)
{
	struct s3_fake *f = fake_of(s);
	int err = 0;
	mod_lock(&f->mu);
	if (!fake_bucket_has(f, bucket)) {
		char **g = realloc(f->buckets, (f->n_buckets + 1) * sizeof *g);
		char *b = strdup(bucket);
		if (g)
			f->buckets = g;
		if (!g || !b) {
			free(b);
			err = -ENOMEM;
		} else {
			f->buckets[f->n_buckets++] = b;
		}
	}
	mod_unlock(&f->mu);
	return err;
}

int s3_fake_bucket_generate(struct s3 *s, const char *bucket, const char *prefix,
			    uint64_t count)
{
	int err = s3_fake_bucket_add(s, bucket);
	if (err)
		return err;
	struct s3_fake *f = fake_of(s);
	struct fake_gen g = { strdup(bucket), strdup(prefix), count };
	mod_lock(&f->mu);
	struct fake_gen *a = realloc(f->gens, (f->n_gens + 1) * sizeof *a);
	if (a)
		f->gens = a;
	if (!a || !g.bucket || !g.prefix) {
		free(g.bucket);
		free(g.prefix);
		err = -ENOMEM;
	} else {
		f->gens[f->n_gens++] = g;
	}
	mod_unlock(&f->mu);
	return err;
}

void s3_fake_hook_set(struct s3 *s, s3_fake_hook_fn fn, void *ctx)
{
	struct s3_fake *f = fake_of(s);
	mod_lock(&f->mu);
	f->hook = fn;
	f->hook_ctx = ctx;
	mod_unlock(&f->mu);
}

void s3_fake_cond_ignore(struct s3 *s, bool if_none_match, bool if_match)
{
	struct s3_fake *f = fake_of(s);
	mod_lock(&f->mu);
	f->ignore_if_none_match = if_none_match;
	f->ignore_if_match = if_match;
	mod_unlock(&f->mu);
}

void s3_fake_clock_set(struct s3 *s, int64_t ns)
{
	struct s3_fake *f = fake_of(s);
	mod_lock(&f->mu);
	f->clock_ns = ns;
	mod_unlock(&f->mu);
}

void s3_fake_clock_advance(struct s3 *s, int64_t ns)
{
	struct s3_fake *f = fake_of(s);
	mod_lock(&f->mu);
	f->clock_ns += ns;
	mod_unlock(&f->mu);
}

void s3_fake_page_size_set(struct s3 *s, size_t n)
{
	struct s3_fake *f = fake_of(s);
	mod_lock(&f->mu);
	f->page_size = n ? n : FAKE_PAGE_DEFAULT;
	mod_unlock(&f->mu);
}

uint64_t s3_fake_count(struct s3 *s, enum s3_kind k)
{
	struct s3_fake *f = fake_of(s);
	mod_lock(&f->mu);
	uint64_t n = k < S3K_N ? f->counts[k] : 0;
	mod_unlock(&f->mu);
	return n;
}

int s3_fake_object_put(struct s3 *s, const char *bucket, const char *key,
		       const void *data, size_t len, const struct obj_kv *meta,
		       size_t n_meta, const char *content_type)
{
	struct s3_fake *f = fake_of(s);
	int err = fake_check_key(key);
	if (err)
		return err;
	struct obj_kv *m = NULL;
	size_t nm = 0;
	unsigned char *d = malloc(len ? len : 1);
	if (!d)
		return -ENOMEM;
	if (len)
		memcpy(d, data, len);
	err = fake_kv_build(meta, n_meta, &m, &nm);
	if (err) {
		free(d);
		return err;
	}
	mod_lock(&f->mu);
	if (!fake_bucket_has(f, bucket))
		err = -ENOENT;
	else
		err = fake_write(f, bucket, key, d, len, m, nm, content_type,
				 NULL, 0, NULL);
	mod_unlock(&f->mu);
	if (err == -ENOENT) {
		free(d);
		obj_kv_free(m, nm);
	}
	return err;
}

int s3_fake_tags_set(struct s3 *s, const char *bucket, const char *key,
		     const struct obj_kv *tags, size_t n)
{
	struct s3_fake *f = fake_of(s);
	struct obj_kv *t = NULL;
	size_t nt = 0;
	int err = obj_kv_copy(&t, &nt, tags, n);
	if (err)
		return err;
	mod_lock(&f->mu);
	struct fake_obj *o = bucket && key ? fake_live(f, bucket, key) : NULL;
	if (o) {
		obj_kv_free(o->m.tags, o->m.n_tags);
		o->m.tags = t;
		o->m.n_tags = nt;
		o->version++;
		t = NULL;
		nt = 0;
	} else {
		err = -ENOENT;
	}
	mod_unlock(&f->mu);
	obj_kv_free(t, nt);
	return err;
}

int s3_fake_object_delete(struct s3 *s, const char *bucket, const char *key)
{
	struct s3_fake *f = fake_of(s);
	mod_lock(&f->mu);
	struct fake_obj *o = bucket && key ? fake_live(f, bucket, key) : NULL;
	if (o) {
		o->gone = true;
		o->version++;
	}
	mod_unlock(&f->mu);
	return o ? 0 : -ENOENT;
}

int s3_fake_object_read(struct s3 *s, const char *bucket, const char *key,
			void **data, size_t *len, struct obj_meta *out,
			uint64_t *version)
{
	struct s3_fake *f = fake_of(s);
	int err = 0;
	if (out)
		memset(out, 0, sizeof *out);
	mod_lock(&f->mu);
	struct fake_obj *o = bucket && key ? fake_live(f, bucket, key) : NULL;
	unsigned char *d = NULL;
	if (!o) {
		err = -ENOENT;
		goto out;
	}
	d = malloc(o->m.size ? o->m.size : 1);
	if (!d) {
		err = -ENOMEM;
		goto out;
	}
	memcpy(d, o->data, o->m.size);
	if (out)
		err = fake_head_fill(o, out, true);
	if (err)
		goto out;
	*data = d;
	*len = o->m.size;
	d = NULL;
	if (version)
		*version = o->version;
out:
	mod_unlock(&f->mu);
	free(d);
	return err;
}

size_t s3_fake_object_count(struct s3 *s, const char *bucket)
{
	struct s3_fake *f = fake_of(s);
	size_t n = 0;
	mod_lock(&f->mu);
	for (size_t i = 0; i < f->n_objs; i++)
		if (!f->objs[i].gone && !strcmp(f->objs[i].m.bucket, bucket))
			n++;
	mod_unlock(&f->mu);
	return n;
}
