#!/usr/bin/env bash
# t_metrics — the Prometheus endpoint: a gateway configured with
# "metrics": { "listen": "127.0.0.1:0" } serves /metrics; after events, a
# listing and reads, the text passes `promtool check metrics` and its
# counters agree with .facetfs/stats (events applied, S3 GETs, FUSE reads),
# the latency histograms count what happened; other paths are 404, other
# methods 405; without the field nothing listens.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

PROMTOOL=${PROMTOOL:-/var/cache/facetfs-tests/prometheus/usr/bin/promtool}
B=$(new_bucket metrics)
bed_cmd notify "$B" >/dev/null || { not_ok "notify"; exit 1; }
T=$(test_tmp)
view_file "$T/views" all "$B" '{ "prefix": "" }'
gw_config "$T/gw.json" "$T/state" "$T/views"
jq '. + { "metrics": { "listen": "127.0.0.1:0" } }' "$T/gw.json" >"$T/gw.tmp" && mv "$T/gw.tmp" "$T/gw.json"
M=$T/mnt
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway with metrics mounts"; exit 1; }
LOG=$(gateway_log A)
port=$(sed -n 's|.*metrics: serving http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p' "$LOG" | tail -n 1)
[[ -n $port ]] && ok "metrics endpoint listening (port $port)" || { not_ok "metrics endpoint listening" "no 'metrics: serving' line"; exit 1; }
URL=http://127.0.0.1:$port

for i in 1 2 3 4 5; do echo "object $i" | aws_s3 s3 cp - "s3://$B/o$i" >/dev/null 2>&1; done
wait_for 20 sh -c "[ \$(ls '$M/all' 2>/dev/null | wc -l) -eq 5 ]" || not_ok "5 objects listed"
cat "$M"/all/o* >/dev/null
curl -sf "$URL/metrics" >"$T/m1" && ok "GET /metrics: 200" || not_ok "GET /metrics: 200"
if [[ -x $PROMTOOL ]]; then
	if "$PROMTOOL" check metrics <"$T/m1" >"$T/promtool.out" 2>&1; then
		ok "promtool check metrics: no problem"
	else
		not_ok "promtool check metrics" "$(head -n 3 "$T/promtool.out" | tr '\n' ' ')"
	fi
else
	skip "promtool check metrics" "no promtool at $PROMTOOL (tests/deps.sh fetches it)"
fi
jq . "$M/.facetfs/stats" >"$T/stats.json"
metric() { awk -v n="$1" '$1 == n { print $2 }' "$T/m1"; }
stat() { jq -r "$1" "$T/stats.json"; }
applied=$(metric facetfs_events_applied_total)
if [[ -n $applied ]] && ((applied >= 5)); then ok "facetfs_events_applied_total counts the 5 PUTs ($applied)"; else not_ok "facetfs_events_applied_total" "'$applied'"; fi
# Counters only grow: /metrics (read first) is at most the stats read after.
check "S3 GETs: /metrics <= .facetfs/stats read after it" test "$(metric 'facetfs_s3_requests_total{kind="get"}')" -le "$(stat .s3.get)"
gets=$(metric 'facetfs_s3_requests_total{kind="get"}')
if [[ -n $gets ]] && ((gets >= 5)); then ok "S3 GETs by kind label ($gets)"; else not_ok "S3 GETs by kind label" "'$gets'"; fi
reads=$(metric 'facetfs_fuse_requests_total{op="read"}')
if [[ -n $reads ]] && ((reads >= 5)); then ok "FUSE reads by op label ($reads)"; else not_ok "FUSE reads by op label" "'$reads'"; fi
vis=$(metric facetfs_visible_latency_seconds_count)
inf=$(metric 'facetfs_visible_latency_seconds_bucket{le="+Inf"}')
if [[ -n $vis ]] && ((vis >= 5)) && [[ $vis == "$inf" ]]; then ok "visible latency histogram: count $vis = +Inf bucket"; else not_ok "visible latency histogram" "count '$vis', +Inf '$inf'"; fi
s3n=$(metric facetfs_s3_request_duration_seconds_count)
if [[ -n $s3n ]] && ((s3n >= gets)); then ok "S3 request duration histogram counts every request ($s3n)"; else not_ok "S3 request duration histogram" "'$s3n'"; fi
# The same latencies in .facetfs/stats (read after /metrics, so at least as
# many), in milliseconds; the sum agrees with the histogram's seconds.
s3c=$(stat .s3_latency_ms.count) s3t=$(stat .s3_latency_ms.total)
s3sum=$(metric facetfs_s3_request_duration_seconds_sum)
if awk -v c="$s3c" -v n="$s3n" -v t="$s3t" -v s="$s3sum" 'BEGIN { exit !(c >= n && n > 0 && t >= s * 1000 * 0.999 && t > 0) }'; then
	ok "s3_latency_ms in .facetfs/stats: count $s3c >= $s3n, total $s3t ms >= the histogram's $s3sum s"
else
	not_ok "s3_latency_ms in .facetfs/stats" "count '$s3c' (metrics '$s3n'), total '$s3t' ms (metrics '$s3sum' s)"
fi
check "facetfs status prints the S3 request latencies" \
	grep -q '^latency   S3 request ms: count [1-9]' <("$FACETFS" status "$M")
check "staging gauges present" grep -q '^facetfs_staging_max_bytes ' "$T/m1"
blocks=$(metric facetfs_cache_blocks)
if [[ -n $blocks ]] && ((blocks >= 1)); then ok "burst buffer gauges: blocks cached by the reads ($blocks)"; else not_ok "burst buffer gauges" "'$blocks'"; fi
check "a Kafka lag gauge per partition" grep -q '^facetfs_kafka_lag_messages{partition="' "$T/m1"
check "a staleness gauge per view, once the view is fresh" wait_for 30 \
	sh -c "curl -s '$URL/metrics' | grep -q '^facetfs_view_staleness_seconds{view=\"'"
# Every .facetfs/stats member and /metrics sample name the docs and the
# scripts rely on is still there (stats_keys.txt: recorded from the gateway
# before counters moved into their modules; new ones may be added). The
# per-partition names are folded: they depend on the bed.
KEYS=$(dirname "$0")/stats_keys.txt
{
	jq -r 'paths(scalars) | map(tostring) | join(".") | "json " + .' "$T/stats.json" |
		sed 's/^json kafka\.lag\..*/json kafka.lag.PARTITION/'
	grep -v '^#' "$T/m1" | awk '{ print "metric " $1 }' |
		sed 's/{partition="[^"]*"}/{partition="PARTITION"}/'
} | sort -u >"$T/keys"
if [[ -n ${STATS_KEYS_WRITE:-} ]]; then
	cp "$T/keys" "$KEYS"
	ok "key list written to $KEYS ($(wc -l <"$KEYS") names)"
else
	[[ -n ${STATS_KEYS_COPY:-} ]] && cp "$T/keys" "$STATS_KEYS_COPY"   # to diff by hand
	missing=$(comm -23 "$KEYS" "$T/keys")
	check_eq "every recorded stats member and metric name is rendered ($(wc -l <"$KEYS") names)" "" "$missing"
fi
check_eq "other path: 404" 404 "$(curl -s -o /dev/null -w '%{http_code}' "$URL/")"
check_eq "POST: 405" 405 "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/metrics")"
stop_gateway A
check_eq "after the stop, nothing listens" 000 "$(curl -s -o /dev/null -w '%{http_code}' -m 2 "$URL/metrics")"

# Without the field: no endpoint (the log says nothing of metrics).
gw_config "$T/plain.json" "$T/state2" "$T/views"
if start_gateway P "$T/plain.json" "$T/mnt2"; then
	check "without metrics.listen: no endpoint" eval '! grep -q "metrics: serving" "$(gateway_log P)"'
	stop_gateway P
fi
rc=0
jq '. + { "metrics": { "listen": "nonsense" } }' "$T/plain.json" >"$T/bad.json"
"$FACETFS" mount -c "$T/bad.json" "$T/mnt2" >"$T/bad.out" 2>&1 || rc=$?
check_eq "metrics.listen without a port: config error (2)" 2 "$rc"
check "… naming the field" grep -q "metrics.listen" "$T/bad.out"
