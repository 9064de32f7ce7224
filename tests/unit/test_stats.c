/*
 * test_stats.c — unit tests of common/stats.h: every counter of
 * STATS_COUNTERS shows at its JSON path with the value bumped, the fields
 * DESIGN.md requires are there, the lag table and the latency histogram are
 * rendered, and a caller's section (stats_writer) is added.
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

int main(void)
{
	struct stats st;
	stats_init(&st);
	/* each counter gets a different value: its position in the list + 1 */
	uint64_t v = 0;
#define BUMP(field, section, name) stats_add(&st, field, ++v);
	STATS_COUNTERS(BUMP)
#undef BUMP
	stats_sub(&st, scans_running, 1);
	stats_set(&st, kafka_partitions, 7);
	stats_lag_set(&st, "s3events/0", 12);
	double ms[] = { 0.5, 2, 40 };
	stats_latency_add_batch(&st, ms, 3);
	double used = 4096;
	char *text = stats_to_json(&st, "staging", section_fn, &used);
	cJSON *root = text ? cJSON_Parse(text) : NULL;
	CHECK(root != NULL, "stats_to_json gives JSON");

	int wrong = 0;
	v = 0;
#define LOOK(field, section, name)                                              \
	do {                                                                    \
		uint64_t want = ++v;                                            \
		if (strcmp(#field, "scans_running") == 0)                       \
			want--;                                                 \
		if (strcmp(#field, "kafka_partitions") == 0)                    \
			want = 7;                                               \
		const cJSON *x = at(root, section, name);                       \
		if (!cJSON_IsNumber(x) || x->valuedouble != (double)want) {     \
			printf("# %s.%s: want %llu\n", section, name,            \
			       (unsigned long long)want);                       \
			wrong++;                                                \
		}                                                               \
	} while (0);
	STATS_COUNTERS(LOOK)
#undef LOOK
	CHECK(wrong == 0, "every counter at its section.name with its value (%llu counters)",
	      (unsigned long long)v);

	static const char *const required[][2] = {
		{ "events", "consumed" }, { "events", "applied" }, { "events", "ignored" },
		{ "events", "malformed" }, { "s3", "list" }, { "s3", "head" }, { "s3", "get" },
		{ "s3", "put" }, { "s3", "copy" }, { "s3", "delete" }, { "s3", "get_tagging" },
		{ "scans", "running" }, { "scans", "completed" }, { "scans", "objects" },
		{ "fuse", "lookup" }, { "fuse", "getattr" }, { "fuse", "readdir" },
		{ "fuse", "read" }, { "keys", "not_a_path" }, { "cache", "hits" },
		{ "visible_latency_ms", "count" }, { "visible_latency_ms", "p50" },
		{ "visible_latency_ms", "p99" }, { "visible_latency_ms", "max" },
	};
	int missing = 0;
	for (size_t i = 0; i < sizeof required / sizeof *required; i++)
		if (!cJSON_IsNumber(at(root, required[i][0], required[i][1]))) {
			printf("# missing %s.%s\n", required[i][0], required[i][1]);
			missing++;
		}
	CHECK(missing == 0, "the fields DESIGN.md lists are there");

	const cJSON *lag = cJSON_GetObjectItemCaseSensitive(at(root, "kafka", "lag"), "s3events/0");
	CHECK(cJSON_IsNumber(lag) && lag->valuedouble == 12, "kafka.lag holds the partition's lag");
	const cJSON *cnt = at(root, "visible_latency_ms", "count");
	const cJSON *p99 = at(root, "visible_latency_ms", "p99");
	const cJSON *mx = at(root, "visible_latency_ms", "max");
	CHECK(cJSON_IsNumber(cnt) && cnt->valuedouble == 3 && cJSON_IsNumber(p99) &&
	      p99->valuedouble >= 32 && p99->valuedouble <= 40 && mx->valuedouble == 40,
	      "latency: count 3, p99 in the top bucket capped by the max 40 ms");
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
	stats_release(&st);
	return unit_exit();
}
