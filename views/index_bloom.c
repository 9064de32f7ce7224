/*
 * index_bloom.c — an in-memory Bloom filter of every 'O' key the index
 * holds, so that applying an event for a key never seen (the common case
 * while objects are being created) skips the LevelDB Get, which costs more
 * than anything else of an apply (a memtable walk plus an index-block search
 * and a filter probe in every level).
 *
 * Correctness needs no false negatives, so the filter is only used once it
 * is complete: a builder thread iterates the 'O' keys of a snapshot taken
 * AFTER the new filter was published to the writers (ix->bloom_building,
 * under wmu), and writers add every 'O' key they write to both filters. So
 * every key is either in the snapshot or added by a writer. When the
 * builder is done the filter replaces ix->bloom (under wmu). A filter that
 * fills past its capacity is rebuilt bigger the same way; until then the
 * old one keeps answering (more false positives, never false negatives).
 * Readers (index_object_get, index_same_version) probe the complete filter
 * too, under bloom_mu, which every replacement of ix->bloom also takes.
 */
#include "views/index_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/lock.h"
#include "common/log.h"

#define BLOOM_K 7
#define BLOOM_MIN_KEYS (1u << 20)

struct ix_bloom {
	_Atomic uint64_t *bits;
	uint64_t nbits;           /* a multiple of 64 */
	uint64_t capacity;        /* keys it was sized for */
	atomic_uint_fast64_t added;
};

static struct ix_bloom *bloom_new(uint64_t capacity)
{
	if (capacity < BLOOM_MIN_KEYS)
		capacity = BLOOM_MIN_KEYS;
	/* 10 bits a key: about 1 % false positives */
	uint64_t nbits = (capacity * 10 + 63) / 64 * 64;
	struct ix_bloom *b = calloc(1, sizeof *b);
	if (!b)
		return NULL;
	b->bits = calloc(nbits / 64, sizeof *b->bits);
	if (!b->bits) {
		free(b);
		return NULL;
	}
	b->nbits = nbits;
	b->capacity = capacity;
	atomic_init(&b->added, 0);
	return b;
}

void ix_bloom_free(struct ix_bloom *b)
{
	if (!b)
		return;
	free((void *)b->bits);
	free(b);
}

static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h | 1;
}

/* The bit h stands for: h scaled into [0, nbits) by its high bits (a
 * multiply, not a modulo), so the filter can have exactly the bits its
 * capacity needs. */
static inline uint64_t bit_of(const struct ix_bloom *b, uint64_t h)
{
	h *= 0x9e3779b97f4a7c15ULL;   /* the low bits of h reach the high ones */
	return (uint64_t)(((unsigned __int128)h * b->nbits) >> 64);
}

void ix_bloom_add(struct ix_bloom *b, uint64_t h)
{
	uint64_t step = mix(h);
	for (int i = 0; i < BLOOM_K; i++, h += step) {
		uint64_t bit = bit_of(b, h);
		atomic_fetch_or_explicit(&b->bits[bit >> 6], 1ULL << (bit & 63),
					 memory_order_relaxed);
	}
	atomic_fetch_add_explicit(&b->added, 1, memory_order_relaxed);
}

bool ix_bloom_maybe(const struct ix_bloom *b, uint64_t h)
{
	uint64_t step = mix(h);
	for (int i = 0; i < BLOOM_K; i++, h += step) {
		uint64_t bit = bit_of(b, h);
		uint64_t w = atomic_load_explicit(&b->bits[bit >> 6], memory_order_relaxed);
		if (!(w & (1ULL << (bit & 63))))
			return false;
	}
	return true;
}

static void *builder_main(void *arg)
{
	struct index *ix = arg;
	/* ix->bloom_building is published; the iterator's snapshot is later */
	leveldb_readoptions_t *ro = leveldb_readoptions_create();
	leveldb_readoptions_set_fill_cache(ro, 0);
	leveldb_iterator_t *it = leveldb_create_iterator(ix->db, ro);
	struct ix_bloom *nb = ix->bloom_building;   /* stays until we install it */
	uint64_t n = 0;
	bool stopped = false;
	for (leveldb_iter_seek(it, "O", 1); leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t kl;
		const char *k = leveldb_iter_key(it, &kl);
		if (kl < 1 || k[0] != 'O')
			break;
		ix_bloom_add(nb, ix_key_hash(k, kl));
		if ((++n & 0xffff) == 0 && atomic_load(&ix->bloom_stop)) {
			stopped = true;
			break;
		}
	}
	char *err = NULL;
	leveldb_iter_get_error(it, &err);
	leveldb_iter_destroy(it);
	leveldb_readoptions_destroy(ro);
	if (err) {
		log_warn("index: key filter not built (%s); every apply reads", err);
		leveldb_free(err);
		stopped = true;
	}
	pthread_mutex_lock(&ix->wmu);
	ix->bloom_building = NULL;
	if (!stopped) {
		mod_lock(&ix->bloom_mu);
		struct ix_bloom *old = ix->bloom;
		ix->bloom = nb;
		nb = old;
		mod_unlock(&ix->bloom_mu);
	}
	ix->bloom_running = false;
	pthread_mutex_unlock(&ix->wmu);
	ix_bloom_free(nb);
	return NULL;
}

void ix_bloom_maybe_rebuild(struct index *ix, uint64_t capacity)
{
	if (ix->bloom_running || atomic_load(&ix->bloom_stop))
		return;
	if (ix->bloom && atomic_load(&ix->bloom->added) <= ix->bloom->capacity)
		return;
	if (ix->bloom_joinable) {
		pthread_join(ix->bloom_thread, NULL);
		ix->bloom_joinable = false;
	}
	if (ix->bloom)
		capacity = 4 * atomic_load(&ix->bloom->added);
	struct ix_bloom *nb = bloom_new(capacity);
	if (!nb)
		return;   /* keep reading every key: slower, not wrong */
	ix->bloom_building = nb;
	ix->bloom_running = true;
	if (pthread_create(&ix->bloom_thread, NULL, builder_main, ix) != 0) {
		ix->bloom_building = NULL;
		ix->bloom_running = false;
		ix_bloom_free(nb);
		return;
	}
	ix->bloom_joinable = true;
}

void ix_bloom_stop(struct index *ix)
{
	atomic_store(&ix->bloom_stop, true);
	if (ix->bloom_joinable)
		pthread_join(ix->bloom_thread, NULL);
	ix->bloom_joinable = false;
	mod_lock(&ix->bloom_mu);
	ix_bloom_free(ix->bloom);
	ix->bloom = NULL;
	mod_unlock(&ix->bloom_mu);
}

bool ix_bloom_may_hold(struct index *ix, const char *k, size_t kl)
{
	uint64_t h = ix_key_hash(k, kl);
	mod_lock(&ix->bloom_mu);
	bool maybe = !ix->bloom || ix_bloom_maybe(ix->bloom, h);
	mod_unlock(&ix->bloom_mu);
	return maybe;
}

void index_mem(struct index *ix, struct index_mem *out)
{
	char *v = leveldb_property_value(ix->db, "leveldb.approximate-memory-usage");
	out->store_bytes = v ? strtoull(v, NULL, 10) : 0;
	leveldb_free(v);
	mod_lock(&ix->bloom_mu);
	out->filter_bytes = ix->bloom ? ix->bloom->nbits / 8 : 0;
	mod_unlock(&ix->bloom_mu);
}

bool index_filter_ready(struct index *ix)
{
	pthread_mutex_lock(&ix->wmu);
	bool ready = ix->bloom != NULL;
	pthread_mutex_unlock(&ix->wmu);
	return ready;
}
