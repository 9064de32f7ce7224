/* scan_s3.c — the scan_source that lists, HEADs and fetches tags through
 * sync/s3.h. */
#include "views/scan.h"

#include "common/s3.h"

static int s3src_list(void *ctx, const char *bucket, const char *token,
		      scan_obj_fn fn, void *fnctx, char *next_token, size_t ntlen,
		      bool *truncated)
{
	return s3_list_page(ctx, bucket, NULL, token, fn, fnctx, next_token, ntlen,
			    truncated);
}

static int s3src_head(void *ctx, const char *bucket, const char *key,
		      struct obj_meta *out)
{
	return s3_head(ctx, bucket, key, out);
}

static int s3src_tags(void *ctx, const char *bucket, const char *key,
		      struct obj_kv **tags, size_t *n)
{
	return s3_get_tagging(ctx, bucket, key, tags, n);
}

void scan_source_s3(struct s3 *s3, struct scan_source *out)
{
	out->ctx = s3;
	out->list_page = s3src_list;
	out->head = s3src_head;
	out->tags = s3src_tags;
}
