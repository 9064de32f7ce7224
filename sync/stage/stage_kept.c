/*
 * stage_kept.c — staged files whose commit failed, and what makes them
 * stale.
 *
 * DESIGN. A file whose commit failed keeps its "commit" journal: a retry
 * (the next commit of the open file) or, once released, the next start's
 * recovery uploads its data again (stage_journal.c). If the same key is
 * meanwhile committed, renamed onto or deleted through this gateway, or a
 * later commit of it began (another file, the same key), that upload
 * would put older bytes over the newer version or bring back a deleted
 * object. So each such file is remembered here (id, bucket, key; one entry
 * per file with a failed commit, which the staging budget bounds) from the
 * moment its commit began (kept if it fails); when its key is replaced by
 * something newer, a marker ID.stale is created beside its journal at once
 * (made durable under POWER before the replacing commit writes its own
 * "commit" journal), open file or not: recovery reads a "commit" journal
 * with a marker as "dirty" and moves the data to recovered/ (nothing is
 * lost). The marker is a file of its own so that it never races the open
 * file's own journal writes (those are made under the file's lock, which
 * this module does not take). A later commit of the file itself makes it
 * the newest again: that commit removes the marker before it journals
 * "commit" (stage_kept_begin). Marking and unmarking (flag and file) are
 * serialized by stage.kept_io, an I/O lock (common/lock.h) held across the
 * marker's creation, removal and directory sync, taken only when an entry
 * of the key or file exists (from its commit's beginning), so that an
 * unmark cannot come between a mark's flag and its file; no stat, read or
 * write takes it, only commits (seals, set-asides and drops too) and
 * renames onto or deletes of such a key. Entries go when the file's data
 * leaves (a commit succeeds, recovery uploads or moves it; recovery
 * removes the marker). A change of the key by another S3 client is not
 * seen here (a known limit: the next start's upload wins).
 * Every sealed write-back file has an entry, so a backlog may hold
 * thousands: the entries are hashed by id and by bucket and key
 * (st->kept, under stage.lock), and each call looks at one chain.
 * Calls stage_dir.c only.
 */
#include "sync/stage/stage_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/hash.h"
#include "common/lock.h"
#include "common/log.h"

struct stage_kept {
	uint64_t id;
	char *bucket, *key;
	uint64_t hkey;               /* kept_hash(bucket, key) */
	bool open;                   /* not released yet */
	bool stale;                  /* its key was replaced since: marked */
	struct stage_kept *id_next;  /* its chain in st->kept.by_id */
	struct stage_kept *key_next; /* its chain in st->kept.by_key */
	struct stage_kept *next;     /* a list of copies to mark (kept_copy) */
};

static void kept_free(struct stage_kept *k)
{
	free(k->bucket);
	free(k->key);
	free(k);
}

/* ---- the table (stage.lock held) ------------------------------------ */

static uint64_t kept_hash(const char *bucket, const char *key)
{
	return hash_fnv_str(hash_fnv_byte(hash_fnv_str(HASH_FNV_SEED, bucket), '/'), key);
}

static size_t id_slot(const struct stage_kept_table *t, uint64_t id)
{
	return (size_t)(id * 0x9E3779B97F4A7C15ull >> 17) & (t->slots - 1);
}

static size_t key_slot(const struct stage_kept_table *t, uint64_t hkey)
{
	return (size_t)hkey & (t->slots - 1);
}

static struct stage_kept *kept_find(struct stage *st, uint64_t id)
{
	struct stage_kept_table *t = &st->kept;
	struct stage_kept *k = t->slots ? t->by_id[id_slot(t, id)] : NULL;
	while (k && k->id != id)
		k = k->id_next;
	return k;
}

/* The first entry of bucket/key's chain (others of that chain follow by
 * key_next: compare their keys). */
static struct stage_kept *kept_chain(struct stage *st, uint64_t hkey)
{
	struct stage_kept_table *t = &st->kept;
	return t->slots ? t->by_key[key_slot(t, hkey)] : NULL;
}

static bool kept_is(const struct stage_kept *k, uint64_t hkey, const char *bucket,
		    const char *key)
{
	return k->hkey == hkey && !strcmp(k->bucket, bucket) && !strcmp(k->key, key);
}

static void link_id(struct stage_kept_table *t, struct stage_kept *k)
{
	size_t i = id_slot(t, k->id);
	k->id_next = t->by_id[i];
	t->by_id[i] = k;
}

static void link_key(struct stage_kept_table *t, struct stage_kept *k)
{
	size_t i = key_slot(t, k->hkey);
	k->key_next = t->by_key[i];
	t->by_key[i] = k;
}

static void unlink_key(struct stage_kept_table *t, struct stage_kept *k)
{
	struct stage_kept **p = &t->by_key[key_slot(t, k->hkey)];
	while (*p != k)
		p = &(*p)->key_next;
	*p = k->key_next;
}

/* Twice the slots, every entry linked again: 0, or -ENOMEM (the table
 * stays as it was). */
static int kept_grow(struct stage_kept_table *t)
{
	size_t slots = t->slots ? t->slots * 2 : 64;
	struct stage_kept **by_id = calloc(slots, sizeof *by_id);
	struct stage_kept **by_key = calloc(slots, sizeof *by_key);
	if (!by_id || !by_key) {
		free(by_id);
		free(by_key);
		return -ENOMEM;
	}
	struct stage_kept_table n = { by_id, by_key, slots, t->n };
	for (size_t i = 0; i < t->slots; i++)
		for (struct stage_kept *k = t->by_id[i], *next; k; k = next) {
			next = k->id_next;
			link_id(&n, k);
			link_key(&n, k);
		}
	free(t->by_id);
	free(t->by_key);
	*t = n;
	return 0;
}

/* k into the table: 0, or -ENOMEM (not inserted). */
static int kept_insert(struct stage *st, struct stage_kept *k)
{
	struct stage_kept_table *t = &st->kept;
	if (t->n >= t->slots && kept_grow(t) < 0 && !t->slots)
		return -ENOMEM;          /* a full table only gets longer chains */
	link_id(t, k);
	link_key(t, k);
	t->n++;
	return 0;
}

static void kept_remove(struct stage *st, struct stage_kept *k)
{
	struct stage_kept_table *t = &st->kept;
	struct stage_kept **p = &t->by_id[id_slot(t, k->id)];
	while (*p != k)
		p = &(*p)->id_next;
	*p = k->id_next;
	unlink_key(t, k);
	t->n--;
}

/* ---- the calls ------------------------------------------------------ */

void stage_kept_add(struct stage *st, uint64_t id, const char *bucket, const char *key,
		    bool open)
{
	struct stage_kept *k = calloc(1, sizeof *k);
	if (!k || !(k->bucket = strdup(bucket)) || !(k->key = strdup(key))) {
		if (k)
			kept_free(k);
		log_warn("stage: out of memory: a later write of %s/%s will not stop "
			 "the next start from uploading its staged copy", bucket, key);
		return;
	}
	k->id = id;
	k->open = open;
	k->hkey = kept_hash(bucket, key);
	mod_lock(&st->lock);
	struct stage_kept *o = kept_find(st, id);
	bool in = false;
	if (o)                       /* a later commit of the same file: */
		o->open = open;      /* a replacement during it stays marked */
	else
		in = kept_insert(st, k) == 0;
	mod_unlock(&st->lock);
	if (!o && !in)
		log_warn("stage: out of memory: a later write of %s/%s will not stop "
			 "the next start from uploading its staged copy", bucket, key);
	if (!in)
		kept_free(k);
}

void stage_kept_renamed(struct stage *st, uint64_t id, const char *bucket,
			const char *key)
{
	char *b = strdup(bucket), *k = strdup(key);
	mod_lock(&st->lock);
	struct stage_kept *o = kept_find(st, id);
	if (o && b && k) {
		char *ob = o->bucket, *ok = o->key;
		unlink_key(&st->kept, o);
		o->bucket = b;
		o->key = k;
		o->hkey = kept_hash(b, k);
		link_key(&st->kept, o);
		b = ob;
		k = ok;
	} else if (o) {
		log_warn("stage: out of memory: a later write of %s/%s will not stop "
			 "the next start from uploading its staged copy", bucket, key);
	}
	mod_unlock(&st->lock);
	free(b);
	free(k);
}

/* Is there an entry of bucket/key other than except (or, key NULL, of
 * file except itself)? */
static bool kept_any(struct stage *st, const char *bucket, const char *key,
		     uint64_t except)
{
	bool any = false;
	mod_lock(&st->lock);
	if (!key) {
		any = kept_find(st, except) != NULL;
	} else {
		uint64_t h = kept_hash(bucket, key);
		for (struct stage_kept *k = kept_chain(st, h); k && !any; k = k->key_next)
			any = k->id != except && kept_is(k, h, bucket, key);
	}
	mod_unlock(&st->lock);
	return any;
}

/* The kept file id no longer waits (committed, or recovery uploaded or
 * moved it); a mark it got goes too. */
void stage_kept_forget(struct stage *st, uint64_t id)
{
	if (!kept_any(st, NULL, NULL, id))
		return;
	struct stage_kept *gone = NULL;
	pthread_mutex_lock(&st->kept_io);
	mod_lock(&st->lock);
	if ((gone = kept_find(st, id)))
		kept_remove(st, gone);
	mod_unlock(&st->lock);
	if (gone && gone->stale)      /* marked meanwhile: the mark goes too */
		stage_kept_unmark(st, id);
	pthread_mutex_unlock(&st->kept_io);
	if (gone)
		kept_free(gone);
}

/* The marker ID.stale of k: its "commit" journal is not to be uploaded. */
static void kept_mark(struct stage *st, const struct stage_kept *k)
{
	char name[32];
	stage_name(k->id, ".stale", name);
	int fd = stage_create_at(st, name, O_WRONLY);
	int err = fd < 0 ? fd : 0;
	if (fd >= 0)
		close(fd);
	if (!err)
		err = stage_sync(st, st->dir_fd, false);   /* the new name */
	if (err)
		log_error("stage: %s/%s changed through the mount, but the marker "
			  "%s/%s of its older staged copy cannot be made (%s): the "
			  "next start may upload that copy over it", k->bucket, k->key,
			  st->dir, name, strerror(-err));
	else     /* the usual end of a pending file unlinked or renamed over */
		log_info("stage: %s/%s was replaced or deleted through the mount: "
			 "its older staged copy (a failed commit, or a write-back "
			 "close not uploaded yet) will not be uploaded; a start "
			 "before its release moves it to %s", k->bucket, k->key,
			 st->rec_dir);
}

/* A copy of k's identity, to mark outside the lock (k may go meanwhile);
 * NULL when out of memory. */
static struct stage_kept *kept_copy(const struct stage_kept *k)
{
	struct stage_kept *c = calloc(1, sizeof *c);
	if (c && (!(c->bucket = strdup(k->bucket)) || !(c->key = strdup(k->key)))) {
		kept_free(c);
		c = NULL;
	}
	if (c)
		c->id = k->id;
	return c;
}

void stage_kept_replaced(struct stage *st, const char *bucket, const char *key,
			 uint64_t except)
{
	if (!kept_any(st, bucket, key, except))
		return;                      /* the usual case: no lock taken */
	pthread_mutex_lock(&st->kept_io);
	struct stage_kept *mark = NULL;
	uint64_t h = kept_hash(bucket, key);
	mod_lock(&st->lock);
	for (struct stage_kept *k = kept_chain(st, h), *next; k; k = next) {
		next = k->key_next;
		if (k->id == except || k->stale || !kept_is(k, h, bucket, key))
			continue;
		struct stage_kept *m = k;
		if (k->open) {                /* the entry stays, marked stale */
			k->stale = true;
			m = kept_copy(k);
			if (!m)
				log_error("stage: out of memory: the older staged copy "
					  "of %s/%s (a failed commit) is not marked; the "
					  "next start may upload it", bucket, key);
		} else {
			kept_remove(st, k);
		}
		if (m) {
			m->next = mark;
			mark = m;
		}
	}
	mod_unlock(&st->lock);
	while (mark) {
		struct stage_kept *k = mark;
		mark = k->next;
		kept_mark(st, k);
		kept_free(k);
	}
	pthread_mutex_unlock(&st->kept_io);
}

void stage_key_replaced(struct stage *st, const char *bucket, const char *key)
{
	stage_kept_replaced(st, bucket, key, 0);
}

void stage_kept_release(struct stage *st, uint64_t id)
{
	struct stage_kept *stale = NULL;
	mod_lock(&st->lock);
	struct stage_kept *k = kept_find(st, id);
	if (k) {
		k->open = false;
		if (k->stale) {      /* marked already: nothing waits for it */
			kept_remove(st, k);
			stale = k;
		}
	}
	mod_unlock(&st->lock);
	if (stale)
		kept_free(stale);
}

void stage_kept_begin(struct stage *st, uint64_t id)
{
	if (!kept_any(st, NULL, NULL, id))
		return;
	pthread_mutex_lock(&st->kept_io);
	bool unmark = false;
	mod_lock(&st->lock);
	struct stage_kept *k = kept_find(st, id);
	if (k) {
		unmark = k->stale;
		k->stale = false;
	}
	mod_unlock(&st->lock);
	if (unmark)
		stage_kept_unmark(st, id);
	pthread_mutex_unlock(&st->kept_io);
}

void stage_kept_unmark(struct stage *st, uint64_t id)
{
	char name[32];
	stage_name(id, ".stale", name);
	if (unlinkat(st->dir_fd, name, 0) != 0 && errno != ENOENT)
		log_warn("stage: cannot remove %s/%s: %s", st->dir, name,
			 strerror(errno));
}

void stage_kept_free_all(struct stage *st)
{
	struct stage_kept_table *t = &st->kept;
	for (size_t i = 0; i < t->slots; i++)
		for (struct stage_kept *k = t->by_id[i], *next; k; k = next) {
			next = k->id_next;
			kept_free(k);
		}
	free(t->by_id);
	free(t->by_key);
	*t = (struct stage_kept_table){ 0 };
}
