/* index_own.c — the gateway's own writes awaiting their events (index_own.h):
 * a chained hash table of keys, each with its writes in order. */
#include "views/index_own.h"

#include "common/hash.h"
#include <stdlib.h>
#include <string.h>

#define OWN_BUCKETS 16384            /* power of two */
#define OWN_SWEEP_EVERY_NS 1000000000LL

struct own_ver {                     /* 32 bytes */
	uint64_t etag_hash;          /* FNV-1a of the ETag (has_etag) */
	uint64_t meta_hash;
	int64_t at_ns;
	bool has_etag, deleted, has_meta;
};

struct own_key {
	struct own_key *next;
	struct own_ver *v;           /* cap slots, grown by doubling */
	unsigned n, cap;
	bool record_own;             /* the index's record is our last write */
	size_t len;                  /* of name: bucket '\0' key */
	char name[];
};

struct own_table {
	struct own_key *tab[OWN_BUCKETS];
	size_t n_keys;
	size_t n_vers;               /* versions held, all keys */
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
			free(k->v);
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
	size_t bl = strlen(bucket), kl = strlen(key);
	uint64_t h = hash_fnv_bytes(HASH_FNV_SEED, bucket, bl);
	h = hash_fnv_bytes(hash_fnv_byte(h, 0xff), key, kl);   /* 0xff: the separator */
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
static void drop_first(struct own_table *t, struct own_key *k, unsigned n)
{
	if (!n)
		return;              /* k->v may be NULL: nothing was ever held */
	memmove(k->v, k->v + n, (k->n - n) * sizeof k->v[0]);
	k->n -= n;
	t->n_vers -= n;
}

static void expire(struct own_table *t, struct own_key *k, int64_t now_ns)
{
	unsigned old = 0;
	while (old < k->n && now_ns - k->v[old].at_ns > OWN_TTL_NS)
		old++;
	drop_first(t, k, old);
}

/* Unlink *pp when it holds no version; true if it did. */
static bool unlink_empty(struct own_table *t, struct own_key **pp)
{
	struct own_key *k = *pp;
	if (k->n)
		return false;
	*pp = k->next;
	free(k->v);
	free(k);
	t->n_keys--;
	return true;
}

static void sweep(struct own_table *t, int64_t now_ns)
{
	t->last_sweep_ns = now_ns;
	for (size_t b = 0; b < OWN_BUCKETS; b++)
		for (struct own_key **pp = &t->tab[b]; *pp;) {
			expire(t, *pp, now_ns);
			if (!unlink_empty(t, pp))
				pp = &(*pp)->next;
		}
}

/* Room for one more version in k: the key's oldest goes when it holds
 * OWN_PER_KEY, or when the table holds OWN_MAX_VERSIONS and the key has
 * one to give; false if there is none. (No sweep here: it would free a
 * key just made, which holds nothing yet; own_note sweeps first.) */
static bool make_room(struct own_table *t, struct own_key *k)
{
	if (k->n == OWN_PER_KEY) {
		drop_first(t, k, 1);
		return true;
	}
	if (t->n_vers >= OWN_MAX_VERSIONS) {
		if (!k->n)
			return false;
		drop_first(t, k, 1);
	}
	if (k->n == k->cap) {
		unsigned cap = k->cap ? 2 * k->cap : 2;
		if (cap > OWN_PER_KEY)
			cap = OWN_PER_KEY;
		struct own_ver *v = realloc(k->v, cap * sizeof *v);
		if (!v)
			return false;
		k->v = v;
		k->cap = cap;
	}
	return true;
}

bool own_note(struct own_table *t, const char *bucket, const char *key,
	      const struct own_version *ov, int64_t now_ns)
{
	if ((t->n_keys >= OWN_MAX_KEYS || t->n_vers >= OWN_MAX_VERSIONS) &&
	    now_ns - t->last_sweep_ns >= OWN_SWEEP_EVERY_NS)
		sweep(t, now_ns);
	size_t len, slot;
	struct own_key **pp = find(t, bucket, key, &len, &slot);
	struct own_key *k = *pp;
	if (!k) {
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
		pp = &t->tab[slot];
	}
	expire(t, k, now_ns);
	if (!make_room(t, k)) {
		unlink_empty(t, pp);     /* a key just made holds nothing */
		return false;
	}
	struct own_ver *v = &k->v[k->n++];
	t->n_vers++;
	memset(v, 0, sizeof *v);
	v->has_etag = !ov->deleted && ov->etag && ov->etag[0];
	if (v->has_etag)
		v->etag_hash = hash_fnv_str(HASH_FNV_SEED, ov->etag);
	v->deleted = ov->deleted;
	v->has_meta = ov->has_meta && !ov->deleted;
	v->meta_hash = ov->meta_hash;
	v->at_ns = now_ns;
	k->record_own = true;
	return true;
}

/* ev_etag_hash: fnv of ev->etag, when it has one. */
static bool matches(const struct own_ver *v, const struct own_version *ev,
		    uint64_t ev_etag_hash)
{
	if (v->deleted || ev->deleted)
		return v->deleted && ev->deleted;
	if (v->has_meta && ev->has_meta && v->meta_hash != ev->meta_hash)
		return false;
	return !v->has_etag || !ev->etag || !ev->etag[0] || v->etag_hash == ev_etag_hash;
}


void own_version_of(const struct obj_meta *o, struct own_version *out)
{
	out->etag = o->etag;
	out->deleted = (o->flags & OBJ_DELETED) != 0;
	out->has_meta = (o->flags & OBJ_HAS_META) != 0;
	uint64_t sum = o->n_meta;
	for (size_t i = 0; i < o->n_meta; i++) {
		uint64_t h = hash_fnv_str(HASH_FNV_SEED, o->meta[i].name);
		h = hash_fnv_byte(h, 0xff);
		sum += hash_fnv_str(h, o->meta[i].value);   /* a sum: the order does not count */
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
	expire(t, k, now_ns);
	uint64_t eh = ev->etag ? hash_fnv_str(HASH_FNV_SEED, ev->etag) : 0;
	unsigned i = 0;
	while (i < k->n && !matches(&k->v[i], ev, eh))
		i++;
	bool found = i < k->n;
	bool keeps = found && k->record_own;
	if (found)
		drop_first(t, k, i + 1);
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
