/*
 * s3_fake.c — the in-memory store of s3_fake.h.
 *
 * Objects live in one array sorted by (bucket, key) in byte order, so a
 * listing is a walk from a binary-search position. A deleted key stays in
 * the array as a tombstone (gone) so that its version counter goes on when
 * the key is written again; listings and reads skip tombstones. Everything
 * is under f->mu; s3_fake_list copies a page out before calling back.
 */
#include "common/lock.h"
#include "sync/s3_fake.h"
#include "sync/s3_fake_int.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

/* ---- helpers (f->mu held) ------------------------------------------------ */

static bool fake_bucket_has(const struct s3_fake *f, const char *bucket)
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
static size_t fake_find(const struct s3_fake *f, const char *bucket,
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
static int fake_head_fill(const struct fake_obj *o, struct obj_meta *out,
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

/* ---- the operations -------------------------------------------------------- */

static int fake_get(struct s3 *s, const char *bucket, const char *key,
		    uint64_t off, size_t len, const char *if_match, void *buf,
		    size_t *got)
{
	struct s3_fake *f = fake_of(s);
	*got = 0;
	if (len == 0)
		return 0;
	int err = fake_check_key(key);
	if (err)
		return err;
	err = fake_begin(f, S3K_GET, bucket, key);
	if (err)
		return err;
	struct fake_obj *o = fake_live(f, bucket, key);
	if (!o)
		err = -ENOENT;
	else if (if_match && *if_match && strcmp(if_match, o->m.etag))
		err = -ESTALE;
	else if (off < o->m.size) {
		size_t n = o->m.size - off < len ? (size_t)(o->m.size - off) : len;
		memcpy(buf, o->data + off, n);
		*got = n;
	}
	mod_unlock(&f->mu);
	return err;
}

static int fake_head(struct s3 *s, const char *bucket, const char *key,
		     struct obj_meta *out)
{
	struct s3_fake *f = fake_of(s);
	memset(out, 0, sizeof *out);
	int err = fake_check_key(key);
	if (err)
		return err;
	err = fake_begin(f, S3K_HEAD, bucket, key);
	if (err)
		return err;
	struct fake_obj *o = fake_live(f, bucket, key);
	err = o ? fake_head_fill(o, out, false) : -ENOENT;
	mod_unlock(&f->mu);
	return err;
}

static int fake_get_tagging(struct s3 *s, const char *bucket, const char *key,
			    struct obj_kv **tags, size_t *n)
{
	struct s3_fake *f = fake_of(s);
	int err = fake_check_key(key);
	if (err)
		return err;
	err = fake_begin(f, S3K_TAGGING, bucket, key);
	if (err)
		return err;
	struct fake_obj *o = fake_live(f, bucket, key);
	struct obj_kv *t = NULL;
	size_t nt = 0;
	err = o ? obj_kv_copy(&t, &nt, o->m.tags, o->m.n_tags) : -ENOENT;
	mod_unlock(&f->mu);
	if (!err) {
		*tags = t;
		*n = nt;
	}
	return err;
}

/* One page of a generated bucket, after the key token names (f->mu held
 * on entry, released here). */
static int gen_list_page(struct s3_fake *f, const struct fake_gen *g, const char *prefix,
			 const char *token, s3_list_fn fn, void *ctx,
			 char *next_token, size_t ntlen, bool *truncated)
{
	size_t gl = strlen(g->prefix), page_size = f->page_size;
	int64_t t0 = S3_FAKE_CLOCK_START_NS;
	uint64_t i = 0, end = g->count;
	/* a prefix narrower than the generated one lists nothing */
	if (prefix && strncmp(g->prefix, prefix, strlen(prefix)) != 0 &&
	    strncmp(prefix, g->prefix, gl) != 0)
		end = 0;
	char *bucket = strdup(g->bucket), *gp = strdup(g->prefix);
	mod_unlock(&f->mu);
	if (!bucket || !gp) {
		free(bucket);
		free(gp);
		return -ENOMEM;
	}
	if (token && *token && strncmp(token, gp, gl) == 0)
		i = strtoull(token + gl, NULL, 10) + 1;
	int err = 0;
	char key[FAKE_KEY_MAX + 16];
	for (size_t n = 0; !err && i < end; i++, n++) {
		if (n == page_size) {
			*truncated = true;
			snprintf(key, sizeof key, "%s%010llu", gp, (unsigned long long)(i - 1));
			if (strlen(key) >= ntlen)
				err = -EOVERFLOW;
			else
				memcpy(next_token, key, strlen(key) + 1);
			break;
		}
		snprintf(key, sizeof key, "%s%010llu", gp, (unsigned long long)i);
		if (prefix && strncmp(key, prefix, strlen(prefix)) != 0)
			continue;
		struct obj_meta o = { .bucket = bucket, .key = key, .size = 100,
				      .mtime_ns = t0 + (int64_t)i * 1000000, .flags = OBJ_FROM_SCAN };
		snprintf(o.etag, sizeof o.etag, "%032llx", (unsigned long long)i);
		err = fn(ctx, &o);
	}
	free(bucket);
	free(gp);
	if (err && ntlen)
		next_token[0] = '\0';
	return err;
}

static int fake_list_page(struct s3 *s, const char *bucket, const char *prefix,
			  const char *token, s3_list_fn fn, void *ctx,
			  char *next_token, size_t ntlen, bool *truncated)
{
	struct s3_fake *f = fake_of(s);
	*truncated = false;
	if (ntlen)
		next_token[0] = '\0';
	int err = fake_begin(f, S3K_LIST, bucket, NULL);
	if (err)
		return err;
	for (size_t g = 0; g < f->n_gens; g++)
		if (!strcmp(f->gens[g].bucket, bucket))
			return gen_list_page(f, &f->gens[g], prefix, token, fn, ctx, next_token,
					     ntlen, truncated);
	size_t pl = prefix ? strlen(prefix) : 0;
	bool found;
	/* The token is the last key of the previous page: start after it. */
	const char *from = token && *token ? token : (prefix ? prefix : "");
	size_t i = fake_find(f, bucket, from, &found);
	if (found && token && *token)
		i++;
	struct obj_meta *page = calloc(f->page_size, sizeof *page);
	size_t n = 0;
	if (!page)
		err = -ENOMEM;
	for (; !err && i < f->n_objs; i++) {
		const struct fake_obj *o = &f->objs[i];
		if (strcmp(o->m.bucket, bucket) || strncmp(o->m.key, prefix ? prefix : "", pl))
			break;
		if (o->gone)
			continue;
		if (n == f->page_size) {
			*truncated = true;
			break;
		}
		struct obj_meta *p = &page[n];
		p->bucket = strdup(o->m.bucket);
		p->key = strdup(o->m.key);
		n++;
		if (!p->bucket || !p->key) {
			err = -ENOMEM;
			break;
		}
		p->size = o->m.size;
		p->mtime_ns = o->m.mtime_ns - o->m.mtime_ns % 1000000;
		memcpy(p->etag, o->m.etag, sizeof p->etag);
		p->flags = OBJ_FROM_SCAN;
	}
	mod_unlock(&f->mu);
	if (!err && *truncated) {
		const char *last = page[n - 1].key;
		if (strlen(last) >= ntlen)
			err = -EOVERFLOW;
		else
			memcpy(next_token, last, strlen(last) + 1);
	}
	for (size_t k = 0; !err && k < n; k++)
		err = fn(ctx, &page[k]);
	for (size_t k = 0; k < n; k++)
		obj_meta_release(&page[k]);
	free(page);
	if (err && ntlen)
		next_token[0] = '\0';
	return err;
}

/* Whether a PUT with base (s3_put_file_if; NULL: none) may store at
 * (bucket, key): the key holds that version, or ("") none, unless the
 * store was told to ignore that condition. */
static bool fake_cond_holds(struct s3_fake *f, const char *bucket,
			    const char *key, const char *base)
{
	if (!base)
		return true;
	const struct fake_obj *o = fake_live(f, bucket, key);
	if (*base)
		return f->ignore_if_match || (o && strcmp(o->m.etag, base) == 0);
	return f->ignore_if_none_match || !o;
}

static int fake_put_file(struct s3 *s, const char *bucket, const char *key,
			 int fd, uint64_t size, const struct obj_kv *meta,
			 size_t n_meta, const char *content_type,
			 const char *base, char etag_out[72])
{
	struct s3_fake *f = fake_of(s);
	etag_out[0] = '\0';
	int err = fake_check_key(key);
	if (!err && (fd < 0 || (content_type && strpbrk(content_type, "\r\n")) ||
		     size > SIZE_MAX - 1))
		err = -EINVAL;
	if (err)
		return err;
	struct obj_kv *m = NULL;
	size_t nm = 0;
	unsigned char *data = malloc(size ? (size_t)size : 1);
	err = data ? fake_kv_build(meta, n_meta, &m, &nm) : -ENOMEM;
	for (uint64_t pos = 0; !err && pos < size;) {
		ssize_t r = pread(fd, data + pos, (size_t)(size - pos), (off_t)pos);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			err = -EIO;      /* the file is shorter than size */
		else
			pos += (uint64_t)r;
	}
	fake_hook(f, S3K_PUT, bucket, key);
	mod_lock(&f->mu);
	f->counts[S3K_PUT]++;
	if (!err && !fake_bucket_has(f, bucket))
		err = -ENOENT;
	if (!err && !fake_cond_holds(f, bucket, key, base))
		err = -ESTALE;           /* 412 */
	if (!err) {
		err = fake_write(f, bucket, key, data, (size_t)size, m, nm,
				 content_type, NULL, 0, etag_out);
		data = NULL;
		m = NULL;
		nm = 0;
	}
	mod_unlock(&f->mu);
	free(data);
	obj_kv_free(m, nm);
	return err;
}

static int fake_del(struct s3 *s, const char *bucket, const char *key)
{
	struct s3_fake *f = fake_of(s);
	int err = fake_check_key(key);
	if (err)
		return err;
	err = fake_begin(f, S3K_DELETE, bucket, key);
	if (err)
		return err;
	struct fake_obj *o = fake_live(f, bucket, key);
	if (o) {
		o->gone = true;
		o->version++;
	}
	mod_unlock(&f->mu);
	return 0;
}

static int fake_copy(struct s3 *s, const char *bucket, const char *src_key,
		     const char *dst_key, const struct obj_kv *meta,
		     size_t n_meta, const struct obj_meta *src_head,
		     char etag_out[72])
{
	struct s3_fake *f = fake_of(s);
	etag_out[0] = '\0';
	int err = fake_check_key(src_key);
	if (!err)
		err = fake_check_key(dst_key);
	if (err)
		return err;
	struct obj_kv *m = NULL, *t = NULL;
	size_t nm = 0, nt = 0;
	unsigned char *data = NULL;
	char *ct = NULL;
	if (meta) {
		err = fake_kv_build(meta, n_meta, &m, &nm);
		if (err)
			return err;
	}
	err = fake_begin(f, S3K_COPY, bucket, src_key);
	if (err) {
		obj_kv_free(m, nm);
		return err;
	}
	struct fake_obj *o = fake_live(f, bucket, src_key);
	if (!o)
		err = -ENOENT;
	else if (src_head && src_head->etag[0] &&
		 strcmp(src_head->etag, o->m.etag))
		err = -ESTALE;   /* x-amz-copy-source-if-match */
	if (!err) {
		data = malloc(o->m.size ? o->m.size : 1);
		/* REPLACE without a content type: S3's default, as a PUT */
		ct = strdup(meta && src_head ? (src_head->content_type ?
			    src_head->content_type : "binary/octet-stream") :
			    o->m.content_type);
		if (!data || !ct)
			err = -ENOMEM;
	}
	if (!err && !meta)
		err = obj_kv_copy(&m, &nm, o->m.meta, o->m.n_meta);
	if (!err)
		err = obj_kv_copy(&t, &nt, o->m.tags, o->m.n_tags);
	if (!err) {
		memcpy(data, o->data, o->m.size);
		err = fake_write(f, bucket, dst_key, data, o->m.size, m, nm, ct,
				 t, nt, etag_out);
		data = NULL;
		m = t = NULL;
		nm = nt = 0;
	}
	mod_unlock(&f->mu);
	free(data);
	free(ct);
	obj_kv_free(m, nm);
	obj_kv_free(t, nt);
	return err;
}

static int fake_bucket_check(struct s3 *s, const char *bucket)
{
	int err = fake_begin(fake_of(s), S3K_BUCKET_CHECK, bucket, NULL);
	if (!err)
		mod_unlock(&fake_of(s)->mu);
	return err;
}

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
