/* core_ofile.c — the open-file table (core_int.h "Open files"): a file
 * staged here, found by its bucket and key while its name lasts and by
 * inode once the name is gone; the counts by which its writers, its
 * commits and the renames of its name wait for each other; what it shows
 * (core_ofile_attr). Calls core.c only.
 */
#include "fuse/core_int.h"

#include "common/lock.h"
#include "sync/stage/stage.h"
#include "views/filter.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t ino_slot(uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) >> 32) & (CORE_OFILE_SLOTS - 1);
}

static size_t key_slot(const char *bucket, const char *key)
{
	uint64_t h = 0xcbf29ce484222325ull;          /* FNV-1a of bucket/key */
	for (const unsigned char *p = (const unsigned char *)bucket; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	h = (h ^ '/') * 0x100000001b3ull;
	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	return (size_t)(h ^ (h >> 32)) & (CORE_OFILE_SLOTS - 1);
}

/* The chain of (c->ofile_lock held): by key while named, by inode once
 * unlinked. */
static struct ofile **chain_of(struct core *c, const struct ofile *of)
{
	return of->unlinked ? &c->ofiles_gone[ino_slot(of->ino)]
			    : &c->ofiles_by_key[key_slot(of->bucket, of->key)];
}

static void unchain(struct core *c, struct ofile *of)
{
	struct ofile **pp = chain_of(c, of);
	while (*pp && *pp != of)
		pp = &(*pp)->next;
	if (*pp)
		*pp = of->next;
	of->next = NULL;
}

static void chain(struct core *c, struct ofile *of)
{
	struct ofile **head = chain_of(c, of);
	of->next = *head;
	*head = of;
}

/* The named ofile of bucket/key (c->ofile_lock held), no ref taken. */
static struct ofile *key_find_locked(struct core *c, const char *bucket, const char *key)
{
	struct ofile *of = c->ofiles_by_key[key_slot(bucket, key)];
	while (of && (strcmp(of->key, key) != 0 || strcmp(of->bucket, bucket) != 0))
		of = of->next;
	return of;
}

struct ofile *core_ofile_find_key(struct core *c, const char *bucket, const char *key)
{
	mod_lock(&c->ofile_lock);
	struct ofile *of = c->n_ofiles ? key_find_locked(c, bucket, key) : NULL;
	if (of)
		of->refs++;
	mod_unlock(&c->ofile_lock);
	return of;
}

struct ofile *core_ofile_find_path(struct core_req *rq, size_t view, const char *path)
{
	struct core *c = rq->c;
	char bucket[256], key[4096];
	if (!c->n_ofiles ||   /* racy read: a hint, the lock decides below */
	    core_path_object(rq, view, path, bucket, sizeof bucket, key, sizeof key) < 0)
		return NULL;
	return core_ofile_find_key(c, bucket, key);
}

/* The unlinked ofile whose descriptors hold inode ino (ref taken). */
static struct ofile *gone_find(struct core *c, uint64_t ino)
{
	mod_lock(&c->ofile_lock);
	struct ofile *of = c->ofiles_gone[ino_slot(ino)];
	while (of && of->ino != ino)
		of = of->next;
	if (of)
		of->refs++;
	mod_unlock(&c->ofile_lock);
	return of;
}

struct ofile *core_ofile_find(struct core_req *rq, uint64_t ino, bool unlinked_too)
{
	struct core *c = rq->c;
	if (!c->n_ofiles)
		return NULL;
	struct inode_info info;
	if (inode_get(c->d.it, ino, rq, &info) < 0)
		return NULL;
	uint64_t now;
	const struct view *v = core_view(rq, info.view);
	/* Only the inode the kernel holds for the name now is the name's:
	 * one renamed over or unlinked keeps its path, and only such an
	 * inode can be the one an unlinked file's descriptors hold (the
	 * number of a forgotten one is the next file's of that name). */
	bool named = !info.gone && !info.is_dir && v &&
		     inode_find(c->d.it, view_name(v), info.path, &now) && now == ino;
	struct ofile *of = named ? core_ofile_find_path(rq, info.view, info.path) : NULL;
	free(info.path);
	if (!named && !info.is_dir && unlinked_too)
		of = gone_find(c, ino);
	return of;
}

void core_ofile_rename(struct core *c, struct ofile *of, char *path, char *key)
{
	mod_lock(&c->ofile_lock);
	if (of->tabled)
		unchain(c, of);
	free(of->path);
	free(of->key);
	of->path = path;
	of->key = key;
	if (of->tabled)
		chain(c, of);
	mod_unlock(&c->ofile_lock);
}

void core_ofile_unlink(struct core *c, struct ofile *of)
{
	if (!of)
		return;
	core_ofile_displace(c, of);
	mod_lock(&c->ofile_lock);
	while (of->committing)
		pthread_cond_wait(&c->ofile_cv, &c->ofile_lock);
	mod_unlock(&c->ofile_lock);
}

void core_ofile_hold(struct core *c, struct ofile *of)
{
	if (!of)
		return;
	mod_lock(&c->ofile_lock);
	of->held++;
	while (of->committing)
		pthread_cond_wait(&c->ofile_cv, &c->ofile_lock);
	mod_unlock(&c->ofile_lock);
}

void core_ofile_unhold(struct core *c, struct ofile *of)
{
	if (!of)
		return;
	mod_lock(&c->ofile_lock);
	of->held--;
	pthread_cond_broadcast(&c->ofile_cv);
	mod_unlock(&c->ofile_lock);
}

/* Wait while a rename holds of; then a commit of it begins unless its
 * name is gone (c->ofile_lock held). */
static bool commit_begin_locked(struct core *c, struct ofile *of)
{
	while (of->held && !of->unlinked)
		pthread_cond_wait(&c->ofile_cv, &c->ofile_lock);
	if (of->unlinked)
		return false;
	of->committing++;
	return true;
}

bool core_ofile_commit_begin(struct core *c, struct ofile *of)
{
	mod_lock(&c->ofile_lock);
	bool go = commit_begin_locked(c, of);
	mod_unlock(&c->ofile_lock);
	return go;
}

int core_ofile_publish_begin(struct core *c, struct ofile *of, bool by_writer)
{
	mod_lock(&c->ofile_lock);
	int rc = CORE_PUB_GO;
	if (of->writers && !by_writer)
		rc = CORE_PUB_WRITING;
	else if (!commit_begin_locked(c, of))
		rc = CORE_PUB_GONE;
	else if (of->writers && !by_writer) {    /* opened while a rename held it */
		of->committing--;
		pthread_cond_broadcast(&c->ofile_cv);
		rc = CORE_PUB_WRITING;
	}
	if (rc == CORE_PUB_WRITING)
		of->pub_held = true;
	mod_unlock(&c->ofile_lock);
	return rc;
}

void core_ofile_commit_end(struct core *c, struct ofile *of)
{
	mod_lock(&c->ofile_lock);
	of->committing--;
	pthread_cond_broadcast(&c->ofile_cv);
	mod_unlock(&c->ofile_lock);
}

bool core_ofile_writer_begin(struct core *c, struct ofile *of)
{
	mod_lock(&c->ofile_lock);
	while (of->committing)
		pthread_cond_wait(&c->ofile_cv, &c->ofile_lock);
	bool named = !of->unlinked;
	if (named)
		of->writers++;
	mod_unlock(&c->ofile_lock);
	return named;
}

void core_ofile_set_ino(struct core *c, struct ofile *of, uint64_t ino)
{
	mod_lock(&c->ofile_lock);
	if (!of->unlinked)   /* a gone one stays where its descriptors find it */
		of->ino = ino;
	mod_unlock(&c->ofile_lock);
}

void core_ofile_displace(struct core *c, struct ofile *of)
{
	mod_lock(&c->ofile_lock);
	if (!of->unlinked) {
		if (of->tabled)
			unchain(c, of);
		of->unlinked = true;
		if (of->tabled)
			chain(c, of);
	}
	mod_unlock(&c->ofile_lock);
}

bool core_ofile_writer_end(struct core *c, struct ofile *of)
{
	mod_lock(&c->ofile_lock);
	bool requeue = --of->writers == 0 && of->pub_held;
	if (requeue)
		of->pub_held = false;
	mod_unlock(&c->ofile_lock);
	return requeue;
}

bool core_ofile_writing(struct core *c, struct ofile *of)
{
	mod_lock(&c->ofile_lock);
	bool w = of->writers > 0;
	mod_unlock(&c->ofile_lock);
	return w;
}

bool core_ofile_unlinked(struct core *c, struct ofile *of)
{
	mod_lock(&c->ofile_lock);
	bool u = of->unlinked;
	mod_unlock(&c->ofile_lock);
	return u;
}

void core_ofile_put(struct core *c, struct ofile *of)
{
	if (!of)
		return;
	mod_lock(&c->ofile_lock);
	bool last = --of->refs == 0;
	if (last && of->tabled) {
		unchain(c, of);
		of->tabled = false;
		c->n_ofiles--;
	}
	mod_unlock(&c->ofile_lock);
	if (last)
		core_ofile_free(of);
}

struct ofile *core_ofile_insert(struct core *c, struct ofile *of)
{
	mod_lock(&c->ofile_lock);
	struct ofile *other = key_find_locked(c, of->bucket, of->key);
	if (other) {
		other->refs++;
	} else {
		chain(c, of);
		of->tabled = true;
		c->n_ofiles++;
	}
	mod_unlock(&c->ofile_lock);
	return other;
}

/* ---------- the last upload, for readers ---------- */

/* of's upload of size bytes as etag (c->ofile_lock held): told to its
 * readers, if it has any. */
void core_ofile_pub_set_locked(struct ofile *of, const char *etag, uint64_t size)
{
	struct ofile_pub *p = of->pub;
	if (!p)
		return;
	char *b = strdup(of->bucket), *k = strdup(of->key);
	if (!b || !k) {
		free(b);
		free(k);
		p->etag[0] = '\0';      /* no memory: ESTALE, never older bytes */
		return;
	}
	free(p->bucket);
	free(p->key);
	p->bucket = b;
	p->key = k;
	snprintf(p->etag, sizeof p->etag, "%s", etag);
	p->size = size;
}

struct ofile_pub *core_ofile_pub(struct core *c, struct ofile *of)
{
	/* Clean: its bytes are the version it is based on (S3's at its
	 * open, or this mount's last upload), the one its readers take. */
	bool clean = !stage_file_dirty(of->sf);
	uint64_t size = stage_file_size(of->sf);
	mod_lock(&c->ofile_lock);
	if (!of->pub && (of->pub = calloc(1, sizeof *of->pub))) {
		atomic_init(&of->pub->refs, 1);          /* of's */
		if (clean && of->base_etag[0] && strcmp(of->base_etag, CORE_BASE_ANY))
			core_ofile_pub_set_locked(of, of->base_etag, size);
	}
	struct ofile_pub *p = of->pub;
	if (p)
		atomic_fetch_add(&p->refs, 1);
	mod_unlock(&c->ofile_lock);
	return p;
}

int core_ofile_pub_version(struct core *c, struct ofile_pub *p, struct obj_meta *o)
{
	int err = 0;
	*o = (struct obj_meta){ 0 };
	mod_lock(&c->ofile_lock);
	if (p->etag[0]) {
		o->bucket = obj_strdup_opt(p->bucket, &err);
		o->key = obj_strdup_opt(p->key, &err);
		snprintf(o->etag, sizeof o->etag, "%s", p->etag);
		o->size = p->size;
	} else {
		err = -ESTALE;           /* never uploaded: its bytes are gone */
	}
	mod_unlock(&c->ofile_lock);
	if (err)
		obj_meta_release(o);
	return err;
}

/* ---------- what it shows ---------- */

void core_ofile_attr(struct core_req *rq, size_t view, struct ofile *of, uint64_t ino,
		     struct stat *st)
{
	struct core *c = rq->c;
	struct obj_posix px;
	mod_lock(&c->ofile_lock);
	posix_meta_parse(of->meta.meta, of->meta.n_meta, &px);
	bool times_set = of->times_set;
	int64_t listed = of->meta.mtime_ns;
	mod_unlock(&c->ofile_lock);
	/* Written here since its last commit: modified now (unless utimensat
	 * set the time after the last write). */
	int64_t mtime = core_now_ns();
	if (times_set || !stage_file_dirty(of->sf)) {
		if (px.have & POSIX_MTIME)
			mtime = px.mtime_ns;
		else if (listed)
			mtime = listed;
	}
	if (!times_set)
		px.have &= ~(uint32_t)(POSIX_MTIME | POSIX_ATIME | POSIX_CTIME);
	core_attr_file(c, ino, stage_file_size(of->sf), mtime, core_file_perm(rq, view), st);
	core_attr_posix(rq, view, &px, st);
}
