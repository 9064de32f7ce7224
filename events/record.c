/*
 * record.c — see record.h: the top of the decoder (record_int.h gives
 * its layers).
 *
 * record_decode() first tries the single-pass fast path (record_fast.c,
 * no tree); documents it does not take come here, to the reference path
 * (record_decode_tree): one parse with cJSON per document, then each
 * element of Records is read into a struct obj_meta by record_fill(), which
 * takes each value through record_field.c as the fast path does. Which store sent a record is
 * told by its eventSource: "ceph:s3" keys are raw and its sequencer is a
 * (seconds, ns) pair; anything else (aws:s3, minio:s3) has form-escaped keys
 * and hex sequencers. Reasons for malformed records are string literals so
 * the hot path formats nothing unless something is wrong.
 */
#include "events/record_int.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum rec_result { REC_OK, REC_IGNORED, REC_MALFORMED };

/* A member as a string: 0 with *out (NULL when absent or null), -1 when it
 * has another type. */
static int item_str(const cJSON *it, const char **out)
{
	*out = NULL;
	if (!it || cJSON_IsNull(it))
		return 0;
	if (!cJSON_IsString(it) || !it->valuestring)
		return -1;
	*out = it->valuestring;
	return 0;
}

/* Member `name` of obj as a string, as item_str(). */
static int get_str(const cJSON *obj, const char *name, const char **out)
{
	return item_str(cJSON_GetObjectItemCaseSensitive(obj, name), out);
}

/* ---- one record ---- */

/* Feed name/value pairs to fn from a list of {"key","val"} (RGW) or a map of
 * strings (MinIO). 0, -EINVAL for another shape, or fn's error. */
static int walk_pairs(const cJSON *it, struct obj_meta *o,
		      int (*fn)(struct obj_meta *, const char *, const char *))
{
	const cJSON *e;
	int rc;

	if (cJSON_IsArray(it)) {
		cJSON_ArrayForEach(e, it) {
			const char *k, *v;
			if (!cJSON_IsObject(e) || get_str(e, "key", &k) ||
			    get_str(e, "val", &v) || !k || !v)
				return -EINVAL;
			if ((rc = fn(o, k, v)))
				return rc;
		}
		return 0;
	}
	if (cJSON_IsObject(it)) {
		cJSON_ArrayForEach(e, it) {
			if (!cJSON_IsString(e) || !e->valuestring || !e->string)
				return -EINVAL;
			if ((rc = fn(o, e->string, e->valuestring)))
				return rc;
		}
		return 0;
	}
	return -EINVAL;
}

/* size: a non-negative integer as a JSON number (exact up to 2^53) or a
 * decimal string; absent means 0. 0 or -1. */
static int parse_size(const cJSON *it, uint64_t *out)
{
	*out = 0;
	if (!it || cJSON_IsNull(it))
		return 0;
	if (cJSON_IsNumber(it)) {
		double v = it->valuedouble;
		if (!(v >= 0 && v <= 9007199254740992.0) ||
		    v != (double)(uint64_t)v)
			return -1;
		*out = (uint64_t)v;
		return 0;
	}
	if (cJSON_IsString(it) && it->valuestring && it->valuestring[0]) {
		uint64_t v = 0;
		for (const char *p = it->valuestring; *p; p++) {
			if (*p < '0' || *p > '9')
				return -1;
			unsigned dig = (unsigned)(*p - '0');
			if (v > (UINT64_MAX - dig) / 10)
				return -1;
			v = v * 10 + dig;
		}
		*out = v;
		return 0;
	}
	return -1;
}

/* The members of a record this module reads, each the first member of its
 * name or NULL; found in one pass over each object's children (cheaper than
 * a cJSON_GetObjectItem() walk per name). */
enum { R_NAME, R_SOURCE, R_TIME, R_S3, R_N };
static const char *const rec_names[R_N] = { "eventName", "eventSource",
					     "eventTime", "s3" };
enum { O_KEY, O_SIZE, O_ETAG, O_SEQ, O_CTYPE, O_META, O_UMETA, O_TAGS, O_N };
static const char *const obj_names[O_N] = { "key", "size", "eTag", "sequencer",
					     "contentType", "metadata",
					     "userMetadata", "tags" };

struct rec_view {
	const cJSON *r[R_N];     /* members of the record */
	const cJSON *o[O_N];     /* members of s3.object (after rec_locate) */
	const char *bucket;      /* s3.bucket.name (after rec_locate) */
	bool ceph;               /* eventSource is "ceph:s3" */
};

static void pick(const cJSON *obj, const char *const *names, size_t n,
		 const cJSON **out)
{
	for (size_t i = 0; i < n; i++)
		out[i] = NULL;
	for (const cJSON *c = obj->child; c; c = c->next) {
		const char *nm = c->string;
		if (!nm)
			continue;
		for (size_t i = 0; i < n; i++) {
			if (!out[i] && nm[0] == names[i][0] && strcmp(nm, names[i]) == 0) {
				out[i] = c;
				break;
			}
		}
	}
}

/* Fill v for record rec: its members, s3.bucket.name, s3.object's members,
 * and the decoded key (*key, malloc'ed). 0, REC_MALFORMED with *why, or
 * -ENOMEM. */
static int rec_locate(const cJSON *rec, struct rec_view *v, char **key,
		      const char **why)
{
	const cJSON *b, *o;
	const char *src, *raw;
	int rc;

	*key = NULL;
	if (!cJSON_IsObject(rec))
		return *why = "record is not an object", REC_MALFORMED;
	pick(rec, rec_names, R_N, v->r);
	if (item_str(v->r[R_SOURCE], &src))
		return *why = "eventSource is not a string", REC_MALFORMED;
	v->ceph = src && strcmp(src, "ceph:s3") == 0;
	if (!cJSON_IsObject(v->r[R_S3]))
		return *why = "s3 missing or not an object", REC_MALFORMED;
	b = cJSON_GetObjectItemCaseSensitive(v->r[R_S3], "bucket");
	if (!cJSON_IsObject(b))
		return *why = "s3.bucket missing or not an object", REC_MALFORMED;
	if (item_str(cJSON_GetObjectItemCaseSensitive(b, "name"), &v->bucket))
		return *why = "s3.bucket.name is not a string", REC_MALFORMED;
	if (!v->bucket || !v->bucket[0])
		return *why = "s3.bucket.name missing", REC_MALFORMED;
	o = cJSON_GetObjectItemCaseSensitive(v->r[R_S3], "object");
	if (!cJSON_IsObject(o))
		return *why = "s3.object missing or not an object", REC_MALFORMED;
	pick(o, obj_names, O_N, v->o);
	if (item_str(v->o[O_KEY], &raw))
		return *why = "s3.object.key is not a string", REC_MALFORMED;
	if (!raw || !*raw)
		return *why = "s3.object.key missing", REC_MALFORMED;
	if (v->ceph) {
		*key = strdup(raw);
		return *key ? 0 : -ENOMEM;
	}
	rc = record_form_decode(raw, key);
	if (rc == -EINVAL)
		return *why = "s3.object.key has a bad %-escape", REC_MALFORMED;
	return rc;
}

/* Read one element of Records into o (zeroed on entry). REC_OK,
 * REC_IGNORED, REC_MALFORMED with *why, or -ENOMEM. On anything but REC_OK
 * the caller releases o. */
static int record_fill(const cJSON *rec, struct obj_meta *o, const char **why)
{
	static const char *const meta_why[2] = {
		"s3.object.metadata is not a list of {key,val} or a map",
		"s3.object.userMetadata is not a map of strings",
	};
	struct rec_view v;
	const cJSON *it;
	const char *name, *s;
	enum record_kind kind;
	int rc;

	if (!cJSON_IsObject(rec))
		return *why = "record is not an object", REC_MALFORMED;
	/* eventName first: other kinds are ignored whatever else they hold */
	for (it = rec->child; it; it = it->next)
		if (it->string && strcmp(it->string, "eventName") == 0)
			break;
	if (item_str(it, &name))
		return *why = "eventName is not a string", REC_MALFORMED;
	if (!name)
		return *why = "eventName missing", REC_MALFORMED;
	kind = record_kind_of(name);
	if (kind == RECORD_KIND_OTHER)
		return REC_IGNORED;
	if ((rc = rec_locate(rec, &v, &o->key, why)) != 0)
		return rc;
	if (!(o->bucket = strdup(v.bucket)))
		return -ENOMEM;
	if (kind == RECORD_KIND_DELETE)
		o->flags |= OBJ_DELETED;

	if (item_str(v.r[R_TIME], &s))
		return *why = "eventTime is not a string", REC_MALFORMED;
	if (s && record_time_parse(s, &o->mtime_ns))
		return *why = "eventTime is not an ISO-8601 UTC time", REC_MALFORMED;

	if (parse_size(v.o[O_SIZE], &o->size))
		return *why = "s3.object.size is not a non-negative integer",
		       REC_MALFORMED;

	if (item_str(v.o[O_ETAG], &s))
		return *why = "s3.object.eTag is not a string", REC_MALFORMED;
	if (s && record_etag_set(o, s))
		return *why = "s3.object.eTag too long", REC_MALFORMED;

	if (item_str(v.o[O_SEQ], &s))
		return *why = "s3.object.sequencer is not a string", REC_MALFORMED;
	/* an unusable sequencer stays "" (unknown); the record still counts */
	if (s)
		(void)record_seq_normalise(s, v.ceph, o->seq, sizeof o->seq);

	if (item_str(v.o[O_CTYPE], &s))
		return *why = "s3.object.contentType is not a string", REC_MALFORMED;
	if (s) {
		if (!(o->content_type = strdup(s)))
			return -ENOMEM;
		o->flags |= OBJ_HAS_CTYPE;
	}

	for (size_t i = 0; i < 2; i++) {
		it = v.o[i == 0 ? O_META : O_UMETA];
		if (!it || cJSON_IsNull(it))
			continue;
		rc = walk_pairs(it, o, record_meta_add);
		if (rc == -EINVAL)
			return *why = meta_why[i], REC_MALFORMED;
		if (rc)
			return rc;
		o->flags |= OBJ_HAS_META;
	}

	it = v.o[O_TAGS];
	if (it && !cJSON_IsNull(it)) {
		rc = walk_pairs(it, o, record_tag_add);
		if (rc == -EINVAL)
			return *why = "s3.object.tags is not a list of {key,val}",
			       REC_MALFORMED;
		if (rc)
			return rc;
		o->flags |= OBJ_HAS_TAGS;
	}
	return REC_OK;
}

/* ---- documents ---- */

/* Parse a document and find its Records array. 0 (*root to delete, *records
 * inside it), 1 for an AWS test event (*root set), -EINVAL with err. */
static int doc_parse(const void *buf, size_t len, cJSON **root,
		     const cJSON **records, char *err, size_t errlen)
{
	const char *text = buf, *end = NULL;
	const cJSON *r, *ev;

	*root = NULL;
	*records = NULL;
	if (!buf || len == 0) {
		snprintf(err, errlen, "empty document");
		return -EINVAL;
	}
	*root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	if (!*root) {
		snprintf(err, errlen, "not JSON (error near byte %zu)",
			 end && end >= text && end <= text + len ? (size_t)(end - text) : 0);
		return -EINVAL;
	}
	for (const char *p = end; p && p < text + len; p++) {
		if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n' && *p != '\0') {
			snprintf(err, errlen, "trailing data after the JSON value at byte %zu",
				 (size_t)(p - text));
			goto invalid;
		}
	}
	if (!cJSON_IsObject(*root)) {
		snprintf(err, errlen, "document is not a JSON object");
		goto invalid;
	}
	r = cJSON_GetObjectItemCaseSensitive(*root, "Records");
	if (!r) {
		ev = cJSON_GetObjectItemCaseSensitive(*root, "Event");
		if (cJSON_IsString(ev) && ev->valuestring &&
		    strcmp(ev->valuestring, "s3:TestEvent") == 0)
			return 1;
		snprintf(err, errlen, "no Records in the document");
		goto invalid;
	}
	if (!cJSON_IsArray(r)) {
		snprintf(err, errlen, "Records is not an array");
		goto invalid;
	}
	*records = r;
	return 0;
invalid:
	cJSON_Delete(*root);
	*root = NULL;
	return -EINVAL;
}

int record_decode_tree(const void *buf, size_t len, struct ev_doc *out)
{
	cJSON *root;
	const cJSON *records, *rec;
	size_t idx = 0, cap;
	int rc;

	memset(out, 0, sizeof *out);
	rc = doc_parse(buf, len, &root, &records, out->err, sizeof out->err);
	if (rc == -EINVAL) {
		out->n_malformed = 1;
		return rc;
	}
	if (rc == 1) {
		out->n_ignored = 1;
		rc = 0;
		goto done;
	}
	cap = (size_t)cJSON_GetArraySize(records);
	out->ev = calloc(cap ? cap : 1, sizeof *out->ev);
	if (!out->ev) {
		rc = -ENOMEM;
		goto done;
	}
	cJSON_ArrayForEach(rec, records) {
		struct obj_meta *o = &out->ev[out->n];
		const char *why = NULL;
		int r = record_fill(rec, o, &why);

		if (r == REC_OK) {
			out->n++;
		} else {
			obj_meta_release(o);
			if (r < 0) {
				rc = r;
				goto done;
			}
			if (r == REC_IGNORED) {
				out->n_ignored++;
			} else {
				if (out->n_malformed++ == 0)
					snprintf(out->err, sizeof out->err,
						 "Records[%zu]: %s", idx, why);
			}
		}
		idx++;
	}
done:
	cJSON_Delete(root);
	if (rc < 0)
		ev_doc_release(out);
	return rc;
}

int record_decode(const void *buf, size_t len, struct ev_doc *out)
{
	int rc = record_decode_fast(buf, len, out);
	return rc == RECORD_FAST_FALLBACK ? record_decode_tree(buf, len, out) : rc;
}

void ev_parts_free(struct ev_part *parts, size_t n)
{
	if (!parts)
		return;
	for (size_t i = 0; i < n; i++) {
		free(parts[i].key);
		cJSON_free(parts[i].json);
	}
	free(parts);
}

/* "bucket/key" of a record, or NULL (with rc 0) when it has none. */
static int part_key(const cJSON *rec, char **out)
{
	struct rec_view v;
	const char *bucket, *why;
	char *key;
	int rc;

	*out = NULL;
	rc = rec_locate(rec, &v, &key, &why);
	if (rc == REC_MALFORMED)
		return 0;
	if (rc < 0)
		return rc;
	bucket = v.bucket;
	size_t lb = strlen(bucket), lk = strlen(key);
	*out = malloc(lb + lk + 2);
	if (*out) {
		memcpy(*out, bucket, lb);
		(*out)[lb] = '/';
		memcpy(*out + lb + 1, key, lk + 1);
	}
	free(key);
	return *out ? 0 : -ENOMEM;
}

int record_split(const void *buf, size_t len, struct ev_part **parts, size_t *n,
		 char *err, size_t errlen)
{
	cJSON *root, *wrap = NULL, *list;
	const cJSON *records, *rec;
	struct ev_part *arr = NULL;
	size_t cnt = 0, cap;
	char why[256];
	int rc;

	*parts = NULL;
	*n = 0;
	rc = doc_parse(buf, len, &root, &records, why, sizeof why);
	if (rc == -EINVAL) {
		snprintf(err, errlen, "%s", why);
		return rc;
	}
	if (rc == 1) {
		snprintf(err, errlen, "test event (s3:TestEvent): nothing to split");
		rc = -EINVAL;
		goto done;
	}
	cap = (size_t)cJSON_GetArraySize(records);
	arr = calloc(cap ? cap : 1, sizeof *arr);
	wrap = cJSON_CreateObject();
	list = wrap ? cJSON_AddArrayToObject(wrap, "Records") : NULL;
	if (!arr || !list) {
		rc = -ENOMEM;
		goto done;
	}
	cJSON_ArrayForEach(rec, records) {
		struct ev_part *p = &arr[cnt];
		/* the tree is ours: a reference node borrows rec without copying */
		if ((rc = part_key(rec, &p->key)) != 0)
			goto done;
		cnt++;
		if (!cJSON_AddItemReferenceToArray(list, (cJSON *)rec)) {
			rc = -ENOMEM;
			goto done;
		}
		p->json = cJSON_PrintUnformatted(wrap);
		cJSON_DeleteItemFromArray(list, 0);   /* frees the reference only */
		if (!p->json) {
			rc = -ENOMEM;
			goto done;
		}
		p->json_len = strlen(p->json);
	}
	*parts = arr;
	*n = cnt;
	arr = NULL;
	rc = 0;
done:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	ev_parts_free(arr, cnt);
	cJSON_Delete(wrap);
	cJSON_Delete(root);
	return rc;
}
