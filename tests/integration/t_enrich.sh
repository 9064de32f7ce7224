#!/usr/bin/env bash
# t_enrich.sh — a content_type view over RGW (whose events carry no content
# type): each object is HEADed once, by the first scan or for its event,
# not once per event per view; the view holds exactly the matching objects.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket enrich)
bed_cmd notify "$B" >/dev/null || { not_ok "notify"; exit 1; }
T=$(test_tmp)
for i in 1 2 3 4 5 6; do
	ct=text/plain; ((i % 2)) && ct=image/png
	aws_s3 s3 cp --quiet /etc/hostname "s3://$B/pre/o$i" --content-type "$ct"
done
V=$T/views
view_file "$V" text "$B" '{ "content_type": "text/*" }'
view_file "$V" images "$B" '{ "content_type": ["image/png", "image/jpeg"] }'
view_file "$V" textpre "$B" '{ "prefix": "pre/", "content_type": "text/plain" }'
gw_config "$T/gw.json" "$T/state" "$V"
M=$T/mnt
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts"; exit 1; }
wait_for 20 sh -c "[ \$(jq -r .scans.completed '$M/.facetfs/stats') -ge 1 ]"
check_eq "scan: text view" "pre/o2 pre/o4 pre/o6" "$(list_files "$M/text" | tr '\n' ' ' | sed 's/ $//')"
check_eq "scan: images view" "pre/o1 pre/o3 pre/o5" "$(list_files "$M/images" | tr '\n' ' ' | sed 's/ $//')"
check_eq "scan: one HEAD per object" 6 "$(stat_field "$M" .s3.head)"

for i in 1 2 3 4; do
	ct=text/plain; ((i % 2)) && ct=image/jpeg
	aws_s3 s3 cp --quiet /etc/hostname "s3://$B/new/n$i" --content-type "$ct"
done
wait_for 10 test -e "$M/images/new/n3"
wait_for 10 test -e "$M/text/new/n4"
check_eq "events: text view" "new/n2 new/n4 pre/o2 pre/o4 pre/o6" "$(list_files "$M/text" | tr '\n' ' ' | sed 's/ $//')"
check_eq "events: images view" "new/n1 new/n3 pre/o1 pre/o3 pre/o5" "$(list_files "$M/images" | tr '\n' ' ' | sed 's/ $//')"
# The six objects' own events (the bucket was notified before they were put)
# reuse what the scan fetched: one HEAD per object version in all.
check_eq "events: one HEAD per new object, not per event or view" 10 "$(stat_field "$M" .s3.head)"
stop_gateway A
