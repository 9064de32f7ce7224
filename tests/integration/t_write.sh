#!/usr/bin/env bash
# t_write.sh — writes through views, with two gateways (A and B: separate
# mounts, state dirs and consumer groups) on one bucket, plus aws as an
# independent S3 client: read-your-writes, commit and session visibility,
# on_create metadata, rename/unlink/truncate/setxattr, no torn GETs while a
# 200 MiB file is written, EIO when RGW is down at close, concurrent commits
# of one key from both gateways.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket write)
bed_cmd notify "$B" >/dev/null || { not_ok "notify"; exit 1; }
T=$(test_tmp)
V=$T/views
view_file "$V" sess "$B" '{ "prefix": "s/" }' \
	'"layout": { "strip_prefix": "s/" }, "writable": true, "visibility": "session"'
view_file "$V" comm "$B" '{ "prefix": "c/" }' \
	'"layout": { "strip_prefix": "c/" }, "writable": true, "visibility": "commit"'
view_file "$V" black "$B" '{ "metadata": { "color": "black" } }' \
	'"writable": true, "on_create": { "metadata": { "color": "black" } }'
view_file "$V" ro "$B" '{ "prefix": "s/" }'
# A bucket that sends no events: the index keeps what the start's scan saw.
Q=$(new_bucket quiet)
{ aws_s3 s3 mb "s3://$Q" >/dev/null &&
	printf 'small' | aws_s3 s3 cp --quiet - "s3://$Q/grow.bin"; } ||
	{ not_ok "an object in a bucket with no notification"; exit 1; }
view_file "$V" quiet "$Q" '{ "prefix": "" }'
view_file "$V" txt "$B" '{ "prefix": "t/", "suffix": ".txt" }' \
	'"layout": { "strip_prefix": "t/" }, "writable": true'
gw_config "$T/a.json" "$T/state-a" "$V" "facetfs-wa-$$"
gw_config "$T/b.json" "$T/state-b" "$V" "facetfs-wb-$$"
A=$T/mnt-a
MB=$T/mnt-b
start_gateway A "$T/a.json" "$A" || { not_ok "gateway A starts"; exit 1; }
start_gateway B "$T/b.json" "$MB" || { not_ok "gateway B starts"; exit 1; }
ok "two gateways on one bucket"
s3get() { "$AWS" --endpoint-url "$S3_URL" s3 cp --quiet "s3://$B/$1" -; }

# ---- read-your-writes before close; close publishes ----
check "read-your-writes on A before close" python3 - "$A/sess/ryw.txt" <<'PY'
import os, sys
p = sys.argv[1]
fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
os.write(fd, b"hello, not closed yet")
r = os.open(p, os.O_RDONLY)
got = os.pread(r, 100, 0)
assert got == b"hello, not closed yet", got
assert os.stat(p).st_size == 21
os.close(r)
os.close(fd)
PY
check_eq "after close, S3 has the object" "hello, not closed yet" "$(s3get s/ryw.txt)"
if wait_for 10 test -e "$MB/sess/ryw.txt"; then ok "after the event, B lists it"; else not_ok "after the event, B lists it"; fi
check_eq "B reads it" "hello, not closed yet" "$(cat "$MB/sess/ryw.txt" 2>&1)"
check "a read-only view refuses writes (EROFS)" python3 -c '
import errno, os, sys
try:
    os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644); sys.exit("created")
except OSError as e:
    sys.exit(0 if e.errno == errno.EROFS else "errno %d" % e.errno)' "$A/ro/nope.txt"
check "a name the view cannot match is EINVAL" python3 -c '
import errno, os, sys
try:
    open(sys.argv[1], "w").close(); sys.exit("created")
except OSError as e:
    sys.exit(0 if e.errno == errno.EINVAL else "errno %d" % e.errno)' "$A/txt/x.bin"

# ---- commit: fsync publishes; B's earlier descriptor sees the new bytes ----
printf 'version-1 commit' >"$A/comm/f.txt"
wait_for 10 test -e "$MB/comm/f.txt"
check "commit: fsync publishes to S3 and B's earlier descriptor" python3 - "$A/comm/f.txt" "$MB/comm/f.txt" "$S3_URL" "$B" <<'PY'
import os, subprocess, sys
pa, pb, url, bucket = sys.argv[1:]
rb = os.open(pb, os.O_RDONLY)                     # opened on B before the fsync
assert os.pread(rb, 100, 0) == b"version-1 commit"
fd = os.open(pa, os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"version-2 COMMIT!")
os.fsync(fd)                                      # visibility point
s3 = subprocess.run(["/usr/bin/aws", "--endpoint-url", url, "s3", "cp", "--quiet",
                     "s3://%s/c/f.txt" % bucket, "-"], capture_output=True, check=True).stdout
assert s3 == b"version-2 COMMIT!", s3
got = os.pread(rb, 100, 0)
assert got == b"version-2 COMMIT!", got
os.close(fd)
os.close(rb)
PY

# ---- session: close publishes; an earlier descriptor never mixes ----
python3 -c 'import sys; sys.stdout.buffer.write(b"A" * 300000)' >"$A/sess/sv.bin"
wait_for 10 test -e "$MB/sess/sv.bin"
check "session: old descriptor reads old bytes or ESTALE, never a mix; new open sees new" \
	python3 - "$A/sess/sv.bin" "$MB/sess/sv.bin" <<'PY'
import errno, os, sys, time
pa, pb = sys.argv[1:]
rb = os.open(pb, os.O_RDONLY)
first = os.pread(rb, 4096, 0)
assert first == b"A" * 4096
with open(pa, "wb") as f:                          # close on A = commit
    f.write(b"B" * 300000)
deadline = time.time() + 10
while time.time() < deadline:                      # wait for the event on B
    with open(pb, "rb") as f:
        if f.read(1) == b"B":
            break
    time.sleep(0.05)
with open(pb, "rb") as f:
    assert f.read() == b"B" * 300000, "new open sees the new version"
# the old descriptor, after the event: all old, or ESTALE; never B
for off in (0, 4096, 100000, 299000):
    try:
        got = os.pread(rb, 1000, off)
        assert got == b"A" * min(1000, 300000 - off), "mixed or short at %d" % off
    except OSError as e:
        assert e.errno == errno.ESTALE, e
os.close(rb)
PY

# ---- session: an open after another client's close, its event not applied ----
check_eq "quiet: the scan's size is what the kernel holds" 5 "$(stat -c %s "$MB/quiet/grow.bin")"
python3 -c 'import sys; sys.stdout.buffer.write(b"G" * 300000)' |
	aws_s3 s3 cp --quiet - "s3://$Q/grow.bin"
before=$(stat_field "$MB" .fuse.open_direct_size)
check "session: an open reads the whole of a grown version before its event" \
	python3 - "$MB/quiet/grow.bin" <<'PY'
import sys
with open(sys.argv[1], "rb") as f:
    got = f.read()
assert got == b"G" * 300000, (len(got), got[:16])
PY
check_eq "… through direct I/O (fuse.open_direct_size)" 1 \
	"$(( $(stat_field "$MB" .fuse.open_direct_size) - before ))"

# ---- on_create metadata ----
printf 'made in black\n' >"$A/black/made.txt"
meta=$("$AWS" --endpoint-url "$S3_URL" s3api head-object --bucket "$B" --key made.txt 2>&1 | jq -r .Metadata.color)
check_eq "on_create metadata is in S3" black "$meta"
if wait_for 10 test -e "$MB/black/made.txt"; then ok "created object appears in its view on B"; else not_ok "created object appears in its view on B"; fi

# ---- rename, unlink, truncate, setxattr ----
printf 'rename me\n' >"$A/sess/old.txt"
mv "$A/sess/old.txt" "$A/sess/new.txt"; rc=$?
check_eq "rename succeeds" 0 "$rc"
check_eq "rename: new name in S3" "rename me" "$(s3get s/new.txt 2>&1)"
check "rename: old name gone from S3" sh -c "! '$AWS' --endpoint-url '$S3_URL' s3api head-object --bucket '$B' --key s/old.txt >/dev/null 2>&1"
if wait_for 10 sh -c "test -e '$MB/sess/new.txt' && test ! -e '$MB/sess/old.txt'"; then ok "rename: B follows"; else not_ok "rename: B follows"; fi
check "rename to a name the view cannot match is EINVAL" python3 -c '
import errno, os, sys
try:
    os.rename(sys.argv[1], sys.argv[2]); sys.exit("renamed")
except OSError as e:
    sys.exit(0 if e.errno in (errno.EINVAL, errno.EXDEV) else "errno %d" % e.errno)' "$A/sess/new.txt" "$A/comm/moved.txt"

truncate -s 4 "$A/sess/new.txt"
check_eq "truncate: S3 has 4 bytes" "rena" "$(s3get s/new.txt 2>&1)"
if wait_for 10 sh -c "[ \$(stat -c %s '$MB/sess/new.txt') = 4 ]"; then ok "truncate: B follows"; else not_ok "truncate: B follows"; fi

python3 -c 'import os,sys; os.setxattr(sys.argv[1], "user.color", b"black")' "$A/sess/new.txt"
check_eq "setxattr: S3 has the metadata" black \
	"$("$AWS" --endpoint-url "$S3_URL" s3api head-object --bucket "$B" --key s/new.txt | jq -r .Metadata.color)"
check_eq "setxattr: content kept" "rena" "$(s3get s/new.txt 2>&1)"
if wait_for 10 test -e "$MB/black/s/new.txt"; then ok "setxattr: B shows it in view black"; else not_ok "setxattr: B shows it in view black"; fi

rm "$A/sess/new.txt"; rc=$?
check_eq "unlink succeeds" 0 "$rc"
check "unlink: gone from S3" sh -c "! '$AWS' --endpoint-url '$S3_URL' s3api head-object --bucket '$B' --key s/new.txt >/dev/null 2>&1"
if wait_for 10 test ! -e "$MB/sess/new.txt"; then ok "unlink: B follows"; else not_ok "unlink: B follows"; fi

mkdir "$A/sess/newdir" && printf 'in dir\n' >"$A/sess/newdir/f.txt"
check_eq "mkdir + create inside" "in dir" "$(s3get s/newdir/f.txt 2>&1)"
mkdir "$A/sess/emptydir"
check "an empty made directory is listed" sh -c "ls '$A/sess' | grep -qx emptydir"
check "rmdir of an empty made directory" rmdir "$A/sess/emptydir"
mkdir "$A/sess/keptdir0" && mv "$A/sess/keptdir0" "$A/sess/keptdir"
check "rename of an empty made directory" sh -c "ls '$A/sess' | grep -qx keptdir"

# ---- a GET loop never sees a partial object while 200 MiB are written ----
head -c $((200 * 1024 * 1024)) /dev/urandom >"$T/big"
printf 'small old version\n' >"$A/sess/big.bin"
python3 - "$B" "$T/big" "$FACETFS_BUILD/tests/bed/s3tool" >"$T/getloop" 2>&1 <<'PY' &
import hashlib, subprocess, sys, time
bucket, big, s3tool = sys.argv[1:]
bigd = open(big, "rb").read()
old = b"small old version\n"
gets = partial = tear = 0
end = time.time() + 120
while time.time() < end:
    r = subprocess.run([s3tool, "get", bucket, "s/big.bin"], capture_output=True)
    if r.returncode != 0:
        continue
    gets += 1
    d = r.stdout
    if len(d) not in (len(old), len(bigd)):
        partial += 1
        print("PARTIAL: a GET returned %d bytes" % len(d), flush=True)
    elif d != old and d != bigd:
        # RGW 16 (memstore) itself, at the moment a PUT completes, can
        # answer with the old length and the new bytes; reproduced with a
        # plain PUT from s3tool (docs/testing.md, notes for test writers). Counted, not ours.
        tear += 1
    print("GETs %d, partial %d, rgw old-length/new-bytes answers %d" % (gets, partial, tear), flush=True)
PY
loop=$!
# The copy starts once the loop has made a GET (its start-up, reading 200
# MiB, can outlast a fast copy); its count then must grow during the copy.
gets_now() { sed -n 's/^GETs \([0-9]*\),.*/\1/p' "$T/getloop" | tail -n 1; }
for _ in $(seq 1 600); do [[ -n $(gets_now) ]] && break; sleep 0.05; done
gets0=$(gets_now)
cp "$T/big" "$A/sess/big.bin"; rc=$?
sleep 0.5
kill "$loop" 2>/dev/null; wait "$loop" 2>/dev/null
check_eq "200 MiB copy through the mount" 0 "$rc"
check "200 MiB object in S3 equals the file" sh -c "'$AWS' --endpoint-url '$S3_URL' s3 cp --quiet s3://$B/s/big.bin - | cmp - '$T/big'"
check "the GET loop never saw a partial object" sh -c "! grep -q PARTIAL '$T/getloop'"
check "the GET loop made GETs during the copy (${gets0:-none} before it, $(gets_now) after)" \
	test "$(gets_now)" -gt "${gets0:--1}"
tail -n 1 "$T/getloop" | diag

# ---- S3 down at close: EIO, data kept; back up: the next commit uploads ----
# The descriptor stays in one process that forks nothing (a fork's close
# of the inherited descriptor would be a commit point of its own).
mkfifo "$T/go"
python3 - "$A/sess/eio.txt" "$T/go" >"$T/eio.out" 2>&1 <<'PY' &
import errno, os, sys
p, go = sys.argv[1:]
fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
os.write(fd, b"precious data")
print("written", flush=True)
open(go).read()                      # wait until RGW is down
try:
    os.close(fd)
    print("close returned 0")
except OSError as e:
    print("close errno", errno.errorcode.get(e.errno, e.errno))
PY
rgw_down_while_closing "$T/eio.out" "$T/go" $!
check_eq "RGW down during close: close fails with EIO" "close errno EIO" "$(tail -n 1 "$T/eio.out")"
check "staged data survives in the staging directory" sh -c "grep -rl 'precious data' '$T/state-a/cache/staging' | grep -q ."
check "S3 does not have it" sh -c "! '$AWS' --endpoint-url '$S3_URL' s3api head-object --bucket '$B' --key s/eio.txt >/dev/null 2>&1"

# ---- both gateways commit one key at once ----
head -c 3000000 /dev/urandom >"$T/va"; head -c 3000000 /dev/urandom >"$T/vb"
cp "$T/va" "$A/sess/race.bin" & ca=$!
cp "$T/vb" "$MB/sess/race.bin" & cb=$!
wait "$ca" "$cb"     # not a bare wait: the gateways are jobs of this shell too
"$AWS" --endpoint-url "$S3_URL" s3 cp --quiet "s3://$B/s/race.bin" "$T/got"
if cmp -s "$T/got" "$T/va" || cmp -s "$T/got" "$T/vb"; then ok "race: S3 holds exactly one version in full"; else not_ok "race: S3 holds exactly one version in full"; fi
converged() { cmp -s "$A/sess/race.bin" "$T/got" && cmp -s "$MB/sess/race.bin" "$T/got"; }
if wait_for 15 converged; then ok "race: both mounts converge to it"; else not_ok "race: both mounts converge to it"; fi

# ---- kill -9 between write and close: the data goes to recovered/ ----
mkfifo "$T/go2"
python3 - "$A/sess/crash.txt" "$T/go2" >"$T/crash.out" 2>&1 <<'PY' &
import os, sys
p, go = sys.argv[1:]
fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
os.write(fd, b"written before the crash")
print("written", flush=True)
open(go).read()
try:
    os.close(fd)
except OSError as e:
    print("close after the crash:", e.strerror)
PY
writer=$!
wait_for 10 grep -q written "$T/crash.out"
crash_gateway A
echo go >"$T/go2"
wait "$writer"
fusermount3 -uz "$A" 2>/dev/null
start_gateway A "$T/a.json" "$A" || not_ok "A restarts after kill -9"
check "never-committed data is in recovered/" sh -c "grep -rl 'written before the crash' '$T/state-a/cache/staging/recovered' | grep -q ."
check "recovered/ names the object" sh -c "ls '$T/state-a/cache/staging/recovered' | grep -q 'crash.txt'"
check "the mount's .facetfs/recovered leads there" sh -c "grep -l 'written before the crash' '$A'/.facetfs/recovered/*crash.txt* | grep -q ."
check_eq "counted in stats" 1 "$(stat_field "$A" .staging.recovered_files)"
check "not uploaded" sh -c "! '$AWS' --endpoint-url '$S3_URL' s3api head-object --bucket '$B' --key s/crash.txt >/dev/null 2>&1"
# Directories with no object live in the index: they outlive the gateway.
check_eq "made directories after the restart: the kept one, not the removed or renamed" \
	"keptdir" "$(ls "$A/sess" | grep -x 'keptdir\|keptdir0\|emptydir' | tr '\n' ' ' | sed 's/ $//')"
check "rmdir of a made directory after the restart" rmdir "$A/sess/keptdir"

stop_gateway A; check_eq "A stops cleanly" 0 "$?"
stop_gateway B; check_eq "B stops cleanly" 0 "$?"
