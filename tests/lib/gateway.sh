# tests/lib/gateway.sh — helpers for tests that run a facetfs gateway.
# Source after common.sh.

FACETFS=$FACETFS_BUILD/gateway/exe/facetfs

# gw_config FILE STATE_DIR VIEWS_DIR [GROUP] [TOPIC] [FETCH_WAIT_MS] [CACHE_MAX]
# [CACHE_DIR] [BLOCK_SIZE]: a gateway config for the bed (also used by
# tests/bench/bench_lib.sh).
gw_config() {
	local file=$1 state=$2 views=$3 group=${4:-facetfs-${TEST_NAME:-gw}-$$-$RANDOM}
	local topic=${5:-$KAFKA_TOPIC} fetch_wait=${6:-5} cache_max=${7:-1GiB}
	local cache_dir=${8:-$state/cache} block=${9:-1MiB}
	cat >"$file" <<JSON
{ "s3":    { "endpoint": "$S3_ENDPOINT", "region": "default",
             "access_key": "$AWS_ACCESS_KEY_ID", "secret_key": "$AWS_SECRET_ACCESS_KEY" },
  "kafka": { "brokers": "$KAFKA_BROKERS", "topic": "$topic", "group": "$group",
             "options": { "fetch.wait.max.ms": "$fetch_wait", "session.timeout.ms": "6000",
                          "heartbeat.interval.ms": "1000" } },
  "state_dir": "$state",
  "views_dir": "$views",
  "cache": { "dir": "$cache_dir", "max_bytes": "$cache_max", "block_size": "$block" } }
JSON
}

# view_file DIR NAME BUCKET MATCH_JSON [EXTRA_JSON]: write DIR/NAME.json.
view_file() {
	local dir=$1 name=$2 bucket=$3 match=$4 extra=${5:-}
	mkdir -p "$dir"
	printf '{ "name": "%s", "bucket": "%s", "match": %s%s }\n' \
		"$name" "$bucket" "$match" "${extra:+, $extra}" >"$dir/$name.json"
}

# A field of .facetfs/stats: stat_field MOUNT '.events.applied'
stat_field() { jq -r "$2" "$1/.facetfs/stats"; }

# topic_size: the messages the bed's topic holds now (all partitions).
topic_size() { kcat -C -b "$KAFKA_BROKERS" -t "$KAFKA_TOPIC" -e -q -f '.' | wc -c; }
# event_counters MOUNT: consumed applied ignored histogram-count backlog.
event_counters() {
	jq -r '[.events.consumed, .events.applied, .events.ignored, .visible_latency_ms.count,
		.events.backlog] |
		map(tostring) | join(" ")' "$1/.facetfs/stats"
}
# events_settled MOUNT MIN (for wait_for): the gateway has consumed MIN
# messages or more and its event counters did not move since the last
# call (a batch reaches .events at its index write and the histogram just
# after: two equal reads one wait_for step apart are past both). A
# gateway of a new consumer group reads the shared topic's backlog first:
# MIN = topic_size waits for it.
events_settled() {
	local now last=$TEST_TMP/.events_settled.${1//\//_}
	now=$(event_counters "$1") || return 1
	[[ ${now%% *} -ge $2 && $now == "$(cat "$last" 2>/dev/null)" ]] && return 0
	printf '%s' "$now" >"$last"
	return 1
}

# Sorted list of the files under a directory, relative to it.
list_files() { (cd "$1" && find . -type f | sed 's|^\./||' | LC_ALL=C sort); }
