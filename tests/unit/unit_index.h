/*
 * unit_index.h — records the index tests build (include after unit.h):
 * an object with size, time (s), ETag and sequencer; a tombstone.
 */
#ifndef FACETFS_TEST_UNIT_INDEX_H
#define FACETFS_TEST_UNIT_INDEX_H

#include <stdlib.h>
#include <string.h>

#include "common/object.h"

#define S 1000000000LL

static inline struct obj_meta mk(const char *bucket, const char *key, uint64_t size,
			  int64_t mtime_s, const char *etag, const char *seq)
{
	struct obj_meta o;
	memset(&o, 0, sizeof o);
	o.bucket = strdup(bucket);
	o.key = strdup(key);
	o.size = size;
	o.mtime_ns = mtime_s * S;
	snprintf(o.etag, sizeof o.etag, "%s", etag ? etag : "");
	snprintf(o.seq, sizeof o.seq, "%s", seq ? seq : "");
	o.flags = OBJ_HAS_META;
	return o;
}

static inline struct obj_meta mkdel(const char *bucket, const char *key, int64_t t, const char *seq)
{
	struct obj_meta o = mk(bucket, key, 0, t, "", seq);
	o.flags = OBJ_DELETED;
	return o;
}

static inline void release_all(struct obj_meta *o, size_t n)
{
	for (size_t i = 0; i < n; i++)
		obj_meta_release(&o[i]);
}

#endif
