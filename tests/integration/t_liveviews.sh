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

# within_a_second NAME T0 cmd...: the README says a filter file change takes
# effect within a second: ok if cmd holds within 1 s of T0 (the moment the
# file was written), with the measured time printed; otherwise not ok, and
# the time it did take (up to 5 s more) says whether it was late or broken.
within_a_second() {
	local name=$1 t0=$2 left
	shift 2
	left=$(awk -v ms="$(ms_since "$t0")" 'BEGIN { printf "%.3f", ms < 1000 ? (1000 - ms) / 1000 : 0 }')
	if wait_for "$left" "$@"; then
		ok "$name within a second ($(ms_since "$t0") ms)"
	elif wait_for 5 "$@"; then
		not_ok "$name within a second" "took $(ms_since "$t0") ms"
	else
		not_ok "$name within a second" "not after $(ms_since "$t0") ms"
	fi
}

# add
t0=$(date +%s%N)
view_file "$V" vb "$B" '{ "prefix": "b/" }'
within_a_second "added view appears with its objects" "$t0" \
	sh -c "[ \$(ls '$M/vb/b' 2>/dev/null | wc -l) -eq 30 ]"
check_eq "root lists it" ".facetfs va vb" "$(ls -A "$M" | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')"

# change
t0=$(date +%s%N)
view_file "$V" va "$B" '{ "prefix": "b/y-000000" }'
within_a_second "changed view shows its new objects" "$t0" \
	sh -c "[ \$(ls '$M/va/b' 2>/dev/null | wc -l) -eq 10 ] && [ ! -e '$M/va/a' ]"
check_eq "no bucket listed again for the changes" "$lists0" "$(stat_field "$M" .s3.list)"

# invalid edit: old version keeps running, error reported
printf '{ "name": "va", "bucket": "%s", "match": { "size": { "max": "1XB" } } }\n' "$B" >"$V/va.json"
sleep 1
check_eq "invalid edit keeps the previous view" 10 "$(ls "$M/va/b" 2>/dev/null | wc -l)"
err=$(jq -r '.va.last_error' "$M/.facetfs/views")
[[ $err == *"va.json: match.size.max"* ]] && ok "error shown in .facetfs/views" || not_ok "error shown in .facetfs/views" "$err"
grep -q "va.json: match.size.max" "$(gateway_log A)" && ok "error in the log" || not_ok "error in the log"
t0=$(date +%s%N)
view_file "$V" va "$B" '{ "prefix": "a/" }'
within_a_second "a fixed edit takes effect" "$t0" \
	sh -c "[ \$(ls '$M/va/a' 2>/dev/null | wc -l) -eq 20 ]"
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
within_a_second "removed view goes away" "$t0" test ! -e "$M/vb"
check_eq "root lists the rest" ".facetfs va" "$(ls -A "$M" | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')"

# events keep flowing into the changed set
aws_s3 s3 cp --quiet /etc/hostname "s3://$B/a/late.txt" 2>/dev/null
if wait_for 10 test -e "$M/va/a/late.txt"; then ok "an event after the changes reaches the changed view"
else not_ok "an event after the changes reaches the changed view"; fi
stop_gateway A; check_eq "clean stop" 0 "$?"
