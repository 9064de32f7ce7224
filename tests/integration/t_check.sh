#!/usr/bin/env bash
# t_check.sh — invalid filter files and bad state: facetfs check and
# facetfs mount name the file, the field and the reason, exit non-zero and
# mount nothing; an unreachable S3 or Kafka fails start-up by itself (a
# run still going after 60 s is stopped and counted as a hang), and the
# Kafka message names the deadline the gateway gave the brokers.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed
T=$(test_tmp)
B=$(new_bucket check)
aws_s3 s3 mb "s3://$B" >/dev/null

check "examples pass facetfs check" "$FACETFS" check "$FACETFS_SRC"/examples/views.d/*.json

# expect_check NAME FILE-CONTENT EXPECTED-SUBSTRING
expect_check() {
	local name=$1 body=$2 want=$3 f out rc
	f=$T/bad-$name.json
	printf '%s\n' "$body" >"$f"
	out=$("$FACETFS" check "$f" 2>&1); rc=$?
	if ((rc != 0)) && [[ $out == *"$f: $want"* ]]; then
		ok "check: $name"
	else
		not_ok "check: $name" "exit $rc, output: ${out//$'\n'/ | }"
	fi
}
expect_check not-json '{ "name": "x", ' "$: not JSON"
expect_check unknown-field '{ "name": "x", "bucket": "b", "match": { "prefx": "a" } }' 'match.prefx: unknown field'
expect_check wrong-type '{ "name": "x", "bucket": "b", "match": { "prefix": 5 } }' 'match.prefix:'
expect_check bad-unit '{ "name": "x", "bucket": "b", "match": { "size": { "max": "10XB" } } }' 'match.size.max: unknown unit'
expect_check bad-regex '{ "name": "x", "bucket": "b", "match": { "regex": "a(b" } }' 'match.regex: '
expect_check no-bucket '{ "name": "x", "match": {} }' 'bucket:'
expect_check bad-name '{ "name": "../up", "bucket": "b", "match": {} }' 'name:'
expect_check empty-any '{ "name": "x", "bucket": "b", "match": { "any": [] } }' 'match.any:'

# mount with an invalid filter file: message, non-zero exit, nothing mounted
mkdir -p "$T/views" "$T/mnt"
view_file "$T/views" good "$B" '{ "prefix": "" }'
printf '{ "name": "bad", "bucket": "%s", "match": { "size": { "min": "1QB" } } }\n' "$B" >"$T/views/bad.json"
gw_config "$T/gw.json" "$T/state" "$T/views"
out=$(timeout 30 "$FACETFS" mount -c "$T/gw.json" "$T/mnt" -f 2>&1); rc=$?
if ((rc != 0 && rc != 124)) && [[ $out == *"bad.json: match.size.min"* ]]; then ok "mount refuses an invalid filter file"; else not_ok "mount refuses an invalid filter file" "exit $rc: $out"; fi
check "nothing mounted" sh -c "! mountpoint -q '$T/mnt'"
rm "$T/views/bad.json"

# bad config
printf '{ "s3": { "endpoint": 5 }, "kafka": {} }\n' >"$T/badcfg.json"
out=$("$FACETFS" mount -c "$T/badcfg.json" "$T/mnt" -f 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"badcfg.json: s3.endpoint"* ]]; then ok "bad config named"; else not_ok "bad config named" "exit $rc: $out"; fi

# unreachable S3
sed "s|\"endpoint\": \"$S3_ENDPOINT\"|\"endpoint\": \"127.0.0.1:1\"|" "$T/gw.json" >"$T/nos3.json"
t0=$(date +%s)
out=$(timeout 60 "$FACETFS" mount -c "$T/nos3.json" "$T/mnt" -f 2>&1); rc=$?
dt=$(( $(date +%s) - t0 ))
if ((rc != 0 && rc != 124)); then ok "unreachable S3: non-zero exit (after ${dt}s)"; else not_ok "unreachable S3: non-zero exit, no hang" "exit $rc after ${dt}s: $out"; fi
[[ $out == *"127.0.0.1:1"* ]] && ok "unreachable S3: message names the endpoint" || not_ok "unreachable S3: message names the endpoint" "$out"

# unreachable Kafka
sed "s|\"brokers\": \"$KAFKA_BROKERS\"|\"brokers\": \"127.0.0.1:1\"|" "$T/gw.json" |
	jq '.kafka.ready_timeout = 3' >"$T/nokafka.json"
t0=$(date +%s)
out=$(timeout 60 "$FACETFS" mount -c "$T/nokafka.json" "$T/mnt" -f 2>&1); rc=$?
dt=$(( $(date +%s) - t0 ))
if ((rc != 0 && rc != 124)); then ok "unreachable Kafka: non-zero exit (after ${dt}s)"; else not_ok "unreachable Kafka: non-zero exit, no hang" "exit $rc after ${dt}s: $out"; fi
[[ $out == *"within 3000 ms"* ]] && ok "unreachable Kafka: the message names kafka.ready_timeout (3 s)" || not_ok "unreachable Kafka: the message names kafka.ready_timeout (3 s)" "$out"
[[ $out == *"127.0.0.1:1"* ]] && ok "unreachable Kafka: message names the brokers" || not_ok "unreachable Kafka: message names the brokers" "$out"
check "nothing mounted after failures" sh -c "! mountpoint -q '$T/mnt'"
