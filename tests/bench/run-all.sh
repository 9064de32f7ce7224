#!/usr/bin/env bash
# run-all.sh — every benchmark on a bed of its own, then a table of
# figure | value | target (targets from docs/design.md "Targets").
#
#   tests/bench/run-all.sh [BENCH...]     default: bench_events bench_listing bench_cache
#
# Brings up a bed in a temp dir (BED_MEMSTORE_BYTES default 4 GiB, room for
# the 100K-object bucket), stops it with `bed down` (by the PIDs in its run
# dir) on exit, whatever happens. Each benchmark's own output is shown as it
# runs; env knobs are those of the benchmarks (BENCH_EVENTS, BENCH_LIST_N,
# BENCH_SKIP_AWS, ...). Figures only: the exit status is 1 only when a
# benchmark failed to run properly (e.g. events lost), never for a figure
# that misses its target. Needs a build: ninja -C build.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
FACETFS_SRC=$(cd "$HERE/../.." && pwd)
export FACETFS_BUILD=${FACETFS_BUILD:-$FACETFS_SRC/build}
BED=$FACETFS_SRC/tests/bed/bed
export BED_MEMSTORE_BYTES=${BED_MEMSTORE_BYTES:-4294967296}

for b in gateway/exe/facetfs tests/bed/s3tool tests/bench/s3fill tests/bench/evgen \
	tests/bench/kline tests/bed/kafka-mock; do
	[[ -x $FACETFS_BUILD/$b ]] || { echo "run-all: no $FACETFS_BUILD/$b (ninja -C $FACETFS_BUILD)" >&2; exit 1; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/facetfs-bench.XXXXXX")
export BED_DIR=$WORK/bed
export BENCH_RESULTS=$WORK/results
: >"$BENCH_RESULTS"
cleanup() {
	local rc=$?
	"$BED" down "$BED_DIR" >"$WORK/bed-down.log" 2>&1 || {
		echo "run-all: bed down failed:" >&2
		tail -n 5 "$WORK/bed-down.log" >&2
	}
	if [[ ${KEEP_TMP:-0} == 1 ]]; then
		echo "run-all: kept $WORK"
	else
		rm -rf "$WORK"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

T0=$(date +%s)
echo "run-all: bed in $BED_DIR (memstore $BED_MEMSTORE_BYTES bytes)..."
if ! "$BED" up "$BED_DIR" >"$WORK/bed-up.log" 2>&1; then
	tail -n 30 "$WORK/bed-up.log" >&2
	echo "run-all: the bed did not come up" >&2
	exit 1
fi
echo "run-all: machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) (the figures are only as quiet as the machine)"

FAILED=()
for b in "${@:-bench_events bench_listing bench_cache}"; do
	for name in $b; do
		echo
		echo "=== $name ==="
		t=$(date +%s)
		timeout "${BENCH_TIMEOUT:-1200}" "$HERE/$name.sh"
		rc=$?
		echo "=== $name: exit $rc, $(($(date +%s) - t)) s ==="
		((rc == 0)) || FAILED+=("$name (exit $rc)")
	done
done

echo
echo "=== figures (run-all, $(($(date +%s) - T0)) s, load average now $(cut -d' ' -f1-3 /proc/loadavg)) ==="
{
	echo "figure|value|target"
	echo "------|-----|------"
	cat "$BENCH_RESULTS"
} | awk -F'|' '{ printf "%-64s | %-18s | %s\n", $1, $2, $3 }'
if ((${#FAILED[@]})); then
	echo "run-all: FAILED: ${FAILED[*]}"
	exit 1
fi
exit 0
