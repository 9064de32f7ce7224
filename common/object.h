/*
 * object.h — what facetfs knows of one S3 object: the record the event
 * decoder fills (events/), the index stores (views/), the filters match
 * (views/) and the mount shows (fuse/).
 *
 * Ownership: every pointer inside a struct obj_meta is malloc'ed and owned
 * by the struct; obj_meta_release() frees them and zeroes the struct.
 * obj_meta_copy() makes a deep copy. User-metadata names are stored in lower
 * case without the "x-amz-meta-" prefix (docs/design.md "User metadata").
 *
 * Version stamps: `seq` holds the store's sequencer normalised to an
 * upper-case hex string that compares correctly with seq_cmp() (RGW's is
 * decoded from (seconds, nanoseconds) little-endian pairs into the hex of
 * nanoseconds since the epoch; AWS and MinIO's are kept as they are). An empty
 * seq means "unknown" and compares as incomparable.
 *
 * Tests: test_common.c; test_s3_fake.c and test_record.c build and compare
 * records.
 */
#ifndef FACETFS_OBJECT_H
#define FACETFS_OBJECT_H

#include <stddef.h>
#include <stdint.h>

struct obj_kv {
	char *name;
	char *value;
};

enum obj_flags {
	OBJ_DELETED   = 1u << 0, /* a tombstone: the object was deleted */
	OBJ_FROM_SCAN = 1u << 1, /* last written by a bucket LIST, not an event */
	OBJ_HAS_META  = 1u << 2, /* meta[] is known (AWS events carry none) */
	OBJ_HAS_TAGS  = 1u << 3, /* tags[] is known */
	OBJ_HAS_CTYPE = 1u << 4, /* content_type is known */
};

struct obj_meta {
	char *bucket;
	char *key;               /* decoded UTF-8 key */
	uint64_t size;
	int64_t mtime_ns;        /* Last-Modified (scan/HEAD) or eventTime, ns since epoch */
	char etag[72];           /* without quotes; "" if unknown */
	char seq[40];            /* normalised sequencer, "" if unknown */
	char *content_type;      /* NULL if unknown */
	struct obj_kv *meta;     /* user metadata, names lower-case */
	size_t n_meta;
	struct obj_kv *tags;
	size_t n_tags;
	uint32_t flags;          /* enum obj_flags */
};

void obj_meta_release(struct obj_meta *o);
/* Deep copy; 0 or -ENOMEM (then *dst is zeroed). */
int obj_meta_copy(struct obj_meta *dst, const struct obj_meta *src);
/* Append a name/value pair (copied) to meta[] or tags[]; 0 or -ENOMEM. */
int obj_kv_add(struct obj_kv **arr, size_t *n, const char *name, const char *value);
/* Copy n pairs into a new array (*dst NULL when n is 0); 0 or -ENOMEM
 * (then *dst is NULL and *n_dst 0). */
int obj_kv_copy(struct obj_kv **dst, size_t *n_dst, const struct obj_kv *src,
		size_t n);
/* strdup of a string that may be NULL (NULL then); on failure NULL and
 * *err = -ENOMEM (so several copies can share one check). */
char *obj_strdup_opt(const char *s, int *err);
/* Free n pairs and the array (as obj_meta_release does); NULL is a no-op. */
void obj_kv_free(struct obj_kv *arr, size_t n);
/* Value of a user-metadata name (lower case) or NULL. */
const char *obj_meta_get(const struct obj_meta *o, const char *name);

/* Compare two normalised sequencers: <0, 0, >0, or SEQ_INCOMPARABLE when
 * either is empty. Shorter strings are treated as left-padded with zeros. */
#define SEQ_INCOMPARABLE 2
int seq_cmp(const char *a, const char *b);

#endif
