/*
 * s3_fake_mpu.c — multipart uploads of the in-memory store (s3_fake.h).
 *
 * Uploads live in one unsorted array under f->mu; each holds its parts
 * (number, bytes, MD5 ETag) in an array kept sorted by part number. A
 * completion concatenates the listed parts into a new object version
 * (fake_write) and gives it S3's "MD5-of-MD5s-N" ETag.
 */
#include "common/lock.h"
#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fake_int.h"
#include "sync/s3/s3_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


struct fake_part {
	unsigned number;
	unsigned char *data;
	size_t len;
	char etag[72];
};

struct fake_upload {
	char id[32];
	char *bucket, *key;
	struct obj_kv *meta;
	size_t n_meta;
	char *ctype;
	int64_t initiated_ns;
	struct fake_part *parts;     /* sorted by number */
	size_t n_parts;
};

static void upload_release(struct fake_upload *u)
{
	for (size_t i = 0; i < u->n_parts; i++)
		free(u->parts[i].data);
	free(u->parts);
	free(u->bucket);
	free(u->key);
	free(u->ctype);
	obj_kv_free(u->meta, u->n_meta);
}

void fake_mpu_release(struct s3_fake *f)
{
	for (size_t i = 0; i < f->n_uploads; i++)
		upload_release(&f->uploads[i]);
	free(f->uploads);
	f->uploads = NULL;
	f->n_uploads = 0;
}

/* The upload (bucket, key, id), or NULL. */
static struct fake_upload *upload_find(struct s3_fake *f, const char *bucket,
				       const char *key, const char *id)
{
	for (size_t i = 0; i < f->n_uploads; i++) {
		struct fake_upload *u = &f->uploads[i];
		if (id && !strcmp(u->id, id) && !strcmp(u->bucket, bucket) &&
		    !strcmp(u->key, key))
			return u;
	}
	return NULL;
}

static void upload_remove(struct s3_fake *f, struct fake_upload *u)
{
	size_t i = (size_t)(u - f->uploads);
	upload_release(u);
	memmove(&f->uploads[i], &f->uploads[i + 1],
		(f->n_uploads - i - 1) * sizeof *f->uploads);
	f->n_uploads--;
}

int fake_mpu_create(struct s3 *s, const char *bucket, const char *key,
		    const struct obj_kv *meta, size_t n_meta,
		    const char *content_type, char *upload_id, size_t idlen)
{
	struct s3_fake *f = fake_of(s);
	if (idlen)
		upload_id[0] = '\0';
	int err = fake_check_key(key);
	if (!err && (!idlen || (content_type && strpbrk(content_type, "\r\n"))))
		err = -EINVAL;
	if (err)
		return err;
	struct fake_upload u = { 0 };
	err = fake_kv_build(meta, n_meta, &u.meta, &u.n_meta);
	if (err)
		return err;
	u.bucket = strdup(bucket ? bucket : "");
	u.key = strdup(key);
	u.ctype = content_type && *content_type ? strdup(content_type) : NULL;
	if (!u.bucket || !u.key || (content_type && *content_type && !u.ctype)) {
		upload_release(&u);
		return -ENOMEM;
	}
	err = fake_begin(f, S3K_MPU_CREATE, bucket, key);
	if (err) {
		upload_release(&u);
		return err;
	}
	struct fake_upload *g = realloc(f->uploads, (f->n_uploads + 1) * sizeof *g);
	if (!g) {
		mod_unlock(&f->mu);
		upload_release(&u);
		return -ENOMEM;
	}
	f->uploads = g;
	snprintf(u.id, sizeof u.id, "fake-upload-%" PRIu64, ++f->next_upload);
	u.initiated_ns = f->clock_ns;
	if (strlen(u.id) >= idlen) {
		err = -EOVERFLOW;
		upload_release(&u);
	} else {
		memcpy(upload_id, u.id, strlen(u.id) + 1);
		f->uploads[f->n_uploads++] = u;
	}
	mod_unlock(&f->mu);
	return err;
}

/* Store part number (replacing one of that number) in u; takes data. */
static int upload_put(struct fake_upload *u, unsigned number,
		      unsigned char *data, size_t len, char etag_out[72])
{
	size_t i = 0;
	while (i < u->n_parts && u->parts[i].number < number)
		i++;
	if (i < u->n_parts && u->parts[i].number == number) {
		free(u->parts[i].data);
	} else {
		struct fake_part *g = realloc(u->parts, (u->n_parts + 1) * sizeof *g);
		if (!g) {
			free(data);
			return -ENOMEM;
		}
		u->parts = g;
		memmove(&u->parts[i + 1], &u->parts[i],
			(u->n_parts - i) * sizeof *u->parts);
		u->n_parts++;
	}
	struct fake_part *p = &u->parts[i];
	p->number = number;
	p->data = data;
	p->len = len;
	fake_md5_hex(data, len, p->etag);
	memcpy(etag_out, p->etag, sizeof p->etag);
	return 0;
}

int fake_mpu_put_part(struct s3 *s, const char *bucket, const char *key,
		      const char *upload_id, unsigned part, int fd,
		      uint64_t off, uint64_t size, char etag_out[72])
{
	struct s3_fake *f = fake_of(s);
	etag_out[0] = '\0';
	int err = fake_check_key(key);
	if (!err && (fd < 0 || part < 1 || part > S3_MAX_PARTS ||
		     size > S3_MAX_PART || size > SIZE_MAX - 1))
		err = -EINVAL;
	if (err)
		return err;
	unsigned char *data = malloc(size ? (size_t)size : 1);
	if (!data)
		return -ENOMEM;
	for (uint64_t pos = 0; !err && pos < size;) {
		ssize_t r = pread(fd, data + pos, (size_t)(size - pos),
				  (off_t)(off + pos));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			err = -EIO;      /* the file is shorter than off + size */
		else
			pos += (uint64_t)r;
	}
	if (err) {
		free(data);
		return err;
	}
	err = fake_begin(f, S3K_MPU_PART, bucket, key);
	if (err) {
		free(data);
		return err;
	}
	struct fake_upload *u = upload_find(f, bucket, key, upload_id);
	if (!u) {
		free(data);
		err = -ENOENT;
	} else {
		err = upload_put(u, part, data, (size_t)size, etag_out);
	}
	mod_unlock(&f->mu);
	return err;
}

int fake_mpu_copy_part(struct s3 *s, const char *bucket, const char *key,
		       const char *upload_id, unsigned part,
		       const char *src_key, const char *src_if_match,
		       uint64_t off, uint64_t size, char etag_out[72])
{
	struct s3_fake *f = fake_of(s);
	etag_out[0] = '\0';
	int err = fake_check_key(key);
	if (!err)
		err = fake_check_key(src_key);
	if (!err && (part < 1 || part > S3_MAX_PARTS || size == 0 ||
		     size > S3_MAX_PART))
		err = -EINVAL;
	if (err)
		return err;
	err = fake_begin(f, S3K_MPU_COPY, bucket, key);
	if (err)
		return err;
	struct fake_upload *u = upload_find(f, bucket, key, upload_id);
	struct fake_obj *o = fake_live(f, bucket, src_key);
	unsigned char *data = NULL;
	if (!u || !o)
		err = -ENOENT;
	else if (src_if_match && *src_if_match && strcmp(src_if_match, o->m.etag))
		err = -ESTALE;
	else if (off >= o->m.size || size > o->m.size - off)
		err = -EINVAL;   /* InvalidRange */
	else if (!(data = malloc((size_t)size)))
		err = -ENOMEM;
	if (!err) {
		memcpy(data, o->data + off, (size_t)size);
		err = upload_put(u, part, data, (size_t)size, etag_out);
	}
	mod_unlock(&f->mu);
	return err;
}

int fake_mpu_complete(struct s3 *s, const char *bucket, const char *key,
		      const char *upload_id, const struct s3_part *parts,
		      size_t n, char etag_out[72])
{
	struct s3_fake *f = fake_of(s);
	etag_out[0] = '\0';
	int err = fake_check_key(key);
	if (!err && (n == 0 || n > S3_MAX_PARTS))
		err = -EINVAL;
	for (size_t i = 0; !err && i < n; i++)
		if (parts[i].number < 1 || parts[i].number > S3_MAX_PARTS ||
		    (i && parts[i].number <= parts[i - 1].number))
			err = -EINVAL;
	if (err)
		return err;
	err = fake_begin(f, S3K_MPU_COMPLETE, bucket, key);
	if (err)
		return err;
	struct fake_upload *u = upload_find(f, bucket, key, upload_id);
	size_t total = 0, k = 0;
	if (!u)
		err = -ENOENT;
	/* Each listed part must be there with that ETag (InvalidPart), and
	 * every one but the last at least min_part (EntityTooSmall). */
	for (size_t i = 0; !err && i < n; i++) {
		while (k < u->n_parts && u->parts[k].number < parts[i].number)
			k++;
		if (k == u->n_parts || u->parts[k].number != parts[i].number ||
		    strcmp(u->parts[k].etag, parts[i].etag))
			err = -EIO;
		else if (i + 1 < n && u->parts[k].len < f->min_part)
			err = -EIO;
		else
			total += u->parts[k].len;
	}
	unsigned char *data = NULL;
	struct obj_kv *meta = NULL;
	size_t n_meta = 0;
	if (!err && !(data = malloc(total ? total : 1)))
		err = -ENOMEM;
	if (!err)
		err = obj_kv_copy(&meta, &n_meta, u->meta, u->n_meta);
	if (!err) {
		size_t pos = 0;
		k = 0;
		for (size_t i = 0; i < n; i++) {
			while (u->parts[k].number != parts[i].number)
				k++;
			memcpy(data + pos, u->parts[k].data, u->parts[k].len);
			pos += u->parts[k].len;
		}
		err = fake_write(f, bucket, key, data, total, meta, n_meta,
				 u->ctype, NULL, 0, NULL);
		data = NULL;
		if (!err) {
			struct fake_obj *o = fake_live(f, bucket, key);
			s3_mpu_etag(parts, n, o->m.etag);   /* sync/s3/s3_int.h */
			memcpy(etag_out, o->m.etag, sizeof o->m.etag);
			upload_remove(f, u);
		}
	}
	mod_unlock(&f->mu);
	free(data);
	return err;
}

int fake_mpu_abort(struct s3 *s, const char *bucket, const char *key,
		   const char *upload_id)
{
	struct s3_fake *f = fake_of(s);
	int err = fake_check_key(key);
	if (err)
		return err;
	err = fake_begin(f, S3K_MPU_ABORT, bucket, key);
	if (err)
		return err;
	struct fake_upload *u = upload_find(f, bucket, key, upload_id);
	if (u)
		upload_remove(f, u);
	mod_unlock(&f->mu);
	return 0;
}

struct listed {
	char *key, id[32];
	int64_t initiated_ns;
};

static int listed_cmp(const void *a, const void *b)
{
	const struct listed *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	return c ? c : (x->initiated_ns > y->initiated_ns) - (x->initiated_ns < y->initiated_ns);
}

int fake_mpu_list(struct s3 *s, const char *bucket, const char *prefix,
		  s3_upload_fn fn, void *ctx)
{
	struct s3_fake *f = fake_of(s);
	int err = fake_begin(f, S3K_MPU_LIST, bucket, NULL);
	if (err)
		return err;
	size_t pl = prefix ? strlen(prefix) : 0, n = 0;
	struct listed *l = calloc(f->n_uploads + 1, sizeof *l);
	if (!l)
		err = -ENOMEM;
	for (size_t i = 0; !err && i < f->n_uploads; i++) {
		const struct fake_upload *u = &f->uploads[i];
		if (strcmp(u->bucket, bucket) || strncmp(u->key, prefix ? prefix : "", pl))
			continue;
		if (!(l[n].key = strdup(u->key))) {
			err = -ENOMEM;
			break;
		}
		memcpy(l[n].id, u->id, sizeof l[n].id);
		l[n].initiated_ns = u->initiated_ns;
		n++;
	}
	mod_unlock(&f->mu);
	if (!err)
		qsort(l, n, sizeof *l, listed_cmp);
	for (size_t i = 0; !err && i < n; i++)
		err = fn(ctx, l[i].key, l[i].id, l[i].initiated_ns);
	for (size_t i = 0; i < n; i++)
		free(l[i].key);
	free(l);
	return err;
}

void s3_fake_min_part_set(struct s3 *s, uint64_t bytes)
{
	struct s3_fake *f = fake_of(s);
	mod_lock(&f->mu);
	f->min_part = bytes;
	mod_unlock(&f->mu);
}

size_t s3_fake_upload_count(struct s3 *s, const char *bucket)
{
	struct s3_fake *f = fake_of(s);
	size_t n = 0;
	mod_lock(&f->mu);
	for (size_t i = 0; i < f->n_uploads; i++)
		n += !strcmp(f->uploads[i].bucket, bucket);
	mod_unlock(&f->mu);
	return n;
}
