/* config.c — see config.h. */
#include "gateway/config.h"
#include "views/filter.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/file.h"

#define CONFIG_FILE_MAX (1u << 20)   /* a configuration is a few hundred bytes */

/* Accumulates error lines into the caller's buffer. */
struct errs {
	const char *file;
	char *buf;
	size_t len, used;
	int count;
};

__attribute__((format(printf, 3, 4)))
static void err_add(struct errs *e, const char *path, const char *fmt, ...)
{
	e->count++;
	if (e->used + 1 >= e->len)
		return;
	int n = snprintf(e->buf + e->used, e->len - e->used, "%s%s: %s: ",
			 e->used ? "\n" : "", e->file, path);
	if (n < 0 || (size_t)n >= e->len - e->used) {
		e->used = e->len - 1;
		return;
	}
	e->used += (size_t)n;
	va_list ap;
	va_start(ap, fmt);
	n = vsnprintf(e->buf + e->used, e->len - e->used, fmt, ap);
	va_end(ap);
	e->used = n < 0 || (size_t)n >= e->len - e->used ? e->len - 1 : e->used + (size_t)n;
}

/* Fetch an optional string member; wrong type is an error. */
static char *get_str(struct errs *e, const cJSON *obj, const char *name,
		     const char *path, const char *dflt)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, name);
	if (!it)
		return dflt ? strdup(dflt) : NULL;
	if (!cJSON_IsString(it)) {
		err_add(e, path, "must be a string");
		return NULL;
	}
	return strdup(it->valuestring);
}

/* A byte count given as a JSON number, checked before the conversion: a
 * double at or past 2^64 (cJSON reads 1e999 as infinity) has no uint64_t
 * value, and a negative or fractional one is a typo. */
static void get_bytes(struct errs *e, const char *path, double x, uint64_t *out)
{
	if (!(x >= 0))
		err_add(e, path, "negative");
	else if (x >= 18446744073709551616.0)
		err_add(e, path, "too large");
	else if (x != floor(x))
		err_add(e, path, "not a whole number of bytes");
	else
		*out = (uint64_t)x;
}

static void check_known(struct errs *e, const cJSON *obj, const char *where,
			const char *const *known)
{
	for (const cJSON *it = obj ? obj->child : NULL; it; it = it->next) {
		bool ok = false;
		for (const char *const *k = known; *k; k++)
			ok |= strcmp(*k, it->string) == 0;
		if (!ok)
			err_add(e, where[0] ? where : it->string, "unknown field \"%s\"",
				it->string);
	}
}

static const cJSON *get_obj(struct errs *e, const cJSON *root, const char *name)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, name);
	if (it && !cJSON_IsObject(it)) {
		err_add(e, name, "must be an object");
		return NULL;
	}
	return it;
}

static int get_size(struct errs *e, const cJSON *obj, const char *name,
		    const char *path, uint64_t *out);
static void get_count(struct errs *e, const cJSON *obj, const char *name,
		      const char *path, unsigned min, unsigned max, unsigned *out);

static void parse_s3(struct errs *e, const cJSON *s3, struct config *c)
{
	static const char *const known[] = { "endpoint", "region", "access_key",
					     "secret_key", "session_token",
					     "profile", "credentials_file",
					     "https", "ca_file", "insecure",
					     "addressing", "part_size",
					     "copy_threshold",
					     "upload_streams",
					     "stream_parts",
					     NULL };
	check_known(e, s3, "s3", known);
	c->s3_endpoint = get_str(e, s3, "endpoint", "s3.endpoint", NULL);
	if (!c->s3_endpoint || !*c->s3_endpoint)
		err_add(e, "s3.endpoint", "missing (HOST:PORT of the S3 store)");
	c->s3_region = get_str(e, s3, "region", "s3.region", "default");
	/* Credentials: only what the file says; gateway/creds.c resolves
	 * the environment and the shared credentials file. */
	c->s3_access_key = get_str(e, s3, "access_key", "s3.access_key", NULL);
	c->s3_secret_key = get_str(e, s3, "secret_key", "s3.secret_key", NULL);
	c->s3_session_token = get_str(e, s3, "session_token", "s3.session_token", NULL);
	c->s3_profile = get_str(e, s3, "profile", "s3.profile", NULL);
	c->s3_credentials_file = get_str(e, s3, "credentials_file",
					 "s3.credentials_file", NULL);
	if (!c->s3_access_key != !c->s3_secret_key)
		err_add(e, c->s3_access_key ? "s3.secret_key" : "s3.access_key",
			"missing (access_key and secret_key go together)");
	if (c->s3_session_token && !c->s3_access_key)
		err_add(e, "s3.session_token", "needs s3.access_key and s3.secret_key");
	const cJSON *https = cJSON_GetObjectItemCaseSensitive(s3, "https");
	if (https && !cJSON_IsBool(https))
		err_add(e, "s3.https", "must be true or false");
	c->s3_https = cJSON_IsTrue(https);
	c->s3_ca_file = get_str(e, s3, "ca_file", "s3.ca_file", NULL);
	if (c->s3_ca_file && access(c->s3_ca_file, R_OK) != 0)
		err_add(e, "s3.ca_file", "%s", strerror(errno));
	const cJSON *insecure = cJSON_GetObjectItemCaseSensitive(s3, "insecure");
	if (insecure && !cJSON_IsBool(insecure))
		err_add(e, "s3.insecure", "must be true or false");
	c->s3_insecure = cJSON_IsTrue(insecure);
	char *addr = get_str(e, s3, "addressing", "s3.addressing", "path");
	if (addr && strcmp(addr, "path") && strcmp(addr, "virtual"))
		err_add(e, "s3.addressing", "must be \"path\" or \"virtual\"");
	c->s3_virtual_host = addr && !strcmp(addr, "virtual");
	free(addr);
	uint64_t ps = 0;
	if (get_size(e, s3, "part_size", "s3.part_size", &ps) == 0) {
		if (ps < CONFIG_PART_MIN || ps > CONFIG_PART_MAX)
			err_add(e, "s3.part_size", "%llu is outside 4KiB..5GiB (S3 wants at "
				"least 5MiB; a store may accept less)", (unsigned long long)ps);
		else
			c->s3_part_size = ps;
	}
	if (c->s3_insecure && c->s3_ca_file)
		err_add(e, "s3.insecure", "cannot be true with s3.ca_file (no certificate is verified)");
	uint64_t ct = 0;
	if (get_size(e, s3, "copy_threshold", "s3.copy_threshold", &ct) == 0) {
		if (ct < CONFIG_PART_MIN || ct > CONFIG_PART_MAX)
			err_add(e, "s3.copy_threshold", "%llu is outside 4KiB..5GiB (one "
				"COPY copies at most 5GiB)", (unsigned long long)ct);
		else
			c->s3_copy_threshold = ct;
	}
	c->s3_upload_streams = CONFIG_UPLOAD_STREAMS_DEFAULT;
	get_count(e, s3, "upload_streams", "s3.upload_streams", 1,
		  CONFIG_UPLOAD_STREAMS_MAX, &c->s3_upload_streams);
	const cJSON *stream = cJSON_GetObjectItemCaseSensitive(s3, "stream_parts");
	if (stream && !cJSON_IsBool(stream))
		err_add(e, "s3.stream_parts", "must be true or false");
	c->s3_stream_off = cJSON_IsFalse(stream);
}

static void parse_kafka(struct errs *e, const cJSON *k, struct config *c)
{
	static const char *const known[] = { "brokers", "topic", "group", "options",
					     "ready_timeout", NULL };
	check_known(e, k, "kafka", known);
	c->kafka_brokers = get_str(e, k, "brokers", "kafka.brokers", NULL);
	if (!c->kafka_brokers)
		err_add(e, "kafka.brokers", "missing (HOST:PORT[,HOST:PORT...])");
	c->kafka_topic = get_str(e, k, "topic", "kafka.topic", "s3events");
	char host[128] = "localhost", group[200];
	gethostname(host, sizeof host - 1);
	snprintf(group, sizeof group, "facetfs-%s", host);
	c->kafka_group = get_str(e, k, "group", "kafka.group", group);
	c->kafka_ready_timeout_s = 25;
	get_count(e, k, "ready_timeout", "kafka.ready_timeout", 1, 3600,
		  &c->kafka_ready_timeout_s);
	const cJSON *opts = cJSON_GetObjectItemCaseSensitive(k, "options");
	if (!opts)
		return;
	if (!cJSON_IsObject(opts)) {
		err_add(e, "kafka.options", "must be an object of librdkafka settings");
		return;
	}
	size_t n = (size_t)cJSON_GetArraySize(opts);
	c->kafka_options = calloc(2 * n + 1, sizeof *c->kafka_options);
	for (const cJSON *it = opts->child; it && c->kafka_options; it = it->next) {
		char path[256];
		snprintf(path, sizeof path, "kafka.options.%s", it->string);
		if (!cJSON_IsString(it)) {
			err_add(e, path, "must be a string (librdkafka takes strings)");
			continue;
		}
		c->kafka_options[c->n_kafka_options++] = strdup(it->string);
		c->kafka_options[c->n_kafka_options++] = strdup(it->valuestring);
	}
}

int config_load(const char *path, struct config *c, char *err, size_t errlen)
{
	memset(c, 0, sizeof *c);
	if (errlen)
		err[0] = '\0';
	char *text;
	size_t len;
	int rc = file_read_all(path, CONFIG_FILE_MAX, &text, &len);
	if (rc == -EFBIG) {
		snprintf(err, errlen, "%s: larger than %u bytes: not a configuration file",
			 path, CONFIG_FILE_MAX);
		return rc;
	}
	if (rc < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	if (len == 0) {
		free(text);
		snprintf(err, errlen, "%s: empty file", path);
		return -EINVAL;
	}
	rc = config_parse(path, text, len, c, err, errlen);
	free(text);
	return rc;
}

/* A size member of obj (a string with units or a whole number): 1 when
 * absent, 0 when read into *out, -1 after an error was added. */
static int get_size(struct errs *e, const cJSON *obj, const char *name,
		    const char *path, uint64_t *out)
{
	const cJSON *j = obj ? cJSON_GetObjectItemCaseSensitive(obj, name) : NULL;
	char why[160] = "";
	if (!j)
		return 1;
	if (cJSON_IsNumber(j)) {
		int before = e->count;
		get_bytes(e, path, j->valuedouble, out);
		return e->count == before ? 0 : -1;
	}
	if (!cJSON_IsString(j)) {
		err_add(e, path, "must be a number or a size string");
		return -1;
	}
	if (view_size_parse(j->valuestring, out, why, sizeof why) < 0) {
		err_add(e, path, "%s", why);
		return -1;
	}
	return 0;
}

/* A count member of obj, a whole JSON number in [min, max]: left as it is
 * when absent. */
static void get_count(struct errs *e, const cJSON *obj, const char *name,
		      const char *path, unsigned min, unsigned max, unsigned *out)
{
	const cJSON *j = obj ? cJSON_GetObjectItemCaseSensitive(obj, name) : NULL;
	if (!j)
		return;
	if (!cJSON_IsNumber(j) || !(j->valuedouble >= min && j->valuedouble <= max) ||
	    j->valuedouble != floor(j->valuedouble))
		err_add(e, path, "must be a whole number from %u to %u", min, max);
	else
		*out = (unsigned)j->valuedouble;
}

/* cache.readahead_*: the bounds of parallel ranged reads (sync/cache/reader.h). */
static void parse_readahead(struct errs *e, const cJSON *cache, struct config *c)
{
	c->cache_ra_streams = 4;
	c->cache_ra_bytes = 64ull << 20;
	c->cache_ra_total_streams = 16;
	c->cache_ra_total_bytes = 256ull << 20;
	get_count(e, cache, "readahead_streams", "cache.readahead_streams", 0,
		  CONFIG_RA_STREAMS_MAX, &c->cache_ra_streams);
	get_count(e, cache, "readahead_total_streams", "cache.readahead_total_streams", 1,
		  100000, &c->cache_ra_total_streams);
	get_size(e, cache, "readahead_bytes", "cache.readahead_bytes", &c->cache_ra_bytes);
	get_size(e, cache, "readahead_total_bytes", "cache.readahead_total_bytes",
		 &c->cache_ra_total_bytes);
	if (c->cache_ra_bytes < (1ull << 20))   /* a range ahead is 1 MiB or more */
		err_add(e, "cache.readahead_bytes", "%llu is below 1MiB (readahead_streams "
			"0 turns read-ahead off)", (unsigned long long)c->cache_ra_bytes);
	else if (c->cache_ra_total_bytes < c->cache_ra_bytes)
		err_add(e, "cache.readahead_total_bytes",
			"%llu is smaller than cache.readahead_bytes (%llu)",
			(unsigned long long)c->cache_ra_total_bytes,
			(unsigned long long)c->cache_ra_bytes);
}

/* A copy of text[0..len) with every comment ("//" outside a string, to
 * the end of its line) blanked to spaces: same length, same lines, so a
 * parse error's offset is the same in both. NULL when memory is short. */
static char *comments_blank(const char *text, size_t len)
{
	char *t = malloc(len ? len : 1);
	if (!t)
		return NULL;
	memcpy(t, text, len);
	bool in_str = false;
	for (size_t i = 0; i < len; i++) {
		if (in_str) {
			if (t[i] == '\\')
				i++;              /* the escaped character */
			else if (t[i] == '"')
				in_str = false;
		} else if (t[i] == '"') {
			in_str = true;
		} else if (t[i] == '/' && i + 1 < len && t[i + 1] == '/') {
			for (; i < len && t[i] != '\n'; i++)
				t[i] = ' ';
		}
	}
	return t;
}

int config_parse(const char *path, const char *text, size_t len,
		 struct config *c, char *err, size_t errlen)
{
	memset(c, 0, sizeof *c);
	struct errs e = { .file = path, .buf = err, .len = errlen };
	if (errlen)
		err[0] = '\0';
	char *plain = comments_blank(text, len);
	if (!plain) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	const char *bad = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(plain, len, &bad, 0);
	if (!root || !cJSON_IsObject(root)) {
		size_t off = bad ? (size_t)(bad - plain) : 0, line = 1;
		for (size_t i = 0; i < off && i < len; i++)
			line += text[i] == '\n';
		snprintf(err, errlen, "%s: $: not a JSON object (error near line %zu)",
			 path, line);
		cJSON_Delete(root);
		free(plain);
		return -EINVAL;
	}
	free(plain);
	static const char *const known[] = { "s3", "kafka", "state_dir", "views_dir",
					     "cache", "rescan_interval_s", "metrics", NULL };
	check_known(&e, root, "", known);
	const cJSON *s3 = get_obj(&e, root, "s3");
	const cJSON *kafka = get_obj(&e, root, "kafka");
	const cJSON *cache = get_obj(&e, root, "cache");
	if (!s3)
		err_add(&e, "s3", "missing");
	else
		parse_s3(&e, s3, c);
	if (!kafka)
		err_add(&e, "kafka", "missing");
	else
		parse_kafka(&e, kafka, c);
	c->state_dir = get_str(&e, root, "state_dir", "state_dir", "/var/lib/facetfs");
	c->views_dir = get_str(&e, root, "views_dir", "views_dir", "/etc/facetfs/views.d");
	static const char *const cache_known[] = { "dir", "max_bytes", "block_size",
						   "durability",
		"drain_streams", "drain_delay", "stop_drain", "full_timeout",
		"readahead_streams", "readahead_bytes", "readahead_total_streams",
		"readahead_total_bytes", "cold_min", "cold_direct_io", NULL };
	check_known(&e, cache, "cache", cache_known);
	c->cache_dir = get_str(&e, cache, "dir", "cache.dir", "/var/cache/facetfs");
	c->cache_max_bytes = 1ULL << 30;
	c->cache_block_size = 1u << 20;
	get_size(&e, cache, "max_bytes", "cache.max_bytes", &c->cache_max_bytes);
	uint64_t bs = c->cache_block_size;
	int bsrc = get_size(&e, cache, "block_size", "cache.block_size", &bs);
	if (bsrc == 0 && (bs < CONFIG_BLOCK_MIN || bs > CONFIG_BLOCK_MAX || (bs & (bs - 1))))
		err_add(&e, "cache.block_size",
			"%llu is not a power of two between 64KiB and 64MiB",
			(unsigned long long)bs);
	else if (bsrc >= 0 && c->cache_max_bytes < bs)
		err_add(&e, "cache.max_bytes",
			"%llu is smaller than one block (cache.block_size %llu)",
			(unsigned long long)c->cache_max_bytes, (unsigned long long)bs);
	else if (bsrc == 0)
		c->cache_block_size = (uint32_t)bs;
	char *dur = get_str(&e, cache, "durability", "cache.durability", "power");
	if (dur && strcmp(dur, "power") && strcmp(dur, "process"))
		err_add(&e, "cache.durability", "must be \"power\" (fsync: survives "
			"power loss) or \"process\" (no fsync: survives kill -9 only)");
	c->cache_durable_process = dur && !strcmp(dur, "process");
	free(dur);
	parse_readahead(&e, cache, c);
	/* Write-back views' drain (fuse/core_drain.c). */
	c->cache_drain_streams = 8;
	c->cache_stop_drain_s = 60;
	get_count(&e, cache, "drain_streams", "cache.drain_streams", 1, 64,
		  &c->cache_drain_streams);
	get_count(&e, cache, "drain_delay", "cache.drain_delay", 0, 86400,
		  &c->cache_drain_delay_s);
	get_count(&e, cache, "stop_drain", "cache.stop_drain", 0, 86400,
		  &c->cache_stop_drain_s);
	c->cache_full_timeout_s = 60;
	get_count(&e, cache, "full_timeout", "cache.full_timeout", 0, 86400,
		  &c->cache_full_timeout_s);
	c->cache_cold_min = 32ull << 20;
	get_size(&e, cache, "cold_min", "cache.cold_min", &c->cache_cold_min);
	const cJSON *cdio = cJSON_GetObjectItemCaseSensitive(cache, "cold_direct_io");
	if (cdio && !cJSON_IsBool(cdio))
		err_add(&e, "cache.cold_direct_io", "must be true or false");
	c->cache_cold_direct = !cdio || cJSON_IsTrue(cdio);

	const cJSON *ri = cJSON_GetObjectItemCaseSensitive(root, "rescan_interval_s");
	if (ri && (!cJSON_IsNumber(ri) || !(ri->valuedouble >= 0 && ri->valuedouble <= 1e7)))
		err_add(&e, "rescan_interval_s", "must be a number of seconds (0 = never)");
	else if (ri)
		c->rescan_interval_s = (unsigned)ri->valuedouble;

	const cJSON *metrics = get_obj(&e, root, "metrics");
	static const char *const metrics_known[] = { "listen", NULL };
	check_known(&e, metrics, "metrics", metrics_known);
	c->metrics_listen = get_str(&e, metrics, "listen", "metrics.listen", NULL);
	if (metrics && !c->metrics_listen)
		err_add(&e, "metrics.listen", "missing (HOST:PORT to serve /metrics on)");
	else if (c->metrics_listen && !strrchr(c->metrics_listen, ':'))
		err_add(&e, "metrics.listen", "expected HOST:PORT");

	cJSON_Delete(root);
	if (e.count) {
		config_release(c);
		return -EINVAL;
	}
	return 0;
}

void config_release(struct config *c)
{
	free(c->s3_endpoint);
	free(c->s3_region);
	free(c->s3_ca_file);
	free(c->metrics_listen);
	free(c->s3_session_token);
	free(c->s3_profile);
	free(c->s3_credentials_file);
	free(c->s3_access_key);
	free(c->s3_secret_key);
	free(c->kafka_brokers);
	free(c->kafka_topic);
	free(c->kafka_group);
	for (size_t i = 0; i < c->n_kafka_options; i++)
		free(c->kafka_options[i]);
	free(c->kafka_options);
	free(c->state_dir);
	free(c->views_dir);
	free(c->cache_dir);
	memset(c, 0, sizeof *c);
}
