/*
 * fuse_ceiling.c — how fast can any FUSE server re-read local bytes here?
 *
 * A benchmark program (bench_cache.sh section 2), not part of facetfs. It
 * mounts one read-only file, "f", and answers each read from local disk in
 * the cheapest way a server that copies through user space can, with no
 * checks, locks or bookkeeping:
 *
 *   fuse-ceiling file PATH MOUNTPOINT
 *       each read is one pread of PATH into a buffer, then the reply: the
 *       ceiling of a server that keeps an object in one local file.
 *   fuse-ceiling blocks DIR BLOCK HDR SIZE MOUNTPOINT
 *       the object is in block files DIR/0, DIR/1, ... of HDR header bytes
 *       and BLOCK data bytes each (SIZE bytes in all), the layout of the
 *       burst buffer; each read opens, reads and closes the files it
 *       covers and asks the kernel to read the file PREFETCH blocks ahead
 *       (POSIX_FADV_WILLNEED), as the gateway does: the ceiling of that
 *       layout, before any check of the blocks.
 *   fuse-ceiling split PATH DIR BLOCK HDR
 *       makes DIR's block files from PATH (a header of HDR zero bytes).
 *   fuse-ceiling memory SIZE MOUNTPOINT
 *       "f" is SIZE bytes that are already in memory, opened with direct
 *       I/O (as the gateway opens a cold stream): each read is only the
 *       reply, from one 9 MiB buffer (the size of a received chunk and a
 *       read) at every offset. Its CPU time per GiB is the FUSE half of
 *       the least CPU that a gateway reading from S3 must spend; curl's
 *       per GiB is the other half (bench_rw.sh, the cold read's bound).
 *
 * Runs in the foreground until unmounted (fusermount3 -u MOUNTPOINT).
 * Threads as the gateway: libfuse's multi-threaded loop; read-ahead asked
 * as the gateway does (1 MiB); the script sets the mount's read_ahead_kb.
 */
#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define FILE_INO  2
#define READAHEAD (1024u * 1024)
#define PREFETCH  8                  /* blocks ahead, as the gateway */

#define MEM_BUF ((size_t)9 << 20)

struct server {
	bool blocks;
	char *mem;                   /* memory mode: MEM_BUF bytes */
	int fd;                      /* file mode */
	const char *dir;             /* blocks mode */
	uint64_t block, hdr, size;
	atomic_uint_fast64_t pf_next;   /* first block not yet prefetched */
};

static struct server *server_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void attr_of(const struct server *s, fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = ino;
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)s->size;
	}
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->max_readahead = READAHEAD;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (parent != FUSE_ROOT_ID || strcmp(name, "f") != 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct fuse_entry_param e = { .ino = FILE_INO, .attr_timeout = 3600,
				      .entry_timeout = 3600 };
	attr_of(server_of(req), FILE_INO, &e.attr);
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct stat st;
	attr_of(server_of(req), ino, &st);
	fuse_reply_attr(req, &st, 3600);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != FILE_INO) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (server_of(req)->mem)
		fi->direct_io = 1;
	else
		fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static int block_open(const struct server *s, uint64_t blk)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%" PRIu64, s->dir, blk);
	return open(path, O_RDONLY | O_CLOEXEC);
}

/* Blocks mode: the kernel reads the file PREFETCH blocks past blk ahead,
 * each block asked for once. */
static void prefetch(struct server *s, uint64_t blk)
{
	uint64_t want = blk + PREFETCH + 1, nblocks = (s->size + s->block - 1) / s->block;
	uint64_t from = atomic_load(&s->pf_next);
	if (want > nblocks)
		want = nblocks;
	while (from < want && !atomic_compare_exchange_weak(&s->pf_next, &from, want))
		;
	for (uint64_t b = from; b < want; b++) {
		int fd = block_open(s, b);
		if (fd >= 0) {
			posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
			close(fd);
		}
	}
}

/* Blocks mode: [off, off+len) into buf. Bytes read, or -errno. */
static ssize_t read_blocks(struct server *s, char *buf, size_t len, uint64_t off)
{
	size_t done = 0;
	prefetch(s, off / s->block);
	while (done < len) {
		uint64_t at = off + done, blk = at / s->block, in = at % s->block;
		size_t n = (size_t)(s->block - in) < len - done ? (size_t)(s->block - in) : len - done;
		int fd = block_open(s, blk);
		if (fd < 0)
			return -errno;
		ssize_t r = pread(fd, buf + done, n, (off_t)(s->hdr + in));
		int err = errno;
		close(fd);
		if (r < 0)
			return -err;
		if (r == 0)
			break;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	struct server *s = server_of(req);
	if ((uint64_t)off >= s->size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > s->size - (uint64_t)off)
		size = (size_t)(s->size - (uint64_t)off);
	if (s->mem) {
		/* any slice of at most 1 MiB (the largest FUSE read) fits */
		size_t at = (size_t)((uint64_t)off % (8u << 20));
		fuse_reply_buf(req, s->mem + at, size < MEM_BUF - at ? size : MEM_BUF - at);
		return;
	}
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ssize_t n = s->blocks ? read_blocks(s, buf, size, (uint64_t)off)
			      : pread(s->fd, buf, size, off);
	if (n < 0)
		fuse_reply_err(req, s->blocks ? (int)-n : errno);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init, .lookup = op_lookup, .getattr = op_getattr,
	.open = op_open, .read = op_read,
};

static int usage(void)
{
	fprintf(stderr, "usage: fuse-ceiling file PATH MOUNTPOINT\n"
			"       fuse-ceiling blocks DIR BLOCK HDR SIZE MOUNTPOINT\n"
			"       fuse-ceiling split PATH DIR BLOCK HDR\n"
			"       fuse-ceiling memory SIZE MOUNTPOINT\n");
	return 2;
}

static bool number(const char *text, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(text, &end, 10);
	if (errno || end == text || *end)
		return false;
	*out = v;
	return true;
}

static int split(const char *path, const char *dir, uint64_t block, uint64_t hdr)
{
	int in = open(path, O_RDONLY | O_CLOEXEC);
	char *buf = malloc(block + hdr);
	if (in < 0 || !buf || (mkdir(dir, 0755) && errno != EEXIST)) {
		fprintf(stderr, "fuse-ceiling: %s: %s\n", in < 0 ? path : dir, strerror(errno));
		return 1;
	}
	memset(buf, 0, hdr);
	for (uint64_t blk = 0;; blk++) {
		ssize_t n = pread(in, buf + hdr, block, (off_t)(blk * block));
		if (n <= 0) {
			close(in);
			free(buf);
			return n < 0;
		}
		char name[4096];
		snprintf(name, sizeof name, "%s/%" PRIu64, dir, blk);
		int out = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (out < 0 || write(out, buf, hdr + (size_t)n) != (ssize_t)(hdr + (size_t)n)) {
			fprintf(stderr, "fuse-ceiling: %s: %s\n", name, strerror(errno));
			return 1;
		}
		close(out);
	}
}

static int serve(struct server *s, const char *mountpoint)
{
	char *argv0[] = { "fuse-ceiling", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(1, argv0);
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, s);
	if (!se || fuse_session_mount(se, mountpoint) != 0) {
		fprintf(stderr, "fuse-ceiling: cannot mount %s\n", mountpoint);
		return 1;
	}
	struct fuse_loop_config cfg = { .clone_fd = 0, .max_idle_threads = 10 };
	int rc = fuse_session_loop_mt(se, &cfg);
	fuse_session_unmount(se);
	fuse_session_destroy(se);
	return rc != 0;
}

int main(int argc, char **argv)
{
	struct server s = { .fd = -1 };
	if (argc == 4 && strcmp(argv[1], "file") == 0) {
		struct stat st;
		s.fd = open(argv[2], O_RDONLY | O_CLOEXEC);
		if (s.fd < 0 || fstat(s.fd, &st)) {
			fprintf(stderr, "fuse-ceiling: %s: %s\n", argv[2], strerror(errno));
			return 1;
		}
		s.size = (uint64_t)st.st_size;
		return serve(&s, argv[3]);
	}
	if (argc == 7 && strcmp(argv[1], "blocks") == 0) {
		s.blocks = true;
		s.dir = argv[2];
		if (!number(argv[3], &s.block) || !s.block || !number(argv[4], &s.hdr) ||
		    !number(argv[5], &s.size))
			return usage();
		return serve(&s, argv[6]);
	}
	if (argc == 4 && strcmp(argv[1], "memory") == 0) {
		if (!number(argv[2], &s.size) || !(s.mem = malloc(MEM_BUF)))
			return usage();
		memset(s.mem, 'm', MEM_BUF);
		return serve(&s, argv[3]);
	}
	if (argc == 6 && strcmp(argv[1], "split") == 0) {
		uint64_t block, hdr;
		if (!number(argv[4], &block) || !block || !number(argv[5], &hdr))
			return usage();
		return split(argv[2], argv[3], block, hdr);
	}
	return usage();
}
