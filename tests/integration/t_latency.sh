#!/usr/bin/env bash
# t_latency.sh — event-to-visible latency over 200 PUTs through the real
# path (RGW -> bridge -> Kafka -> gateway). Prints the median and p99 two
# ways: the gateway's own histogram (eventTime -> index shows it) and, from
# the outside, PUT returned -> stat succeeds in the mount. Figures only, no
# timed assertion; the checks: the topic's older events, read first by this
# new consumer group, count as backlog and not in the histogram; every
# object became visible; the histogram counted exactly the events the
# gateway applied meanwhile (none ignored, none as backlog); and its
# percentiles are finite and ordered (p50 <= p99 <= max).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket latency)
bed_cmd notify "$B" >/dev/null || { not_ok "notify"; exit 1; }
T=$(test_tmp)
view_file "$T/views" all "$B" '{ "prefix": "" }'
gw_config "$T/gw.json" "$T/state" "$T/views"
M=$T/mnt
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts"; exit 1; }

# This new consumer group reads the shared topic's backlog first.
n_topic=$(topic_size)
wait_for 120 events_settled "$M" "$n_topic" || not_ok "caught up with the topic's $n_topic messages"
read -r _ applied0 ignored0 count0 backlog0 <<<"$(event_counters "$M")"
check_eq "the topic's $applied0 older events applied are backlog ($backlog0), not latencies" 0 "$count0"

python3 "$FACETFS_SRC/tests/lib/visible_probe.py" "$FACETFS_BUILD/tests/bed/s3tool" "$B" "" "$M/all" \
	--name lat- --count 200 --timeout 10 >"$T/lat" 2>"$T/lat.err"
rc=$?
sort -n "$T/lat" | awk -v missing="$(wc -l <"$T/lat.err")" '{ v[n++] = $1 } END {
	if (n) printf "outside: PUT returned -> visible in the mount: median %.1f ms, p99 %.1f ms, max %.1f ms (%d PUTs seen, %d missing)\n",
		v[int(n / 2)], v[int(n * 0.99)], v[n - 1], n, missing }' >"$T/outside"
cat "$T/lat.err" >>"$T/outside"
diag <"$T/outside"
check_eq "all 200 PUTs became visible" 0 "$rc"
wait_for 30 events_settled "$M" $((n_topic + 200)) || not_ok "the 200 PUTs' events consumed"
read -r _ applied1 ignored1 count1 backlog1 <<<"$(event_counters "$M")"
check "the 200 PUTs' events applied ($((applied1 - applied0)))" test $((applied1 - applied0)) -ge 200
check_eq "none of them ignored" 0 $((ignored1 - ignored0))
check_eq "the histogram counted each applied event once" $((applied1 - applied0)) $((count1 - count0))
check_eq "none of them counted as backlog" 0 $((backlog1 - backlog0))
check "p50 <= p99 <= max, all finite numbers (cJSON writes inf and NaN as null)" \
	jq -e '.visible_latency_ms | (.p50 | type) == "number" and (.p99 | type) == "number" and
		(.max | type) == "number" and .p50 <= .p99 and .p99 <= .max and .count > 0' \
	"$M/.facetfs/stats"
printf '# gateway: eventTime -> visible in the index, the events produced while it ran: p50 %s ms, p99 %s ms, max %s ms (%s events)\n' \
	"$(stat_field "$M" .visible_latency_ms.p50)" "$(stat_field "$M" .visible_latency_ms.p99)" \
	"$(stat_field "$M" .visible_latency_ms.max)" "$(stat_field "$M" .visible_latency_ms.count)"
stop_gateway A
