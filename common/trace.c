/* trace.c — see trace.h. */
#include "common/lock.h"
#include "common/trace.h"

#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TBUF_SIZE (64u << 10)
#define TBUF_QUEUE_MAX 256          /* 16 MiB waiting for the writer at most */
#define TRACE_DEFAULT_MAX (1ull << 30)
#define TID_CACHE 1024              /* tid -> pid slots (open addressing) */
#define FH_SET_MIN 256

static const char *const op_names[TRACE_OP_END] = {
	[TRACE_OPEN] = "open", [TRACE_CREATE] = "create", [TRACE_READ] = "read",
	[TRACE_WRITE] = "write", [TRACE_FSYNC] = "fsync", [TRACE_FLUSH] = "close",
	[TRACE_RELEASE] = "release", [TRACE_TRUNCATE] = "truncate",
	[TRACE_RENAME] = "rename", [TRACE_UNLINK] = "unlink", [TRACE_EVENT] = "event",
};

const char *trace_op_name(unsigned op)
{
	return op > 0 && op < TRACE_OP_END ? op_names[op] : "?";
}

int64_t trace_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t wall_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void trace_header_init(struct trace_header *h)
{
	memset(h, 0, sizeof *h);
	memcpy(h->magic, TRACE_MAGIC, 8);
	h->version = TRACE_VERSION;
	h->endian = 0x01020304;
	/* The tightest of a few tries: the wall reading lies between two
	 * monotonic ones; the anchor is their middle. */
	int64_t best = INT64_MAX;
	for (int i = 0; i < 5; i++) {
		int64_t m0 = trace_now_ns(), w = wall_now_ns(), m1 = trace_now_ns();
		if (m1 - m0 < best) {
			best = m1 - m0;
			h->mono_ns = m0 + (m1 - m0) / 2;
			h->wall_ns = w;
		}
	}
	h->anchor_err_ns = best / 2 + 1;
	char host[24] = "localhost";
	gethostname(host, sizeof host - 1);
	host[sizeof host - 1] = '\0';
	snprintf(h->source, sizeof h->source, "%.23s:%d", host, (int)getpid());
}

/* ---------- reading ---------- */

int trace_file_open(const char *path, struct trace_file *f, const char **why)
{
	memset(f, 0, sizeof *f);
	const char *dummy;
	if (!why)
		why = &dummy;
	*why = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	if ((size_t)st.st_size < sizeof f->h) {
		*why = "too short for a trace header";
		rc = -EINVAL;
		goto out;
	}
	f->map_len = (size_t)st.st_size;
	f->map = mmap(NULL, f->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
	if (f->map == MAP_FAILED) {
		rc = -errno;
		f->map = NULL;
		goto out;
	}
	madvise(f->map, f->map_len, MADV_SEQUENTIAL);
	memcpy(&f->h, f->map, sizeof f->h);
	if (memcmp(f->h.magic, TRACE_MAGIC, 8) != 0) {
		*why = "not a facetfs trace (bad magic)";
		rc = -EINVAL;
	} else if (f->h.version != TRACE_VERSION) {
		*why = "trace version not supported";
		rc = -EINVAL;
	} else if (f->h.endian != 0x01020304) {
		*why = "trace written with another byte order";
		rc = -EINVAL;
	}
	if (rc < 0) {
		munmap(f->map, f->map_len);
		f->map = NULL;
		goto out;
	}
	f->data = (const unsigned char *)f->map + sizeof f->h;
	f->size = f->map_len - sizeof f->h;
out:
	close(fd);
	return rc;
}

void trace_file_close(struct trace_file *f)
{
	if (f->map)
		munmap(f->map, f->map_len);
	memset(f, 0, sizeof *f);
}

const struct trace_rec *trace_file_next(const struct trace_file *f, size_t *pos,
					const char **name)
{
	if (f->size - *pos < sizeof(struct trace_rec) || *pos > f->size)
		return NULL;
	const struct trace_rec *r = (const struct trace_rec *)(const void *)(f->data + *pos);
	size_t n = trace_rec_size(r->name_len);
	if (f->size - *pos < n)
		return NULL;
	*name = (const char *)(r + 1);
	*pos += n;
	return r;
}

/* ---------- recording ---------- */

struct tbuf {
	struct tbuf *next;
	size_t len;
	unsigned char data[TBUF_SIZE];
};

struct tid_slot {
	uint32_t tid, pid;
};

struct trace {
	struct trace_switch sw;      /* first: trace_on() reads it */
	char *dir;
	/* Serialises start, stop and free (control commands; held across the
	 * trace file's open, header write, fsync and close, never taken by a
	 * recording thread). Taken before lock. */
	pthread_mutex_t ctl_lock;
	pthread_mutex_t lock;        /* protects everything below (a leaf) */
	pthread_cond_t cond;
	bool active, full, stopping, thread_running;
	int fd;
	char *path;
	char *view;                  /* filter, or NULL */
	uint64_t max_bytes, bytes, records, dropped;
	struct tbuf *cur;            /* being filled */
	struct tbuf *queue, **queue_tail;
	unsigned queued;
	uint64_t *fhs;               /* handles opened in the view (filter only) */
	size_t fh_cap, fh_n;
	struct tid_slot tids[TID_CACHE];
	int write_err;               /* first write error of the writer */
	pthread_t thread;
};

int trace_new(const char *dir, struct trace **out)
{
	struct trace *t = calloc(1, sizeof *t);
	if (!t || !(t->dir = strdup(dir))) {
		free(t);
		return -ENOMEM;
	}
	atomic_init(&t->sw.on, false);
	pthread_mutex_init(&t->ctl_lock, NULL);
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	t->fd = -1;
	*out = t;
	return 0;
}

/* Write q's buffers to the file in order; no lock held. */
static void buffers_write(struct trace *t, int fd, struct tbuf *q)
{
	int err = 0;
	while (q) {
		struct tbuf *next = q->next;
		size_t done = 0;
		while (!err && done < q->len) {
			ssize_t n = write(fd, q->data + done, q->len - done);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				err = errno;
			else
				done += (size_t)n;
		}
		free(q);
		q = next;
	}
	if (err) {
		mod_lock(&t->lock);
		bool first = !t->write_err;
		t->write_err = err;
		mod_unlock(&t->lock);
		if (first)
			log_error("trace: writing %s: %s", t->path, strerror(err));
	}
}

/* Move the filled buffers (and the partial one) out; lock held. */
static struct tbuf *buffers_take(struct trace *t)
{
	if (t->cur && t->cur->len) {
		*t->queue_tail = t->cur;
		t->queue_tail = &t->cur->next;
		t->cur = NULL;
	}
	struct tbuf *q = t->queue;
	t->queue = NULL;
	t->queue_tail = &t->queue;
	t->queued = 0;
	return q;
}

static void *writer_main(void *arg)
{
	struct trace *t = arg;
	mod_lock(&t->lock);
	while (!t->stopping) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 200 * 1000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		if (!t->queue)
			pthread_cond_timedwait(&t->cond, &t->lock, &until);
		struct tbuf *q = buffers_take(t);
		int fd = t->fd;
		mod_unlock(&t->lock);
		buffers_write(t, fd, q);
		mod_lock(&t->lock);
	}
	struct tbuf *q = buffers_take(t);
	int fd = t->fd;
	mod_unlock(&t->lock);
	buffers_write(t, fd, q);
	return NULL;
}

static int start_locked(struct trace *t, const char *view, uint64_t max_bytes, char **msg);
static int stop_locked(struct trace *t, char **msg);

int trace_start(struct trace *t, const char *view, uint64_t max_bytes, char **msg)
{
	mod_lock(&t->ctl_lock);
	int rc = start_locked(t, view, max_bytes, msg);
	mod_unlock(&t->ctl_lock);
	return rc;
}

int trace_stop(struct trace *t, char **msg)
{
	mod_lock(&t->ctl_lock);
	int rc = stop_locked(t, msg);
	mod_unlock(&t->ctl_lock);
	return rc;
}

static int start_locked(struct trace *t, const char *view, uint64_t max_bytes, char **msg)
{
	*msg = NULL;
	struct trace_header h;
	trace_header_init(&h);
	if (!max_bytes)
		max_bytes = TRACE_DEFAULT_MAX;
	if (max_bytes < sizeof h + 4096) {
		if (asprintf(msg, "error: --max-bytes %llu is too small (at least %zu)\n",
			     (unsigned long long)max_bytes, sizeof h + 4096) < 0)
			*msg = NULL;
		return -EINVAL;
	}
	mod_lock(&t->lock);
	bool busy = t->active || t->thread_running;
	mod_unlock(&t->lock);
	if (busy) {
		if (asprintf(msg, "error: a trace is already on (%s); stop it first\n", t->path) < 0)
			*msg = NULL;
		return -EBUSY;
	}
	char *path = NULL, *vcopy = NULL;
	int rc = 0, fd = -1;
	if (mkdir(t->dir, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		goto fail;
	}
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	if (asprintf(&path, "%s/trace-%04d%02d%02dT%02d%02d%02dZ-%ld.fft", t->dir,
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
		     tm.tm_sec, (long)(h.mono_ns % 1000000)) < 0) {
		path = NULL;
		rc = -ENOMEM;
		goto fail;
	}
	if (view && !(vcopy = strdup(view))) {
		rc = -ENOMEM;
		goto fail;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, &h, sizeof h) != (ssize_t)sizeof h) {
		rc = -errno;
		goto fail;
	}
	mod_lock(&t->lock);
	free(t->path);
	free(t->view);
	free(t->fhs);
	t->path = path;
	t->view = vcopy;
	t->fd = fd;
	t->max_bytes = max_bytes;
	t->bytes = sizeof h;
	t->records = t->dropped = 0;
	t->full = t->stopping = false;
	t->write_err = 0;
	t->queue = NULL;
	t->queue_tail = &t->queue;
	t->queued = 0;
	t->fhs = NULL;
	t->fh_cap = t->fh_n = 0;
	memset(t->tids, 0, sizeof t->tids);
	t->active = true;
	t->thread_running = true;
	mod_unlock(&t->lock);
	if ((rc = -pthread_create(&t->thread, NULL, writer_main, t)) < 0) {
		mod_lock(&t->lock);
		t->active = t->thread_running = false;
		t->fd = -1;
		mod_unlock(&t->lock);
		close(fd);
		unlink(path);
		if (asprintf(msg, "error: trace: %s\n", strerror(-rc)) < 0)
			*msg = NULL;
		return rc;
	}
	atomic_store_explicit(&t->sw.on, true, memory_order_relaxed);
	log_info("trace: recording %s%s into %s (at most %llu bytes)", view ? "view " : "every view",
		 view ? view : "", path, (unsigned long long)max_bytes);
	if (asprintf(msg, "tracing %s%s into %s (at most %llu bytes)\n", view ? "view " : "every view",
		     view ? view : "", path, (unsigned long long)max_bytes) < 0)
		*msg = NULL;
	return 0;
fail:
	if (asprintf(msg, "error: trace: %s: %s\n", path ? path : t->dir, strerror(-rc)) < 0)
		*msg = NULL;
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
	free(path);
	free(vcopy);
	return rc;
}

static int stop_locked(struct trace *t, char **msg)
{
	*msg = NULL;
	atomic_store_explicit(&t->sw.on, false, memory_order_relaxed);
	mod_lock(&t->lock);
	if (!t->thread_running) {
		mod_unlock(&t->lock);
		if (asprintf(msg, "error: no trace is on\n") < 0)
			*msg = NULL;
		return -ENOENT;
	}
	t->active = false;
	t->stopping = true;
	pthread_cond_signal(&t->cond);
	mod_unlock(&t->lock);
	pthread_join(t->thread, NULL);
	mod_lock(&t->lock);
	t->thread_running = false;
	int fd = t->fd;
	t->fd = -1;
	uint64_t records = t->records, bytes = t->bytes, dropped = t->dropped;
	bool full = t->full;
	int err = t->write_err;
	mod_unlock(&t->lock);
	if (fd >= 0 && fsync(fd) < 0 && !err)
		err = errno;
	if (fd >= 0 && close(fd) < 0 && !err)
		err = errno;
	log_info("trace: stopped, %s: %llu records, %llu bytes", t->path,
		 (unsigned long long)records, (unsigned long long)bytes);
	if (asprintf(msg, "%strace stopped: %s: %llu records, %llu bytes%s%s%s%s\n",
		     err ? "error: " : "", t->path, (unsigned long long)records,
		     (unsigned long long)bytes,
		     full ? " (the bound was reached: later operations are not in it)" : "",
		     dropped ? " (some records dropped: the writer fell behind)" : "",
		     err ? "; write error: " : "", err ? strerror(err) : "") < 0)
		*msg = NULL;
	return err ? -err : 0;
}

char *trace_status(struct trace *t)
{
	char *s = NULL;
	mod_lock(&t->lock);
	int rc;
	if (!t->thread_running)
		rc = asprintf(&s, "off%s%s\n", t->path ? "; last trace " : "",
			      t->path ? t->path : "");
	else
		rc = asprintf(&s, "%s %s view %s: %llu records, %llu of %llu bytes, %llu dropped%s\n",
			      t->full ? "full (recording stopped at the bound)" : "on", t->path,
			      t->view ? t->view : "(all)", (unsigned long long)t->records,
			      (unsigned long long)t->bytes, (unsigned long long)t->max_bytes,
			      (unsigned long long)t->dropped, t->write_err ? ", write error" : "");
	mod_unlock(&t->lock);
	return rc < 0 ? NULL : s;
}

void trace_free(struct trace *t)
{
	if (!t)
		return;
	char *msg = NULL;
	mod_lock(&t->ctl_lock);
	if (t->thread_running)
		stop_locked(t, &msg);
	mod_unlock(&t->ctl_lock);
	free(msg);
	pthread_mutex_destroy(&t->ctl_lock);
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->cond);
	free(t->path);
	free(t->view);
	free(t->fhs);
	free(t->dir);
	free(t);
}

/* ---- the handle set of a view filter (lock held) ---- */

static size_t fh_slot(const struct trace *t, uint64_t fh)
{
	uint64_t h = fh * 0x9E3779B97F4A7C15ull;
	size_t i = (size_t)(h >> 20) & (t->fh_cap - 1);
	while (t->fhs[i] && t->fhs[i] != fh)
		i = (i + 1) & (t->fh_cap - 1);
	return i;
}

static bool fh_has(const struct trace *t, uint64_t fh)
{
	return t->fh_cap && t->fhs[fh_slot(t, fh)] == fh;
}

static void fh_add(struct trace *t, uint64_t fh)
{
	if (!fh)
		return;
	if ((t->fh_n + 1) * 2 > t->fh_cap) {
		size_t cap = t->fh_cap ? t->fh_cap * 2 : FH_SET_MIN;
		uint64_t *old = t->fhs, *n = calloc(cap, sizeof *n);
		if (!n)
			return;
		size_t oldcap = t->fh_cap;
		t->fhs = n;
		t->fh_cap = cap;
		for (size_t i = 0; i < oldcap; i++)
			if (old[i])
				t->fhs[fh_slot(t, old[i])] = old[i];
		free(old);
	}
	size_t i = fh_slot(t, fh);
	if (!t->fhs[i]) {
		t->fhs[i] = fh;
		t->fh_n++;
	}
}

/* Remove by re-inserting the rest of the cluster (linear probing). */
static void fh_del(struct trace *t, uint64_t fh)
{
	if (!fh_has(t, fh))
		return;
	size_t i = fh_slot(t, fh);
	t->fhs[i] = 0;
	t->fh_n--;
	for (size_t j = (i + 1) & (t->fh_cap - 1); t->fhs[j]; j = (j + 1) & (t->fh_cap - 1)) {
		uint64_t v = t->fhs[j];
		t->fhs[j] = 0;
		t->fhs[fh_slot(t, v)] = v;
	}
}

/* ---- tid -> pid ---- */

static uint32_t pid_of_tid(uint32_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%u/status", tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return tid;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return tid;
	buf[n] = '\0';
	const char *p = strstr(buf, "\nTgid:");
	return p ? (uint32_t)strtoul(p + 6, NULL, 10) : tid;
}

static struct tid_slot *tid_find(struct trace *t, uint32_t tid)
{
	return &t->tids[(tid * 2654435761u) % TID_CACHE];
}

/* Append one record; lock held. */
static void record_append(struct trace *t, const struct trace_rec *r, const char *name,
			  size_t n1, const char *name2, size_t n2)
{
	size_t name_len = n1 + (name2 ? 1 + n2 : 0);
	size_t need = trace_rec_size(name_len);
	if (t->bytes + need > t->max_bytes) {
		if (!t->full) {
			t->full = true;
			atomic_store_explicit(&t->sw.on, false, memory_order_relaxed);
			log_warn("trace: %s reached its bound of %llu bytes: recording stopped after "
				 "%llu records (`facetfs trace MOUNTPOINT stop` closes it; start "
				 "again with a larger --max-bytes)", t->path,
				 (unsigned long long)t->max_bytes, (unsigned long long)t->records);
		}
		return;
	}
	if (!t->cur || TBUF_SIZE - t->cur->len < need) {
		if (t->cur) {
			*t->queue_tail = t->cur;
			t->queue_tail = &t->cur->next;
			t->queued++;
			t->cur = NULL;
			pthread_cond_signal(&t->cond);
		}
		if (t->queued >= TBUF_QUEUE_MAX || !(t->cur = malloc(sizeof *t->cur))) {
			t->dropped++;
			return;
		}
		t->cur->next = NULL;
		t->cur->len = 0;
	}
	unsigned char *p = t->cur->data + t->cur->len;
	struct trace_rec rr = *r;
	rr.name_len = (uint16_t)name_len;
	memcpy(p, &rr, sizeof rr);
	p += sizeof rr;
	if (n1)
		memcpy(p, name, n1);
	if (name2) {
		p[n1] = '\0';
		memcpy(p + n1 + 1, name2, n2);
	}
	memset(p + name_len, 0, need - sizeof rr - name_len);
	t->cur->len += need;
	t->bytes += need;
	t->records++;
}

void trace_record(struct trace *t, enum trace_op op, uint32_t tid, uint64_t fh,
		  uint64_t off, uint64_t len, int32_t result,
		  const char *view, const char *path, const char *path2)
{
	struct trace_rec r = { .t = trace_now_ns(), .fh = fh, .off = off, .len = len,
			       .tid = tid, .result = result, .op = (uint16_t)op };
	char name[4096 + 256], name2[4096 + 256];
	size_t n1 = 0, n2 = 0;
	if (view && path) {
		int k = snprintf(name, sizeof name, "%s/%s", view, path);
		n1 = k < 0 ? 0 : (size_t)k < sizeof name ? (size_t)k : sizeof name - 1;
		if (path2) {
			k = snprintf(name2, sizeof name2, "%s/%s", view, path2);
			n2 = k < 0 ? 0 : (size_t)k < sizeof name2 ? (size_t)k : sizeof name2 - 1;
		}
	}
	bool opens = op == TRACE_OPEN || op == TRACE_CREATE;
	uint32_t pid = 0;
	mod_lock(&t->lock);
	if (!t->active || t->full)
		goto out;
	if (t->view) {
		if (view) {
			if (strcmp(view, t->view) != 0)
				goto out;
			if (opens && result >= 0)
				fh_add(t, fh);
		} else if (fh && !fh_has(t, fh)) {
			goto out;
		}
		if (op == TRACE_RELEASE)
			fh_del(t, fh);
	}
	if (tid) {
		struct tid_slot *s = tid_find(t, tid);
		if (!opens && s->tid == tid) {
			pid = s->pid;
		} else {
			mod_unlock(&t->lock);
			pid = pid_of_tid(tid);
			mod_lock(&t->lock);
			if (!t->active || t->full)
				goto out;
			s = tid_find(t, tid);
			s->tid = tid;
			s->pid = pid;
		}
	}
	r.pid = pid;
	record_append(t, &r, name, n1, path2 ? name2 : NULL, n2);
out:
	mod_unlock(&t->lock);
}
