#!/usr/bin/env bash
# tests/bench/bench_stat_write.sh — stat of a file while it is being written.
#
# One process keeps a file of a `commit` view open and repeats a 4 KiB
# write and an fsync (each fsync publishes; each next write is the first
# after a commit, which journals "dirty" with its syncs under
# cache.durability "power"); another stats that file and an idle one in
# turn for SECONDS (stat_while_write.py). Prints the p50, p99 and max of
# each stat's latency (microseconds), with the load average, for every
# gateway given: this build, and, with BEFORE=COMMIT, a gateway built from
# that commit (a git worktree under the bench's temp dir, built there),
# both mounted on the same bed in the same run, in turn, REPEAT times.
# The target (issue: the write path's locks): the busy file's p99 within
# 2x the idle file's.
#
#   BED_DIR=... tests/bench/bench_stat_write.sh     (or no bed: one is started)
#   env: SECONDS_PER=10 REPEAT=3 BEFORE=<commit>
set -uo pipefail
. "$(dirname "$0")/bench_lib.sh"
SECS=${SECONDS_PER:-10}
REPEAT=${REPEAT:-3}
bench_own_bed
bench_require_bed
T=$BENCH_TMP
B=bench-statw-$$
bench_bucket "$B"

BUILDS=("now:$FACETFS")
bench_before_exit() {
	[[ -d $T/before ]] && git -C "$FACETFS_SRC" worktree remove --force "$T/before" >/dev/null 2>&1
	return 0
}
if [[ -n ${BEFORE:-} ]]; then
	bench_say "building $BEFORE in $T/before (a git worktree)"
	git -C "$FACETFS_SRC" worktree add --detach "$T/before" "$BEFORE" >/dev/null 2>&1 ||
		bench_die "git worktree add $BEFORE"
	(cd "$T/before" && meson setup build >/dev/null && ninja -C build >/dev/null) ||
		bench_die "the build of $BEFORE"
	BUILDS+=("before:$T/before/build/gateway/exe/facetfs")
fi

mkdir -p "$T/views"
view_file "$T/views" w "$B" '{ "prefix": "w/" }' \
	'"layout": { "strip_prefix": "w/" }, "writable": true, "visibility": "commit"'

for pass in $(seq 1 "$REPEAT"); do
	for spec in "${BUILDS[@]}"; do
		who=${spec%%:*}
		FACETFS=${spec#*:}
		gw_config "$T/gw-$who.json" "$T/state-$who-$pass" "$T/views" \
			"bench-statw-$$-$RANDOM" "$KAFKA_TOPIC" 5 1GiB
		gw_start "$who" "$T/gw-$who.json" "$T/mnt-$who" || bench_die "gateway $who"
		wait_until 60 views_ready "$T/mnt-$who" || bench_die "views of $who not ready"
		[[ $(jq -r .staging.durability "$T/mnt-$who/.facetfs/stats") == power ]] ||
			bench_die "gateway $who does not report power durability"
		load=$(loadavg)
		read -r _ bp50 bp99 bmax _ ip50 ip99 imax _ writes _ stats < <(
			python3 "$(dirname "$0")/stat_while_write.py" "$T/mnt-$who/w" "$SECS" 100000)
		syncs=$(jq -r .staging.syncs "$T/mnt-$who/.facetfs/stats")
		printf '%s: pass %d %-6s  busy p50 %5s p99 %6s max %7s us | idle p50 %5s p99 %6s max %7s us | busy/idle p99 %s | %s writes, %s stats, %s syncs | load %s\n' \
			"$BENCH_NAME" "$pass" "$who" "$bp50" "$bp99" "$bmax" "$ip50" "$ip99" "$imax" \
			"$(awk -v a="$bp99" -v b="$ip99" 'BEGIN { printf "%.2fx", a / b }')" \
			"$writes" "$stats" "$syncs" "$load"
		gw_stop "$who"
	done
done
