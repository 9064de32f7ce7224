/*
 * s3_fault.c — the fault-injecting wrapper of s3_fault.h. Each request
 * first asks fault_match() what the rules do to it (under w->mu), then
 * sleeps, fails or passes the request on with the mutex released. A
 * request of a thread whose cancel flag is set (s3_cancel_watch) ends its
 * delay early and fails with -ECANCELED, never passed on.
 */
#include "common/lock.h"
#include "sync/s3/s3_fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct fault_rule {
	struct s3_fault_rule r;
	uint64_t seen;           /* requests of r.kind since the rule was added */
};

struct s3_fault {
	struct s3 iface;
	struct s3 *inner;
	bool own;
	pthread_mutex_t mu;
	struct fault_rule *rules;
	size_t n_rules;
	uint64_t seen[S3K_N];
	uint64_t injected[S3K_N];
};

/* What the rules do to one request. */
struct fault_hit {
	int err;                 /* S3F_FAIL: nonzero */
	int lost;                /* S3F_LOST: nonzero */
	unsigned delay_ms;
	bool etag;
	bool cut;
	size_t keep;
};

static struct s3_fault *fault_of(struct s3 *s)
{
	return (struct s3_fault *)s;
}

static void fault_match(struct s3_fault *w, enum s3_kind kind, struct fault_hit *h)
{
	memset(h, 0, sizeof *h);
	bool hit = false;
	mod_lock(&w->mu);
	w->seen[kind]++;
	for (size_t i = 0; i < w->n_rules; i++) {
		struct fault_rule *fr = &w->rules[i];
		if (fr->r.kind != kind)
			continue;
		uint64_t n = ++fr->seen;
		uint64_t first = fr->r.first ? fr->r.first : 1;
		if (n < first || (fr->r.times && n >= first + fr->r.times))
			continue;
		hit = true;
		switch (fr->r.type) {
		case S3F_FAIL:
			if (!h->err)
				h->err = fr->r.err;
			break;
		case S3F_DELAY:
			h->delay_ms += fr->r.delay_ms;
			break;
		case S3F_ETAG:
			h->etag = true;
			break;
		case S3F_LOST:
			if (!h->lost)
				h->lost = fr->r.err;
			break;
		case S3F_SHORT:
			if (!h->cut || fr->r.keep < h->keep)
				h->keep = fr->r.keep;
			h->cut = true;
			break;
		}
	}
	if (hit)
		w->injected[kind]++;
	mod_unlock(&w->mu);
	/* the delay, in steps of 10 ms: a cancel flag set meanwhile ends it */
	for (unsigned left = h->delay_ms; left && !s3_cancelled();) {
		unsigned step = left < 10 ? left : 10;
		struct timespec ts = { 0, (long)step * 1000000L };
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
		left -= step;
	}
	if (s3_cancelled() && !h->err)
		h->err = -ECANCELED;     /* not passed on (common/s3.h) */
}

/* An ETag that is not etag: its first digit changed. */
static void etag_change(char *etag)
{
	if (!etag[0])
		etag[0] = '0', etag[1] = '\0';
	else
		etag[0] = etag[0] == '0' ? '1' : '0';
}

static int w_get(struct s3 *s, const char *bucket, const char *key,
		 uint64_t off, size_t len, const char *if_match, void *buf,
		 size_t *got)
{
	struct s3_fault *w = fault_of(s);
	struct fault_hit h;
	*got = 0;
	fault_match(w, S3K_GET, &h);
	if (h.err)
		return h.err;
	int err = s3_get(w->inner, bucket, key, off, len, if_match, buf, got);
	if (!err && h.cut && *got > h.keep)
		*got = h.keep;
	return err;
}

static int w_head(struct s3 *s, const char *bucket, const char *key,
		  struct obj_meta *out)
{
	struct s3_fault *w = fault_of(s);
	struct fault_hit h;
	fault_match(w, S3K_HEAD, &h);
	if (h.err) {
		memset(out, 0, sizeof *out);
		return h.err;
	}
	int err = s3_head(w->inner, bucket, key, out);
	if (!err && h.etag)
		etag_change(out->etag);
	return err;
}

static int w_get_tagging(struct s3 *s, const char *bucket, const char *key,
			 struct obj_kv **tags, size_t *n)
{
	struct s3_fault *w = fault_of(s);
	struct fault_hit h;
	fault_match(w, S3K_TAGGING, &h);
	if (h.err)
		return h.err;
	return s3_get_tagging(w->inner, bucket, key, tags, n);
}

struct etag_ctx {
	s3_list_fn fn;
	void *ctx;
};

static int list_etag_cb(void *ctx, const struct obj_meta *o)
{
	struct etag_ctx *c = ctx;
	struct obj_meta m = *o;
	etag_change(m.etag);
	return c->fn(c->ctx, &m);
}

static int w_list_page(struct s3 *s, const char *bucket, const char *prefix,
		       const char *token, s3_list_fn fn, void *ctx,
		       char *next_token, size_t ntlen, bool *truncated)
{
	struct s3_fault *w = fault_of(s);
	struct fault_hit h;
	fault_match(w, S3K_LIST, &h);
	if (h.err) {
		*truncated = false;
		if (ntlen)
			next_token[0] = '\0';
		return h.err;
	}
	if (!h.etag)
		return s3_list_page(w->inner, bucket, prefix, token, fn, ctx,
				    next_token, ntlen, truncated);
	struct etag_ctx c = { fn, ctx };
	return s3_list_page(w->inner, bucket, prefix, token, list_etag_cb, &c,
			    next_token, ntlen, truncated);
}

static int w_put_file(struct s3 *s, const char *bucket, const char *key,
		      int fd, uint64_t size, const struct obj_kv *meta,
		      size_t n_meta, const char *content_type,
		      const char *base, char etag_out[72])
{
	struct s3_fault *w = fault_of(s);
	struct fault_hit h;
	etag_out[0] = '\0';
	fault_match(w, S3K_PUT, &h);
	if (h.err)
		return h.err;
	if (base)                /* the condition goes on with the PUT */
		return s3_put_file_if(w->inner, bucket, key, fd, size, meta,
				      n_meta, content_type, base, etag_out);
	return s3_put_file(w->inner, bucket, key, fd, size, meta, n_meta,
			   content_type, etag_out);
}

static int w_del(struct s3 *s, const char *bucket, const char *key)
{
	struct s3_fault *w = fault_of(s);
	struct fault_hit h;
	fault_match(w, S3K_DELETE, &h);
	return h.err ? h.err : s3_delete(w->inner, bucket, key);
}

static int w_copy(struct s3 *s, const char *bucket, const char *src_key,
		  const char *dst_key, const struct obj_kv *meta,
		  size_t n_meta, const struct obj_meta *src_head,
		  char etag_out[72])
{
	struct s3_fault *w = fault_of(s);
	struct fault_hit h;
	etag_out[0] = '\0';
	fault_match(w, S3K_COPY, &h);
	if (h.err)
		return h.err;
	return s3_copy(w->inner, bucket, src_key, dst_key, meta, n_meta,
		       src_head, etag_out);
}

static int w_bucket_check(struct s3 *s, const char *bucket)
{
	struct s3_fault *w = fault_of(s);
	struct fault_hit h;
	fault_match(w, S3K_BUCKET_CHECK, &h);
	return h.err ? h.err : s3_bucket_check(w->inner, bucket);
}

static int w_mpu_create(struct s3 *s, const char *bucket, const char *key,
			const struct obj_kv *meta, size_t n_meta,
			const char *content_type, char *upload_id, size_t idlen)
{
	struct s3_fault *w = fault_of(s);
	struct fault_hit h;
	fault_match(w, S3K_MPU_CREATE, &h);
	if (h.err)
		return h.err;
	int err = s3_mpu_create(w->inner, bucket, key, meta, n_meta, content_type,
				upload_id, idlen);
	if (!err && h.lost) {
		upload_id[0] = '\0';
		err = h.lost;
	}
	return err;
}

static int w_mpu_put_part(struct s3 *s, const char *bucket, const char *key,
			  const char *upload_id, unsigned part, int fd,
			  uint64_t off, uint64_t size, char etag_out[72])
{
	struct s3_fault *w = fault_of(s);
	struct fault_hit h;
	etag_out[0] = '\0';
	fault_match(w, S3K_MPU_PART, &h);
	return h.err ? h.err : s3_mpu_put_part(w->inner, bucket, key, upload_id,
					       part, fd, off, size, etag_out);
}

static int w_mpu_copy_part(struct s3 *s, const char *bucket, const char *key,
			   const char *upload_id, unsigned part,
			   const char *src_key, const char *src_if_match,
			   uint64_t off, uint64_t size, char etag_out[72])
{
	struct s3_fault *w = fault_of(s);
	struct fault_hit h;
	etag_out[0] = '\0';
	fault_match(w, S3K_MPU_COPY, &h);
	return h.err ? h.err : s3_mpu_copy_part(w->inner, bucket, key, upload_id,
						part, src_key, src_if_match,
						off, size, etag_out);
}

static int w_mpu_complete(struct s3 *s, const char *bucket, const char *key,
			  const char *upload_id, const struct s3_part *parts,
			  size_t n, char etag_out[72])
{
	struct s3_fault *w = fault_of(s);
	struct fault_hit h;
	etag_out[0] = '\0';
	fault_match(w, S3K_MPU_COMPLETE, &h);
	return h.err ? h.err : s3_mpu_complete(w->inner, bucket, key, upload_id,
					       parts, n, etag_out);
}

static int w_mpu_abort(struct s3 *s, const char *bucket, const char *key,
		       const char *upload_id)
{
	struct s3_fault *w = fault_of(s);
	struct fault_hit h;
	fault_match(w, S3K_MPU_ABORT, &h);
	return h.err ? h.err : s3_mpu_abort(w->inner, bucket, key, upload_id);
}

static int w_mpu_list(struct s3 *s, const char *bucket, const char *prefix,
		      s3_upload_fn fn, void *ctx)
{
	struct s3_fault *w = fault_of(s);
	struct fault_hit h;
	fault_match(w, S3K_MPU_LIST, &h);
	return h.err ? h.err : s3_mpu_list(w->inner, bucket, prefix, fn, ctx);
}

static void w_free(struct s3 *s)
{
	struct s3_fault *w = fault_of(s);
	if (w->own)
		s3_free(w->inner);
	free(w->rules);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

static const struct s3_ops fault_ops = {
	.get = w_get,
	.head = w_head,
	.get_tagging = w_get_tagging,
	.list_page = w_list_page,
	.put_file = w_put_file,
	.del = w_del,
	.copy = w_copy,
	.bucket_check = w_bucket_check,
	.mpu_create = w_mpu_create,
	.mpu_put_part = w_mpu_put_part,
	.mpu_copy_part = w_mpu_copy_part,
	.mpu_complete = w_mpu_complete,
	.mpu_abort = w_mpu_abort,
	.mpu_list = w_mpu_list,
	.free = w_free,
};

int s3_fault_new(struct s3 *inner, bool own, struct s3 **out)
{
	struct s3_fault *w = calloc(1, sizeof *w);
	if (!w)
		return -ENOMEM;
	w->iface.ops = &fault_ops;
	w->inner = inner;
	w->own = own;
	pthread_mutex_init(&w->mu, NULL);
	*out = &w->iface;
	return 0;
}

int s3_fault_add(struct s3 *s, const struct s3_fault_rule *r)
{
	struct s3_fault *w = fault_of(s);
	if ((unsigned)r->kind >= S3K_N ||
	    ((r->type == S3F_FAIL || r->type == S3F_LOST) && r->err >= 0) ||
	    (r->type == S3F_LOST && r->kind != S3K_MPU_CREATE) ||
	    (r->type == S3F_SHORT && r->kind != S3K_GET) ||
	    (r->type == S3F_ETAG && r->kind != S3K_HEAD && r->kind != S3K_LIST) ||
	    r->type < S3F_FAIL || r->type > S3F_LOST)
		return -EINVAL;
	int err = 0;
	mod_lock(&w->mu);
	struct fault_rule *g = realloc(w->rules, (w->n_rules + 1) * sizeof *g);
	if (!g) {
		err = -ENOMEM;
	} else {
		w->rules = g;
		g[w->n_rules].r = *r;
		g[w->n_rules].seen = 0;
		w->n_rules++;
	}
	mod_unlock(&w->mu);
	return err;
}

int s3_fault_fail(struct s3 *s, enum s3_kind kind, unsigned first,
		  unsigned times, int err)
{
	struct s3_fault_rule r = { .kind = kind, .type = S3F_FAIL,
				   .first = first, .times = times, .err = err };
	return s3_fault_add(s, &r);
}

void s3_fault_clear(struct s3 *s)
{
	struct s3_fault *w = fault_of(s);
	mod_lock(&w->mu);
	free(w->rules);
	w->rules = NULL;
	w->n_rules = 0;
	mod_unlock(&w->mu);
}

uint64_t s3_fault_injected(struct s3 *s, enum s3_kind kind)
{
	struct s3_fault *w = fault_of(s);
	mod_lock(&w->mu);
	uint64_t n = (unsigned)kind < S3K_N ? w->injected[kind] : 0;
	mod_unlock(&w->mu);
	return n;
}

uint64_t s3_fault_seen(struct s3 *s, enum s3_kind kind)
{
	struct s3_fault *w = fault_of(s);
	mod_lock(&w->mu);
	uint64_t n = (unsigned)kind < S3K_N ? w->seen[kind] : 0;
	mod_unlock(&w->mu);
	return n;
}
