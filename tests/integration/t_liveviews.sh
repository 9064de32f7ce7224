#!/usr/bin/env bash
# t_liveviews.sh — filter files added, changed and removed while mounted:
# the view appears, changes and goes away without a remount and without
# listing an already indexed bucket again; an invalid edit keeps the old
# view and reports the error; editors' temporary files are ignored.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket live)
bed_cmd notify "$B" >/dev/null || { not_ok "make bucket with notification"; exit 1; }
T=$(test_tmp)
"$FACETFS_BUILD/tests/bench/s3fill" "$B" a/x- 20 >/dev/null
"$FACETFS_BUILD/tests/bench/s3fill" "$B" b/y- 30 >/dev/null
V=$T/views
view_file "$V" va "$B" '{ "prefix": "a/" }'
gw_config "$T/gw.json" "$T/state" "$V"
M=$T/mnt
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts"; exit 1; }
wait_for 20 sh -c "[ \$(ls '$M/va' | wc -l) -eq 1 ] && [ \$(ls '$M/va/a' | wc -l) -eq 20 ]"
lists0=$(stat_field "$M" .s3.list)

ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

# add
t0=$(date +%s%N)
view_file "$V" vb "$B" '{ "prefix": "b/" }'
if wait_for 3 sh -c "[ \$(ls '$M/vb/b' 2>/dev/null | wc -l) -eq 30 ]"; then
	ok "added view appears with its objects ($(ms_since "$t0") ms)"
else not_ok "added view appears with its objects"; fi
check_eq "root lists it" ".facetfs va vb" "$(ls -A "$M" | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')"

# change
t0=$(date +%s%N)
view_file "$V" va "$B" '{ "prefix": "b/y-000000" }'
if wait_for 3 sh -c "[ \$(ls '$M/va/b' 2>/dev/null | wc -l) -eq 10 ] && [ ! -e '$M/va/a' ]"; then
	ok "changed view shows its new objects ($(ms_since "$t0") ms)"
else not_ok "changed view shows its new objects" "$(ls -R "$M/va" | head -5 | tr '\n' ' ')"; fi
check_eq "no bucket listed again for the changes" "$lists0" "$(stat_field "$M" .s3.list)"

# invalid edit: old version keeps running, error reported
printf '{ "name": "va", "bucket": "%s", "match": { "size": { "max": "1XB" } } }\n' "$B" >"$V/va.json"
sleep 1
check_eq "invalid edit keeps the previous view" 10 "$(ls "$M/va/b" 2>/dev/null | wc -l)"
err=$(jq -r '.va.last_error' "$M/.facetfs/views")
[[ $err == *"va.json: match.size.max"* ]] && ok "error shown in .facetfs/views" || not_ok "error shown in .facetfs/views" "$err"
grep -q "va.json: match.size.max" "$(gateway_log A)" && ok "error in the log" || not_ok "error in the log"
view_file "$V" va "$B" '{ "prefix": "a/" }'
if wait_for 3 sh -c "[ \$(ls '$M/va/a' 2>/dev/null | wc -l) -eq 20 ]"; then ok "a fixed edit takes effect"; else not_ok "a fixed edit takes effect"; fi
check_eq "error cleared" null "$(jq -r '.va.last_error' "$M/.facetfs/views")"

# editors' temporary files are ignored
printf 'garbage' >"$V/.va.json.swp"
printf 'garbage' >"$V/va.json~"
sleep 0.5
check_eq "temporary files ignored" null "$(jq -r '.va.last_error' "$M/.facetfs/views")"
check_eq "no error list" null "$(jq -r '.[".errors"]' "$M/.facetfs/views")"

# remove
t0=$(date +%s%N)
rm "$V/vb.json"
if wait_for 3 test ! -e "$M/vb"; then ok "removed view goes away ($(ms_since "$t0") ms)"; else not_ok "removed view goes away"; fi
check_eq "root lists the rest" ".facetfs va" "$(ls -A "$M" | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')"

# events keep flowing into the changed set
aws_s3 s3 cp --quiet /etc/hostname "s3://$B/a/late.txt" 2>/dev/null
if wait_for 10 test -e "$M/va/a/late.txt"; then ok "an event after the changes reaches the changed view"
else not_ok "an event after the changes reaches the changed view"; fi
stop_gateway A; check_eq "clean stop" 0 "$?"
