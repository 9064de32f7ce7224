/*
 * unit.h — what the unit tests (and tests/integration/stage_rgw.c) share:
 * TAP-style checks, a clock, temp directories, a byte flipped in a file,
 * an MD5 in hex.
 *
 * Each test program includes this once, from its single source file; the
 * helpers are static inline so a program pays only for what it uses.
 * CHECK(cond, fmt, ...) prints "ok - ..." or "not ok - ..." and counts
 * the failures in unit_failures; main() ends with unit_exit(), which prints
 * the summary line and returns the exit code. Setup failures (no temp dir)
 * exit 2 at once: nothing after them could be trusted.
 *
 * Views and index helpers are in unit_views.h (those programs link views/).
 */
#ifndef FACETFS_TEST_UNIT_H
#define FACETFS_TEST_UNIT_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int unit_failures __attribute__((unused));

#define CHECK(cond, ...) do {                                           \
		if (cond) {                                             \
			printf("ok - ");                                \
		} else {                                                \
			printf("not ok - ");                            \
			unit_failures++;                                \
		}                                                       \
		printf(__VA_ARGS__);                                    \
		printf("\n");                                           \
	} while (0)

/* How many of n random trials to run: all in a plain build, a quarter
 * under AddressSanitizer, whose cost per allocation would make the few
 * tests that repeat a trial many times most of the sanitized run (the
 * plain build shows the scale; ASan looks for memory errors on the same
 * paths). At least 1. */
static inline unsigned unit_trials(unsigned n)
{
#ifdef __SANITIZE_ADDRESS__
	n /= 4;
#endif
	return n ? n : 1;
}

/* The summary line and the exit code of a test program. */
static inline int unit_exit(void)
{
	if (unit_failures)
		printf("# FAILED: %d failure(s)\n", unit_failures);
	else
		printf("# all passed\n");
	return unit_failures ? 1 : 0;
}

/* Seconds on the monotonic clock. */
static inline double unit_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A new directory /tmp/facetfs-test-TAG-XXXXXX (malloc'ed path). */
static inline char *unit_tmpdir(const char *tag)
{
	char *t = NULL;
	if (asprintf(&t, "/tmp/facetfs-test-%s-XXXXXX", tag) < 0 || !mkdtemp(t)) {
		perror("unit_tmpdir");
		exit(2);
	}
	return t;
}

/* rm -rf DIR (a path unit_tmpdir made: no quotes in it). */
static inline void unit_rmtree(const char *dir)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
}

/* unit_rmtree with no word when it cannot (the caller tries again). */
static inline void unit_rmtree_quiet(const char *dir)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf '%s' 2>/dev/null", dir);
	if (system(cmd) != 0)
		return;
}

/* XOR the byte at offset at of the file path with mask (a disk fault made
 * by hand); exits 2 when it cannot. */
static inline void unit_flip_byte(const char *path, off_t at, unsigned char mask)
{
	unsigned char ch;
	int fd = open(path, O_RDWR);
	if (fd < 0 || pread(fd, &ch, 1, at) != 1)
		exit(2);
	ch ^= mask;
	if (pwrite(fd, &ch, 1, at) != 1)
		exit(2);
	close(fd);
}

/* The whole file, NUL-terminated (malloc'ed; *len without the NUL), or
 * NULL if it cannot be read. */
static inline char *unit_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	long sz = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
	if (sz >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)sz + 1)) &&
	    fread(buf, 1, (size_t)sz, f) == (size_t)sz) {
		buf[sz] = '\0';
		*len = (size_t)sz;
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

#ifdef UNIT_WITH_MD5
#include <openssl/evp.h>

/* MD5 of buf in lower-case hex: what S3 gives as the ETag of a single PUT. */
static inline void unit_md5_hex(const void *buf, size_t len, char out[33])
{
	unsigned char d[16];
	unsigned dl = 0;
	EVP_Digest(buf, len, d, &dl, EVP_md5(), NULL);
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}
#endif

#endif
