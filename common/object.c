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

int obj_kv_copy(struct obj_kv **dst, size_t *n_dst, const struct obj_kv *src,
		size_t n)
{
	*dst = NULL;
	*n_dst = 0;
	for (size_t i = 0; i < n; i++) {
		if (obj_kv_add(dst, n_dst, src[i].name, src[i].value)) {
			obj_kv_free(*dst, *n_dst);
			*dst = NULL;
			*n_dst = 0;
			return -ENOMEM;
		}
	}
	return 0;
}

char *obj_strdup_opt(const char *s, int *err)
{
	char *d = s ? strdup(s) : NULL;
	if (s && !d)
		*err = -ENOMEM;
	return d;
}

int obj_meta_copy(struct obj_meta *dst, const struct obj_meta *src)
{
	int err = 0;
	*dst = *src;
	dst->bucket = obj_strdup_opt(src->bucket, &err);
	dst->key = obj_strdup_opt(src->key, &err);
	dst->content_type = obj_strdup_opt(src->content_type, &err);
	dst->meta = NULL;
	dst->n_meta = 0;
	dst->tags = NULL;
	dst->n_tags = 0;
	if (!err)
		err = obj_kv_copy(&dst->meta, &dst->n_meta, src->meta, src->n_meta);
	if (!err)
		err = obj_kv_copy(&dst->tags, &dst->n_tags, src->tags, src->n_tags);
	if (err) {
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
