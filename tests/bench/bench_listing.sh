#!/usr/bin/env bash
# bench_listing.sh — listing and stat of a 100K-object bucket (figures only).
#
#   BED_DIR=DIR tests/bench/bench_listing.sh    (or with the bed's env sourced)
#
# The bed needs room: `BED_MEMSTORE_BYTES=4294967296 tests/bed/bed up DIR`.
# BENCH_LIST_N objects (100,000) of ~100 B under "data/" are PUT by s3fill
# into BENCH_LIST_BUCKET (default a new bucket; an existing bucket that
# already holds the N objects is reused, which saves the ~3 min fill).
#  (a) raw S3 LIST of the bucket: s3tool list -c (paged ListObjectsV2 over
#      one keep-alive connection) and `aws s3api list-objects-v2`
#      (BENCH_SKIP_AWS=1 skips the latter);
#  (b) `facetfs mount` start -> the bucket's first scan complete
#      (.facetfs/views says ready) and -> the first `ls -l` of the view that
#      shows all N entries; the view is a key/size filter (prefix data/,
#      1 B..1 MiB). Twice, each time never scanned: [wait] polls the scan
#      state, then one ls -l; [loop] runs ls -l | wc -l again and again
#      meanwhile (which competes with the scan for the 2 cores);
#  (c) warm `ls -l` of the view, 3 times;
#  (d) stat of distinct files, one stream (python os.stat loop): on a fresh
#      mount (remounted, BENCH_STAT_N names never looked up) and after an
#      `ls -l` of the view (the same names); and the same loop over local
#      files for reference (Python's own ceiling).
# The targets of docs/design.md "Targets" are printed next to each figure.
. "$(dirname "$0")/bench_lib.sh"
bench_require_bed

N=${BENCH_LIST_N:-100000}
NSTAT=${BENCH_STAT_N:-5000}
B=${BENCH_LIST_BUCKET:-list-$$}
T=$BENCH_TMP
bench_say "bucket $B, $N objects; load average $(loadavg)"

# --- the bucket ---
have=$("$S3TOOL" list -c "$B" 2>/dev/null | awk '/ keys,/ {print $1}')
if [[ ${have:-0} != "$N" ]]; then
	[[ ${have:-0} == 0 ]] || bench_die "bucket $B holds ${have} objects, not $N: use another BENCH_LIST_BUCKET"
	bench_bucket "$B"
	bench_say "filling $B with $N objects of 100 B (s3fill, 16 threads)..."
	"$FACETFS_BUILD/tests/bench/s3fill" "$B" data/ "$N" --size 100 --threads 16 >"$T/fill.log" 2>&1 ||
		{ tail -n 5 "$T/fill.log"; bench_die "s3fill failed"; }
	tail -n 1 "$T/fill.log" | sed 's/^/    /'
fi

# --- (a) raw LIST ---
out=$("$S3TOOL" list -c "$B" 2>&1 | tail -n 1)
echo "    s3tool list -c: $out"
raw_s=$(awk '/ keys,/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "s,") print $i }' <<<"$out")
bench_figure "raw S3 LIST of $N keys (s3tool, 1 connection), s" "${raw_s:-?}" "5.3 s here (TESTBED)"
if [[ ${BENCH_SKIP_AWS:-0} != 1 ]]; then
	t0=$(now_ns)
	cnt=$("$AWS" --endpoint-url "$S3_URL" s3api list-objects-v2 --bucket "$B" --output json 2>"$T/aws.err" |
		jq '.Contents | length')
	t1=$(now_ns)
	echo "    aws s3api list-objects-v2: $cnt keys"
	bench_figure "aws s3api list-objects-v2 of $N keys, s" "$(s_between "$t0" "$t1")" "17.1 s here (TESTBED)"
fi

# --- (b) mount -> scan complete, -> first complete ls -l ---
mkdir -p "$T/views"
cat >"$T/views/big.json" <<JSON
{ "name": "big", "bucket": "$B",
  "match": { "prefix": "data/", "size": { "min": 1, "max": "1MiB" } },
  "layout": { "strip_prefix": "data/" } }
JSON
target=$(awk -v r="${raw_s:-0}" 'BEGIN { printf "<= %.1f s (1.2 x raw LIST)", 1.2 * r }')
M=$T/mnt
mkdir -p "$M"
# first_listing MODE: a fresh state dir and Kafka topic, so the bucket was
# never scanned; t0 = just before `facetfs mount`. MODE wait: poll
# .facetfs/views every 10 ms until the view is ready, then one ls -l.
# MODE loop: ls -l | wc -l again and again until it shows all N entries
# (a watcher notes scan-complete meanwhile). Leaves gateway A mounted.
first_listing() {
	local mode=$1 topic=bench-list-$$-$1 passes=0 n t_ls t_scan t_mounted watcher scan_only
	bench_topic "$topic"
	bench_config "$T/gw.json" "$T/state-$mode" "$T/views" "$topic" 10
	rm -f "$T/scan_done" "$BENCH_TMP/gw-A.log"
	t0=$(now_ns)
	(
		until mountpoint -q "$M"; do sleep 0.005; done
		until grep -q '"state":[[:space:]]*"ready"' "$M/.facetfs/views" 2>/dev/null; do sleep 0.01; done
		now_ns >"$T/scan_done"
	) &
	watcher=$!
	gw_start A "$T/gw.json" "$M" || bench_die "gateway did not mount"
	t_mounted=$GW_T1
	[[ $mode == wait ]] && wait_until 300 test -s "$T/scan_done"
	while :; do
		n=$(ls -l "$M/big" 2>/dev/null | wc -l)
		t_ls=$(now_ns)
		passes=$((passes + 1))
		((n >= N + 1)) && break # + the "total" line
		if ((t_ls - t0 > 300 * 1000000000)); then
			bench_say "!!! the view shows $((n - 1)) of $N entries after 300 s: giving up"
			break
		fi
	done
	wait_until 60 test -s "$T/scan_done"
	kill "$watcher" 2>/dev/null
	wait "$watcher" 2>/dev/null
	t_scan=$(cat "$T/scan_done" 2>/dev/null || echo "$t0")
	# The scan alone, from the gateway's log (HH:MM:SS.mmm stamps).
	scan_only=$(awk '/scan: bucket .*: listing/ && !a { a = $1 } /scan: bucket .*: complete/ && !b { b = $1 }
		function s(t, p) { split(t, p, ":"); return p[1] * 3600 + p[2] * 60 + p[3] }
		END { if (a && b) printf "%.2f", s(b) - s(a); else print "?" }' "$BENCH_TMP/gw-A.log")
	echo "    [$mode] $passes ls -l pass(es); gateway log:"
	grep -m1 'assigned' "$BENCH_TMP/gw-A.log" | sed 's/^/      /'
	grep -E 'mounted|scan:' "$BENCH_TMP/gw-A.log" | sed 's/^/      /'
	bench_figure "[$mode] mount start -> mounted (Kafka brokers answered, no group join), s" "$(s_between "$t0" "$t_mounted")" "(part of the next two)"
	bench_figure "[$mode] the scan alone (gateway log), s" "$scan_only" "(diagnostic)"
	bench_figure "[$mode] mount start -> scan complete, s" "$(s_between "$t0" "$t_scan")" "$target"
	bench_figure "[$mode] mount start -> first complete ls -l ($((n - 1))), s" "$(s_between "$t0" "$t_ls")" "$target"
}
first_listing wait
gw_stop A
first_listing loop
out=$("$S3TOOL" list -c "$B" 2>&1 | tail -n 1)
echo "    raw LIST again, after the scans: $out"

# --- (c) warm ls -l ---
for i in 1 2 3; do
	t1=$(now_ns)
	n=$(ls -l "$M/big" | wc -l)
	t2=$(now_ns)
	bench_figure "warm ls -l of the $((n - 1))-entry view, run $i, s" "$(s_between "$t1" "$t2")" "< 1 s"
done

# --- (d) stat rate: fresh mount, then after a listing ---
gw_stop A
gw_start A "$T/gw.json" "$M" || bench_die "gateway did not remount" # same state: no scan
wait_until 60 views_ready "$M" || bench_say "warning: view not ready 60 s after the remount"
# stat_py SETS REPEAT: stat NSTAT names of set 0..SETS-1 (disjoint, spread
# over the whole view), each set REPEAT times; prints "COUNT RATE..." (/s).
stat_py() {
	python3 - "$M/big" "$N" "$NSTAT" "$1" "$2" <<'PY'
import os, sys, time
view, n, k, sets, repeat = sys.argv[1], *map(int, sys.argv[2:])
step = max(1, n // k)
rates = []
for s in range(sets):
    paths = [os.path.join(view, "%07d" % i) for i in range(s % step, n, step)][:k]
    for _ in range(repeat):
        t0 = time.perf_counter()
        for p in paths:
            os.stat(p)
        rates.append("%.0f" % (len(paths) / (time.perf_counter() - t0)))
print(len(paths), *rates)
PY
}
med3() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
lk0=$(stat_field "$M" .fuse.lookup)
read -r cnt r1 r2 r3 < <(stat_py 3 1)
lk1=$(stat_field "$M" .fuse.lookup)
echo "    fresh mount: 3 disjoint sets of $cnt names, $((lk1 - lk0)) FUSE lookups; rates $r1 $r2 $r3 /s"
bench_figure "stat of distinct files, fresh mount (median of 3 x $cnt), /s" "$(med3 "$r1" "$r2" "$r3")" ">= 9K/s"
ls -l "$M/big" >/dev/null
lk0=$(stat_field "$M" .fuse.lookup)
ga0=$(stat_field "$M" .fuse.getattr)
read -r cnt r1 r2 r3 < <(stat_py 1 3)
lk1=$(stat_field "$M" .fuse.lookup)
ga1=$(stat_field "$M" .fuse.getattr)
echo "    after ls -l: 3 passes over $cnt names, $((lk1 - lk0)) FUSE lookups, $((ga1 - ga0)) getattrs; rates $r1 $r2 $r3 /s"
bench_figure "stat of distinct files after ls -l (median of 3 x $cnt), /s" "$(med3 "$r1" "$r2" "$r3")" ">= 250K/s"
NSTAT=$N
read -r cnt r1 r2 r3 < <(stat_py 1 3)
echo "    after ls -l, every file: 3 passes over $cnt names; rates $r1 $r2 $r3 /s"
bench_figure "stat of all $cnt files after ls -l (median of 3), /s" "$(med3 "$r1" "$r2" "$r3")" ">= 250K/s"
# The same Python loop over local files (the method's own ceiling here).
mkdir -p "$T/native"
python3 - "$T/native" "$N" "${BENCH_STAT_N:-5000}" <<'PY'
import os, sys
d, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(0, n, max(1, n // k)):
    open(os.path.join(d, "%07d" % i), "w").close()
PY
NSTAT=${BENCH_STAT_N:-5000}
M_SAVE=$M
M=$T/native-parent
mkdir -p "$M" && ln -sfn "$T/native" "$M/big"
read -r cnt r1 r2 r3 < <(stat_py 1 3)
M=$M_SAVE
echo "    local disk (no FUSE), same loop: 3 passes over $cnt names; rates $r1 $r2 $r3 /s"
bench_figure "reference: the same stat loop on local files, /s" "$(med3 "$r1" "$r2" "$r3")" "(ceiling of the method)"
gw_stop A
bench_say "load average at the end $(loadavg)"
