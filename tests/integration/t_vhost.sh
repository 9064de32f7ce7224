#!/usr/bin/env bash
# t_vhost — virtual-hosted-style addressing ("addressing": "virtual"):
# the bed's radosgw knows its DNS name (rgw dns name = localhost), our
# client sends Host: BUCKET.localhost:PORT and GET /KEY, connecting to the
# endpoint's own address (no wildcard DNS needed). s3tool writes, reads,
# lists, copies and uploads in parts that way, aws (path style) checks;
# a gateway configured so mounts and reads.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

S3TOOL=$FACETFS_BUILD/tests/bed/s3tool
T=$(test_tmp)
B=$(new_bucket vhost)
check "aws: create bucket" aws_s3 s3api create-bucket --bucket "$B"
port=${S3_ENDPOINT##*:}
vh() { S3_ENDPOINT=localhost:$port S3_ADDRESSING=virtual "$S3TOOL" "$@"; }
head -c 300000 /dev/urandom >"$T/data"
check "virtual: PUT" vh put "$B" "dir/one two" "$T/data"
if aws_s3 s3api get-object --bucket "$B" --key "dir/one two" "$T/back" >/dev/null 2>&1 && cmp -s "$T/data" "$T/back"; then
	ok "aws (path style) reads what the virtual-host PUT wrote"
else
	not_ok "aws reads what the virtual-host PUT wrote"
fi
vh get "$B" "dir/one two" >"$T/got" 2>"$T/err"
if cmp -s "$T/data" "$T/got"; then ok "virtual: GET"; else not_ok "virtual: GET" "$(tail -n 1 "$T/err")"; fi
check_eq "virtual: LIST" "dir/one two" "$(vh list "$B" 2>&1 | cut -f1 | head -n 1)"
check "virtual: COPY" vh copy "$B" "dir/one two" "copy"
check "virtual: multipart upload in 64 KiB parts" vh mput "$B" "parts" "$T/data" 64K
if aws_s3 s3api get-object --bucket "$B" --key parts "$T/back2" >/dev/null 2>&1 && cmp -s "$T/data" "$T/back2"; then
	ok "aws reads the multipart object"
else
	not_ok "aws reads the multipart object"
fi
check "virtual: DELETE" vh delete "$B" copy
check_eq "aws: the copy is gone" missing "$(aws_s3 s3api head-object --bucket "$B" --key copy >/dev/null 2>&1 && echo there || echo missing)"

# A gateway with "addressing": "virtual".
bed_cmd notify "$B" >/dev/null
view_file "$T/views" all "$B" '{ "prefix": "" }'
gw_config "$T/gw.json" "$T/state" "$T/views"
jq --arg ep "localhost:$port" '.s3.endpoint = $ep | .s3.addressing = "virtual"' "$T/gw.json" >"$T/gw.tmp" && mv "$T/gw.tmp" "$T/gw.json"
if start_gateway A "$T/gw.json" "$T/mnt"; then
	wait_for 20 test -f "$T/mnt/all/parts"
	if cmp -s "$T/data" "$T/mnt/all/parts"; then ok "gateway over virtual-hosted addressing reads an object"; else not_ok "gateway over virtual-hosted addressing reads an object"; fi
	stop_gateway A
else
	not_ok "gateway with s3.addressing virtual mounts"
fi
jq '.s3.addressing = "dns"' "$T/gw.json" >"$T/bad.json"
rc=0
"$FACETFS" mount -c "$T/bad.json" "$T/mnt" >"$T/bad.out" 2>&1 || rc=$?
check_eq "s3.addressing \"dns\": config error (2)" 2 "$rc"
