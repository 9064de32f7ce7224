#!/usr/bin/env bash
# t_copy — server-side copies through a real mount over the bed (issues 9
# and 12): a chmod, chown or setxattr of a file not open is one COPY and no
# HEAD when the index knows the object whole (each request counted in
# .facetfs/stats; the time per chmod printed); above s3.copy_threshold
# (lowered here to 1 MiB, with s3.part_size 256 KiB) chmod, setxattr,
# utimensat and rename copy in parts: the object keeps its bytes (compared
# with what aws reads), its metadata and content type, gets a "-N" ETag,
# and no multipart upload is left; a rename of an object written in parts
# below the threshold (one COPY) keeps its bytes. With the bridge stopped
# (the index older than the object), what the store did is printed: RGW 16
# ignores x-amz-copy-source-if-match, so the gateway tells by the COPY's
# answer, reads the object again and copies once more.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket copy)
bed_cmd notify "$B" >/dev/null || { not_ok "notify"; exit 1; }
T=$(test_tmp)
view_file "$T/views" rw "$B" '{ "prefix": "" }' '"writable": true'
gw_config "$T/a0.json" "$T/state-a" "$T/views" "facetfs-copy-$$"
jq '.s3.part_size = "256KiB" | .s3.copy_threshold = "1MiB"' "$T/a0.json" >"$T/a.json"
A=$T/mnt-a
start_gateway A "$T/a.json" "$A" || { not_ok "gateway A starts"; exit 1; }
ST=$A/.facetfs/stats

s3n() { jq -r ".s3.$1" "$ST"; }
head_json() { aws_s3 s3api head-object --bucket "$B" --key "$1" 2>/dev/null; }
meta() { head_json "$1" | jq -r --arg n "$2" '.Metadata[$n] // "-"'; }
etag_of() { head_json "$1" | jq -r '.ETag' | tr -d '"'; }
open_uploads() {
	aws_s3 s3api list-multipart-uploads --bucket "$B" | jq -s '[.[] | .Uploads // [] | .[]] | length'
}
setx() { python3 -c 'import os, sys; os.setxattr(sys.argv[1], sys.argv[2], sys.argv[3].encode())' "$@"; }
same_bytes() {   # same_bytes KEY LOCAL_FILE: what aws reads equals the file
	aws_s3 s3 cp --quiet "s3://$B/$1" "$T/got" && cmp -s "$T/got" "$2"
}

# ---- a file made here: chmod and chown are one COPY each, no HEAD ----
printf 'small\n' >"$A/rw/small" || not_ok "write small"
h0=$(s3n head) c0=$(s3n copy)
chmod 0640 "$A/rw/small" && chown 123:456 "$A/rw/small" || not_ok "chmod, chown small"
check_eq "chmod + chown of a file made here: 0 HEAD, 2 COPY" "0 2" \
	"$(($(s3n head) - h0)) $(($(s3n copy) - c0))"
check_eq "in S3 as s3fs's names" "33184 123 456" \
	"$(meta small mode) $(meta small uid) $(meta small gid)"

# ---- another client's object: one HEAD the first time (events carry no
# content type), none after; content type and metadata kept ----
printf 'typed\n' >"$T/typed"
aws_s3 s3 cp --quiet "$T/typed" "s3://$B/typed.txt" --content-type text/x-typed \
	--metadata color=red || not_ok "aws put typed.txt"
wait_for 10 test -e "$A/rw/typed.txt" || not_ok "typed.txt appears"
h0=$(s3n head) c0=$(s3n copy)
chmod 0600 "$A/rw/typed.txt" || not_ok "chmod typed.txt"
h1=$(s3n head)
chmod 0604 "$A/rw/typed.txt" && setx "$A/rw/typed.txt" user.shape round ||
	not_ok "chmod, setxattr typed.txt"
check_eq "first change: 1 HEAD; the next two: none; 3 COPY" "1 0 3" \
	"$((h1 - h0)) $(($(s3n head) - h1)) $(($(s3n copy) - c0))"
check_eq "content type, metadata, xattr and mode kept" "text/x-typed red round 33156" \
	"$(head_json typed.txt | jq -r '[.ContentType, .Metadata.color, .Metadata.shape, .Metadata.mode] | join(" ")')"

# the time per chmod of a file made here (a figure, not a check)
printf 'x' >"$A/rw/timed" || not_ok "write timed"
h0=$(s3n head) c0=$(s3n copy)
t0=$(date +%s%N)
for i in $(seq 1 30); do chmod $((600 + i % 2)) "$A/rw/timed"; done
t1=$(date +%s%N)
echo "# 30 chmods: $(( (t1 - t0) / 30000 )) µs each, $(($(s3n head) - h0)) HEAD," \
	"$(($(s3n copy) - c0)) COPY (load average $(cut -d' ' -f1-3 /proc/loadavg))"

# ---- above the threshold: copies in parts ----
head -c $((3 * 1024 * 1024 + 12345)) /dev/urandom >"$T/big"
cp "$T/big" "$A/rw/big" || not_ok "write big (3 MiB)"
e0=$(etag_of big)
check_eq "big was written in 256 KiB parts" 13 "${e0##*-}"
p0=$(s3n copy_in_parts)
chmod 0751 "$A/rw/big" || not_ok "chmod big"
setx "$A/rw/big" user.kind large || not_ok "setxattr big"
# utimensat by path (touch -d opens the file, which re-uploads it)
python3 -c 'import os, sys; os.utime(sys.argv[1], (1049522828, 1049522828))' "$A/rw/big" ||
	not_ok "utimensat big"
check_eq "chmod, setxattr, utimensat: 3 copies in parts" 3 "$(($(s3n copy_in_parts) - p0))"
e1=$(etag_of big)
check_eq "still 13 parts (same bytes in the same parts: the same ETag)" "$e0" "$e1"
check "big: same bytes after the copies in parts" same_bytes big "$T/big"
check_eq "big: mode, xattr, mtime in S3" "33257 large 1049522828" \
	"$(meta big mode) $(meta big kind) $(meta big mtime)"
check_eq "big: the mount shows mode and size" "751 $((3 * 1024 * 1024 + 12345))" \
	"$(stat -c '%a %s' "$A/rw/big")"
check_eq "no upload left open" 0 "$(open_uploads)"

mv "$A/rw/big" "$A/rw/big2" || not_ok "rename big"
check "big2: same bytes after a rename in parts" same_bytes big2 "$T/big"
check_eq "big2: metadata kept" "33257 large" "$(meta big2 mode) $(meta big2 kind)"
check_eq "big is gone from S3" "" "$(head_json big | jq -r .ETag)"
check_eq "big2 in the mount" "751 $((3 * 1024 * 1024 + 12345))" "$(stat -c '%a %s' "$A/rw/big2")"
chown 7:8 "$A/rw/big2" || not_ok "chown big2"
check_eq "chown big2 in parts" "7 8 33257" "$(meta big2 uid) $(meta big2 gid) $(meta big2 mode)"
check "big2: same bytes after chown" same_bytes big2 "$T/big"
check_eq "no upload left open after rename and chown" 0 "$(open_uploads)"

# ---- written in parts, below the threshold: rename is one COPY ----
head -c $((600 * 1024)) /dev/urandom >"$T/mid"
cp "$T/mid" "$A/rw/mid" || not_ok "write mid"
em=$(etag_of mid)
check_eq "mid was written in 3 parts" 3 "${em##*-}"
p0=$(s3n copy_in_parts) c0=$(s3n copy)
mv "$A/rw/mid" "$A/rw/mid2" || not_ok "rename mid"
check_eq "rename of mid: one COPY, not in parts" "1 0" \
	"$(($(s3n copy) - c0)) $(($(s3n copy_in_parts) - p0))"
check "mid2: same bytes as the multipart original" same_bytes mid2 "$T/mid"

# ---- the index older than the object (bridge stopped): what the store does ----
bed_cmd bridge-stop >/dev/null || not_ok "bridge-stop"
printf 'newer bytes\n' >"$T/newer"
aws_s3 s3 cp --quiet "$T/newer" "s3://$B/typed.txt" --content-type text/x-newer \
	--metadata color=blue || not_ok "aws rewrites typed.txt"
s0=$(s3n copy_stale_index)
chmod 0644 "$A/rw/typed.txt" || not_ok "chmod typed.txt over a stale index"
bed_cmd bridge-start >/dev/null || not_ok "bridge-start"
check_eq "the stale index was noticed (one more HEAD and COPY)" 1 "$(($(s3n copy_stale_index) - s0))"
check "typed.txt: the new bytes" same_bytes typed.txt "$T/newer"
check_eq "typed.txt: the mode set" 33188 "$(meta typed.txt mode)"
echo "# RGW kept: content type $(head_json typed.txt | jq -r .ContentType)," \
	"color=$(meta typed.txt color) (x-amz-copy-source-if-match ignored: the" \
	"first COPY replaced the other client's metadata)"

stop_gateway A
