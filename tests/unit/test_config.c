/*
 * test_config.c — the gateway configuration loader (gateway/config.h):
 * numbers read from JSON are range-checked before they are converted
 * (cache.max_bytes 7.7e41 was a float-to-integer overflow found by
 * tests/fuzz/fuzz_config.c; 1e20 loaded as 2^63 bytes), sizes as strings,
 * rescan_interval_s bounds, cache.durability's two values, and
 * config_load() from a file giving what
 * config_parse() gives from memory, "//" comments (not inside strings;
 * a syntax error's line counted in the file as written), and the sample
 * config the package installs (examples/gateway.json, argv[1]).
 *
 * Prints "ok - ..." / "not ok - ..." lines; exits 1 if any check failed.
 */
#include "gateway/config.h"
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A complete config with CACHE as the "cache" member and EXTRA appended
 * to the top-level object. */
static int load(const char *cache, const char *extra, struct config *c,
		char *err, size_t errlen)
{
	char doc[1024];
	snprintf(doc, sizeof doc,
		 "{\"s3\":{\"endpoint\":\"127.0.0.1:1\",\"access_key\":\"a\","
		 "\"secret_key\":\"s\"},\"kafka\":{\"brokers\":\"127.0.0.1:2\"},"
		 "\"cache\":%s%s}", cache, extra);
	return config_parse("f.json", doc, strlen(doc), c, err, errlen);
}

/* cache.max_bytes = NUM must fail with exactly "f.json: cache.max_bytes: WHY". */
static void refused(const char *num, const char *why)
{
	char cache[128], err[512], want[128];
	struct config c;
	snprintf(cache, sizeof cache, "{\"max_bytes\":%s}", num);
	snprintf(want, sizeof want, "f.json: cache.max_bytes: %s", why);
	int rc = load(cache, "", &c, err, sizeof err);
	CHECK(rc == -EINVAL && strcmp(err, want) == 0,
	      "cache.max_bytes %s refused: \"%s\" (rc %d)", num, err, rc);
}

static void accepted(const char *num, uint64_t want)
{
	char cache[128], err[512];
	struct config c;
	snprintf(cache, sizeof cache, "{\"max_bytes\":%s}", num);
	int rc = load(cache, "", &c, err, sizeof err);
	CHECK(rc == 0 && c.cache_max_bytes == want,
	      "cache.max_bytes %s is %llu (rc %d, got %llu, '%s')", num,
	      (unsigned long long)want, rc,
	      rc == 0 ? (unsigned long long)c.cache_max_bytes : 0ULL, err);
	if (rc == 0)
		config_release(&c);
}

static void test_max_bytes(void)
{
	refused("7.7e41", "too large");          /* the fuzzer's input */
	refused("1e20", "too large");            /* loaded as 2^63 before */
	refused("18446744073709551616", "too large");
	refused("1e999", "too large");           /* cJSON: infinity */
	refused("-1", "negative");               /* silently ignored before */
	refused("-1e999", "negative");
	refused("1.5", "not a whole number of bytes");
	refused("0", "0 is smaller than one block (cache.block_size 1048576)");
	accepted("1048576", 1ULL << 20);
	accepted("1073741824", 1ULL << 30);
	/* the largest double below 2^64 */
	accepted("18446744073709549568", 18446744073709549568ULL);
	accepted("\"20GiB\"", 20ULL << 30);

	char err[512];
	struct config c;
	int rc = load("{\"max_bytes\":\"1e20\"}", "", &c, err, sizeof err);
	CHECK(rc == -EINVAL && strstr(err, "cache.max_bytes: ") != NULL,
	      "cache.max_bytes as a bad size string refused: \"%s\"", err);
	rc = load("{\"max_bytes\":true}", "", &c, err, sizeof err);
	CHECK(rc == -EINVAL &&
	      strcmp(err, "f.json: cache.max_bytes: must be a number or a size string") == 0,
	      "cache.max_bytes of another type refused: \"%s\"", err);
}

static void test_rescan_interval(void)
{
	static const char *const bad[] = { "1e999", "-1e999", "-1", "10000000.5", "10000001" };
	char err[512], extra[64];
	struct config c;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(extra, sizeof extra, ",\"rescan_interval_s\":%s", bad[i]);
		int rc = load("{}", extra, &c, err, sizeof err);
		CHECK(rc == -EINVAL && strstr(err, "rescan_interval_s") != NULL,
		      "rescan_interval_s %s refused: \"%s\"", bad[i], err);
	}
	int rc = load("{}", ",\"rescan_interval_s\":3600", &c, err, sizeof err);
	CHECK(rc == 0 && c.rescan_interval_s == 3600, "rescan_interval_s 3600 read");
	if (rc == 0)
		config_release(&c);
}

/* kafka.ready_timeout: 25 s by default, 1..3600 read, others refused. */
static void test_ready_timeout(void)
{
	static const char *const vals[] = { "", ",\"ready_timeout\":3", ",\"ready_timeout\":0",
					    ",\"ready_timeout\":3601", ",\"ready_timeout\":\"x\"" };
	for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
		char doc[512], err[512];
		struct config c;
		snprintf(doc, sizeof doc,
			 "{\"s3\":{\"endpoint\":\"127.0.0.1:1\",\"access_key\":\"a\","
			 "\"secret_key\":\"s\"},\"kafka\":{\"brokers\":\"127.0.0.1:2\"%s},"
			 "\"cache\":{}}", vals[i]);
		int rc = config_parse("f.json", doc, strlen(doc), &c, err, sizeof err);
		if (i < 2)
			CHECK(rc == 0 && c.kafka_ready_timeout_s == (i ? 3u : 25u),
			      "kafka.ready_timeout %s read: %u", i ? vals[i] + 1 : "(none)", rc ? 0 : c.kafka_ready_timeout_s);
		else
			CHECK(rc == -EINVAL && strstr(err, "kafka.ready_timeout") != NULL,
			      "kafka.ready_timeout %s refused: \"%s\"", vals[i] + 1, err);
		if (rc == 0)
			config_release(&c);
	}
}

static void test_load_file(void)
{
	char *dir = unit_tmpdir("config");
	char path[512], err[512];
	snprintf(path, sizeof path, "%s/facetfs.json", dir);
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(2);
	}
	fputs("{\"s3\":{\"endpoint\":\"h:1\",\"access_key\":\"a\",\"secret_key\":\"s\"},\n"
	      "\"kafka\":{\"brokers\":\"b:1\"},\n\"cache\":{\"max_bytes\":1e20}}\n", f);
	fclose(f);
	struct config c;
	int rc = config_load(path, &c, err, sizeof err);
	char want[600];
	snprintf(want, sizeof want, "%s: cache.max_bytes: too large", path);
	CHECK(rc == -EINVAL && strcmp(err, want) == 0,
	      "config_load: a file with max_bytes 1e20 refused: \"%s\"", err);
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(2);
	}
	fputs("{\"s3\":{\"endpoint\":\"h:1\",\"access_key\":\"a\",\"secret_key\":\"s\"},\n"
	      "\"kafka\":{\"brokers\":\"b:1\"},\n\"cache\":{\"max_bytes\":4194304}}\n", f);
	fclose(f);
	rc = config_load(path, &c, err, sizeof err);
	CHECK(rc == 0 && c.cache_max_bytes == 4194304 && strcmp(c.s3_endpoint, "h:1") == 0,
	      "config_load: a good file loads (rc %d, '%s')", rc, err);
	if (rc == 0)
		config_release(&c);
	rc = config_parse("x", "{\"s3\":", 6, &c, err, sizeof err);
	CHECK(rc == -EINVAL && strcmp(err, "x: $: not a JSON object (error near line 1)") == 0,
	      "config_parse: a cut document refused: \"%s\"", err);
	unlink(path);
	rmdir(dir);
	free(dir);
}

/* cache.block_size and s3.part_size: ranges, and the budget holding a block. */
static void test_sizes(void)
{
	char err[512];
	struct config c;
	int rc = load("{\"max_bytes\":\"1GiB\"}", "", &c, err, sizeof err);
	CHECK(rc == 0 && c.cache_block_size == 1u << 20 && c.s3_part_size == 0,
	      "defaults: 1 MiB blocks, the default part size");
	if (rc == 0)
		config_release(&c);
	rc = load("{\"max_bytes\":\"1GiB\",\"block_size\":\"256KiB\"}", "", &c, err, sizeof err);
	CHECK(rc == 0 && c.cache_block_size == 256u << 10, "block_size 256KiB");
	if (rc == 0)
		config_release(&c);
	const char *bad[][2] = {
		{ "{\"block_size\":\"100KiB\"}", "f.json: cache.block_size: 102400 is not a power of two between 64KiB and 64MiB" },
		{ "{\"block_size\":\"128MiB\"}", "f.json: cache.block_size: 134217728 is not a power of two between 64KiB and 64MiB" },
		{ "{\"max_bytes\":\"1MiB\",\"block_size\":\"4MiB\"}", "f.json: cache.max_bytes: 1048576 is smaller than one block (cache.block_size 4194304)" },
		{ "{\"block_size\":true}", "f.json: cache.block_size: must be a number or a size string" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		rc = load(bad[i][0], "", &c, err, sizeof err);
		CHECK(rc == -EINVAL && !strcmp(err, bad[i][1]), "refused: %s (\"%s\")", bad[i][0], err);
	}
	rc = load("{\"max_bytes\":\"1GiB\"}", "", &c, err, sizeof err);
	CHECK(rc == 0 && c.cache_ra_streams == 4 && c.cache_ra_bytes == 64u << 20 &&
	      c.cache_ra_total_streams == 16 && c.cache_ra_total_bytes == 256u << 20,
	      "read-ahead defaults: 4 GETs and 64 MiB per reader, 16 and 256 MiB in all");
	if (rc == 0)
		config_release(&c);
	rc = load("{\"max_bytes\":\"1GiB\",\"readahead_streams\":0,\"readahead_bytes\":\"8MiB\","
		  "\"readahead_total_streams\":2,\"readahead_total_bytes\":\"16MiB\"}", "", &c, err,
		  sizeof err);
	CHECK(rc == 0 && c.cache_ra_streams == 0 && c.cache_ra_bytes == 8u << 20 &&
	      c.cache_ra_total_streams == 2 && c.cache_ra_total_bytes == 16u << 20,
	      "read-ahead set: off (0 streams), 8 MiB, 2, 16 MiB ('%s')", err);
	if (rc == 0)
		config_release(&c);
	rc = load("{\"max_bytes\":\"1GiB\"}", "", &c, err, sizeof err);
	CHECK(rc == 0 && c.cache_cold_min == 32u << 20 && c.cache_cold_direct,
	      "admission defaults: cold_min 32 MiB, cold_direct_io true");
	if (rc == 0)
		config_release(&c);
	rc = load("{\"cold_min\":0,\"cold_direct_io\":false}", "", &c, err, sizeof err);
	CHECK(rc == 0 && c.cache_cold_min == 0 && !c.cache_cold_direct,
	      "admission set: cold_min 0, cold_direct_io false ('%s')", err);
	if (rc == 0)
		config_release(&c);
	rc = load("{\"cold_direct_io\":1}", "", &c, err, sizeof err);
	CHECK(rc == -EINVAL && !strcmp(err, "f.json: cache.cold_direct_io: must be true or false"),
	      "refused: cold_direct_io 1 (\"%s\")", err);
	const char *bad_ra[][2] = {
		{ "{\"readahead_streams\":17}", "f.json: cache.readahead_streams: must be a whole number from 0 to 16" },
		{ "{\"readahead_streams\":1.5}", "f.json: cache.readahead_streams: must be a whole number from 0 to 16" },
		{ "{\"readahead_total_streams\":0}", "f.json: cache.readahead_total_streams: must be a whole number from 1 to 100000" },
		{ "{\"readahead_bytes\":\"1GiB\"}", "f.json: cache.readahead_total_bytes: 268435456 is smaller than cache.readahead_bytes (1073741824)" },
		{ "{\"readahead_total_bytes\":\"lots\"}", NULL },
		{ "{\"readahead_bytes\":0}", "f.json: cache.readahead_bytes: 0 is below 1MiB (readahead_streams 0 turns read-ahead off)" },
	};
	for (size_t i = 0; i < sizeof bad_ra / sizeof bad_ra[0]; i++) {
		rc = load(bad_ra[i][0], "", &c, err, sizeof err);
		CHECK(rc == -EINVAL && (!bad_ra[i][1] || !strcmp(err, bad_ra[i][1])),
		      "refused: %s (\"%s\")", bad_ra[i][0], err);
	}
	char doc[512];
	snprintf(doc, sizeof doc, "{\"s3\":{\"endpoint\":\"h:1\",\"part_size\":\"16MiB\"},"
		 "\"kafka\":{\"brokers\":\"h:2\"}}");
	rc = config_parse("f.json", doc, strlen(doc), &c, err, sizeof err);
	CHECK(rc == 0 && c.s3_part_size == 16u << 20, "s3.part_size 16MiB ('%s')", err);
	if (rc == 0)
		config_release(&c);
	snprintf(doc, sizeof doc, "{\"s3\":{\"endpoint\":\"h:1\",\"part_size\":\"6GiB\"},"
		 "\"kafka\":{\"brokers\":\"h:2\"}}");
	rc = config_parse("f.json", doc, strlen(doc), &c, err, sizeof err);
	CHECK(rc == -EINVAL && strstr(err, "f.json: s3.part_size: 6442450944 is outside 4KiB..5GiB"),
	      "s3.part_size 6GiB refused ('%s')", err);
}

/* cache.durability: "power" by default, "process" on request, anything
 * else refused with the path and the two choices. */
static void test_durability(void)
{
	char err[512];
	struct config c;
	int rc = load("{}", "", &c, err, sizeof err);
	CHECK(rc == 0 && !c.cache_durable_process, "cache.durability defaults to power");
	if (rc == 0)
		config_release(&c);
	rc = load("{\"durability\":\"power\"}", "", &c, err, sizeof err);
	CHECK(rc == 0 && !c.cache_durable_process, "cache.durability power ('%s')", err);
	if (rc == 0)
		config_release(&c);
	rc = load("{\"durability\":\"process\"}", "", &c, err, sizeof err);
	CHECK(rc == 0 && c.cache_durable_process, "cache.durability process ('%s')", err);
	if (rc == 0)
		config_release(&c);
	static const char *const bad[] = { "\"Process\"", "\"none\"", "\"\"", "true", "1" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char cache[64];
		snprintf(cache, sizeof cache, "{\"durability\":%s}", bad[i]);
		rc = load(cache, "", &c, err, sizeof err);
		CHECK(rc == -EINVAL && strncmp(err, "f.json: cache.durability: ", 26) == 0 &&
		      !strchr(err, '\n'),
		      "cache.durability %s refused: \"%s\"", bad[i], err);
	}
}

/* s3.copy_threshold: the default, a value, the range. */
static void test_copy_threshold(void)
{
	char err[512], doc[512];
	struct config c;
	snprintf(doc, sizeof doc, "{\"s3\":{\"endpoint\":\"h:1\"},\"kafka\":{\"brokers\":\"h:2\"}}");
	int rc = config_parse("f.json", doc, strlen(doc), &c, err, sizeof err);
	CHECK(rc == 0 && c.s3_copy_threshold == 0, "s3.copy_threshold: 0 (5 GiB) by default");
	if (rc == 0)
		config_release(&c);
	snprintf(doc, sizeof doc, "{\"s3\":{\"endpoint\":\"h:1\",\"copy_threshold\":\"1MiB\"},"
		 "\"kafka\":{\"brokers\":\"h:2\"}}");
	rc = config_parse("f.json", doc, strlen(doc), &c, err, sizeof err);
	CHECK(rc == 0 && c.s3_copy_threshold == 1u << 20, "s3.copy_threshold 1MiB ('%s')", err);
	if (rc == 0)
		config_release(&c);
	const char *bad[] = { "\"6GiB\"", "\"1KiB\"", "true" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(doc, sizeof doc, "{\"s3\":{\"endpoint\":\"h:1\",\"copy_threshold\":%s},"
			 "\"kafka\":{\"brokers\":\"h:2\"}}", bad[i]);
		rc = config_parse("f.json", doc, strlen(doc), &c, err, sizeof err);
		CHECK(rc == -EINVAL && strstr(err, "f.json: s3.copy_threshold: "),
		      "s3.copy_threshold %s refused ('%s')", bad[i], err);
	}
}

/* s3.upload_streams and s3.stream_parts: defaults, values, bad ones. */
static void test_upload_streams(void)
{
	char err[512], doc[512];
	struct config c;
	snprintf(doc, sizeof doc, "{\"s3\":{\"endpoint\":\"h:1\"},\"kafka\":{\"brokers\":\"h:2\"}}");
	int rc = config_parse("f.json", doc, strlen(doc), &c, err, sizeof err);
	CHECK(rc == 0 && c.s3_upload_streams == 4 && !c.s3_stream_off,
	      "s3.upload_streams 4 and s3.stream_parts true by default");
	if (rc == 0)
		config_release(&c);
	snprintf(doc, sizeof doc, "{\"s3\":{\"endpoint\":\"h:1\",\"upload_streams\":16,"
		 "\"stream_parts\":false},\"kafka\":{\"brokers\":\"h:2\"}}");
	rc = config_parse("f.json", doc, strlen(doc), &c, err, sizeof err);
	CHECK(rc == 0 && c.s3_upload_streams == 16 && c.s3_stream_off,
	      "s3.upload_streams 16, s3.stream_parts false ('%s')", err);
	if (rc == 0)
		config_release(&c);
	snprintf(doc, sizeof doc, "{\"s3\":{\"endpoint\":\"h:1\",\"upload_streams\":1,"
		 "\"stream_parts\":true},\"kafka\":{\"brokers\":\"h:2\"}}");
	rc = config_parse("f.json", doc, strlen(doc), &c, err, sizeof err);
	CHECK(rc == 0 && c.s3_upload_streams == 1 && !c.s3_stream_off,
	      "s3.upload_streams 1, s3.stream_parts true ('%s')", err);
	if (rc == 0)
		config_release(&c);
	const char *bad[] = { "0", "17", "2.5", "\"4\"", "-1" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(doc, sizeof doc, "{\"s3\":{\"endpoint\":\"h:1\",\"upload_streams\":%s},"
			 "\"kafka\":{\"brokers\":\"h:2\"}}", bad[i]);
		rc = config_parse("f.json", doc, strlen(doc), &c, err, sizeof err);
		CHECK(rc == -EINVAL && strstr(err, "f.json: s3.upload_streams: must be a whole "
					      "number from 1 to 16"),
		      "s3.upload_streams %s refused ('%s')", bad[i], err);
	}
	snprintf(doc, sizeof doc, "{\"s3\":{\"endpoint\":\"h:1\",\"stream_parts\":\"no\"},"
		 "\"kafka\":{\"brokers\":\"h:2\"}}");
	rc = config_parse("f.json", doc, strlen(doc), &c, err, sizeof err);
	CHECK(rc == -EINVAL && strstr(err, "f.json: s3.stream_parts: must be true or false"),
	      "s3.stream_parts \"no\" refused ('%s')", err);
}

/* "//" to the end of the line is a comment, but not inside a string. */
static void test_comments(void)
{
	char err[512];
	struct config c;
	const char *doc =
		"// leading comment\n"
		"{ \"s3\": { \"endpoint\": \"http://h:1//x\", // a URL keeps its //\n"
		"          \"access_key\": \"a\\\"//\", \"secret_key\": \"s\" },\n"
		"  // \"region\": \"elsewhere\",\n"
		"  \"kafka\": { \"brokers\": \"b:1\" } }// trailing";
	int rc = config_parse("f.json", doc, strlen(doc), &c, err, sizeof err);
	CHECK(rc == 0 && strcmp(c.s3_endpoint, "http://h:1//x") == 0 &&
	      strcmp(c.s3_access_key, "a\"//") == 0 && strcmp(c.s3_region, "default") == 0,
	      "comments ignored, \"//\" inside strings kept (rc %d, endpoint '%s', key '%s', '%s')",
	      rc, rc == 0 ? c.s3_endpoint : "", rc == 0 ? c.s3_access_key : "", err);
	if (rc == 0)
		config_release(&c);
	doc = "// one\n// two\n{ \"s3\": { \"endpoint\": \"h:1\" }\n"
	      "  \"kafka\": {} }\n";
	rc = config_parse("f.json", doc, strlen(doc), &c, err, sizeof err);
	CHECK(rc == -EINVAL && strcmp(err, "f.json: $: not a JSON object (error near line 4)") == 0,
	      "a missing comma after two comment lines is reported on line 4: \"%s\"", err);
	doc = "{ \"s3\": { \"endpoint\": \"h:1\", \"access_key\": \"a\", \"secret_key\": \"s\" },"
	      " / not a comment\n \"kafka\": { \"brokers\": \"b:1\" } }";
	rc = config_parse("f.json", doc, strlen(doc), &c, err, sizeof err);
	CHECK(rc == -EINVAL, "a single / is no comment: refused (rc %d, '%s')", rc, err);
	if (rc == 0)
		config_release(&c);
}

/* The sample config the package installs as /etc/facetfs/gateway.json. */
static void test_sample(const char *path)
{
	char err[1024];
	struct config c;
	int rc = config_load(path, &c, err, sizeof err);
	CHECK(rc == 0 && strcmp(c.state_dir, "/var/lib/facetfs/gateway") == 0 &&
	      strcmp(c.views_dir, "/etc/facetfs/views.d") == 0,
	      "the sample config %s loads (rc %d, '%s')", path, rc, err);
	if (rc == 0)
		config_release(&c);
}

int main(int argc, char **argv)
{
	test_durability();
	test_max_bytes();
	test_sizes();
	test_copy_threshold();
	test_upload_streams();
	test_rescan_interval();
	test_ready_timeout();
	test_load_file();
	test_comments();
	if (argc > 1)
		test_sample(argv[1]);
	else
		CHECK(0, "the sample config: no path given (meson passes examples/gateway.json)");
	return unit_exit();
}
