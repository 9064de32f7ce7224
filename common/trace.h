/*
 * trace.h — the I/O trace of a mount: its file format, the recorder the
 * gateway writes it with, and the reader `facetfs advise` and `facetfs
 * replay` read it with. One module for both ends, in common/, because the
 * writer (fuse/ records requests, gateway/ records event applies) and the
 * readers (gateway/advise.c, the replay) live in different folders and the
 * format must not drift between them. It knows no FUSE, S3 or index type.
 *
 * Format (host byte order; `endian` in the header tells a reader): a
 * struct trace_header, then records, each a struct trace_rec followed by
 * name_len name bytes padded with NULs to a multiple of 8. Names are
 * "VIEW/PATH" (rename: old NUL new). No data bytes are ever recorded.
 * Times are CLOCK_MONOTONIC ns; the header's anchor pairs one monotonic
 * reading with one CLOCK_REALTIME reading, taken back to back (anchor_err_ns
 * apart at most), so traces of several gateways align on wall-clock time.
 * A record cut short at the end (a crash) is ignored by the reader.
 *
 * Recorder: trace_on() is one relaxed atomic load, the only cost while off.
 * trace_record() appends under the recorder's lock (a leaf: no other lock is
 * taken under it, no I/O is done under it) into 64 KiB buffers; its writer
 * thread writes full buffers (and, every 200 ms, the partial one) to the
 * file holding no lock. The file is bounded (max_bytes): at the bound the
 * recorder stops recording, logs one warning and says so in its status.
 * Start, stop and free are serialised by a control lock of their own
 * (held across the file's open/close, never taken by a recording thread).
 * Any thread may call anything; trace_free() only once nothing else can.
 * pid: the recorder takes the thread id the kernel gave the request and
 * resolves the process (Tgid in /proc/TID/status) itself, cached per tid
 * (refreshed at each open), reading /proc with its lock released.
 * Lock order (this module's; docs/design.md "Lock order" has the process's):
 *   trace control lock -> trace recorder lock
 *
 * Tests: test_trace.c; t_trace.sh.
 */
#ifndef FACETFS_TRACE_H
#define FACETFS_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TRACE_MAGIC "FFTRACE1"
#define TRACE_VERSION 1

enum trace_op {
	TRACE_OPEN = 1,  /* name; off: open flags; fh: the new handle */
	TRACE_CREATE,    /* name; off: open flags; fh: the new handle */
	TRACE_READ,      /* fh, off, len asked; result: bytes or -errno */
	TRACE_WRITE,     /* fh, off, len; result: bytes or -errno */
	TRACE_FSYNC,     /* fh: fsync/fdatasync (a commit) */
	TRACE_FLUSH,     /* fh: close(2) of a descriptor (a commit, a close) */
	TRACE_RELEASE,   /* fh: the last reference went away */
	TRACE_TRUNCATE,  /* fh or name; off: the new size */
	TRACE_RENAME,    /* name: old NUL new; off: rename flags */
	TRACE_UNLINK,    /* name */
	TRACE_EVENT,     /* name: an S3 event changed it; pid 0 */
	TRACE_OP_END
};

struct trace_header {
	char magic[8];           /* TRACE_MAGIC, no NUL */
	uint32_t version;        /* TRACE_VERSION */
	uint32_t endian;         /* 0x01020304 as written */
	int64_t mono_ns;         /* the anchor: CLOCK_MONOTONIC ... */
	int64_t wall_ns;         /* ... and CLOCK_REALTIME at the same moment */
	int64_t anchor_err_ns;   /* how far apart the two readings may be */
	char source[40];         /* "HOST:PID" of the gateway, NUL-terminated */
};

struct trace_rec {
	int64_t t;               /* CLOCK_MONOTONIC ns */
	uint64_t fh;             /* the mount's file handle (0: none) */
	uint64_t off;
	uint64_t len;
	uint32_t pid, tid;
	int32_t result;          /* >= 0 done (bytes for read/write), else -errno */
	uint16_t op;             /* enum trace_op */
	uint16_t name_len;       /* name bytes after the record (before padding) */
};

/* Bytes one record with a name of name_len takes in the file. */
static inline size_t trace_rec_size(size_t name_len)
{
	return sizeof(struct trace_rec) + ((name_len + 7) & ~(size_t)7);
}

const char *trace_op_name(unsigned op);

/* ---------- reading ---------- */

struct trace_file {
	struct trace_header h;
	const unsigned char *data;   /* the records (mapped) */
	size_t size;
	void *map;
	size_t map_len;
};

/* Map path. 0, or -errno (-EINVAL: not a trace of this version and byte
 * order; *why, when given, says which, a static string). */
int  trace_file_open(const char *path, struct trace_file *f, const char **why);
void trace_file_close(struct trace_file *f);
/* The record at *pos (advanced past it) and its name (not NUL-terminated:
 * r->name_len bytes), or NULL at the end. */
const struct trace_rec *trace_file_next(const struct trace_file *f, size_t *pos,
					const char **name);

/* Write a header with a fresh anchor into h (source "HOST:PID"). */
void trace_header_init(struct trace_header *h);
int64_t trace_now_ns(void);   /* CLOCK_MONOTONIC */

/* ---------- recording ---------- */

struct trace;
/* The recorder begins with this switch (trace_on() reads it). */
struct trace_switch {
	atomic_bool on;
};

static inline bool trace_on(const struct trace *t)
{
	return t && atomic_load_explicit(&((const struct trace_switch *)(const void *)t)->on,
					 memory_order_relaxed);
}

/* dir: where trace files go (made if missing). */
int  trace_new(const char *dir, struct trace **out);
void trace_free(struct trace *t);   /* stops a running trace first */

/* Start recording (view NULL: every view) into a new file of at most
 * max_bytes (0: 1 GiB). 0 with *msg (malloc'ed, the caller frees) saying
 * where, or -errno with *msg saying why (-EBUSY: already on). */
int  trace_start(struct trace *t, const char *view, uint64_t max_bytes, char **msg);
/* Stop, write everything, close: 0 with *msg (file, records, bytes), or
 * -ENOENT when none runs. */
int  trace_stop(struct trace *t, char **msg);
/* One line: off, or on/full with the file, records, bytes, bound. */
char *trace_status(struct trace *t);

/* Record one operation (call only when trace_on()). tid: the thread the
 * kernel says made the request. view/path name the file for ops that
 * carry a name (NULL otherwise: the handle says it); path2 the new path of
 * a rename (same view). A view filter keeps the ops of handles opened in
 * that view and the named ops in it. */
void trace_record(struct trace *t, enum trace_op op, uint32_t tid, uint64_t fh,
		  uint64_t off, uint64_t len, int32_t result,
		  const char *view, const char *path, const char *path2);

#endif
