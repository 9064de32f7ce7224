/* index_codec.c — see index_codec.h. */
#include "views/index_codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- buffers ---------------------------------------------------------- */

int ibuf_grow(struct ibuf *b, size_t extra)
{
	if (b->len + extra <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

void ibuf_release(struct ibuf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

/* ---- arena ------------------------------------------------------------ */

struct arena_blk {
	struct arena_blk *next;
	size_t used, cap;
	_Alignas(8) char data[];
};

#define ARENA_BLOCK (64u * 1024u)

void *arena_alloc(struct arena *a, size_t n)
{
	n = (n + 7) & ~(size_t)7;
	struct arena_blk *h = a->head;
	if (!h || h->cap - h->used < n) {
		size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
		struct arena_blk *nb = malloc(sizeof *nb + cap);
		if (!nb)
			return NULL;
		nb->used = 0;
		nb->cap = cap;
		nb->next = h;
		a->head = h = nb;
	}
	void *p = h->data + h->used;
	h->used += n;
	return p;
}

char *arena_dup(struct arena *a, const void *p, size_t n)
{
	char *d = arena_alloc(a, n + 1);
	if (!d)
		return NULL;
	if (n)
		memcpy(d, p, n);
	d[n] = '\0';
	return d;
}

void arena_reset(struct arena *a)
{
	struct arena_blk *h = a->head;
	if (!h)
		return;
	/* keep the oldest block (the last in the list), free the rest */
	while (h->next) {
		struct arena_blk *nx = h->next;
		free(h);
		h = nx;
	}
	h->used = 0;
	a->head = h;
}

void arena_release(struct arena *a)
{
	struct arena_blk *h = a->head;
	while (h) {
		struct arena_blk *nx = h->next;
		free(h);
		h = nx;
	}
	a->head = NULL;
}

/* ---- keys ------------------------------------------------------------- */

void be64_put(char out[8], uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		out[i] = (char)(v & 0xff);
		v >>= 8;
	}
}

uint64_t be64_get(const char in[8])
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | (unsigned char)in[i];
	return v;
}

static int key_tag_str(struct ibuf *b, char tag, const char *s, bool nul)
{
	size_t n = strlen(s);
	if (ibuf_reserve(b, n + 2) < 0)
		return -ENOMEM;
	b->p[b->len++] = tag;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	if (nul)
		b->p[b->len++] = '\0';
	return 0;
}

int key_object(struct ibuf *b, const char *bucket, const char *key)
{
	size_t kl = strlen(key);
	if (key_tag_str(b, 'O', bucket, true) < 0)
		return -ENOMEM;
	return ibuf_add(b, key, kl);
}

int key_view_prefix(struct ibuf *b, const char *view)
{
	return key_tag_str(b, 'M', view, true);
}

int key_add_path(struct ibuf *b, const char *path)
{
	size_t n = strlen(path);
	if (ibuf_reserve(b, n) < 0)
		return -ENOMEM;
	char *d = b->p + b->len;
	for (size_t i = 0; i < n; i++)
		d[i] = path[i] == '/' ? '\0' : path[i];
	b->len += n;
	return 0;
}

int key_offset(struct ibuf *b, const char *topic, int32_t partition)
{
	if (key_tag_str(b, 'K', topic, true) < 0 || ibuf_reserve(b, 4) < 0)
		return -ENOMEM;
	uint32_t p = (uint32_t)partition;
	for (int i = 3; i >= 0; i--)
		b->p[b->len++] = (char)((p >> (8 * i)) & 0xff);
	return 0;
}

int key_scan(struct ibuf *b, const char *bucket)
{
	return key_tag_str(b, 'S', bucket, false);
}

int key_vhash(struct ibuf *b, const char *view)
{
	return key_tag_str(b, 'V', view, false);
}

int key_count_objects(struct ibuf *b)
{
	return ibuf_add(b, "Co", 2);
}

int key_count_view(struct ibuf *b, const char *view)
{
	if (ibuf_add(b, "Cv", 2) < 0)
		return -ENOMEM;
	return ibuf_add(b, view, strlen(view));
}

/* ---- values ----------------------------------------------------------- */

static uint64_t zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

struct rd { const unsigned char *p, *end; bool bad; };

static uint64_t rd_varint(struct rd *r)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (r->p >= r->end) {
			r->bad = true;
			return 0;
		}
		unsigned char c = *r->p++;
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
	}
	r->bad = true;
	return 0;
}

/* A str: returns a pointer into the buffer (NUL-terminated there). */
static const char *rd_str_n(struct rd *r, uint64_t n)
{
	if (r->bad || (uint64_t)(r->end - r->p) < n + 1 || r->p[n] != '\0') {
		r->bad = true;
		return "";
	}
	const char *s = (const char *)r->p;
	r->p += n + 1;
	return s;
}

static const char *rd_str(struct rd *r)
{
	uint64_t n = rd_varint(r);
	return rd_str_n(r, n);
}

static int add_kvs(struct ibuf *b, const struct obj_kv *kv, size_t n)
{
	int rc = ibuf_add_varint(b, n);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		rc = ibuf_add_str(b, kv[i].name);
		if (rc == 0)
			rc = ibuf_add_str(b, kv[i].value);
	}
	return rc;
}

int rec_encode(struct ibuf *b, const struct obj_meta *o)
{
	int rc = ibuf_addc(b, 1);
	if (rc == 0)
		rc = ibuf_add_varint(b, o->flags);
	if (rc == 0)
		rc = ibuf_add_varint(b, o->size);
	if (rc == 0)
		rc = ibuf_add_varint(b, zigzag(o->mtime_ns));
	if (rc == 0)
		rc = ibuf_add_str(b, o->etag);
	if (rc == 0)
		rc = ibuf_add_str(b, o->seq);
	if (rc == 0) {
		if (!o->content_type) {
			rc = ibuf_add_varint(b, 0);
		} else {
			size_t n = strlen(o->content_type);
			rc = ibuf_add_varint(b, n + 1);
			if (rc == 0)
				rc = ibuf_add(b, o->content_type, n + 1);
		}
	}
	if (rc == 0)
		rc = add_kvs(b, o->meta, o->n_meta);
	if (rc == 0)
		rc = add_kvs(b, o->tags, o->n_tags);
	return rc;
}

static struct obj_kv *rd_kvs(struct rd *r, struct arena *ar, size_t *n)
{
	uint64_t cnt = rd_varint(r);
	*n = 0;
	if (r->bad || cnt == 0)
		return NULL;
	if (cnt > (uint64_t)(r->end - r->p)) {   /* each pair takes >= 4 bytes */
		r->bad = true;
		return NULL;
	}
	struct obj_kv *kv = arena_alloc(ar, cnt * sizeof *kv);
	if (!kv) {
		r->bad = true;
		return NULL;
	}
	for (uint64_t i = 0; i < cnt; i++) {
		kv[i].name = (char *)rd_str(r);
		kv[i].value = (char *)rd_str(r);
	}
	*n = cnt;
	return kv;
}

static void copy_fixed(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

int rec_decode(const char *buf, size_t len, struct arena *ar, struct obj_meta *o)
{
	struct rd r = { (const unsigned char *)buf, (const unsigned char *)buf + len, false };
	memset(o, 0, sizeof *o);
	if (len < 1 || buf[0] != 1)
		return -EINVAL;
	r.p++;
	o->flags = (uint32_t)rd_varint(&r);
	o->size = rd_varint(&r);
	o->mtime_ns = unzigzag(rd_varint(&r));
	copy_fixed(o->etag, sizeof o->etag, rd_str(&r));
	copy_fixed(o->seq, sizeof o->seq, rd_str(&r));
	uint64_t ct = rd_varint(&r);
	if (ct)
		o->content_type = (char *)rd_str_n(&r, ct - 1);
	o->meta = rd_kvs(&r, ar, &o->n_meta);
	o->tags = rd_kvs(&r, ar, &o->n_tags);
	if (r.bad || r.p != r.end) {
		memset(o, 0, sizeof *o);
		return -EINVAL;
	}
	return 0;
}

int rec_flags(const char *buf, size_t len, uint32_t *flags)
{
	struct rd r = { (const unsigned char *)buf, (const unsigned char *)buf + len, false };
	if (len < 1 || buf[0] != 1)
		return -EINVAL;
	r.p++;
	*flags = (uint32_t)rd_varint(&r);
	return r.bad ? -EINVAL : 0;
}

/* The POSIX attributes of a membership value (version 2): varint have,
 * then mode, uid, gid, zigzag mtime, atime, ctime for the bits set. */
static int posix_encode(struct ibuf *b, const struct obj_posix *px)
{
	int rc = ibuf_add_varint(b, px->have);
	if (rc == 0 && (px->have & POSIX_MODE))
		rc = ibuf_add_varint(b, px->mode);
	if (rc == 0 && (px->have & POSIX_UID))
		rc = ibuf_add_varint(b, px->uid);
	if (rc == 0 && (px->have & POSIX_GID))
		rc = ibuf_add_varint(b, px->gid);
	if (rc == 0 && (px->have & POSIX_MTIME))
		rc = ibuf_add_varint(b, zigzag(px->mtime_ns));
	if (rc == 0 && (px->have & POSIX_ATIME))
		rc = ibuf_add_varint(b, zigzag(px->atime_ns));
	if (rc == 0 && (px->have & POSIX_CTIME))
		rc = ibuf_add_varint(b, zigzag(px->ctime_ns));
	return rc;
}

static void posix_decode(struct rd *r, struct obj_posix *px)
{
	px->have = (uint32_t)rd_varint(r);
	if (px->have & POSIX_MODE)
		px->mode = (uint32_t)rd_varint(r) & (0170000 | 07777);
	if (px->have & POSIX_UID)
		px->uid = (uint32_t)rd_varint(r);
	if (px->have & POSIX_GID)
		px->gid = (uint32_t)rd_varint(r);
	if (px->have & POSIX_MTIME)
		px->mtime_ns = unzigzag(rd_varint(r));
	if (px->have & POSIX_ATIME)
		px->atime_ns = unzigzag(rd_varint(r));
	if (px->have & POSIX_CTIME)
		px->ctime_ns = unzigzag(rd_varint(r));
}

int member_encode(struct ibuf *b, const struct obj_meta *o)
{
	struct obj_posix px;
	posix_meta_parse(o->meta, o->n_meta, &px);
	int rc = ibuf_addc(b, px.have ? 2 : 1);
	if (rc == 0)
		rc = ibuf_add_varint(b, o->size);
	if (rc == 0)
		rc = ibuf_add_varint(b, zigzag(o->mtime_ns));
	if (rc == 0)
		rc = ibuf_add_str(b, o->etag);
	if (rc == 0)
		rc = ibuf_add_str(b, o->bucket);
	if (rc == 0)
		rc = ibuf_add_str(b, o->key);
	if (rc == 0 && px.have)
		rc = posix_encode(b, &px);
	return rc;
}

int member_decode(const char *buf, size_t len, struct member_val *out)
{
	struct rd r = { (const unsigned char *)buf, (const unsigned char *)buf + len, false };
	if (len < 1 || (buf[0] != 1 && buf[0] != 2))
		return -EINVAL;
	r.p++;
	out->size = rd_varint(&r);
	out->mtime_ns = unzigzag(rd_varint(&r));
	out->etag = rd_str(&r);
	out->bucket = rd_str(&r);
	out->key = rd_str(&r);
	memset(&out->px, 0, sizeof out->px);
	if (buf[0] == 2)
		posix_decode(&r, &out->px);
	if (r.bad || r.p != r.end)
		return -EINVAL;
	return 0;
}
