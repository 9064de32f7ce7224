#!/usr/bin/env bash
# t_s3 — the S3 client (sync/s3/s3_http.h, its layers in sync/s3/s3_req.h)
# against the bed's radosgw, through its driver s3tool, with /usr/bin/aws
# as the independent client: awkward keys
# (space, '+', '%', '(', 'ü', '~', '*', '&', '<', '"', a 1,000-byte key),
# GETs of 0 B .. 64 MiB and ranged GETs compared with cmp, HEAD metadata,
# LIST across pages (XML entities), PUT/COPY metadata read back by aws,
# DELETE, If-Match -> ESTALE, and a stopped radosgw failing in bounded time.
# Prints the 64 MiB cold GET rate next to curl's and LIST keys/s next to
# aws's as comments.
. "$(dirname "$0")/../lib/common.sh"
require_bed

tmp=$(test_tmp)
S3TOOL=$FACETFS_BUILD/tests/bed/s3tool
S3FILL=$FACETFS_BUILD/tests/bench/s3fill
[[ -x $S3TOOL ]] || { not_ok "s3tool built" "no $S3TOOL"; exit 1; }
b=$(new_bucket s3)

# s3rc CMD...: run s3tool, print its exit status (the errno on failure).
s3rc() { "$S3TOOL" "$@" >/dev/null 2>&1; echo $?; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

check "aws: create bucket" aws_s3 s3api create-bucket --bucket "$b"
check_eq "check: existing bucket" 0 "$(s3rc check "$b")"
check_eq "check: missing bucket is ENOENT (2)" 2 "$(s3rc check "$b-missing")"

# --- awkward keys: aws writes, we read; we write, aws reads ---------------
long=$(printf 'long/%0995d' 7)   # 1,000 bytes
keys=("dir one/sp ace.txt" "plus+sign" "per%cent%20x" "paren(1)" "ü/ümlaut ü.txt"
	"tilde~" "star*" "amp&er" "lt<gt>" "quo\"te'apos" "a/./b/../c" "$long")
((${#long} == 1000)) || not_ok "1,000-byte key built" "length ${#long}"
i=0
for k in "${keys[@]}"; do
	i=$((i + 1))
	printf 'object %d: %s\n' "$i" "$k" >"$tmp/in.$i"
	if ! aws_s3 s3api put-object --bucket "$b" --key "$k" --body "$tmp/in.$i" >/dev/null 2>"$tmp/err"; then
		not_ok "aws put '${k:0:40}'" "$(tail -n 1 "$tmp/err")"
		continue
	fi
	if "$S3TOOL" get "$b" "$k" >"$tmp/out.$i" 2>"$tmp/err" && cmp -s "$tmp/in.$i" "$tmp/out.$i"; then
		ok "get key '${k:0:40}' (aws put)"
	else
		not_ok "get key '${k:0:40}' (aws put)" "$(tail -n 1 "$tmp/err")"
	fi
	k2="w $k"
	if "$S3TOOL" put "$b" "$k2" "$tmp/in.$i" >/dev/null 2>"$tmp/err" &&
		aws_s3 s3api get-object --bucket "$b" --key "$k2" "$tmp/back.$i" >/dev/null 2>>"$tmp/err" &&
		cmp -s "$tmp/in.$i" "$tmp/back.$i"; then
		ok "put key 'w ${k:0:40}' read by aws"
	else
		not_ok "put key 'w ${k:0:40}' read by aws" "$(tail -n 1 "$tmp/err")"
	fi
done

# --- LIST: the same keys, sizes and ETags as aws sees (one page) -----------
aws_s3 s3api list-objects-v2 --bucket "$b" --output json >"$tmp/aws.json" 2>"$tmp/err"
jq -r '.Contents[] | "\(.Size) \(.ETag | ltrimstr("\"") | rtrimstr("\"")) \(.Key)"' \
	"$tmp/aws.json" | LC_ALL=C sort >"$tmp/aws.list"
"$S3TOOL" list -l "$b" 2>"$tmp/err" | cut -d' ' -f1,2,4- |
	LC_ALL=C sort >"$tmp/our.list"
n=$(wc -l <"$tmp/our.list")
if ((n == 2 * ${#keys[@]})) && cmp -s "$tmp/aws.list" "$tmp/our.list"; then
	ok "list: $n keys with entities, sizes, ETags equal to aws's"
else
	not_ok "list: keys, sizes, ETags equal to aws's" "$n keys; diff follows"
	diff "$tmp/aws.list" "$tmp/our.list" | head -n 10 | diag
fi
check_eq "list: prefix 'ü/'" "ü/ümlaut ü.txt" "$("$S3TOOL" list "$b" "ü/")"

# --- GETs of 0 B, 1 B, 5 MiB, 64 MiB and ranges at odd offsets -------------
for spec in 0:0 1:1 5m:5242880 64m:67108864; do
	name=${spec%%:*} size=${spec#*:}
	head -c "$size" /dev/urandom >"$tmp/o.$name"
	aws_s3 s3 cp --quiet "$tmp/o.$name" "s3://$b/blob/$name" || not_ok "aws put blob $name"
	if "$S3TOOL" get "$b" "blob/$name" >"$tmp/g.$name" 2>"$tmp/err" && cmp -s "$tmp/o.$name" "$tmp/g.$name"; then
		ok "get whole $name object ($size B)"
	else
		not_ok "get whole $name object ($size B)" "$(tail -n 1 "$tmp/err")"
	fi
done
# ranged reads: OFF LEN on the 5 MiB object, compared with tail|head
for r in "1 1" "4097 1000003" "5242879 1" "5242877 10" "1048575 2097153" "0 5242880"; do
	set -- $r
	off=$1 len=$2
	tail -c +$((off + 1)) "$tmp/o.5m" | head -c "$len" >"$tmp/want"
	if "$S3TOOL" get "$b" blob/5m "$off" "$len" >"$tmp/got" 2>"$tmp/err" && cmp -s "$tmp/want" "$tmp/got"; then
		ok "ranged get off=$off len=$len ($(stat -c %s "$tmp/got") B)"
	else
		not_ok "ranged get off=$off len=$len" "$(tail -n 1 "$tmp/err")"
	fi
done
for off in 5242880 6000000; do
	out=$("$S3TOOL" get "$b" blob/5m "$off" 10 2>"$tmp/err" | wc -c)
	check_eq "get past the end (off=$off) is 0 bytes, no error" "0 0" "$out ${PIPESTATUS[0]}"
done
check_eq "get of the 0 B object with a range is 0 bytes" 0 "$("$S3TOOL" get "$b" blob/0 0 100 | wc -c)"
check_eq "get of a missing key is ENOENT (2)" 2 "$(s3rc get "$b" nothere 0 10)"

# --- 64 MiB cold sequential GET: ours next to curl's (comments) ------------
url_path=$S3_URL/$b/blob/64m
for i in 1 2; do
	"$S3TOOL" get -t "$b" blob/64m 2>>"$tmp/rate.ours" >/dev/null
	curl -s -o /dev/null --aws-sigv4 "aws:amz:${AWS_DEFAULT_REGION:-default}:s3" \
		-u "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -w '%{speed_download}\n' \
		"$url_path" >>"$tmp/rate.curl"
done
echo "# 64 MiB GET, s3_get: $(grep -o '[0-9.]* MiB/s' "$tmp/rate.ours" | tr '\n' ' ')" \
	"curl: $(awk '{ printf "%.1f MiB/s ", $1 / 1048576 }' "$tmp/rate.curl")"

# --- one client, 8 threads: GETs and HEADs all return the same bytes ------
if "$S3TOOL" par -n 8 -r 50 "$b" blob/5m >"$tmp/par" 2>&1; then
	ok "8 threads share one client: 800 GET/HEAD of 5 MiB, all equal"
	diag <"$tmp/par"
else
	not_ok "8 threads share one client" "$(tail -n 1 "$tmp/par")"
fi
check_eq "8 threads on a 1 KiB object: every copy equal" 0 "$(s3rc par -n 8 -r 100 "$b" "$long")"

# --- HEAD: metadata and content type written by aws ------------------------
aws_s3 s3api put-object --bucket "$b" --key "meta/m 1.txt" --body "$tmp/in.1" \
	--content-type text/plain --metadata color=black,Shape=round >/dev/null
want_etag=$(md5sum <"$tmp/in.1" | cut -d' ' -f1)
"$S3TOOL" head "$b" "meta/m 1.txt" >"$tmp/head" 2>"$tmp/err"
check_eq "head: size, etag, content type, metadata (lower-case names)" \
	"ctype=text/plain etag=$want_etag meta.color=black meta.shape=round size=$(stat -c %s "$tmp/in.1")" \
	"$(grep -v mtime_ns "$tmp/head" | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')"
mt=$(sed -n 's/^mtime_ns=//p' "$tmp/head")
aws_mt=$(date -d "$(aws_s3 s3api head-object --bucket "$b" --key "meta/m 1.txt" | jq -r .LastModified)" +%s)
check_eq "head: mtime equals aws's LastModified" "$aws_mt" "$((mt / 1000000000))"

# --- PUT with metadata, read back by aws -----------------------------------
etag=$("$S3TOOL" put -C text/csv -m color=green -m a=1 -m a-b=2 -m "note=two  spaces" \
	"$b" "put meta/ü 1.csv" "$tmp/in.2" 2>"$tmp/err")
check_eq "put: returned ETag is the MD5 of the data" "$(md5sum <"$tmp/in.2" | cut -d' ' -f1)" "$etag"
aws_s3 s3api head-object --bucket "$b" --key "put meta/ü 1.csv" >"$tmp/h.json" 2>"$tmp/err"
check_eq "put: aws sees content type and metadata (a, a-b, double space)" \
	"text/csv|green|1|2|two  spaces|\"$etag\"" \
	"$(jq -r '[.ContentType, .Metadata.color, .Metadata.a, .Metadata["a-b"], .Metadata.note, .ETag] | join("|")' "$tmp/h.json")"

# --- COPY: metadata REPLACE on a key with spaces and ü; plain copy keeps ---
etag=$("$S3TOOL" copy -m color=blue -m new=yes "$b" "put meta/ü 1.csv" "copied/ü 2 (x).csv" 2>"$tmp/err")
aws_s3 s3api head-object --bucket "$b" --key "copied/ü 2 (x).csv" >"$tmp/c.json" 2>>"$tmp/err"
check_eq "copy REPLACE: new metadata only, content type kept, ETag" \
	"text/csv|{\"color\":\"blue\",\"new\":\"yes\"}|\"$etag\"" \
	"$(jq -c -r '[.ContentType, (.Metadata | tostring), .ETag] | join("|")' "$tmp/c.json")"
aws_s3 s3api get-object --bucket "$b" --key "copied/ü 2 (x).csv" "$tmp/c.data" >/dev/null 2>&1
check "copy REPLACE: same bytes" cmp "$tmp/in.2" "$tmp/c.data"
"$S3TOOL" copy "$b" "put meta/ü 1.csv" "copied/plain copy.csv" >/dev/null 2>"$tmp/err"
check_eq "copy without metadata keeps it" "green|text/csv" \
	"$(aws_s3 s3api head-object --bucket "$b" --key "copied/plain copy.csv" | jq -r '[.Metadata.color, .ContentType] | join("|")')"
check_eq "copy of a missing key is ENOENT (2)" 2 "$(s3rc copy "$b" nothere "x")"

# --- If-Match --------------------------------------------------------------
check_eq "get with the current ETag as If-Match" 0 "$(s3rc get -i "$want_etag" "$b" "meta/m 1.txt" 0 5)"
check_eq "get with a stale If-Match is ESTALE (116)" 116 \
	"$(s3rc get -i 0123456789abcdef0123456789abcdef "$b" "meta/m 1.txt" 0 5)"

# --- DELETE ----------------------------------------------------------------
check_eq "delete" 0 "$(s3rc delete "$b" "copied/plain copy.csv")"
if aws_s3 s3api head-object --bucket "$b" --key "copied/plain copy.csv" >/dev/null 2>&1; then
	not_ok "aws: deleted key is gone"
else
	ok "aws: deleted key is gone"
fi
check_eq "head of the deleted key is ENOENT (2)" 2 "$(s3rc head "$b" "copied/plain copy.csv")"
check_eq "delete of a missing key is not an error" 0 "$(s3rc delete "$b" "copied/plain copy.csv")"

# --- LIST across pages: 2,500 keys, same set as aws; rate vs aws -----------
if [[ -x $S3FILL ]] && "$S3FILL" "$b" "many/" 2500 --size 10 --threads 8 >"$tmp/fill" 2>&1; then
	t0=$(now_ms)
	"$S3TOOL" list "$b" many/ 2>"$tmp/err" | LC_ALL=C sort >"$tmp/many.ours"
	t1=$(now_ms)
	aws_s3 s3api list-objects-v2 --bucket "$b" --prefix many/ --output json 2>>"$tmp/err" |
		jq -r '.Contents[].Key' | LC_ALL=C sort >"$tmp/many.aws"
	t2=$(now_ms)
	n=$(wc -l <"$tmp/many.ours")
	if ((n == 2500)) && cmp -s "$tmp/many.ours" "$tmp/many.aws"; then
		ok "list: 2,500 keys over 3 pages, same as aws"
	else
		not_ok "list: 2,500 keys over 3 pages, same as aws" "$n keys, $(wc -l <"$tmp/many.aws") from aws"
	fi
	echo "# LIST 2,500 keys: s3tool $((t1 - t0)) ms, aws $((t2 - t1)) ms (process start included)"
else
	not_ok "s3fill 2,500 keys" "$(tail -n 1 "$tmp/fill" 2>/dev/null)"
fi

# --- radosgw stopped: bounded failure; back after restart ------------------
if bed_cmd rgw-stop >"$tmp/stop" 2>&1; then
	t0=$(now_ms)
	rc=$(s3rc check "$b")
	dt=$(($(now_ms) - t0))
	check_eq "rgw stopped: check is EHOSTUNREACH (113)" 113 "$rc"
	if ((dt < 10000)); then ok "rgw stopped: failure within 10 s (${dt} ms)"; else not_ok "rgw stopped: failure within 10 s" "${dt} ms"; fi
	check_eq "rgw stopped: get is EHOSTUNREACH (113)" 113 "$(s3rc get "$b" blob/1)"
	if bed_cmd rgw-start >"$tmp/start" 2>&1; then
		wait_for 20 "$S3TOOL" check "$b"
		check_eq "rgw restarted: get works again" 0 "$(s3rc get "$b" blob/1)"
	else
		not_ok "bed rgw-start" "$(tail -n 1 "$tmp/start")"
	fi
else
	not_ok "bed rgw-stop" "$(tail -n 1 "$tmp/stop")"
fi
