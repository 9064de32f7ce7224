/*
 * test_wbmodel.c — write-back against a model: random sequences of
 * operations on a write-back view ("w") over the fake store, checked
 * after every step against what a model says the mount and S3 hold.
 *
 * Operations: write a file whole (create, or open with O_TRUNC); reopen
 * it with O_TRUNC, write half, run a sync, write the rest and close (the
 * sync must not publish the half); fsync through a descriptor; rename
 * onto any name; unlink; another client's PUT of a pending key followed
 * by a sync (its version wins, ours goes to recovered/); a sync; and a
 * crash image (the staging directory copied and recovered into an empty
 * store, which must receive exactly the files the model says are pending,
 * under their names now). After each operation the kernel forgets every
 * inode it looked up, and every name is read through "w" and through a
 * second, read-only view ("r") of the same prefix: both show the model's
 * bytes, or ENOENT.
 *
 * At the end every closed version is in S3 or counted in recovered/.
 * Every other sequence takes the store to honour If-Match and
 * If-None-Match (the fake does), so both of the drain's checks run.
 *
 * Usage: test_wbmodel [SEED [SEQUENCES [STEPS]]]. tests/run runs a fixed
 * budget; a long run: `build/fuse/test_wbmodel $RANDOM 20000 60`.
 */
#include "unit.h"
#include "unit_views.h"
#include "unit_fscore.h"
#include "unit_stage.h"

#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAMES 4
#define TEXT 24

static const char *const view_json[2] = {
	"{ \"name\": \"w\", \"bucket\": \"b\", \"match\": { \"prefix\": \"w/\" },"
	"  \"layout\": { \"strip_prefix\": \"w/\" }, \"writable\": true,"
	"  \"visibility\": \"eventual\", \"write_back\": true }",
	"{ \"name\": \"r\", \"bucket\": \"b\", \"match\": { \"prefix\": \"w/\" },"
	"  \"layout\": { \"strip_prefix\": \"w/\" }, \"writable\": false,"
	"  \"visibility\": \"eventual\" }",
};

struct mfile {                   /* one name of the model */
	bool exists;             /* the mount shows it */
	char text[TEXT];         /* its bytes then */
	bool pending;            /* those bytes are closed and not in S3 */
	bool in_s3;
	char s3[TEXT];           /* what S3 holds */
};

struct run {
	struct store t;
	struct gw gw;
	struct mfile m[NAMES];
	unsigned seq, step, recovered;
	char why[256];           /* the first difference, "" while none */
	char ops[2048];          /* the sequence so far, for a failure */
};

static void name_of(unsigned i, char *out)
{
	snprintf(out, 8, "f%u", i);
}

static void note(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct run *r, const char *fmt, ...)
{
	size_t n = strlen(r->ops);
	va_list ap;
	va_start(ap, fmt);
	if (n < sizeof r->ops - 1)
		vsnprintf(r->ops + n, sizeof r->ops - n, fmt, ap);
	va_end(ap);
}

static void differ(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void differ(struct run *r, const char *fmt, ...)
{
	if (r->why[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof r->why, fmt, ap);
	va_end(ap);
}

/* Look name up in view v (0 "w", 1 "r"); the kernel forgets it again
 * once the caller is done (forget_all). */
static uint64_t looked[64];
static unsigned n_looked;

static int lookup(struct run *r, int v, const char *name, uint64_t *ino)
{
	struct core_entry e;
	int rc = core_lookup(&r->gw.rq, r->gw.view_ino[v], name, &e);
	if (rc == 0) {
		*ino = e.ino;
		if (n_looked < 64)
			looked[n_looked++] = e.ino;
	}
	return rc;
}

static void forget_all(struct run *r)
{
	for (unsigned i = 0; i < n_looked; i++)
		core_forget(&r->gw.rq, looked[i], 1);
	n_looked = 0;
}

/* Open name in "w" for writing with O_TRUNC (made if absent). */
static int open_trunc(struct run *r, const char *name, struct core_file **f)
{
	struct core_open_cache cache;
	uint64_t ino;
	int rc = lookup(r, 0, name, &ino);
	if (rc == 0)
		return core_open(&r->gw.rq, ino, O_WRONLY | O_TRUNC, f, &cache);
	if (rc != -ENOENT)
		return rc;
	struct core_entry e;
	rc = core_create(&r->gw.rq, r->gw.view_ino[0], name, NULL, &e, f, &cache);
	if (rc == 0 && n_looked < 64)
		looked[n_looked++] = e.ino;
	return rc;
}

static int write_at(struct run *r, struct core_file *f, const char *text, off_t off)
{
	ssize_t n = core_write(&r->gw.rq, f, text, strlen(text), off);
	return n == (ssize_t)strlen(text) ? 0 : n < 0 ? (int)n : -EIO;
}

static int sync_all(struct run *r)
{
	char *report = NULL;
	int rc = core_drain_sync(r->gw.core, NULL, NULL, 30, &report);
	if (rc < 0)
		differ(r, "sync: %s: %s", strerror(-rc), report ? report : "");
	free(report);
	return rc;
}

/* After a sync: what was pending is in S3. */
static void synced(struct run *r)
{
	for (unsigned i = 0; i < NAMES; i++)
		if (r->m[i].pending) {
			r->m[i].pending = false;
			r->m[i].in_s3 = true;
			memcpy(r->m[i].s3, r->m[i].text, TEXT);
		}
}

static void random_text(struct run *r, char *out)
{
	snprintf(out, TEXT, "s%u.%u.%x", r->seq, r->step, (unsigned)random() & 0xfff);
}

/* ---------- the operations ---------- */

static void op_write(struct run *r, unsigned i)
{
	char name[8], text[TEXT];
	name_of(i, name);
	random_text(r, text);
	note(r, " write(%s,%s)", name, text);
	struct core_file *f = NULL;
	int rc = open_trunc(r, name, &f);
	if (rc == 0)
		rc = write_at(r, f, text, 0);
	if (rc == 0)
		rc = core_flush(&r->gw.rq, f);
	core_release(&r->gw.rq, f);
	if (rc < 0) {
		differ(r, "write %s: %s", name, strerror(-rc));
		return;
	}
	r->m[i].exists = r->m[i].pending = true;
	memcpy(r->m[i].text, text, TEXT);
}

/* Reopened with O_TRUNC and half written while a sync runs: the sync
 * publishes nothing of it (S3 keeps what it had), the close queues it. */
static void op_reopen(struct run *r, unsigned i)
{
	char name[8], text[TEXT];
	name_of(i, name);
	random_text(r, text);
	note(r, " reopen(%s,%s)", name, text);
	struct core_file *f = NULL;
	int rc = open_trunc(r, name, &f);
	size_t half = strlen(text) / 2;
	char first[TEXT];
	snprintf(first, sizeof first, "%.*s", (int)half, text);
	if (rc == 0)
		rc = write_at(r, f, first, 0);
	if (rc == 0) {
		char *report = NULL;
		core_drain_sync(r->gw.core, NULL, NULL, 30, &report);
		free(report);
		/* the other files pending before were published */
		for (unsigned j = 0; j < NAMES; j++)
			if (j != i && r->m[j].pending) {
				r->m[j].pending = false;
				r->m[j].in_s3 = true;
				memcpy(r->m[j].s3, r->m[j].text, TEXT);
			}
		size_t n = 0;
		char key[16];
		snprintf(key, sizeof key, "w/%s", name);
		char *o = obj_get(&r->t, "b", key, &n, NULL, 0);
		if (o && n == half && !memcmp(o, first, half))
			differ(r, "reopen %s: the half-written version reached S3", name);
		free(o);
	}
	if (rc == 0)
		rc = write_at(r, f, text + half, (off_t)half);
	if (rc == 0)
		rc = core_flush(&r->gw.rq, f);
	core_release(&r->gw.rq, f);
	if (rc < 0) {
		differ(r, "reopen %s: %s", name, strerror(-rc));
		return;
	}
	r->m[i].exists = r->m[i].pending = true;
	memcpy(r->m[i].text, text, TEXT);
}

/* fsync through a descriptor open for writing (no change): publishes it. */
static void op_fsync(struct run *r, unsigned i)
{
	char name[8];
	name_of(i, name);
	if (!r->m[i].exists)
		return;
	note(r, " fsync(%s)", name);
	struct core_open_cache cache;
	struct core_file *f = NULL;
	uint64_t ino;
	int rc = lookup(r, 0, name, &ino);
	if (rc == 0)
		rc = core_open(&r->gw.rq, ino, O_RDWR, &f, &cache);
	if (rc == 0)
		rc = core_fsync(&r->gw.rq, f);
	if (rc == 0)
		rc = core_flush(&r->gw.rq, f);
	core_release(&r->gw.rq, f);
	if (rc < 0) {
		differ(r, "fsync %s: %s", name, strerror(-rc));
		return;
	}
	if (r->m[i].pending) {
		r->m[i].pending = false;
		r->m[i].in_s3 = true;
		memcpy(r->m[i].s3, r->m[i].text, TEXT);
	}
}

static void op_rename(struct run *r, unsigned i, unsigned j)
{
	char from[8], to[8];
	name_of(i, from);
	name_of(j, to);
	if (!r->m[i].exists || i == j)
		return;
	note(r, " rename(%s,%s)", from, to);
	int rc = core_rename(&r->gw.rq, r->gw.view_ino[0], from, r->gw.view_ino[0], to, 0);
	if (rc < 0) {
		differ(r, "rename %s %s: %s", from, to, strerror(-rc));
		return;
	}
	struct mfile *a = &r->m[i], *b = &r->m[j];
	bool was_pending = a->pending;
	b->exists = true;
	memcpy(b->text, a->text, TEXT);
	if (was_pending) {
		b->pending = true;       /* uploaded under the new name later */
	} else {
		b->pending = false;      /* a COPY now */
		b->in_s3 = true;
		memcpy(b->s3, a->text, TEXT);
	}
	a->exists = a->pending = false;
	a->in_s3 = false;            /* its version (if any) deleted */
}

static void op_unlink(struct run *r, unsigned i)
{
	char name[8];
	name_of(i, name);
	if (!r->m[i].exists)
		return;
	note(r, " unlink(%s)", name);
	int rc = core_unlink(&r->gw.rq, r->gw.view_ino[0], name);
	if (rc < 0) {
		differ(r, "unlink %s: %s", name, strerror(-rc));
		return;
	}
	r->m[i] = (struct mfile){ 0 };
}

/* Another client writes a pending key, then a sync: its version stays,
 * ours goes to recovered/ and the mount shows theirs. */
static void op_outside(struct run *r, unsigned i)
{
	char name[8], key[16], text[TEXT];
	name_of(i, name);
	if (!r->m[i].pending)
		return;
	snprintf(key, sizeof key, "w/%s", name);
	snprintf(text, sizeof text, "other.%u.%u", r->seq, r->step);
	note(r, " outside(%s,%s)", name, text);
	if (s3_fake_object_put(r->t.fake, "b", key, text, strlen(text), NULL, 0, NULL) < 0) {
		differ(r, "the fake refused a PUT");
		return;
	}
	r->m[i].pending = false;
	r->recovered++;
	sync_all(r);
	synced(r);
	r->m[i].in_s3 = true;
	memcpy(r->m[i].s3, text, TEXT);
	memcpy(r->m[i].text, text, TEXT);
}

/* A crash now: the staging directory recovered into an empty store gets
 * exactly the model's pending files, under their names. */
static void op_crash_image(struct run *r)
{
	note(r, " crash");
	char staging[600];
	snprintf(staging, sizeof staging, "%s/staging", r->gw.dir);
	char *img = stage_crash_copy(staging, "wbmodel-image");
	struct store t;
	struct stage *st = stage_crash_recover(img, &t);
	for (unsigned i = 0; i < NAMES; i++) {
		char name[8], key[16];
		name_of(i, name);
		snprintf(key, sizeof key, "w/%s", name);
		size_t n = 0;
		char *o = obj_get(&t, "b", key, &n, NULL, 0);
		const struct mfile *m = &r->m[i];
		if (m->pending && (!o || n != strlen(m->text) || memcmp(o, m->text, n)))
			differ(r, "crash image: %s pending as %s, recovery put %.*s", name,
			       m->text, o ? (int)n : 4, o ? o : "none");
		else if (!m->pending && o)
			differ(r, "crash image: %s not pending, recovery put %.*s", name,
			       (int)n, o);
		free(o);
	}
	stage_case_end(st, &t, img);
}

/* ---------- the checks ---------- */

static void check_read(struct run *r, int v, unsigned i)
{
	char name[8], buf[64] = "";
	name_of(i, name);
	uint64_t ino;
	int rc = lookup(r, v, name, &ino);
	const struct mfile *m = &r->m[i];
	if (!m->exists) {
		if (rc != -ENOENT)
			differ(r, "view %s: %s is there (%d), the model has none",
			       v ? "r" : "w", name, rc);
		return;
	}
	struct core_open_cache cache;
	struct core_file *f = NULL;
	ssize_t n = rc;
	if (rc == 0)
		n = core_open(&r->gw.rq, ino, O_RDONLY, &f, &cache);
	if (n == 0)
		n = core_read(&r->gw.rq, f, buf, sizeof buf - 1, 0);
	core_release(&r->gw.rq, f);
	if (n < 0 || (size_t)n != strlen(m->text) || memcmp(buf, m->text, (size_t)n))
		differ(r, "view %s: %s reads %s (%zd), the model has %s", v ? "r" : "w",
		       name, n > 0 ? buf : "", n, m->text);
}

static void check_s3(struct run *r)
{
	for (unsigned i = 0; i < NAMES; i++) {
		char name[8], key[16];
		name_of(i, name);
		snprintf(key, sizeof key, "w/%s", name);
		size_t n = 0;
		char *o = obj_get(&r->t, "b", key, &n, NULL, 0);
		const struct mfile *m = &r->m[i];
		if (m->in_s3 && (!o || n != strlen(m->s3) || memcmp(o, m->s3, n)))
			differ(r, "S3: %s holds %.*s, the model %s", name, o ? (int)n : 4,
			       o ? o : "none", m->s3);
		else if (!m->in_s3 && o)
			differ(r, "S3: %s holds %.*s, the model none", name, (int)n, o);
		free(o);
	}
}

static void step(struct run *r)
{
	unsigned i = (unsigned)random() % NAMES, j = (unsigned)random() % NAMES;
	switch (random() % 16) {
	case 0: case 1: case 2: case 3: op_write(r, i); break;
	case 4: op_reopen(r, i); break;
	case 5: op_fsync(r, i); break;
	case 6: case 7: op_rename(r, i, j); break;
	case 8: op_unlink(r, i); break;
	case 9: op_outside(r, i); break;
	case 10: case 11:
		note(r, " sync");
		if (sync_all(r) == 0)
			synced(r);
		break;
	case 12: op_crash_image(r); break;
	default: op_write(r, i); break;
	}
	forget_all(r);
	for (unsigned k = 0; k < NAMES; k++) {
		check_read(r, 0, k);
		check_read(r, 1, k);
	}
	check_s3(r);
	forget_all(r);
}

static bool sequence(struct view *const *views, unsigned seed, unsigned seq, unsigned steps)
{
	struct run *r = calloc(1, sizeof *r);
	if (!r)
		exit(2);
	r->seq = seq;
	/* every other sequence: uploads conditional on the base, as on RGW */
	unit_fscore_cond = (struct s3_cond_caps){ .if_match = seq % 2,
						  .if_none_match = seq % 2 };
	store_init(&r->t, 0);
	gw_open(views, r->t.s3, &r->gw, "wbmodel");
	struct core_drain_conf dc = { .streams = 2, .delay_s = 3600, .stop_s = 5 };
	if (core_drain_new(r->gw.core, &dc) < 0)
		exit(2);
	for (r->step = 0; r->step < steps && !r->why[0]; r->step++)
		step(r);
	if (!r->why[0]) {
		note(r, " sync(end)");
		if (sync_all(r) == 0)
			synced(r);
		check_s3(r);
		char rec[600];
		snprintf(rec, sizeof rec, "%s/staging/recovered", r->gw.dir);
		int n = count_files(rec, ".journal");
		if ((unsigned)n != r->recovered)
			differ(r, "recovered/ holds %d, the model %u", n, r->recovered);
	}
	bool ok = !r->why[0];
	if (!ok)
		printf("# seed %u sequence %u step %u: %s\n# ops:%s\n", seed, seq, r->step,
		       r->why, r->ops);
	forget_all(r);
	core_drain_free(r->gw.core);
	gw_close(&r->gw);
	store_release(&r->t);
	free(r);
	return ok;
}

int main(int argc, char **argv)
{
	unsigned seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : (unsigned)time(NULL);
	unsigned n_seq = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 200;
	unsigned steps = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 0) : 30;
	struct view *views[2] = { unit_view(view_json[0]), unit_view(view_json[1]) };
	printf("# seed %u, %u sequences of %u steps\n", seed, n_seq, steps);
	unsigned bad = 0, s;
	for (s = 0; s < n_seq && !bad; s++) {
		srandom(seed + s);
		bad += !sequence(views, seed + s, s, steps);
	}
	CHECK(!bad, "%u sequences of up to %u steps: the mount, the second view, S3, "
	      "crash images and recovered/ match the model", s, steps);
	view_free(views[0]);
	view_free(views[1]);
	return unit_exit();
}
