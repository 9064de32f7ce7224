#!/usr/bin/env bash
# t_stage — write staging (sync/stage/stage.h) against the bed's radosgw through
# its driver stage_rgw, with /usr/bin/aws as the independent reader: a
# 200 MiB staged file (sequential writes + random overwrites) whose first
# commit fails (no such bucket: -EIO, data kept), then is committed to the
# real bucket (as a multipart upload of 8 MiB parts, the default); aws
# reads back exactly the bytes written, with the ETag the commit returned
# (S3's "MD5 of the parts' MD5s-N", computed here independently) and the
# metadata, and no upload is left open; then the object is opened for writing
# without truncation (fill from S3), 3 bytes changed, committed again.
# Prints the commit and fill rates as comments.
. "$(dirname "$0")/../lib/common.sh"
require_bed

tmp=$(test_tmp)
TOOL=$FACETFS_BUILD/tests/integration/stage_rgw
[[ -x $TOOL ]] || { not_ok "stage_rgw built" "no $TOOL"; exit 1; }
MIB=${STAGE_MIB:-200}
b=$(new_bucket stage)
key="dir one/staged ü.bin"

check "aws: create bucket" aws_s3 s3api create-bucket --bucket "$b"
if ! "$TOOL" "$tmp/staging" "$b" "$key" "$MIB" "$tmp/model" >"$tmp/out" 2>"$tmp/err"; then
	not_ok "stage_rgw ran" "$(tail -n 2 "$tmp/err")"
	exit 1
fi
diag <"$tmp/out"
val() { sed -n "s/^$1=//p" "$tmp/out"; }
# s3_etag FILE: the ETag S3 gives FILE uploaded in 8 MiB parts (a plain
# MD5 when it fits in one part).
s3_etag() {
	python3 - "$1" <<'PY'
import hashlib, sys
part = 8 << 20
md5s = []
with open(sys.argv[1], 'rb') as f:
    while True:
        b = f.read(part)
        if not b:
            break
        md5s.append(hashlib.md5(b).digest())
if len(md5s) <= 1:
    print(hashlib.md5(open(sys.argv[1], 'rb').read()).hexdigest())
else:
    print('%s-%d' % (hashlib.md5(b''.join(md5s)).hexdigest(), len(md5s)))
PY
}

check_eq "writes of $MIB MiB staged" 1 "$(val write_ok)"
check_eq "commit to a missing bucket is -EIO (-5)" -5 "$(val commit_missing_bucket)"
check_eq "failed commit keeps the staged data, still dirty" 1 "$(val kept_after_failure)"
check_eq "commit to the real bucket returns 0" 0 "$(val commit)"
check_eq "clean after the commit" 1 "$(val clean_after_commit)"
check_eq "commit's ETag is S3's multipart ETag of what was written" "$(s3_etag "$tmp/model")" "$(val etag)"
check_eq "model file MD5 matches" "$(val model_md5)" "$(md5sum <"$tmp/model" | cut -d' ' -f1)"

if aws_s3 s3api get-object --bucket "$b" --key "$key" "$tmp/back" >"$tmp/head.json" 2>"$tmp/err"; then
	if cmp -s "$tmp/model" "$tmp/back"; then
		ok "aws reads back exactly the $MIB MiB written"
	else
		not_ok "aws reads back exactly the $MIB MiB written" "$(cmp "$tmp/model" "$tmp/back" 2>&1 | head -n 1)"
	fi
	check_eq "aws sees the same ETag" "$(val etag)" "$(jq -r .ETag "$tmp/head.json" | tr -d '"')"
	check_eq "aws sees the metadata" stage_rgw "$(jq -r .Metadata.origin "$tmp/head.json")"
	check_eq "aws sees the content type" application/octet-stream "$(jq -r .ContentType "$tmp/head.json")"
else
	not_ok "aws get-object" "$(tail -n 1 "$tmp/err")"
fi
check_eq "the failed commit made no bucket" missing \
	"$(aws_s3 s3api head-bucket --bucket "$b-missing" >/dev/null 2>&1 && echo exists || echo missing)"

check_eq "fill from S3 (If-Match) returns 0" 0 "$(val fill)"
check_eq "second commit returns 0" 0 "$(val commit2)"
check_eq "second ETag is the multipart ETag of filled + changed bytes" "$(s3_etag "$tmp/model.2")" "$(val etag2)"
uploads=$(aws_s3 s3api list-multipart-uploads --bucket "$b" --output json 2>/dev/null)
[[ -n $uploads ]] || uploads='{}'
check_eq "no multipart upload left open" 0 "$(jq -r '(.Uploads // []) | length' <<<"$uploads")"
if aws_s3 s3api get-object --bucket "$b" --key "$key.2" "$tmp/back2" >/dev/null 2>"$tmp/err" &&
	cmp -s "$tmp/model.2" "$tmp/back2"; then
	ok "aws reads back the filled and changed object"
else
	not_ok "aws reads back the filled and changed object" "$(tail -n 1 "$tmp/err")"
fi
check_eq "staging is empty after release" 0 "$(val used_bytes_after)"
# (its "durability" file, the run's setting and boot, stays: sync/stage/stage.h)
check_eq "staging dir holds no data or journal" 0 \
	"$(find "$tmp/staging" -maxdepth 1 -type f ! -name durability | wc -l)"
printf '# commit %s MiB/s, fill %s MiB/s, staged writes %s MiB/s (%s MiB)\n' \
	"$(val commit_mib_s)" "$(val fill_mib_s)" "$(val write_mib_s)" "$MIB"
rm -f "$tmp/model" "$tmp/model.2" "$tmp/back" "$tmp/back2"
aws_s3 s3 rm "s3://$b/$key" >/dev/null 2>&1
aws_s3 s3 rm "s3://$b/$key.2" >/dev/null 2>&1
