/*
 * hash.h — FNV-1a 64, the one string hash the modules share (hash tables
 * of names and versions, the index's key filter, inode numbers).
 *
 * A hash is built by folding pieces into a running value that starts at
 * HASH_FNV_SEED: hash_fnv_bytes() for n bytes, hash_fnv_str() for a
 * NUL-terminated string (NULL adds nothing), hash_fnv_byte() for one
 * separator byte between pieces. The values are those of plain FNV-1a, so
 * numbers derived from them (inode numbers) stay what they were. No
 * state, any thread.
 *
 * Tests: no unit test of its own; its users' tests (test_bcache.c,
 * test_readcache.c) go through it.
 */
#ifndef FACETFS_HASH_H
#define FACETFS_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_FNV_SEED  1469598103934665603ULL
#define HASH_FNV_PRIME 1099511628211ULL

static inline uint64_t hash_fnv_byte(uint64_t h, unsigned char c)
{
	return (h ^ c) * HASH_FNV_PRIME;
}

static inline uint64_t hash_fnv_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++)
		h = hash_fnv_byte(h, s[i]);
	return h;
}

static inline uint64_t hash_fnv_str(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = hash_fnv_byte(h, (unsigned char)*s);
	return h;
}

#endif
