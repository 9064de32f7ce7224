#!/usr/bin/env bash
# t_restart.sh — a stopped gateway catches up from its stored offsets:
# 500 PUTs and 100 DELETEs while it is down, then after the restart every
# view equals the ground truth (aws s3api list-objects-v2), without
# listing the bucket again.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
# The restart rejoins the group it left, as a production restart does.
GW_SAME_GROUP=1
require_bed

B=$(new_bucket restart)
bed_cmd notify "$B" >/dev/null || { not_ok "notify"; exit 1; }
T=$(test_tmp)
view_file "$T/views" all "$B" '{ "prefix": "" }'
view_file "$T/views" black "$B" '{ "metadata": { "color": "black" } }'
view_file "$T/views" odd "$B" '{ "glob": "obj-*[13579]" }'
gw_config "$T/gw.json" "$T/state" "$T/views" "facetfs-restart-$$"
M=$T/mnt
S3FILL=$FACETFS_BUILD/tests/bench/s3fill

"$S3FILL" "$B" obj- 50 --meta color=black,green >/dev/null || not_ok "initial PUTs"
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts"; exit 1; }
wait_for 20 sh -c "[ \$(ls '$M/all' | wc -l) -eq 50 ]" && ok "first scan lists 50" || not_ok "first scan lists 50"
stop_gateway A; check_eq "clean stop" 0 "$?"

# While it is down: 500 PUTs (450 new, 50 overwritten with other metadata)
# and 100 DELETEs.
"$S3FILL" "$B" obj- 500 --meta color=green,black >/dev/null || not_ok "PUTs while down"
"$AWS" --endpoint-url "$S3_URL" s3api list-objects-v2 --bucket "$B" --query 'Contents[].Key' --output text |
	tr '\t' '\n' | sort -R | head -100 >"$T/del"
# One DELETE per key: RGW 16 aborts on a multi-object delete (DeleteObjects)
# of a bucket with an HTTP notification, so never use delete-objects here.
xargs -P 4 -I{} "$FACETFS_BUILD/tests/bed/s3tool" delete "$B" {} <"$T/del" >/dev/null 2>&1 ||
	not_ok "DELETEs while down"
sleep 1   # let the last events reach Kafka

start_gateway A "$T/gw.json" "$M" || { not_ok "gateway restarts"; exit 1; }
"$AWS" --endpoint-url "$S3_URL" s3api list-objects-v2 --bucket "$B" --query 'Contents[].Key' --output text |
	tr '\t' '\n' | LC_ALL=C sort >"$T/truth-all"
check_eq "ground truth has 400 objects" 400 "$(wc -l <"$T/truth-all")"
# color: s3fill gives object i the (i mod 2)-th value: green,black for the
# second round, which covered every key 0..499.
awk -F- '{ n = $2 + 0; if (n % 2 == 1) print }' "$T/truth-all" >"$T/truth-black"
grep -E '[13579]$' "$T/truth-all" >"$T/truth-odd"
caught_up() { [[ $(list_files "$M/all") == "$(cat "$T/truth-all")" ]]; }
if wait_for 30 caught_up; then ok "view all equals the ground truth"; else not_ok "view all equals the ground truth" "$(diff <(list_files "$M/all") "$T/truth-all" | head -5 | tr '\n' ' ')"; fi
check_eq "view black equals the ground truth" "$(cat "$T/truth-black")" "$(list_files "$M/black")"
check_eq "view odd equals the ground truth" "$(cat "$T/truth-odd")" "$(list_files "$M/odd")"
check_eq "no LIST after the restart" 0 "$(stat_field "$M" .s3.list)"
check_eq "no scan after the restart" 0 "$(stat_field "$M" .scans.completed)"
applied=$(stat_field "$M" .events.applied)
check "events were applied, not re-listed (applied=$applied)" test "$applied" -ge 600
stop_gateway A
