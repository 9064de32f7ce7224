/*
 * s3_fake_ops.c — the object operations of the in-memory store (GET,
 * HEAD, tagging, LIST, PUT, DELETE, COPY, bucket check), on the object
 * table of s3_fake_store.c; s3_fake.c's table of operations names them.
 * A listing copies its page out before calling back without f->mu.
 */
#include "common/lock.h"
#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fake_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int fake_get(struct s3 *s, const char *bucket, const char *key,
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

int fake_head(struct s3 *s, const char *bucket, const char *key,
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

int fake_get_tagging(struct s3 *s, const char *bucket, const char *key,
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

int fake_list_page(struct s3 *s, const char *bucket, const char *prefix,
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

int fake_put_file(struct s3 *s, const char *bucket, const char *key,
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

int fake_del(struct s3 *s, const char *bucket, const char *key)
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

int fake_copy(struct s3 *s, const char *bucket, const char *src_key,
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

int fake_bucket_check(struct s3 *s, const char *bucket)
{
	int err = fake_begin(fake_of(s), S3K_BUCKET_CHECK, bucket, NULL);
	if (!err)
		mod_unlock(&fake_of(s)->mu);
	return err;
}
