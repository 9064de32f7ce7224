/*
 * stage_rgw.c — driver of sync/stage/stage.h against a real S3 store for
 * tests/integration/t_stage.sh.
 *
 *   stage_rgw STAGEDIR BUCKET KEY MIB OUT
 *
 * Stages MIB MiB (1 MiB sequential writes of pseudo-random bytes, then
 * 2,000 random overwrites), first aimed at BUCKET-missing (no such bucket:
 * the commit must fail with -EIO and keep the data), then renamed to
 * BUCKET/KEY and committed. Writes the model of what was written to OUT.
 * Then opens KEY for writing without truncation (fill from S3 with
 * If-Match), changes 3 bytes, commits as KEY.2 and writes that model to
 * OUT.2. Prints key=value lines (commit results, ETags, MD5s, MiB/s).
 * Env: S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/stats.h"
#include "sync/s3/s3_http.h"
#include "sync/stage/stage.h"
#define UNIT_WITH_MD5
#include "tests/unit/unit.h"

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int write_file(const char *path, const char *buf, size_t len)
{
	FILE *fp = fopen(path, "wb");
	if (!fp || fwrite(buf, 1, len, fp) != len || fclose(fp) != 0)
		return -EIO;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: stage_rgw STAGEDIR BUCKET KEY MIB OUT\n");
		return 2;
	}
	const char *dir = argv[1], *bucket = argv[2], *key = argv[3], *out = argv[5];
	size_t size = (size_t)strtoul(argv[4], NULL, 10) << 20;
	log_init("stage_rgw", getenv("STAGE_DEBUG") ? 2 : 0);
	struct stats st;
	stats_init(&st);
	struct s3_conf c = { .endpoint = getenv("S3_ENDPOINT"),
			     .access_key = getenv("AWS_ACCESS_KEY_ID"),
			     .secret_key = getenv("AWS_SECRET_ACCESS_KEY") };
	struct s3 *s3;
	if (s3_http_new(&c, &st, &s3) != 0) {
		fprintf(stderr, "stage_rgw: set S3_ENDPOINT and the AWS keys\n");
		return 2;
	}
	struct stage_conf sc = { .dir = dir, .max_bytes = 2 * (uint64_t)size + (1 << 20),
				 .s3 = s3 };
	struct stage *stg;
	int err = stage_open(&sc, &stg);
	if (err)
		return 1;
	char *model = malloc(size), *buf = malloc(size);
	char missing[128];
	snprintf(missing, sizeof missing, "%s-missing", bucket);
	struct obj_kv meta[] = { { "origin", "stage_rgw" } };
	struct stage_file *f;
	err = stage_file_new(stg, missing, key, meta, 1, "application/octet-stream", &f);
	if (err)
		return 1;
	uint64_t s = 12345;
	double t0 = unit_now_s();
	for (size_t off = 0; off < size && !err; off += 1 << 20) {
		for (size_t i = 0; i < (1 << 20); i += 8) {
			uint64_t v = rnd(&s);
			memcpy(model + off + i, &v, 8);
		}
		if (stage_file_pwrite(f, model + off, 1 << 20, off) != 1 << 20)
			err = -EIO;
	}
	for (int i = 0; i < 2000 && !err; i++) {
		size_t len = rnd(&s) % 65536 + 1, off = rnd(&s) % (size - len);
		for (size_t k = 0; k < len; k++)
			buf[k] = (char)rnd(&s);
		memcpy(model + off, buf, len);
		if (stage_file_pwrite(f, buf, len, off) != (ssize_t)len)
			err = -EIO;
	}
	printf("write_ok=%d\nwrite_mib_s=%.0f\n", !err, size / 1048576.0 / (unit_now_s() - t0));
	char etag[72] = "", md5[33];
	unit_md5_hex(model, size, md5);
	printf("model_md5=%s\n", md5);
	printf("commit_missing_bucket=%d\n", stage_file_commit(f, etag));
	printf("kept_after_failure=%d\n", stage_file_pread(f, buf, size, 0) == (ssize_t)size &&
	       memcmp(buf, model, size) == 0 && stage_file_dirty(f));
	err = stage_file_rename(f, bucket, key);
	t0 = unit_now_s();
	err = err ? err : stage_file_commit(f, etag);
	double dt = unit_now_s() - t0;
	printf("commit=%d\netag=%s\ncommit_mib_s=%.0f\n", err, etag, size / 1048576.0 / dt);
	printf("clean_after_commit=%d\n", !stage_file_dirty(f));
	stage_file_release(f);
	if (write_file(out, model, size) != 0)
		return 1;

	/* Open for writing without O_TRUNC: fill from S3, change 3 bytes. */
	char key2[1024], out2[1024];
	snprintf(key2, sizeof key2, "%s.2", key);
	snprintf(out2, sizeof out2, "%s.2", out);
	err = stage_file_new(stg, bucket, key2, NULL, 0, NULL, &f);
	t0 = unit_now_s();
	err = err ? err : stage_file_fill(f, bucket, key, size, etag);
	printf("fill=%d\nfill_mib_s=%.0f\n", err, size / 1048576.0 / (unit_now_s() - t0));
	memcpy(model + size / 2, "xyz", 3);
	char etag2[72] = "";
	if (!err && stage_file_pwrite(f, "xyz", 3, size / 2) != 3)
		err = -EIO;
	err = err ? err : stage_file_commit(f, etag2);
	unit_md5_hex(model, size, md5);
	printf("commit2=%d\netag2=%s\nmodel2_md5=%s\n", err, etag2, md5);
	stage_file_release(f);
	struct stage_counters cn;
	stage_counters_get(stg, &cn);
	printf("used_bytes_after=%llu\nuploads=%llu\nupload_errors=%llu\n",
	       (unsigned long long)cn.used_bytes, (unsigned long long)cn.uploads,
	       (unsigned long long)cn.upload_errors);
	if (write_file(out2, model, size) != 0)
		return 1;
	stage_close(stg);
	s3_free(s3);
	free(model);
	free(buf);
	stats_release(&st);
	return 0;
}
