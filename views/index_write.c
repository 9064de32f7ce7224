/*
 * index_write.c — the write path of the index: events and scan pages go
 * through ix_run(), which reads each key's record (from the batch overlay,
 * index_batch.c, if the key occurred earlier in the same call, else from
 * LevelDB), decides stale/keep/apply, recomputes the key's membership in
 * the views that can hold it (views/route.h: by bucket and literal key
 * prefix, so the cost does not grow with the number of prefix views), and
 * writes records, memberships, counters, offsets and scan state in one
 * WriteBatch; and reads back offsets and scan state. See index.h for the
 * key schema.
 */
#include "views/index_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/array.h"
#include "common/log.h"
#include "views/index_own.h"
#include "views/route.h"

struct ix_change {
	size_t view;
	const char *path;          /* arena */
	int what;
};

/* OWN: the gateway's own writes (index_apply_own), decided as events are;
 * DECIDED: index_reconcile.c */
enum run_mode { RUN_EVENTS, RUN_OWN, RUN_SCAN, RUN_DECIDED };

struct ix_decider { ix_decide_fn fn; void *ctx; };

/* ---- decisions -------------------------------------------------------- */

/* Events: is ev provably older than the stored record? */
static bool event_is_stale(const struct obj_meta *rec, const struct obj_meta *ev)
{
	int c = seq_cmp(ev->seq, rec->seq);
	if (c != SEQ_INCOMPARABLE)
		return c < 0;
	if ((rec->flags & OBJ_FROM_SCAN) && !(rec->flags & OBJ_DELETED))
		return ev->mtime_ns < rec->mtime_ns - INDEX_TIME_SLACK_NS;
	return false;
}

bool ix_scan_keeps_record(const struct obj_meta *rec, const struct obj_meta *listed)
{
	if (rec->flags & OBJ_DELETED)
		return rec->mtime_ns >= listed->mtime_ns;
	return !(rec->flags & OBJ_FROM_SCAN);
}

static bool is_live(const struct ix_slot *s)
{
	return s->exists && !(s->rec.flags & OBJ_DELETED);
}

static int change_add(struct index *ix, size_t vi, const char *path, int what)
{
	if (ARRAY_GROW(&ix->chg, &ix->chg_cap, ix->n_chg + 1) < 0)
		return -ENOMEM;
	char *p = arena_dup(&ix->ar, path, strlen(path));
	if (!p)
		return -ENOMEM;
	ix->chg[ix->n_chg++] = (struct ix_change){ vi, p, what };
	return 0;
}

void index_set_version_hook(struct index *ix, index_version_fn fn, void *ctx)
{
	pthread_mutex_lock(&ix->wmu);
	ix->vhook = fn;
	ix->vhook_ctx = ctx;
	pthread_mutex_unlock(&ix->wmu);
}

/* Keep a version change of one key for the hook: old record in s (before
 * it is replaced), new record nr. */
static int version_add(struct index *ix, const struct ix_slot *s,
		       const struct obj_meta *nr, bool new_live, bool from_scan,
		       uint64_t warm, uint64_t warm_scan)
{
	bool old_live = is_live(s);
	const char *oe = old_live ? s->rec.etag : NULL;
	const char *ne = new_live ? nr->etag : NULL;
	if (!ix->vhook || (!oe && !ne) || (oe && ne && !strcmp(oe, ne)))
		return 0;    /* no version came or went: metadata only */
	if (ARRAY_GROW(&ix->vchg, &ix->vchg_cap, ix->n_vchg + 1) < 0)
		return -ENOMEM;
	struct index_version v = {
		.old_size = old_live ? s->rec.size : 0,
		.new_size = new_live ? nr->size : 0,
		.warm_max = new_live ? (from_scan ? warm_scan : warm) : 0,
		.from_scan = from_scan,
	};
	if (!(v.bucket = arena_dup(&ix->ar, nr->bucket, strlen(nr->bucket))) ||
	    !(v.key = arena_dup(&ix->ar, nr->key, strlen(nr->key))) ||
	    (oe && !(v.old_etag = arena_dup(&ix->ar, oe, strlen(oe)))) ||
	    (ne && !(v.new_etag = arena_dup(&ix->ar, ne, strlen(ne)))))
		return -ENOMEM;
	ix->vchg[ix->n_vchg++] = v;
	return 0;
}

/* Recompute the memberships of one key: old record in s, new record nr.
 * *warm / *warm_scan: the largest warm max_object among the views nr is a
 * member of (those with on_scan for *warm_scan). */
static int members_update(struct index *ix, const struct ix_slot *s,
			  const struct obj_meta *nr, bool new_live,
			  uint64_t *warm, uint64_t *warm_scan)
{
	*warm = *warm_scan = 0;
	if (!ix->route)
		return 0;   /* no view set installed yet */
	size_t nc = route_find(ix->route, nr->bucket, nr->key, strlen(nr->key), ix->cand);
	bool old_live = is_live(s);
	char path[IX_PATH_MAX];
	const char *mv = NULL;     /* member value, in the arena */
	size_t mvl = 0;
	for (size_t j = 0; j < nc; j++) {
		size_t vi = ix->cand[j];
		const struct ixview *xv = &ix->views[vi];
		bool om = old_live && view_match(xv->v, &s->rec);
		bool nm = new_live && view_match(xv->v, nr);
		if (!om && !nm)
			continue;
		if (nm) {
			bool on_scan;
			uint64_t w = view_warm(xv->v, &on_scan);
			*warm = w > *warm ? w : *warm;
			if (on_scan && w > *warm_scan)
				*warm_scan = w;
		}
		int rc = ix_member_path(ix, vi, nr->bucket, nr->key, path, sizeof path);
		if (rc == -ENOENT)
			continue;
		if (rc < 0) {
			if (nm && !om)
				stats_inc(&ix->ctr.bad_keys);
			continue;
		}
		ix->tbuf.len = 0;
		if (ibuf_add(&ix->tbuf, xv->prefix, xv->plen) < 0 ||
		    key_add_path(&ix->tbuf, path) < 0)
			return -ENOMEM;
		int what;
		if (om && !nm) {
			if (ix_op_add(ix, xv, ix->tbuf.p, ix->tbuf.len, NULL, 0) < 0)
				return -ENOMEM;
			ix->mdelta[vi]--;
			what = INDEX_REMOVED;
		} else {
			if (!mv) {   /* the same value in every view: encode once */
				ix->vbuf.len = 0;
				if (member_encode(&ix->vbuf, nr) < 0 ||
				    !(mv = arena_dup(&ix->ar, ix->vbuf.p, ix->vbuf.len)))
					return -ENOMEM;
				mvl = ix->vbuf.len;
			}
			if (ix_op_add(ix, xv, ix->tbuf.p, ix->tbuf.len, mv, mvl) < 0)
				return -ENOMEM;
			if (!om)
				ix->mdelta[vi]++;
			what = om ? INDEX_CHANGED : INDEX_ADDED;
		}
		if (change_add(ix, vi, path, what) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* An event that carries no content type (RGW's never do) of the version
 * the stored record describes (same ETag, times within the slack, as
 * index_same_version) keeps the record's: the gateway's own writes know
 * it, and a copy of the object's metadata needs it (fuse/core_metadata.c). */
static void keep_content_type(const struct ix_slot *s, struct obj_meta *nr)
{
	if ((nr->flags & OBJ_HAS_CTYPE) || !is_live(s) ||
	    !(s->rec.flags & OBJ_HAS_CTYPE) || !nr->etag[0] ||
	    strcmp(s->rec.etag, nr->etag) != 0)
		return;
	int64_t dt = s->rec.mtime_ns - nr->mtime_ns;
	if (dt >= INDEX_TIME_SLACK_NS || dt <= -INDEX_TIME_SLACK_NS)
		return;
	nr->content_type = s->rec.content_type;
	nr->flags |= OBJ_HAS_CTYPE;
}

/* An event of one of the gateway's own writes (index_own.h) while the
 * stored record is still the gateway's own: the record stays. The event's
 * write is forgotten either way. */
static bool own_keeps_record(struct index *ix, const struct ix_slot *s,
			     const struct obj_meta *o)
{
	if (!ix->own || !own_keys(ix->own))
		return false;        /* the usual case: no hash on the hot path */
	struct own_version v;
	own_version_of(o, &v);
	return own_take(ix->own, o->bucket, o->key, &v, ix->run_ns) && s->exists;
}

/* Process one object/event: *skipped when the stored record was kept
 * (*own: as the gateway's own, newer than the event of its own write),
 * *same when o is the stored record already (a redelivery). */
static int run_one(struct index *ix, enum run_mode mode, struct ix_slot *s,
		   const struct obj_meta *o, const struct ix_decider *dec,
		   int64_t *obj_delta, bool *skipped, bool *own, bool *same)
{
	*skipped = false;
	*own = false;
	*same = false;
	s->rec.bucket = o->bucket;
	s->rec.key = o->key;
	if (mode == RUN_DECIDED) {
		if (!dec->fn(dec->ctx, s->exists ? &s->rec : NULL, o)) {
			*skipped = true;
			return 0;
		}
	} else if (mode == RUN_EVENTS && own_keeps_record(ix, s, o)) {
		*skipped = true;
		*own = true;
		return 0;
	} else if (s->exists) {
		bool skip = mode == RUN_SCAN ? ix_scan_keeps_record(&s->rec, o)
					     : event_is_stale(&s->rec, o);
		if (skip) {
			*skipped = true;
			return 0;
		}
	}
	if (mode != RUN_OWN && ix->own)
		own_replaced(ix->own, o->bucket, o->key);
	struct obj_meta nr;
	if (o->flags & OBJ_DELETED) {
		memset(&nr, 0, sizeof nr);
		nr.bucket = o->bucket;
		nr.key = o->key;
		nr.flags = OBJ_DELETED;
		nr.mtime_ns = o->mtime_ns;
		memcpy(nr.seq, o->seq, sizeof nr.seq);
		nr.seq[sizeof nr.seq - 1] = '\0';
	} else {
		nr = *o;
		nr.flags &= ~(uint32_t)(OBJ_DELETED | OBJ_FROM_SCAN);
		if (mode == RUN_SCAN || mode == RUN_DECIDED)
			nr.flags |= OBJ_FROM_SCAN;
		else
			keep_content_type(s, &nr);
	}
	bool new_live = !(nr.flags & OBJ_DELETED);
	ix->vbuf.len = 0;
	if (rec_encode(&ix->vbuf, &nr) < 0)
		return -ENOMEM;
	if (s->exists && s->enclen == ix->vbuf.len &&
	    memcmp(s->enc, ix->vbuf.p, s->enclen) == 0) {
		*same = true;   /* same record again (redelivery): nothing to do */
		return 0;
	}
	char *enc = arena_dup(&ix->ar, ix->vbuf.p, ix->vbuf.len);
	if (!enc)
		return -ENOMEM;
	size_t enclen = ix->vbuf.len;
	uint64_t warm, warm_scan;
	int rc = members_update(ix, s, &nr, new_live, &warm, &warm_scan);
	if (rc == 0)
		rc = version_add(ix, s, &nr, new_live, mode == RUN_SCAN || mode == RUN_DECIDED,
				 warm, warm_scan);
	if (rc < 0)
		return rc;
	*obj_delta += (int64_t)new_live - (int64_t)is_live(s);
	/* the slot now holds the new record; its strings must outlive the
	 * call's later events: nr points into o (caller's, valid for the call)
	 * or is fixed-size. */
	s->rec = nr;
	s->exists = true;
	s->enc = enc;
	s->enclen = enclen;
	s->dirty = true;
	return 0;
}

static int put_counters(struct index *ix, int64_t obj_delta)
{
	char v[8];
	if (obj_delta) {
		be64_put(v, atomic_load(&ix->objects) + (uint64_t)obj_delta);
		leveldb_writebatch_put(ix->wb, "Co", 2, v, 8);
	}
	for (size_t vi = 0; vi < ix->n_views; vi++) {
		if (!ix->mdelta[vi])
			continue;
		ix->tbuf.len = 0;
		if (key_count_view(&ix->tbuf, ix->views[vi].name) < 0)
			return -ENOMEM;
		be64_put(v, atomic_load(&ix->views[vi].members) + (uint64_t)ix->mdelta[vi]);
		leveldb_writebatch_put(ix->wb, ix->tbuf.p, ix->tbuf.len, v, 8);
	}
	return 0;
}

static int put_scan_state(struct index *ix, const char *bucket,
			  const struct index_scan_state *ss)
{
	ix->tbuf.len = 0;
	ix->vbuf.len = 0;
	if (key_scan(&ix->tbuf, bucket) < 0 || ibuf_addc(&ix->vbuf, ss->done) < 0 ||
	    ibuf_add_varint(&ix->vbuf, ss->objects) < 0 ||
	    ibuf_add_str(&ix->vbuf, ss->token) < 0)
		return -ENOMEM;
	leveldb_writebatch_put(ix->wb, ix->tbuf.p, ix->tbuf.len, ix->vbuf.p, ix->vbuf.len);
	return 0;
}

static int put_offsets(struct index *ix, const struct index_pos *pos, size_t npos)
{
	char v[8];
	for (size_t i = 0; i < npos; i++) {
		ix->tbuf.len = 0;
		if (key_offset(&ix->tbuf, pos[i].topic, pos[i].partition) < 0)
			return -ENOMEM;
		be64_put(v, (uint64_t)pos[i].next_offset);
		leveldb_writebatch_put(ix->wb, ix->tbuf.p, ix->tbuf.len, v, 8);
	}
	return 0;
}

/* want: the view set the caller prepared the records for (NULL: any);
 * -EAGAIN without writing anything when another set is installed. */
static int ix_run(struct index *ix, enum run_mode mode, const struct obj_meta *objs,
		  size_t n, const struct index_pos *pos, size_t npos,
		  const char *scan_bucket, const struct index_scan_state *ss,
		  const struct ix_decider *dec, const struct viewset *want,
		  index_change_fn fn, void *ctx)
{
	size_t nslots = 0, skipped = 0, applied = 0, redelivered = 0, own = 0;
	int64_t obj_delta = 0;
	bool in_order = false;
	pthread_mutex_lock(&ix->wmu);
	if (want && want != ix->set) {
		pthread_mutex_unlock(&ix->wmu);
		return -EAGAIN;
	}
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	ix->run_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	int rc = ix_scratch_prepare(ix, n);
	size_t mask = ix_tab_mask(n);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const struct obj_meta *o = &objs[i];
		ix->evslot[i] = -1;
		if (!o->bucket || !o->key || !*o->bucket || !*o->key)
			continue;
		ix->kbuf.len = 0;
		rc = key_object(&ix->kbuf, o->bucket, o->key);
		if (rc == 0)
			rc = ix_slot_find_add(ix, mask, &nslots, &ix->evslot[i]);
	}
	if (rc == 0)
		rc = ix_slots_load(ix, nslots, &in_order);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (ix->evslot[i] < 0) {
			skipped++;
			continue;
		}
		bool skip, mine, same;
		rc = run_one(ix, mode, &ix->slots[ix->evslot[i]], &objs[i], dec,
			    &obj_delta, &skip, &mine, &same);
		if (skip)
			skipped++;
		else
			applied++;
		own += mine;
		redelivered += same;
	}
	if (rc == 0)
		rc = ix_ops_flush(ix, nslots, in_order);
	if (rc == 0)
		rc = put_offsets(ix, pos, npos);
	if (rc == 0 && ss)
		rc = put_scan_state(ix, scan_bucket, ss);
	if (rc == 0)
		rc = put_counters(ix, obj_delta);
	if (rc == 0)
		rc = ix_write(ix, mode == RUN_EVENTS ? "events" :
			      mode == RUN_OWN ? "the gateway's own change" : "a scan page");
	if (rc < 0) {
		leveldb_writebatch_clear(ix->wb);
		if (rc == -ENOMEM)
			log_error("index: out of memory applying %zu records", n);
		goto out;
	}
	atomic_fetch_add(&ix->objects, (uint64_t)obj_delta);
	for (size_t vi = 0; vi < ix->n_views; vi++)
		if (ix->mdelta[vi])
			atomic_fetch_add(&ix->views[vi].members, (uint64_t)ix->mdelta[vi]);
	if (mode == RUN_EVENTS) {
		stats_add(&ix->ctr.applied, applied);
		stats_add(&ix->ctr.ignored, skipped);
		stats_add(&ix->ctr.redelivered, redelivered);
		stats_add(&ix->ctr.own, own);
	}
	for (size_t i = 0; mode == RUN_OWN && ix->own && i < n; i++) {
		struct own_version v;
		if (ix->evslot[i] < 0)
			continue;
		own_version_of(&objs[i], &v);
		own_note(ix->own, objs[i].bucket, objs[i].key, &v, ix->run_ns);
	}
	ix_bloom_maybe_rebuild(ix, 0);
	for (size_t i = 0; fn && i < ix->n_chg; i++)
		fn(ctx, ix->views[ix->chg[i].view].name, ix->chg[i].path, ix->chg[i].what);
	for (size_t i = 0; ix->vhook && i < ix->n_vchg; i++)
		ix->vhook(ix->vhook_ctx, &ix->vchg[i]);
	rc = (int)skipped;
out:
	pthread_mutex_unlock(&ix->wmu);
	return rc;
}

int index_apply(struct index *ix, const struct obj_meta *ev, size_t n,
		const struct index_pos *pos, size_t npos,
		index_change_fn fn, void *ctx)
{
	return ix_run(ix, RUN_EVENTS, ev, n, pos, npos, NULL, NULL, NULL, NULL, fn, ctx);
}

int index_apply_own(struct index *ix, const struct obj_meta *o,
		    index_change_fn fn, void *ctx)
{
	return ix_run(ix, RUN_OWN, o, 1, NULL, 0, NULL, NULL, NULL, NULL, fn, ctx);
}

int index_apply_for(struct index *ix, const struct viewset *vs,
		    const struct obj_meta *ev, size_t n,
		    const struct index_pos *pos, size_t npos,
		    index_change_fn fn, void *ctx)
{
	return ix_run(ix, RUN_EVENTS, ev, n, pos, npos, NULL, NULL, NULL, vs, fn, ctx);
}

int index_scan_apply(struct index *ix, const char *bucket,
		     const struct obj_meta *objs, size_t n,
		     const struct index_scan_state *after,
		     index_change_fn fn, void *ctx)
{
	return ix_run(ix, RUN_SCAN, objs, n, NULL, 0, bucket, after, NULL, NULL, fn, ctx);
}

int ix_run_decided(struct index *ix, const struct obj_meta *objs, size_t n,
		   ix_decide_fn decide, void *dctx, index_change_fn fn, void *ctx)
{
	struct ix_decider dec = { decide, dctx };
	return ix_run(ix, RUN_DECIDED, objs, n, NULL, 0, NULL, NULL, &dec, NULL, fn, ctx);
}

/* ---- offsets and scan state ------------------------------------------- */

int index_offset_get(struct index *ix, const char *topic, int32_t partition,
		     int64_t *next)
{
	struct ibuf k = { 0 };
	char *v;
	size_t vl;
	if (key_offset(&k, topic, partition) < 0)
		return -ENOMEM;
	int rc = ix_get(ix, NULL, k.p, k.len, &v, &vl);
	ibuf_release(&k);
	if (rc < 0)
		return rc;
	if (vl == 8)
		*next = (int64_t)be64_get(v);
	else
		rc = -EIO;
	leveldb_free(v);
	return rc;
}

int index_scan_state_get(struct index *ix, const char *bucket,
			 struct index_scan_state *out)
{
	struct ibuf k = { 0 };
	char *v;
	size_t vl;
	memset(out, 0, sizeof *out);
	if (key_scan(&k, bucket) < 0)
		return -ENOMEM;
	int rc = ix_get(ix, NULL, k.p, k.len, &v, &vl);
	ibuf_release(&k);
	if (rc < 0)
		return rc;
	/* u8 done, varint objects, str token */
	const unsigned char *p = (const unsigned char *)v, *end = p + vl;
	rc = -EIO;
	if (vl >= 1) {
		out->done = p[0] != 0;
		p++;
		uint64_t x = 0, tl = 0;
		int shift = 0;
		while (p < end && shift < 64) {
			x |= (uint64_t)(*p & 0x7f) << shift;
			shift += 7;
			if (!(*p++ & 0x80))
				break;
		}
		out->objects = x;
		shift = 0;
		while (p < end && shift < 64) {
			tl |= (uint64_t)(*p & 0x7f) << shift;
			shift += 7;
			if (!(*p++ & 0x80))
				break;
		}
		if ((uint64_t)(end - p) == tl + 1 && tl < sizeof out->token) {
			memcpy(out->token, p, tl);
			out->token[tl] = '\0';
			rc = 0;
		}
	}
	leveldb_free(v);
	if (rc < 0)
		log_error("index: scan state of bucket %s is corrupt", bucket);
	return rc;
}
