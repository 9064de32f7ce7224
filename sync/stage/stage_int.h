/*
 * stage_int.h — the internals of the staging module (sync/stage*.c), not
 * for other modules. Its files form a one-way chain; each calls only the
 * files below it, and this header has one section per file, bottom first:
 *
 *   stage_dir.c      the staging directory: descriptors, renewal, names,
 *                    syncs, the durability file, the byte budget; a
 *                    staged file's data descriptor, parked and reopened
 *   stage_journal.c  the journal's text, written and read; how an open
 *                    file's journal is written with no lock of it held
 *   stage_kept.c     files whose commit failed, and their stale marks
 *   stage_orphans.c  intents, the orphans file, the journal's side of an
 *                    upload (upload_file's hooks)
 *   stage_recover.c  crash recovery
 *   stage_stream.c   streamed multipart uploads and their pool
 *   stage.c          the stage and its files' lives: creation, fill,
 *                    reads, state, fsync, park, release (stage.h)
 *   stage_write.c    what changes a file: writes, truncate, metadata,
 *                    name (stage.h)
 *   stage_commit.c   a file's commit, seal, set-aside and drop; taking
 *                    up a file recovery deferred (stage.h)
 * Beside the chain, upload.c (upload.h) sends one file whole: called by
 * stage_commit.c, stage_recover.c, and for part sizes by stage.c and
 * stage_stream.c; it calls back stage_orphans.c's journal hooks
 * (upload_hooks) and nothing else of the stage.
 *
 * Locks (docs/design.md "Lock order" has the whole process's):
 *   stage_file.lock (f->lock) guards the fields of one file below it; a
 *     state lock (common/lock.h): never held across a sync, a file's
 *     creation or an S3 request. Journal writes drop it (stage_jnl_own).
 *   pool.lock guards the stream pool's queue; taken under f->lock.
 *   stage_file.fd_lock guards one file's data descriptor (data_fd, fd_users,
 *     parked, lost): held across an openat, an fstat or a close of it,
 *     never across a read, a write or a sync; taken under f->lock, and
 *     alone by a read (which never takes f->lock).
 *   stage.lock guards the stage's counters, lists and budget: a leaf.
 *   renew_lock serializes the directory's renewal (its check and its
 *     install, not its I/O) and a release's check against it; stage.lock
 *     may be taken under it.
 *   kept_io, an I/O lock: a kept file's mark or unmark, flag and marker
 *     file together (stage_kept.c); stage.lock is taken under it, and so
 *     is renew_lock when a marker's creation finds the directory removed
 *     (stage_create_at: the renewal, and its renewed callback, run under
 *     kept_io). Taken at the end of every commit, and by a seal, a
 *     set-aside, a drop, a rename onto or a delete when the file or its
 *     key has a kept entry; never with a state lock of the stage held,
 *     nor by a stat, a read or a write.
 * Lock order (this module's; docs/design.md "Lock order" has the process's):
 *   stage_file.lock -> stage_file.fd_lock -> stage.lock
 *   stage_file.lock -> stage pool.lock
 *   stage kept_io -> stage renew_lock -> stage.lock
 * A lock may be taken holding only locks before it on one of these lines
 * (stage_file.lock -> stage.lock, renew_lock -> stage.lock and kept_io ->
 * stage.lock are taken too); stage.lock and pool.lock are leaves.
 *
 * Tests: the test_stage*.c files (see stage.h), test_lock_guard.c.
 */
#ifndef FACETFS_STAGE_INT_H
#define FACETFS_STAGE_INT_H

#include <assert.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>

#include "sync/stage/stage.h"

enum stage_jstate {
	STAGE_JS_NONE,    /* no journal on disk */
	STAGE_JS_DIRTY,   /* "dirty": written since the last commit */
	STAGE_JS_COMMIT,  /* "commit": a commit began */
};

/* A multipart upload that may exist without its id in the journal: from
 * ns (wall clock, ns since the epoch) on, a CreateMultipartUpload of
 * bucket/key may have been answered to a gateway that then died, or whose
 * answer was lost. Journaled before each creation ("intent" line), dropped
 * once the creation's id is journaled, kept after a failed creation (the
 * store may have made the upload). The oldest one is kept. ns 0: none.
 * Strings owned by whoever holds the struct (stage_intent_set/_clear),
 * borrowed in a stage_jnl being written. */
struct stage_intent {
	int64_t ns;
	char *bucket, *key;
};

/* One part handed to the streaming pool. */
struct stage_job {
	struct stage_file *f;
	unsigned number;             /* 1-based part number */
	uint64_t off, len;
	bool tail;                   /* queued by the commit */
	struct stage_job *next;
};

/* The threads that send streamed parts for every file of the stage,
 * started on first use (stage_stream.c). */
struct stage_pool {
	pthread_mutex_t lock;        /* guards everything below */
	pthread_cond_t cond;         /* a job was queued, or stop */
	struct stage_job *head, *tail;
	bool started, stop;
	unsigned n_threads;
	pthread_t tid[16];
};

/* A stream's states (docs/design.md "Streamed uploads" has the table):
 * OPEN: no upload yet, or parts going up; FINAL: a commit wants the tail
 * sent too and waits for every part; FAILED: a part or the creation
 * failed (err), the commit fails with it; BROKEN: given up, the commit
 * aborts the upload and sends the file whole. */
enum stage_sm_state { SM_OPEN, SM_FINAL, SM_FAILED, SM_BROKEN };

/* The streamed multipart upload of one file (under f->lock). Parts cover
 * [0, queued_end) in order; bucket/key/meta/ctype/id are the upload's
 * (fixed when part 1 was queued) and stay unchanged while inflight > 0,
 * so the pool reads them without the lock. */
struct stage_stream {
	char *id;                    /* upload id; NULL before it exists */
	char *bucket, *key, *ctype;  /* what the upload was created with */
	struct obj_kv *meta;
	size_t n_meta;
	struct s3_part *parts;       /* parts[i]: part i + 1 once sent */
	size_t cap;
	unsigned n_parts;            /* parts numbered (queued or sent) */
	unsigned inflight;           /* parts queued or being sent */
	uint64_t queued_end;         /* bytes given to parts */
	enum stage_sm_state state;   /* changed by stage_sm_to() only */
	int err;                     /* first failure of a part or create */
};

/* The state change of a stream (f->lock held): asserts that the table of
 * docs/design.md "Streamed uploads" allows it. */
static inline void stage_sm_to(struct stage_stream *sm, enum stage_sm_state to)
{
	static const unsigned allowed[] = {
		[SM_OPEN] = 1u << SM_FINAL | 1u << SM_FAILED | 1u << SM_BROKEN,
		[SM_FINAL] = 1u << SM_OPEN | 1u << SM_FAILED | 1u << SM_BROKEN,
		[SM_FAILED] = 1u << SM_BROKEN | 1u << SM_OPEN,
		[SM_BROKEN] = 1u << SM_OPEN,
	};
	assert(allowed[sm->state] & 1u << to);
	sm->state = to;
}

/* Parts may still go up: OPEN or FINAL. */
static inline bool stage_sm_live(const struct stage_stream *sm)
{
	return sm->state == SM_OPEN || sm->state == SM_FINAL;
}

/* The stream's first failure err (f->lock held): FAILED, unless given up
 * already (BROKEN keeps its state; err is kept either way). */
static inline void stage_sm_fail(struct stage_stream *sm, int err)
{
	if (!sm->err)
		sm->err = err;
	if (stage_sm_live(sm))
		stage_sm_to(sm, SM_FAILED);
}

#define STAGE_RENEW_MAX 8          /* times the directory is made again */

struct stage {
	char *dir;
	char *rec_dir;
	atomic_int dir_fd;           /* replaced (never closed) by a renewal */
	atomic_int rec_fd;
	pthread_mutex_t renew_lock;  /* one renewal at a time; retired[] */
	pthread_mutex_t kept_io;     /* a kept file's mark or unmark (flag and
				      * file together: stage_kept.c) */
	int retired[2 * STAGE_RENEW_MAX];   /* fds of removed directories:
				      * other threads may still use them, so
				      * they are closed at stage_close */
	unsigned n_renewed;
	uint64_t max_bytes, max_object;
	enum stage_durability durability;
	bool distrust;               /* a PROCESS run's files after a reboot:
				      * recovery moves all to recovered/ */
	struct upload_conf up;
	struct s3 *s3;               /* borrowed */
	bool stream_off;             /* stage_conf.stream_off */
	bool files_made;             /* a stage_file_new ran (under lock):
				      * recovery no longer lists uploads */
	struct stage_pool pool;      /* streamed parts (stage_stream.c) */
	bool defer_commits;          /* stage_conf.defer_commits */
	void (*grew)(void *ctx);     /* stage_conf.grew */
	void (*renewed)(void *ctx);  /* stage_conf.renewed (grew_ctx) */
	void *grew_ctx;
	void (*jnl_changed)(void *ctx);   /* stage_conf.jnl_changed (tests) */
	void *jnl_ctx;

	pthread_mutex_t lock;
	pthread_cond_t room;         /* bytes were uncharged */
	int64_t full_timeout_ns;     /* stage_conf.full_timeout_s */
	uint64_t used;               /* bytes charged, all staged files */
	uint64_t pending_bytes;      /* of them, files released with a journal
				      * (cnt.pending_files), until recovery */
	struct stage_kept_table {    /* files whose commit failed or is under
				      * way, by id and by bucket and key
				      * (stage_kept.c): chains, slots a power
				      * of two (0: none yet) */
		struct stage_kept **by_id, **by_key;
		size_t slots, n;
	} kept;
	uint64_t next_id;
	struct stage_file *open;     /* files not released */
	size_t n_open;               /* how many (lock) */
	struct stage_deferred *deferred;  /* what recovery left for
				      * stage_file_adopt, by id: those from
				      * next_deferred on not taken yet (lock) */
	size_t n_deferred, next_deferred, cap_deferred;
	uint32_t *spares;            /* empty files kept for reuse, by number
				      * (stage_dir.c "spare files"; lock) */
	size_t n_spares, n_filling;  /* listed; being emptied (lock) */
	uint32_t spare_seq;          /* the next spare's number (lock) */
	bool spares_off;             /* no RENAME_NOREPLACE here (lock) */
	struct stage_counters cnt;   /* used/max/open filled in on read */
};

struct stage_file {
	struct stage *st;
	uint64_t id;
	/* The data descriptor (ID.data), used only through stage_data_get
	 * and stage_data_put; all four under fd_lock. */
	pthread_mutex_t fd_lock;
	int data_fd;                 /* -1: closed (parked, or lost) */
	unsigned fd_users;           /* uses of data_fd in flight */
	bool parked;                 /* no descriptor of the mount holds the
				      * file: data_fd closes with its last use */
	bool lost;                   /* ID.data was gone at a reopen (removed
				      * with the directory): uses fail -EIO */

	pthread_mutex_t lock;
	pthread_cond_t cond;         /* uploading, n_active or jbusy changed */
	char *bucket, *key, *ctype;
	struct obj_kv *meta;
	size_t n_meta;
	_Atomic uint64_t size;       /* logical size == bytes charged; written
				      * under the lock, read without it */
	atomic_bool dirty;           /* the next commit must upload (likewise) */
	bool uploading;              /* a commit owns the file */
	unsigned n_active;           /* operations running with the lock
				      * dropped (a write's data, a journal) */
	bool jbusy;                  /* a thread owns the journal: writes it
				      * with the lock dropped (stage_jnl_own) */
	bool unfed;                  /* bytes written the stream was not fed
				      * yet (an operation still runs) */
	uint64_t sealed;             /* bytes counted in the stage's sealed
				      * bytes (stage_file_seal), 0: none */
	enum stage_jstate js;        /* what the journal on disk says */
	bool jsynced;                /* the journal on disk, if any, is synced
				      * (stage_jnl_put_file) */
	bool jinplace;               /* the journal on disk is a plain "dirty"
				      * one (no upload, no intent), as this
				      * process wrote it: the next one may be
				      * written over it (STAGE_JPUT_INPLACE) */
	bool jsealed;                /* js is "commit" as stage_file_seal wrote
				      * it: data synced, journal holding these
				      * bytes, name and metadata; cleared by any
				      * change but a rename or a metadata change
				      * (op_begin), which journal "commit" again */
	bool jreseal;                /* the journal's owner rewrites a sealed
				      * file's name or metadata: "commit"
				      * again, not "dirty" (lock) */
	char etag[72];               /* of the last upload or fill; "" unknown */
	struct stage_stream sm;      /* streamed upload (stage_stream.c) */
	struct stage_intent intent;  /* a creation whose id is not journaled */
	bool intent_fresh;           /* intent set by the creation running now */
	bool oneshot;                /* stage_file_oneshot, until its commit */
	bool nostream;               /* stage_file_nostream: never streamed */
	bool has_base;               /* base is known (stage_file_set_base) */
	char base[72];               /* the version the file is based on, ""
				      * none (a new key): journaled with it */
	bool adopted;                /* stage_file_adopt made it: its upload
				      * counts as recovery's (reuploaded) */
	struct stage_file *next, *prev;   /* stage.open, under stage.lock */
};

/* ---- stage_dir.c: the staging directory ---------------------------- */

/* Open (make) the directory and recovered/, charge what is staged there,
 * find the next id, read and write the durability file (stage_open). */
int  stage_dir_setup(struct stage *st);
/* Close its descriptors and the retired ones (stage_close). */
void stage_dir_close(struct stage *st);
/* The staging directory was removed under the gateway (its descriptor
 * is of a deleted directory): it is made again (with recovered/), this
 * run's durability file written, and the new descriptors installed; logged.
 * 0 when the directory is there now (made here or by another thread: the
 * caller tries again), -ENOENT after STAGE_RENEW_MAX renewals, or the
 * error making it. Files open at the removal keep their data in their
 * descriptors only (commits still upload it; a crash loses it). Made with
 * no lock held; renew_lock covers the check and the install only. */
int  stage_dir_renew(struct stage *st);
/* A staged file's data descriptor. A file holds one while it is written
 * through the mount; once parked (stage_file_park: no descriptor of the
 * mount holds it, e.g. sealed and waiting for the drain) it holds none
 * between uses, so that the gateway's descriptors do not grow with the
 * files waiting for their upload. Every use of ID.data goes through:
 *   stage_data_get (no lock of f held but, optionally, f->lock): the
 *     descriptor for one use, reopened from ID.data if it was closed
 *     (openat O_RDWR, no O_CREAT); keep: the use is a write through the
 *     mount, so the file is parked no more and the descriptor stays.
 *     The descriptor or -errno: -EIO once ID.data was found gone (lost:
 *     logged once), or openat's error (-EMFILE: try again later);
 *   stage_data_put: the use ends; a parked file's descriptor closes with
 *     its last use;
 *   stage_data_park: parked; the descriptor closes now if no use runs;
 *   stage_data_sync: stage_sync (fdatasync) of f's data through a use of
 *     its descriptor (none taken under PROCESS); 0 or -errno.
 * A descriptor whose file has no name any more (st_nlink 0: ID.data went
 * with a removed directory, stage_dir_renew) is never closed by a park:
 * it holds the file's only copy, which the commit still uploads and the
 * release saves to recovered/. A file parked when the directory is
 * removed loses its data (logged at the renewal and at the next use).
 * stage_data_close: at the end of the file (no use in flight, not
 * shared). Each open descriptor is counted in cnt.data_fds. */
int  stage_data_get(struct stage_file *f, bool keep);
void stage_data_put(struct stage_file *f);
void stage_data_park(struct stage_file *f);
int  stage_data_sync(struct stage_file *f);
void stage_data_close(struct stage_file *f);
/* A descriptor of ID.data made by the file's creation (stage_file_new):
 * installed and counted. */
void stage_data_set(struct stage_file *f, int fd);

/* openat(dir_fd, name, flags | O_CREAT, 0600), and once more after
 * stage_dir_renew when the directory was removed: the fd or -errno. The
 * file is a spare renamed to name when one is listed (stage_dir.c "spare
 * files"): empty, made with no new inode. */
int  stage_create_at(struct stage *st, const char *name, int flags);
/* unlinkat(dir_fd, name, 0), as far as the caller sees: 0 or -errno
 * (-ENOENT: no such name). Under PROCESS the file becomes an empty spare
 * while fewer than STAGE_SPARES_MAX are kept. No descriptor of name may be used
 * after (the file is emptied and given to another name). */
#define STAGE_SPARES_MAX 4096
int  stage_remove_at(struct stage *st, const char *name);
/* A listing of the staging directory (closedir it); 0 or -errno. */
int  stage_dir_open(struct stage *st, DIR **out);
/* "ID" as 16 hex digits followed by ext. */
void stage_name(uint64_t id, const char *ext, char out[32]);
/* fsync (fdatasync if data) of fd under POWER, counted in cnt.syncs;
 * nothing under PROCESS. 0 or -errno. No state lock may be held (the
 * lock guard checks it). */
int  stage_sync(struct stage *st, int fd, bool data);
/* Under POWER: a write that ended at end, past a multiple of
 * STAGE_KICK_BYTES, starts the disk's writeback of the stretch before that
 * multiple (sync_file_range, which waits for no I/O), so that the sync at
 * close finds little left to write. Nothing under PROCESS. No state lock
 * may be held. */
#define STAGE_KICK_BYTES (8u << 20)
void stage_kick(struct stage *st, int fd, uint64_t off, uint64_t end);
/* At open and renewal: reads the durability file of the previous run (sets
 * distrust after a PROCESS run and a reboot) and, unless distrusting,
 * writes this run's. 0 or -errno. */
int  stage_durability_open(struct stage *st);
/* After recovery moved everything untrusted: this run's durability file
 * is written and distrust cleared. 0 or -errno. */
int  stage_durability_trust(struct stage *st);
/* The budget: stage_charge takes n bytes (-ENOSPC, counted, when they do
 * not fit), stage_uncharge gives them back; after a charge, and with no
 * lock of the stage held, call stage_grown (the burst buffer makes room:
 * stage_conf.grew). stage_count_efbig counts a refusal for size. */
int  stage_charge(struct stage *st, uint64_t n);
/* Before charging n bytes with no lock held: while they do not fit and
 * sealed files wait for their upload, wait for room, until full_timeout
 * passes with no byte uncharged (the charge then fails as usual). */
void stage_room_wait(struct stage *st, uint64_t n);
void stage_uncharge(struct stage *st, uint64_t n);
void stage_grown(struct stage *st);
void stage_count_efbig(struct stage *st);

/* ---- stage_journal.c: the journal ----------------------------------- */

/* A journal as read or to be written; strings owned by the struct. */
struct stage_jnl {
	enum stage_jstate state;
	uint64_t size;               /* data size at "commit" */
	char *bucket, *key, *ctype;
	char *upload_id;             /* a multipart upload that exists */
	char *upload_bucket, *upload_key;   /* its name, if not bucket/key */
	struct obj_kv *meta;
	size_t n_meta;
	struct stage_intent intent;  /* ns 0: none */
	char *base;                  /* the version the file is based on ("":
				      * none, a new key); NULL: not known */
	unsigned version;            /* read: the text's version (1 to 3) */
};

/* A journal's text, made with no I/O (stage_jnl_render) and written later
 * (stage_jnl_put); what names the file in a log line. */
struct stage_jimg {
	char *text;
	size_t len;
	char what[160];
};
int  stage_jnl_render(const struct stage_jnl *j, struct stage_jimg *img);
void stage_jimg_release(struct stage_jimg *img);
/* How stage_jnl_put writes ID.jnl (stage_journal.c says why):
 *   CREATE   no journal there: made under its name (O_CREAT | O_TRUNC);
 *   INPLACE  the journal there is a plain "dirty" one (no upload, no
 *            intent), whose loss to a torn write costs nothing: the text
 *            written over it (pwrite at 0, ftruncate), made as CREATE if
 *            it is not there; on failure it is cut to nothing (torn);
 *   REPLACE  the journal there may hold a promise ("commit", an upload,
 *            an intent): ID.jnl.tmp written and synced, then exchanged
 *            with it or renamed onto it; on failure the old one stays. */
enum stage_jput {
	STAGE_JPUT_CREATE,
	STAGE_JPUT_INPLACE,
	STAGE_JPUT_REPLACE,
};
/* Write ID.jnl with img as how says; sync: the text and its name made
 * durable (fdatasync of the journal, fsync of the tmp; then the directory,
 * unless in place over a journal whose name is known durable: named).
 * No syncs unless sync. 0 or -errno (logged). No lock held. */
int  stage_jnl_put(struct stage *st, uint64_t id, const struct stage_jimg *img,
		   enum stage_jput how, bool sync, bool named);
/* Make the journal ID.jnl and its name durable (it and the directory
 * synced). No lock held. */
int  stage_jnl_sync(struct stage *st, uint64_t id);
/* stage_jnl_render and stage_jnl_put of j (borrowed), synced, for a file
 * no other thread uses (recovery, a released file): REPLACE if exists
 * (the journal there is of an earlier run or a released file: it may
 * hold a promise), else CREATE. */
int  stage_jnl_write(struct stage *st, uint64_t id, const struct stage_jnl *j,
		     bool exists);
/* Read ID.jnl: -ENOENT if none, -EINVAL if malformed, -EBADMSG if torn
 * (a version-2 text whose "end" line does not check, or an empty file:
 * a crash or a failure during its write). Torn, out holds what recovery
 * may use and nothing else: state "dirty", no upload, no intent, no size,
 * and bucket and key if both could still be read (a name, not a fact:
 * NULL otherwise); release it as usual. A running gateway reads only the
 * journal of a file whose journal it owns (stage_jnl_own, or the file
 * released or not open: stage_recover), so no read meets a write in
 * progress of this process: a torn text is a crash's or a failure's. */
int  stage_jnl_read(struct stage *st, uint64_t id, struct stage_jnl *out);
/* Remove ID.jnl durably (missing is fine). */
int  stage_jnl_remove(struct stage *st, uint64_t id);
void stage_jnl_release(struct stage_jnl *j);

/* The journal of an open file is written by one thread at a time, its
 * owner, with f->lock dropped during the I/O, so that a stat, a read or a
 * write of the file never waits for a journal's syncs:
 *   stage_jnl_own (f->lock held): waits until no other thread owns it
 *     (the wait drops f->lock: check the state again after it), then owns
 *     it (f->jbusy);
 *   stage_jnl_put_file (f->lock held, owned): the text of j (borrowed) is
 *     made under the lock, written with the lock dropped, the lock taken
 *     again; 0 or -errno (logged). Made under its name if f has none
 *     (f->js NONE), written in place over a plain "dirty" one
 *     (f->jinplace), else replaced atomically (enum stage_jput). A plain
 *     "dirty" journal (no upload, no intent) is not synced (f->jsynced
 *     false): it only sends the file to recovered/ after a crash, which
 *     a kill -9 keeps without syncs; stage_file_sync (fsync(2)) syncs
 *     it, and a commit's or a seal's journal is written over it synced;
 *   stage_jnl_file (f->lock held, owned): the journal of f as it stands
 *     in state (size: its "size" line), naming f's streamed upload if
 *     upload, and f's intent; f->js = state on success; out (may be NULL)
 *     gets what was written, borrowing f's strings, without the intent;
 *   stage_jnl_disown (f->lock held): ownership ends, waiters wake.
 * A thread owning the journal never waits for a commit or a write. */
void stage_jnl_own(struct stage_file *f);
int  stage_jnl_put_file(struct stage_file *f, const struct stage_jnl *j);
int  stage_jnl_file(struct stage_file *f, enum stage_jstate state, uint64_t size,
		    bool upload, struct stage_jnl *out);
void stage_jnl_disown(struct stage_file *f);

/* ---- stage_kept.c: kept files -------------------------------------- */

/* stage_kept_add: a commit of file id (bucket/key) began (open: the file
 * is not released; the entry stays if it fails with its journal at
 * "commit"), or a recovery left it staged (open false); a later commit of
 * the same file refreshes it (a stale mark stays: the replacement came
 * during that commit).
 * stage_kept_replaced: bucket/key was replaced by something newer (a
 * commit began, a rename onto it, a delete) except by file except (0:
 * none): the others' markers ID.stale are made now (released entries
 * leave the list, open ones stay, marked stale). stage_kept_begin: a
 * commit of file id begins: it is the newest again (its marker goes).
 * stage_kept_release: file id was released (a stale entry leaves).
 * stage_kept_forget: its data left (committed, uploaded or moved by
 * recovery; its mark, if any, goes). stage_kept_unmark: remove id's
 * marker, if any. They take stage.lock, and kept_io (an I/O lock) around
 * a marker's creation or removal and its directory sync: call them with
 * no state lock held (f->lock included). */
struct stage_kept;
void stage_kept_add(struct stage *st, uint64_t id, const char *bucket, const char *key,
		    bool open);
void stage_kept_replaced(struct stage *st, const char *bucket, const char *key,
			 uint64_t except);
void stage_kept_release(struct stage *st, uint64_t id);
/* The kept file id is known by bucket/key from now on (a rename): what
 * replaces that key marks it, not what replaces its old one. */
void stage_kept_renamed(struct stage *st, uint64_t id, const char *bucket,
			const char *key);
void stage_kept_begin(struct stage *st, uint64_t id);
void stage_kept_unmark(struct stage *st, uint64_t id);
void stage_kept_forget(struct stage *st, uint64_t id);
void stage_kept_free_all(struct stage *st);

/* ---- stage_orphans.c: intents, orphans, an upload's journal --------- */

/* stage_intent_set: in = {now, bucket, key} unless in already holds one
 * of that bucket/key (kept: the oldest); one of another key (a rename
 * came between two creations) goes to the orphans file first
 * (stage_orphans_defer; kept if that fails). *fresh says whether in was
 * set now. 0 or -ENOMEM. No lock held (it may write the orphans file).
 * stage_file_intent_set: the same for f's intent, f->lock held and f's
 * journal owned (stage_jnl_own; f->intent changes only under that
 * ownership), the lock dropped while the orphans file is written.
 * stage_intent_clear: frees and zeroes.
 * stage_orphans_abort: for a journal with an intent, lists the store's
 * multipart uploads of exactly intent.bucket/intent.key initiated at or
 * after intent.ns - STAGE_INTENT_SKEW_NS and aborts each (logged). Only
 * before the stage's first stage_file_new (-EAGAIN after: a live upload
 * of this run could be among them). 0, or the listing's or an abort's
 * error (the caller keeps the file staged). */
#define STAGE_INTENT_SKEW_NS ((int64_t)900 * 1000000000)
int  stage_intent_set(struct stage *st, struct stage_intent *in, const char *bucket,
		      const char *key, bool *fresh);
int  stage_file_intent_set(struct stage_file *f, const char *bucket, const char *key,
			   bool *fresh);
void stage_intent_clear(struct stage_intent *in);
/* After a failed creation: the intent this creation set (fresh) is
 * cleared when err is the store's refusal (NoSuchBucket, AccessDenied,
 * a bad request: nothing was made); kept for any other error. */
void stage_intent_refused(struct stage_intent *in, bool fresh, int err);
/* stage_intent_refused for open file f (f->lock not held); if that
 * cleared the intent, the journal is written again without it. */
void stage_intent_dropped(struct stage_file *f, bool fresh, int err);
/* The journal of file id written again without its intent (a creation the
 * store refused made nothing), read from disk and rewritten: no state lock
 * held (for an open file, its journal owned). */
void stage_jnl_intent_drop(struct stage *st, uint64_t id);
int  stage_orphans_abort(struct stage *st, const struct stage_jnl *j,
			 struct stage_recovery_report *rep);
/* stage_orphans_defer: a commit succeeded while f still held the intent
 * of an earlier creation that failed (its answer may have been lost):
 * the intent is appended to the staging directory's "orphans" file for
 * the next start (logged either way; -ENOSPC past its bound).
 * stage_orphans_recover: at the start (from stage_recover, before any
 * stage_file_new), stage_orphans_abort for each record; the records
 * whose listing or abort failed stay, the file goes when none does. */
int  stage_orphans_defer(struct stage *st, const struct stage_intent *in);
int  stage_orphans_recover(struct stage *st, struct stage_recovery_report *rep);
/* upload_file's hooks (upload.h) for the "commit" journal j of file id:
 * creating journals an intent (f's, kept in f, when f is not NULL; else
 * one of its own) before the upload exists; started rewrites j with the
 * upload's id, dropping the intent this creation set, so that a crash
 * can abort it. Both write as f's journal owner, f->lock dropped during
 * the I/O. Call stage_jnl_hooks_done after upload_file. */
struct jnl_started {
	struct stage *st;
	uint64_t id;
	struct stage_jnl *j;         /* borrowed; upload_id set while writing */
	struct stage_file *f;        /* the file committed; NULL in recovery */
	struct stage_intent own;     /* the intent when f is NULL */
	bool fresh;                  /* creating set the intent */
};
int  stage_jnl_creating(void *ctx);
int  stage_jnl_started(void *ctx, const char *upload_id);
/* upload_file's abandoned hook: an upload of file f (not NULL) whose
 * abort failed becomes f's broken stream (f->sm: id, bucket, key), so
 * that every later journal of f names it and its next commit or its
 * release aborts it (stage_stream_drop). In recovery (f NULL) the
 * journal that named it stays as it is. */
void stage_jnl_abandoned(void *ctx, const char *upload_id);
void stage_jnl_hooks_done(struct jnl_started *js);
/* A commit's upload succeeded: f's intent, if any (an earlier creation
 * that failed, maybe after the store made the upload), goes to the
 * orphans file first, then f's journal is removed: the intent is on disk
 * at every moment. The commit owns f; call without f->lock. */
void stage_commit_unjournal(struct stage_file *f);

/* ---- stage_recover.c: recovery -------------------------------------- */

/* File id's data written from its descriptor fd (size bytes) into
 * recovered/ under the name recovery gives (BUCKET%2FKEY@TIME), with
 * NAME.journal holding note when note is not NULL, synced under POWER;
 * logged and counted: its staging file went with a removed directory
 * (stage_dir_renew), or it is set aside (stage_file_set_aside). 0 or
 * -errno (logged: not saved). No lock held. */
int  stage_recover_fd(struct stage *st, uint64_t id, const char *bucket,
		      const char *key, int fd, uint64_t size, const char *note);
/* A "commit" journal recovery left for stage_file_adopt (defer_commits):
 * the file's id and its journal as read (owned). */
struct stage_deferred {
	uint64_t id;
	struct stage_jnl j;
};
/* stage_deferred_take: the next one, oldest id first; the journal is the
 * caller's from then on (stage_jnl_release). 0, or -ENOENT when none is
 * left. stage_deferred_free: frees what was not taken (stage_close; those
 * files stay on disk, pending, for the next start). Take stage.lock. */
int  stage_deferred_take(struct stage *st, struct stage_deferred *out);
void stage_deferred_free(struct stage *st);
/* (stage_recover itself is in stage.h.) */

/* ---- stage_stream.c: streaming -------------------------------------- */

/* stage_stream_feed: after a write (or a part) ended, with f->lock held:
 * hands full parts of new bytes to the pool (all that is left once a
 * commit set sm.final). stage_stream_touch: with f->lock held, before a
 * write from off or a truncate to off: breaks the stream if bytes already
 * given to parts would change. stage_stream_same_meta / _same_name:
 * whether the upload carries this metadata / name; if not, the caller
 * breaks the stream (stage_stream_break, f->lock held).
 * stage_stream_commit: the commit of a file with a live streamed upload
 * (f->uploading set): the tail, then the completion; on failure the
 * upload is aborted. stage_stream_drop: waits for the parts in flight
 * and aborts the upload (0, or the abort's error: the id then stays,
 * journaled). stage_stream_free: frees what f->sm holds (no part in
 * flight; f no longer shared). stage_pool_stop: joins the threads. */
void stage_stream_feed(struct stage_file *f);
void stage_stream_touch(struct stage_file *f, uint64_t off);
void stage_stream_break(struct stage_file *f, const char *why);
bool stage_stream_same_meta(struct stage_file *f, const struct obj_kv *meta,
			    size_t n_meta, const char *ctype);
bool stage_stream_same_name(struct stage_file *f, const char *bucket,
			    const char *key);
int  stage_stream_commit(struct stage_file *f, uint64_t size, char etag[72]);
int  stage_stream_drop(struct stage_file *f);
void stage_stream_free(struct stage_file *f);
void stage_pool_stop(struct stage *st);

/* ---- stage.c: the stage and its files ------------------------------ */

/* stage_file_free: frees f and all it holds (its stream's strings, its
 * data descriptor); f is shared no more (its creation or adoption failed,
 * or it is released). stage_oneshot_locked (f->lock held): whether f is
 * still one-shot once it holds end bytes (or its size, if larger): under
 * one part (one PUT, no stream, so no upload id to journal); a file past
 * that is one-shot no more. stage_sealed_locked (f->lock held): the
 * journal on disk is the seal's, and f is unchanged since.
 * stage_sealed_set (f->lock not held): f's bytes counted in the stage's
 * sealed bytes (n) or no longer (0). */
void stage_file_free(struct stage_file *f);
/* f joins st->open (the files not released); st->lock held. */
void stage_open_add_locked(struct stage *st, struct stage_file *f);
bool stage_oneshot_locked(struct stage_file *f, uint64_t end);
bool stage_sealed_locked(const struct stage_file *f);
void stage_sealed_set(struct stage_file *f, uint64_t n);

/* ---- stage_write.c: changes ----------------------------------------- */

/* (Its functions are in stage.h: stage_file_pwrite, stage_file_pwrite_pipe,
 * stage_file_truncate, stage_file_set_meta, stage_file_set_commit_meta,
 * stage_file_rename and stage_key_replaced_but.) */

/* ---- stage_commit.c: commits ---------------------------------------- */

/* (Its functions are in stage.h: stage_file_commit, stage_file_commit_if,
 * stage_file_seal, stage_file_set_aside, stage_file_drop and
 * stage_file_adopt.) */

#endif
