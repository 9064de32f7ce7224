#!/usr/bin/env bash
# t_multipart — the multipart calls of the S3 client (common/s3.h s3_mpu_*,
# sync/s3/s3_mpu.c) against the bed's radosgw, through s3tool, with
# /usr/bin/aws as the independent client: files of 1 B, exactly one part,
# one part + 1 byte and many parts (part size 64 KiB; the bed lowers RGW's
# minimum part size) read back byte for byte by aws with the "-N" ETag and
# the metadata; an open upload seen by our listing and by aws, then
# aborted; a server-side copy in parts, and one refused for a changed
# source; awkward keys; no upload left open at the end.
. "$(dirname "$0")/../lib/common.sh"
require_bed

tmp=$(test_tmp)
S3TOOL=$FACETFS_BUILD/tests/bed/s3tool
[[ -x $S3TOOL ]] || { not_ok "s3tool built" "no $S3TOOL"; exit 1; }
b=$(new_bucket mpu)
s3rc() { "$S3TOOL" "$@" >/dev/null 2>&1; echo $?; }
# open_uploads: how many uploads aws lists (it prints nothing for none).
open_uploads() {
	local out
	out=$(aws_s3 s3api list-multipart-uploads --bucket "$b" --output json 2>&1) || {
		echo "aws failed: $out"
		return
	}
	[[ -z $out ]] && out='{}'
	jq -r '(.Uploads // []) | length' <<<"$out"
}

check "aws: create bucket" aws_s3 s3api create-bucket --bucket "$b"

# --- files of several sizes: bytes, ETag form, metadata -----------------
part=65536
declare -A sizes=([one-byte]=1 [one-part]=$part [part-plus-one]=$((part + 1))
	[many-parts]=$((part * 37 + 1234)))
for name in one-byte one-part part-plus-one many-parts; do
	size=${sizes[$name]}
	head -c "$size" /dev/urandom >"$tmp/$name"
	nparts=$(((size + part - 1) / part))
	if etag=$("$S3TOOL" mput -m color=green -C text/plain "$b" "mp/$name" "$tmp/$name" 64K 2>"$tmp/err"); then
		ok "mput $name ($size B, $nparts parts)"
	else
		not_ok "mput $name" "$(tail -n 1 "$tmp/err")"
		continue
	fi
	check_eq "mput $name: ETag ends in -$nparts" "$nparts" "${etag##*-}"
	if aws_s3 s3api get-object --bucket "$b" --key "mp/$name" "$tmp/$name.aws" >"$tmp/$name.json" 2>"$tmp/err" &&
		cmp -s "$tmp/$name" "$tmp/$name.aws"; then
		ok "mput $name: aws reads the same bytes"
	else
		not_ok "mput $name: aws reads the same bytes" "$(tail -n 1 "$tmp/err")"
	fi
	check_eq "mput $name: aws sees our ETag" "\"$etag\"" "$(jq -r .ETag "$tmp/$name.json")"
	check_eq "mput $name: metadata kept" green "$(jq -r .Metadata.color "$tmp/$name.json")"
	check_eq "mput $name: content type kept" text/plain "$(jq -r .ContentType "$tmp/$name.json")"
done
check_eq "no upload left open after the puts" 0 "$(open_uploads)"

# --- an open upload: listed by us and by aws, then aborted --------------
if id=$("$S3TOOL" mstart "$b" "open/ü key" 2>"$tmp/err"); then
	ok "mstart leaves an upload open"
	"$S3TOOL" mlist "$b" >"$tmp/mlist" 2>&1
	check_eq "mlist shows it with its id and date" "open/ü key	$id	dated" "$(cat "$tmp/mlist")"
	check_eq "aws lists one open upload" 1 "$(open_uploads)"
	check_eq "mlist with a prefix that does not match shows nothing" "" "$("$S3TOOL" mlist "$b" other/ 2>&1)"
	check_eq "mabort: 0" 0 "$(s3rc mabort "$b" "open/ü key" "$id")"
	check_eq "aws lists no open upload after the abort" 0 "$(open_uploads)"
	check_eq "mabort again (upload gone) is still 0" 0 "$(s3rc mabort "$b" "open/ü key" "$id")"
else
	not_ok "mstart" "$(tail -n 1 "$tmp/err")"
fi

# --- many open uploads: the listing pages (RGW pages at 1,000) ----------
ids=0
for i in $(seq 1 30); do
	"$S3TOOL" mstart "$b" "many/$i" >>"$tmp/many.ids" 2>/dev/null && ids=$((ids + 1))
done
check_eq "30 uploads started" 30 "$ids"
check_eq "mlist lists all 30" 30 "$("$S3TOOL" mlist "$b" many/ | wc -l)"
aborted=0
while IFS=$'\t' read -r k id _; do
	[[ $("$S3TOOL" mabort "$b" "$k" "$id" >/dev/null 2>&1; echo $?) == 0 ]] && aborted=$((aborted + 1))
done < <("$S3TOOL" mlist "$b" many/)
check_eq "all 30 aborted" 30 "$aborted"

# --- server-side copy in parts -------------------------------------------
if [[ -f $tmp/many-parts ]]; then
	src_etag=$(aws_s3 s3api head-object --bucket "$b" --key mp/many-parts | jq -r .ETag | tr -d '"')
	if cetag=$("$S3TOOL" mcopy -i "$src_etag" -m kind=copy "$b" mp/many-parts "copy/many parts+" 100K 2>"$tmp/err"); then
		ok "mcopy in parts of 100 KiB"
		aws_s3 s3api get-object --bucket "$b" --key "copy/many parts+" "$tmp/copy.aws" >"$tmp/copy.json" 2>&1
		if cmp -s "$tmp/many-parts" "$tmp/copy.aws"; then ok "mcopy: same bytes"; else not_ok "mcopy: same bytes"; fi
		check_eq "mcopy: ETag ends in -24" 24 "${cetag##*-}"
		check_eq "mcopy: new metadata" copy "$(jq -r .Metadata.kind "$tmp/copy.json")"
	else
		not_ok "mcopy in parts of 100 KiB" "$(tail -n 1 "$tmp/err")"
	fi
	check_eq "mcopy of a changed source is ESTALE (116)" 116 \
		"$(s3rc mcopy -i 0123456789abcdef0123456789abcdef "$b" mp/many-parts copy/stale 100K)"
	check_eq "mcopy of a missing source is ENOENT (2)" 2 "$(s3rc mcopy "$b" mp/missing copy/none 100K)"
fi
check_eq "no upload left open at the end" 0 "$(open_uploads)"
