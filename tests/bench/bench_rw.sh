#!/usr/bin/env bash
# bench_rw.sh — issue 3 benchmarks: reads and writes through writable views.
#
# Prints figures, asserts nothing about speed (a step that fails, or reads
# wrong bytes, stops the run with an error). One bucket, two writable views
# over it: "sess" (prefix s/, visibility session) and "comm" (prefix c/,
# visibility commit), both with strip_prefix. Each figure is measured
# REPEAT times (default 3) and printed as "median (min-max)".
#
#  1. small random reads of hot objects (200 x 8 KiB, 200 x 116 KiB per view):
#     open+read whole+close of random files, and random 4 KiB preads on
#     descriptors opened beforehand; ops/s, MiB/s, session/commit ratio,
#     and the S3 requests per operation from .facetfs/stats.
#  2. writes through the mount: 1,000 files of 64 KiB (cp -r, one stream;
#     and 10 streams like aws' default concurrency) next to
#     `aws s3 cp --recursive`; one BIG_MIB file (default 1024) with 1 MiB
#     writes next to `aws s3 cp` and one `s3tool put` (a single PUT).
#  3. ("cold") cold sequential read of a COLD_MIB object (default 512): the
#     mount's first open of it next to ONE curl GET of the same object in
#     the same round (the target: >= 80 %) and an s3fs mount of the same
#     bucket (its defaults, no use_cache; skipped without s3fs); per round
#     the gateway's CPU-s per GiB (/proc/PID/stat utime + stime) and the
#     load average; `s3tool get` (streamed) only beside. The bound of the
#     CPU per GiB: curl's own, plus fuse-ceiling's replying from memory
#     (tests/bench/fuse_ceiling.c, "memory"). Then re-reads: the
#     second open (which the admission rule stores), later opens (page
#     cache) next to a local page-cache read.
#     ("four") four readers at once of four FOUR_MIB objects (default 128)
#     next to four curl GETs at once: MiB/s in all, CPU-s per GiB (and
#     the gateway's minor page faults per GiB, here and for "cold").
#     ("random") RAND_N (default 200) 64 KiB preads at random offsets of a
#     RAND_MIB object (default 512) on one descriptor (its first open):
#     latency per read (median, p99), S3 GETs per read, bytes fetched and
#     read-ahead bytes wasted per byte read; next to curl's ranged GETs of
#     the same ranges (one curl, one connection).
#  4. ("small", bench_rw_small.sh) 1,000 x 64 KiB by one `cp -r` under each
#     cache.durability setting next to aws --recursive, s3fs and rclone,
#     the clock stopping when S3 lists all 1,000.
#  5. (ONLY=stream) one STREAM_MIB file (default 1024) written with 1 MiB
#     writes through the mount (parts stream while it is written), next to
#     `aws s3 cp`, and cp to s3fs and rclone mounts, the clock stopping when
#     S3 lists the object; STREAM_REPEAT runs (default 2).
#  6. (ONLY=big6) one BIG6_MIB file (default 6144) written through the
#     mount from a generator (no source file), read back through the mount
#     and with `aws s3 cp ... -`: the MD5s must match. Needs a memstore of
#     BIG6_MIB + 1 GiB at least (14 GiB on a 24 GiB machine).
#
# Bed: BED_DIR=DIR (a bed that is up) or its env in the environment; with
# neither, the script starts its own bed (BED_MEMSTORE_BYTES=8 GiB, RAM)
# and stops it at the end. The big objects are deleted after each
# measurement and RGW's garbage collection is run (memstore frees deleted
# tails only then): the store needs max(BIG_MIB, REPEAT x (COLD_MIB +
# 4 x FOUR_MIB + RAND_MIB)) + 1 GiB (the read objects are all PUT before
# the gateway starts). Env: REPEAT, SECS (per random-read run, default 2),
# BIG_MIB, COLD_MIB, FOUR_MIB, RAND_MIB, RAND_N, KEEP_TMP=1, ONLY (default
# "reads cold four random writes small": the sections to run),
# READAHEAD_STREAMS (cache.readahead_streams), UPLOAD_STREAMS
# (s3.upload_streams), CACHE_OPTIONS (a JSON object merged into the
# gateway's "cache" settings).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPEAT=${REPEAT:-3}
SECS=${SECS:-2}
BIG_MIB=${BIG_MIB:-1024}
COLD_MIB=${COLD_MIB:-512}
FOUR_MIB=${FOUR_MIB:-128}
RAND_MIB=${RAND_MIB:-512}
RAND_N=${RAND_N:-200}
STREAM_MIB=${STREAM_MIB:-1024}
STREAM_REPEAT=${STREAM_REPEAT:-2}
BIG6_MIB=${BIG6_MIB:-6144}
OWN_BED=
want() { [[ " ${ONLY:-reads cold four random writes small} " == *" $1 "* ]]; }
# The MiB of the objects the read sections PUT before the gateway starts.
read_mib=0
want cold && read_mib=$((read_mib + REPEAT * COLD_MIB))
want four && read_mib=$((read_mib + REPEAT * 4 * FOUR_MIB))
want random && read_mib=$((read_mib + REPEAT * RAND_MIB))

if [[ -z ${S3_URL:-} && -z ${BED_DIR:-} ]]; then
	avail_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
	need_kib=$(( (BIG_MIB + read_mib + 3072) * 1024 ))
	if (( avail_kib < need_kib )); then
		echo "bench_rw: only $((avail_kib / 1024)) MiB of memory available, need about $((need_kib / 1024)) MiB for the RAM-backed store (set BIG_MIB/COLD_MIB/FOUR_MIB/RAND_MIB lower)" >&2
		exit 1
	fi
fi

# shellcheck source=tests/bench/bench_lib.sh
. "$HERE/bench_lib.sh"
bench_own_bed 8589934592
HELPER=$HERE/bench_rw.py
S3FILL=$FACETFS_BUILD/tests/bench/s3fill


bench_require_bed
[[ -x $S3FILL && -x $S3TOOL ]] || bench_die "build first: ninja -C $FACETFS_BUILD"
memstore=$(awk -F' = ' '/memstore device bytes/ {print $2}' "${CEPH_CONF:-/dev/null}" 2>/dev/null)
# At most REPEAT cold objects, or one big object, plus ~700 MiB of small ones.
need_mib=$(( (BIG_MIB > read_mib ? BIG_MIB : read_mib) + 1024 ))
want big6 && ((BIG6_MIB + 1024 > need_mib)) && need_mib=$((BIG6_MIB + 1024))
# The staging budget holds the largest file written.
cache_mib=$BIG_MIB
want stream && ((STREAM_MIB > cache_mib)) && cache_mib=$STREAM_MIB
want big6 && ((BIG6_MIB > cache_mib)) && cache_mib=$BIG6_MIB
if [[ -n $memstore ]] && (( memstore < need_mib * 1048576 )); then
	bench_die "the bed's memstore ($((memstore >> 20)) MiB) is too small for BIG_MIB=$BIG_MIB and $read_mib MiB of objects to read (bring the bed up with BED_MEMSTORE_BYTES=8589934592, or lower them)"
fi

B=bench-rw-$$-$RANDOM
T=$BENCH_TMP
M=$T/mnt
BUCKET_URL=$S3_URL/$B

# ---- figures: rec KEY VALUE; summary KEY -> "median (min-max)" ----
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }'; }
# pct A B: the last value of A as a percentage of the last value of B.
pct() {
	awk -v a="$1" -v b="$2" '$1 == a { x = $2 } $1 == b { y = $2 }
		END { printf "%.1f", (y > 0 ? 100 * x / y : 0) }' "$T/figs"
}
rate() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%.2f", n / ((b - a) / 1e9) }'; }
stats() { jq -r "[$1] | map(tostring) | join(\" \")" "$M/.facetfs/stats"; }
curl_s3() {
	curl -s --aws-sigv4 "aws:amz:default:s3" -u "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@"
}
s3del() { "$S3TOOL" delete "$B" "$1" >/dev/null || bench_die "delete $1"; }

bench_say "bucket $B, $REPEAT runs per figure, load average $(loadavg)"
"$AWS" --endpoint-url "$S3_URL" s3api create-bucket --bucket "$B" >/dev/null || bench_die "create bucket"

# ---- data, all in S3 before the gateway starts (its first scan finds it) ----
for p in s c; do
	"$S3FILL" "$B" "$p/h8k/" 200 --size 8192 --threads 8 >/dev/null || bench_die "s3fill"
	"$S3FILL" "$B" "$p/h116k/" 200 --size 118784 --threads 8 >/dev/null || bench_die "s3fill"
done
if want cold; then
	head -c $((COLD_MIB << 20)) /dev/urandom >"$T/cold" || bench_die "no space for $T/cold"
	for r in $(seq 1 "$REPEAT"); do
		"$S3TOOL" put "$B" "s/cold$r" "$T/cold" >/dev/null || bench_die "put cold$r"
	done
fi
if want four; then
	head -c $((FOUR_MIB << 20)) /dev/urandom >"$T/four" || bench_die "no space for $T/four"
	for r in $(seq 1 "$REPEAT"); do
		for i in 1 2 3 4; do
			"$S3TOOL" put "$B" "s/four$r-$i" "$T/four" >/dev/null || bench_die "put four$r-$i"
		done
	done
	rm -f "$T/four"
fi
if want random; then   # (kept: the reads are compared with it)
	head -c $((RAND_MIB << 20)) /dev/urandom >"$T/rand" || bench_die "no space for $T/rand"
	for r in $(seq 1 "$REPEAT"); do
		"$S3TOOL" put "$B" "s/rand$r" "$T/rand" >/dev/null || bench_die "put rand$r"
	done
fi

mkdir -p "$T/views"
for v in "sess s/ session" "comm c/ commit"; do
	set -- $v
	printf '{ "name": "%s", "bucket": "%s", "match": { "prefix": "%s" }, "layout": { "strip_prefix": "%s" }, "writable": true, "visibility": "%s" }\n' \
		"$1" "$B" "$2" "$2" "$3" >"$T/views/$1.json"
done
# No bucket notifications: nothing here needs events, and a push per PUT
# would load the machine during the write figures.
gw_config "$T/gw.json" "$T/state" "$T/views" "bench-rw-$$-$RANDOM" "bench-rw-$$" 100 \
	"$((cache_mib + 1024))MiB"
# READAHEAD_STREAMS=N: cache.readahead_streams for this run (default: the
# gateway's default; 0 turns read-ahead off, to compare).
if [[ -n ${READAHEAD_STREAMS:-} ]]; then
	jq ".cache.readahead_streams = $READAHEAD_STREAMS" "$T/gw.json" >"$T/gw.json.new" &&
		mv "$T/gw.json.new" "$T/gw.json" || bench_die "READAHEAD_STREAMS"
	bench_say "cache.readahead_streams = $READAHEAD_STREAMS"
fi
# UPLOAD_STREAMS=N: s3.upload_streams (parts in flight) for this run.
if [[ -n ${UPLOAD_STREAMS:-} ]]; then
	jq ".s3.upload_streams = $UPLOAD_STREAMS" "$T/gw.json" >"$T/gw.json.new" &&
		mv "$T/gw.json.new" "$T/gw.json" || bench_die "UPLOAD_STREAMS"
	bench_say "s3.upload_streams = $UPLOAD_STREAMS"
fi
# CACHE_OPTIONS='{...}': settings merged into the gateway's "cache" for
# this run (e.g. '{"readahead_total_streams": 8}').
if [[ -n ${CACHE_OPTIONS:-} ]]; then
	jq --argjson o "$CACHE_OPTIONS" '.cache += $o' "$T/gw.json" >"$T/gw.json.new" &&
		mv "$T/gw.json.new" "$T/gw.json" || bench_die "CACHE_OPTIONS: $CACHE_OPTIONS"
	bench_say "cache options: $CACHE_OPTIONS"
fi
bench_topic "bench-rw-$$"
gw_start rw "$T/gw.json" "$M" || exit 1
wait_until 60 views_ready "$M" || bench_die "views not ready"
[[ $(ls "$M/sess/h116k" | wc -l) == 200 && $(ls "$M/comm/h8k" | wc -l) == 200 ]] ||
	bench_die "the views do not list the 200 objects"

# ===================== 1. small random reads of hot objects =====================
if want reads; then
echo
bench_say "1. small random reads of hot objects (one stream, ${SECS} s per run)"
for v in sess comm; do
	for s in h8k h116k; do
		# Twice: the first open of an inode is direct I/O (tests/bench/README.md), so
		# the page cache is filled by the second pass.
		python3 "$HELPER" warm "$M/$v/$s" >/dev/null || bench_die "warm $v/$s"
		python3 "$HELPER" warm "$M/$v/$s" >/dev/null || bench_die "warm $v/$s"
	done
done
for r in $(seq 1 "$REPEAT"); do
	for s in h8k h116k; do
		for mode in orc pread; do
			for v in sess comm; do
				a=($(stats '.fuse.open, .fuse.read, .s3.head, .s3.get'))
				out=$(python3 "$HELPER" "$mode" "$M/$v/$s" "$SECS" "$r") || bench_die "$mode $v/$s"
				b=($(stats '.fuse.open, .fuse.read, .s3.head, .s3.get'))
				set -- $out    # ops N secs S ops_s X mib_s Y
				rec "$mode.$s.$v.ops" "$6"
				rec "$mode.$s.$v.mib" "$8"
				rec "$mode.$s.$v.fuse" "$(div $(( (b[0] - a[0]) + (b[1] - a[1]) )) "$2")"
				rec "$mode.$s.$v.head" "$(div $((b[2] - a[2])) "$2")"
				rec "$mode.$s.$v.get" "$(div $((b[3] - a[3])) "$2")"
				eval "last_$v=$6"
			done
			rec "$mode.$s.ratio" "$(div "$last_sess" "$last_comm")"
		done
	done
done
for s in h8k h116k; do
	size=$([[ $s == h8k ]] && echo "8 KiB" || echo "116 KiB")
	for mode in orc pread; do
		what=$([[ $mode == orc ]] && echo "open+read+close" || echo "4 KiB pread, open fds")
		for v in sess comm; do
			fig "$size $what, $v: ops/s" "$mode.$s.$v.ops" ""
			fig "$size $what, $v: MiB/s" "$mode.$s.$v.mib" ""
			bench_figure "  per op: FUSE open+read / S3 HEAD / S3 GET" \
				"$(summary "$mode.$s.$v.fuse") / $(summary "$mode.$s.$v.head") / $(summary "$mode.$s.$v.get")" ""
		done
		fig "$size $what: session/commit" "$mode.$s.ratio" ">= 5x"
	done
done

fi

# ===================== 3. cold reads next to one curl GET =====================
# The yardstick is curl: one GET of the same object in the same round (the
# store's own speed here); s3fs beside it; s3tool (our client alone) only
# beside, never as the target. Every round reads objects the mount has
# never opened (the admission rule: a large version's first open is a cold
# stream, docs/burst-buffer.md "Admission"). Per round: MiB/s, the
# gateway's CPU-s per GiB (utime + stime of its /proc/PID/stat before and
# after) and the load average.
# s3fs beside it: the same bucket, its defaults (no use_cache), one mount,
# ready when the key it is given shows.
s3fs_start() {
	command -v s3fs >/dev/null || { bench_say "no s3fs: its figures are n/a"; return 1; }
	bench_peer_creds
	S3FS_KEY=$1
	s3fs_ready() { [[ -e $1/$S3FS_KEY ]]; }
	BENCH_PEER_READY=s3fs_ready bench_peer_start s3fs "$T/s3fs" s3fs "$B" "$T/s3fs" -f \
		-o "url=$S3_URL,use_path_request_style,passwd_file=$T/s3fs.passwd"
}
CLK_TCK=$(getconf CLK_TCK)
TIMEFORMAT='%3U %3S'   # bash's `time`: user and system CPU-s
# gw_cpu: the gateway's CPU time so far, in clock ticks (utime + stime;
# the fields after the command name, which ends with ")").
gw_cpu() { sed 's/^.*) //' "/proc/$(gw_pid rw)/stat" | awk '{ print $12 + $13 }'; }
# gw_faults: the gateway's minor page faults so far (a fresh buffer faults
# in, a reused one does not).
gw_faults() { sed 's/^.*) //' "/proc/$(gw_pid rw)/stat" | awk '{ print $8 }'; }
# cpu_gib TICKS MIB: CPU-s per GiB read.
cpu_gib() { awk -v t="$1" -v hz="$CLK_TCK" -v m="$2" 'BEGIN { printf "%.2f", t / hz / (m / 1024) }'; }
load1() { cut -d' ' -f1 /proc/loadavg; }
# ms_of DURATION_S: milliseconds.
ms_of() { awk -v s="$1" 'BEGIN { printf "%.2f", s * 1000 }'; }

if want cold; then
echo
bench_say "3. sequential read of a $COLD_MIB MiB object (dd bs=1M): the mount's first open next to one curl GET, load average $(loadavg)"
HAVE_S3FS=
s3fs_start s/cold1 && HAVE_S3FS=1
for r in $(seq 1 "$REPEAT"); do
	a=($(stats '.s3.get, .s3.bytes_read, .fuse.read, .readahead.ranges, .readahead.bytes, .readahead.wasted_bytes, .cache.not_admitted, .fuse.open_direct_cold, .cache.admitted'))
	c0=$(gw_cpu) f0=$(gw_faults)
	t0=$(now_ns)
	dd if="$M/sess/cold$r" of=/dev/null bs=1M 2>/dev/null || bench_die "read cold$r"
	t1=$(now_ns)
	c1=$(gw_cpu) f1=$(gw_faults)
	rec cold.faults "$(( (f1 - f0) * 1024 / COLD_MIB ))"
	b=($(stats '.s3.get, .s3.bytes_read, .fuse.read, .readahead.ranges, .readahead.bytes, .readahead.wasted_bytes, .cache.not_admitted, .fuse.open_direct_cold, .cache.admitted'))
	rec cold.mount "$(rate "$COLD_MIB" "$t0" "$t1")"
	rec cold.cpu "$(cpu_gib $((c1 - c0)) "$COLD_MIB")"
	rec cold.load "$(load1)"
	rec cold.gets "$((b[0] - a[0]))"
	rec cold.freads "$((b[2] - a[2]))"
	rec cold.ra_ranges "$((b[3] - a[3]))"
	rec cold.ra_mib "$(( (b[4] - a[4]) >> 20 ))"
	rec cold.ra_wasted "$((b[5] - a[5]))"
	rec cold.not_admitted "$((b[6] - a[6]))"
	rec cold.direct "$((b[7] - a[7]))"
	rec cold.admitted "$((b[8] - a[8]))"
	[[ $((b[1] - a[1])) == $((COLD_MIB << 20)) ]] || rec cold.extra_bytes "$((b[1] - a[1] - (COLD_MIB << 20)))"
	t0=$(now_ns)
	# (TIMEFORMAT: curl's user + system CPU-s on stderr, through the group)
	{ time code=$(curl_s3 -o /dev/null -w '%{http_code}' "$BUCKET_URL/s/cold$r"); } 2>"$T/curl.cpu"
	t1=$(now_ns)
	[[ $code == 200 ]] || bench_die "curl GET: HTTP $code"
	rec cold.curl "$(rate "$COLD_MIB" "$t0" "$t1")"
	rec cold.curl.cpu "$(awk -v m="$COLD_MIB" '{ printf "%.2f", ($1 + $2) / (m / 1024) }' "$T/curl.cpu")"
	rec cold.curl.load "$(load1)"
	rec cold.pct_curl "$(pct cold.mount cold.curl)"
	if [[ -n $HAVE_S3FS ]]; then
		t0=$(now_ns)
		dd if="$T/s3fs/s/cold$r" of=/dev/null bs=1M 2>/dev/null || bench_die "s3fs read cold$r"
		t1=$(now_ns)
		rec cold.s3fs "$(rate "$COLD_MIB" "$t0" "$t1")"
		rec cold.x_s3fs "$(pct cold.mount cold.s3fs)"
	fi
	t0=$(now_ns)
	"$S3TOOL" get "$B" "s/cold$r" >/dev/null || bench_die "s3tool get"
	t1=$(now_ns)
	rec cold.s3tool "$(rate "$COLD_MIB" "$t0" "$t1")"
	rec cold.pct_s3tool "$(pct cold.mount cold.s3tool)"
done
bench_peer_stop s3fs
# The bound of the gateway's CPU per GiB: what a gateway doing only the
# unavoidable part spends, the receiving of the bytes (curl's CPU per GiB,
# above) and the handing of them to the reader through FUSE (fuse-ceiling
# serving the same size from memory with direct I/O, as the gateway opens
# a cold stream).
CEIL=$FACETFS_BUILD/tests/bench/fuse-ceiling
if [[ -x $CEIL ]] && BENCH_PEER_READY= bench_peer_start ceil "$T/ceil" "$CEIL" memory $((COLD_MIB << 20)) "$T/ceil"; then
	ceil_pid=${BENCH_PEER_PID[ceil]}
	for r in $(seq 1 "$REPEAT"); do
		c0=$(sed 's/^.*) //' "/proc/$ceil_pid/stat" | awk '{ print $12 + $13 }')
		t0=$(now_ns)
		dd if="$T/ceil/f" of=/dev/null bs=1M 2>/dev/null || bench_die "read fuse-ceiling"
		t1=$(now_ns)
		c1=$(sed 's/^.*) //' "/proc/$ceil_pid/stat" | awk '{ print $12 + $13 }')
		rec cold.ceil "$(rate "$COLD_MIB" "$t0" "$t1")"
		rec cold.ceil.cpu "$(cpu_gib $((c1 - c0)) "$COLD_MIB")"
	done
	bench_peer_stop ceil
else
	bench_say "no fuse-ceiling ($CEIL): the bound is n/a"
fi
# Re-reads of cold1: the second open (the rule stores its blocks now, from
# S3 again; the page cache fills), then later opens (the page cache), next
# to a local file read from the page cache.
cat "$T/cold" >/dev/null
for r in $(seq 0 "$REPEAT"); do
	a=($(stats '.s3.get, .cache.admitted'))
	t0=$(now_ns)
	dd if="$M/sess/cold1" of=/dev/null bs=1M 2>/dev/null || bench_die "re-read"
	t1=$(now_ns)
	b=($(stats '.s3.get, .cache.admitted'))
	if ((r == 0)); then
		rec hot.second "$(rate "$COLD_MIB" "$t0" "$t1")"
		rec hot.second_gets "$((b[0] - a[0]))"
		rec hot.second_admitted "$((b[1] - a[1]))"
	else
		rec hot.mount "$(rate "$COLD_MIB" "$t0" "$t1")"
		rec hot.gets "$((b[0] - a[0]))"
		t0=$(now_ns)
		dd if="$T/cold" of=/dev/null bs=1M 2>/dev/null
		t1=$(now_ns)
		rec hot.local "$(rate "$COLD_MIB" "$t0" "$t1")"
		rec hot.pct "$(pct hot.mount hot.local)"
	fi
done
fig "cold read through the mount (session, first open), MiB/s" cold.mount ""
fig "one GET of the same object, curl, MiB/s" cold.curl ""
fig "cold read: mount as % of one curl GET (each round)" cold.pct_curl ">= 80 %"
fig "  gateway CPU-s per GiB read cold" cold.cpu "<= 0.8"
fig "  bound: curl's CPU-s per GiB (user + system)" cold.curl.cpu ""
fig "  bound: a FUSE server replying from memory, CPU-s per GiB" cold.ceil.cpu ""
bench_figure "  bound: the two together, CPU-s per GiB" \
	"$(awk -v a="$(summary cold.curl.cpu | cut -d' ' -f1)" -v b="$(summary cold.ceil.cpu | cut -d' ' -f1)" \
		'BEGIN { if (a == "n/a" || b == "n/a") print "n/a"; else printf "%.2f", a + b }')" "(the least a gateway spends)"
fig "  (its reads from memory through FUSE, MiB/s)" cold.ceil ""
fig "  gateway minor page faults per GiB read cold" cold.faults ""
fig "  load average (1 min) after the mount's read / after curl's" cold.load ""
fig "  (after curl's)" cold.curl.load ""
bench_figure "  S3 GETs / FUSE reads per cold read" "$(summary cold.gets) / $(summary cold.freads)" ""
bench_figure "  ranges read ahead / their MiB / bytes wasted" \
	"$(summary cold.ra_ranges) / $(summary cold.ra_mib) / $(summary cold.ra_wasted)" ""
bench_figure "  blocks not admitted / admitted; direct I/O opens" \
	"$(summary cold.not_admitted) / $(summary cold.admitted); $(summary cold.direct)" "$((COLD_MIB)) / 0; 1"
[[ -z $(grep '^cold.extra_bytes ' "$T/figs") ]] || fig "  bytes fetched beyond the object" cold.extra_bytes "0"
fig "cold read through s3fs (defaults), MiB/s" cold.s3fs ""
fig "cold read: mount as % of s3fs" cold.x_s3fs ">= 120 %"
fig "(beside) one GET by s3tool get, MiB/s" cold.s3tool ""
fig "(beside) mount as % of s3tool" cold.pct_s3tool ""
fig "re-read, second open (stores the blocks; page cache filling), MiB/s" hot.second ""
bench_figure "  S3 GETs / blocks stored in it" "$(summary hot.second_gets) / $(summary hot.second_admitted)" ""
fig "re-read, third+ open (page cache), MiB/s" hot.mount ""
bench_figure "  S3 GETs in it" "$(summary hot.gets)" "0"
fig "local file from the page cache, MiB/s" hot.local ""
fig "hot re-read: mount as % of local page cache" hot.pct ">= 70 %"
for r in $(seq 1 "$REPEAT"); do s3del "s/cold$r"; done
rm -f "$T/cold"
rgw_gc
fi

# ---- four cold readers of four objects at once, next to four curls ----
if want four; then
echo
bench_say "3b. four readers at once of four $FOUR_MIB MiB objects (dd bs=1M), next to four curl GETs at once, load average $(loadavg)"
for r in $(seq 1 "$REPEAT"); do
	pids=()
	a=($(stats '.s3.get, .fuse.open_direct_cold'))
	c0=$(gw_cpu) f0=$(gw_faults)
	t0=$(now_ns)
	for i in 1 2 3 4; do
		dd if="$M/sess/four$r-$i" of=/dev/null bs=1M 2>/dev/null &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || bench_die "four readers"; done
	t1=$(now_ns)
	c1=$(gw_cpu) f1=$(gw_faults)
	rec four.faults "$(( (f1 - f0) * 1024 / (4 * FOUR_MIB) ))"
	b=($(stats '.s3.get, .fuse.open_direct_cold'))
	rec four.mount "$(rate $((4 * FOUR_MIB)) "$t0" "$t1")"
	rec four.cpu "$(cpu_gib $((c1 - c0)) $((4 * FOUR_MIB)))"
	rec four.load "$(load1)"
	rec four.gets "$((b[0] - a[0]))"
	rec four.direct "$((b[1] - a[1]))"
	pids=()
	t0=$(now_ns)
	for i in 1 2 3 4; do
		curl_s3 -o /dev/null -w '%{http_code}\n' "$BUCKET_URL/s/four$r-$i" >"$T/curl4.$i" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || bench_die "four curls"; done
	t1=$(now_ns)
	[[ $(cat "$T"/curl4.[1-4] | sort -u) == 200 ]] || bench_die "four curls: $(cat "$T"/curl4.[1-4] | tr '\n' ' ')"
	rec four.curl "$(rate $((4 * FOUR_MIB)) "$t0" "$t1")"
	rec four.curl.load "$(load1)"
	rec four.pct "$(pct four.mount four.curl)"
done
fig "four cold readers at once through the mount, MiB/s in all" four.mount ""
fig "four curl GETs of the same objects at once, MiB/s in all" four.curl ""
fig "four readers: mount as % of four curls (each round)" four.pct ">= 80 %"
fig "  gateway CPU-s per GiB" four.cpu "<= 0.8"
fig "  load average after the mount's readers / after the curls" four.load ""
fig "  (after the curls)" four.curl.load ""
bench_figure "  S3 GETs; direct I/O opens" "$(summary four.gets); $(summary four.direct)" ""
fig "  gateway minor page faults per GiB" four.faults ""
for r in $(seq 1 "$REPEAT"); do for i in 1 2 3 4; do s3del "s/four$r-$i"; done; done
rgw_gc
fi

# ---- random 64 KiB reads of a large object, next to curl's ranged GETs ----
if want random; then
echo
bench_say "3c. $RAND_N random 64 KiB reads of a $RAND_MIB MiB object (one descriptor, its first open), next to curl's ranged GETs of the same ranges on one connection, load average $(loadavg)"
for r in $(seq 1 "$REPEAT"); do
	a=($(stats '.s3.get, .s3.bytes_read, .readahead.wasted_bytes'))
	c0=$(gw_cpu)
	out=$(python3 "$HELPER" randread "$M/sess/rand$r" "$T/rand" "$RAND_N" "$r" "$T/ranges") ||
		bench_die "random reads"
	c1=$(gw_cpu)
	b=($(stats '.s3.get, .s3.bytes_read, .readahead.wasted_bytes'))
	set -- $out    # reads N p50_s A p99_s B
	rec rand.p50 "$(ms_of "$4")"
	rec rand.p99 "$(ms_of "$6")"
	rec rand.gets "$(div $((b[0] - a[0])) "$2")"
	rec rand.fetched "$(div $((b[1] - a[1])) $(("$2" * 65536)))"
	rec rand.wasted "$(div $((b[2] - a[2])) $(("$2" * 65536)))"
	rec rand.cpu_ms "$(awk -v t=$((c1 - c0)) -v hz="$CLK_TCK" -v n="$2" 'BEGIN { printf "%.2f", t / hz * 1000 / n }')"
	rec rand.load "$(load1)"
	# The same ranges with curl: one process, one connection, a transfer
	# each (--next), its time_total per line.
	: >"$T/curl.cfg"
	sep=
	while read -r off; do
		printf '%surl = "%s"\nrange = "%s-%s"\noutput = "/dev/null"\nsilent\naws-sigv4 = "aws:amz:default:s3"\nuser = "%s:%s"\nheader = "x-amz-content-sha256: UNSIGNED-PAYLOAD"\nwrite-out = "%%{http_code} %%{time_total}\\n"\n' \
			"$sep" "$BUCKET_URL/s/rand$r" "$off" $((off + 65535)) "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >>"$T/curl.cfg"
		sep=$'next\n'
	done <"$T/ranges"
	curl -K "$T/curl.cfg" >"$T/curl.times" || bench_die "curl ranged GETs"
	[[ $(awk '$1 != 206' "$T/curl.times" | wc -l) == 0 ]] || bench_die "curl ranged GETs: not all 206"
	rec rand.curl.p50 "$(awk '{ print $2 }' "$T/curl.times" | sort -n | awk '{ v[NR] = $1 } END { printf "%.2f", v[int((NR + 1) / 2)] * 1000 }')"
	rec rand.curl.p99 "$(awk '{ print $2 }' "$T/curl.times" | sort -n | awk '{ v[NR] = $1 } END { i = int(NR * 0.99 + 0.999); if (i > NR) i = NR; printf "%.2f", v[i] * 1000 }')"
done
fig "random 64 KiB read through the mount (cold descriptor), median ms" rand.p50 ""
fig "  p99 ms" rand.p99 ""
fig "curl ranged GET of the same 64 KiB (one connection), median ms" rand.curl.p50 ""
fig "  p99 ms" rand.curl.p99 ""
fig "  S3 GETs per read" rand.gets "about 1"
fig "  bytes fetched per byte read" rand.fetched ""
fig "  read-ahead bytes wasted per byte read" rand.wasted "<= 2"
fig "  gateway CPU ms per read" rand.cpu_ms ""
fig "  load average" rand.load ""
for r in $(seq 1 "$REPEAT"); do s3del "s/rand$r"; done
rm -f "$T/rand"
rgw_gc
fi

# ===================== 2. writes =====================
if want writes; then
echo
bench_say "2. writes: 1,000 files of 64 KiB, one file of $BIG_MIB MiB"
mkdir -p "$T/src1k"
python3 -c '
import os, sys
for i in range(1000):
    with open(os.path.join(sys.argv[1], "f%04d" % i), "wb") as f:
        f.write(os.urandom(65536))' "$T/src1k" || bench_die "src1k"
for r in $(seq 1 "$REPEAT"); do
	t0=$(now_ns)
	cp -r "$T/src1k" "$M/sess/cp1k-$r" || bench_die "cp -r through the mount"
	t1=$(now_ns)
	rec w1k.cp "$(rate 1000 "$t0" "$t1")"
	mkdir "$M/sess/par1k-$r" || bench_die "mkdir"
	t0=$(now_ns)
	(cd "$T/src1k" && ls | xargs -P 10 -n 100 cp -t "$M/sess/par1k-$r") || bench_die "parallel cp"
	t1=$(now_ns)
	rec w1k.par "$(rate 1000 "$t0" "$t1")"
	t0=$(now_ns)
	"$AWS" --endpoint-url "$S3_URL" s3 cp --recursive --quiet "$T/src1k" "s3://$B/s/aws1k-$r/" ||
		bench_die "aws s3 cp --recursive"
	t1=$(now_ns)
	rec w1k.aws "$(rate 1000 "$t0" "$t1")"
done
n=$("$S3TOOL" list "$B" s/cp1k-1/ | wc -l)
[[ $n == 1000 ]] || bench_die "S3 has $n of the 1,000 files written by cp"
st=($(stats '.staging.uploads, .staging.upload_errors'))
bench_say "staging: ${st[0]} uploads, ${st[1]} upload errors"
for k in cp par aws; do
	awk -v k="w1k.$k" '$1 == k { print "w1k." substr(k, 5) ".mib", $2 * 64 / 1024 }' "$T/figs" >>"$T/figs.tmp"
done
cat "$T/figs.tmp" >>"$T/figs"
fig "1,000 x 64 KiB, cp -r through the mount: files/s" w1k.cp ""
fig "  MiB/s" w1k.cp.mib ""
fig "1,000 x 64 KiB, 10 cp streams through the mount: files/s" w1k.par ""
fig "  MiB/s" w1k.par.mib ""
fig "1,000 x 64 KiB, aws s3 cp --recursive (10 threads): files/s" w1k.aws ""
fig "  MiB/s" w1k.aws.mib ""

head -c $((BIG_MIB << 20)) /dev/urandom >"$T/big" || bench_die "no space for $T/big"
for r in $(seq 1 "$REPEAT"); do
	t0=$(now_ns)
	out=$(python3 "$HELPER" copy "$T/big" "$M/sess/big-$r") || bench_die "copy through the mount"
	t1=$(now_ns)
	set -- $out    # bytes N write_s W close_s C
	rec big.mount "$(rate "$BIG_MIB" "$t0" "$t1")"
	rec big.write "$(awk -v m="$BIG_MIB" -v s="$4" 'BEGIN { printf "%.1f", m / s }')"
	rec big.close "$(awk -v m="$BIG_MIB" -v s="$6" 'BEGIN { printf "%.1f", m / s }')"
	sz=$("$S3TOOL" head "$B" "s/big-$r" | awk -F= '$1 == "size" { print $2 }')
	[[ $sz == $((BIG_MIB << 20)) ]] || bench_die "S3 has $sz bytes of big-$r"
	s3del "s/big-$r"; rgw_gc        # one big object in the store at a time
	t0=$(now_ns)
	"$AWS" --endpoint-url "$S3_URL" s3 cp --quiet "$T/big" "s3://$B/s/awsbig-$r" || bench_die "aws s3 cp"
	t1=$(now_ns)
	rec big.aws "$(rate "$BIG_MIB" "$t0" "$t1")"
	s3del "s/awsbig-$r"; rgw_gc
	t0=$(now_ns)
	"$S3TOOL" put "$B" "s/s3tbig-$r" "$T/big" >/dev/null || bench_die "s3tool put"
	t1=$(now_ns)
	rec big.s3tool "$(rate "$BIG_MIB" "$t0" "$t1")"
	s3del "s/s3tbig-$r"; rgw_gc
done
fig "$BIG_MIB MiB file through the mount (1 MiB writes + close): MiB/s" big.mount ""
fig "  of which writes into staging, MiB/s" big.write ""
fig "  of which close (fdatasync + the last parts + completion), MiB/s" big.close ""
fig "$BIG_MIB MiB, aws s3 cp (multipart, 10 threads): MiB/s" big.aws ""
fig "$BIG_MIB MiB, s3tool put (one PUT): MiB/s" big.s3tool ""
fi
# ===================== 4. many small files =====================
if want small; then
	# shellcheck source=tests/bench/bench_rw_small.sh
	. "$HERE/bench_rw_small.sh"
fi

# ===================== 5. one big file, streamed, next to peers =====================
if want stream; then
echo
bench_say "5. one $STREAM_MIB MiB file: mount (streamed parts) / aws s3 cp / s3fs / rclone; until S3 lists it"
head -c $((STREAM_MIB << 20)) /dev/urandom >"$T/sbig" || bench_die "no space for $T/sbig"
bench_peer_creds
HAVE_S3FS= HAVE_RCLONE=
mkdir -p "$T/rclone-cache"
if command -v s3fs >/dev/null; then
	bench_peer_start s3fs "$T/s3fs" s3fs "$B:/p" "$T/s3fs" -f \
		-o "url=$S3_URL,use_path_request_style,passwd_file=$T/s3fs.passwd" && HAVE_S3FS=1
fi
if command -v rclone >/dev/null; then
	bench_peer_start rclone "$T/rclone" env -u AWS_CA_BUNDLE rclone --config "$T/rclone.conf" mount \
		"bed:$B/p" "$T/rclone" --vfs-cache-mode writes --cache-dir "$T/rclone-cache" \
		--use-server-modtime && HAVE_RCLONE=1
fi
listed() { [[ $("$S3TOOL" list "$B" "$1" 2>/dev/null | wc -l) -ge 1 ]]; }
# timed_write NAME KEY cmd...: run cmd, then wait until S3 lists KEY; the
# object must be whole; records NAME and the load average.
timed_write() {
	local name=$1 key=$2 t0 t1 sz
	shift 2
	t0=$(now_ns)
	"$@" >/dev/null || bench_die "$name: write failed"
	wait_until 600 listed "$key" || bench_die "$name: S3 does not list $key"
	t1=$(now_ns)
	sz=$("$S3TOOL" head "$B" "$key" | awk -F= '$1 == "size" { print $2 }')
	[[ $sz == $((STREAM_MIB << 20)) ]] || bench_die "$name: S3 has $sz bytes of $key"
	rec "stream.$name" "$(rate "$STREAM_MIB" "$t0" "$t1")"
	rec "stream.$name.load" "$(cut -d' ' -f1 /proc/loadavg)"
	s3del "$key"; rgw_gc
}
last() { awk -v k="$1" '$1 == k { x = $2 } END { print x }' "$T/figs"; }
for r in $(seq 1 "$STREAM_REPEAT"); do
	a=($(stats '.staging.parts_streamed, .staging.parts_tail'))
	timed_write mount "s/sbig-$r" python3 "$HELPER" copy "$T/sbig" "$M/sess/sbig-$r"
	b=($(stats '.staging.parts_streamed, .staging.parts_tail'))
	rec stream.before_close "$((b[0] - a[0]))"
	rec stream.at_close "$((b[1] - a[1]))"
	timed_write aws "s/awssbig-$r" "$AWS" --endpoint-url "$S3_URL" s3 cp --quiet "$T/sbig" "s3://$B/s/awssbig-$r"
	[[ -z $HAVE_S3FS ]] || timed_write s3fs "p/s3fs-$r" cp "$T/sbig" "$T/s3fs/s3fs-$r"
	[[ -z $HAVE_RCLONE ]] || timed_write rclone "p/rclone-$r" cp "$T/sbig" "$T/rclone/rclone-$r"
	rec stream.ratio_aws "$(div "$(last stream.mount)" "$(last stream.aws)")"
done
bench_peer_stop s3fs
bench_peer_stop rclone
rm -f "$T/sbig"
fig "$STREAM_MIB MiB through the mount, 1 MiB writes, until listed: MiB/s" stream.mount ""
fig "  load average (1 min) after it" stream.mount.load ""
bench_figure "  parts sent before close / by close" "$(summary stream.before_close) / $(summary stream.at_close)" ""
fig "$STREAM_MIB MiB, aws s3 cp: MiB/s" stream.aws ""
fig "  load average" stream.aws.load ""
fig "$STREAM_MIB MiB, cp to s3fs, until listed: MiB/s" stream.s3fs ""
fig "  load average" stream.s3fs.load ""
fig "$STREAM_MIB MiB, cp to rclone (vfs writes), until listed: MiB/s" stream.rclone ""
fig "  load average" stream.rclone.load ""
fig "mount / aws s3 cp" stream.ratio_aws ">= 1.5x"
fi

# ===================== 6. a 6 GiB file, written and read back =====================
if want big6; then
echo
bench_say "6. one $BIG6_MIB MiB file through the mount, read back through the mount and with aws"
# gen PATH: BIG6_MIB MiB of pseudo-random bytes in 1 MiB writes (no source
# file); prints their MD5, the seconds of the writes and of the close.
gen() {
	python3 -c '
import hashlib, os, sys, time
path, mib = sys.argv[1], int(sys.argv[2])
h = hashlib.md5()
block = bytearray(os.urandom(1 << 20))
fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
t0 = time.perf_counter()
for i in range(mib):
    block[0:8] = i.to_bytes(8, "little")
    os.write(fd, block)
    h.update(block)
t1 = time.perf_counter()
os.close(fd)
t2 = time.perf_counter()
print(h.hexdigest(), "%.2f" % (t1 - t0), "%.2f" % (t2 - t1))' "$1" "$BIG6_MIB"
}
a=($(stats '.staging.parts_streamed, .staging.parts_tail'))
t0=$(now_ns)
out=($(gen "$M/sess/big6")) || bench_die "write big6"
t1=$(now_ns)
b=($(stats '.staging.parts_streamed, .staging.parts_tail'))
etag=$("$S3TOOL" head "$B" s/big6 | sed -n 's/^etag=//p')
sz=$("$S3TOOL" head "$B" s/big6 | awk -F= '$1 == "size" { print $2 }')
[[ $sz == $((BIG6_MIB << 20)) ]] || bench_die "S3 has $sz bytes of big6"
bench_figure "$BIG6_MIB MiB written through the mount: MiB/s" "$(rate "$BIG6_MIB" "$t0" "$t1")" ""
bench_figure "  writes / close, s" "${out[1]} / ${out[2]}" ""
bench_figure "  parts before close / by close; ETag parts" "$((b[0] - a[0])) / $((b[1] - a[1])); ${etag##*-}" ""
bench_say "load average $(loadavg)"
t0=$(now_ns)
m1=$(md5sum <"$M/sess/big6" | cut -d' ' -f1)
t1=$(now_ns)
bench_figure "read back through the mount (+ md5sum): MiB/s" "$(rate "$BIG6_MIB" "$t0" "$t1")" ""
t0=$(now_ns)
m2=$("$AWS" --endpoint-url "$S3_URL" s3 cp --quiet "s3://$B/s/big6" - | md5sum | cut -d' ' -f1)
t1=$(now_ns)
bench_figure "read back with aws s3 cp - (+ md5sum): MiB/s" "$(rate "$BIG6_MIB" "$t0" "$t1")" ""
bench_say "MD5 written ${out[0]}, through the mount $m1, with aws $m2"
[[ $m1 == "${out[0]}" && $m2 == "${out[0]}" ]] || bench_die "big6 read back differs"
bench_figure "$BIG6_MIB MiB read back identical (mount, aws)" "yes" "yes"
s3del s/big6; rgw_gc
fi
echo
bench_say "done, load average $(loadavg)"
