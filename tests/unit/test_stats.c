/*
 * test_stats.c — unit tests of common/stats.h: the counter groups modules
 * register show at section.name with their values; a counter two groups
 * name is their sum (in the JSON, in stats_samples and stats_value); a
 * removed group's counters are gone and the others stay; the fields that
 * docs/design.md "Statistics" requires are there when their groups are;
 * the lag table and the latency histogram are rendered, and a caller's
 * section (stats_writer) is added.
 */
#include "common/stats.h"

#include <cjson/cJSON.h>
#include <math.h>

#include "tests/unit/unit.h"

static const cJSON *at(const cJSON *root, const char *section, const char *name)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, section);
	return name ? cJSON_GetObjectItemCaseSensitive(s, name) : s;
}

static void section_fn(void *ctx, struct stats_writer *w)
{
	stats_write_num(w, "used_bytes", *(const double *)ctx);
	stats_write_str(w, "recovered_dir", "/tmp/r");
}

/* Two modules' counters, the way modules declare theirs. */
struct mod_a {
	stats_counter applied, ignored, not_a_path;
};
static const struct stats_def mod_a_defs[] = {
	STATS_COUNTER(struct mod_a, applied, "events", "applied"),
	STATS_COUNTER(struct mod_a, ignored, "events", "ignored"),
	STATS_COUNTER(struct mod_a, not_a_path, "keys", "not_a_path"),
};

struct mod_b {
	stats_counter malformed, ignored, parts, get;
};
static const struct stats_def mod_b_defs[] = {
	STATS_COUNTER(struct mod_b, malformed, "events", "malformed"),
	STATS_COUNTER(struct mod_b, ignored, "events", "ignored"),
	STATS_GAUGE(struct mod_b, parts, "kafka", "partitions_assigned"),
	STATS_FAMILY(struct mod_b, get, "s3", "get", "facetfs_s3_requests_total",
		     "kind=\"get\""),
};

static cJSON *render(struct stats *st, char **text)
{
	*text = stats_to_json(st, NULL, NULL, NULL);
	return *text ? cJSON_Parse(*text) : NULL;
}

static bool num_is(const cJSON *root, const char *section, const char *name, double v)
{
	const cJSON *x = at(root, section, name);
	return cJSON_IsNumber(x) && x->valuedouble == v;
}

static void test_groups(void)
{
	struct stats st;
	stats_init(&st);
	struct mod_a a = { 0 };
	struct mod_b b = { 0 };
	struct stats_group ga = { 0 }, gb = { 0 }, gnone = { 0 };
	stats_group_add(&st, &ga, mod_a_defs, 3, &a);
	stats_group_add(&st, &gb, mod_b_defs, 4, &b);
	stats_group_add(NULL, &gnone, mod_a_defs, 3, &a);   /* no stats: nothing */
	stats_add(&a.applied, 5);
	stats_add(&a.ignored, 2);
	stats_inc(&a.not_a_path);
	stats_add(&b.malformed, 3);
	stats_add(&b.ignored, 10);
	stats_set(&b.parts, 4);
	stats_add(&b.get, 9);
	stats_sub(&b.get, 1);

	char *text;
	cJSON *root = render(&st, &text);
	CHECK(root != NULL, "stats_to_json gives JSON");
	CHECK(num_is(root, "events", "applied", 5) && num_is(root, "events", "malformed", 3) &&
	      num_is(root, "keys", "not_a_path", 1) &&
	      num_is(root, "kafka", "partitions_assigned", 4) && num_is(root, "s3", "get", 8),
	      "each group's counters at their section.name with their values");
	CHECK(num_is(root, "events", "ignored", 12),
	      "events.ignored named by both groups: their sum (12)");
	cJSON_Delete(root);
	free(text);

	struct stats_sample *s;
	int n = stats_samples(&st, &s);
	CHECK(n == 6, "stats_samples: 7 rows, 6 counters (%d)", n);
	bool order = n == 6 && !strcmp(s[0].def->name, "applied") &&
		     !strcmp(s[1].def->name, "ignored") && s[1].v == 12 &&
		     !strcmp(s[3].def->name, "malformed") && s[5].def->gauge == false &&
		     !strcmp(s[5].def->family, "facetfs_s3_requests_total") &&
		     s[4].def->gauge;
	CHECK(order, "in the order first registered, the first group's row for a shared one");
	free(s);
	CHECK(stats_value(&st, "events", "ignored") == 12 && stats_value(&st, "s3", "get") == 8 &&
	      stats_value(&st, "s3", "put") == 0 && stats_value(&st, "nope", "applied") == 0,
	      "stats_value: sums by name, 0 for a name nobody registered");

	stats_group_remove(&gb);
	stats_group_remove(&gnone);       /* never added: nothing */
	root = render(&st, &text);
	CHECK(root && num_is(root, "events", "ignored", 2) && !at(root, "events", "malformed") &&
	      !at(root, "s3", NULL) && num_is(root, "events", "applied", 5),
	      "a removed group's counters are gone, the others' stay");
	cJSON_Delete(root);
	free(text);
	stats_group_add(&st, &gb, mod_b_defs, 4, &b);    /* again, as a new object would */
	CHECK(stats_value(&st, "events", "ignored") == 12, "and it can be added again");
	stats_group_remove(&gb);
	stats_group_remove(&ga);
	CHECK(stats_samples(&st, &s) == 0, "no group: no counter");
	free(s);
	stats_release(&st);
}

static void test_rest(void)
{
	struct stats st;
	stats_init(&st);
	struct mod_a a = { 0 };
	struct mod_b b = { 0 };
	struct stats_group ga = { 0 }, gb = { 0 };
	stats_group_add(&st, &ga, mod_a_defs, 3, &a);
	stats_group_add(&st, &gb, mod_b_defs, 4, &b);
	stats_lag_set(&st, "s3events/0", 12);
	double ms[] = { 0.5, 2, 40 };
	stats_latency_add_batch(&st, ms, 3);
	stats_s3_latency_add(&st, 0.25);
	stats_s3_latency_add(&st, 5.5);
	double used = 4096;
	char *text = stats_to_json(&st, "staging", section_fn, &used);
	cJSON *root = text ? cJSON_Parse(text) : NULL;
	CHECK(root != NULL, "stats_to_json with a section gives JSON");

	static const char *const required[][2] = {
		{ "events", "applied" }, { "events", "ignored" }, { "events", "malformed" },
		{ "keys", "not_a_path" },
		{ "visible_latency_ms", "count" }, { "visible_latency_ms", "p50" },
		{ "visible_latency_ms", "p99" }, { "visible_latency_ms", "max" },
		{ "s3_latency_ms", "count" }, { "s3_latency_ms", "p50" },
		{ "s3_latency_ms", "p99" }, { "s3_latency_ms", "max" },
		{ "s3_latency_ms", "total" },
	};
	int missing = 0;
	for (size_t i = 0; i < sizeof required / sizeof *required; i++)
		if (!cJSON_IsNumber(at(root, required[i][0], required[i][1]))) {
			printf("# missing %s.%s\n", required[i][0], required[i][1]);
			missing++;
		}
	CHECK(missing == 0, "the registered fields and the latency summary are there");

	const cJSON *lag = cJSON_GetObjectItemCaseSensitive(at(root, "kafka", "lag"), "s3events/0");
	CHECK(cJSON_IsNumber(lag) && lag->valuedouble == 12 &&
	      num_is(root, "kafka", "partitions_assigned", 0),
	      "kafka.lag holds the partition's lag, next to a group's kafka counter");
	const cJSON *cnt = at(root, "visible_latency_ms", "count");
	const cJSON *p99 = at(root, "visible_latency_ms", "p99");
	const cJSON *mx = at(root, "visible_latency_ms", "max");
	CHECK(cJSON_IsNumber(cnt) && cnt->valuedouble == 3 && cJSON_IsNumber(p99) &&
	      p99->valuedouble >= 32 && p99->valuedouble <= 40 && mx->valuedouble == 40,
	      "latency: count 3, p99 in the top bucket capped by the max 40 ms");
	/* 0.25 ms is 250 µs: bucket 8 (128–256 µs), reported as 0.256. */
	CHECK(num_is(root, "s3_latency_ms", "count", 2) &&
	      num_is(root, "s3_latency_ms", "total", 5.75) &&
	      num_is(root, "s3_latency_ms", "p50", 0.256) &&
	      num_is(root, "s3_latency_ms", "max", 5.5) &&
	      num_is(root, "visible_latency_ms", "total", 42.5),
	      "S3 latencies: their count, sum, p50 (bucket bound) and max, apart from the visible ones");
	const cJSON *ub = at(root, "staging", "used_bytes");
	const cJSON *rd = at(root, "staging", "recovered_dir");
	CHECK(cJSON_IsNumber(ub) && ub->valuedouble == 4096 && cJSON_IsString(rd) &&
	      strcmp(rd->valuestring, "/tmp/r") == 0, "the caller's section is added");
	cJSON_Delete(root);
	free(text);

	text = stats_to_json(&st, NULL, NULL, NULL);
	root = text ? cJSON_Parse(text) : NULL;
	CHECK(root && !at(root, "staging", NULL), "no section without a callback");
	cJSON_Delete(root);
	free(text);
	stats_group_remove(&gb);
	stats_group_remove(&ga);
	stats_release(&st);
}

int main(void)
{
	test_groups();
	test_rest();
	return unit_exit();
}
