/* pins.c — see pins.h. A chained hash table of pinned versions. */
#include "sync/cache/pins.h"

#include "common/lock.h"
#include "common/hash.h"
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 1024u

struct pin {
	char *bucket, *key, *etag;
	unsigned refs;
	bool drop;                   /* a drop came while pinned */
	uint64_t drop_size;
	struct pin *next;
};

struct pins {
	struct bcache *bc;
	pthread_mutex_t lock;        /* protects tab */
	struct pin *tab[NBUCKETS];
};

static unsigned slot_of(const struct bcache_id *id)
{
	uint64_t h = hash_fnv_str(HASH_FNV_SEED, id->bucket);
	h = hash_fnv_str(hash_fnv_byte(h, '/'), id->key);
	h = hash_fnv_str(h, id->etag);
	return (unsigned)(h % NBUCKETS);
}

/* The entry of id in its chain (*link: where it hangs), or NULL. */
static struct pin *find(struct pins *p, const struct bcache_id *id, struct pin ***link)
{
	struct pin **l = &p->tab[slot_of(id)];
	while (*l && (strcmp((*l)->key, id->key) || strcmp((*l)->etag, id->etag) ||
		      strcmp((*l)->bucket, id->bucket)))
		l = &(*l)->next;
	*link = l;
	return *l;
}

static void pin_free(struct pin *x)
{
	free(x->bucket);
	free(x->key);
	free(x->etag);
	free(x);
}

int pins_new(struct bcache *bc, struct pins **out)
{
	struct pins *p = calloc(1, sizeof *p);
	if (!p)
		return -ENOMEM;
	p->bc = bc;
	pthread_mutex_init(&p->lock, NULL);
	*out = p;
	return 0;
}

void pins_free(struct pins *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < NBUCKETS; i++)
		while (p->tab[i]) {
			struct pin *x = p->tab[i];
			p->tab[i] = x->next;
			pin_free(x);
		}
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int pins_pin(struct pins *p, const struct bcache_id *id)
{
	struct pin **link, *x;
	mod_lock(&p->lock);
	if ((x = find(p, id, &link))) {
		x->refs++;
		mod_unlock(&p->lock);
		return 0;
	}
	x = calloc(1, sizeof *x);
	if (!x || !(x->bucket = strdup(id->bucket)) || !(x->key = strdup(id->key)) ||
	    !(x->etag = strdup(id->etag))) {
		mod_unlock(&p->lock);
		if (x)
			pin_free(x);
		return -ENOMEM;
	}
	x->refs = 1;
	*link = x;
	mod_unlock(&p->lock);
	return 0;
}

void pins_unpin(struct pins *p, const struct bcache_id *id)
{
	struct pin **link, *x;
	mod_lock(&p->lock);
	if (!(x = find(p, id, &link)) || --x->refs) {
		mod_unlock(&p->lock);
		return;
	}
	*link = x->next;
	mod_unlock(&p->lock);
	if (x->drop) {
		struct bcache_id d = { x->bucket, x->key, x->etag };
		bcache_drop(p->bc, &d, x->drop_size);
	}
	pin_free(x);
}

void pins_drop(struct pins *p, const struct bcache_id *id, uint64_t size)
{
	struct pin **link, *x;
	mod_lock(&p->lock);
	if ((x = find(p, id, &link))) {
		x->drop = true;
		x->drop_size = size;
		mod_unlock(&p->lock);
		return;
	}
	mod_unlock(&p->lock);
	bcache_drop(p->bc, id, size);
}
