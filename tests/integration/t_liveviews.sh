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

reloads() { jq -r '.[".reloads"].count' "$M/.facetfs/views"; }

# within_a_second NAME T0 N0 cmd...: docs/semantics.md says a filter file change
# takes effect within a second. T0 is when the file was written (ns), N0
# the gateway's reload count before. First cmd must come true (the change
# shows in the mount; up to 5 s, not a timing check); then the gateway's own
# record of when it made the new set current (.reloads.last_at, same clock)
# must be within 1 s of T0. Printed: that, and when the test saw the change
# through the mount (which adds its 50 ms polling and a listing).
within_a_second() {
	local name=$1 t0=$2 n0=$3 seen n at took
	shift 3
	if ! wait_for 5 "$@"; then
		not_ok "$name within a second" "not in the mount after $(ms_since "$t0") ms"
		return 1
	fi
	seen=$(ms_since "$t0")
	read -r n at < <(jq -r '.[".reloads"] | "\(.count) \(.last_at)"' "$M/.facetfs/views")
	took=$(awk -v a="$at" -v t="$t0" 'BEGIN { printf "%d", a * 1000 - t / 1000000 }')
	if ((n > n0 && took <= 1000)); then
		ok "$name within a second (new view set current after $took ms, seen in the mount after $seen ms)"
	else
		not_ok "$name within a second" \
			"reloads $n0 -> $n, current after $took ms, seen after $seen ms"
	fi
}

# add
n0=$(reloads) t0=$(date +%s%N)
view_file "$V" vb "$B" '{ "prefix": "b/" }'
within_a_second "added view appears with its objects" "$t0" "$n0" \
	sh -c "[ \$(ls '$M/vb/b' 2>/dev/null | wc -l) -eq 30 ]"
check_eq "root lists it" ".facetfs va vb" "$(ls -A "$M" | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')"

# change
n0=$(reloads) t0=$(date +%s%N)
view_file "$V" va "$B" '{ "prefix": "b/y-000000" }'
within_a_second "changed view shows its new objects" "$t0" "$n0" \
	sh -c "[ \$(ls '$M/va/b' 2>/dev/null | wc -l) -eq 10 ] && [ ! -e '$M/va/a' ]"
check_eq "no bucket listed again for the changes" "$lists0" "$(stat_field "$M" .s3.list)"

# invalid edit: old version keeps running, error reported
printf '{ "name": "va", "bucket": "%s", "match": { "size": { "max": "1XB" } } }\n' "$B" >"$V/va.json"
sleep 1
check_eq "invalid edit keeps the previous view" 10 "$(ls "$M/va/b" 2>/dev/null | wc -l)"
err=$(jq -r '.va.last_error' "$M/.facetfs/views")
[[ $err == *"va.json: match.size.max"* ]] && ok "error shown in .facetfs/views" || not_ok "error shown in .facetfs/views" "$err"
grep -q "va.json: match.size.max" "$(gateway_log A)" && ok "error in the log" || not_ok "error in the log"
n0=$(reloads) t0=$(date +%s%N)
view_file "$V" va "$B" '{ "prefix": "a/" }'
within_a_second "a fixed edit takes effect" "$t0" "$n0" \
	sh -c "[ \$(ls '$M/va/a' 2>/dev/null | wc -l) -eq 20 ]"
check_eq "error cleared" null "$(jq -r '.va.last_error' "$M/.facetfs/views")"

# editors' temporary files are ignored
printf 'garbage' >"$V/.va.json.swp"
printf 'garbage' >"$V/va.json~"
sleep 0.5
check_eq "temporary files ignored" null "$(jq -r '.va.last_error' "$M/.facetfs/views")"
check_eq "no error list" null "$(jq -r '.[".errors"]' "$M/.facetfs/views")"

# remove
n0=$(reloads) t0=$(date +%s%N)
rm "$V/vb.json"
within_a_second "removed view goes away" "$t0" "$n0" test ! -e "$M/vb"
check_eq "root lists the rest" ".facetfs va" "$(ls -A "$M" | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')"

# events keep flowing into the changed set
aws_s3 s3 cp --quiet /etc/hostname "s3://$B/a/late.txt" 2>/dev/null
if wait_for 10 test -e "$M/va/a/late.txt"; then ok "an event after the changes reaches the changed view"
else not_ok "an event after the changes reaches the changed view"; fi
stop_gateway A; check_eq "clean stop" 0 "$?"
