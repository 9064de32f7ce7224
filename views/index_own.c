/* index_own.c — the gateway's own writes awaiting their events (index_own.h):
 * a chained hash table of keys, each with its writes in order. */
#include "views/index_own.h"

#include <stdlib.h>
#include <string.h>

#define OWN_BUCKETS 16384            /* power of two */
#define OWN_SWEEP_EVERY_NS 1000000000LL

struct own_ver {
	char etag[72];
	bool deleted, has_meta;
	uint64_t meta_hash;
	int64_t at_ns;
};

struct own_key {
	struct own_key *next;
	struct own_ver v[OWN_PER_KEY];
	unsigned n;
	bool record_own;             /* the index's record is our last write */
	size_t len;                  /* of name: bucket '\0' key */
	char name[];
};

struct own_table {
	struct own_key *tab[OWN_BUCKETS];
	size_t n_keys;
	int64_t last_sweep_ns;
};

struct own_table *own_new(void)
{
	return calloc(1, sizeof(struct own_table));
}

void own_free(struct own_table *t)
{
	if (!t)
		return;
	for (size_t b = 0; b < OWN_BUCKETS; b++)
		for (struct own_key *k = t->tab[b], *nx; k; k = nx) {
			nx = k->next;
			free(k);
		}
	free(t);
}

size_t own_keys(const struct own_table *t)
{
	return t->n_keys;
}

static size_t hash_of(const char *bucket, const char *key, size_t *len)
{
	uint64_t h = 1469598103934665603ULL;          /* FNV-1a */
	size_t bl = strlen(bucket), kl = strlen(key);
	for (size_t i = 0; i < bl; i++)
		h = (h ^ (unsigned char)bucket[i]) * 1099511628211ULL;
	h = (h ^ 0xffu) * 1099511628211ULL;            /* the separator */
	for (size_t i = 0; i < kl; i++)
		h = (h ^ (unsigned char)key[i]) * 1099511628211ULL;
	*len = bl + 1 + kl;
	return (size_t)(h ^ (h >> 32)) & (OWN_BUCKETS - 1);
}

static bool same_name(const struct own_key *k, const char *bucket, const char *key,
		      size_t len)
{
	size_t bl = strlen(bucket);
	return k->len == len && memcmp(k->name, bucket, bl) == 0 &&
	       k->name[bl] == '\0' && memcmp(k->name + bl + 1, key, len - bl - 1) == 0;
}

/* The link that points at bucket/key's entry (or at the chain's end). */
static struct own_key **find(struct own_table *t, const char *bucket, const char *key,
			     size_t *len, size_t *slot)
{
	*slot = hash_of(bucket, key, len);
	struct own_key **pp = &t->tab[*slot];
	while (*pp && !same_name(*pp, bucket, key, *len))
		pp = &(*pp)->next;
	return pp;
}

/* Forget k's first n versions. */
static void drop_first(struct own_key *k, unsigned n)
{
	memmove(k->v, k->v + n, (k->n - n) * sizeof k->v[0]);
	k->n -= n;
}

static void expire(struct own_key *k, int64_t now_ns)
{
	unsigned old = 0;
	while (old < k->n && now_ns - k->v[old].at_ns > OWN_TTL_NS)
		old++;
	drop_first(k, old);
}

/* Unlink *pp when it holds no version; true if it did. */
static bool unlink_empty(struct own_table *t, struct own_key **pp)
{
	struct own_key *k = *pp;
	if (k->n)
		return false;
	*pp = k->next;
	free(k);
	t->n_keys--;
	return true;
}

static void sweep(struct own_table *t, int64_t now_ns)
{
	t->last_sweep_ns = now_ns;
	for (size_t b = 0; b < OWN_BUCKETS; b++)
		for (struct own_key **pp = &t->tab[b]; *pp;) {
			expire(*pp, now_ns);
			if (!unlink_empty(t, pp))
				pp = &(*pp)->next;
		}
}

bool own_note(struct own_table *t, const char *bucket, const char *key,
	      const struct own_version *ov, int64_t now_ns)
{
	size_t len, slot;
	struct own_key **pp = find(t, bucket, key, &len, &slot);
	struct own_key *k = *pp;
	if (!k) {
		if (t->n_keys >= OWN_MAX_KEYS &&
		    now_ns - t->last_sweep_ns >= OWN_SWEEP_EVERY_NS)
			sweep(t, now_ns);
		if (t->n_keys >= OWN_MAX_KEYS)
			return false;
		k = calloc(1, sizeof *k + len + 1);
		if (!k)
			return false;
		size_t bl = strlen(bucket);
		memcpy(k->name, bucket, bl + 1);
		memcpy(k->name + bl + 1, key, len - bl);
		k->len = len;
		k->next = t->tab[slot];
		t->tab[slot] = k;
		t->n_keys++;
	}
	expire(k, now_ns);
	if (k->n == OWN_PER_KEY)
		drop_first(k, 1);
	struct own_ver *v = &k->v[k->n++];
	memset(v, 0, sizeof *v);
	if (!ov->deleted && ov->etag)
		strncpy(v->etag, ov->etag, sizeof v->etag - 1);
	v->deleted = ov->deleted;
	v->has_meta = ov->has_meta && !ov->deleted;
	v->meta_hash = ov->meta_hash;
	v->at_ns = now_ns;
	k->record_own = true;
	return true;
}

static bool matches(const struct own_ver *v, const struct own_version *ev)
{
	if (v->deleted || ev->deleted)
		return v->deleted && ev->deleted;
	if (v->has_meta && ev->has_meta && v->meta_hash != ev->meta_hash)
		return false;
	return !v->etag[0] || !ev->etag || !ev->etag[0] || strcmp(v->etag, ev->etag) == 0;
}

static uint64_t fnv(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

void own_version_of(const struct obj_meta *o, struct own_version *out)
{
	out->etag = o->etag;
	out->deleted = (o->flags & OBJ_DELETED) != 0;
	out->has_meta = (o->flags & OBJ_HAS_META) != 0;
	uint64_t sum = o->n_meta;
	for (size_t i = 0; i < o->n_meta; i++) {
		uint64_t h = fnv(1469598103934665603ULL, o->meta[i].name);
		h = (h ^ 0xffu) * 1099511628211ULL;
		sum += fnv(h, o->meta[i].value);   /* a sum: the order does not count */
	}
	out->meta_hash = sum;
}

bool own_take(struct own_table *t, const char *bucket, const char *key,
	      const struct own_version *ev, int64_t now_ns)
{
	if (!t->n_keys)
		return false;
	size_t len, slot;
	struct own_key **pp = find(t, bucket, key, &len, &slot);
	if (!*pp)
		return false;
	struct own_key *k = *pp;
	expire(k, now_ns);
	unsigned i = 0;
	while (i < k->n && !matches(&k->v[i], ev))
		i++;
	bool found = i < k->n;
	bool keeps = found && k->record_own;
	if (found)
		drop_first(k, i + 1);
	unlink_empty(t, pp);
	return keeps;
}

void own_replaced(struct own_table *t, const char *bucket, const char *key)
{
	if (!t->n_keys)
		return;
	size_t len, slot;
	struct own_key *k = *find(t, bucket, key, &len, &slot);
	if (k)
		k->record_own = false;
}
