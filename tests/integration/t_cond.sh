#!/usr/bin/env bash
# t_cond.sh — the probe of conditional PUTs at start (sync/stage/probe.h) on
# RGW 16: a gateway with a writable view finds If-None-Match and an
# unquoted If-Match honoured (`facetfs status` says yes, yes), its probe
# key .facetfs-probe/HOST-PID is gone from the bucket after the mount,
# and the probe's events, applied like any other, leave nothing in the
# view; a gateway with no writable view probes nothing and says so.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket cond)
bed_cmd notify "$B" >/dev/null 2>&1 || { not_ok "bucket with notifications"; exit 1; }
T=$(test_tmp)
view_file "$T/views" w "$B" '{ "prefix": "" }' '"writable": true'
gw_config "$T/a.json" "$T/state-a" "$T/views" "facetfs-cond-a-$$"
M=$T/mnt
start_gateway A "$T/a.json" "$M" || { not_ok "gateway starts"; exit 1; }

status=$("$FACETFS" status "$M")
grep '^store' <<<"$status" | diag
check "facetfs status: the store honours both conditions" \
	grep -qx 'store     conditional PUT: If-None-Match yes, If-Match yes' <<<"$status"
check_eq "… in .facetfs/stats" "done 1 1" \
	"$(jq -r '[.store.cond_probe, .store.if_none_match, .store.if_match] | map(tostring) | join(" ")' \
		"$M/.facetfs/stats")"
key=$(grep -o "probed on $B/\.facetfs-probe/[^)]*" "$(gateway_log A)" | sed "s|^probed on $B/||")
check "the log names the probe's key, .facetfs-probe/HOST-PID" \
	test "$key" = ".facetfs-probe/$(hostname)-$(gateway_pid A)"
check_eq "the probe's key is gone from the bucket" "" \
	"$(aws_s3 s3api list-objects-v2 --bucket "$B" --prefix .facetfs-probe/ --query 'Contents[].Key' --output text | grep -v '^None$')"
check "it made 4 PUTs (and nothing else was written)" \
	test "$(stat_field "$M" .s3.put)" -eq 4 -a "$(stat_field "$M" .s3.delete)" -eq 2

# The probe's events reach the gateway like any other (they carry the
# key); once applied, the view shows nothing of them.
n=$(topic_size)
wait_for 30 events_settled "$M" "$n" || not_ok "the topic's events applied"
check "the probe's events were published" grep -qF "$key" <(kafka_keys)
check_eq "the view lists nothing of the probe" "" "$(ls -A "$M/w")"
stop_gateway A || not_ok "gateway A stops cleanly"

# No writable view: nothing probed, nothing written.
view_file "$T/views-r" r "$B" '{ "prefix": "" }'
gw_config "$T/r.json" "$T/state-r" "$T/views-r" "facetfs-cond-r-$$"
start_gateway R "$T/r.json" "$M" || { not_ok "read-only gateway starts"; exit 1; }
check "no writable view: status says not probed" \
	grep -qx 'store     conditional PUT: not probed (no writable view): none sent' \
	<("$FACETFS" status "$M")
check_eq "… and no PUT or DELETE was made" "0 0" \
	"$(stat_field "$M" .s3.put) $(stat_field "$M" .s3.delete)"
stop_gateway R || not_ok "gateway R stops cleanly"
