/*
 * route.c — see route.h. Per bucket, the distinct literal prefixes of its
 * views in byte order, each with its views and its parent (the longest
 * other prefix in the table that is a prefix of it).
 *
 * Why one binary search suffices: let P be the greatest table prefix <= key.
 * Every table prefix Q of the key satisfies Q <= P <= key, and any string
 * between Q and a key that starts with Q starts with Q itself, so Q is a
 * prefix of P: the prefixes of the key are exactly those ancestors of P
 * (P included) no longer than the common prefix of P and the key.
 */
#include "views/route.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

struct rt_node {
	char *p;                /* the prefix (NUL-terminated copy) */
	size_t n;
	size_t *views;          /* ascending */
	size_t nv;
	ssize_t parent;         /* -1: none */
};

struct rt_bucket {
	char *name;
	struct rt_node *nodes;  /* sorted by prefix bytes */
	size_t nn;
	size_t nviews;
};

struct route {
	struct rt_bucket *b;    /* sorted by name */
	size_t nb;
	size_t max;
};

/* One (bucket, prefix, view) triple while building. */
struct rt_ent {
	const char *bucket;
	const char *p;
	size_t n;
	size_t view;
};

static int bytes_cmp(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);
	return c ? c : (al > bl) - (al < bl);
}

static int ent_cmp(const void *x, const void *y)
{
	const struct rt_ent *a = x, *b = y;
	int c = strcmp(a->bucket, b->bucket);
	if (!c)
		c = bytes_cmp(a->p, a->n, b->p, b->n);
	if (!c)
		c = (a->view > b->view) - (a->view < b->view);
	return c;
}

void route_free(struct route *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nb; i++) {
		struct rt_bucket *b = &r->b[i];
		for (size_t j = 0; j < b->nn; j++) {
			free(b->nodes[j].p);
			free(b->nodes[j].views);
		}
		free(b->nodes);
		free(b->name);
	}
	free(r->b);
	free(r);
}

/* Parents by one pass in sorted order with a stack of open ancestors. */
static int link_parents(struct rt_bucket *b)
{
	ssize_t *stack = malloc((b->nn ? b->nn : 1) * sizeof *stack);
	if (!stack)
		return -ENOMEM;
	size_t top = 0;
	for (size_t j = 0; j < b->nn; j++) {
		struct rt_node *nd = &b->nodes[j];
		while (top) {
			const struct rt_node *a = &b->nodes[stack[top - 1]];
			if (a->n < nd->n && memcmp(a->p, nd->p, a->n) == 0)
				break;
			top--;
		}
		nd->parent = top ? stack[top - 1] : -1;
		stack[top++] = (ssize_t)j;
	}
	free(stack);
	return 0;
}

/* Group the sorted triples of one bucket, ents[0..n), into nodes. */
static int bucket_fill(struct rt_bucket *b, const struct rt_ent *e, size_t n)
{
	b->name = strdup(e[0].bucket);
	b->nodes = calloc(n, sizeof *b->nodes);
	if (!b->name || !b->nodes)
		return -ENOMEM;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j < n && e[j].n == e[i].n && memcmp(e[j].p, e[i].p, e[i].n) == 0)
			j++;
		struct rt_node *nd = &b->nodes[b->nn++];
		nd->p = strndup(e[i].p, e[i].n);
		nd->n = e[i].n;
		nd->views = malloc((j - i) * sizeof *nd->views);
		if (!nd->p || !nd->views)
			return -ENOMEM;
		for (size_t k = i; k < j; k++)
			if (!nd->nv || nd->views[nd->nv - 1] != e[k].view)
				nd->views[nd->nv++] = e[k].view;
		b->nviews += nd->nv;
		i = j;
	}
	return link_parents(b);
}

int route_build(const struct view *const *views, size_t n, struct route **out)
{
	*out = NULL;
	size_t ne = 0;
	for (size_t i = 0; i < n; i++)
		ne += view_n_buckets(views[i]);
	struct route *r = calloc(1, sizeof *r);
	struct rt_ent *e = malloc((ne ? ne : 1) * sizeof *e);
	int rc = -ENOMEM;
	if (!r || !e)
		goto fail;
	ne = 0;
	for (size_t i = 0; i < n; i++) {
		size_t pl;
		const char *p = view_key_prefix(views[i], &pl);
		for (size_t j = 0; j < view_n_buckets(views[i]); j++)
			e[ne++] = (struct rt_ent){ view_bucket(views[i], j), p, pl, i };
	}
	if (ne > 1)
		qsort(e, ne, sizeof *e, ent_cmp);
	size_t nb = 0;
	for (size_t i = 0; i < ne; i++)
		nb += i == 0 || strcmp(e[i].bucket, e[i - 1].bucket) != 0;
	r->b = calloc(nb ? nb : 1, sizeof *r->b);
	if (!r->b)
		goto fail;
	for (size_t i = 0; i < ne;) {
		size_t j = i;
		while (j < ne && strcmp(e[j].bucket, e[i].bucket) == 0)
			j++;
		struct rt_bucket *b = &r->b[r->nb++];
		rc = bucket_fill(b, e + i, j - i);
		if (rc < 0)
			goto fail;
		if (b->nviews > r->max)
			r->max = b->nviews;
		i = j;
	}
	free(e);
	*out = r;
	return 0;
fail:
	free(e);
	route_free(r);
	return rc;
}

size_t route_max(const struct route *r)
{
	return r->max;
}

static const struct rt_bucket *bucket_find(const struct route *r, const char *name)
{
	size_t lo = 0, hi = r->nb;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(r->b[mid].name, name);
		if (c == 0)
			return &r->b[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static void sort_small(size_t *a, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		size_t x = a[i], j = i;
		for (; j > 0 && a[j - 1] > x; j--)
			a[j] = a[j - 1];
		a[j] = x;
	}
}

static int size_cmp(const void *x, const void *y)
{
	size_t a = *(const size_t *)x, b = *(const size_t *)y;
	return (a > b) - (a < b);
}

size_t route_find(const struct route *r, const char *bucket, const char *key,
		  size_t key_len, size_t *out)
{
	const struct rt_bucket *b = bucket ? bucket_find(r, bucket) : NULL;
	if (!b || !key)
		return 0;
	/* first node > key; the one before it is the greatest <= key */
	size_t lo = 0, hi = b->nn;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (bytes_cmp(b->nodes[mid].p, b->nodes[mid].n, key, key_len) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return 0;
	ssize_t j = (ssize_t)lo - 1;
	const struct rt_node *top = &b->nodes[j];
	size_t common = 0;
	while (common < top->n && common < key_len && top->p[common] == key[common])
		common++;
	size_t cnt = 0, groups = 0;
	for (; j >= 0; j = b->nodes[j].parent) {
		const struct rt_node *nd = &b->nodes[j];
		if (nd->n > common)
			continue;
		memcpy(out + cnt, nd->views, nd->nv * sizeof *out);
		cnt += nd->nv;
		groups++;
	}
	if (groups > 1) {
		if (cnt <= 32)
			sort_small(out, cnt);
		else
			qsort(out, cnt, sizeof *out, size_cmp);
	}
	return cnt;
}
