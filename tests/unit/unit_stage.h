/*
 * unit_stage.h — the set-up the staging tests share (include after
 * unit.h): the fake S3 store with the fault wrapper around it, and a stage
 * opened over it; faults on PUTs; an object's bytes as the store holds
 * them; the count of files in a directory, and of what recovery moved to
 * recovered/. A set-up that fails prints why and exits 2.
 */
#ifndef FACETFS_TEST_UNIT_STAGE_H
#define FACETFS_TEST_UNIT_STAGE_H

#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"
#include "sync/stage/stage.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct store {
	struct s3 *fake;             /* the objects, read by the checks */
	struct s3 *s3;               /* the fault wrapper the stage uses */
};

/* The store with buckets "b" and "bk"; min_part: the fake's smallest
 * part but the last (0: the fake's default). */
static inline void store_init(struct store *t, uint64_t min_part)
{
	if (s3_fake_new(&t->fake) || s3_fault_new(t->fake, true, &t->s3) ||
	    s3_fake_bucket_add(t->fake, "b") || s3_fake_bucket_add(t->fake, "bk")) {
		printf("# cannot make the fake store\n");
		exit(2);
	}
	if (min_part)
		s3_fake_min_part_set(t->fake, min_part);
}

static inline void store_release(struct store *t)
{
	s3_free(t->s3);              /* frees the fake too */
}

/* stage_open(c) over t (c->s3 is set here). */
static inline struct stage *stage_open_or_exit(struct stage_conf c, struct store *t)
{
	c.s3 = t->s3;
	struct stage *st = NULL;
	int err = stage_open(&c, &st);
	if (err) {
		printf("# stage_open(%s): %s\n", c.dir, strerror(-err));
		exit(2);
	}
	return st;
}

/* A stage in dir with a budget of max bytes and objects of at most maxobj
 * (0: no limit), uploading each commit in one PUT. */
static inline struct stage *stage_open_whole(const char *dir, uint64_t max, uint64_t maxobj,
					     struct store *t)
{
	return stage_open_or_exit((struct stage_conf){ .dir = dir, .max_bytes = max,
			.max_object = maxobj, .up = { .part_size = 1ull << 30 } }, t);
}

/* The end of a case: the stage closed, the store freed, dir removed and
 * freed. */
static inline void stage_case_end(struct stage *st, struct store *t, char *dir)
{
	stage_close(st);
	store_release(t);
	unit_rmtree(dir);
	free(dir);
}

/* A crash now: the staging directory staging copied as it is, into a new
 * directory tagged tag (malloc'ed path; exit 2 if it cannot be). */
static inline char *stage_crash_copy(const char *staging, const char *tag)
{
	char *img = unit_tmpdir(tag), cmd[1400];
	snprintf(cmd, sizeof cmd, "cp -a '%s/.' '%s/' 2>/dev/null", staging, img);
	if (system(cmd) != 0) {
		printf("# cannot copy the staging directory %s\n", staging);
		exit(2);
	}
	return img;
}

/* The next start on image img (stage_crash_copy): a fresh stage over an
 * empty store *t (made here) recovers it, as stage_recover does at a
 * start without deferral (every commit-begun file uploaded at once).
 * The caller reads *t, then ends it with stage_case_end(st, t, img). */
static inline struct stage *stage_crash_recover(char *img, struct store *t)
{
	store_init(t, 0);
	struct stage *st = stage_open_or_exit((struct stage_conf){ .dir = img,
		.max_bytes = 1ull << 30 }, t);
	struct stage_recovery_report rep;
	stage_recover(st, &rep);
	return st;
}

/* PUTs tried (those failed by a rule included). */
static inline int puts_tried(struct store *t)
{
	return (int)s3_fault_seen(t->s3, S3K_PUT);
}

/* Wait (up to 5 s) until more than puts0 PUTs were tried: one of them is
 * in flight (slowed by a delay rule) or done. */
static inline void puts_wait_past(struct store *t, int puts0)
{
	for (int i = 0; i < 500 && puts_tried(t) == puts0; i++)
		usleep(10000);
}

/* Hold the next PUT for ms milliseconds before it is sent. */
static inline void puts_delay(struct store *t, unsigned ms)
{
	if (s3_fault_add(t->s3, &(struct s3_fault_rule){ .kind = S3K_PUT,
			 .type = S3F_DELAY, .first = 1, .times = 1, .delay_ms = ms }))
		exit(2);
}

/* Fail the next n PUTs with err. */
static inline void puts_fail(struct store *t, unsigned n, int err)
{
	if (s3_fault_fail(t->s3, S3K_PUT, 1, n, err))
		exit(2);
}

/* An object in the store: its bytes (malloc'ed, free them) or NULL if it
 * is missing; *len its size; "name=value;..." then "ct=TYPE" into meta. */
static inline char *obj_get(struct store *t, const char *bucket,
			    const char *key, size_t *len, char *meta, size_t mlen)
{
	void *d;
	struct obj_meta m;
	if (s3_fake_object_read(t->fake, bucket, key, &d, len, &m, NULL) != 0)
		return NULL;
	size_t n = 0;
	if (meta) {
		meta[0] = '\0';
		for (size_t i = 0; i < m.n_meta && n < mlen; i++)
			n += (size_t)snprintf(meta + n, mlen - n, "%s=%s;",
					      m.meta[i].name, m.meta[i].value);
		if (n < mlen)
			snprintf(meta + n, mlen - n, "ct=%s", m.content_type);
	}
	obj_meta_release(&m);
	return d;
}

/* Does S3 hold b/key with the bytes want (NULL: no object at all)? */
static inline bool s3_has(struct store *fk, const char *key, const char *want)
{
	size_t n = 0;
	char *o = obj_get(fk, "b", key, &n, NULL, 0);
	bool ok = want ? o && n == strlen(want) && memcmp(o, want, n) == 0 : !o;
	free(o);
	return ok;
}

/* Files in dir whose name ends in ext. */
static inline int count_files(const char *dir, const char *ext)
{
	DIR *d = opendir(dir);
	int n = 0;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		size_t l = strlen(de->d_name), e = strlen(ext);
		if (de->d_name[0] != '.' && l >= e && !strcmp(de->d_name + l - e, ext))
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

/* Files in DIR/recovered/ (what recovery moved there). */
static inline int stage_recovered_count(const char *dir)
{
	char rd[600];
	snprintf(rd, sizeof rd, "%s/recovered", dir);
	return count_files(rd, "");
}

#endif
