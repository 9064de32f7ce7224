/* core_commit.c — an open file's ways to S3 (core_int.h "Open files"):
 * its commit uploads the staged copy (core_ofile_commit: at close, at
 * fsync under `commit`, before a rename), with the time of the change
 * and the base its upload is checked against, and shows the new version
 * in the index at once (core_ofile_index); its seal, the close of a file
 * of a write-back view, makes it durable here for the drain to upload
 * later (core_ofile_seal); its publish, the drain's upload of a sealed
 * file and a write-back fsync's, is a commit checked against that base
 * (core_ofile_publish). Calls core_ofile.c and core.c.
 *
 * Every publish is checked against the version the file was based on
 * (its ETag at open, none for a new file, this gateway's last upload
 * after one): a single PUT carries If-Match: base (If-None-Match: * for
 * none) where the store honours it (the probe at mount, core_deps.cond);
 * else, for uploads in parts, and after a refusal, a HEAD just before. If
 * another client wrote the key in between, the local bytes go to
 * recovered/ (stage_file_set_aside), the file no longer stands for its
 * name (core_ofile_displace) and the store's version is indexed: the
 * drain counts it in drain.conflicts. A base another client deleted is
 * published over (docs/semantics.md).
 */
#include "fuse/core_int.h"

#include "common/lock.h"
#include "common/log.h"
#include "common/s3.h"
#include "sync/stage/stage.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The upload carries the open file's metadata (a chmod made while it was
 * clean went to S3 by a COPY and into of->meta only), with the time of the
 * change (s3fs and rclone read it) unless utimensat set one after the last
 * write. A streamed upload (large files written in order) carries no time
 * of its own: its metadata was fixed at its first part, before the last
 * write, so the object's mtime is S3's Last-Modified, the time the upload
 * completed (RGW sets it then). A time set by utimensat differs from the
 * stream's metadata and so uploads the whole file again at the commit. */
static int commit_mtime(struct core *c, struct ofile *of)
{
	struct obj_meta nm = { 0 };
	bool streaming = stage_file_streaming(of->sf);
	mod_lock(&c->ofile_lock);
	bool keep = of->times_set;
	int rc = obj_meta_copy(&nm, &of->meta);
	mod_unlock(&c->ofile_lock);
	struct obj_posix px = { .have = POSIX_MTIME, .mtime_ns = core_now_ns() };
	if (rc == 0 && !keep && streaming)
		posix_meta_drop_times(nm.meta, &nm.n_meta, POSIX_WRITE_TIMES);
	else if (rc == 0 && !keep)
		rc = posix_meta_put(&nm.meta, &nm.n_meta, &px);
	if (rc == 0)     /* the commit that follows journals it */
		rc = stage_file_set_commit_meta(of->sf, nm.meta, nm.n_meta,
						nm.content_type);
	if (rc == 0 && !keep) {
		mod_lock(&c->ofile_lock);
		struct obj_kv *kv = of->meta.meta;
		size_t n = of->meta.n_meta;
		of->meta.meta = nm.meta;
		of->meta.n_meta = nm.n_meta;
		nm.meta = kv;
		nm.n_meta = n;
		mod_unlock(&c->ofile_lock);
	}
	obj_meta_release(&nm);
	return rc;
}

/* The version of's upload is checked against, given to its staged file,
 * whose journal keeps it for the upload after a crash (stage_file_set_base;
 * CORE_BASE_ANY: not known). */
static void ofile_base_journaled(struct core *c, struct ofile *of)
{
	char base[72];
	mod_lock(&c->ofile_lock);
	snprintf(base, sizeof base, "%s", of->base_etag);
	mod_unlock(&c->ofile_lock);
	stage_file_set_base(of->sf, strcmp(base, CORE_BASE_ANY) ? base : NULL);
}

static int ofile_commit(struct core *c, struct ofile *of, bool cond);

int core_ofile_commit(struct core *c, struct ofile *of)
{
	if (!core_ofile_commit_begin(c, of))
		return 0;    /* unlinked while open: nothing to publish */
	int rc = ofile_commit(c, of, false);
	core_ofile_commit_end(c, of);
	return rc;
}

int core_ofile_commit_begun(struct core *c, struct ofile *of, bool cond)
{
	return ofile_commit(c, of, cond);
}

/* of's version as this mount's own in the index: its size and metadata
 * now, etag (the upload's, or "" while it is only sealed here); sealed:
 * the upload of what was sealed (the kernel's pages and attributes of it
 * stay right). */
void core_ofile_index(struct core *c, struct ofile *of, const char *etag,
		      bool sealed)
{
	struct obj_meta o = { 0 };
	o.bucket = of->bucket;
	o.key = of->key;
	o.size = stage_file_size(of->sf);
	o.mtime_ns = core_now_ns();
	snprintf(o.etag, sizeof o.etag, "%s", etag);
	struct obj_meta cur = { 0 };
	mod_lock(&c->ofile_lock);
	int rc = obj_kv_copy(&cur.meta, &cur.n_meta, of->meta.meta, of->meta.n_meta);
	char *path = rc == 0 ? strdup(of->path) : NULL;   /* a rename moves it */
	if (*etag) {
		snprintf(of->base_etag, sizeof of->base_etag, "%s", etag);
		core_ofile_pub_set_locked(of, etag, o.size);
	}
	mod_unlock(&c->ofile_lock);
	if (rc == 0 && !path)
		rc = -ENOMEM;
	o.meta = cur.meta;
	o.n_meta = cur.n_meta;
	/* The content type is what the upload sent (none: the store's
	 * default), so it is known either way. */
	o.content_type = of->meta.content_type;
	o.flags = OBJ_HAS_META | OBJ_HAS_CTYPE;
	/* A new name: the kernel has its entry from the create's reply. */
	if (rc == 0)
		rc = sealed ? core_index_uploaded(c, &o, of->vname, path)
			    : core_index_made(c, &o, of->vname, path);
	free(path);
	obj_meta_release(&cur);
	if (rc < 0)   /* S3 has it; the event will bring the index up to date */
		log_warn("index update for %s/%s: %s", of->bucket, of->key,
			 strerror(-rc));
}

/* The commit of of, its index record and its inode's ETag; an unlink or a
 * rename onto its name waits for it (core_ofile_commit_begin). cond: the
 * upload is conditional on the file's base (stage_file_commit_if), and
 * -EOPNOTSUPP (not sent) and -ESTALE (refused) come back as they are. */
static int ofile_commit(struct core *c, struct ofile *of, bool cond)
{
	bool dirty = stage_file_dirty(of->sf);
	char etag[72] = "";
	/* A sealed file (write-back) carries the time of its close, as its
	 * journal does. */
	bool sealed = dirty && stage_file_sealed(of->sf);
	int rc = dirty && !sealed ? commit_mtime(c, of) : 0;
	if (rc == 0 && dirty && !sealed)
		ofile_base_journaled(c, of);
	if (rc == 0 && cond) {
		char base[72];
		mod_lock(&c->ofile_lock);
		snprintf(base, sizeof base, "%s", of->base_etag);
		mod_unlock(&c->ofile_lock);
		if (!strcmp(base, CORE_BASE_ANY))
			return -EOPNOTSUPP;     /* no base known: nothing to send */
		struct stage_cond sc = { .base = base, .caps = c->d.cond };
		rc = stage_file_commit_if(of->sf, &sc, etag);
		if (rc == -EOPNOTSUPP || rc == -ESTALE)
			return rc;
	} else if (rc == 0) {
		rc = stage_file_commit(of->sf, etag);
	}
	if (rc < 0) {
		log_error("commit of %s/%s failed: %s (the data stays staged)",
			  of->bucket, of->key, strerror(-rc));
		return rc == -EFBIG ? -EFBIG : -EIO;
	}
	if (!dirty)
		return 0;
	core_ofile_index(c, of, etag, sealed);
	/* The page cache holds what was just written: keep it. */
	inode_set_etag(c->d.it, of->ino, etag);
	return 0;
}

int core_ofile_seal(struct core *c, struct ofile *of)
{
	if (!core_ofile_commit_begin(c, of))
		return 0;    /* unlinked while open: nothing to publish */
	bool dirty = stage_file_dirty(of->sf);
	int rc = dirty ? commit_mtime(c, of) : 0;
	if (rc == 0 && dirty) {
		ofile_base_journaled(c, of);
		rc = stage_file_seal(of->sf);
	}
	if (rc == 0 && dirty)
		core_ofile_index(c, of, "", false);
	core_ofile_commit_end(c, of);
	if (rc < 0)
		log_error("close of %s/%s: not made durable here: %s (the data stays "
			  "staged)", of->bucket, of->key, strerror(-rc));
	return rc < 0 ? -EIO : 0;
}

/* ---------- publish: a commit checked against the file's base ---------- */

/* Whether another client wrote of's key since the version the file is
 * based on: then its bytes are set aside (recovered/) and the store's
 * version indexed. 1: conflict handled, 0: go on, -errno: the HEAD
 * failed (retried later). */
static int conflict_check(struct core *c, struct ofile *of, bool by_writer)
{
	char bucket[256], key[4096], base[72];
	mod_lock(&c->ofile_lock);
	snprintf(bucket, sizeof bucket, "%s", of->bucket);
	snprintf(key, sizeof key, "%s", of->key);
	snprintf(base, sizeof base, "%s", of->base_etag);
	mod_unlock(&c->ofile_lock);
	if (strcmp(base, CORE_BASE_ANY) == 0)
		return 0;            /* its base is not known: not checked */
	struct obj_meta cur = { 0 };
	int rc = s3_head(c->d.s3, bucket, key, &cur);
	if (rc == -ENOENT)
		return 0;            /* none there (deleted meanwhile: nothing lost) */
	if (rc < 0)
		return rc;
	bool theirs = strcmp(cur.etag, base) != 0;
	char ours[33];
	if (theirs && stage_file_md5(of->sf, ours) == 0 && !strcasecmp(ours, cur.etag) &&
	    cur.size == stage_file_size(of->sf)) {
		/* These very bytes: an upload of this file that reached S3
		 * before a stop cancelled it or a crash, the journal not
		 * removed. It is the base now; not another client's. */
		log_info("write-back: %s/%s already holds this file's bytes (ETag %s): "
			 "an upload before a stop or a crash", bucket, key, cur.etag);
		mod_lock(&c->ofile_lock);
		snprintf(of->base_etag, sizeof of->base_etag, "%s", cur.etag);
		mod_unlock(&c->ofile_lock);
		theirs = false;
	}
	if (theirs) {
		char *note = NULL;
		if (asprintf(&note, "facetfs-conflict 1\nbucket %s\nkey %s\n"
			     "based_on %s\nstore %s\n", bucket, key, *base ? base : "none",
			     cur.etag) < 0)
			note = NULL;
		rc = note ? stage_file_set_aside(of->sf, note) : -ENOMEM;
		free(note);
		if (rc == 0 && !by_writer)   /* the name shows the store's version */
			core_ofile_displace(c, of);
		if (rc == 0) {
			log_warn("write-back: %s/%s was written by another client (ETag %s, "
				 "this file was based on %s): the local version is in "
				 "recovered/, the store's is kept", bucket, key, cur.etag,
				 *base ? base : "none");
			cur.flags |= OBJ_HAS_META;
			if (core_index_local(c, &cur) < 0)
				log_warn("write-back: index update of %s/%s after a conflict "
					 "failed: the event will bring it", bucket, key);
		}
	}
	obj_meta_release(&cur);
	return rc < 0 ? rc : theirs;
}

/* Upload of (the drain's, or an fsync's: by_writer): PUB_DONE,
 * PUB_CONFLICT (set aside), PUB_NOTHING (not dirty: published by an fsync;
 * or unlinked: its data dropped), PUB_WRITING (open for writing: only a
 * closed version is published; its last writer's close queues it again),
 * or -errno (kept, retried). The check and the upload run as one commit of
 * the file: a rename, an unlink or a writer's open waits for both. */
int core_ofile_publish(struct core *c, struct ofile *of, bool by_writer)
{
	switch (core_ofile_publish_begin(c, of, by_writer)) {
	case CORE_PUB_GONE:
		stage_file_drop(of->sf);     /* deleted: never uploaded */
		return PUB_NOTHING;
	case CORE_PUB_WRITING:
		return PUB_WRITING;
	}
	int rc = PUB_NOTHING;
	if (stage_file_dirty(of->sf)) {
		/* If-Match or If-None-Match where the store honours it; else,
		 * and after a refusal (to learn what the key holds now), a
		 * HEAD just before */
		rc = core_ofile_commit_begun(c, of, true);
		if (rc == -EOPNOTSUPP || rc == -ESTALE) {
			rc = conflict_check(c, of, by_writer);
			if (rc == 0)
				rc = core_ofile_commit_begun(c, of, false);
		}
		rc = rc < 0 ? rc : rc ? PUB_CONFLICT : PUB_DONE;
	}
	core_ofile_commit_end(c, of);
	return rc;
}
