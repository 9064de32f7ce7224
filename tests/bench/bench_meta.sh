#!/usr/bin/env bash
# bench_meta.sh — the latency of metadata operations (create, chmod, chown,
# utime, stat, rename, unlink, mkdir/rmdir, mkfifo, symlink/readlink) as
# POSIX tools and pjdfstest make them, in a writable `session` view of
# facetfs under each cache.durability setting ("power", "process") and in
# an s3fs mount of the same bed, side by side in one run, in an order
# rotated per pass. The bucket has event notifications, as in use (the
# gateway skips the events of its own writes).
#
#   tests/bench/bench_meta.sh            (brings up its own bed)
#   BED_DIR=/tmp/bed tests/bench/bench_meta.sh
# Env: N (rounds per pass, default 100), REPEAT (passes, default 3).
# Prints per operation and tool the median over passes of the per-pass
# median latency in ms, and the total time of a pass (median (min-max)).
# Needs root (chown), s3fs (its column is n/a without it), python3.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
N=${N:-100}
REPEAT=${REPEAT:-3}
((EUID == 0)) || bench_die "run as root (the chown calls)"
bench_own_bed
bench_require_bed
T=$BENCH_TMP
B=bench-meta-$$-$RANDOM
"$AWS" --endpoint-url "$S3_URL" s3api create-bucket --bucket "$B" >/dev/null || bench_die "create bucket"
"$FACETFS_SRC/tests/bed/bed" notify "$BED_DIR" "$B" >/dev/null || bench_die "bucket notification"
bench_say "bucket $B, N=$N rounds, $REPEAT passes, load average $(loadavg)"

mkdir -p "$T/views"
printf '{ "name": "rw", "bucket": "%s", "match": { "prefix": "" }, "writable": true, "visibility": "session" }\n' \
	"$B" >"$T/views/rw.json"
for d in power process; do
	gw_config "$T/gw-$d.json" "$T/state-$d" "$T/views" "bench-meta-$d-$$-$RANDOM" "$KAFKA_TOPIC" 5 1GiB
	jq --arg d "$d" '.cache.durability = $d' "$T/gw-$d.json" >"$T/gw.tmp" && mv "$T/gw.tmp" "$T/gw-$d.json"
	gw_start "$d" "$T/gw-$d.json" "$T/mnt-$d" || bench_die "the $d gateway"
	wait_until 60 views_ready "$T/mnt-$d" || bench_die "views of the $d gateway not ready"
done
TOOLS="power process"
bench_peer_creds
if command -v s3fs >/dev/null; then
	bench_peer_start s3fs "$T/mnt-s3fs" s3fs "$B" "$T/mnt-s3fs" -f \
		-o "url=$S3_URL,use_path_request_style,passwd_file=$T/s3fs.passwd" && TOOLS="$TOOLS s3fs"
else
	bench_say "no s3fs: its figures are n/a"
fi

dir_of() { case $1 in s3fs) echo "$T/mnt-s3fs" ;; *) echo "$T/mnt-$1/rw" ;; esac; }
read -ra tools <<<"$TOOLS"
: >"$T/figs"
for r in $(seq 1 "$REPEAT"); do
	for i in "${!tools[@]}"; do
		who=${tools[$(((i + r - 1) % ${#tools[@]}))]}
		python3 "$BENCH_LIB_DIR/bench_meta.py" "$(dir_of "$who")/$who-$r" "$N" "$who" >>"$T/figs" ||
			bench_die "$who: an operation failed"
	done
	bench_say "pass $r done, load average $(loadavg)"
done

# summary TOOL OP FIELD: median (min-max) over passes of field 3 (median ms)
# or 5 (total s).
summary() {
	awk -v w="$1" -v op="$2" -v f="$3" '$1 == w && $2 == op { v[n++] = $f } END {
		if (!n) { print "n/a"; exit }
		for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
		m = n % 2 ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2
		printf "%.2f (%.2f-%.2f)\n", m, v[0], v[n - 1] }' "$T/figs"
}
echo
printf '%-12s' "ms (median)"
printf ' %-24s' "facetfs power" "facetfs process" "s3fs 1.90"
echo
for op in $(awk '$2 != "all" { print $2 }' "$T/figs" | awk '!seen[$0]++'); do
	printf '%-12s' "$op"
	for who in power process s3fs; do printf ' %-24s' "$(summary "$who" "$op" 3)"; done
	echo
done
printf '%-12s' "pass (s)"
for who in power process s3fs; do printf ' %-24s' "$(summary "$who" all 5)"; done
echo
bench_say "load average at the end $(loadavg)"
