/*
 * test_fscore_dir.c — readdir of the file-system core (fuse/core.h) over
 * a directory of a few thousand index entries, in replies of a few
 * entries as the kernel asks for them:
 *  - a listing returns every name once, in byte order, with the made
 *    directories merged in;
 *  - a readdir from the offset of an entry inside the last reply (the
 *    kernel asking again from the last entry its caller took) resumes
 *    after that entry;
 *  - while names are added and removed before and after the cursor
 *    between replies, no name comes twice, every name returned existed,
 *    and every name present throughout is returned;
 *  - seekdir: an offset kept from earlier in the listing resumes after
 *    its name, also when that name was deleted since (a file, or a
 *    directory gone with its last child), and on another handle (read
 *    again from the start); an offset of no name: -EINVAL;
 *  - what a handle holds stays bounded, whatever the directory's size.
 *
 *   test_fscore_dir [SEED]
 */
#include "unit.h"
#include "unit_views.h"
#include "unit_fscore.h"
#include "unit_index.h"

#include "sync/s3/s3_fake.h"
#include "views/index.h"

#include <errno.h>
#include <stdbool.h>

#define N 3000

static struct gw gw;

static void changed(void *ctx, const char *view, const char *path, int what)
{
	(void)ctx;
	if (what == INDEX_REMOVED)
		core_dir_removed(gw.core, view, path);
}

static void put_name(const char *name)
{
	char key[96];
	snprintf(key, sizeof key, "s/d/%s", name);
	struct obj_meta o = mk(BUCKET, key, 10, 1000, "e1", "");
	if (index_apply(gw.ix, &o, 1, NULL, 0, changed, NULL) < 0)
		printf("# index_apply of %s failed\n", key);
	obj_meta_release(&o);
}

static void del_name(const char *name)
{
	char key[96];
	snprintf(key, sizeof key, "s/d/%s", name);
	struct obj_meta o = mkdel(BUCKET, key, 2000, "");
	if (index_apply(gw.ix, &o, 1, NULL, 0, changed, NULL) < 0)
		printf("# index_apply of the delete of %s failed\n", key);
	obj_meta_release(&o);
}

/* ---- one reply ---- */

struct reply {
	int max, n;
	char name[64][64];
	off_t next[64];
};

static int take(void *ctx, const struct core_dirent *e)
{
	struct reply *r = ctx;
	if (r->n == r->max)
		return 1;
	snprintf(r->name[r->n], sizeof r->name[r->n], "%s", e->name);
	r->next[r->n] = e->next;
	r->n++;
	return 0;
}

static int reply(struct core_dir *d, off_t off, int max, struct reply *r)
{
	memset(r, 0, sizeof *r);
	r->max = max;
	return core_readdir(&gw.rq, d, off, false, take, r);
}

/* ---- the names present, as a set over name numbers ---- */

#define SPACE 20000              /* name numbers 0..SPACE-1 */
static bool present[SPACE], ever[SPACE], always[SPACE], seen[SPACE];

static void nm(int i, char *out, size_t len)
{
	snprintf(out, len, "n%05d", i);
}

static int num_of(const char *name)
{
	if (name[0] != 'n' || strlen(name) != 6)
		return -1;
	return atoi(name + 1);
}

static void add(int i)
{
	char s[16];
	nm(i, s, sizeof s);
	put_name(s);
	present[i] = ever[i] = true;
}

static void del(int i)
{
	char s[16];
	nm(i, s, sizeof s);
	del_name(s);
	present[i] = always[i] = false;
}

static uint64_t dir_ino(void)
{
	struct core_entry e;
	int rc = core_lookup(&gw.rq, gw.view_ino[0], "d", &e);
	if (rc < 0) {
		printf("# lookup of d: %s\n", strerror(-rc));
		exit(2);
	}
	return e.ino;
}

static void whole_listing(uint64_t ino)
{
	struct core_dir *d;
	if (core_opendir(&gw.rq, ino, &d) < 0)
		exit(2);
	off_t off = 0;
	int total = 0, dots = 0, twice = 0, order = 0, made = 0, rc = 0;
	char prev[64] = "";
	memset(seen, 0, sizeof seen);
	for (;;) {
		struct reply r;
		if ((rc = reply(d, off, 7, &r)) < 0 || r.n == 0)
			break;
		for (int i = 0; i < r.n; i++) {
			if (!strcmp(r.name[i], ".") || !strcmp(r.name[i], "..")) {
				dots++;
				continue;
			}
			made += !strcmp(r.name[i], "made");
			int k = num_of(r.name[i]);
			if (k >= 0 && seen[k])
				twice++;
			if (k >= 0)
				seen[k] = true;
			if (strcmp(r.name[i], prev) <= 0)
				order++;
			snprintf(prev, sizeof prev, "%s", r.name[i]);
			total++;
		}
		off = r.next[r.n - 1];
	}
	int missing = 0;
	for (int i = 0; i < SPACE; i++)
		missing += present[i] && !seen[i];
	CHECK(rc == 0 && dots == 2 && twice == 0 && missing == 0 && order == 0 && made == 1,
	      "a listing in replies of 7: %d entries, each once, in byte order, with . and .. "
	      "and the made directory once (rc %d, twice %d, missing %d, out of order %d, "
	      "made %d)", total, rc, twice, missing, order, made);
	size_t handles, bytes;
	core_dir_mem(gw.core, &handles, &bytes);
	CHECK(handles == 1 && bytes < 16 * 1024,
	      "the handle holds %zu bytes after listing %d names (its last reply only)", bytes,
	      total);
	core_releasedir(&gw.rq, d);
}

/* The kernel asks again from an entry inside the last reply. */
static void rerequest(uint64_t ino)
{
	struct core_dir *d;
	if (core_opendir(&gw.rq, ino, &d) < 0)
		exit(2);
	struct reply r, r2;
	reply(d, 0, 40, &r);
	int rc = reply(d, r.next[12], 5, &r2);
	CHECK(rc == 0 && r2.n == 5 && !strcmp(r2.name[0], r.name[13]) &&
	      !strcmp(r2.name[4], r.name[17]),
	      "from the offset of the 13th entry of the last reply: the 14th on (%s)",
	      r2.n ? r2.name[0] : "-");
	rc = reply(d, r.next[39], 3, &r2);
	CHECK(rc == 0 && r2.n == 3 && strcmp(r2.name[0], r.name[39]) > 0,
	      "from the offset of an entry of the reply before: after it (%s)",
	      r2.n ? r2.name[0] : "-");
	core_releasedir(&gw.rq, d);
}

/* Names added and removed around the cursor between replies. */
static void churn(uint64_t ino, unsigned seed)
{
	srand(seed);
	for (int i = 0; i < SPACE; i++)
		always[i] = present[i];
	memset(seen, 0, sizeof seen);
	struct core_dir *d;
	if (core_opendir(&gw.rq, ino, &d) < 0)
		exit(2);
	off_t off = 0;
	int twice = 0, never = 0, total = 0, rc = 0, replies = 0;
	for (;;) {
		struct reply r;
		if ((rc = reply(d, off, 1 + rand() % 20, &r)) < 0 || r.n == 0)
			break;
		replies++;
		for (int i = 0; i < r.n; i++) {
			int k = num_of(r.name[i]);
			if (k < 0)
				continue;
			twice += seen[k];
			seen[k] = true;
			never += !ever[k];
			total++;
		}
		off = r.next[r.n - 1];
		for (int j = 0; j < 6; j++) {          /* anywhere */
			int k = rand() % SPACE;
			if (present[k])
				del(k);
			else
				add(k);
		}
		int cur = num_of(r.name[r.n - 1]);     /* at the cursor */
		if (cur >= 0) {
			if (present[cur])
				del(cur);
			if (cur + 1 < SPACE && !present[cur + 1])
				add(cur + 1);
		}
	}
	int missing = 0;
	for (int i = 0; i < SPACE; i++)
		missing += always[i] && !seen[i];
	CHECK(rc == 0 && twice == 0 && never == 0 && missing == 0,
	      "seed %u: %d names in %d replies while 6 names changed and the cursor's name "
	      "went after each: none twice (%d), none that never existed (%d), none present "
	      "throughout missed (%d)", seed, total, replies, twice, never, missing);
	core_releasedir(&gw.rq, d);
}

/* telldir here, go on, then seekdir back. */
static void seek_back(uint64_t ino)
{
	struct core_dir *d;
	if (core_opendir(&gw.rq, ino, &d) < 0)
		exit(2);
	struct reply r, r2;
	reply(d, 0, 30, &r);
	off_t kept = r.next[20];                     /* telldir after entry 20 */
	char kept_name[64], next_name[64];
	snprintf(kept_name, sizeof kept_name, "%s", r.name[20]);
	snprintf(next_name, sizeof next_name, "%s", r.name[21]);
	off_t off = r.next[29];
	for (int i = 0; i < 5; i++) {                /* read on */
		reply(d, off, 20, &r2);
		off = r2.next[r2.n - 1];
	}
	int rc = reply(d, kept, 1, &r2);
	CHECK(rc == 0 && r2.n == 1 && !strcmp(r2.name[0], next_name),
	      "seekdir to an offset 100 names back: the name after it (%s)",
	      r2.n ? r2.name[0] : "-");
	/* delete the kept name and the one after it, then seek to it */
	int k = num_of(kept_name), k2 = num_of(next_name);
	del(k);
	del(k2);
	reply(d, off, 20, &r2);                      /* another reply between */
	rc = reply(d, kept, 1, &r2);
	int want = k2 + 1;
	while (want < SPACE && !present[want])
		want++;
	char wname[16];
	nm(want, wname, sizeof wname);
	CHECK(rc == 0 && r2.n == 1 && !strcmp(r2.name[0], wname),
	      "seekdir to the offset of a name deleted since (and the next one): %s, the first "
	      "name after it (%s)", wname, r2.n ? r2.name[0] : "-");

	/* another handle: an offset of a present name is read from the start */
	struct core_dir *d2;
	if (core_opendir(&gw.rq, ino, &d2) < 0)
		exit(2);
	char pname[16];
	int p = SPACE / 2;
	while (!present[p])
		p++;
	nm(p, pname, sizeof pname);
	rc = reply(d2, (off_t)core_dir_cookie(pname), 1, &r2);
	int q = p + 1;
	while (q < SPACE && !present[q])
		q++;
	char qname[16];
	nm(q, qname, sizeof qname);
	CHECK(rc == 0 && r2.n == 1 && !strcmp(r2.name[0], qname),
	      "an offset this handle never returned, of a present name: after it (%s)",
	      r2.n ? r2.name[0] : "-");
	rc = reply(d2, (off_t)core_dir_cookie(kept_name), 1, &r2);
	CHECK(rc == -EINVAL, "an offset of a name gone before this handle returned it: -EINVAL (%d)",
	      rc);
	rc = reply(d2, 12345, 1, &r2);
	CHECK(rc == -EINVAL || (rc == 0 && r2.n == 0),
	      "an offset of no name: -EINVAL (%d)", rc);
	core_releasedir(&gw.rq, d2);
	core_releasedir(&gw.rq, d);
}

/* A directory that goes with its last child: a seekdir to its offset in
 * its parent's listing still resumes after it. */
static void seek_gone_dir(void)
{
	char key[64];
	struct obj_meta o = mk(BUCKET, "s/e/only", 10, 1000, "e1", "");
	index_apply(gw.ix, &o, 1, NULL, 0, changed, NULL);
	obj_meta_release(&o);
	struct core_dir *d;
	if (core_opendir(&gw.rq, gw.view_ino[0], &d) < 0)
		exit(2);
	struct reply r;
	reply(d, 0, 10, &r);
	off_t e_off = -1;
	for (int i = 0; i < r.n; i++)
		if (!strcmp(r.name[i], "e"))
			e_off = r.next[i];
	snprintf(key, sizeof key, "s/e/only");
	o = mkdel(BUCKET, key, 2000, "");
	index_apply(gw.ix, &o, 1, NULL, 0, changed, NULL);
	obj_meta_release(&o);
	reply(d, 0, 3, &r);                      /* another reply between: . .. d */
	int rc = reply(d, e_off, 5, &r);
	CHECK(e_off > 0 && rc == 0 && r.n == 0,
	      "seekdir to a directory gone with its last child: after it, the end (%d, %d)",
	      rc, r.n);
	core_releasedir(&gw.rq, d);
}

int main(int argc, char **argv)
{
	unsigned seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : (unsigned)time(NULL);
	struct s3 *s3;
	struct view *views[2];
	if (s3_fake_new(&s3) < 0 || s3_fake_bucket_add(s3, BUCKET) < 0) {
		printf("# fake S3 set-up failed\n");
		return 2;
	}
	for (int v = 0; v < 2; v++)
		views[v] = unit_view(unit_fscore_view_json[v]);
	gw_open(views, s3, &gw, "fscore-dir");
	for (int i = 0; i < SPACE; i += SPACE / N)
		add(i);
	uint64_t ino = dir_ino();
	struct core_entry e;
	int rc = core_mkdir(&gw.rq, ino, "made", NULL, &e);
	CHECK(rc == 0, "a directory made in it (%d)", rc);
	whole_listing(ino);
	rerequest(ino);
	churn(ino, seed);
	churn(ino, seed + 1);
	seek_back(ino);
	seek_gone_dir();
	gw_close(&gw);
	for (int v = 0; v < 2; v++)
		view_free(views[v]);
	s3_free(s3);
	return unit_exit();
}
