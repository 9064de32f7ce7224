#!/usr/bin/env bash
# bench_cache.sh — issue 8's benchmarks: the burst buffer (sync/cache/bcache.c),
# the `eventual` policy and warm on arrival, side by side with s3fs
# (`-o use_cache=DIR`) and rclone (`--vfs-cache-mode full`) on one bed.
#
# Prints figures, asserts nothing about speed (a step that fails, or reads
# the wrong number of bytes, stops the run with an error).
#
#  1. open + read + close of N (200) objects of 116 KiB, one stream, each
#     file once per pass (bench_cache.py): first touch on a `warm` +
#     `eventual` view once .cache.warm.fetched reached N, next to the first
#     touch of s3fs and rclone; again (cached) on the eventual view and on a
#     `session` view over the same keys, next to rclone's (and s3fs')
#     repeat; then the same after `echo 1 > /proc/sys/vm/drop_caches` (the
#     burst buffer, not the page cache). S3 requests per pass from stats.
#  2. sequential re-read (dd bs=1M) of a BIG_MIB (512) MiB object from the
#     burst buffer after drop_caches, and after a gateway restart, next to
#     the same bytes from a plain file on the same disk after the same drop;
#     the GETs each made; and, as the ceiling of any FUSE server here,
#     fuse-ceiling (no checks) re-reading the same bytes from the plain
#     file and from block files laid out as the burst buffer's.
#  3. cached reads (dd, drop_caches before each object) of 4 objects of
#     LOOP_MIB/4 MiB in a loop, with cache.max_bytes above the data
#     (no eviction) and below it (the cache at its budget, evicting); and
#     reads of one of them (its blocks cached) while a second reader
#     streams the other three, under the same two budgets (the stream
#     served by the cache vs the stream keeping the cache evicting).
#  4. warm-on-arrival cost: bench_events.sh (BENCH_CACHE_EVENTS records,
#     100 prefix views, fetch.wait.max.ms=1) as it is, with one more view
#     matching every event (BENCH_WARM_VIEW=cold), and with that view warm
#     (BENCH_WARM_VIEW=1): the warm cost is the third next to the second.
#     Those records are synthetic and name objects that do not exist.
#  5. warm on arrival with real objects: ARRIVE_N (2,000) x 64 KiB PUT by
#     s3fill (8 threads) into the notified bucket while a fresh gateway
#     with one `eventual` view over their prefix applies RGW's events,
#     without and with "warm": true (runs alternating): PUTs/s, events
#     applied, probes PUT one at a time during the fill timed from the PUT
#     returning to stat() seeing them, last PUT -> all listed, gateway CPU
#     per object, warm fetched / skipped / failed and how long after the
#     last PUT all were fetched.
#
# Bed: BED_DIR=DIR (a bed that is up, memstore >= 2 GiB) or none, and the
# script brings up its own (BED_MEMSTORE_BYTES default 4 GiB, RAM) and
# stops it. Needs root (drop_caches), s3fs and rclone (Debian packages; a
# peer that is missing is reported "n/a"). Env: N, BIG_MIB, LOOP_MIB,
# REPEAT (passes per figure, default 3), BENCH_CACHE_EVENTS (300,000),
# ARRIVE_N (2,000), ONLY (default "small big evict events arrive": the
# sections to run), KEEP_TMP=1.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
N=${N:-200}
SMALL=118784
BIG_MIB=${BIG_MIB:-512}
LOOP_MIB=${LOOP_MIB:-256}
REPEAT=${REPEAT:-3}
EVENTS=${BENCH_CACHE_EVENTS:-300000}
ARRIVE_N=${ARRIVE_N:-2000}
OWN_BED=
want() { [[ " ${ONLY:-small big evict events arrive} " == *" $1 "* ]]; }

# shellcheck source=tests/bench/bench_lib.sh
. "$HERE/bench_lib.sh"
bench_own_bed 4294967296
HELPER=$HERE/bench_cache.py
bench_require_bed
[[ $(id -u) == 0 ]] || bench_die "needs root (echo 1 > /proc/sys/vm/drop_caches)"
[[ -x $S3TOOL ]] || bench_die "build first: ninja -C $FACETFS_BUILD"
memstore=$(awk -F' = ' '/memstore device bytes/ {print $2}' "${CEPH_CONF:-/dev/null}" 2>/dev/null)
need_mib=$((BIG_MIB + LOOP_MIB + 1024))
if [[ -n $memstore ]] && (( memstore < need_mib * 1048576 )); then
	bench_die "the bed's memstore ($((memstore >> 20)) MiB) is too small (need about $need_mib MiB: BED_MEMSTORE_BYTES=4294967296)"
fi

B=bench-cache-$$-$RANDOM
T=$BENCH_TMP
M=$T/mnt

# ---- figures: rec KEY VALUE; summary KEY -> "median (min-max)" ----
# ratio A B: median of A / median of B ("n/a" when one is missing).
ratio() {
	local a b
	a=$(summary "$1" | cut -d' ' -f1) b=$(summary "$2" | cut -d' ' -f1)
	[[ $a != n/a && $b != n/a ]] || { echo n/a; return; }
	awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1fx", (b > 0 ? a / b : 0) }'
}
pct() {
	local a b
	a=$(summary "$1" | cut -d' ' -f1) b=$(summary "$2" | cut -d' ' -f1)
	[[ $a != n/a && $b != n/a ]] || { echo n/a; return; }
	awk -v a="$a" -v b="$b" 'BEGIN { printf "%.0f %%", (b > 0 ? 100 * a / b : 0) }'
}
rate() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%.1f", n / ((b - a) / 1e9) }'; }
stats() { jq -r "[$1] | map(tostring) | join(\" \")" "$M/.facetfs/stats"; }
S3REQ='(.s3.list + .s3.head + .s3.get + .s3.put + .s3.copy + .s3.delete + (.s3.get_tagging // 0))'
drop_caches() { sync; echo 1 >/proc/sys/vm/drop_caches; }

bench_say "bucket $B; $(nproc) cores shared with other work, load average $(loadavg)"
"$HERE/../bed/bed" notify "$BED_DIR" "$B" >"$T/notify.log" 2>&1 || bench_die "bed notify: $(tail -n 3 "$T/notify.log")"

# One pass of bench_cache.py over DIR; KEY.ops gets ops/s. With a facetfs
# mount, KEY.req / KEY.get / KEY.head get the S3 requests the pass made.
pass() {
	local key=$1 dir=$2 seed=$3 fs=${4:-} out a b
	[[ -z $fs ]] || a=($(stats "$S3REQ, .s3.get, .s3.head"))
	out=$(python3 "$HELPER" pass "$dir" "$SMALL" "$seed") || bench_die "pass $key over $dir"
	set -- $out    # ops N secs S ops_s X mib_s Y
	rec "$key" "$6"
	if [[ -n $fs ]]; then
		b=($(stats "$S3REQ, .s3.get, .s3.head"))
		rec "$key.req" "$((b[0] - a[0]))"
		rec "$key.get" "$((b[1] - a[1]))"
		rec "$key.head" "$((b[2] - a[2]))"
	fi
}
reqs() { printf '%s / %s / %s' "$(summary "$1.req")" "$(summary "$1.get")" "$(summary "$1.head")"; }

mkdir -p "$T/views"
view() {
	printf '{ "name": "%s", "bucket": "%s", "match": { "prefix": "%s/" }, "layout": { "strip_prefix": "%s/" }%s }\n' \
		"$1" "$B" "$2" "$2" "${3:+, $3}" >"$T/views/$1.json"
}
view warm w '"visibility": "eventual", "warm": true'
view sess w '"visibility": "session"'
view big b '"visibility": "session"'
gw_config "$T/gw.json" "$T/state" "$T/views" "bench-cache-$$-$RANDOM" "$KAFKA_TOPIC" 1 \
	"$((BIG_MIB + 1024))MiB"
gw_start main "$T/gw.json" "$M" || exit 1
wait_until 60 views_ready "$M" || bench_die "views not ready"

# ===================== 1. open + read + close of N x 116 KiB =====================
if want small; then
echo
bench_say "1. open + read + close of $N x 116 KiB objects, one stream, each file once per pass"
mkdir -p "$T/small"
python3 -c '
import os, sys
for i in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], "f%04d" % i), "wb") as f:
        f.write(os.urandom(int(sys.argv[3])))' "$T/small" "$N" "$SMALL" || bench_die "small files"
f0=$(stats .cache.warm.fetched)
t0=$(now_ns)
"$AWS" --endpoint-url "$S3_URL" s3 cp --recursive --quiet "$T/small" "s3://$B/w/" || bench_die "aws s3 cp"
t1=$(now_ns)
warmed() { (( $(stats .cache.warm.fetched) - f0 >= N )) && (( $(ls "$M/warm" | wc -l) == N )); }
wait_until 120 warmed || bench_die "warm.fetched $(stats .cache.warm.fetched) after 120 s (want $((f0 + N)))"
t2=$(now_ns)
bench_say "PUT of $N objects: $(s_between "$t0" "$t1") s; all warm-fetched $(s_between "$t1" "$t2") s after the last PUT returned"
cmp -s "$M/warm/f0007" "$T/small/f0007" || bench_die "warm/f0007 differs from what was PUT"

# Peers on the same objects.
bench_peer_creds
# A peer is ready when it lists the N objects.
peer_ready() { (( $(ls "$1" | wc -l) == N )); }
BENCH_PEER_READY=peer_ready
HAVE_S3FS= HAVE_RCLONE=
if command -v s3fs >/dev/null; then
	bench_peer_start s3fs "$T/s3fs" s3fs "$B:/w" "$T/s3fs" -f -o "url=$S3_URL,use_path_request_style,passwd_file=$T/s3fs.passwd,use_cache=$T/s3fs-cache" &&
		HAVE_S3FS=1
else
	bench_say "no s3fs (apt-get install s3fs): its figures are n/a"
fi
if command -v rclone >/dev/null; then
	bench_peer_start rclone "$T/rclone" env -u AWS_CA_BUNDLE rclone --config "$T/rclone.conf" mount "bed:$B/w" "$T/rclone" \
		--vfs-cache-mode full --cache-dir "$T/rclone-cache" --use-server-modtime && HAVE_RCLONE=1
else
	bench_say "no rclone (apt-get install rclone): its figures are n/a"
fi

# The bound of a `session` open: one HEAD (its validation). KEY gets the
# HEADs/s of curl sending a HEAD for each of the N keys in turn on one
# keep-alive connection, nothing else.
heads() {
	local urls=() i t0 t1
	for ((i = 0; i < N; i++)); do urls+=("$S3_URL/$B/w/$(printf 'f%04d' "$i")"); done
	t0=$(now_ns)
	curl -sfI --aws-sigv4 "aws:amz:default:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "${urls[@]}" >/dev/null || bench_die "curl HEADs"
	t1=$(now_ns)
	rec "$1" "$(rate "$N" "$t0" "$t1")"
}

# First touch: facetfs warm view, then each peer (each reads every object once).
pass first.warm "$M/warm" 1 fs
[[ -z $HAVE_S3FS ]] || pass first.s3fs "$T/s3fs" 1
[[ -z $HAVE_RCLONE ]] || pass first.rclone "$T/rclone" 1
# Again: REPEAT passes each, page cache as it is; then after drop_caches.
for r in $(seq 1 "$REPEAT"); do
	pass again.ev "$M/warm" "$((r + 1))" fs
	pass again.sess "$M/sess" "$((r + 1))" fs
	heads again.heads
	[[ -z $HAVE_S3FS ]] || pass again.s3fs "$T/s3fs" "$((r + 1))"
	[[ -z $HAVE_RCLONE ]] || pass again.rclone "$T/rclone" "$((r + 1))"
done
for r in $(seq 1 "$REPEAT"); do
	drop_caches; pass drop.ev "$M/warm" "$((r + 10))" fs
	drop_caches; pass drop.sess "$M/sess" "$((r + 10))" fs
	[[ -z $HAVE_S3FS ]] || { drop_caches; pass drop.s3fs "$T/s3fs" "$((r + 10))"; }
	[[ -z $HAVE_RCLONE ]] || { drop_caches; pass drop.rclone "$T/rclone" "$((r + 10))"; }
done
bench_peer_stop s3fs
bench_peer_stop rclone
c=($(stats '.cache.hits, .cache.misses, .cache.warm.fetched, .cache.warm.used, .cache.warm.wasted'))
bench_say "cache after section 1: hits ${c[0]}, misses ${c[1]}, warm fetched ${c[2]} used ${c[3]} wasted ${c[4]}"
fig "first touch, warm+eventual view, opens/s" first.warm ""
bench_figure "  S3 requests / GETs / HEADs in the pass" "$(reqs first.warm)" "0 GETs"
fig "first touch, s3fs (use_cache), opens/s" first.s3fs ""
fig "first touch, rclone (vfs-cache-mode full), opens/s" first.rclone ""
bench_figure "first touch: facetfs warm / s3fs" "$(ratio first.warm first.s3fs)" ">= 10x"
bench_figure "first touch: facetfs warm / rclone" "$(ratio first.warm first.rclone)" ">= 10x"
fig "again, eventual view, opens/s" again.ev ""
bench_figure "  S3 requests / GETs / HEADs per pass" "$(reqs again.ev)" "0"
fig "again, session view, opens/s" again.sess ""
bench_figure "  S3 requests / GETs / HEADs per pass" "$(reqs again.sess)" "$N HEADs"
fig "again, s3fs, opens/s" again.s3fs ""
fig "again, rclone, opens/s" again.rclone ""
bench_figure "again: eventual / rclone" "$(ratio again.ev again.rclone)" ">= 10x"
bench_figure "again: session / rclone" "$(ratio again.sess again.rclone)" ">= 1.5x"
fig "  its bound: HEADs alone (curl, one connection), HEADs/s" again.heads ""
bench_figure "  session opens / HEADs alone" "$(ratio again.sess again.heads)" ""
fig "after drop_caches, eventual view (burst buffer), opens/s" drop.ev ""
bench_figure "  S3 requests / GETs / HEADs per pass" "$(reqs drop.ev)" "0"
fig "after drop_caches, session view (burst buffer), opens/s" drop.sess ""
bench_figure "  S3 requests / GETs / HEADs per pass" "$(reqs drop.sess)" ""
fig "after drop_caches, s3fs, opens/s" drop.s3fs ""
fig "after drop_caches, rclone, opens/s" drop.rclone ""
bench_figure "after drop_caches: eventual / rclone" "$(ratio drop.ev drop.rclone)" ""
bench_figure "after drop_caches: session / rclone" "$(ratio drop.sess drop.rclone)" ""
fi

# ===================== 2. sequential re-read of a big object =====================
if want big; then
echo
bench_say "2. sequential re-read of a $BIG_MIB MiB object (dd bs=1M) after drop_caches"
head -c $((BIG_MIB << 20)) /dev/urandom >"$T/plain" || bench_die "no space for $T/plain"
"$S3TOOL" put "$B" b/big "$T/plain" >/dev/null || bench_die "put b/big"
wait_until 60 test -f "$M/big/big" || bench_die "b/big not listed 60 s after its PUT"
# Read twice: a large object's first open is a cold stream that the burst
# buffer does not store, its second open stores it (docs/burst-buffer.md
# "Admission"); the re-reads below are of an object the rule keeps.
for pass in "cold read (not stored)" "second open (stored)"; do
	drop_caches
	a=($(stats '.s3.get'))
	t0=$(now_ns)
	dd if="$M/big/big" of=/dev/null bs=1M 2>/dev/null || bench_die "$pass"
	t1=$(now_ns)
	b=($(stats '.s3.get, .cache.blocks, .cache.used_bytes'))
	bench_say "$pass: $(rate "$BIG_MIB" "$t0" "$t1") MiB/s, $((b[0] - a[0])) GETs; cache now ${b[1]} blocks, ${b[2]} bytes"
done
bbread() {    # KEY FILE: dd after drop_caches, MiB/s and GETs
	local a b t0 t1
	drop_caches
	a=($(stats '.s3.get'))
	t0=$(now_ns)
	dd if="$2" of=/dev/null bs=1M 2>/dev/null || bench_die "read $2"
	t1=$(now_ns)
	b=($(stats '.s3.get'))
	rec "$1" "$(rate "$BIG_MIB" "$t0" "$t1")"
	rec "$1.gets" "$((b[0] - a[0]))"
}
plainread() {
	local t0 t1
	drop_caches
	t0=$(now_ns)
	dd if="$T/plain" of=/dev/null bs=1M 2>/dev/null || bench_die "read $T/plain"
	t1=$(now_ns)
	rec "$1" "$(rate "$BIG_MIB" "$t0" "$t1")"
}
# The ceiling of any FUSE server here (fuse-ceiling, no checks): the same
# bytes from one local file, and from block files laid out as the burst
# buffer's (same block size and header length, the next blocks prefetched).
CEIL=$FACETFS_BUILD/tests/bench/fuse-ceiling
BLOCK_KIB=1024   # the cache.block_size gw_config gives
HAVE_CEIL=
blk=$(find "$T/state/cache" -type f -size +$((BLOCK_KIB))k 2>/dev/null | head -n 1)
hdr=$(( ${blk:+$(stat -c %s "$blk")} + 0 - (BLOCK_KIB << 10) ))
(( hdr > 0 && hdr < 4096 )) || hdr=96
ceil_up() {   # NAME ARGS...: a fuse-ceiling server at $T/ceil-NAME, read-ahead as the gateway's
	local name=$1 dev
	shift
	# (ready once mounted: section 1's peer_ready counts objects it has not)
	BENCH_PEER_READY= bench_peer_start "ceil-$name" "$T/ceil-$name" "$CEIL" "$@" "$T/ceil-$name" || return 1
	dev=$(awk -v p="$T/ceil-$name" '$5 == p { d = $3 } END { print d }' /proc/self/mountinfo)
	echo 1024 >"/sys/class/bdi/$dev/read_ahead_kb" || bench_say "ceil-$name: read-ahead left at the default"
}
if [[ -x $CEIL ]] && "$CEIL" split "$T/plain" "$T/ceil-blocks.d" $((BLOCK_KIB << 10)) "$hdr" &&
   ceil_up file file "$T/plain" &&
   ceil_up blocks blocks "$T/ceil-blocks.d" $((BLOCK_KIB << 10)) "$hdr" $((BIG_MIB << 20)); then
	HAVE_CEIL=1
else
	bench_say "no fuse-ceiling ($CEIL): its figures are n/a"
fi
for r in $(seq 1 "$REPEAT"); do
	bbread big.bb "$M/big/big"
	plainread big.plain
	[[ -z $HAVE_CEIL ]] || { bbread big.ceil.file "$T/ceil-file/f"; bbread big.ceil.blocks "$T/ceil-blocks/f"; }
done
bench_peer_stop ceil-file
bench_peer_stop ceil-blocks
rm -rf "$T/ceil-blocks.d"
gw_stop main
gw_start main "$T/gw.json" "$M" || bench_die "gateway restart"
wait_until 60 views_ready "$M" || bench_die "views not ready after the restart"
bench_say "restart: mounted in $(s_between "$GW_T0" "$GW_T1") s"
for r in $(seq 1 "$REPEAT"); do
	bbread big.restart "$M/big/big"
	plainread big.plain
done
fig "re-read from the burst buffer after drop_caches, MiB/s" big.bb ""
bench_figure "  GETs per read" "$(summary big.bb.gets)" "0"
fig "same, after a gateway restart, MiB/s" big.restart ""
bench_figure "  GETs per read" "$(summary big.restart.gets)" "0"
fig "plain file on the same disk after drop_caches, MiB/s" big.plain ""
bench_figure "burst buffer as % of the plain file" "$(pct big.bb big.plain)" ">= 70 %"
bench_figure "after restart as % of the plain file" "$(pct big.restart big.plain)" ">= 70 %"
fig "fuse-ceiling (no checks), from the plain file, MiB/s" big.ceil.file ""
bench_figure "  as % of the plain file" "$(pct big.ceil.file big.plain)" ""
fig "fuse-ceiling (no checks), from block files, MiB/s" big.ceil.blocks ""
bench_figure "  as % of the plain file" "$(pct big.ceil.blocks big.plain)" ""
rm -f "$T/plain"
fi
gw_stop main

# ===================== 3. cached reads while evicting =====================
if want evict; then
echo
part=$((LOOP_MIB / 4))
bench_say "3. 4 objects of $part MiB read in a loop (dd bs=1M, drop_caches before each object): budget above vs below the $LOOP_MIB MiB"
head -c $((part << 20)) /dev/urandom >"$T/part" || bench_die "no space for $T/part"
for i in 1 2 3 4; do
	"$S3TOOL" put "$B" "e/loop$i" "$T/part" >/dev/null || bench_die "put e/loop$i"
done
rm -f "$T/part"
mkdir -p "$T/views3"
printf '{ "name": "loop", "bucket": "%s", "match": { "prefix": "e/" }, "layout": { "strip_prefix": "e/" }, "visibility": "session" }\n' \
	"$B" >"$T/views3/loop.json"
for c in "fits $((LOOP_MIB * 2))" "evicts $((LOOP_MIB * 5 / 8))"; do
	set -- $c
	case=$1 budget=$2
	rm -rf "$T/state3"
	gw_config "$T/gw3.json" "$T/state3" "$T/views3" "bench-cache3-$$-$RANDOM" "$KAFKA_TOPIC" 1 "${budget}MiB"
	gw_start loop "$T/gw3.json" "$M" || bench_die "gateway ($case)"
	wait_until 60 eval '[[ $(ls "$M/loop" 2>/dev/null | wc -l) == 4 ]]' || bench_die "loop objects not listed"
	# Twice: the second open of each stores it (the first is a cold
	# stream when an object is over cache.cold_min).
	for i in 1 2 3 4 1 2 3 4; do
		drop_caches
		dd if="$M/loop/loop$i" of=/dev/null bs=1M 2>/dev/null || bench_die "fill"
	done
	for r in $(seq 1 "$REPEAT"); do
		a=($(stats '.cache.hits, .cache.misses, .cache.evictions, .s3.get'))
		ns=0
		for i in 1 2 3 4; do
			drop_caches
			t0=$(now_ns)
			dd if="$M/loop/loop$i" of=/dev/null bs=1M 2>/dev/null || bench_die "loop read"
			t1=$(now_ns)
			ns=$((ns + t1 - t0))
		done
		b=($(stats '.cache.hits, .cache.misses, .cache.evictions, .s3.get, .cache.used_bytes'))
		rec "loop.$case" "$(rate "$LOOP_MIB" 0 "$ns")"
		rec "loop.$case.hits" "$((b[0] - a[0]))"
		rec "loop.$case.misses" "$((b[1] - a[1]))"
		rec "loop.$case.evictions" "$((b[2] - a[2]))"
		rec "loop.$case.gets" "$((b[3] - a[3]))"
		rec "loop.$case.used_mib" "$((b[4] >> 20))"
	done
	# Hot reads of loop1 while a second reader streams loop2..4 (a drop
	# before each object, so its reads reach the gateway): under "fits"
	# the stream is served by the cache, under "evicts" it keeps the cache
	# at its budget and evicting.
	dd if="$M/loop/loop1" of=/dev/null bs=1M 2>/dev/null || bench_die "hot fill"
	(while :; do
		for i in 2 3 4; do
			echo 1 >/proc/sys/vm/drop_caches
			dd if="$M/loop/loop$i" of=/dev/null bs=1M 2>/dev/null
		done
	done) &
	streamer=$!
	a=($(stats '.cache.hits, .cache.misses, .cache.evictions, .s3.get'))
	for r in $(seq 1 $((REPEAT * 3))); do
		drop_caches
		t0=$(now_ns)
		dd if="$M/loop/loop1" of=/dev/null bs=1M 2>/dev/null || bench_die "hot read"
		t1=$(now_ns)
		rec "hot.$case" "$(rate "$part" "$t0" "$t1")"
	done
	b=($(stats '.cache.hits, .cache.misses, .cache.evictions, .s3.get'))
	kill "$streamer" 2>/dev/null
	wait "$streamer" 2>/dev/null
	rec "hot.$case.counts" "$((b[0] - a[0]))/$((b[1] - a[1]))/$((b[2] - a[2]))/$((b[3] - a[3]))"
	gw_stop loop
	fig "loop of $LOOP_MIB MiB, budget ${budget} MiB ($case), MiB/s" "loop.$case" ""
	bench_figure "  per pass: hits / misses / evictions / GETs" \
		"$(summary "loop.$case.hits") / $(summary "loop.$case.misses") / $(summary "loop.$case.evictions") / $(summary "loop.$case.gets")" ""
	bench_figure "  used_bytes after a pass, MiB" "$(summary "loop.$case.used_mib")" "<= $budget"
	fig "hot $part MiB object (cached) while a 2nd reader streams, budget ${budget} MiB ($case), MiB/s" "hot.$case" ""
	bench_figure "  during it (both readers): hits / misses / evictions / GETs" \
		"$(awk -v k="hot.$case.counts" '$1 == k { print $2 }' "$T/figs" | tr / ' ' | awk '{ printf "%s / %s / %s / %s", $1, $2, $3, $4 }')" ""
done
bench_figure "loop: evicting as % of no eviction" "$(pct loop.evicts loop.fits)" "(LRU vs a cyclic loop)"
bench_figure "hot object while streaming: evicting as % of no eviction" "$(pct hot.evicts hot.fits)" ">= 80 %"
fi

# ===================== 4. warm-on-arrival cost =====================
if want events; then
echo
bench_say "4. events applied/s and produce -> visible, without and with a warm view receiving every event ($EVENTS records, bench_events.sh)"
for w in 0 cold 1; do
	: >"$T/ev$w"
	BENCH_RESULTS=$T/ev$w BENCH_WARM_VIEW=$w BENCH_EVENTS=$EVENTS BENCH_FETCH_WAITS=${BENCH_FETCH_WAITS:-1} \
		"$HERE/bench_events.sh" 2>&1 | sed "s/^/    [warm=$w] /"
	((PIPESTATUS[0] == 0)) || bench_say "warning: bench_events.sh (warm view $w) failed: its figures may be incomplete"
done
evfig() { awk -F'|' -v k="$2" 'index($1, k) == 1 { print $2; exit }' "$T/ev$1"; }
for k in "events/s, 100 views, fw=1: total" "events/s, 100 views, fw=1: steady state (10-90 %)" \
	"visible_latency_ms under load p50/p99, fw=1" "idle produce->stat sees it p50/p99 ms, fw=1" \
	"idle gateway histogram p50/p99 ms, fw=1"; do
	bench_figure "$k: no extra view / extra view / extra warm view" "$(evfig 0 "$k") / $(evfig cold "$k") / $(evfig 1 "$k")" ""
done
fi
# ===================== 5. warm on arrival with real objects =====================
# Objects arriving at the store's own PUT rate through RGW's notifications
# (not synthetic records): a fresh gateway per run, with one `eventual`
# view over a fresh prefix, without and with "warm": true, the runs
# alternating. (A fresh gateway reads the topic from its start, whatever
# auto.offset.reset says, so its latency histogram mixes in every older
# event: the latency here is timed from outside, by probes.)
if want arrive; then
echo
bench_say "5. $ARRIVE_N x 64 KiB PUT by s3fill (8 threads) into a notified bucket, an eventual view over them without and with warm (a fresh gateway each run)"
S3FILL=$FACETFS_BUILD/tests/bench/s3fill
[[ -x $S3FILL ]] || bench_die "no $S3FILL (ninja -C $FACETFS_BUILD)"
M5=$T/mnt5
for r in $(seq 1 "$REPEAT"); do
	for w in off on; do
		p=arr$r$w
		mkdir -p "$T/views5-$p"
		extra='"visibility": "eventual"'
		[[ $w == on ]] && extra+=', "warm": true'
		printf '{ "name": "arr", "bucket": "%s", "match": { "prefix": "%s/" }, "layout": { "strip_prefix": "%s/" }, %s }\n' \
			"$B" "$p" "$p" "$extra" >"$T/views5-$p/arr.json"
		gw_config "$T/gw5.json" "$T/state5-$p" "$T/views5-$p" "bench-cache5-$$-$RANDOM" "$KAFKA_TOPIC" 1 1GiB
		gw_start arrive "$T/gw5.json" "$M5" || bench_die "gateway (arrive $p)"
		wait_until 60 views_ready "$M5" || bench_die "view of run $p not ready"
		# S3 GETs, events applied, warm fetched / skipped / failed; warm_n:
		# the wants the warm fetchers are done with.
		counts() { jq -r '[.s3.get, .events.applied, .cache.warm.fetched, .cache.warm.skipped, .cache.warm.failed] | map(tostring) | join(" ")' "$M5/.facetfs/stats"; }
		warm_n() { local c=($(counts)); echo $((c[2] + c[3] + c[4])); }
		# The consumer is live once an event of this prefix shows.
		"$S3TOOL" put "$B" "$p/probe" /etc/hostname >/dev/null || bench_die "probe PUT"
		wait_until 60 eval '[[ -e $M5/arr/probe ]]' || bench_die "the probe's event never showed ($p)"
		if [[ $w == on ]]; then    # the probe's own warm fetch done first
			wait_until 60 eval '(( $(warm_n) >= 1 ))' || bench_die "the probe was never warm-fetched ($p)"
		fi
		a=($(counts))
		pid=$(gw_pid arrive)
		cpu0=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
		t0=$(now_ns)
		"$S3FILL" "$B" "$p/o" "$ARRIVE_N" --size 65536 --threads 8 >/dev/null &
		fill=$!
		# While it runs: probes PUT one at a time, each timed from its PUT
		# returning to stat() seeing it in the mount.
		python3 "$HERE/../lib/visible_probe.py" "$S3TOOL" "$B" "$p/" "$M5/arr" --while-pid "$fill" \
			--name q --count 200 --gap 0.1 --timeout 30 >"$T/probe5-$p" || bench_die "probes ($p)"
		wait "$fill" || bench_die "s3fill ($p)"
		t1=$(now_ns)
		nprobe=$(wc -l <"$T/probe5-$p")
		listed() { (( $(ls "$M5/arr" | wc -l) == ARRIVE_N + 1 + nprobe )); }
		wait_until 120 listed || bench_die "$p: $(ls "$M5/arr" | wc -l) of $((ARRIVE_N + 1 + nprobe)) listed after 120 s"
		t2=$(now_ns)
		if [[ $w == on ]]; then
			warmed() { (( $(warm_n) - a[2] - a[3] - a[4] >= ARRIVE_N + nprobe )); }
			wait_until 300 warmed || bench_die "$p: warm fetches not done after 300 s"
		fi
		t3=$(now_ns)
		cpu1=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
		b=($(counts))
		sort -n "$T/probe5-$p" | awk '{ v[n++] = $1 } END { if (n) printf "%s %s %s\n", v[int(n * 0.5)], v[int(n * 0.9)], v[n - 1] }' >"$T/probe5-$p.q"
		read -r q50 q90 qmax <"$T/probe5-$p.q" || bench_die "no probe figures ($p)"
		rec "arr.$w.puts" "$(rate "$ARRIVE_N" "$t0" "$t1")"
		rec "arr.$w.lag_ms" "$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.0f", (b - a) / 1e6 }')"
		rec "arr.$w.p50" "$q50"
		rec "arr.$w.p90" "$q90"
		rec "arr.$w.max" "$qmax"
		rec "arr.$w.probes" "$nprobe"
		rec "arr.$w.cpu_ms" "$(awk -v t="$((cpu1 - cpu0))" -v hz="$(getconf CLK_TCK)" -v n="$ARRIVE_N" 'BEGIN { printf "%.2f", t * 1000 / hz / n }')"
		rec "arr.$w.gets" "$((b[0] - a[0]))"
		rec "arr.$w.applied" "$((b[1] - a[1]))"
		if [[ $w == on ]]; then
			rec "arr.on.fetched" "$((b[2] - a[2]))"
			rec "arr.on.skipped" "$((b[3] - a[3]))"
			rec "arr.on.failed" "$((b[4] - a[4]))"
			rec "arr.on.warm_s" "$(awk -v a="$t1" -v b="$t3" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')"
		fi
		# s3fill's bytes: 'a' + i mod 26
		cmp -s "$M5/arr/o0000007" <(python3 -c 'import sys; sys.stdout.buffer.write(bytes(97 + i % 26 for i in range(65536)))') ||
			bench_die "$p: o0000007 read through the mount is not what s3fill wrote"
		gw_stop arrive
		bench_say "run $p: load average $(loadavg)"
	done
done
for w in off on; do
	what=$([[ $w == on ]] && echo "with warm" || echo "without warm")
	fig "arrive, $what: s3fill PUTs/s" "arr.$w.puts" ""
	bench_figure "  events applied / S3 GETs by the gateway" "$(summary "arr.$w.applied") / $(summary "arr.$w.gets")" ""
	bench_figure "  probe PUT returned -> visible in the mount, p50 / p90 / max ms" \
		"$(summary "arr.$w.p50") / $(summary "arr.$w.p90") / $(summary "arr.$w.max")" "($(summary "arr.$w.probes") probes a run)"
	fig "  last PUT returned -> all listed, ms" "arr.$w.lag_ms" ""
	fig "  gateway CPU ms per object" "arr.$w.cpu_ms" ""
done
bench_figure "  warm: fetched / skipped / failed" "$(summary arr.on.fetched) / $(summary arr.on.skipped) / $(summary arr.on.failed)" "fetched = $ARRIVE_N"
fig "  warm: last PUT returned -> all fetched, s" "arr.on.warm_s" ""
bench_figure "arrive: PUTs/s with warm as % of without" "$(pct arr.on.puts arr.off.puts)" ""
bench_figure "arrive: probe visible p50 / p90 with warm, without" "$(summary arr.on.p50 | cut -d' ' -f1) / $(summary arr.on.p90 | cut -d' ' -f1), $(summary arr.off.p50 | cut -d' ' -f1) / $(summary arr.off.p90 | cut -d' ' -f1) ms" "unchanged within noise"
fi
echo
bench_say "done, load average $(loadavg)"
