/* core_mend.c — the start's mend of the index (core.h core_mend_unsent):
 * a name this mount made or staged is in the index with no ETag
 * (index.h 'U') from its create until its upload. A crash leaves such a
 * record behind when what it stood for never became a pending file of
 * the next run: a create, a symlink or a rename in flight, a file whose
 * data recovery moved to recovered/. Each one not taken up by the drain
 * gets what S3 holds of its key now (a HEAD): that version, or a
 * tombstone when S3 has none. core_mknod.c mends the name of a one-shot
 * node whose upload failed the same way. Uses core.c and core_ofile.c
 * only.
 */
#include "fuse/core_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/log.h"
#include "common/s3.h"
#include "views/index.h"

struct unsent {
	struct core *c;
	struct obj_meta *o;          /* bucket and key only */
	size_t n, cap;
};

/* One 'U' key: kept for the mend unless a pending file of this run holds it. */
static int unsent_add(void *ctx, const char *bucket, const char *key)
{
	struct unsent *u = ctx;
	struct ofile *of = core_ofile_find_key(u->c, bucket, key);
	if (of) {
		core_ofile_put(u->c, of);
		return 0;
	}
	if (ARRAY_GROW(&u->o, &u->cap, u->n + 1) < 0)
		return -ENOMEM;
	int err = 0;
	struct obj_meta *o = &u->o[u->n];
	*o = (struct obj_meta){ 0 };
	o->bucket = obj_strdup_opt(bucket, &err);
	o->key = obj_strdup_opt(key, &err);
	if (err) {
		obj_meta_release(o);
		return err;
	}
	u->n++;
	return 0;
}

int core_mend_name(struct core *c, const char *bucket, const char *key)
{
	struct obj_meta rec = { 0 }, cur = { 0 };
	int rc = index_object_get(c->d.ix, bucket, key, &rec);
	if (rc < 0 || (rec.flags & OBJ_DELETED) || rec.etag[0]) {
		obj_meta_release(&rec);
		return 0;                /* an event or a scan came first */
	}
	rc = s3_head(c->d.s3, bucket, key, &cur);
	if (rc == -ENOENT) {
		cur = (struct obj_meta){ .mtime_ns = rec.mtime_ns, .flags = OBJ_DELETED };
		rc = 0;
	}
	if (rc == 0) {
		cur.bucket = (char *)bucket;
		cur.key = (char *)key;
		cur.flags |= OBJ_HAS_META;
		rc = core_index_local(c, &cur);
		cur.bucket = cur.key = NULL;
	}
	obj_meta_release(&rec);
	obj_meta_release(&cur);
	return rc;
}

int core_mend_unsent(struct core *c)
{
	struct unsent u = { .c = c };
	int rc = index_unsent_each(c->d.ix, unsent_add, &u);
	if (rc < 0)
		log_warn("index: the names a crash left unsent cannot be listed: %s",
			 strerror(-rc));
	size_t done = 0;
	for (; rc == 0 && done < u.n; done++) {
		rc = core_mend_name(c, u.o[done].bucket, u.o[done].key);
		if (rc < 0)
			log_warn("index: %s/%s shows a version of this mount's that was "
				 "never uploaded, and S3 cannot be asked what it holds "
				 "(%s): %zu such name(s) left as they are until the "
				 "next start", u.o[done].bucket, u.o[done].key, strerror(-rc),
				 u.n - done);
	}
	if (done && rc == 0)
		log_info("index: %zu name(s) a crash left unsent mended from S3", done);
	for (size_t i = 0; i < u.n; i++)
		obj_meta_release(&u.o[i]);
	free(u.o);
	return rc < 0 ? rc : (int)done;
}
