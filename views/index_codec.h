/*
 * index_codec.h — byte-level pieces of the index (views/index*.c only):
 * growable buffers, a bump arena, varints, and the binary encodings of the
 * LevelDB keys and values listed in index.h.
 *
 * Record value ('O'), version 1:
 *   u8 1, varint flags, varint size, varint zigzag(mtime_ns),
 *   str etag, str seq, ostr content_type, varint n_meta {str name, str value},
 *   varint n_tags {str name, str value}
 * Membership value ('M'), version 1:
 *   u8 1, varint size, varint zigzag(mtime_ns), str etag, str bucket, str key
 * version 2 (the object carries POSIX attributes, common/posix.h): u8 2,
 *   the same, then varint have and, for each bit set, varint mode, uid,
 *   gid, zigzag mtime, atime, ctime (in that order)
 * str = varint length, bytes, \0 (so decoded strings point into the value);
 * ostr = varint (length + 1), 0 meaning NULL, then as str.
 *
 * Ownership: decoders never allocate except obj_kv arrays from the arena;
 * decoded strings point into the decoded buffer, which must outlive them.
 * Nothing here is thread-safe by itself; each buffer has one owner.
 *
 * Tests: test_index.c (through index.h); no unit test of its own.
 */
#ifndef FACETFS_INDEX_CODEC_H
#define FACETFS_INDEX_CODEC_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/object.h"
#include "common/posix.h"

/* A growable byte buffer; zero-initialise, ibuf_release() when done.
 * The appends are inline (they run a few times per key of every apply);
 * only growing the buffer is a call. */
struct ibuf { char *p; size_t len, cap; };
int  ibuf_grow(struct ibuf *b, size_t extra);       /* 0 / -ENOMEM */
void ibuf_release(struct ibuf *b);

static inline int ibuf_reserve(struct ibuf *b, size_t extra)   /* 0 / -ENOMEM */
{
	return b->len + extra <= b->cap ? 0 : ibuf_grow(b, extra);
}

static inline int ibuf_add(struct ibuf *b, const void *p, size_t n)
{
	if (ibuf_reserve(b, n) < 0)
		return -ENOMEM;
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

static inline int ibuf_addc(struct ibuf *b, char c)
{
	if (ibuf_reserve(b, 1) < 0)
		return -ENOMEM;
	b->p[b->len++] = c;
	return 0;
}

static inline int ibuf_add_varint(struct ibuf *b, uint64_t v)
{
	if (ibuf_reserve(b, 10) < 0)
		return -ENOMEM;
	unsigned char *p = (unsigned char *)b->p + b->len;
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (unsigned char)v;
	b->len += n;
	return 0;
}

/* str; NULL as "" */
static inline int ibuf_add_str(struct ibuf *b, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (ibuf_reserve(b, n + 11) < 0)
		return -ENOMEM;
	ibuf_add_varint(b, n);   /* cannot fail: reserved */
	if (n)
		memcpy(b->p + b->len, s, n);
	b->p[b->len + n] = '\0';
	b->len += n + 1;
	return 0;
}

/* Bump allocator: blocks never move; arena_reset() keeps the first block. */
struct arena_blk;
struct arena { struct arena_blk *head; };
void *arena_alloc(struct arena *a, size_t n);       /* 8-aligned; NULL = ENOMEM */
char *arena_dup(struct arena *a, const void *p, size_t n); /* adds a \0 */
void  arena_reset(struct arena *a);
void  arena_release(struct arena *a);

/* Keys. Each appends to b (which the caller cleared). */
int  key_object(struct ibuf *b, const char *bucket, const char *key);
int  key_view_prefix(struct ibuf *b, const char *view);   /* 'M' view \0 */
/* Append path with every '/' written as \0. */
int  key_add_path(struct ibuf *b, const char *path);
int  key_offset(struct ibuf *b, const char *topic, int32_t partition);
int  key_scan(struct ibuf *b, const char *bucket);
int  key_vhash(struct ibuf *b, const char *view);
int  key_count_objects(struct ibuf *b);
int  key_count_view(struct ibuf *b, const char *view);

/* Record value. obj's bucket/key are not encoded. */
int  rec_encode(struct ibuf *b, const struct obj_meta *o);
/* Decode into *o (bucket/key left NULL); strings point into buf, obj_kv
 * arrays come from ar. -EINVAL when malformed. */
int  rec_decode(const char *buf, size_t len, struct arena *ar, struct obj_meta *o);
/* Only the flags of a record value (OBJ_DELETED, OBJ_FROM_SCAN...), for
 * walks that need nothing else; -EINVAL when the head is malformed. */
int  rec_flags(const char *buf, size_t len, uint32_t *flags);

/* Membership value. */
struct member_val {
	uint64_t size;
	int64_t mtime_ns;
	const char *etag, *bucket, *key;   /* point into the value */
	struct obj_posix px;               /* have 0 in a version 1 value */
};
int  member_encode(struct ibuf *b, const struct obj_meta *o);
int  member_decode(const char *buf, size_t len, struct member_val *out);

void be64_put(char out[8], uint64_t v);
uint64_t be64_get(const char in[8]);

#endif
