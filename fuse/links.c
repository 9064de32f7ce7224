/* links.c — see links.h. */
#include "fuse/links.h"

#include "common/lock.h"
#include "common/hash.h"
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct slot {
	char etag[72];
	char *target;            /* NULL: empty */
	size_t len;
};

struct links {
	pthread_mutex_t lock;    /* protects slots */
	struct slot slots[LINKS_SLOTS];
};

int links_new(struct links **out)
{
	struct links *l = calloc(1, sizeof *l);
	if (!l)
		return -ENOMEM;
	pthread_mutex_init(&l->lock, NULL);
	*out = l;
	return 0;
}

void links_free(struct links *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < LINKS_SLOTS; i++)
		free(l->slots[i].target);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

static struct slot *slot_of(struct links *l, const char *etag)
{
	return &l->slots[hash_fnv_str(HASH_FNV_SEED, etag) % LINKS_SLOTS];
}

void links_put(struct links *l, const char *etag, const char *target)
{
	if (!etag[0] || strlen(etag) >= sizeof l->slots[0].etag)
		return;
	char *copy = strdup(target);
	if (!copy)
		return;
	mod_lock(&l->lock);
	struct slot *s = slot_of(l, etag);
	char *old = s->target;
	s->target = copy;
	s->len = strlen(copy);
	strcpy(s->etag, etag);
	mod_unlock(&l->lock);
	free(old);
}

bool links_get(struct links *l, const char *etag, size_t len, char *buf, size_t size)
{
	if (!etag[0])
		return false;
	bool hit = false;
	mod_lock(&l->lock);
	struct slot *s = slot_of(l, etag);
	if (s->target && s->len == len && len < size && strcmp(s->etag, etag) == 0) {
		memcpy(buf, s->target, len + 1);
		hit = true;
	}
	mod_unlock(&l->lock);
	return hit;
}
