#!/usr/bin/env bash
# t_scan.sh — started over a bucket that already holds 10,000 objects,
# each view's listing equals what `aws s3api list-objects-v2` says should
# match; events arriving during the scan are neither lost nor undone.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket scan)
bed_cmd notify "$B" >/dev/null || { not_ok "notify"; exit 1; }
T=$(test_tmp)
S3FILL=$FACETFS_BUILD/tests/bench/s3fill
"$S3FILL" "$B" d/a- 5000 --suffix .txt --size 10 >/dev/null || not_ok "fill a"
"$S3FILL" "$B" d/b- 4000 --suffix .dat --size 2000 >/dev/null || not_ok "fill b"
"$S3FILL" "$B" e/c- 1000 --suffix .txt --size 50 --meta color=black,green,red >/dev/null || not_ok "fill c"
view_file "$T/views" all "$B" '{ "prefix": "" }'
view_file "$T/views" txt "$B" '{ "suffix": ".txt" }'
view_file "$T/views" big "$B" '{ "size": { "min": 1000 } }'
view_file "$T/views" d "$B" '{ "prefix": "d/" }' '"layout": { "strip_prefix": "d/" }'
view_file "$T/views" black "$B" '{ "prefix": "e/", "metadata": { "color": "black" } }'
gw_config "$T/gw.json" "$T/state" "$T/views"
M=$T/mnt
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts"; exit 1; }
# An event during the scan: a delete of a listed object and a new object.
aws_s3 s3 rm --quiet "s3://$B/d/a-0000001.txt"
aws_s3 s3 cp --quiet /etc/hostname "s3://$B/d/a-new.txt"

scanned() { [[ $(stat_field "$M" .scans.completed) -ge 1 ]]; }
wait_for 120 scanned && ok "scan completed" || not_ok "scan completed"
sleep 1
"$AWS" --endpoint-url "$S3_URL" s3api list-objects-v2 --bucket "$B" \
	--query 'Contents[].[Key,Size]' --output text >"$T/truth"
check_eq "ground truth has 10000 objects" 10000 "$(wc -l <"$T/truth")"
awk '{print $1}' "$T/truth" | LC_ALL=C sort >"$T/t-all"
awk '$1 ~ /\.txt$/ {print $1}' "$T/truth" | LC_ALL=C sort >"$T/t-txt"
awk '$2 >= 1000 {print $1}' "$T/truth" | LC_ALL=C sort >"$T/t-big"
awk '$1 ~ /^d\// {print substr($1, 3)}' "$T/truth" | LC_ALL=C sort >"$T/t-d"
# metadata: s3fill gave e/c-i the (i mod 3)-th of black,green,red
awk '$1 ~ /^e\// { split($1, p, "-"); if ((p[2] + 0) % 3 == 0) print $1 }' "$T/truth" | LC_ALL=C sort >"$T/t-black"
for v in all txt big d black; do
	got=$(list_files "$M/$v")
	if [[ $got == "$(cat "$T/t-$v")" ]]; then ok "view $v equals list-objects-v2 ($(wc -l <"$T/t-$v") objects)"
	else not_ok "view $v equals list-objects-v2" "$(diff <(echo "$got") "$T/t-$v" | head -4 | tr '\n' ' ')"; fi
done
check "metadata spot check with head-object" sh -c "
  '$AWS' --endpoint-url '$S3_URL' s3api head-object --bucket '$B' --key e/c-0000003.txt | jq -e '.Metadata.color == \"black\"'"
check "delete during the scan not undone" test ! -e "$M/all/d/a-0000001.txt"
check "create during the scan not lost" test -e "$M/all/d/a-new.txt"
heads=$(stat_field "$M" .s3.head)
check "HEADs for metadata: at most one per object, plus the bucket check ($heads)" test "$heads" -ge 1000 -a "$heads" -le 10001
stop_gateway A
