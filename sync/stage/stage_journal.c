/*
 * stage_journal.c — the journal of each staged file: its text, written
 * and read, and the protocol by which the journal of an open file is
 * written with no lock of the file held (stage_int.h, "The journal").
 * The states and what recovery makes of them are in stage.h and
 * docs/design.md ("A staged file's life"). Calls only stage_dir.c.
 *
 * Journal text, one field per line, every value written as ':' followed by
 * the value with bytes <= 0x20, '%' and 0x7f as %XX (so "" is ":"):
 *   facetfs-stage 3
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
 *   base :ETAG          (optional: the version of the key the file is
 *                        based on, ":" for none (a new key); absent:
 *                        not known, as in every version-2 text)
 *   meta :NAME :VALUE   (zero or more)
 *   end LEN SHA256      (LEN: the bytes before this line; SHA256: their
 *                        SHA-256, 64 hex digits)
 * Bytes after the "end" line are ignored: a longer text the file held
 * before, not yet cut off (see below).
 *
 * How a journal reaches the disk (stage_jnl_put), and why a torn one is
 * safe. A file's first journal is made under its own name (O_CREAT): it
 * costs one inode, as a temporary would, and a crash during it leaves a
 * torn text where there was no journal. A later journal over a plain
 * "dirty" one (no upload, no intent: f->jinplace) is written in place:
 * pwrite of the whole text at offset 0, ftruncate to its length, then
 * fdatasync (and the directory's fsync, when the name was never synced)
 * where the durability setting syncs. That is the common path (the first
 * write's "dirty", then a seal's or a commit's "commit") and it makes no
 * inode. A crash can tear it: any mix of the old and the new text, cut
 * anywhere, with zeros or the old tail past the new end. The "end" line
 * detects that: the first "end" line must sit at offset LEN and carry
 * the SHA-256 of the bytes before it, or the journal is torn
 * (stage_jnl_read: -EBADMSG).
 *   What a torn journal means: the write tearing it had not returned, so
 * the file is in the state the journal before it gave it, which was
 * plain "dirty" (or none: a first journal): recovery reads it as "dirty"
 * with no upload and no intent (none was in the old text, and the new
 * one's, if any, was not acted on: a creation is sent only once its
 * intent is on disk) and never uploads it: the data goes to recovered/.
 * Nothing of a torn text is trusted but as a name: bucket and key, when
 * their lines still parse, name the file in recovered/ (they may be the
 * old name, the new one, or in a rare tear across them a mix; the torn
 * text is kept beside it as NAME.journal); else it is unknown-ID.
 *   A journal that holds a promise ("commit": a seal returned, or a
 * failed commit will be retried; an upload id or an intent: an upload to
 * abort) is never overwritten in place: a tear would lose it. It is
 * replaced atomically, as version 1 always was: ID.jnl.tmp written and
 * synced, then exchanged with (or renamed onto) ID.jnl. Recovery and
 * released files write that way too (stage_jnl_write).
 *   A failed in-place write cuts the journal to nothing, which reads as
 * torn ("dirty", the state it had), so that a "commit" text whose write
 * the caller reports as failed is not left behind for recovery to act on
 * (only a device failing its syncs, then the power, could keep it).
 *   Versions. 3 is 2 with the "base" line; 2 is 1 with the "end" line.
 * Every version is read: a version-2 text is checked as a version-3 one
 * and names no base (a gateway before the line wrote it; recovery's
 * caller decides what an unknown base means), and version 1 (no "end"
 * line) was only ever written by rename, never torn: it is read as
 * before. A checked text that does not parse is malformed (-EINVAL), like
 * anything else unknown, and so is a "base" line in a version before 3.
 * A gateway that only knows version 2 reads a version-3 text as
 * malformed, so a downgrade moves pending files to recovered/ rather than
 * upload them without their base check.
 */
#include "sync/stage/stage_int.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "common/lock.h"
#include "common/log.h"

#define JNL_MAX (1u << 20)   /* a journal is small: metadata is < 2 KiB in S3 */
#define JNL_V1 "facetfs-stage 1\n"
#define JNL_V2 "facetfs-stage 2\n"
#define JNL_V3 "facetfs-stage 3\n"   /* what is written */

/* SHA-256 of n bytes at p as 64 hex digits; false if libcrypto failed. */
static bool jnl_sum(const char *p, size_t n, char hex[65])
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dl = 0;
	if (EVP_Digest(p, n, d, &dl, EVP_sha256(), NULL) != 1 || dl != 32)
		return false;
	for (unsigned i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	return true;
}

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

/* Put the written tmp in place of name, atomically. A rename onto an
 * existing file makes ext4 (auto_da_alloc) start writing the new file out,
 * and the journal's unlink after the PUT then waits for that write: 0.3-0.5
 * ms per small file here (2026-11-25). Exchanging the two names does not,
 * so the journal is exchanged with tmp (which then holds the old text:
 * removed; a crash before that leaves a .jnl.tmp, which recovery
 * removes); with no journal there (or on a file system without
 * RENAME_EXCHANGE) tmp is renamed. */
static int jnl_install(struct stage *st, const char *tmp, const char *name)
{
	if (renameat2(st->dir_fd, tmp, st->dir_fd, name, RENAME_EXCHANGE) == 0) {
		int err = stage_remove_at(st, tmp);
		if (err)
			log_warn("stage: cannot remove %s/%s: %s", st->dir, tmp,
				 strerror(-err));
		return 0;
	}
	if (errno != ENOENT && errno != EINVAL && errno != ENOSYS)
		return -errno;
	return renameat(st->dir_fd, tmp, st->dir_fd, name) == 0 ? 0 : -errno;
}

int stage_jnl_render(const struct stage_jnl *j, struct stage_jimg *img)
{
	img->text = NULL;
	img->len = 0;
	FILE *fp = open_memstream(&img->text, &img->len);
	if (!fp)
		return -ENOMEM;
	fprintf(fp, JNL_V3 "state %s\nsize %" PRIu64 "\nbucket ",
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
	if (j->base) {
		fputs("\nbase ", fp);
		put_escaped(fp, j->base);
	}
	for (size_t i = 0; i < j->n_meta; i++) {
		fputs("\nmeta ", fp);
		put_escaped(fp, j->meta[i].name);
		fputc(' ', fp);
		put_escaped(fp, j->meta[i].value);
	}
	fputc('\n', fp);
	/* The check of everything above (the stream's text so far). */
	char sum[65];
	bool ok = fflush(fp) == 0 && jnl_sum(img->text, img->len, sum);
	if (ok)
		fprintf(fp, "end %zu %s\n", img->len, sum);
	if (fclose(fp) != 0 || !ok) {
		free(img->text);
		img->text = NULL;
		return -ENOMEM;
	}
	/* What the log names if the write fails (cut: it is only a name). */
	snprintf(img->what, sizeof img->what, "%s/%s", j->bucket ? j->bucket : "?",
		 j->key ? j->key : "?");
	return 0;
}

void stage_jimg_release(struct stage_jimg *img)
{
	free(img->text);
	img->text = NULL;
	img->len = 0;
}

/* All of img at offset 0 of fd. 0 or -errno. */
static int jnl_pwrite(int fd, const struct stage_jimg *img)
{
	for (size_t off = 0; off < img->len;) {
		ssize_t n = pwrite(fd, img->text + off, img->len - off, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		off += (size_t)n;
	}
	return 0;
}

/* In place (see the top): the text over the old one, cut to its length,
 * synced if sync. -ENOENT when there is no journal to overwrite (the
 * directory was made again since): the caller creates it. On another
 * failure the journal is cut to nothing (read as torn). */
static int jnl_overwrite(struct stage *st, const char *name,
			 const struct stage_jimg *img, bool sync)
{
	int fd = openat(st->dir_fd, name, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int err = jnl_pwrite(fd, img);
	if (!err && ftruncate(fd, (off_t)img->len) != 0)
		err = -errno;
	if (!err && sync)
		err = stage_sync(st, fd, true);
	if (err && ftruncate(fd, 0) == 0 && sync)
		(void)stage_sync(st, fd, true);
	close(fd);
	return err;
}

/* The text into a new file `name`, synced if sync (its data only when
 * data_only); removed if it fails. */
static int jnl_write_new(struct stage *st, const char *name,
			 const struct stage_jimg *img, bool sync, bool data_only)
{
	int fd = stage_create_at(st, name, O_WRONLY | O_TRUNC);
	if (fd < 0)
		return fd;
	int err = jnl_pwrite(fd, img);
	if (!err && sync)
		err = stage_sync(st, fd, data_only);
	close(fd);
	if (err)
		unlinkat(st->dir_fd, name, 0);
	return err;
}

/* Atomically: ID.jnl.tmp written, synced, exchanged or renamed. */
static int jnl_replace(struct stage *st, const char *tmp, const char *name,
		       const struct stage_jimg *img, bool sync)
{
	int err = jnl_write_new(st, tmp, img, sync, false);
	if (!err && (err = jnl_install(st, tmp, name)) != 0)
		unlinkat(st->dir_fd, tmp, 0);
	return err;
}

int stage_jnl_put(struct stage *st, uint64_t id, const struct stage_jimg *img,
		  enum stage_jput how, bool sync, bool named)
{
	char tmp[32], name[32];
	stage_name(id, ".jnl.tmp", tmp);
	stage_name(id, ".jnl", name);
	int err = -ENOENT;
	if (how == STAGE_JPUT_REPLACE)
		err = jnl_replace(st, tmp, name, img, sync);
	else if (how == STAGE_JPUT_INPLACE)
		err = jnl_overwrite(st, name, img, sync);
	if (how != STAGE_JPUT_REPLACE && err == -ENOENT) {   /* none (or gone) */
		named = false;
		err = jnl_write_new(st, name, img, sync, true);   /* a first journal */
	}
	/* The name: new, or renamed, or never synced. */
	if (!err && sync && (how != STAGE_JPUT_INPLACE || !named))
		err = stage_sync(st, st->dir_fd, false);
	if (err)
		log_error("stage: journal %s/%s for %s: %s", st->dir, name, img->what,
			  strerror(-err));
	if (st->jnl_changed)
		st->jnl_changed(st->jnl_ctx);
	return err;
}

int stage_jnl_sync(struct stage *st, uint64_t id)
{
	if (st->durability == STAGE_DURABLE_PROCESS)
		return 0;
	char name[32];
	stage_name(id, ".jnl", name);
	int fd = openat(st->dir_fd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int err = stage_sync(st, fd, false);
	close(fd);
	if (!err)
		err = stage_sync(st, st->dir_fd, false);
	if (err)
		log_error("stage: sync of journal %s/%s: %s", st->dir, name,
			  strerror(-err));
	return err;
}

int stage_jnl_write(struct stage *st, uint64_t id, const struct stage_jnl *j,
		    bool exists)
{
	struct stage_jimg img;
	int err = stage_jnl_render(j, &img);
	if (!err)
		err = stage_jnl_put(st, id, &img,
				    exists ? STAGE_JPUT_REPLACE : STAGE_JPUT_CREATE,
				    true, false);
	stage_jimg_release(&img);
	return err;
}

/* ---- the journal of an open file --------------------------------------- */

void stage_jnl_own(struct stage_file *f)
{
	while (f->jbusy)
		pthread_cond_wait(&f->cond, &f->lock);
	f->jbusy = true;
}

void stage_jnl_disown(struct stage_file *f)
{
	f->jbusy = false;
	pthread_cond_broadcast(&f->cond);
}

int stage_jnl_file(struct stage_file *f, enum stage_jstate state, uint64_t size,
		   bool upload, struct stage_jnl *out)
{
	struct stage_jnl j = {
		.state = state, .size = size,
		.bucket = f->bucket, .key = f->key, .ctype = f->ctype,
		.meta = f->meta, .n_meta = f->n_meta, .intent = f->intent,
		.base = f->has_base ? f->base : NULL,
	};
	if (upload) {
		j.upload_id = f->sm.id;
		j.upload_bucket = f->sm.bucket;
		j.upload_key = f->sm.key;
	}
	int err = stage_jnl_put_file(f, &j);
	if (!err)
		f->js = state;
	if (out) {
		*out = j;
		out->intent = (struct stage_intent){ 0 };
	}
	return err;
}

int stage_jnl_put_file(struct stage_file *f, const struct stage_jnl *j)
{
	struct stage_jimg img;
	int err = stage_jnl_render(j, &img);
	if (err)
		return err;
	/* Over a plain "dirty" journal in place; over one holding a promise
	 * atomically (see the top). */
	enum stage_jput how = f->js == STAGE_JS_NONE ? STAGE_JPUT_CREATE :
			      f->jinplace ? STAGE_JPUT_INPLACE : STAGE_JPUT_REPLACE;
	bool sync = j->state != STAGE_JS_DIRTY || j->upload_id || j->intent.ns;
	bool named = f->jsynced;     /* a synced journal's name is synced */
	f->jsealed = false;          /* stage_file_seal sets it after its own */
	mod_unlock(&f->lock);
	err = stage_jnl_put(f->st, f->id, &img, how, sync, named);
	mod_lock(&f->lock);
	if (!err) {
		f->jsynced = sync;
		f->jinplace = j->state == STAGE_JS_DIRTY && !j->upload_id &&
			      !j->intent.ns;
	}
	stage_jimg_release(&img);
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
	free(j->base);
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
	if (strcmp(line, "facetfs-stage") == 0) {
		if (j->version || (strcmp(v, "1") && strcmp(v, "2") && strcmp(v, "3")))
			return -EINVAL;
		j->version = (unsigned)(v[0] - '0');
		return 0;
	}
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
		     strcmp(line, "ukey") == 0 ? &j->upload_key :
		     strcmp(line, "base") == 0 && j->version >= 3 ? &j->base : NULL;
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

/* The length of the text a version-2 journal's "end" line checks (buf
 * holds len bytes, NUL-terminated), or 0 if there is no such line, it is
 * not at its offset, or the sum differs: torn. */
static size_t jnl_checked(const char *buf, size_t len)
{
	const char *e = NULL;
	for (const char *p = buf; p < buf + len; ) {
		const char *nl = memchr(p, '\n', (size_t)(buf + len - p));
		if (!nl)
			return 0;
		if (strncmp(p, "end ", 4) == 0) {
			e = p;
			break;
		}
		p = nl + 1;
	}
	if (!e)
		return 0;
	size_t at = (size_t)(e - buf);
	char want[96], sum[65];
	if (memchr(buf, '\0', at) || !jnl_sum(buf, at, sum))
		return 0;
	int n = snprintf(want, sizeof want, "end %zu %s\n", at, sum);
	if (n <= 0 || len - at < (size_t)n || memcmp(e, want, (size_t)n) != 0)
		return 0;
	return at;
}

/* What a torn journal still tells: "dirty", and bucket and key when the
 * lines from the top down to them parse (a name for recovered/ only). */
static void jnl_torn(char *buf, size_t len, struct stage_jnl *out)
{
	struct stage_jnl j = { 0 };
	buf[len] = '\0';
	for (char *line = buf, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
		*nl = '\0';
		if (jnl_parse_line(line, &j) != 0 || (j.bucket && j.key))
			break;
	}
	memset(out, 0, sizeof *out);
	out->state = STAGE_JS_DIRTY;
	if (j.bucket && j.key) {
		out->bucket = j.bucket;
		out->key = j.key;
		j.bucket = j.key = NULL;
	}
	stage_jnl_release(&j);
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
	/* Versions 2 and 3: the checked text, or torn. So is a journal whose
	 * bytes before any NUL are only the start of the first line, or none
	 * (cut by a crash or a failed write, or made and never written). */
	size_t head = strnlen(buf, len);
	if (head > strlen(JNL_V3))
		head = strlen(JNL_V3);
	if (memcmp(buf, JNL_V3, head) == 0 || memcmp(buf, JNL_V2, head) == 0) {
		size_t at = len ? jnl_checked(buf, len) : 0;
		if (!at) {
			jnl_torn(buf, len, out);
			free(buf);
			return -EBADMSG;
		}
		len = at;
		buf[len] = '\0';
	} else if (len == JNL_MAX || buf[len - 1] != '\n' || strlen(buf) != len ||
		   strncmp(buf, JNL_V1, strlen(JNL_V1)) != 0) {
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
	int err = stage_remove_at(st, name);
	if (err && err != -ENOENT)
		return err;
	if (st->jnl_changed)
		st->jnl_changed(st->jnl_ctx);
	return stage_sync(st, st->dir_fd, false);
}
