#!/usr/bin/env bash
# t_crash.sh — kill -9 while 20,000 events are being ingested, restart: the
# index equals the ground truth, no duplicates, no losses. Events are
# produced straight to Kafka (RGW-shaped records) so the ground truth is
# exactly what was produced; 4 partitions keep each under the mock's ~5 MB.
# Exactly once, both ways: the second run consumes exactly the messages
# after the offsets the first stored (its log says where it resumes: fewer
# would be a loss, more a replay), those offsets are within the batches in
# flight of what the first run had consumed, and the second run applies no
# event the index already held (events.redelivered: a partial replay).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket crash)
aws_s3 s3 mb "s3://$B" >/dev/null || { not_ok "make bucket"; exit 1; }
T=$(test_tmp)
view_file "$T/views" all "$B" '{ "prefix": "" }'
view_file "$T/views" black "$B" '{ "metadata": { "color": "black" } }'
gw_config "$T/gw.json" "$T/state" "$T/views" "facetfs-crash-$$"
M=$T/mnt
MK=$FACETFS_SRC/tests/lib/mkevents.py
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts"; exit 1; }
# Messages already in the shared topic (other scripts' events).
n0=$(kcat -C -b "$KAFKA_BROKERS" -t "$KAFKA_TOPIC" -e -q -f '.' | wc -c)

# 20,000 creates, then 2,000 deletes of some of them, produced while the
# gateway ingests; it is killed part way.
{ python3 "$MK" "$B" k- 20000 --meta color=black,green --size 10
  python3 "$MK" "$B" k- 2000 --start 5000 --delete; } >"$T/events"
kcat -P -b "$KAFKA_BROKERS" -t "$KAFKA_TOPIC" -K '\t' -z lz4 <"$T/events" &
prod=$!
# Kill right after the read that saw 3,000 applied, so that the kill lands
# in the middle of the stream (a read more and a fast ingest has finished).
partial() {
	jq -r '[.events.applied, .events.consumed] | map(tostring) | join(" ")' \
		"$M/.facetfs/stats" >"$T/snap" && read -r applied _ <"$T/snap" && ((applied >= 3000))
}
wait_for 60 partial || not_ok "ingest started"
crash_gateway A
read -r before consumed1 <"$T/snap"
ok "killed with -9 after $before events applied"
wait "$prod" || not_ok "produce"
fusermount3 -u "$M" 2>/dev/null || fusermount3 -uz "$M"

log=$(gateway_log A)
log_lines=$(wc -l <"$log")
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway restarts after kill -9"; exit 1; }
seq -f 'k-%07g' 0 19999 | grep -v -E '^k-000(5[0-9]{3}|6[0-9]{3})$' | LC_ALL=C sort >"$T/truth-all"
check_eq "ground truth size" 18000 "$(wc -l <"$T/truth-all")"
done_ingest() { [[ $(ls "$M/all" | wc -l) -eq 18000 ]]; }
wait_for 120 done_ingest
check_eq "after restart: view all equals the ground truth" "$(cat "$T/truth-all")" "$(ls "$M/all" | LC_ALL=C sort)"
awk -F- '{ if (($2 + 0) % 2 == 0) print }' "$T/truth-all" >"$T/truth-black"
check_eq "after restart: view black equals the ground truth" "$(cat "$T/truth-black")" "$(ls "$M/black" | LC_ALL=C sort)"
check_eq "no duplicates in a listing" 0 "$(ls "$M/all" | sort | uniq -d | wc -l)"
# Where the second run resumed: the first assignment of each partition
# (the mock's partitions start at offset 0; "the beginning" is 0).
tail -n +$((log_lines + 1)) "$log" | grep -o "kafka: $KAFKA_TOPIC/[0-9]* assigned, resuming at .*" |
	awk '!seen[$2]++ { print $2, $NF }' >"$T/resumed"
diag <"$T/resumed"
check_eq "after restart: the resume point of each of the 4 partitions is logged" 4 "$(wc -l <"$T/resumed")"
stored=$(awk '{ s += $2 } END { print s + 0 }' "$T/resumed")
total=$((n0 + 22000))
consumed2=$(stat_field "$M" .events.consumed)
check_eq "after restart: consumed exactly what follows the stored offsets ($total - $stored)" \
	$((total - stored)) "$consumed2"
# The first run stored offsets with every batch it applied; at most two
# batches of 1,000 (one applying, one polled) were between its consumed
# count and its stored offsets when the count was read, and it read on.
check "stored offsets ($stored) cover what the first run had consumed ($consumed1) but the batches in flight" \
	test "$stored" -ge $((consumed1 - 2000)) -a "$stored" -le "$total"
check_eq "after restart: no event applied twice (events.redelivered)" 0 \
	"$(stat_field "$M" .events.redelivered)"
stop_gateway A
