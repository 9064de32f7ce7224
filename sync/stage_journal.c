/*
 * stage_journal.c — the journal of each staged file, the durability
 * setting's file, and crash recovery (the rules are in stage.h).
 *
 * Journal text, one field per line, every value written as ':' followed by
 * the value with bytes <= 0x20, '%' and 0x7f as %XX (so "" is ":"):
 *   facetfs-stage 1
 *   state dirty|commit
 *   size N
 *   bucket :B
 *   key :K
 *   ctype :T            (optional)
 *   upload :ID          (optional: a multipart upload that exists, streamed
 *                        while "dirty" or begun at "commit")
 *   ubucket :B          (optional: the upload's bucket and key when they
 *   ukey :K              are not bucket/key, after a rename)
 *   intent NS :B :K     (optional: from NS, ns since the epoch on this
 *                        machine's clock, a multipart upload of B/K may
 *                        exist whose id is not here; stage_int.h)
 *   meta :NAME :VALUE   (zero or more)
 */
#include "sync/stage_int.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/s3.h"

#define JNL_MAX (1u << 20)   /* a journal is small: metadata is < 2 KiB in S3 */

static void put_escaped(FILE *fp, const char *s)
{
	fputc(':', fp);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (*p <= 0x20 || *p == '%' || *p == 0x7f)
			fprintf(fp, "%%%02X", *p);
		else
			fputc(*p, fp);
	}
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Decodes the token at *p (up to a space or the end) into a new string. */
static char *take_escaped(char **p)
{
	char *s = *p;
	if (*s != ':')
		return NULL;
	s++;
	char *end = strchr(s, ' ');
	size_t n = end ? (size_t)(end - s) : strlen(s);
	char *out = malloc(n + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%') {
			int h = i + 2 < n ? hexval(s[i + 1]) : -1;
			int l = h >= 0 ? hexval(s[i + 2]) : -1;
			if (h < 0 || l < 0 || (h == 0 && l == 0)) {
				free(out);
				return NULL;
			}
			*o++ = (char)(h * 16 + l);
			i += 2;
		} else {
			*o++ = s[i];
		}
	}
	*o = '\0';
	*p = end ? end + 1 : s + n;
	return out;
}

void stage_name(uint64_t id, const char *ext, char out[32])
{
	snprintf(out, 32, "%016" PRIx64 "%s", id, ext);
}

/* Put the written tmp in place of name, atomically. A rename onto an
 * existing file makes ext4 (auto_da_alloc) start writing the new file out,
 * and the journal's unlink after the PUT then waits for that write: 0.3-0.5
 * ms per small file here (2026-11-25). Exchanging the two names does not,
 * so a journal that exists is exchanged with tmp (which then holds the old
 * text: removed; a crash before that leaves a .jnl.tmp, which recovery
 * removes), and a first journal (or one on a file system without
 * RENAME_EXCHANGE) is renamed. */
static int jnl_install(struct stage *st, const char *tmp, const char *name,
		       bool exists)
{
	if (exists &&
	    renameat2(st->dir_fd, tmp, st->dir_fd, name, RENAME_EXCHANGE) == 0) {
		if (unlinkat(st->dir_fd, tmp, 0) != 0)
			log_warn("stage: cannot remove %s/%s: %s", st->dir, tmp,
				 strerror(errno));
		return 0;
	}
	if (exists && errno != ENOENT && errno != EINVAL && errno != ENOSYS)
		return -errno;
	return renameat(st->dir_fd, tmp, st->dir_fd, name) == 0 ? 0 : -errno;
}

int stage_jnl_write(struct stage *st, uint64_t id, const struct stage_jnl *j,
		    bool exists)
{
	char *text = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&text, &len);
	if (!fp)
		return -ENOMEM;
	fprintf(fp, "facetfs-stage 1\nstate %s\nsize %" PRIu64 "\nbucket ",
		j->state == STAGE_JS_COMMIT ? "commit" : "dirty", j->size);
	put_escaped(fp, j->bucket);
	fputs("\nkey ", fp);
	put_escaped(fp, j->key);
	if (j->ctype) {
		fputs("\nctype ", fp);
		put_escaped(fp, j->ctype);
	}
	if (j->upload_id) {
		fputs("\nupload ", fp);
		put_escaped(fp, j->upload_id);
		if (j->upload_bucket && strcmp(j->upload_bucket, j->bucket)) {
			fputs("\nubucket ", fp);
			put_escaped(fp, j->upload_bucket);
		}
		if (j->upload_key && strcmp(j->upload_key, j->key)) {
			fputs("\nukey ", fp);
			put_escaped(fp, j->upload_key);
		}
	}
	if (j->intent.ns > 0) {
		fprintf(fp, "\nintent %" PRId64 " ", j->intent.ns);
		put_escaped(fp, j->intent.bucket);
		fputc(' ', fp);
		put_escaped(fp, j->intent.key);
	}
	for (size_t i = 0; i < j->n_meta; i++) {
		fputs("\nmeta ", fp);
		put_escaped(fp, j->meta[i].name);
		fputc(' ', fp);
		put_escaped(fp, j->meta[i].value);
	}
	fputc('\n', fp);
	if (fclose(fp) != 0) {
		free(text);
		return -ENOMEM;
	}

	char tmp[32], name[32];
	stage_name(id, ".jnl.tmp", tmp);
	stage_name(id, ".jnl", name);
	int err = 0;
	int fd = stage_create_at(st, tmp, O_WRONLY | O_TRUNC);
	if (fd < 0) {
		err = fd;
		fd = -1;
		goto out;
	}
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, text + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : -EIO;
			goto out;
		}
		off += (size_t)n;
	}
	err = stage_sync(st, fd, false);
	if (!err)
		err = jnl_install(st, tmp, name, exists);
	if (!err)
		err = stage_sync(st, st->dir_fd, false);
out:
	if (fd >= 0)
		close(fd);
	if (err) {
		unlinkat(st->dir_fd, tmp, 0);
		log_error("stage: journal %s/%s for %s/%s: %s", st->dir, name,
			  j->bucket, j->key, strerror(-err));
	}
	free(text);
	return err;
}

void stage_jnl_release(struct stage_jnl *j)
{
	free(j->bucket);
	free(j->key);
	free(j->ctype);
	free(j->upload_id);
	free(j->upload_bucket);
	free(j->upload_key);
	free(j->intent.bucket);
	free(j->intent.key);
	obj_kv_free(j->meta, j->n_meta);
	memset(j, 0, sizeof *j);
}

static int jnl_parse_line(char *line, struct stage_jnl *j)
{
	char *sp = strchr(line, ' ');
	if (!sp)
		return -EINVAL;
	*sp = '\0';
	char *v = sp + 1;
	if (strcmp(line, "facetfs-stage") == 0)
		return strcmp(v, "1") == 0 ? 0 : -EINVAL;
	if (strcmp(line, "state") == 0) {
		if (strcmp(v, "dirty") == 0)
			j->state = STAGE_JS_DIRTY;
		else if (strcmp(v, "commit") == 0)
			j->state = STAGE_JS_COMMIT;
		else
			return -EINVAL;
		return 0;
	}
	if (strcmp(line, "size") == 0) {
		char *end;
		errno = 0;
		j->size = strtoull(v, &end, 10);
		return errno || *end || end == v ? -EINVAL : 0;
	}
	char **dst = strcmp(line, "bucket") == 0 ? &j->bucket :
		     strcmp(line, "key") == 0 ? &j->key :
		     strcmp(line, "ctype") == 0 ? &j->ctype :
		     strcmp(line, "upload") == 0 ? &j->upload_id :
		     strcmp(line, "ubucket") == 0 ? &j->upload_bucket :
		     strcmp(line, "ukey") == 0 ? &j->upload_key : NULL;
	if (dst) {
		if (*dst)
			return -EINVAL;
		*dst = take_escaped(&v);
		return *dst && !*v ? 0 : -EINVAL;
	}
	if (strcmp(line, "intent") == 0) {
		char *end;
		errno = 0;
		long long ns = strtoll(v, &end, 10);
		if (errno || end == v || *end != ' ' || ns <= 0 || j->intent.ns)
			return -EINVAL;
		v = end + 1;
		j->intent.ns = ns;
		j->intent.bucket = take_escaped(&v);
		j->intent.key = j->intent.bucket ? take_escaped(&v) : NULL;
		return j->intent.key && !*v ? 0 : -EINVAL;
	}
	if (strcmp(line, "meta") == 0) {
		char *n = take_escaped(&v);
		char *val = n ? take_escaped(&v) : NULL;
		int err = n && val && !*v ? obj_kv_add(&j->meta, &j->n_meta, n, val)
					  : -EINVAL;
		free(n);
		free(val);
		return err;
	}
	return -EINVAL;
}

int stage_jnl_read(struct stage *st, uint64_t id, struct stage_jnl *out)
{
	memset(out, 0, sizeof *out);
	char name[32];
	stage_name(id, ".jnl", name);
	int fd = openat(st->dir_fd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char *buf = malloc(JNL_MAX + 1);
	size_t len = 0;
	int err = buf ? 0 : -ENOMEM;
	while (!err && len < JNL_MAX) {
		ssize_t n = read(fd, buf + len, JNL_MAX - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			err = -errno;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (err)
		goto out;
	buf[len] = '\0';
	if (len == 0 || len == JNL_MAX || buf[len - 1] != '\n' ||
	    strlen(buf) != len || strncmp(buf, "facetfs-stage 1\n", 16) != 0) {
		err = -EINVAL;
		goto out;
	}
	for (char *line = buf, *nl; !err && (nl = strchr(line, '\n')); line = nl + 1) {
		*nl = '\0';
		err = jnl_parse_line(line, out);
	}
	if (!err && (!out->bucket || !out->key || out->state == STAGE_JS_NONE))
		err = -EINVAL;
out:
	free(buf);
	if (err)
		stage_jnl_release(out);
	return err;
}

int stage_jnl_remove(struct stage *st, uint64_t id)
{
	char name[32];
	stage_name(id, ".jnl", name);
	if (unlinkat(st->dir_fd, name, 0) != 0 && errno != ENOENT)
		return -errno;
	return stage_sync(st, st->dir_fd, false);
}

int stage_sync(struct stage *st, int fd, bool data)
{
	if (st->durability == STAGE_DURABLE_PROCESS)
		return 0;
	int err = (data ? fdatasync(fd) : fsync(fd)) == 0 ? 0 : -errno;
	pthread_mutex_lock(&st->lock);
	st->cnt.syncs++;
	pthread_mutex_unlock(&st->lock);
	return err;
}

/* ---- the durability file ---------------------------------------------- */

#define DURABILITY_FILE "durability"

/* This boot's id ("" if the kernel does not say). */
static void boot_id(char out[64])
{
	out[0] = '\0';
	FILE *fp = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (!fp)
		return;
	if (!fgets(out, 64, fp))
		out[0] = '\0';
	fclose(fp);
	out[strcspn(out, "\n")] = '\0';
}

/* "facetfs-stage-durability 1\nmode power|process\nboot ID\n", written
 * durably whatever the setting (once per start). */
static int durability_write(struct stage *st, const char *boot)
{
	char text[160];
	int len = snprintf(text, sizeof text,
			   "facetfs-stage-durability 1\nmode %s\nboot %s\n",
			   st->durability == STAGE_DURABLE_PROCESS ? "process" : "power",
			   boot);
	int err = 0;
	int fd = openat(st->dir_fd, DURABILITY_FILE ".tmp",
			O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, text, (size_t)len) != len)
		err = -EIO;
	if (!err && fsync(fd) != 0)
		err = -errno;
	close(fd);
	if (!err && renameat(st->dir_fd, DURABILITY_FILE ".tmp", st->dir_fd,
			     DURABILITY_FILE) != 0)
		err = -errno;
	if (!err && fsync(st->dir_fd) != 0)
		err = -errno;
	if (err)
		log_error("stage: cannot write %s/%s: %s", st->dir, DURABILITY_FILE,
			  strerror(-err));
	return err;
}

int stage_durability_open(struct stage *st)
{
	char boot[64], text[160] = "", mode[16] = "", was[64] = "";
	boot_id(boot);
	int fd = openat(st->dir_fd, DURABILITY_FILE, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, text, sizeof text - 1);
		text[n > 0 ? n : 0] = '\0';
		close(fd);
		if (sscanf(text, "facetfs-stage-durability 1\nmode %15s\nboot %63s",
			   mode, was) < 1)
			mode[0] = '\0';
	}
	/* No file: a first start, or a run before the setting (POWER). */
	bool was_process = strcmp(mode, "process") == 0;
	if (fd >= 0 && !was_process && strcmp(mode, "power") != 0) {
		log_warn("stage: %s/%s is malformed: trusting the staged files as "
			 "written with fsync", st->dir, DURABILITY_FILE);
	}
	if (was_process && (!*boot || strcmp(boot, was) != 0)) {
		/* Written without fsync, and the machine restarted since: what
		 * is on disk may be stale or torn. Keep the file until the
		 * recovery that moves it all is done (stage_recover). */
		st->distrust = true;
		log_warn("stage: the staged files in %s were written with "
			 "cache.durability \"process\" before the machine restarted: "
			 "recovery moves them all to %s, uploading nothing", st->dir,
			 st->rec_dir);
		return 0;
	}
	/* From PROCESS to POWER on the same boot: make the earlier run's
	 * files durable before saying they are. */
	if (was_process && st->durability == STAGE_DURABLE_POWER &&
	    syncfs(st->dir_fd) != 0)
		return -errno;
	if (was_process && st->durability == STAGE_DURABLE_PROCESS &&
	    strcmp(boot, was) == 0)
		return 0;    /* the file already says so */
	return durability_write(st, boot);
}

/* ---- recovery ------------------------------------------------------- */

/* Journaled file id (bytes long) left the staging area (uploaded, moved
 * or dropped). */
static void pending_done(struct stage *st, uint64_t id, uint64_t bytes)
{
	pthread_mutex_lock(&st->lock);
	if (st->cnt.pending_files)
		st->cnt.pending_files--;
	st->pending_bytes -= bytes < st->pending_bytes ? bytes : st->pending_bytes;
	pthread_mutex_unlock(&st->lock);
	stage_kept_forget(st, id);
}

struct rec_entry {
	uint64_t id;
	bool data, jnl, tmp;
	bool stale;                  /* ID.stale: a newer version was made */
};

static int entries_add(struct rec_entry **arr, size_t *n, size_t *cap,
		       uint64_t id, const char *ext)
{
	size_t i;
	for (i = 0; i < *n && (*arr)[i].id != id; i++)
		;
	if (i == *n) {
		if (*n == *cap) {
			size_t nc = *cap ? *cap * 2 : 16;
			struct rec_entry *a = realloc(*arr, nc * sizeof *a);
			if (!a)
				return -ENOMEM;
			*arr = a;
			*cap = nc;
		}
		(*arr)[i] = (struct rec_entry){ .id = id };
		(*n)++;
	}
	if (strcmp(ext, ".data") == 0)
		(*arr)[i].data = true;
	else if (strcmp(ext, ".jnl") == 0)
		(*arr)[i].jnl = true;
	else if (strcmp(ext, ".stale") == 0)
		(*arr)[i].stale = true;
	else
		(*arr)[i].tmp = true;
	return 0;
}

/* The staged files on disk, by id. */
static int entries_scan(struct stage *st, struct rec_entry **arr, size_t *n)
{
	size_t cap = 0;
	*arr = NULL;
	*n = 0;
	DIR *d;
	int err = stage_dir_open(st, &d);
	if (err)
		return err;
	struct dirent *de;
	while (!err && (de = readdir(d))) {
		char *end;
		if (strlen(de->d_name) < 17 || !isxdigit((unsigned char)de->d_name[0]))
			continue;
		uint64_t id = strtoull(de->d_name, &end, 16);
		if (end != de->d_name + 16)
			continue;
		if (strcmp(end, ".data") && strcmp(end, ".jnl") &&
		    strcmp(end, ".jnl.tmp") && strcmp(end, ".stale"))
			continue;
		err = entries_add(arr, n, &cap, id, end);
	}
	closedir(d);
	return err;
}

static bool id_open(struct stage *st, uint64_t id)
{
	bool found = false;
	pthread_mutex_lock(&st->lock);
	for (struct stage_file *f = st->open; f && !found; f = f->next)
		found = f->id == id;
	pthread_mutex_unlock(&st->lock);
	return found;
}

/* "bucket%2Fkey" with '/', '%' and control bytes escaped, at most ~200
 * bytes (longer ones are cut and end in ~ID), then "@TIME". */
static void recovered_name(const struct stage_jnl *j, uint64_t id, time_t t,
			   char *out, size_t outlen)
{
	char base[256];
	size_t n = 0;
	if (!j || !j->bucket) {
		n = (size_t)snprintf(base, sizeof base, "unknown-%016" PRIx64, id);
	} else {
		const char *parts[2] = { j->bucket, j->key };
		for (int k = 0; k < 2; k++) {
			if (k == 1)
				n += (size_t)snprintf(base + n, sizeof base - n, "%%2F");
			for (const unsigned char *p = (const unsigned char *)parts[k];
			     *p && n < 200; p++) {
				if (*p < 0x20 || *p == '/' || *p == '%' || *p == 0x7f)
					n += (size_t)snprintf(base + n, sizeof base - n,
							      "%%%02X", *p);
				else
					base[n++] = (char)*p;
			}
			base[n] = '\0';
		}
		if (n >= 200)
			n = (size_t)snprintf(base + 180, sizeof base - 180,
					     "~%016" PRIx64, id) + 180;
	}
	struct tm tm;
	gmtime_r(&t, &tm);
	char ts[32];
	strftime(ts, sizeof ts, "%Y%m%dT%H%M%SZ", &tm);
	snprintf(out, outlen, "%s@%s", base, ts);
}

/* journaled: the file had a journal (counted in pending_files). */
static int move_recovered(struct stage *st, uint64_t id, bool journaled,
			  const struct stage_jnl *j, const struct stat *sb,
			  struct stage_recovery_report *rep)
{
	char data[32], jnl[32], name[300], dst[320];
	stage_name(id, ".data", data);
	stage_name(id, ".jnl", jnl);
	recovered_name(j, id, sb->st_mtim.tv_sec, name, sizeof name);
	int err = 0;
	for (int i = 0; i < 1000; i++) {
		if (i == 0)
			snprintf(dst, sizeof dst, "%s", name);
		else
			snprintf(dst, sizeof dst, "%s.%d", name, i);
		err = renameat2(st->dir_fd, data, st->rec_fd, dst, RENAME_NOREPLACE)
			? -errno : 0;
		if (err != -EEXIST)
			break;
	}
	if (err) {
		log_error("stage: cannot move %s/%s to %s/: %s", st->dir, data,
			  st->rec_dir, strerror(-err));
		return err;
	}
	char jdst[340];
	snprintf(jdst, sizeof jdst, "%s.journal", dst);
	if (journaled &&
	    renameat2(st->dir_fd, jnl, st->rec_fd, jdst, RENAME_NOREPLACE) != 0)
		unlinkat(st->dir_fd, jnl, 0);
	fsync(st->rec_fd);
	fsync(st->dir_fd);
	log_warn("stage: %s data of %s/%s (%" PRIu64 " bytes) moved to %s/%s",
		 st->distrust ? "untrusted (no fsync, then a reboot)" :
		 "uncommitted", j && j->bucket ? j->bucket : "?",
		 j && j->key ? j->key : "?", (uint64_t)sb->st_size, st->rec_dir, dst);
	stage_uncharge(st, (uint64_t)sb->st_size);
	pthread_mutex_lock(&st->lock);
	st->cnt.recovered_files++;
	pthread_mutex_unlock(&st->lock);
	if (journaled)
		pending_done(st, id, (uint64_t)sb->st_size);
	rep->recovered++;
	rep->recovered_bytes += (uint64_t)sb->st_size;
	return 0;
}

int stage_recover_fd(struct stage *st, uint64_t id, const char *bucket,
		     const char *key, int fd, uint64_t size)
{
	const struct stage_jnl j = { .bucket = (char *)bucket, .key = (char *)key };
	char name[300], dst[320];
	recovered_name(&j, id, time(NULL), name, sizeof name);
	int out = -1, err = 0;
	for (int i = 0; i < 1000 && out < 0; i++) {
		if (i == 0)
			snprintf(dst, sizeof dst, "%s", name);
		else
			snprintf(dst, sizeof dst, "%s.%d", name, i);
		out = openat(st->rec_fd, dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			     0600);
		/* recovered/ gone with the directory, not made again yet */
		if (out < 0 && errno == ENOENT && i == 0 && stage_dir_renew(st) == 0)
			out = openat(st->rec_fd, dst,
				     O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (out < 0 && errno != EEXIST)
			break;
	}
	size_t cap = 1u << 20;
	char *buf = out >= 0 ? malloc(cap) : NULL;
	if (out < 0)
		err = -errno;
	else if (!buf)
		err = -ENOMEM;
	for (uint64_t off = 0; !err && off < size;) {
		size_t want = size - off < cap ? (size_t)(size - off) : cap;
		ssize_t n = pread(fd, buf, want, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : -EIO;
			break;
		}
		for (ssize_t w = 0; !err && w < n;) {
			ssize_t k = pwrite(out, buf + w, (size_t)(n - w), (off_t)(off + (uint64_t)w));
			if (k < 0 && errno != EINTR)
				err = -errno;
			else if (k > 0)
				w += k;
		}
		off += (uint64_t)n;
	}
	free(buf);
	if (!err)
		err = stage_sync(st, out, true);
	if (out >= 0)
		close(out);
	if (err) {
		if (out >= 0)
			unlinkat(st->rec_fd, dst, 0);
		log_error("stage: %s/%s (%" PRIu64 " bytes, not in S3): its staging "
			  "file was removed with the directory and cannot be saved to "
			  "%s: %s; the data are lost", bucket, key, size, st->rec_dir,
			  strerror(-err));
		return err;
	}
	stage_sync(st, st->rec_fd, false);
	log_warn("stage: %s/%s (%" PRIu64 " bytes, not in S3): its staging file was "
		 "removed with the directory; saved to %s/%s", bucket, key, size,
		 st->rec_dir, dst);
	pthread_mutex_lock(&st->lock);
	st->cnt.recovered_files++;
	pthread_mutex_unlock(&st->lock);
	return 0;
}

void stage_jnl_intent_drop(struct stage *st, uint64_t id)
{
	struct stage_jnl j;
	if (stage_jnl_read(st, id, &j) != 0)
		return;
	if (j.intent.ns) {
		int64_t ns = j.intent.ns;
		j.intent.ns = 0;             /* not written; freed by the release */
		if (stage_jnl_write(st, id, &j, true) != 0)
			log_warn("stage: %s/%s: the journal still names a creation the "
				 "store refused (intent %" PRId64 "); the next start lists "
				 "the key's uploads", j.bucket, j.key, ns);
	}
	stage_jnl_release(&j);
}

int stage_jnl_creating(void *ctx)
{
	struct jnl_started *js = ctx;
	struct stage_jnl *j = js->j;
	struct stage_intent *in = js->f ? &js->f->intent : &js->own;
	if (js->f)
		pthread_mutex_lock(&js->f->lock);
	int err = stage_intent_set(js->st, in, j->bucket, j->key, &js->fresh);
	if (!err) {
		j->intent = *in;
		err = stage_jnl_write(js->st, js->id, j, true);
		j->intent = (struct stage_intent){ 0 };
	}
	if (js->f)
		pthread_mutex_unlock(&js->f->lock);
	if (err)
		log_error("stage: cannot journal the upload of %s/%s about to be "
			  "created: %s", j->bucket, j->key, strerror(-err));
	return err ? -EIO : 0;
}

int stage_jnl_started(void *ctx, const char *upload_id)
{
	struct jnl_started *js = ctx;
	struct stage_intent *in = js->f ? &js->f->intent : &js->own;
	if (js->f)
		pthread_mutex_lock(&js->f->lock);
	/* An older intent (a creation that failed) stays journaled. */
	if (!js->fresh)
		js->j->intent = *in;
	js->j->upload_id = (char *)upload_id;
	int err = stage_jnl_write(js->st, js->id, js->j, true);
	js->j->upload_id = NULL;
	js->j->intent = (struct stage_intent){ 0 };
	if (!err && js->fresh)
		stage_intent_clear(in);
	if (js->f)
		pthread_mutex_unlock(&js->f->lock);
	if (err)
		log_error("stage: cannot journal upload %s: %s", upload_id,
			  strerror(-err));
	return err ? -EIO : 0;
}

void stage_jnl_abandoned(void *ctx, const char *upload_id)
{
	struct jnl_started *js = ctx;
	struct stage_file *f = js->f;
	if (!f)
		return;
	pthread_mutex_lock(&f->lock);
	struct stage_stream *sm = &f->sm;
	if (!sm->id && !sm->n_parts) {
		sm->id = strdup(upload_id);
		sm->bucket = strdup(js->j->bucket);
		sm->key = strdup(js->j->key);
		if (!sm->id || !sm->bucket || !sm->key) {
			free(sm->id);
			free(sm->bucket);
			free(sm->key);
			sm->id = sm->bucket = sm->key = NULL;
			log_error("stage: out of memory: upload %s of %s/%s will be "
				  "aborted only at the next start", upload_id,
				  js->j->bucket, js->j->key);
		}
		sm->broken = true;
	}
	pthread_mutex_unlock(&f->lock);
}

void stage_jnl_hooks_done(struct jnl_started *js)
{
	stage_intent_clear(&js->own);
}

/* Abort the multipart upload journal j names; 0 or its error (logged). */
static int abort_journaled(struct stage *st, const struct stage_jnl *j,
			   struct stage_recovery_report *rep)
{
	const char *b = j->upload_bucket ? j->upload_bucket : j->bucket;
	const char *k = j->upload_key ? j->upload_key : j->key;
	int err = s3_mpu_abort(st->s3, b, k, j->upload_id);
	if (err) {
		log_warn("stage: aborting the interrupted upload %s of %s/%s: %s; "
			 "the file stays staged until it can be", j->upload_id, b, k,
			 strerror(-err));
		return err;
	}
	log_info("stage: interrupted upload %s of %s/%s aborted", j->upload_id,
		 b, k);
	rep->aborted++;
	return 0;
}

static int reupload(struct stage *st, uint64_t id, const struct stage_jnl *j,
		    const struct stat *sb, struct stage_recovery_report *rep)
{
	char data[32], etag[72];
	stage_name(id, ".data", data);
	int fd = openat(st->dir_fd, data, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* A multipart upload the crash interrupted: drop its parts first (if
	 * that fails, keep the file: its id is only in this journal). */
	if (j->upload_id && abort_journaled(st, j, rep) != 0) {
		close(fd);
		rep->reupload_failed++;
		stage_kept_add(st, id, j->bucket, j->key, false);
		return 0;
	}
	/* The intent, if any, was dealt with (stage_orphans_abort): this
	 * upload journals its own. */
	struct stage_jnl jc = *j;
	jc.upload_id = jc.upload_bucket = jc.upload_key = NULL;
	jc.intent = (struct stage_intent){ 0 };
	struct jnl_started js = { .st = st, .id = id, .j = &jc };
	struct upload_hooks hooks = { .creating = stage_jnl_creating,
				      .started = stage_jnl_started, .ctx = &js };
	int err = upload_file(st->s3, &st->up, j->bucket, j->key, fd, j->size,
			      j->meta, j->n_meta, j->ctype, &hooks, etag);
	stage_jnl_hooks_done(&js);
	close(fd);
	pthread_mutex_lock(&st->lock);
	if (err) {
		st->cnt.upload_errors++;
	} else {
		st->cnt.uploads++;
		st->cnt.upload_bytes += j->size;
		st->cnt.reuploaded_files++;
	}
	pthread_mutex_unlock(&st->lock);
	if (err) {
		log_error("stage: re-upload of %s/%s (%" PRIu64 " bytes, commit had "
			  "begun before a crash) failed: %s; kept in %s/%s",
			  j->bucket, j->key, j->size, strerror(-err), st->dir, data);
		rep->reupload_failed++;
		stage_kept_add(st, id, j->bucket, j->key, false);
		return 0;
	}
	log_info("stage: %s/%s (%" PRIu64 " bytes, commit had begun before a "
		 "crash) uploaded, ETag %s", j->bucket, j->key, j->size, etag);
	err = stage_jnl_remove(st, id);
	if (!err && unlinkat(st->dir_fd, data, 0) != 0)
		err = -errno;
	if (!err)
		stage_uncharge(st, (uint64_t)sb->st_size);
	pending_done(st, id, (uint64_t)sb->st_size);
	rep->reuploaded++;
	return err;
}

static int recover_one(struct stage *st, const struct rec_entry *e,
		       struct stage_recovery_report *rep);

/* recover_one, then the marker goes once the journal has (uploaded,
 * moved or dropped). */
static int recover_entry(struct stage *st, const struct rec_entry *e,
			 struct stage_recovery_report *rep)
{
	if (!e->data && !e->jnl && !e->tmp) {   /* a marker alone */
		stage_kept_unmark(st, e->id);
		return 0;
	}
	int err = recover_one(st, e, rep);
	char jnl[32];
	stage_name(e->id, ".jnl", jnl);
	if (e->stale && faccessat(st->dir_fd, jnl, F_OK, 0) != 0 && errno == ENOENT)
		stage_kept_unmark(st, e->id);
	return err;
}

static int recover_one(struct stage *st, const struct rec_entry *e,
		       struct stage_recovery_report *rep)
{
	char data[32], jnl[32], tmp[32];
	stage_name(e->id, ".data", data);
	stage_name(e->id, ".jnl", jnl);
	stage_name(e->id, ".jnl.tmp", tmp);
	if (e->tmp)
		unlinkat(st->dir_fd, tmp, 0);
	struct stat sb;
	if (e->data && fstatat(st->dir_fd, data, &sb, 0) != 0)
		return -errno;
	if (!e->jnl) {
		if (e->data && st->distrust)
			return move_recovered(st, e->id, false, NULL, &sb, rep);
		if (e->data) {
			/* Never journaled (no write accepted) or committed. */
			if (unlinkat(st->dir_fd, data, 0) != 0)
				return -errno;
			stage_uncharge(st, (uint64_t)sb.st_size);
		}
		rep->deleted++;
		return 0;
	}
	struct stage_jnl j;
	int err = stage_jnl_read(st, e->id, &j);
	if (err && err != -EINVAL)
		return err;
	/* A creation whose id the crash kept from the journal: list and
	 * abort first; the file stays staged while that fails. */
	if (!err && j.intent.ns && stage_orphans_abort(st, &j, rep) != 0 &&
	    !st->distrust) {
		rep->abort_failed++;
		if (j.state == STAGE_JS_COMMIT)
			stage_kept_add(st, e->id, j.bucket, j.key, false);
		stage_jnl_release(&j);
		return 0;
	}
	if (!e->data) {
		log_warn("stage: journal %s/%s without data (%s/%s); removed",
			 st->dir, jnl, err ? "?" : j.bucket, err ? "?" : j.key);
		stage_jnl_release(&j);
		pending_done(st, e->id, 0);
		rep->deleted++;
		return stage_jnl_remove(st, e->id);
	}
	if (err) {
		log_error("stage: journal %s/%s is malformed", st->dir, jnl);
		return move_recovered(st, e->id, true, NULL, &sb, rep);
	}
	/* A newer version of the key was made after this commit failed
	 * (stage_kept.c): the data is not uploaded over it. */
	if (e->stale && j.state == STAGE_JS_COMMIT) {
		log_info("stage: %s/%s: a newer version was made after this staged "
			 "copy's commit failed; not uploaded", j.bucket, j.key);
		j.state = STAGE_JS_DIRTY;
	}
	if (st->distrust) {
		/* Nothing of a PROCESS run survives a reboot as trusted: the
		 * data moves even when the abort fails (logged), since the next
		 * run would trust this journal. */
		if (j.upload_id && abort_journaled(st, &j, rep) != 0)
			rep->abort_failed++;
		err = move_recovered(st, e->id, true, &j, &sb, rep);
	} else if (j.state == STAGE_JS_COMMIT && j.size == (uint64_t)sb.st_size)
		err = reupload(st, e->id, &j, &sb, rep);
	else if (j.upload_id && abort_journaled(st, &j, rep) != 0)
		rep->abort_failed++;     /* kept: a later recovery aborts it */
	else
		err = move_recovered(st, e->id, true, &j, &sb, rep);
	stage_jnl_release(&j);
	return err;
}

int stage_recover(struct stage *st, struct stage_recovery_report *rep)
{
	struct stage_recovery_report dummy;
	if (!rep)
		rep = &dummy;
	memset(rep, 0, sizeof *rep);
	/* Failures are logged, the records kept: not this recovery's error. */
	(void)stage_orphans_recover(st, rep);
	struct rec_entry *e;
	size_t n;
	int err = entries_scan(st, &e, &n);
	if (err) {
		log_error("stage: cannot list %s: %s", st->dir, strerror(-err));
		return err;
	}
	for (size_t i = 0; i < n; i++) {
		if (id_open(st, e[i].id))
			continue;
		int r = recover_entry(st, &e[i], rep);
		if (r && !err) {
			log_error("stage: recovery of %s/%016" PRIx64 ": %s", st->dir,
				  e[i].id, strerror(-r));
			err = r;
		}
	}
	free(e);
	if (n)
		log_info("stage: recovery of %s: %u re-uploaded, %u re-upload "
			 "failed, %u moved to %s, %u deleted, %u uploads aborted "
			 "(%u kept: abort failed), %u found by listing aborted",
			 st->dir, rep->reuploaded, rep->reupload_failed,
			 rep->recovered, st->rec_dir, rep->deleted, rep->aborted,
			 rep->abort_failed, rep->orphans_aborted);
	/* Everything untrusted has moved: this run's setting and boot may
	 * now be written (until then a crash repeats the distrust). */
	if (!err && st->distrust) {
		char boot[64];
		boot_id(boot);
		err = durability_write(st, boot);
		if (!err)
			st->distrust = false;
	}
	return err;
}
