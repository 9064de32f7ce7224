/*
 * test_s3_fake.c — the in-memory store (sync/s3/s3_fake.h) answers as the S3
 * interface says, and the fault wrapper (sync/s3/s3_fault.h) injects exactly
 * what its rules say and nothing else, and ends its delays when the
 * calling thread's cancel flag is set; s3_get_stream over a store that
 * cannot stream.
 */
#define UNIT_WITH_MD5
#include "unit.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"

struct listed {
	char keys[64][64];
	char etags[64][72];
	int64_t mtime[64];
	size_t n;
	int stop_at;             /* return 7 at this object (-1: never) */
};

static int list_cb(void *ctx, const struct obj_meta *o)
{
	struct listed *l = ctx;
	if (l->n < 64) {
		snprintf(l->keys[l->n], sizeof l->keys[0], "%s", o->key);
		memcpy(l->etags[l->n], o->etag, sizeof l->etags[0]);
		l->mtime[l->n] = o->mtime_ns;
	}
	if ((int)l->n++ == l->stop_at)
		return 7;
	return 0;
}

/* Put bytes through a temp file and s3_put_file. */
static int put_bytes(struct s3 *s, const char *bucket, const char *key,
		     const char *data, const struct obj_kv *meta, size_t n_meta,
		     const char *ctype, char etag[72])
{
	char path[] = "/tmp/facetfs-test-s3fake-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		exit(2);
	unlink(path);
	size_t len = strlen(data);
	if (write(fd, data, len) != (ssize_t)len)
		exit(2);
	int err = s3_put_file(s, bucket, key, fd, len, meta, n_meta, ctype, etag);
	close(fd);
	return err;
}

static void test_objects(void)
{
	struct s3 *s;
	CHECK(s3_fake_new(&s) == 0, "fake: new");
	CHECK(s3_bucket_check(s, "b") == -ENOENT, "bucket check: unknown -> -ENOENT");
	CHECK(s3_fake_bucket_add(s, "b") == 0 && s3_bucket_check(s, "b") == 0,
	      "bucket check: added -> 0");
	char etag[72], md5[33];
	struct obj_kv meta[] = { { "Color", "red" }, { "size-class", "L" } };
	CHECK(put_bytes(s, "nob", "k", "x", NULL, 0, NULL, etag) == -ENOENT,
	      "put: unknown bucket -> -ENOENT");
	int err = put_bytes(s, "b", "dir/a", "hello world", meta, 2, "text/plain", etag);
	unit_md5_hex("hello world", 11, md5);
	CHECK(err == 0 && !strcmp(etag, md5), "put: ETag is the MD5 (%s)", etag);

	struct obj_meta h;
	err = s3_head(s, "b", "dir/a", &h);
	CHECK(err == 0 && h.size == 11 && !strcmp(h.etag, md5) &&
	      h.mtime_ns == S3_FAKE_CLOCK_START_NS &&
	      h.flags == (OBJ_HAS_META | OBJ_HAS_CTYPE | OBJ_HAS_TAGS) &&
	      !strcmp(h.content_type, "text/plain") && h.n_meta == 2 &&
	      !strcmp(obj_meta_get(&h, "color"), "red") && h.n_tags == 0,
	      "head: size, etag, mtime, flags, ctype, meta lower-cased");
	obj_meta_release(&h);
	CHECK(s3_head(s, "b", "nope", &h) == -ENOENT, "head: missing -> -ENOENT");

	char buf[32];
	size_t got;
	err = s3_get(s, "b", "dir/a", 6, 100, NULL, buf, &got);
	CHECK(err == 0 && got == 5 && !memcmp(buf, "world", 5), "get: range short at the end");
	err = s3_get(s, "b", "dir/a", 0, 5, md5, buf, &got);
	CHECK(err == 0 && got == 5 && !memcmp(buf, "hello", 5), "get: If-Match that matches");
	err = s3_get(s, "b", "dir/a", 0, 5, "0123", buf, &got);
	CHECK(err == -ESTALE && got == 0, "get: If-Match mismatch -> -ESTALE");
	err = s3_get(s, "b", "dir/a", 50, 5, NULL, buf, &got);
	CHECK(err == 0 && got == 0, "get: wholly past the end -> 0 bytes");
	CHECK(s3_get(s, "b", "zz", 0, 5, NULL, buf, &got) == -ENOENT, "get: missing -> -ENOENT");

	/* Tags, set by another client; HEAD no longer says "no tags". */
	struct obj_kv tags[] = { { "t1", "v1" } };
	uint64_t v0, v1;
	void *d;
	size_t dl;
	CHECK(s3_fake_object_read(s, "b", "dir/a", &d, &dl, NULL, &v0) == 0 && v0 == 1,
	      "version: 1 after the first write");
	free(d);
	CHECK(s3_fake_tags_set(s, "b", "dir/a", tags, 1) == 0, "tags: set");
	err = s3_head(s, "b", "dir/a", &h);
	CHECK(err == 0 && !(h.flags & OBJ_HAS_TAGS) && h.n_tags == 0,
	      "head: tagged object -> OBJ_HAS_TAGS clear");
	obj_meta_release(&h);
	struct obj_kv *t = NULL;
	size_t nt = 0;
	err = s3_get_tagging(s, "b", "dir/a", &t, &nt);
	CHECK(err == 0 && nt == 1 && !strcmp(t[0].name, "t1") && !strcmp(t[0].value, "v1"),
	      "tagging: the tags");
	obj_kv_free(t, nt);
	CHECK(s3_fake_object_read(s, "b", "dir/a", &d, &dl, NULL, &v1) == 0 && v1 == 2,
	      "version: +1 on a tag change");
	free(d);

	/* COPY: keep (meta NULL) and replace (with If-Match of the source). */
	s3_fake_clock_advance(s, 5000000000LL);
	char cet[72];
	err = s3_copy(s, "b", "dir/a", "dir/b", NULL, 0, NULL, cet);
	CHECK(err == 0 && !strcmp(cet, md5), "copy (keep): new ETag = MD5");
	err = s3_fake_object_read(s, "b", "dir/b", &d, &dl, &h, NULL);
	CHECK(err == 0 && dl == 11 && !memcmp(d, "hello world", 11) && h.n_meta == 2 &&
	      !strcmp(h.content_type, "text/plain") && h.n_tags == 1 &&
	      h.mtime_ns == S3_FAKE_CLOCK_START_NS + 5000000000LL,
	      "copy (keep): bytes, meta, ctype, tags, new mtime");
	free(d);
	obj_meta_release(&h);
	struct obj_kv nm[] = { { "New", "1" } };
	struct obj_meta src;
	CHECK(s3_head(s, "b", "dir/a", &src) == 0, "head of the copy source");
	err = s3_copy(s, "b", "dir/a", "dir/a", nm, 1, &src, cet);
	CHECK(err == 0, "copy (replace) onto itself");
	err = s3_fake_object_read(s, "b", "dir/a", &d, &dl, &h, NULL);
	CHECK(err == 0 && h.n_meta == 1 && !strcmp(obj_meta_get(&h, "new"), "1") &&
	      !strcmp(h.content_type, "text/plain"), "copy (replace): meta replaced, ctype kept");
	free(d);
	obj_meta_release(&h);
	CHECK(s3_fake_object_put(s, "b", "dir/a", "changed", 7, NULL, 0, NULL) == 0,
	      "another client overwrites the source");
	err = s3_copy(s, "b", "dir/a", "dir/c", nm, 1, &src, cet);
	CHECK(err == -ESTALE, "copy (replace) of a changed source -> -ESTALE");
	obj_meta_release(&src);
	err = s3_fake_object_read(s, "b", "dir/a", &d, &dl, &h, &v1);
	CHECK(err == 0 && !strcmp(h.content_type, "binary/octet-stream") && h.n_tags == 0 &&
	      v1 == 4, "put by another client: default ctype, no tags, version 4");
	free(d);
	obj_meta_release(&h);

	/* DELETE */
	CHECK(s3_delete(s, "b", "dir/b") == 0 && s3_head(s, "b", "dir/b", &h) == -ENOENT,
	      "delete: gone");
	CHECK(s3_delete(s, "b", "dir/b") == 0, "delete: missing key -> 0");
	CHECK(s3_fake_object_put(s, "b", "dir/b", "x", 1, NULL, 0, NULL) == 0 &&
	      s3_fake_object_read(s, "b", "dir/b", &d, &dl, NULL, &v1) == 0 && v1 == 3,
	      "version goes on after a delete (%llu)", (unsigned long long)v1);
	free(d);
	CHECK(s3_fake_count(s, S3K_PUT) == 2 && s3_fake_count(s, S3K_COPY) == 3 &&
	      s3_fake_count(s, S3K_DELETE) == 2 && s3_fake_count(s, S3K_GET) == 5,
	      "counters: puts %llu copies %llu deletes %llu gets %llu",
	      (unsigned long long)s3_fake_count(s, S3K_PUT),
	      (unsigned long long)s3_fake_count(s, S3K_COPY),
	      (unsigned long long)s3_fake_count(s, S3K_DELETE),
	      (unsigned long long)s3_fake_count(s, S3K_GET));
	s3_free(s);
}

static void test_list(void)
{
	struct s3 *s;
	s3_fake_new(&s);
	s3_fake_bucket_add(s, "b");
	s3_fake_bucket_add(s, "c");
	const char *keys[] = { "b/2", "a", "b/1", "\xc3\xa9", "B", "b/10", "c" };
	for (size_t i = 0; i < 7; i++) {
		s3_fake_clock_set(s, S3_FAKE_CLOCK_START_NS + 1234567 * (int64_t)i);
		s3_fake_object_put(s, "b", keys[i], keys[i], strlen(keys[i]), NULL, 0, NULL);
	}
	s3_fake_object_put(s, "c", "other", "o", 1, NULL, 0, NULL);
	s3_fake_object_delete(s, "b", "c");
	s3_fake_page_size_set(s, 2);
	const char *want[] = { "B", "a", "b/1", "b/10", "b/2", "\xc3\xa9" };
	struct listed l = { .stop_at = -1 };
	char token[256] = "", next[256];
	bool trunc = true;
	int pages = 0, err = 0;
	while (trunc && !err && pages < 10) {
		err = s3_list_page(s, "b", NULL, token, list_cb, &l, next, sizeof next, &trunc);
		memcpy(token, next, sizeof token);
		pages++;
	}
	bool order = l.n == 6;
	for (size_t i = 0; order && i < 6; i++)
		order = !strcmp(l.keys[i], want[i]);
	CHECK(err == 0 && pages == 3 && order, "list: %zu keys in byte order in %d pages of 2",
	      l.n, pages);
	CHECK(l.mtime[1] == S3_FAKE_CLOCK_START_NS + 1000000,
	      "list: mtime in whole ms (%lld)", (long long)(l.mtime[1] - S3_FAKE_CLOCK_START_NS));
	memset(&l, 0, sizeof l);
	l.stop_at = -1;
	s3_fake_page_size_set(s, 0);
	err = s3_list_page(s, "b", "b/", NULL, list_cb, &l, next, sizeof next, &trunc);
	CHECK(err == 0 && !trunc && l.n == 3 && !strcmp(l.keys[0], "b/1") &&
	      !strcmp(l.keys[2], "b/2"), "list: prefix b/ -> 3 keys, one page");
	memset(&l, 0, sizeof l);
	l.stop_at = 1;
	err = s3_list_page(s, "b", NULL, NULL, list_cb, &l, next, sizeof next, &trunc);
	CHECK(err == 7 && l.n == 2, "list: callback's nonzero stops the page");
	s3_fake_page_size_set(s, 1);
	err = s3_list_page(s, "b", NULL, NULL, list_cb, &l, next, 1, &trunc);
	CHECK(err == -EOVERFLOW, "list: token buffer too small -> -EOVERFLOW");
	CHECK(s3_list_page(s, "nob", NULL, NULL, list_cb, &l, next, sizeof next, &trunc) == -ENOENT,
	      "list: unknown bucket -> -ENOENT");
	CHECK(s3_fake_object_count(s, "b") == 6 && s3_fake_object_count(s, "c") == 1,
	      "object count per bucket");
	s3_free(s);
}

/* The list callback may call the store (the lock is not held). */
static int reentrant_cb(void *ctx, const struct obj_meta *o)
{
	struct s3 *s = ctx;
	struct obj_meta h;
	int err = s3_head(s, o->bucket, o->key, &h);
	obj_meta_release(&h);
	return err;
}

static void *put_thread(void *arg)
{
	struct s3 *s = arg;
	for (int i = 0; i < 200; i++) {
		char key[32];
		snprintf(key, sizeof key, "t/%03d", i);
		s3_fake_object_put(s, "b", key, key, strlen(key), NULL, 0, NULL);
	}
	return NULL;
}

static void test_threads(void)
{
	struct s3 *s;
	s3_fake_new(&s);
	s3_fake_bucket_add(s, "b");
	s3_fake_object_put(s, "b", "k", "v", 1, NULL, 0, NULL);
	char next[64];
	bool trunc;
	CHECK(s3_list_page(s, "b", NULL, NULL, reentrant_cb, s, next, sizeof next, &trunc) == 0,
	      "list: callback may call the store");
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, put_thread, s);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	CHECK(s3_fake_object_count(s, "b") == 201, "4 threads x 200 puts of 200 keys: %zu objects",
	      s3_fake_object_count(s, "b"));
	s3_free(s);
}

static void test_fault(void)
{
	struct s3 *f, *s;
	s3_fake_new(&f);
	s3_fake_bucket_add(f, "b");
	s3_fake_object_put(f, "b", "k", "0123456789", 10, NULL, 0, NULL);
	CHECK(s3_fault_new(f, true, &s) == 0, "fault: new (owns the fake)");
	char buf[16];
	size_t got;
	CHECK(s3_fault_fail(s, S3K_GET, 2, 2, -EIO) == 0, "fault: GETs 2 and 3 fail");
	int r[5];
	for (int i = 0; i < 5; i++)
		r[i] = s3_get(s, "b", "k", 0, 4, NULL, buf, &got);
	CHECK(r[0] == 0 && r[1] == -EIO && r[2] == -EIO && r[3] == 0 && r[4] == 0,
	      "fault: only the 2nd and 3rd GET failed (%d %d %d %d %d)",
	      r[0], r[1], r[2], r[3], r[4]);
	CHECK(s3_fault_injected(s, S3K_GET) == 2 && s3_fault_seen(s, S3K_GET) == 5 &&
	      s3_fake_count(f, S3K_GET) == 3, "fault: 2 injected, 5 seen, 3 reached the store");
	s3_fault_clear(s);
	struct s3_fault_rule cut = { .kind = S3K_GET, .type = S3F_SHORT, .keep = 3 };
	CHECK(s3_fault_add(s, &cut) == 0, "fault: cut GETs to 3 bytes");
	int err = s3_get(s, "b", "k", 2, 6, NULL, buf, &got);
	CHECK(err == 0 && got == 3 && !memcmp(buf, "234", 3), "fault: GET cut short");
	s3_fault_clear(s);
	struct s3_fault_rule et = { .kind = S3K_HEAD, .type = S3F_ETAG, .times = 1 };
	struct s3_fault_rule etl = { .kind = S3K_LIST, .type = S3F_ETAG };
	s3_fault_add(s, &et);
	s3_fault_add(s, &etl);
	struct obj_meta h1, h2;
	s3_head(s, "b", "k", &h1);
	s3_head(s, "b", "k", &h2);
	CHECK(strcmp(h1.etag, h2.etag) && strlen(h1.etag) == 32,
	      "fault: first HEAD answers a changed ETag (%s vs %s)", h1.etag, h2.etag);
	struct listed l = { .stop_at = -1 };
	char next[64];
	bool trunc;
	s3_list_page(s, "b", NULL, NULL, list_cb, &l, next, sizeof next, &trunc);
	CHECK(l.n == 1 && strcmp(l.etags[0], h2.etag), "fault: listing answers a changed ETag");
	obj_meta_release(&h1);
	obj_meta_release(&h2);
	s3_fault_clear(s);
	struct s3_fault_rule slow = { .kind = S3K_HEAD, .type = S3F_DELAY, .delay_ms = 50 };
	s3_fault_add(s, &slow);
	double t0 = unit_now_s();
	s3_head(s, "b", "k", &h1);
	obj_meta_release(&h1);
	printf("# HEAD with 50 ms of injected latency took %.1f ms\n", (unit_now_s() - t0) * 1e3);
	CHECK(s3_fault_injected(s, S3K_HEAD) == 2, "fault: the delay counts as injected");
	CHECK(s3_fault_add(s, &(struct s3_fault_rule){ .kind = S3K_PUT, .type = S3F_SHORT }) == -EINVAL &&
	      s3_fault_fail(s, S3K_GET, 1, 1, 5) == -EINVAL, "fault: bad rules refused");
	s3_fault_fail(s, S3K_PUT, 1, 0, -EACCES);
	char etag[72];
	CHECK(put_bytes(s, "b", "p", "x", NULL, 0, NULL, etag) == -EACCES &&
	      put_bytes(s, "b", "p", "x", NULL, 0, NULL, etag) == -EACCES &&
	      s3_fake_count(f, S3K_PUT) == 0, "fault: times 0 fails every PUT from the first on");
	s3_free(s);

	/* A borrowed inner store outlives the wrapper. */
	s3_fake_new(&f);
	s3_fake_bucket_add(f, "b");
	s3_fault_new(f, false, &s);
	s3_free(s);
	CHECK(s3_bucket_check(f, "b") == 0, "fault: a borrowed store is not freed");
	s3_free(f);
}

/* Sets *flag after 100 ms (a thread of its own). */
static void *cancel_later(void *arg)
{
	usleep(100000);
	atomic_store((atomic_bool *)arg, true);
	return NULL;
}

/* A thread's cancel flag (common/s3.h) ends a delayed request with
 * -ECANCELED, not passed on, and every later request of that thread;
 * other threads' requests go on. */
static void test_fault_cancel(void)
{
	struct s3 *f, *s;
	s3_fake_new(&f);
	s3_fake_bucket_add(f, "b");
	s3_fault_new(f, true, &s);
	s3_fault_add(s, &(struct s3_fault_rule){ .kind = S3K_PUT, .type = S3F_DELAY,
						 .times = 1, .delay_ms = 600000 });
	atomic_bool flag;
	atomic_init(&flag, false);
	s3_cancel_watch(&flag);
	pthread_t th;
	pthread_create(&th, NULL, cancel_later, &flag);
	char etag[72];
	int rc = put_bytes(s, "b", "slow", "x", NULL, 0, NULL, etag);
	pthread_join(th, NULL);
	CHECK(rc == -ECANCELED && s3_fake_count(f, S3K_PUT) == 0 && s3_cancelled(),
	      "fault cancel: a PUT delayed 600 s ends -ECANCELED once the flag is "
	      "set, not passed on (%d)", rc);
	struct obj_meta h;
	CHECK(s3_head(s, "b", "slow", &h) == -ECANCELED && s3_fake_count(f, S3K_HEAD) == 0,
	      "fault cancel: the thread's next request is not sent");
	s3_cancel_watch(NULL);
	CHECK(put_bytes(s, "b", "fast", "y", NULL, 0, NULL, etag) == 0 &&
	      s3_fake_count(f, S3K_PUT) == 1, "fault cancel: with no flag watched, a PUT goes");
	s3_free(s);
}

/* The hook acts as another client between two requests. */
struct hook_seen { int calls; enum s3_kind last; char key[32]; struct s3 *s; };

static void hook_fn(void *ctx, enum s3_kind k, const char *bucket, const char *key)
{
	struct hook_seen *h = ctx;
	h->calls++;
	h->last = k;
	snprintf(h->key, sizeof h->key, "%s", key ? key : "(null)");
	if (k == S3K_GET)    /* overwrite the object just before the GET */
		s3_fake_object_put(h->s, bucket, key, "new", 3, NULL, 0, NULL);
}

static void test_hook(void)
{
	struct s3 *s;
	s3_fake_new(&s);
	s3_fake_bucket_add(s, "b");
	s3_fake_object_put(s, "b", "k", "old", 3, NULL, 0, NULL);
	struct obj_meta h;
	s3_head(s, "b", "k", &h);
	struct hook_seen hs = { .s = s };
	s3_fake_hook_set(s, hook_fn, &hs);
	char buf[8];
	size_t got;
	int err = s3_get(s, "b", "k", 0, 3, h.etag, buf, &got);
	CHECK(hs.calls == 1 && hs.last == S3K_GET && !strcmp(hs.key, "k") && err == -ESTALE,
	      "hook: runs before the GET; the object it changed gives -ESTALE");
	char next[64];
	bool trunc;
	struct listed l = { .stop_at = -1 };
	s3_list_page(s, "b", NULL, NULL, list_cb, &l, next, sizeof next, &trunc);
	CHECK(hs.calls == 2 && hs.last == S3K_LIST && !strcmp(hs.key, "(null)"),
	      "hook: LIST has no key");
	s3_fake_hook_set(s, NULL, NULL);
	s3_get(s, "b", "k", 0, 3, NULL, buf, &got);
	CHECK(hs.calls == 2, "hook: removed");
	obj_meta_release(&h);
	s3_free(s);
}

/* s3_get_stream over a store that cannot stream (the fake behind the
 * fault wrapper): ranged GETs of S3_STREAM_UNIT, the bytes in order. */
struct gathered {
	char *b;
	size_t n, cap;
	unsigned calls;
};

static int gather(void *ctx, const void *p, size_t n)
{
	struct gathered *g = ctx;
	if (g->n + n > g->cap)
		return -EOVERFLOW;
	memcpy(g->b + g->n, p, n);
	g->n += n;
	g->calls++;
	return 0;
}

static void test_stream(void)
{
	struct s3 *f, *s;
	s3_fake_new(&f);
	s3_fake_bucket_add(f, "b");
	size_t n = 2 * S3_STREAM_UNIT + 5;
	char *d = malloc(n);
	for (size_t i = 0; i < n; i++)
		d[i] = (char)(i * 7 + (i >> 11));
	s3_fake_object_put(f, "b", "k", d, n, NULL, 0, NULL);
	s3_fault_new(f, true, &s);
	struct gathered g = { malloc(n), 0, n, 0 };
	uint64_t got = 0;
	int rc = s3_get_stream(s, "b", "k", 0, UINT64_MAX, NULL, gather, &g, &got);
	CHECK(rc == 0 && got == n && g.n == n && !memcmp(g.b, d, n) && g.calls == 3 &&
	      s3_fault_seen(s, S3K_GET) == 3,
	      "stream: a store that cannot stream: 3 ranged GETs, the bytes in order");
	g.n = 0;
	rc = s3_get_stream(s, "b", "k", S3_STREAM_UNIT - 1, 10, NULL, gather, &g, &got);
	CHECK(rc == 0 && got == 10 && !memcmp(g.b, d + S3_STREAM_UNIT - 1, 10),
	      "stream: a range of it");
	g.n = 0;
	rc = s3_get_stream(s, "b", "k", n + 5, UINT64_MAX, NULL, gather, &g, &got);
	CHECK(rc == 0 && got == 0 && g.n == 0, "stream: past the end: 0 bytes");
	CHECK(s3_get_stream(s, "b", "nope", 0, UINT64_MAX, NULL, gather, &g, &got) == -ENOENT,
	      "stream: a missing key: -ENOENT");
	free(g.b);
	free(d);
	s3_free(s);
}

int main(void)
{
	test_objects();
	test_list();
	test_threads();
	test_hook();
	test_fault();
	test_fault_cancel();
	test_stream();
	return unit_exit();
}
