/*
 * bcache_disk.c — the block cache's disk side (bcache_int.h): CRC-32C,
 * the name hash, the block file format, writing through a temporary name,
 * reading with every check, and the start-up listing. No locks, no state
 * of the cache: bcache.c decides what to read, write and remove.
 */
#include "sync/cache/bcache_int.h"

#include "common/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define BCACHE_HAVE_SSE42 1
#endif

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "bcache_crc32c_sw reads 8 bytes as a little-endian word"
#endif

/* ---- CRC-32C ---------------------------------------------------------- */

#define CRC32C_POLY 0x82F63B78u      /* Castagnoli, bit-reflected */

/* The SSE4.2 path runs three streams of CRC_CHUNK bytes at once (the
 * instruction's latency is three times its throughput) and joins them:
 * the register after A then B is shift(register after A) ^ (register of B
 * from 0), shift being the linear map "process CRC_CHUNK zero bytes". */
#define CRC_CHUNK 8192u

struct crc_tables {
	uint32_t t[8][256];          /* slicing by 8 */
	uint32_t shift[4][256];      /* shift by CRC_CHUNK, byte by byte */
};

static struct crc_tables crc_tab;
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_tables_build(void)
{
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc_tab.t[0][n] = c;
	}
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = crc_tab.t[0][n];
		for (int k = 1; k < 8; k++) {
			c = crc_tab.t[0][c & 0xff] ^ (c >> 8);
			crc_tab.t[k][n] = c;
		}
	}
	uint32_t basis[32];
	for (int b = 0; b < 32; b++) {
		uint32_t c = 1u << b;
		for (uint32_t i = 0; i < CRC_CHUNK; i++)
			c = crc_tab.t[0][c & 0xff] ^ (c >> 8);
		basis[b] = c;
	}
	for (int i = 0; i < 4; i++)
		for (uint32_t v = 0; v < 256; v++) {
			uint32_t c = 0;
			for (int k = 0; k < 8; k++)
				if (v & (1u << k))
					c ^= basis[8 * i + k];
			crc_tab.shift[i][v] = c;
		}
}

static uint32_t crc_shift(uint32_t x)
{
	return crc_tab.shift[0][x & 0xff] ^ crc_tab.shift[1][(x >> 8) & 0xff] ^
	       crc_tab.shift[2][(x >> 16) & 0xff] ^ crc_tab.shift[3][x >> 24];
}

uint32_t bcache_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_tables_build);
	const uint32_t (*t)[256] = crc_tab.t;
	const unsigned char *p = buf;
	uint32_t c = ~crc;
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		w ^= c;
		c = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^
		    t[5][(w >> 16) & 0xff] ^ t[4][(w >> 24) & 0xff] ^
		    t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^
		    t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		c = t[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return ~c;
}

#ifdef BCACHE_HAVE_SSE42
__attribute__((target("sse4.2")))
uint32_t bcache_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint64_t c = (uint32_t)~crc;
	if (len >= 3 * CRC_CHUNK)
		pthread_once(&crc_once, crc_tables_build);
	while (len >= 3 * CRC_CHUNK) {
		uint64_t a = c, b = 0, d = 0;
		for (size_t i = 0; i < CRC_CHUNK; i += 8) {
			uint64_t wa, wb, wd;
			memcpy(&wa, p + i, 8);
			memcpy(&wb, p + CRC_CHUNK + i, 8);
			memcpy(&wd, p + 2 * CRC_CHUNK + i, 8);
			a = _mm_crc32_u64(a, wa);
			b = _mm_crc32_u64(b, wb);
			d = _mm_crc32_u64(d, wd);
		}
		c = crc_shift(crc_shift((uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)d;
		p += 3 * CRC_CHUNK;
		len -= 3 * CRC_CHUNK;
	}
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = _mm_crc32_u64(c, w);
		p += 8;
		len -= 8;
	}
	uint32_t c32 = (uint32_t)c;
	while (len--)
		c32 = _mm_crc32_u8(c32, *p++);
	return ~c32;
}

bool bcache_crc32c_hw_ok(void)
{
	return __builtin_cpu_supports("sse4.2");
}
#else
uint32_t bcache_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	return bcache_crc32c_sw(crc, buf, len);
}

bool bcache_crc32c_hw_ok(void)
{
	return false;
}
#endif

uint32_t bcache_crc32c(uint32_t crc, const void *buf, size_t len)
{
	if (bcache_crc32c_hw_ok())
		return bcache_crc32c_hw(crc, buf, len);
	return bcache_crc32c_sw(crc, buf, len);
}

/* ---- names ------------------------------------------------------------ */

/* Two different 64-bit byte-at-a-time mixes over the same length-prefixed
 * input, each finished by an avalanche step: a collision of both costs a
 * miss only (the identity in the header is checked on every read). */
struct hash_state {
	uint64_t a, b;
};

static void hash_bytes(struct hash_state *s, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	for (size_t i = 0; i < n; i++) {
		s->a = (s->a ^ p[i]) * 0x100000001b3ull;
		s->b = (s->b + p[i] + 1) * 0x9e3779b97f4a7c15ull;
		s->b ^= s->b >> 29;
	}
}

static void hash_field(struct hash_state *s, const char *str)
{
	uint64_t n = strlen(str);
	unsigned char len[8];
	for (int i = 0; i < 8; i++)
		len[i] = (unsigned char)(n >> (8 * i));
	hash_bytes(s, len, sizeof len);
	hash_bytes(s, str, n);
}

static uint64_t hash_finish(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

void bcache_hash_id(const struct bcache_id *id, struct bcache_hash *out)
{
	struct hash_state s = { 0xcbf29ce484222325ull, 0x6a09e667f3bcc909ull };
	hash_field(&s, id->bucket);
	hash_field(&s, id->key);
	hash_field(&s, id->etag);
	out->h[0] = hash_finish(s.a ^ (s.b >> 17));
	out->h[1] = hash_finish(s.b + s.a * 0x9e3779b97f4a7c15ull);
}

void bcache_name_format(const struct bcache_hash *h, uint64_t blk, char *buf)
{
	snprintf(buf, BCACHE_NAME_MAX + 4, "%02x/%016llx%016llx-%llx",
		 (unsigned)(h->h[0] >> 56), (unsigned long long)h->h[0],
		 (unsigned long long)h->h[1], (unsigned long long)blk);
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int bcache_name_parse(const char *name, struct bcache_hash *h, uint64_t *blk)
{
	uint64_t v[2] = { 0, 0 };
	for (int i = 0; i < 32; i++) {
		int d = hex_digit(name[i]);
		if (d < 0)
			return -EINVAL;
		v[i / 16] = (v[i / 16] << 4) | (uint64_t)d;
	}
	if (name[32] != '-' || !name[33])
		return -EINVAL;
	uint64_t b = 0;
	int n = 0;
	for (const char *p = name + 33; *p; p++, n++) {
		int d = hex_digit(*p);
		if (d < 0 || n >= 16)
			return -EINVAL;
		b = (b << 4) | (uint64_t)d;
	}
	h->h[0] = v[0];
	h->h[1] = v[1];
	*blk = b;
	return 0;
}

uint64_t bcache_charge(uint64_t file_size)
{
	uint64_t u = BCACHE_CHARGE_UNIT;
	uint64_t c = (file_size + u - 1) / u * u;
	return c ? c : u;
}

/* ---- the block file --------------------------------------------------- */

static void put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint16_t get16(const unsigned char *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

size_t bcache_hdr_len(const struct bcache_id *id)
{
	size_t b = strlen(id->bucket), k = strlen(id->key), e = strlen(id->etag);
	if (b > BCACHE_STR_MAX || k > BCACHE_STR_MAX || e > BCACHE_STR_MAX)
		return 0;
	return BCACHE_HDR_FIXED + b + k + e;
}

/* Fill hdr[hlen] for id, off and the data's length and CRC. */
static void hdr_encode(unsigned char *hdr, size_t hlen,
		       const struct bcache_id *id, uint64_t off,
		       uint32_t len, uint32_t crc)
{
	size_t b = strlen(id->bucket), k = strlen(id->key), e = strlen(id->etag);
	memset(hdr, 0, BCACHE_HDR_FIXED);
	put32(hdr, BCACHE_MAGIC);
	put16(hdr + 4, BCACHE_VERSION);
	put16(hdr + 6, (uint16_t)hlen);
	put64(hdr + 8, off);
	put32(hdr + 16, len);
	put32(hdr + 20, crc);
	put16(hdr + 24, (uint16_t)b);
	put16(hdr + 26, (uint16_t)k);
	put16(hdr + 28, (uint16_t)e);
	memcpy(hdr + BCACHE_HDR_FIXED, id->bucket, b);
	memcpy(hdr + BCACHE_HDR_FIXED + b, id->key, k);
	memcpy(hdr + BCACHE_HDR_FIXED + b + k, id->etag, e);
	put32(hdr + 32, bcache_crc32c(0, hdr, hlen));
}

/* Does hdr[hlen] describe id at off, with dlen data bytes? */
static bool hdr_check(unsigned char *hdr, size_t hlen,
		      const struct bcache_id *id, uint64_t off, uint64_t dlen)
{
	size_t b = strlen(id->bucket), k = strlen(id->key), e = strlen(id->etag);
	if (get32(hdr) != BCACHE_MAGIC || get16(hdr + 4) != BCACHE_VERSION ||
	    get16(hdr + 6) != hlen || get16(hdr + 24) != b ||
	    get16(hdr + 26) != k || get16(hdr + 28) != e)
		return false;
	uint32_t want = get32(hdr + 32);
	put32(hdr + 32, 0);
	uint32_t got = bcache_crc32c(0, hdr, hlen);
	put32(hdr + 32, want);
	if (got != want)
		return false;
	const char *s = (const char *)hdr + BCACHE_HDR_FIXED;
	return get64(hdr + 8) == off && get32(hdr + 16) == dlen &&
	       !memcmp(s, id->bucket, b) && !memcmp(s + b, id->key, k) &&
	       !memcmp(s + b + k, id->etag, e);
}

/* Make DIR and DIR/XX of rel; *dir_made: DIR was missing. */
static int dirs_make(const char *dir, const char *rel, bool *dir_made)
{
	char sub[PATH_MAX];
	struct stat sb;
	*dir_made = stat(dir, &sb) != 0 && errno == ENOENT;
	int rc = file_mkdir_p(dir, 0755);
	if (rc)
		return rc;
	if (snprintf(sub, sizeof sub, "%s/%.2s", dir, rel) >= (int)sizeof sub)
		return -ENAMETOOLONG;
	if (mkdir(sub, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

/* One attempt: write tmp, rename it to path. */
static int file_write_once(const char *tmp, const char *path,
			   const unsigned char *hdr, size_t hlen,
			   const void *data, uint32_t len)
{
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	int rc = file_pwrite_all(fd, hdr, hlen, 0);
	if (!rc)
		rc = file_pwrite_all(fd, data, len, hlen);
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

int bcache_file_write(const char *dir, const char *rel, uint64_t tmp_seq,
		      const struct bcache_id *id, uint64_t off,
		      const void *data, uint32_t len, uint64_t *size,
		      bool *dir_made)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	*dir_made = false;
	size_t hlen = bcache_hdr_len(id);
	if (!hlen)
		return -ENAMETOOLONG;
	if (snprintf(path, sizeof path, "%s/%s", dir, rel) >= (int)sizeof path ||
	    snprintf(tmp, sizeof tmp, "%s/%.2s/.tmp-%ld-%llu", dir, rel,
		     (long)getpid(), (unsigned long long)tmp_seq) >= (int)sizeof tmp)
		return -ENAMETOOLONG;
	unsigned char *hdr = malloc(hlen);
	if (!hdr)
		return -ENOMEM;
	hdr_encode(hdr, hlen, id, off, len, bcache_crc32c(0, data, len));
	int rc = file_write_once(tmp, path, hdr, hlen, data, len);
	if (rc == -ENOENT) {
		/* DIR or DIR/XX is missing: never made, or removed under us. */
		rc = dirs_make(dir, rel, dir_made);
		if (!rc)
			rc = file_write_once(tmp, path, hdr, hlen, data, len);
	}
	free(hdr);
	if (!rc)
		*size = hlen + len;
	return rc;
}

/* Read exactly the iovecs from fd at 0: 0, -EBADMSG when short, -errno. */
static int read_iov(int fd, struct iovec *iov, int n)
{
	off_t off = 0;
	while (n > 0) {
		ssize_t r = preadv(fd, iov, n, off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EBADMSG;
		off += r;
		while (n > 0 && (size_t)r >= iov->iov_len) {
			r -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + r;
			iov->iov_len -= (size_t)r;
		}
	}
	return 0;
}

ssize_t bcache_file_read(const char *dir, const char *rel,
			 const struct bcache_id *id, uint64_t off,
			 uint32_t block_size, void *buf, size_t len,
			 uint32_t boff, uint64_t *size)
{
	char path[PATH_MAX];
	unsigned char hstack[512], *hdr = hstack;
	unsigned char *data = NULL;
	ssize_t rc;
	size_t hlen = bcache_hdr_len(id);
	if (!hlen)
		return -ENOENT;
	if (snprintf(path, sizeof path, "%s/%s", dir, rel) >= (int)sizeof path)
		return -ENAMETOOLONG;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOTDIR ? -ENOENT : -errno;
	struct stat st;
	if (fstat(fd, &st)) {
		rc = -errno;
		goto out;
	}
	*size = (uint64_t)st.st_size;
	if ((uint64_t)st.st_size <= hlen ||
	    (uint64_t)st.st_size - hlen > block_size) {
		rc = -EBADMSG;
		goto out;
	}
	size_t dlen = (size_t)st.st_size - hlen;
	if (hlen > sizeof hstack && !(hdr = malloc(hlen))) {
		rc = -ENOMEM;
		goto out;
	}
	/* The whole block is checked: read it into the caller's buffer when
	 * the caller wants all of it, else into one of ours. */
	bool direct = boff == 0 && len >= dlen;
	data = direct ? buf : malloc(dlen);
	if (!data) {
		rc = -ENOMEM;
		goto out;
	}
	struct iovec iov[2] = { { hdr, hlen }, { data, dlen } };
	rc = read_iov(fd, iov, 2);
	if (rc)
		goto out;
	if (!hdr_check(hdr, hlen, id, off, dlen) ||
	    bcache_crc32c(0, data, dlen) != get32(hdr + 20)) {
		rc = -EBADMSG;
		goto out;
	}
	if (boff >= dlen) {
		rc = 0;
		goto out;
	}
	size_t n = dlen - boff < len ? dlen - boff : len;
	if (!direct)
		memcpy(buf, data + boff, n);
	rc = (ssize_t)n;
out:
	if (data && data != buf)
		free(data);
	if (hdr != hstack)
		free(hdr);
	close(fd);
	return rc;
}

/* ---- directories ------------------------------------------------------ */

struct found_vec {
	struct bcache_found *v;
	size_t n, cap;
};

static int found_push(struct found_vec *fv, const struct bcache_found *f)
{
	if (fv->n == fv->cap) {
		size_t cap = fv->cap ? fv->cap * 2 : 1024;
		struct bcache_found *v = realloc(fv->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		fv->v = v;
		fv->cap = cap;
	}
	fv->v[fv->n++] = *f;
	return 0;
}

static int found_cmp(const void *a, const void *b)
{
	const struct bcache_found *x = a, *y = b;
	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
	return 0;
}

/* List one DIR/XX into fv. */
static int list_sub(const char *sub, unsigned prefix, struct found_vec *fv,
		    size_t *tmp_removed)
{
	DIR *d = opendir(sub);
	if (!d)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	int dfd = dirfd(d), rc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		const char *name = de->d_name;
		if (!strncmp(name, ".tmp-", 5)) {
			if (!unlinkat(dfd, name, 0))
				(*tmp_removed)++;
			continue;
		}
		struct bcache_found f;
		if (bcache_name_parse(name, &f.h, &f.blk) ||
		    (unsigned)(f.h.h[0] >> 56) != prefix)
			continue;
		struct stat st;
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode))
			continue;
		f.size = (uint64_t)st.st_size;
		f.mtime = st.st_mtim;
		rc = found_push(fv, &f);
		if (rc)
			break;
	}
	closedir(d);
	return rc;
}

int bcache_dir_list(const char *dir, atomic_bool *stop,
		    struct bcache_found **out, size_t *n, size_t *tmp_removed,
		    unsigned *dirs_failed, char *failed, size_t failed_len)
{
	struct found_vec fv = { 0 };
	int rc = 0;
	*tmp_removed = 0;
	*dirs_failed = 0;
	for (unsigned x = 0; x < 256 && !rc; x++) {
		char sub[PATH_MAX];
		if (atomic_load(stop)) {
			rc = -ECANCELED;
			break;
		}
		if (snprintf(sub, sizeof sub, "%s/%02x", dir, x) >= (int)sizeof sub)
			rc = -ENAMETOOLONG;
		else
			rc = list_sub(sub, x, &fv, tmp_removed);
		/* Out of descriptors or memory: the process's trouble, not
		 * the subdirectory's; the listing fails whole. */
		if (rc && rc != -ENOMEM && rc != -ENAMETOOLONG && rc != -EMFILE &&
		    rc != -ENFILE) {
			if (!(*dirs_failed)++ && failed)
				snprintf(failed, failed_len, "%s: %s", sub, strerror(-rc));
			rc = 0;          /* the others are still worth knowing */
		}
	}
	if (!rc && *dirs_failed == 256)
		rc = -EIO;           /* none listed: what the disk holds is unknown */
	if (rc) {
		free(fv.v);
		return rc;
	}
	if (fv.n)
		qsort(fv.v, fv.n, sizeof *fv.v, found_cmp);
	*out = fv.v;
	*n = fv.n;
	return 0;
}
