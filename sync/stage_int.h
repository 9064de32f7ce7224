/*
 * stage_int.h — internals shared by stage.c (staged files, commit) and
 * stage_journal.c (journal files, crash recovery). Not for other modules.
 *
 * struct stage: stage.lock protects used, next_id, the open list and the
 * counters; it is a leaf lock (never held while taking another lock or
 * doing I/O other than nothing). struct stage_file: f->lock protects every
 * field below it; the fd is used without the lock (pread/pwrite).
 */
#ifndef FACETFS_STAGE_INT_H
#define FACETFS_STAGE_INT_H

#include <dirent.h>
#include <pthread.h>

#include "sync/stage.h"

enum stage_jstate {
	STAGE_JS_NONE,    /* no journal on disk */
	STAGE_JS_DIRTY,   /* "dirty": written since the last commit */
	STAGE_JS_COMMIT,  /* "commit": a commit began */
};

struct stage {
	char *dir;
	char *rec_dir;
	int dir_fd;
	int rec_fd;
	uint64_t max_bytes, max_object;
	enum stage_durability durability;
	bool distrust;               /* a PROCESS run's files after a reboot:
				      * recovery moves all to recovered/ */
	struct upload_conf up;
	struct s3 *s3;               /* borrowed */
	void (*grew)(void *ctx);     /* stage_conf.grew */
	void *grew_ctx;

	pthread_mutex_t lock;
	uint64_t used;               /* bytes charged, all staged files */
	uint64_t next_id;
	struct stage_file *open;     /* files not released */
	struct stage_counters cnt;   /* used/max/open filled in on read */
};

struct stage_file {
	struct stage *st;
	uint64_t id;
	int fd;

	pthread_mutex_t lock;
	pthread_cond_t cond;         /* uploading or n_active changed */
	char *bucket, *key, *ctype;
	struct obj_kv *meta;
	size_t n_meta;
	uint64_t size;               /* logical size == bytes charged */
	bool dirty;                  /* the next commit must upload */
	bool uploading;              /* a commit owns the file */
	unsigned n_active;           /* writes in flight (outside the lock) */
	enum stage_jstate js;        /* what the journal on disk says */
	char etag[72];               /* of the last upload or fill; "" unknown */
	struct stage_file *next, *prev;   /* stage.open, under stage.lock */
};

/* A journal as read or to be written; strings owned by the struct. */
struct stage_jnl {
	enum stage_jstate state;
	uint64_t size;               /* data size at "commit" */
	char *bucket, *key, *ctype;
	char *upload_id;             /* a multipart upload begun at "commit" */
	struct obj_kv *meta;
	size_t n_meta;
};

/* Replace ID.jnl atomically and durably with j (borrowed). */
int  stage_jnl_write(struct stage *st, uint64_t id, const struct stage_jnl *j);
/* Read ID.jnl: -ENOENT if none, -EINVAL if malformed. */
int  stage_jnl_read(struct stage *st, uint64_t id, struct stage_jnl *out);
/* Remove ID.jnl durably (missing is fine). */
int  stage_jnl_remove(struct stage *st, uint64_t id);
void stage_jnl_release(struct stage_jnl *j);
/* upload_file's started callback: rewrite the "commit" journal j of file
 * id with the multipart upload's id, so that a crash can abort it. */
struct jnl_started {
	struct stage *st;
	uint64_t id;
	struct stage_jnl *j;         /* borrowed; upload_id set while writing */
};
int  stage_jnl_started(void *ctx, const char *upload_id);

/* fsync (fdatasync if data) of fd under POWER, counted in cnt.syncs;
 * nothing under PROCESS. 0 or -errno. */
int  stage_sync(struct stage *st, int fd, bool data);
/* At open: reads the durability file of the previous run (sets distrust
 * after a PROCESS run and a reboot) and, unless distrusting, writes this
 * run's. 0 or -errno. */
int  stage_durability_open(struct stage *st);

void stage_uncharge(struct stage *st, uint64_t n);
/* A listing of the staging directory (closedir it); 0 or -errno. */
int  stage_dir_open(struct stage *st, DIR **out);
void stage_name(uint64_t id, const char *ext, char out[32]);

#endif
