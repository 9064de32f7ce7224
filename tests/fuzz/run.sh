#!/usr/bin/env bash
# tests/fuzz/run.sh — run one libFuzzer target for a while.
#
#   tests/fuzz/run.sh TARGET SECONDS     e.g. run.sh record 1800
#   tests/fuzz/run.sh --list             the target names
#
# TARGET is a file tests/fuzz/fuzz_TARGET.c, built (ninja fuzz-targets) in
# $FUZZ_BUILD (default build-fuzz/, set up with CC=clang-14 and
# -Dfuzz=true; tests/run does both). The run starts from the committed
# seeds (tests/fuzz/corpus/TARGET, never written) and from the inputs
# earlier runs found ($FUZZ_BUILD/fuzz-work/TARGET/corpus, where new ones
# go), on one core.
#
# Prints one line, "ok - fuzz TARGET: ..." with the figures (executions,
# coverage, corpus), or "not ok - fuzz TARGET: ..." followed by the report
# (sanitizer, leak, timeout, failed FUZZ_CHECK, with the stack) and the
# input that caused it in base64 (also kept as a file in the work dir:
# replay it with `$FUZZ_BUILD/tests/fuzz/fuzz_TARGET FILE`). Exit status 0
# or 1. The whole libFuzzer log is $FUZZ_BUILD/fuzz-work/TARGET/last.log.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${FUZZ_BUILD:-$ROOT/build-fuzz}

if [[ ${1:-} == --list ]]; then
	for f in "$ROOT"/tests/fuzz/fuzz_*.c; do
		f=${f##*/fuzz_}
		echo "${f%.c}"
	done
	exit 0
fi
if (($# != 2)) || [[ ! $2 =~ ^[0-9]+$ ]]; then
	sed -n '2,20s/^# \{0,1\}//p' "$0" >&2
	exit 2
fi
target=$1 secs=$2
exe=$BUILD/tests/fuzz/fuzz_$target
if [[ ! -x $exe ]]; then
	echo "not ok - fuzz $target: $exe not built (ninja -C $BUILD fuzz-targets)"
	exit 1
fi

work=$BUILD/fuzz-work/$target
seeds=$ROOT/tests/fuzz/corpus/$target
mkdir -p "$work/corpus" "$work/crashes"
log=$work/last.log
dict=
case $target in
record | bridge_body | filter | config) dict=$ROOT/tests/fuzz/json.dict ;;
s3_*) dict=$ROOT/tests/fuzz/xml.dict ;;
esac
before=$(find "$work/crashes" -type f | sort)
n_corpus0=$(find "$work/corpus" -type f | wc -l)

# A sanitizer report, a leak, a failed check or a slow input (-timeout)
# ends the run with the input saved under crashes/. UBSan aborts (the
# build has -fno-sanitize-recover). Symbolised stacks need llvm-symbolizer.
sym=/usr/lib/llvm-14/bin/llvm-symbolizer
[[ -x $sym ]] || sym=$(command -v llvm-symbolizer || true)
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:symbolize=1}${sym:+:external_symbolizer_path=$sym} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:symbolize=1}${sym:+:external_symbolizer_path=$sym} \
	"$exe" -max_total_time="$secs" -timeout=25 -rss_limit_mb=2048 -max_len=65536 \
	-print_final_stats=1 -artifact_prefix="$work/crashes/" ${dict:+-dict="$dict"} \
	"$work/corpus" "$seeds" >"$log" 2>&1
rc=$?

# Figures from the log: the last status line ("#N DONE cov: C ft: F corp:
# K/S ...") and the final stats.
last=$(grep -E '^#[0-9]+' "$log" | tail -1)
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
n_corpus=$(find "$work/corpus" -type f | wc -l)
figures="${execs:-?} executions in ${secs}s, coverage ${cov:-?} edges / ${ft:-?} features, corpus ${corp:-?} inputs (+$((n_corpus - n_corpus0)) new kept)"

report=$(grep -nE '^==[0-9]+==ERROR|runtime error:|^SUMMARY:|fuzz check failed|ALARM: working on the last Unit|out-of-memory|^ERROR: libFuzzer' "$log" | head -1)
if ((rc == 0)) && [[ -z $report ]]; then
	echo "ok - fuzz $target: $figures, no findings"
	exit 0
fi

echo "not ok - fuzz $target: exit $rc after $figures"
echo "# --- report (from $log)"
if [[ -n $report ]]; then
	from=${report%%:*}
	sed -n "$((from > 3 ? from - 3 : 1)),$((from + 60))p" "$log" | sed 's/^/# /'
else
	tail -40 "$log" | sed 's/^/# /'
fi
found=0
while IFS= read -r f; do
	[[ -n $f ]] || continue
	found=1
	echo "# --- input $f ($(stat -c %s "$f") bytes), base64:"
	base64 -w 76 "$f" | sed 's/^/# /'
done < <(comm -13 <(printf '%s\n' "$before") <(find "$work/crashes" -type f | sort))
((found)) || echo "# (no input saved: see $log)"
exit 1
