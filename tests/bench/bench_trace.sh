#!/usr/bin/env bash
# bench_trace.sh — what `facetfs trace` costs the small-read benchmark
# (issue 11: at most 5 % while on; nothing while off).
#
# Prints figures, asserts nothing. 200 hot 8 KiB objects in a session and a
# commit view; each run measures, trace off then on (alternating, REPEAT
# times, SECS s each): bench_rw.py's open+read+close and 4 KiB preads on
# open descriptors (the figures of bench_rw.sh), and 4 KiB preads on
# descriptors opened with O_DIRECT in the session view, which reach the
# gateway every time without any S3 request: the recorder's cost on the
# FUSE path alone. Next to each ops/s figure: the gateway's CPU time per
# operation (utime + stime of all its threads, from /proc), which the other
# loads of a shared machine disturb much less than the rate. The recorder's
# own cost per record: `build/tests/bench/bench-advise --record`.
# Bed: as bench_rw.sh (BED_DIR, or its own).
# Env: REPEAT (default 3), SECS (default 2), KEEP_TMP=1, ONLY (default
# "orc pread direct": the figures to measure).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPEAT=${REPEAT:-3}
SECS=${SECS:-2}
OWN_BED=
# shellcheck source=tests/bench/bench_lib.sh
. "$HERE/bench_lib.sh"
bench_own_bed
HELPER=$HERE/bench_rw.py
S3FILL=$FACETFS_BUILD/tests/bench/s3fill

bench_require_bed

B=bench-trace-$$-$RANDOM
T=$BENCH_TMP
M=$T/mnt
"$AWS" --endpoint-url "$S3_URL" s3api create-bucket --bucket "$B" >/dev/null || bench_die "create bucket"
for p in s c; do
	"$S3FILL" "$B" "$p/h8k/" 200 --size 8192 --threads 8 >/dev/null || bench_die "s3fill"
done
mkdir -p "$T/views"
for v in "sess s/ session" "comm c/ commit"; do
	set -- $v
	printf '{ "name": "%s", "bucket": "%s", "match": { "prefix": "%s" }, "layout": { "strip_prefix": "%s" }, "visibility": "%s" }\n' \
		"$1" "$B" "$2" "$2" "$3" >"$T/views/$1.json"
done
gw_config "$T/gw.json" "$T/state" "$T/views" "bench-trace-$$-$RANDOM" "bench-trace-$$" 100
bench_topic "bench-trace-$$"
gw_start tr "$T/gw.json" "$M" || exit 1
wait_until 60 views_ready "$M" || bench_die "views not ready"
for v in sess comm; do
	python3 "$HELPER" warm "$M/$v/h8k" >/dev/null || bench_die "warm $v"
	python3 "$HELPER" warm "$M/$v/h8k" >/dev/null || bench_die "warm $v"
done

# 4 KiB preads with O_DIRECT on 200 open descriptors: "ops N secs S ops_s X"
direct_preads() {
	python3 - "$1" "$2" <<'PY'
import os, random, sys, time
d, secs = sys.argv[1], float(sys.argv[2])
names = sorted(os.listdir(d))
fds = [os.open(os.path.join(d, n), os.O_RDONLY | os.O_DIRECT) for n in names]
rng = random.Random(1)
ops, t0 = 0, time.perf_counter()
end = t0 + secs
now = t0
while now < end:
    for _ in range(16):
        os.pread(fds[rng.randrange(len(fds))], 4096, rng.randrange(2) * 4096)
    ops += 16
    now = time.perf_counter()
for fd in fds:
    os.close(fd)
print("ops %d secs %.3f ops_s %.1f" % (ops, now - t0, ops / (now - t0)))
PY
}

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$(gw_pid tr)/stat"; }
TCK=$(getconf CLK_TCK)
median() {
	awk -v k="$1" '$1 == k { v[n++] = $2 } END {
		if (!n) { print 0; exit }
		for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
		print (n % 2 ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2) }' "$T/figs"
}
bench_say "bucket $B, $REPEAT runs of ${SECS} s per figure, load average $(loadavg)"
for r in $(seq 1 "$REPEAT"); do
	for state in off on; do
		if [[ $state == on ]]; then
			"$FACETFS" trace "$M" start >/dev/null || bench_die "trace start"
		fi
		for v in sess comm; do
			for mode in orc pread; do
				[[ " ${ONLY:-orc pread direct} " == *" $mode "* ]] || continue
				c0=$(cpu_ticks)
				set -- $(python3 "$HELPER" "$mode" "$M/$v/h8k" "$SECS" "$r") || bench_die "$mode $v"
				c1=$(cpu_ticks)
				rec "$mode.$v.$state" "$6"
				rec "$mode.$v.$state.cpu" "$(awk -v d=$((c1 - c0)) -v n="$2" -v h="$TCK" \
					'BEGIN { printf "%.2f", d / h * 1e6 / n }')"
			done
		done
		if [[ " ${ONLY:-orc pread direct} " == *" direct "* ]]; then
		c0=$(cpu_ticks)
		set -- $(direct_preads "$M/sess/h8k" "$SECS") || bench_die "direct preads"
		c1=$(cpu_ticks)
		rec "direct.sess.$state" "$6"
		rec "direct.sess.$state.cpu" "$(awk -v d=$((c1 - c0)) -v n="$2" -v h="$TCK" \
			'BEGIN { printf "%.2f", d / h * 1e6 / n }')"
		fi
		if [[ $state == on ]]; then
			out=$("$FACETFS" trace "$M" stop) || bench_die "trace stop"
			bench_say "run $r: $out"
		fi
	done
done
for k in orc.sess orc.comm pread.sess pread.comm direct.sess; do
	off=$(median "$k.off") on=$(median "$k.on")
	bench_figure "$k ops/s, trace off / on" "$off / $on ($(awk -v a="$off" -v b="$on" \
		'BEGIN { printf "%+.1f %%", (a > 0 ? 100 * (b - a) / a : 0) }'))" ">= -5 %"
	off=$(median "$k.off.cpu") on=$(median "$k.on.cpu")
	bench_figure "  gateway CPU us per op, trace off / on" "$off / $on"  ""
done
