#!/usr/bin/env bash
# t_mount.sh — the read path end to end: objects PUT with /usr/bin/aws and
# s3cmd appear in exactly the views they match, read back byte for byte
# (whole and at odd offsets), show their user metadata as user.* xattrs,
# move between views on a metadata change and disappear on DELETE; tricky
# keys read correctly and keys that cannot be paths never show up.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket mount)
bed_cmd notify "$B" >/dev/null || { not_ok "notify $B"; exit 1; }
T=$(test_tmp)
V=$T/views
view_file "$V" all "$B" '{ "prefix": "" }'
view_file "$V" fasta "$B" '{ "suffix": ".fasta" }'
view_file "$V" black "$B" '{ "metadata": { "color": "black" } }'
view_file "$V" green "$B" '{ "metadata": { "color": "green" } }'
view_file "$V" docs "$B" '{ "prefix": "docs/" }' '"layout": { "strip_prefix": "docs/" }'
gw_config "$T/gw.json" "$T/state" "$V"
M=$T/mnt
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts"; exit 1; }
ok "gateway starts over a bucket"

# The root: one directory per view and .facetfs.
check_eq "root lists the views" ".facetfs all black docs fasta green" \
	"$(ls -A "$M" | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')"

# ---- content of several sizes, read whole and at odd offsets ----
head -c 0 /dev/urandom >"$T/f0"
head -c 1 /dev/urandom >"$T/f1"
head -c $((5 * 1024 * 1024)) /dev/urandom >"$T/f5m"
head -c $((64 * 1024 * 1024)) /dev/urandom >"$T/f64m"
for f in f0 f1 f5m f64m; do
	aws_s3 s3 cp --quiet "$T/$f" "s3://$B/data/$f.bin" --metadata "color=black,Sample=$f" ||
		not_ok "aws put $f"
done
if wait_for 15 test -e "$M/all/data/f64m.bin"; then ok "PUTs appear in view all"; else not_ok "PUTs appear in view all"; fi
for f in f0 f1 f5m f64m; do
	check "content of $f equals the upload (view all)" cmp "$T/$f" "$M/all/data/$f.bin"
	check_eq "size of $f" "$(stat -c %s "$T/$f")" "$(stat -c %s "$M/black/data/$f.bin" 2>&1)"
done
check "content of f5m equals the upload (view black)" cmp "$T/f5m" "$M/black/data/f5m.bin"
check "ranged reads at odd offsets" python3 - "$T/f64m" "$M/all/data/f64m.bin" <<'EOF'
import os, random, sys
want = open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[2], os.O_RDONLY)
rnd = random.Random(7)
cases = [(0, 1), (1, 4095), (4097, 131073), (len(want) - 3, 10), (len(want), 5),
         (12345677, 3 * 1024 * 1024 + 11)]
cases += [(rnd.randrange(len(want)), rnd.randrange(1, 300000)) for _ in range(40)]
for off, n in cases:
    got = os.pread(fd, n, off)
    if got != want[off:off + n]:
        sys.exit("mismatch at offset %d length %d" % (off, n))
EOF
check_eq "not in views it does not match (fasta)" "" "$(ls "$M/fasta" 2>&1)"
check_eq "not in views it does not match (green)" "" "$(ls "$M/green" 2>&1)"

# ---- user metadata as xattrs, and nothing else ----
check_eq "user.color xattr" "black" \
	"$(python3 -c 'import os,sys; print(os.getxattr(sys.argv[1], "user.color").decode())' "$M/all/data/f1.bin" 2>&1)"
check_eq "xattr names are the metadata, lower case" "user.color user.sample" \
	"$(python3 -c 'import os,sys; print(" ".join(sorted(os.listxattr(sys.argv[1]))))' "$M/all/data/f1.bin" 2>&1)"
check_eq "a missing user xattr is ENODATA" "ENODATA" \
	"$(python3 -c '
import errno, os, sys
try: os.getxattr(sys.argv[1], "user.nope"); print("found")
except OSError as e: print(errno.errorcode[e.errno])' "$M/all/data/f1.bin")"

# ---- layout: strip_prefix, directories from keys ----
printf 'hello report\n' >"$T/rep"
aws_s3 s3 cp --quiet "$T/rep" "s3://$B/docs/q1/report.txt"
aws_s3 s3 cp --quiet "$T/rep" "s3://$B/seq/run1/a.fasta"
if wait_for 10 test -e "$M/docs/q1/report.txt"; then ok "strip_prefix maps docs/q1/report.txt to q1/report.txt"; else not_ok "strip_prefix view"; fi
check_eq "docs view lists only its objects" "q1/report.txt" "$(list_files "$M/docs")"
wait_for 10 test -e "$M/fasta/seq/run1/a.fasta"
check_eq "suffix view lists only its objects" "seq/run1/a.fasta" "$(list_files "$M/fasta")"
check "directories are directories" test -d "$M/all/seq/run1"

# ---- side-by-side S3 client: s3cmd ----
printf 's3cmd data\n' >"$T/s3c"
s3cmd_bed -q put "$T/s3c" "s3://$B/other/by-s3cmd.txt" >/dev/null
if wait_for 10 test -e "$M/all/other/by-s3cmd.txt"; then ok "s3cmd PUT appears"; else not_ok "s3cmd PUT appears"; fi
check "s3cmd object reads back" cmp "$T/s3c" "$M/all/other/by-s3cmd.txt"

# ---- copy in place with new metadata moves it between views ----
aws_s3 s3 cp --quiet "s3://$B/data/f1.bin" "s3://$B/data/f1.bin" \
	--metadata color=green --metadata-directive REPLACE
if wait_for 10 test -e "$M/green/data/f1.bin"; then ok "REPLACE copy: appears in green"; else not_ok "REPLACE copy: appears in green"; fi
if wait_for 10 test ! -e "$M/black/data/f1.bin"; then ok "REPLACE copy: gone from black"; else not_ok "REPLACE copy: gone from black"; fi
check_eq "REPLACE copy: xattr follows" "green" \
	"$(python3 -c 'import os,sys; print(os.getxattr(sys.argv[1], "user.color").decode())' "$M/all/data/f1.bin" 2>&1)"

# ---- DELETE ----
ls -l "$M/all/data/f5m.bin" >/dev/null 2>&1   # let the kernel cache the entry
aws_s3 s3 rm --quiet "s3://$B/data/f5m.bin"
if wait_for 10 test ! -e "$M/all/data/f5m.bin"; then ok "DELETE: stat gives ENOENT"; else not_ok "DELETE: stat gives ENOENT"; fi
check_eq "DELETE: not listed" "" "$(ls "$M/all/data" | grep f5m)"
check_eq "DELETE: not in black either" "" "$(ls "$M/black/data" 2>/dev/null | grep f5m)"

# ---- a name looked up before it exists (a negative entry, cached for an
# hour) in a directory the kernel got from a listing, then added ----
ls -l "$M/all/data" >/dev/null
check "a name not there yet gives ENOENT" test ! -e "$M/all/data/late.txt"
aws_s3 s3 cp --quiet "$T/rep" "s3://$B/data/late.txt"
if wait_for 10 test -e "$M/all/data/late.txt"; then ok "the negative entry is invalidated when the name is added"; else not_ok "the negative entry is invalidated when the name is added"; fi
aws_s3 s3 cp --quiet "$T/rep" "s3://$B/data/late2.txt"   # never looked up: listed
if wait_for 10 eval "ls '$M/all/data' | grep -qx late2.txt"; then ok "a name added to a listed directory is listed"; else not_ok "a name added to a listed directory is listed"; fi
check "and stat finds it" test -f "$M/all/data/late2.txt"

# ---- tricky keys ----
printf 'tricky\n' >"$T/tricky"
long=$(python3 -c 'print("/".join(["k" * 240] * 4) + "/" + "z" * 36)')   # 1000 bytes
keys=("sp ace/a b+c%d(e)ü~*.txt" "plus+sign.txt" "pct%41.txt" "amp&lt;<x>.txt" "$long")
for k in "${keys[@]}"; do
	"$AWS" --endpoint-url "$S3_URL" s3api put-object --bucket "$B" --key "$k" \
		--body "$T/tricky" >/dev/null || not_ok "put tricky key"
done
check_eq "the long key is 1000 bytes" 1000 "${#long}"
for k in "${keys[@]}"; do
	if wait_for 10 test -e "$M/all/$k"; then
		check "tricky key reads: ${k:0:40}" cmp "$T/tricky" "$M/all/$k"
	else
		not_ok "tricky key appears: ${k:0:40}"
	fi
done
# Keys that cannot be paths: counted, never shown anywhere.
bad_before=$(stat_field "$M" '.keys.not_a_path')
for k in "bad//double.txt" "../escape.txt" "./dot.txt" "trail/"; do
	"$AWS" --endpoint-url "$S3_URL" s3api put-object --bucket "$B" --key "$k" \
		--body "$T/tricky" >/dev/null || not_ok "put bad key $k"
done
aws_s3 s3 cp --quiet "$T/tricky" "s3://$B/zz-last.txt"
wait_for 10 test -e "$M/all/zz-last.txt"
bad_after=$(stat_field "$M" '.keys.not_a_path')
check "keys that cannot be paths are counted" test "$bad_after" -gt "$bad_before"
check_eq "no escape.txt outside the views" "" "$(ls "$T" | grep -c escape.txt | grep -v '^0$')"
check_eq "no bad key visible in the mount" "" \
	"$(find "$M" -name escape.txt -o -name dot.txt -o -name double.txt 2>/dev/null)"

# ---- status ----
check "facetfs status prints counters" sh -c "'$FACETFS' status '$M' | grep -q '^events'"
check "facetfs status --json is JSON" sh -c "'$FACETFS' status '$M' --json | jq -e .stats.events.applied"
check "facetfs status --json has the views" sh -c "'$FACETFS' status '$M' --json | jq -e '.views | type == \"object\"'"
check_eq ".facetfs holds control, pending, recovered, stats, views" "control pending recovered stats views" \
	"$(ls "$M/.facetfs" | tr '\n' ' ' | sed 's/ $//')"
check "each .facetfs name can be looked up" sh -c "cd '$M/.facetfs' && test -f control && test -f pending && test -L recovered && test -f stats && test -f views"

stop_gateway A
check_eq "gateway stops cleanly on SIGTERM" 0 "$?"
check "mountpoint released" sh -c "! mountpoint -q '$M'"
