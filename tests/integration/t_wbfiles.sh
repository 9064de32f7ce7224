#!/usr/bin/env bash
# t_wbfiles.sh — a file waiting for the write-back drain holds no
# descriptor: 3,000 files copied into a write-back view with the gateway
# started under `prlimit --nofile=1024:1024` (systemd's default soft limit,
# made the hard one too, so the gateway's raise to the hard limit cannot
# help) and cache.drain_delay 600 s (nothing drains by itself meanwhile).
# Checked: the gateway runs at 1,024 descriptors and logs it; `cp -r`
# returns 0 with all 3,000 pending and no staged file holding a
# descriptor (staging.data_fds); the gateway holds a few dozen
# descriptors; the mount reads back all 3,000 while they are pending;
# `facetfs sync` publishes them; S3 lists 3,000 and each one's ETag is the
# MD5 of the file copied (one PUT each), and a few read back byte for byte.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

N=3000
FACETFS=$FACETFS_BUILD/gateway/exe/facetfs
B=$(new_bucket wbfiles)
aws_s3 s3 mb "s3://$B" >/dev/null || { not_ok "make bucket"; exit 1; }
T=$(test_tmp)

view_file "$T/views" w "$B" '{ "prefix": "w/" }' \
	'"layout": { "strip_prefix": "w/" }, "writable": true, "visibility": "eventual", "write_back": true'
gw_config "$T/a.json" "$T/state" "$T/views" "facetfs-wbfiles-$$"
jq '.cache.drain_delay = 600 | .cache.stop_drain = 120' "$T/a.json" >"$T/a.tmp" &&
	mv "$T/a.tmp" "$T/a.json"

# The gateway started under prlimit: start_gateway runs
# $FACETFS_BUILD/gateway/exe/facetfs, here a script that execs the real
# one under the limit (same pid).
mkdir -p "$T/wrap/gateway/exe"
printf '#!/bin/sh\nexec prlimit --nofile=1024:1024 %q "$@"\n' "$FACETFS" >"$T/wrap/gateway/exe/facetfs"
chmod +x "$T/wrap/gateway/exe/facetfs"
M=$T/mnt
FACETFS_BUILD=$T/wrap start_gateway A "$T/a.json" "$M" || { not_ok "gateway starts"; exit 1; }
PID=$(gateway_pid A)
check_eq "the gateway runs with 1,024 descriptors, soft and hard" "1024 1024" \
	"$(awk '/^Max open files/ { print $4, $5 }' "/proc/$PID/limits")"
check "its log says so" grep -q "descriptors: limit 1024" "$(gateway_log A)"

# $N small files of 1..4 KiB, made by one process.
python3 - "$T/src" "$N" <<'PY'
import os, random, sys
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d)
r = random.Random(37)
for i in range(n):
    with open(os.path.join(d, "f%04d" % i), "wb") as f:
        f.write(r.randbytes(1024 + r.randrange(3072)))
PY

if cp -r "$T/src" "$M/w/cp" 2>"$T/cp.err"; then
	ok "cp -r of $N files into the write-back view"
else
	not_ok "cp -r of $N files into the write-back view" "$(head -n 3 "$T/cp.err" | tr '\n' ' ')"
fi
check_eq "all $N pending when cp returns" "$N" "$(stat_field "$M" .drain.pending_files)"
no_data_fds() { [[ $(stat_field "$M" .staging.data_fds) == 0 ]]; }
# (the kernel sends a file's RELEASE after its close returned)
check "no staged file holds a descriptor (staging.data_fds)" wait_for 10 no_data_fds
fds=$(ls "/proc/$PID/fd" | wc -l)
if ((fds < 200)); then
	ok "the gateway holds $fds descriptors with $N files pending"
else
	not_ok "the gateway holds few descriptors with $N files pending" "$fds"
fi
check "the mount reads back all $N while pending" diff -r "$T/src" "$M/w/cp"

check "facetfs sync returns 0" "$FACETFS" sync "$M"
check_eq "nothing pending after it" 0 "$(stat_field "$M" .drain.pending_files)"

# S3's ETag of an object made by one PUT is the MD5 of its bytes.
aws_s3 s3api list-objects-v2 --bucket "$B" --prefix w/cp/ \
	--query 'Contents[].[Key, ETag]' --output text |
	sed 's|^w/cp/||; s|"||g' | LC_ALL=C sort >"$T/s3.md5"
(cd "$T/src" && md5sum f* | awk '{ print $2 "\t" $1 }' | LC_ALL=C sort) >"$T/src.md5"
check_eq "S3 lists $N objects" "$N" "$(wc -l <"$T/s3.md5")"
if diff -q "$T/src.md5" "$T/s3.md5" >/dev/null; then
	ok "each object's ETag is the MD5 of the file copied"
else
	not_ok "each object's ETag is the MD5 of the file copied" \
		"$(diff "$T/src.md5" "$T/s3.md5" | head -n 4 | tr '\n' ' ')"
fi
same() { aws_s3 s3 cp --quiet "s3://$B/w/cp/$1" - | cmp -s - "$T/src/$1"; }
check "the first, a middle and the last read back byte for byte" \
	eval "same f0000 && same f1500 && same f$(printf %04d $((N - 1)))"

check "the gateway stops cleanly" stop_gateway A
