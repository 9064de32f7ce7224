/*
 * stage.h — write staging in the burst buffer: a file opened for writing
 * through the mount lives in a local staging file and is uploaded to S3 as
 * one whole object at a commit point (stage_file_commit: close under both
 * policies, fsync/fdatasync too under `commit`), through the S3 interface
 * (common/s3.h). Commit returns 0 only once S3 has the whole object; no
 * S3 reader ever sees a partial one (a multipart upload shows nothing
 * until its completion).
 *
 * A commit may require the store's version of the key to be the one the
 * file was based on (stage_file_commit_if: a conditional single PUT).
 *
 * Streaming: once a file holds a full part of bytes beyond those already
 * given to parts (part sizes: upload_stream_part_size, upload.h), the part
 * goes up in the background as part of a multipart upload created then
 * (a pool of stream_threads threads shared by the stage, at most
 * up.threads parts in flight per file, each part read with pread from the
 * staging file: no copy in memory). A commit then sends only the tail and
 * completes. A write or truncate touching bytes already given to parts, or
 * a change of metadata or name after the upload was created, breaks the
 * stream: the commit aborts it and uploads the file whole (upload_file:
 * one PUT, or parallel parts). A failed part, creation or completion: the
 * upload is aborted and the commit returns -EIO; the next commit uploads
 * the file whole.
 *
 * Layout of the staging directory (struct stage_conf.dir):
 *   ID.data     the bytes of one staged file (ID: 16 hex digits)
 *   ID.jnl      its journal: bucket, key, metadata, a state and the id of
 *               a multipart upload that exists, ending in a checksum of
 *               itself; made under its name, then at each change written
 *               over in place when it was a plain "dirty" one, else
 *               replaced atomically (ID.jnl.tmp, exchange or rename)
 *   ID.stale    a newer version of the file's key was made after its
 *               commit failed: recovery does not upload it (stage_kept.c)
 *   orphans     uploads to look for at the next start (stage_orphans.c)
 *   durability  the setting and boot of the run that wrote the journals
 *   recovered/  staged data found after a crash that was never committed
 * Durability (stage_conf.durability): POWER fsyncs each journal before
 * and the directory after its rename, the data before "commit" and the
 * directory after a removal: what the crash rule needs survives power loss
 * and kernel crashes. PROCESS calls no fsync: it survives the gateway's
 * death (kill -9: the kernel keeps what was written); after the machine
 * restarted from such a run, recovery trusts nothing it finds (see below).
 * Journal states (stage_journal.c): no journal = nothing the user wrote is
 * at risk (never written, or committed); "dirty" = written since the last
 * commit (set by the first pwrite/truncate/set_meta/rename after it);
 * "commit" = a commit began (data fdatasync'ed first under POWER, size
 * recorded). Either state names the multipart upload (streamed or at
 * commit) as soon as it exists; a successful upload removes the journal.
 * A journal torn by a crash during its write (its checksum fails) is
 * read as "dirty" naming no upload: only a plain "dirty" journal (or
 * none) is ever written over in place, and the write that tore it had
 * not returned (stage_journal.c).
 * Crash rule (stage_recover): "commit" -> its upload (if any) aborted and
 * the file uploaded again (kept staged if that fails), or, with
 * defer_commits, left staged for stage_file_adopt (the caller's drain
 * uploads it after the mount, see there); "dirty" -> its
 * upload (if any) aborted, data moved to recovered/ as BUCKET%2FKEY@TIME
 * (+ .journal) (kept staged while the abort fails); data without journal
 * -> deleted. A journal may also hold an intent (journaled before each
 * CreateMultipartUpload, replaced by the id once that is journaled): the
 * first recovery after stage_open, before any stage_file_new, lists the
 * uploads of that exact key initiated since the intent (minus a 15-minute
 * clock margin) and aborts them first (stage_orphans.c says what else it
 * could abort); later recoveries keep such a file staged. So no upload
 * this gateway began stays open. After a
 * PROCESS run and a restart of the machine (boot id changed), journals and
 * data may be stale or torn: uploads named are aborted and everything
 * staged, "commit" and journal-less data included, is moved to
 * recovered/, nothing is uploaded or deleted.
 * A commit's own metadata (stage_file_set_commit_meta) is not journaled
 * before the "commit" journal, which records it: a crash before that finds
 * the metadata of the last stage_file_set_meta.
 *
 * Budget: the logical sizes of all staged files (counting holes) never
 * exceed max_bytes: a write, truncate or fill that would gets -ENOSPC,
 * unless sealed files wait for their upload (write-back): then a write
 * or truncate waits for room first, up to full_timeout_s without progress.
 * Staged data is never evicted; it leaves the budget when committed and
 * released, or when recovery uploads or moves it.
 *
 * Threads: any thread may call any function, except that stage_file_fill()
 * runs before the file is shared and stage_file_release()/stage_close()
 * after its last use. Writes to one file run in parallel with each other
 * and with reads; a commit waits for writes in flight, then blocks new
 * writes (not reads) of THAT file while it uploads; no lock is held during
 * an upload. A second commit while one runs waits for it, then returns its
 * ETag if nothing changed since (coalesced) or uploads again. No lock a
 * stat, a read or a write of a file waits for is held across a sync, a
 * journal write or a file's creation: stage_file_size and
 * stage_file_dirty never wait. The module's locks and their order are in
 * stage_int.h; the process's in docs/design.md ("Lock order").
 * Descriptors: a file holds one of its data while it is written; once
 * parked (stage_file_park) it holds none, and each use opens ID.data for
 * itself: the files waiting for their upload cost no descriptor each.
 * Ownership: every string and array passed in is copied.
 *
 * Tests: test_stage.c, test_stage_adopt.c, test_stage_crash.c,
 * test_stage_dir.c, test_stage_fds.c, test_stage_journal.c,
 * test_stage_kept.c, test_stage_orphans.c, test_stage_stream.c,
 * test_s3_cond.c; t_stage.sh (driver tests/integration/stage_rgw.c),
 * t_stream.sh, t_write.sh, t_durability.sh.
 */
#ifndef FACETFS_STAGE_H
#define FACETFS_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/object.h"
#include "common/s3.h"
#include "sync/stage/upload.h"

struct s3;
struct stage;
struct stage_file;

#define STAGE_MAX_OBJECT S3_MAX_OBJECT   /* S3's limit (multipart) */

/* What the journal must survive (the header says what each does). */
enum stage_durability {
	STAGE_DURABLE_POWER = 0,   /* fsyncs: power loss, kernel crash */
	STAGE_DURABLE_PROCESS,     /* no fsync: the gateway's death only */
};

struct stage_conf {
	const char *dir;           /* staging directory, made if missing */
	enum stage_durability durability;   /* default POWER */
	uint64_t max_bytes;        /* budget of staged bytes */
	uint64_t max_object;       /* largest object; 0 -> STAGE_MAX_OBJECT */
	struct upload_conf up;     /* part size and parts in flight (upload.h);
				    * threads is also the bound of streamed
				    * parts in flight per file */
	unsigned stream_threads;   /* threads sending streamed parts, shared
				    * by all files; 0 -> 4 (at most 16) */
	bool stream_off;           /* no streaming: upload at commit only */
	/* Seconds a write waits for room when the budget is full and sealed
	 * files (stage_file_seal) are waiting to be uploaded: it goes on once
	 * an upload frees enough, and gets -ENOSPC only after this long with
	 * no byte freed. 0: no wait (-ENOSPC at once, as without sealed
	 * files). */
	unsigned full_timeout_s;
	struct s3 *s3;             /* uploads and fills (borrowed: it must
				    * outlive the stage) */
	/* Called after the staged bytes grew (no lock of the stage held):
	 * the burst buffer's clean blocks share the budget and make room.
	 * May be NULL. */
	void (*grew)(void *ctx);
	void *grew_ctx;
	/* Called (with grew_ctx) after the staging directory, removed while
	 * in use, was made again (the gateway takes its cache.dir lock
	 * again): no state lock of the stage held, but kept_io may be (a
	 * stale marker's creation found the directory gone). May be NULL. */
	void (*renewed)(void *ctx);
	/* For tests: called after each journal write and removal (a crash
	 * point), with jnl_ctx, no lock of the stage held. May be NULL. */
	void (*jnl_changed)(void *ctx);
	void *jnl_ctx;
	/* Recovery uploads nothing: each file whose commit had begun is left
	 * staged for stage_file_adopt (the gateway's drain publishes it after
	 * the mount), so that no S3 request stands between the start and the
	 * mount. false: stage_recover uploads them itself. */
	bool defer_commits;
};

/* Counters for .facetfs/stats ("staging" section). */
struct stage_counters {
	uint64_t used_bytes, max_bytes;  /* staged bytes now, budget */
	uint64_t open_files;             /* stage_files not released */
	uint64_t data_fds;               /* of them, holding their data's
					  * descriptor now (not parked) */
	uint64_t pending_files;          /* released with uncommitted data */
	uint64_t uploads, upload_bytes, upload_errors;
	uint64_t enospc, efbig;          /* refusals */
	uint64_t recovered_files;        /* moved to recovered/ (all time here) */
	uint64_t reuploaded_files;       /* commit-begun files uploaded by recovery,
					  * or after it (stage_file_adopt) */
	uint64_t syncs;                  /* fsync/fdatasync calls (0 under PROCESS) */
	uint64_t sealed_files, sealed_bytes;  /* sealed, not uploaded yet */
	uint64_t blocked_ms;             /* writes waited for room (all time) */
	uint64_t parts_streamed;         /* parts sent before their commit began */
	uint64_t parts_tail;             /* streamed uploads' parts sent by commit */
	uint64_t streams, stream_bytes;  /* streamed uploads completed, bytes */
	uint64_t stream_fallbacks;       /* streams broken: uploaded whole */
	uint64_t stream_aborts;          /* streamed uploads aborted */
	uint64_t spare_files;            /* empty files kept for new names */
};

struct stage_recovery_report {
	unsigned reuploaded;       /* "commit" files now in S3 */
	unsigned reupload_failed;  /* "commit" files kept staged (S3 failed) */
	unsigned deferred;         /* "commit" files left for stage_file_adopt
				    * (defer_commits) */
	unsigned abort_failed;     /* "dirty" files kept: aborting failed */
	unsigned aborted;          /* uploads named by a journal, aborted */
	unsigned orphans_aborted;  /* uploads found by listing, aborted */
	unsigned recovered;        /* "dirty" files moved to recovered/ (and
				    * all, after a PROCESS run and a reboot) */
	unsigned deleted;          /* data without journal, stray files */
	uint64_t recovered_bytes;
};

/* Opens (makes) the staging directory and recovered/, and counts what is
 * already staged against the budget. Run stage_recover() next. */
int  stage_open(const struct stage_conf *conf, struct stage **out);
/* Every stage_file must be released. Leaves the files on disk. */
void stage_close(struct stage *st);
/* The directory the mount shows as .facetfs/recovered/. */
const char *stage_recovered_dir(const struct stage *st);
void stage_counters_get(struct stage *st, struct stage_counters *out);

/* Applies the crash rule above to every staged file not open now (at
 * start: all; later: files released with uncommitted data). Logs each
 * file it uploads or moves. rep may be NULL. 0 or the first hard error
 * (S3 failures are not: they are counted in reupload_failed). One call
 * at a time, and none while commits, renames or deletes run through the
 * stage (stage_key_replaced marks files it may be uploading): the gateway
 * calls it once, at its start, before the mount.
 * With defer_commits, a "commit" journal (not stale, its data of the size
 * it names, not after a PROCESS run and a reboot) is neither uploaded nor
 * its upload aborted: the file stays staged and pending, in the list
 * stage_file_adopt takes from (oldest id first), and is counted in
 * deferred. Of two such files of one key only the newest (highest id)
 * is kept; the older goes to recovered/. A journal with an intent still
 * has it listed and aborted first (kept staged if that fails, as
 * without defer_commits). */
int  stage_recover(struct stage *st, struct stage_recovery_report *rep);
/* bucket/key was renamed onto or deleted through this gateway (a commit
 * here, failed or not, does the same for its key itself): files with a
 * failed commit of that key, which the next start would upload, are moved
 * to recovered/ by that start instead (a marker ID.stale is made beside
 * their journal at once, open or not, and recovery reads their "commit"
 * as "dirty"; a later commit of such a file makes it the newest again),
 * so that they never put older bytes over the newer version or bring back
 * a deleted object (stage_kept.c). */
void stage_key_replaced(struct stage *st, const char *bucket, const char *key);
/* The same, but keep (the file moving away from that name: a rename of a
 * pending file) is not marked. */
void stage_key_replaced_but(struct stage *st, const char *bucket, const char *key,
			    struct stage_file *keep);

/* A multipart upload of bucket/key that no staged file holds may be open
 * in the store (a server-side copy in parts whose creation's answer was
 * lost, or whose abort failed): recorded in the orphans file like the
 * intent of a file (stage_orphans.c), so that the next start lists the
 * uploads of that exact key initiated since since_ns (CLOCK_REALTIME ns,
 * taken before the creation; less the clock margin) and aborts them.
 * Logged; 0 or -errno when it could not be recorded (it stays open). */
int  stage_upload_left(struct stage *st, const char *bucket, const char *key,
		       int64_t since_ns);

/* A new empty staged file for bucket/key (create, or open with O_TRUNC):
 * dirty, so the next commit uploads it even if nothing is written. */
int  stage_file_new(struct stage *st, const char *bucket, const char *key,
		    const struct obj_kv *meta, size_t n_meta,
		    const char *content_type, struct stage_file **out);

/* Marks a file fresh from stage_file_new() as made whole by one call of the
 * gateway's user that has not returned yet (mknod, symlink: written and
 * committed before the reply): until its first commit ends, its writes are
 * not journaled and that commit neither syncs nor journals, since nothing
 * of it is promised before the commit returns (a crash leaves data without
 * a journal: deleted by recovery, and the user's call never returned). A
 * file that grows past one part (it could stream) is journaled from then
 * on like any other. */
void stage_file_oneshot(struct stage_file *f);

/* The file's bytes are not streamed while it is written: the commit
 * uploads it whole (a write-back file: the drain uploads it after its
 * close, and parts sent during the writes would only compete with them
 * for the CPU and the link). */
void stage_file_nostream(struct stage_file *f);

/* Fills a file fresh from stage_file_new() (no other call in between) with
 * the size bytes of the object bucket/key (the file's own, when it is open
 * for writing without O_TRUNC), fetched whole now by ranged GETs of up to
 * 8 MiB with If-Match etag (NULL -> none). The file is then clean with ETag
 * etag (NULL -> unknown): a commit without writes uploads nothing. -ENOSPC
 * (budget), -EFBIG (> max_object), -ESTALE (the object changed), -EIO on a
 * short GET, or the GET's error; on error the file is empty again. */
int  stage_file_fill(struct stage_file *f, const char *bucket, const char *key,
		     uint64_t size, const char *etag);

/* Bytes written or read, or a negative errno. pwrite: -ENOSPC (budget),
 * -EFBIG (past max_object), -EIO. pread: short at the end of the file. */
ssize_t stage_file_pwrite(struct stage_file *f, const void *buf, size_t len,
			  uint64_t off);
/* stage_file_pwrite with the len bytes taken from the pipe pipe_fd (a
 * WRITE's data that FUSE spliced out of /dev/fuse) and moved into the
 * staged file by splice(2): no copy through a buffer of the process (a
 * pipe may be non-blocking; a file system that cannot splice gets them
 * copied). The same write otherwise, and the same errors; also -EIO when
 * the pipe holds fewer than len bytes. len bytes left the pipe when it
 * returns len; on error it may still hold some or all of them, and the
 * caller must not read what follows them as anything else. */
ssize_t stage_file_pwrite_pipe(struct stage_file *f, int pipe_fd, size_t len,
			       uint64_t off);
ssize_t stage_file_pread(struct stage_file *f, void *buf, size_t len,
			 uint64_t off);
int  stage_file_truncate(struct stage_file *f, uint64_t size);
uint64_t stage_file_size(struct stage_file *f);
bool stage_file_dirty(struct stage_file *f);
/* Replaces user metadata and content type (NULL = none) for the next
 * upload; makes the file dirty. A change during a streamed upload whose
 * metadata differs breaks the stream (see above). */
int  stage_file_set_meta(struct stage_file *f, const struct obj_kv *meta,
			 size_t n_meta, const char *content_type);
/* The same for the metadata of a commit that follows at once (the commit
 * time as mtime): not journaled now, since the commit journals it. */
int  stage_file_set_commit_meta(struct stage_file *f, const struct obj_kv *meta,
				size_t n_meta, const char *content_type);
/* Whether a streamed upload exists for f now: its metadata is fixed, so
 * a stage_file_set_meta() with other metadata would make the commit
 * upload the file whole. */
bool stage_file_streaming(struct stage_file *f);
/* The object the next upload goes to (rename while open); makes it dirty. */
int  stage_file_rename(struct stage_file *f, const char *bucket,
		       const char *key);

/* fsync(2) of a file that it does not publish (`session`, `eventual`):
 * under POWER, written data made durable on the local disk (fdatasync; its
 * "dirty" journal was synced when written), so a power loss keeps those
 * bytes for recovered/; under PROCESS nothing (counted in neither). 0 or
 * -EIO (logged). */
int  stage_file_sync(struct stage_file *f);
/* The MD5 of f's bytes now, in hex: the ETag one PUT of them gets. 0,
 * -EOPNOTSUPP (f goes up in parts: its ETag is no MD5) or -errno. */
int  stage_file_md5(struct stage_file *f, char hex[33]);

/* Commit point. Uploads the file whole if dirty; 0 only when S3 has it,
 * with etag_out (may be NULL) = the ETag of the uploaded (or filled) data.
 * -EIO if the upload failed (logged with the S3 error): the data
 * stays staged and dirty, and a later commit retries. -EFBIG if the file is
 * over max_object (logged; data kept). */
int  stage_file_commit(struct stage_file *f, char etag_out[72]);

/* What a conditional commit requires of the store's version of the key:
 * base is the ETag the file was based on ("": none, a new key); caps say
 * which conditions the store honours (the probe at mount, sync/stage/probe.h). */
struct stage_cond {
	const char *base;
	struct s3_cond_caps caps;
};

/* stage_file_commit whose upload carries cond as a condition
 * (s3_put_file_if): If-Match base, or If-None-Match: * for base "". Sent
 * only when the upload is one PUT (upload_single; no streamed upload
 * open) and the store honours that condition; otherwise -EOPNOTSUPP and
 * nothing happened (nothing uploaded, marked or journaled): the caller
 * checks the key's version with a HEAD and calls stage_file_commit, as
 * for a store without conditions. -ESTALE: the store refused, the key
 * holds another version (or none, or one for base ""): nothing uploaded,
 * the file left as any failed commit leaves it (dirty, journaled "commit"
 * and kept; a sealed file still sealed; a one-shot file never journaled:
 * NEW). Not dirty: 0 and the last ETag, nothing sent, as a commit. Other
 * returns as stage_file_commit. */
int  stage_file_commit_if(struct stage_file *f, const struct stage_cond *cond,
			  char etag_out[72]);

/* The close of a write-back file (a view with "write_back"): made durable
 * here and journaled "commit" as a commit that has begun (data fdatasync'ed
 * and the journal synced under POWER), without uploading: a later
 * stage_file_commit uploads it, and if the gateway dies first, the next
 * start's recovery does (the crash rule above). Older failed commits of
 * the key are marked stale as at a commit's start. 0 (also when there is
 * nothing to seal) or -EIO (logged; the file stays as it was). */
int  stage_file_seal(struct stage_file *f);
/* Whether f is sealed and unchanged since: its commit uploads what the
 * seal journaled, with no sync and no journal write of its own. */
bool stage_file_sealed(struct stage_file *f);

/* The file's data is not to be uploaded (a write-back file whose key
 * another client changed since the version it was based on): its bytes
 * are saved to recovered/ (BUCKET%2FKEY@TIME, with NAME.journal holding
 * note), then the file is clean and unjournaled, so no commit uploads it.
 * 0 or -errno (logged; the file is left as it was). */
int  stage_file_set_aside(struct stage_file *f, const char *note);

/* The file's data is not wanted any more (its name was deleted while it
 * waited for a write-back's upload): journal removed, the file clean, so
 * its release deletes it. */
void stage_file_drop(struct stage_file *f);

/* The version of its key the file is based on: etag, the ETag it was
 * opened on or of its last upload ("" for a new key: none); NULL: not
 * known. Journaled with each later journal ("base" line), so that after a
 * crash the file's upload can still be checked against another client's
 * newer write. Changes nothing else (the file stays sealed, clean or
 * dirty as it was). */
void stage_file_set_base(struct stage_file *f, const char *etag);

/* The next file stage_recover deferred (defer_commits), oldest id first,
 * as an open staged file again: *out is SEALED as stage_file_seal leaves
 * a file (dirty, "commit" journaled, counted in sealed_files; its commit
 * uploads what the journal holds with no sync and no journal write of its
 * own), never streamed, no longer pending (it is open now: release it as
 * any file). If the journal named a multipart upload, that upload is the
 * file's broken stream: its commit aborts it first (while the abort
 * fails, the commit fails with -EIO and the file stays as after any
 * failed commit). *what (release it with obj_meta_release) gets the bucket,
 * key, size, content type and user metadata the upload carries, and in
 * etag the version the file is based on when the journal named one
 * (*base_known; "" then means none: a new key). Its upload, once it
 * succeeds, counts in reuploaded_files. 0; -ENOENT when none is left;
 * another -errno when that file cannot be opened, or when its key was
 * replaced since recovery (stage_key_replaced: -ESTALE): logged, it stays
 * pending for the next start's recovery, and the next call goes on with
 * the next file. Any thread, after stage_recover. */
int  stage_file_adopt(struct stage *st, struct stage_file **out, struct obj_meta *what,
		      bool *base_known);

/* No descriptor of the mount holds f now (the core calls it when a
 * writable descriptor of f is released; f may stay open, e.g. sealed and
 * held by the write-back drain): f's data descriptor is closed, at once
 * or when the use in flight ends, so that the files waiting for their
 * upload hold no descriptor (stage_counters.data_fds). Each later read,
 * commit, sync, seal, set-aside or release opens ID.data again for its
 * own use only; a write or truncate opens it for good (the file is
 * written through the mount again: park it at that descriptor's release).
 * Calls need no pairing and may come any number of times; parking a
 * file that is written meanwhile costs one reopen. A file whose ID.data
 * went with a removed staging directory keeps its descriptor (its only
 * copy); one parked when the directory is removed loses its data: its
 * reads, commits and seals fail with -EIO from then on (logged). */
void stage_file_park(struct stage_file *f);

/* After the last close. Committed (or never journaled) data is deleted; a
 * file with uncommitted writes stays on disk for stage_recover() (logged,
 * counted in pending_files). f is freed. */
void stage_file_release(struct stage_file *f);

#endif
