#!/usr/bin/env bash
# t_bigdir.sh — a view of 100,000 entries in one directory, listed through
# the real mount while events add and delete entries (fuse/core_readdir.c
# says how a listing resumes; docs/operations.md "Memory" what it holds):
#  - 100K synthetic RGW put events (evgen) on a topic of the test's own
#    fill the view (no objects: listing and stat read the index alone);
#  - a listing with glibc's readdir, slowed down, while a producer (kline)
#    deletes names and adds names between them: no name twice, in byte
#    order, every name seen existed (put before or during the listing),
#    every name present throughout is seen;
#  - meanwhile a second stream does telldir, reads 2,000 names on, seekdir
#    back: the next name is after the one read before telldir and not
#    after the one that followed it then (if that one is still there);
#  - memory: the inodes the listing made (readdirplus) cost at most 100
#    bytes each (.facetfs/stats memory), and after
#    `echo 2 > /proc/sys/vm/drop_caches` the kernel forgets them and the
#    gateway holds (almost) none.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

N=${BIGDIR_N:-100000}
CHUNK=10000
EVGEN=$FACETFS_BUILD/tests/bench/evgen
KLINE=$FACETFS_BUILD/tests/bench/kline
[[ -x $EVGEN && -x $KLINE ]] || { not_ok "evgen and kline are built ($EVGEN, $KLINE)"; exit 1; }
B=$(new_bucket bigdir)
aws_s3 s3 mb "s3://$B" >/dev/null || { not_ok "make bucket $B"; exit 1; }
T=$(test_tmp)
# A topic of its own: 100K records would be read again by every later
# gateway of the shared topic. The mock makes it on the metadata request.
TOPIC=bigdir-$$-$RANDOM
kcat -L -b "$KAFKA_BROKERS" -t "$TOPIC" >/dev/null 2>&1
view_file "$T/views" big "$B" '{ "prefix": "p00/" }' '"layout": { "strip_prefix": "p00/" }'
gw_config "$T/gw.json" "$T/state" "$T/views" "" "$TOPIC"
M=$T/mnt
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts"; exit 1; }

# ---- 100K puts, produced at most two chunks ahead of the gateway (the
# mock keeps a few MB per partition) ----
applied() { stat_field "$M" .events.applied; }
consumed_at_least() { (($(stat_field "$M" .events.consumed) >= $1)); }
produced=0
while ((produced < N)); do
	n=$((N - produced < CHUNK ? N - produced : CHUNK))
	"$EVGEN" "$B" 1 "$produced" "$n" |
		kcat -P -b "$KAFKA_BROKERS" -t "$TOPIC" -K $'\t' -z lz4 ||
		{ not_ok "produce records $produced.."; exit 1; }
	produced=$((produced + n))
	wait_for 120 consumed_at_least $((produced - 2 * CHUNK)) ||
		{ not_ok "the gateway consumes the puts" "$(stat_field "$M" .events.consumed) of $produced"; exit 1; }
done
all_applied() { (($(applied) >= N)); }
if wait_for 120 all_applied; then ok "$N puts applied"; else not_ok "$N puts applied" "$(applied)"; exit 1; fi
check_eq "the view lists $N entries" "$N" "$(ls -f "$M/big" | grep -c '^obj')"
echo 2 >/proc/sys/vm/drop_caches   # the count above looked every name up
rss0=$(stat_field "$M" .memory.rss_bytes)

# ---- the listing while names come and go ----
cat >"$T/list.py" <<'PY'
import ctypes, os, random, subprocess, sys, threading, time

mnt, bucket, brokers, topic, kline, n, out = sys.argv[1:8]
n = int(n)
view = os.path.join(mnt, "big")
libc = ctypes.CDLL("libc.so.6", use_errno=True)

class Dirent(ctypes.Structure):
    _fields_ = [("d_ino", ctypes.c_uint64), ("d_off", ctypes.c_int64),
                ("d_reclen", ctypes.c_ushort), ("d_type", ctypes.c_ubyte),
                ("d_name", ctypes.c_char * 256)]

libc.opendir.restype = ctypes.c_void_p
libc.opendir.argtypes = [ctypes.c_char_p]
libc.readdir.restype = ctypes.POINTER(Dirent)
libc.readdir.argtypes = [ctypes.c_void_p]
libc.telldir.restype = ctypes.c_long
libc.telldir.argtypes = [ctypes.c_void_p]
libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
libc.closedir.argtypes = [ctypes.c_void_p]

def opendir():
    d = libc.opendir(view.encode())
    if not d:
        sys.exit("opendir: errno %d" % ctypes.get_errno())
    return d

def next_name(d):
    while True:
        ctypes.set_errno(0)
        e = libc.readdir(d)
        if not e:
            if ctypes.get_errno():
                sys.exit("readdir: errno %d" % ctypes.get_errno())
            return None
        name = e.contents.d_name.decode()
        if name not in (".", ".."):
            return name

initial = ["obj%07d" % i for i in range(n)]
present = set(initial)
added, deleted = set(), set()
lock = threading.Lock()
stop = threading.Event()
errors = []

# Deletes of listed names and puts of new names between them, one record
# at a time through kline (each acknowledged by Kafka before the next).
def produce():
    rnd = random.Random(31)
    k = subprocess.Popen([kline, brokers, topic], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, bufsize=1)
    t0 = time.time_ns()
    i = 0
    while not stop.is_set():
        i += 1
        with lock:
            if rnd.random() < 0.5 and present:
                name = rnd.choice(initial)
                if name not in present:
                    continue
                present.discard(name)
                deleted.add(name)
                kind = "ObjectRemoved:Delete"
            else:
                name = "obj%07d%s" % (rnd.randrange(n), rnd.choice("abc"))
                if name in present or name in deleted:
                    continue
                present.add(name)
                added.add(name)
                kind = "ObjectCreated:Put"
        t = time.time_ns()
        sec, ns = divmod(t, 10**9)
        seq = sec.to_bytes(4, "little").hex().upper() + ns.to_bytes(4, "little").hex().upper()
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)) + ".%06dZ" % (ns // 1000)
        key = "p00/" + name
        doc = ('{"Records":[{"eventVersion":"2.2","eventSource":"ceph:s3","awsRegion":"",'
               '"eventTime":"%s","eventName":"%s","userIdentity":{"principalId":"t"},'
               '"s3":{"s3SchemaVersion":"1.0","configurationId":"t","bucket":{"name":"%s",'
               '"arn":"arn:aws:s3:::%s"},"object":{"key":"%s","size":100,"eTag":"%032x",'
               '"versionId":"","sequencer":"%s","metadata":[],"tags":[]}},'
               '"eventId":"%d.%d","opaqueData":""}]}'
               % (when, kind, bucket, bucket, key, i, seq, sec, i))
        k.stdin.write("%s/%s\t%s\n" % (bucket, key, doc))
        if k.stdout.readline().strip() != "ok":
            errors.append("kline did not acknowledge a record")
            break
        time.sleep(0.002)
    k.stdin.close()
    k.wait()

# A second stream: telldir, 2,000 names on, seekdir back.
seek_result = []
def seek_probe():
    d = opendir()
    before = None
    for _ in range(n // 3):
        before = next_name(d)
    pos = libc.telldir(d)
    after = next_name(d)
    for _ in range(2000):
        next_name(d)
    time.sleep(0.5)
    libc.seekdir(d, pos)
    again = next_name(d)
    libc.closedir(d)
    seek_result.append((before, after, again))

p = threading.Thread(target=produce)
p.start()
time.sleep(0.3)
d = opendir()
seen = []
count = 0
probe = None
while True:
    name = next_name(d)
    if name is None:
        break
    seen.append(name)
    count += 1
    if count % 500 == 0:
        time.sleep(0.04)
    if count == n // 2:
        probe = threading.Thread(target=seek_probe)
        probe.start()
libc.closedir(d)
if probe:
    probe.join()
stop.set()
p.join()

with open(out, "w") as f:
    f.write("seen %d\n" % len(seen))
    f.write("added %d\n" % len(added))
    f.write("deleted %d\n" % len(deleted))
    f.write("twice %d\n" % (len(seen) - len(set(seen))))
    f.write("unsorted %d\n" % sum(1 for a, b in zip(seen, seen[1:]) if not a < b))
    f.write("never %d\n" % len(set(seen) - set(initial) - added))
    throughout = set(initial) - deleted
    f.write("missed %d\n" % len(throughout - set(seen)))
    before, after, again = seek_result[0] if seek_result else (None, None, None)
    ok = (before is not None and again is not None and before < again and
          (again <= after or not os.path.exists(os.path.join(view, after))))
    f.write("seek %s %s %s %s\n" % ("ok" if ok else "bad", before, after, again))
    f.write("errors %d\n" % len(errors))
    f.write("present %d\n" % len(present))
PY
python3 "$T/list.py" "$M" "$B" "$KAFKA_BROKERS" "$TOPIC" "$KLINE" "$N" "$T/result" >"$T/list.out" 2>&1 ||
	{ not_ok "the listing ran" "$(tail -n 3 "$T/list.out")"; }
r() { awk -v k="$1" '$1 == k { print $2 }' "$T/result"; }
changes=$(($(r added) + $(r deleted)))
echo "# listing: $(r seen) names seen while $(r added) were added and $(r deleted) deleted" 
if ((changes >= 100)); then ok "names changed during the listing ($changes)"; else not_ok "names changed during the listing" "$changes"; fi
check_eq "no name listed twice" 0 "$(r twice)"
check_eq "names listed in byte order" 0 "$(r unsorted)"
check_eq "every name listed existed (put before or during the listing)" 0 "$(r never)"
check_eq "every name present throughout was listed" 0 "$(r missed)"
check_eq "seekdir back 2,000 names: the listing resumes where telldir was" ok \
	"$(awk '$1 == "seek" { print $2 }' "$T/result")"
awk '$1 == "seek"' "$T/result" | diag
check_eq "every change acknowledged by Kafka" 0 "$(r errors)"
want=$(r present)
settled() { [[ $(ls -f "$M/big" | grep -c '^obj') == "$want" ]]; }
if wait_for 60 settled; then ok "after the changes the view lists what is present ($want)"; else
	not_ok "after the changes the view lists what is present" "$(ls -f "$M/big" | grep -c '^obj') of $want"; fi

# ---- memory: what the kernel holds, and nothing once it forgets ----
inodes=$(stat_field "$M" .memory.inodes)
ibytes=$(stat_field "$M" .memory.inode_bytes)
echo "# after the listings: $inodes inodes, $ibytes bytes; RSS $(($(stat_field "$M" .memory.rss_bytes) >> 20)) MiB (before $((rss0 >> 20)) MiB)"
if ((inodes >= 10000)); then
	per=$((ibytes / inodes))
	if ((per <= 100)); then ok "an inode the kernel holds costs $per bytes (<= 100)"; else
		not_ok "an inode the kernel holds costs <= 100 bytes" "$per"; fi
else
	skip "bytes per inode held" "the kernel kept only $inodes inodes of the listing"
fi
echo 2 >/proc/sys/vm/drop_caches
forgotten() { (($(stat_field "$M" .memory.inodes) < 1000)); }
if wait_for 30 forgotten; then ok "after drop_caches the gateway holds $(stat_field "$M" .memory.inodes) inodes ($(stat_field "$M" .memory.inode_bytes) bytes)"; else
	not_ok "after drop_caches the gateway holds fewer than 1,000 inodes" "$(stat_field "$M" .memory.inodes)"; fi
check_eq "no directory handle left open" 0 "$(stat_field "$M" .memory.dir_handles)"
check "the gateway stops cleanly" stop_gateway A
