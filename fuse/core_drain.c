/* core_drain.c — the commit points of a descriptor (close, fsync) and the
 * drain of write-back views (docs/semantics.md "Write-back"): its workers,
 * the syncs, the files a previous run left (adoption), its start and stop.
 * The queue it runs, with its entries' states and the syncs' waiters, is
 * core_drain_queue.c's.
 *
 * DESIGN. In a view with "write_back", close seals the file instead of
 * uploading it (core_ofile_seal: durable in the burst buffer, journaled
 * "commit", indexed as this gateway's own), and the file's ofile joins the
 * drain's queue, which holds a reference on it: the ofile stays in the
 * core's table after its last descriptor, so this mount lists it and any
 * descriptor reads its staged bytes (read-your-writes as for an open
 * file). drain_streams workers publish the queue oldest close first:
 * each takes the oldest entry that is not being uploaded and whose time
 * has come (drain_delay after its close; after a failure, a backoff of 1,
 * 2, 4 ... 60 s; during a burst, below), and uploads it with the ofile's
 * commit (core_commit.c), which serializes against a close, an unlink or a
 * rename of the same file. A file sealed again while its upload runs is
 * uploaded again after it (`again`); one sealed again before its upload
 * began is uploaded once. An unlinked file is dropped from the queue
 * without an upload.
 *
 * Bursts: while files are being closed one after another (the last close
 * less than quiet_ms ago, DRAIN_QUIET_MS by default), a file closed less
 * than hold_ms ago (DRAIN_HOLD_MS) waits, so that the writing program has
 * the CPU, the disk and the network to itself, and the drain runs behind
 * the burst: at its end, or on the files older than hold_ms while it goes
 * on. A burst holds nothing once half the staging budget is used, so that
 * writes never wait for room while the drain idles; a sync, an fsync and
 * a stop do not wait.
 *
 * Every upload is a publish (core_ofile_publish, core_commit.c): checked
 * against the version the file was based on, its bytes set aside to
 * recovered/ when another client wrote the key meanwhile (counted in
 * drain.conflicts). fsync takes the same path.
 *
 * fsync of a write-back file publishes it at once. core_drain_sync
 * publishes what was pending when it began (everything, or under one
 * path) and waits for that only: a file closed again and again meanwhile
 * keeps no sync waiting. At the core's end the drain runs for up to
 * stop_drain seconds, then cancels the uploads in flight (the workers
 * watch d->cancel, common/s3.h: a request ends within about a second) and
 * joins its workers; what is left, the cancelled uploads with it, stays
 * journaled "commit" for the next start: its recovery leaves such files
 * staged, and core_drain_adopt_all queues them again after the mount
 * (before its first request), due at once, each under the view that
 * shows its key and checked against the base its journal names. (Workers
 * left running past the stop instead would write the journal and the
 * index after the core and the stage are freed.)
 */
#include "fuse/core_drain_queue.h"

#include "common/lock.h"
#include "common/log.h"
#include "common/s3.h"
#include "common/stats.h"
#include "sync/stage/stage.h"
#include "views/filter.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DRAIN_QUIET_MS 100           /* closes this close together: a burst */
#define DRAIN_HOLD_MS 3000           /* how long a burst holds a closed file */

static const struct stats_def drain_stats[] = {
	STATS_GAUGE(struct drain_counters, pending_files, "drain", "pending_files"),
	STATS_GAUGE(struct drain_counters, pending_bytes, "drain", "pending_bytes"),
	STATS_GAUGE(struct drain_counters, uploading, "drain", "uploading"),
	STATS_GAUGE(struct drain_counters, oldest_seconds, "drain", "oldest_seconds"),
	STATS_COUNTER(struct drain_counters, done, "drain", "done"),
	STATS_COUNTER(struct drain_counters, done_bytes, "drain", "done_bytes"),
	STATS_COUNTER(struct drain_counters, failed, "drain", "failed"),
	STATS_COUNTER(struct drain_counters, conflicts, "drain", "conflicts"),
	STATS_MS(struct drain_counters, blocked_ms, "drain", "blocked_ms",
		 "facetfs_drain_blocked_seconds_total"),
	STATS_GAUGE(struct drain_counters, bytes_per_second, "drain", "bytes_per_second"),
};

/* Wait on cv (d->lock held) for at most ns (1 s when ns is 0 or more). */
static void cond_wait_for(struct core_drain *d, pthread_cond_t *cv, int64_t ns)
{
	if (ns <= 0 || ns > 1000000000)
		ns = 1000000000;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t t = (int64_t)ts.tv_nsec + ns;
	ts.tv_sec += t / 1000000000;
	ts.tv_nsec = t % 1000000000;
	pthread_cond_timedwait(cv, &d->lock, &ts);
}

static void *drain_main(void *arg)
{
	struct core_drain *d = arg;
	s3_cancel_watch(&d->cancel);
	mod_lock(&d->lock);
	while (!d->stop) {
		int64_t wait;
		struct drain_ent *e = drain_next_ready(d, &wait);
		if (!e) {
			cond_wait_for(d, &d->work, wait);
			continue;
		}
		drain_take(d, e);
		struct ofile *of = e->of;
		mod_unlock(&d->lock);
		uint64_t size = stage_file_size(of->sf);
		int rc = core_ofile_publish(d->c, of, false);
		mod_lock(&d->lock);
		struct ofile *put = drain_upload_ended(d, e, rc, size);
		if (put) {
			mod_unlock(&d->lock);
			core_ofile_put(d->c, put);   /* may release the staged file */
			mod_lock(&d->lock);
			drain_ent_free(d, e);
		}
		pthread_cond_broadcast(&d->progress);
	}
	mod_unlock(&d->lock);
	s3_cancel_watch(NULL);
	return NULL;
}

int core_drain_new(struct core *c, const struct core_drain_conf *conf)
{
	struct core_drain *d = calloc(1, sizeof *d);
	if (!d)
		return -ENOMEM;
	d->c = c;
	d->conf = *conf;
	if (!d->conf.streams)
		d->conf.streams = 8;
	if (d->conf.streams > DRAIN_MAX_STREAMS)
		d->conf.streams = DRAIN_MAX_STREAMS;
	if (!d->conf.quiet_ms)
		d->conf.quiet_ms = DRAIN_QUIET_MS;
	if (!d->conf.hold_ms)
		d->conf.hold_ms = DRAIN_HOLD_MS;
	d->wait_ok.by_time = d->wait_err.by_time = true;
	atomic_init(&d->cancel, false);
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->work, NULL);
	pthread_cond_init(&d->progress, NULL);
	stats_group_add(c->d.st, &d->grp, drain_stats,
			sizeof drain_stats / sizeof drain_stats[0], &d->ctr);
	c->drain = d;
	return 0;
}

/* Start the workers on first use (d->lock held). */
static void threads_start(struct core_drain *d)
{
	while (d->n_threads < d->conf.streams &&
	       pthread_create(&d->tid[d->n_threads], NULL, drain_main, d) == 0)
		d->n_threads++;
	if (!d->n_threads)
		log_error("write-back: cannot start a drain thread; files stay "
			  "pending for the next start");
}

/* of joins the queue (a reference taken), or its entry is refreshed. */
static void enqueue(struct core_drain *d, struct ofile *of)
{
	struct drain_ent *n = calloc(1, sizeof *n);
	uint64_t size = stage_file_size(of->sf);
	mod_lock(&d->lock);
	int64_t now = drain_now_ns();
	d->last_close_ns = now;
	uint64_t seq = ++d->seq;
	struct drain_ent *e = of->drain;
	if (e) {
		d->bytes = d->bytes - e->bytes + size;
		e->bytes = size;
		if (e->state == DS_WRITING)  /* its last writer closed */
			drain_waiters_retry(d, e);
		if (e->state == DS_UPLOADING) {
			e->again_seq = seq;
			drain_ent_to(d, e, DS(DS_UPLOADING), DS_UPLOADING_AGAIN);
		} else if (e->state != DS_UPLOADING_AGAIN) {
			if (!e->err)
				e->ready_ns = now + (int64_t)d->conf.delay_s * 1000000000;
			drain_place(d, e, DS_WAITING | DS(DS_WRITING), now);
		}
	} else if (n && drain_heaps_reserve(d, (size_t)d->files + 1) == 0) {
		drain_ent_add(d, n, of, seq, size, now,
			now + (int64_t)d->conf.delay_s * 1000000000);
		n = NULL;
	} else {
		log_error("write-back: out of memory: %s/%s stays pending until it is "
			  "closed again or the next start", of->bucket, of->key);
	}
	if (!d->n_threads)
		threads_start(d);
	pthread_cond_signal(&d->work);
	mod_unlock(&d->lock);
	free(n);
}

int core_truncate(struct core_req *rq, uint64_t ino, struct core_file *f, uint64_t size)
{
	struct core *c = rq->c;
	struct ofile *of = NULL;
	int rc = core_truncate_staged(rq, ino, f, size, &of);
	if (!of)
		return rc;
	/* truncate(2) on a path is its own commit point: in a write-back
	 * view a close (sealed and queued: the drain's checked upload) */
	size_t v = core_view_find(rq, of->vname);
	bool wb = c->drain && v < core_views(rq)->n && view_write_back(core_view(rq, v));
	if (rc == 0 && wb) {
		rc = core_ofile_seal(c, of);
		if (rc == 0 && stage_file_dirty(of->sf))
			enqueue(c->drain, of);
	} else if (rc == 0) {
		rc = core_ofile_commit(c, of);
	}
	stage_file_park(of->sf);
	if (core_ofile_writer_end(c, of) && c->drain)
		enqueue(c->drain, of);
	core_ofile_put(c, of);
	return rc;
}

void core_release(struct core_req *rq, struct core_file *f)
{
	struct core *c = rq->c;
	struct ofile *of = core_file_close(c, f);
	if (of && c->drain)
		enqueue(c->drain, of);       /* its last writer: published after */
	core_ofile_put(c, of);
}

/* The view of a descriptor now. */
static bool file_write_back(struct core_req *rq, struct core_file *f)
{
	size_t v = core_view_follow(rq, &f->view, f->vname);
	return v < core_views(rq)->n && view_write_back(core_view(rq, v));
}

int core_flush(struct core_req *rq, struct core_file *f)
{
	struct core *c = rq->c;
	if (!f->writable)
		return 0;
	if (!c->drain || !file_write_back(rq, f))
		return core_ofile_commit(c, f->of);
	int rc = core_ofile_seal(c, f->of);
	if (rc == 0 && stage_file_dirty(f->of->sf))
		enqueue(c->drain, f->of);
	return rc;
}

int core_drain_reseal(struct core *c, struct ofile *of)
{
	struct core_drain *d = c->drain;
	if (!d)
		return 0;
	mod_lock(&d->lock);
	bool queued = of->drain != NULL;
	mod_unlock(&d->lock);
	if (!queued && core_ofile_writing(c, of))
		return 0;            /* open for writing: its close seals it */
	int rc = core_ofile_seal(c, of);
	if (rc == 0 && stage_file_dirty(of->sf))
		enqueue(d, of);
	return rc;
}

/* Publish of now (fsync of a write-back file), by the drain's checked
 * path: its entry, if any, is done when the upload succeeds. A conflict
 * (another client wrote the key since the file's base: the local bytes
 * went to recovered/) is the fsync's EIO. */
static int publish_now(struct core *c, struct ofile *of)
{
	struct core_drain *d = c->drain;
	int rc = core_ofile_publish(c, of, true);
	if (rc < 0)
		return rc;
	struct ofile *put = NULL;
	mod_lock(&d->lock);
	if (rc == PUB_CONFLICT)
		stats_inc(&d->ctr.conflicts);
	struct drain_ent *e = of->drain;
	if (e && !(DS(e->state) & DS_BUSY) && !stage_file_dirty(of->sf))
		put = drain_ent_detach(d, e);
	mod_unlock(&d->lock);
	if (put)
		core_ofile_put(c, put);
	mod_lock(&d->lock);
	if (put)
		drain_ent_free(d, e);
	pthread_cond_broadcast(&d->progress);
	mod_unlock(&d->lock);
	return rc == PUB_CONFLICT ? -EIO : 0;   /* S3 keeps the other version */
}

int core_fsync(struct core_req *rq, struct core_file *f)
{
	struct core *c = rq->c;
	if (f->writable && c->drain && file_write_back(rq, f))
		return publish_now(c, f->of);
	if (f->writable && vis_fsync_commits(core_view_policy(rq, core_view_follow(
							   rq, &f->view, f->vname))))
		return core_ofile_commit(c, f->of);
	return core_file_sync(rq, f);
}

/* core_drain_sync; persist: keep retrying failures until timeout_s (a
 * stop) instead of returning once every file left has failed. */
static int drain_sync(struct core *c, const char *vname, const char *path,
		      int timeout_s, bool persist, char **report)
{
	struct core_drain *d = c->drain;
	*report = NULL;
	if (!d)
		return 0;
	int64_t end = drain_now_ns() + (int64_t)timeout_s * 1000000000;
	mod_lock(&d->lock);
	int b;
	while ((b = drain_waiter_begin(d, vname, path)) < 0 && drain_now_ns() < end)
		cond_wait_for(d, &d->progress, end - drain_now_ns());
	if (b < 0) {
		mod_unlock(&d->lock);
		*report = strdup("too many syncs at once\n");
		return -ETIMEDOUT;
	}
	struct drain_waiter *w = &d->waiter[b];
	d->syncing++;
	d->flush = true;
	drain_flush_begin(d);
	pthread_cond_broadcast(&d->work);
	int rc = 0;
	while (w->left) {
		bool failed = w->failed == w->left && !persist;
		if (failed || drain_now_ns() >= end) {
			*report = drain_waiter_report(d, (unsigned)b);
			rc = failed ? -EIO : -ETIMEDOUT;
			break;
		}
		cond_wait_for(d, &d->progress, end - drain_now_ns());
	}
	drain_waiter_end(d, (unsigned)b);
	if (--d->syncing == 0 && !d->stop)
		d->flush = false;
	mod_unlock(&d->lock);
	return rc;
}

int core_drain_sync(struct core *c, const char *vname, const char *path,
		    int timeout_s, char **report)
{
	return drain_sync(c, vname, path, timeout_s, false, report);
}

/* ---- files the start's recovery left (adoption) ---- */

/* The view that shows bucket/key for a file taken up: of the views whose
 * buckets and key conditions hold it, a write-back one first, then a
 * writable one, then any; its path there in path. INODE_NO_VIEW: none. */
static size_t adopt_view(struct core_req *rq, const char *bucket, const char *key,
			 char *path, size_t len)
{
	const struct core_views *vs = core_views(rq);
	size_t best = INODE_NO_VIEW;
	int best_rank = 0;
	char p[PATH_MAX];
	for (size_t i = 0; i < vs->n; i++) {
		const struct view *v = vs->views[i];
		if (!view_uses_bucket(v, bucket) || !view_key_can_match(v, key) ||
		    view_key_path(v, key, p, sizeof p) != 0)
			continue;
		int rank = view_write_back(v) ? 3 : view_writable(v) ? 2 : 1;
		if (rank > best_rank && strlen(p) < len) {
			best = i;
			best_rank = rank;
			snprintf(path, len, "%s", p);
		}
	}
	return best;
}

/* of (a reference taken here) at the queue's tail, due now: no
 * drain_delay, and no burst is begun by it (d->lock not held). */
static void enqueue_due(struct core_drain *d, struct ofile *of)
{
	struct drain_ent *n = calloc(1, sizeof *n);
	uint64_t size = stage_file_size(of->sf);
	mod_lock(&d->lock);
	if (!n || drain_heaps_reserve(d, (size_t)d->files + 1) < 0) {
		mod_unlock(&d->lock);
		free(n);
		log_error("write-back: out of memory: %s/%s stays pending until the "
			  "next start", of->bucket, of->key);
		return;
	}
	int64_t now = drain_now_ns();
	drain_ent_add(d, n, of, ++d->seq, size, now, now);
	if (!d->n_threads)
		threads_start(d);
	pthread_cond_signal(&d->work);
	mod_unlock(&d->lock);
}

/* The record a taken-up file shows until its upload: this mount's own,
 * with no ETag, as its seal made it (the index may have lost it, or
 * hold another version since). */
static void adopt_index(struct core *c, const struct obj_meta *what)
{
	struct obj_meta o = *what;
	o.etag[0] = '\0';
	o.mtime_ns = core_now_ns();
	o.tags = NULL;
	o.n_tags = 0;
	o.flags = OBJ_HAS_META | OBJ_HAS_CTYPE;
	if (core_index_local(c, &o) < 0)
		log_warn("write-back: index update of %s/%s taken up after the start "
			 "failed", what->bucket, what->key);
}

int core_drain_adopt(struct core *c, struct stage_file *sf, struct obj_meta *what,
		     bool base_known)
{
	struct core_drain *d = c->drain;
	char path[PATH_MAX];
	struct core_req rq;
	core_req_begin(c, &rq);
	size_t v = adopt_view(&rq, what->bucket, what->key, path, sizeof path);
	const char *vname = v == INODE_NO_VIEW ? "" : view_name(core_view(&rq, v));
	struct ofile *of = calloc(1, sizeof *of);
	int rc = of ? 0 : -ENOMEM;
	if (of) {
		of->vname = obj_strdup_opt(vname, &rc);
		of->path = obj_strdup_opt(v == INODE_NO_VIEW ? what->key : path, &rc);
		of->bucket = obj_strdup_opt(what->bucket, &rc);
		of->key = obj_strdup_opt(what->key, &rc);
	}
	core_req_end(&rq);
	if (rc < 0 || !d) {
		if (of)
			core_ofile_free(of);     /* not of->sf yet */
		stage_file_release(sf);      /* stays pending: the next start */
		return rc < 0 ? rc : -EINVAL;
	}
	of->ino = inode_number(of->vname, of->path);
	of->sf = sf;
	of->refs = 1;
	of->times_set = true;        /* the journal holds the time of its close */
	snprintf(of->base_etag, sizeof of->base_etag, "%s",
		 base_known ? what->etag : CORE_BASE_ANY);
	adopt_index(c, what);
	of->meta = *what;            /* what the upload carries (ownership moves) */
	memset(what, 0, sizeof *what);
	struct ofile *other = core_ofile_insert(c, of);
	if (other) {
		log_error("write-back: %s/%s is open already; the copy of an earlier "
			  "run stays for the next start", of->bucket, of->key);
		core_ofile_put(c, other);
		core_ofile_free(of);         /* releases sf: pending again */
		return -EEXIST;
	}
	if (v == INODE_NO_VIEW)
		log_warn("write-back: %s/%s, pending since an earlier run, is in no view "
			 "now: published all the same", of->bucket, of->key);
	enqueue_due(d, of);
	core_ofile_put(c, of);       /* the queue holds it now */
	return 0;
}

int core_drain_adopt_all(struct core *c)
{
	if (!c->drain)
		return 0;
	int n = 0;
	for (;;) {
		struct stage_file *sf;
		struct obj_meta what;
		bool known;
		int rc = stage_file_adopt(c->d.stage, &sf, &what, &known);
		if (rc == -ENOENT)
			break;
		if (rc == 0 && core_drain_adopt(c, sf, &what, known) == 0)
			n++;
		obj_meta_release(&what);
	}
	if (n)
		log_info("write-back: %d file(s) pending since an earlier run queued "
			 "for the drain", n);
	return n;
}

/* The end of the stop's drain: the uploads in flight cancelled, the
 * workers joined. */
static void workers_stop(struct core_drain *d)
{
	mod_lock(&d->lock);
	d->stop = true;
	d->flush = false;
	unsigned busy = d->busy;
	atomic_store(&d->cancel, true);
	pthread_cond_broadcast(&d->work);
	mod_unlock(&d->lock);
	if (busy)
		log_warn("write-back: the stop's drain ended with %u upload(s) in "
			 "flight: cancelled, they stay pending", busy);
	for (unsigned i = 0; i < d->n_threads; i++)
		pthread_join(d->tid[i], NULL);
}

void core_drain_free(struct core *c)
{
	struct core_drain *d = c->drain;
	if (!d)
		return;
	mod_lock(&d->lock);
	bool any = d->head != NULL;
	if (any)
		log_info("write-back: draining %" PRIu64 " file(s), %" PRIu64 " bytes, "
			 "for up to %u s", d->files, d->bytes, d->conf.stop_s);
	mod_unlock(&d->lock);
	if (any) {
		char *report = NULL;
		int rc = drain_sync(c, NULL, NULL, (int)d->conf.stop_s, true, &report);
		if (rc < 0)
			log_warn("write-back: the stop's drain ended with files pending "
				 "(%s):\n%s", strerror(-rc), report ? report : "");
		free(report);
	}
	workers_stop(d);
	uint64_t files = d->files, bytes = d->bytes;
	while (d->head) {                /* no thread left: no lock */
		struct drain_ent *e = d->head;
		core_ofile_put(c, drain_ent_detach(d, e));   /* stays journaled */
		drain_ent_free(d, e);
	}
	if (files)
		log_warn("write-back: %" PRIu64 " file(s), %" PRIu64 " bytes, stay "
			 "pending: the next start publishes them", files, bytes);
	free(d->wait_ok.v);
	free(d->due.v);
	free(d->wait_err.v);
	free(d->retry.v);
	stats_group_remove(&d->grp);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->work);
	pthread_cond_destroy(&d->progress);
	free(d);
	c->drain = NULL;
}
