/* object.c — see object.h. */
#include "common/object.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void obj_kv_free(struct obj_kv *arr, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(arr[i].name);
		free(arr[i].value);
	}
	free(arr);
}

void obj_meta_release(struct obj_meta *o)
{
	free(o->bucket);
	free(o->key);
	free(o->content_type);
	obj_kv_free(o->meta, o->n_meta);
	obj_kv_free(o->tags, o->n_tags);
	memset(o, 0, sizeof *o);
}

int obj_kv_add(struct obj_kv **arr, size_t *n, const char *name, const char *value)
{
	struct obj_kv *grown = realloc(*arr, (*n + 1) * sizeof **arr);
	if (!grown)
		return -ENOMEM;
	*arr = grown;
	char *nm = strdup(name), *val = strdup(value);
	if (!nm || !val) {
		free(nm);
		free(val);
		return -ENOMEM;
	}
	grown[*n].name = nm;
	grown[*n].value = val;
	(*n)++;
	return 0;
}

static char *dup_or_null(const char *s, int *failed)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*failed = 1;
	return d;
}

int obj_meta_copy(struct obj_meta *dst, const struct obj_meta *src)
{
	int failed = 0;
	*dst = *src;
	dst->bucket = dup_or_null(src->bucket, &failed);
	dst->key = dup_or_null(src->key, &failed);
	dst->content_type = dup_or_null(src->content_type, &failed);
	dst->meta = NULL;
	dst->n_meta = 0;
	dst->tags = NULL;
	dst->n_tags = 0;
	for (size_t i = 0; !failed && i < src->n_meta; i++)
		failed = obj_kv_add(&dst->meta, &dst->n_meta, src->meta[i].name,
				    src->meta[i].value) != 0;
	for (size_t i = 0; !failed && i < src->n_tags; i++)
		failed = obj_kv_add(&dst->tags, &dst->n_tags, src->tags[i].name,
				    src->tags[i].value) != 0;
	if (failed) {
		obj_meta_release(dst);
		return -ENOMEM;
	}
	return 0;
}

const char *obj_meta_get(const struct obj_meta *o, const char *name)
{
	for (size_t i = 0; i < o->n_meta; i++)
		if (strcmp(o->meta[i].name, name) == 0)
			return o->meta[i].value;
	return NULL;
}

int seq_cmp(const char *a, const char *b)
{
	if (!a || !b || !*a || !*b)
		return SEQ_INCOMPARABLE;
	size_t la = strlen(a), lb = strlen(b);
	/* Compare as if the shorter were left-padded with '0'. */
	size_t len = la > lb ? la : lb;
	for (size_t i = 0; i < len; i++) {
		char ca = i < len - la ? '0' : a[i - (len - la)];
		char cb = i < len - lb ? '0' : b[i - (len - lb)];
		if (ca != cb)
			return ca < cb ? -1 : 1;
	}
	return 0;
}
