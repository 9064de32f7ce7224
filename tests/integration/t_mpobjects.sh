#!/usr/bin/env bash
# t_mpobjects — objects that S3 clients wrote in parts (ETag "MD5-of-MD5s-N",
# events ObjectCreated:CompleteMultipartUpload) behave like any other
# everywhere a version is compared: the first scan and the events index
# them, reads through session and commit views (ranged GETs with
# If-Match on that ETag) return their bytes, a session descriptor keeps
# its version from the burst buffer after a multipart overwrite, the
# buffer serves them after a restart with no GET (its keys use the
# indexed ETag, which must be the one HEAD answers), a rescan finds
# nothing to fix, and their deletion removes them.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket mpobj)
bed_cmd notify "$B" >/dev/null || { not_ok "notify"; exit 1; }
T=$(test_tmp)
view() { view_file "$T/views" "$1" "$B" '{ "prefix": "m/" }' "\"layout\": { \"strip_prefix\": \"m/\" }, $2"; }
view sess '"visibility": "session"'
view com '"visibility": "commit"'
view ev '"visibility": "eventual"'
gw_config "$T/gw.json" "$T/state" "$T/views" "" "" "" 256MiB
M=$T/mnt
st() { stat_field "$M" "$1"; }
drop_caches() { sync; echo 1 >/proc/sys/vm/drop_caches; }
# aws s3 cp sends files over 8 MiB in 8 MiB parts.
put() { aws_s3 s3 cp "$1" "s3://$B/$2" >/dev/null 2>&1; }
etag() { aws_s3 s3api head-object --bucket "$B" --key "$1" --query ETag --output text 2>/dev/null; }

head -c $((20 << 20)) /dev/urandom >"$T/before"
head -c $((18 << 20)) /dev/urandom >"$T/v1"
# v2 has v1's size: the kernel keeps one size per inode, so a descriptor
# of a longer v1 would read only v2's length of it (docs/limits.md).
head -c $((18 << 20)) /dev/urandom >"$T/v2"
head -c $((9 << 20)) /dev/urandom >"$T/late"
put "$T/before" m/before || not_ok "PUT m/before"
e=$(etag m/before)
if [[ $e =~ ^\"[0-9a-f]{32}-3\"$ ]]; then ok "aws wrote m/before in 3 parts: ETag $e"; else not_ok "m/before has a multipart ETag" "got '$e'"; fi

start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts"; exit 1; }

# ---- indexed by the first scan, read through both policies ----
wait_for 20 test -f "$M/sess/before" || not_ok "the first scan lists m/before"
check_eq "its size from the scan" $((20 << 20)) "$(stat -c %s "$M/sess/before" 2>&1)"
check "session view: its bytes" cmp -s "$M/sess/before" "$T/before"
drop_caches
check "commit view: its bytes" cmp -s "$M/com/before" "$T/before"
check_eq "no S3 request failed (no If-Match refused)" 0 "$(st .s3.errors)"

# ---- indexed by an event ----
put "$T/v1" m/obj || not_ok "PUT m/obj"
if wait_for 20 cmp -s "$M/sess/obj" "$T/v1"; then ok "after its CompleteMultipartUpload event: m/obj listed and read"; else not_ok "m/obj from its event"; fi
check_eq "the index has the event's size" $((18 << 20)) "$(stat -c %s "$M/com/obj" 2>&1)"

# ---- a session descriptor keeps v1 across a multipart overwrite; commit reads v2 ----
out=$(python3 - "$M/sess/obj" "$M/com/obj" "$T/v1" "$T/v2" "$B" <<'PY' 2>&1
import os, subprocess, sys, time
sess, com, v1f, v2f, bucket = sys.argv[1:6]
v1, v2 = open(v1f, 'rb').read(), open(v2f, 'rb').read()
fs = os.open(sess, os.O_RDONLY)
fc = os.open(com, os.O_RDONLY)
a = os.pread(fs, len(v1), 0)
b = os.pread(fc, 4096, 0)
subprocess.run(['/usr/bin/aws', '--endpoint-url', os.environ['S3_URL'], 's3', 'cp',
                v2f, 's3://%s/m/obj' % bucket], check=True, stdout=subprocess.DEVNULL)
end = time.time() + 20
while time.time() < end:
    with open(sess, 'rb') as f:
        if f.read() == v2:
            break
    time.sleep(0.1)
else:
    sys.exit('a new open never read v2')
os.sync()
open('/proc/sys/vm/drop_caches', 'w').write('1')
try:
    again = os.pread(fs, len(v1), 0)
except OSError as e:
    sys.exit('the session descriptor: %s' % e)
c2 = os.pread(fc, len(v2) + 1, 0)
name = lambda x: 'v1' if x == v1 else 'v2' if x == v2 else 'other(%d bytes)' % len(x)
print('first=%s new-open=v2 session-descriptor=%s commit-descriptor=%s' % (
    name(a), name(again), name(c2)))
PY
)
check_eq "a new open reads v2; the session descriptor keeps v1; the commit descriptor reads v2" \
	"first=v1 new-open=v2 session-descriptor=v1 commit-descriptor=v2" "$out"

# ---- the burst buffer after a restart: no GET ----
cmp -s "$M/sess/obj" "$T/v2" || not_ok "read m/obj v2 once more"
stop_gateway A
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway restarts"; exit 1; }
check "after a restart: m/obj v2" cmp -s "$M/sess/obj" "$T/v2"
check "after a restart: m/before" cmp -s "$M/sess/before" "$T/before"
check_eq "… both from the burst buffer, no GET" 0 "$(st .s3.get)"
check_eq "… one HEAD per open (the session check), which matched the index" 2 "$(st .s3.head)"
# The eventual view keys its reads by the indexed ETag, the session view
# by HEAD's: the blocks are shared only if the two are the same string.
check "eventual view: m/obj v2" cmp -s "$M/ev/obj" "$T/v2"
check_eq "… from the blocks the session reads stored (indexed ETag = HEAD's), no S3 request" \
	"0 2" "$(st .s3.get) $(st .s3.head)"

# ---- a rescan finds nothing to fix ----
sleep 1.2   # records written by events are "newer than the rescan" for 1 s
out=$("$FACETFS" rescan "$M" 2>&1)
printf '%s\n' "$out" | diag
if grep -qE "^bucket $B: listed 2, added 0, removed 0, updated 0, unchanged 2, " <<<"$out"; then
	ok "rescan: the multipart ETags from LIST equal the indexed ones (unchanged 2)"
else
	not_ok "rescan: nothing to fix" "got '$out'"
fi

# ---- an object written in parts while the gateway is down ----
stop_gateway A
put "$T/late" m/late || not_ok "PUT m/late"
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway restarts"; exit 1; }
if wait_for 20 cmp -s "$M/com/late" "$T/late"; then ok "an event consumed after a restart: m/late read"; else not_ok "m/late after the restart"; fi

# ---- deletion ----
aws_s3 s3 rm "s3://$B/m/obj" >/dev/null 2>&1 || not_ok "DELETE m/obj"
if wait_for 20 test ! -e "$M/sess/obj"; then ok "its delete event removes m/obj"; else not_ok "m/obj removed"; fi
check "m/before is still there" cmp -s "$M/sess/before" "$T/before"

