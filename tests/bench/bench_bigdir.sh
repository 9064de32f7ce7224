#!/usr/bin/env bash
# bench_bigdir.sh — a million objects in one directory, and ten million
# (issue 31): figures only, each with the load average beside it.
#
#   BED_DIR=DIR tests/bench/bench_bigdir.sh      (or with the bed's env sourced)
#
# One bucket of BENCH_BIGDIR_N (1,000,000) objects of 100 B, keys
# data/dNNNNN/NNNNNNN spread over BENCH_BIGDIR_DIRS (10,000) directories,
# PUT by s3fill (about 30 min for 1M here; BENCH_BIGDIR_BUCKET=NAME reuses
# a bucket that holds exactly those objects). Two views over it:
# "flat" (layout flat: every key one name, all N in one directory) and
# "tree" (the 10K directories of N/10K files).
#  (a) the raw S3 LIST of the bucket: s3tool list -c (one keep-alive
#      connection, 1,000 keys a page);
#  (b) mount start -> the first complete `ls -l` of "flat" over a
#      never-scanned bucket ([wait]: poll until scanned, then one ls -l;
#      [loop]: ls -l again and again meanwhile), and its ratio to (a);
#  (c) the gateway's RSS (/proc/PID/status) before the listing, after it,
#      after `echo 2 > /proc/sys/vm/drop_caches`, with .facetfs/stats
#      "memory"; the index on disk;
#  (d) warm `ls -l` (3 runs); `ls -l` after a restart (index kept);
#      `ls -l` of a local directory of N empty files in the same run (the
#      scratch dir's file system), warm;
#  (e) `find` over "tree" (added to the same state: its membership is
#      built from the index, no LIST): time, and RSS after;
#  (f) BENCH_BIGDIR_EVENTS (10,000,000) synthetic events through the real
#      pipeline: bench_events.sh once with BENCH_BIGDIR_EVENTS_BASE
#      (1,000,000) and once with that many (fetch.wait.max.ms 1): events/s,
#      the gateway's peak RSS, the index's bytes per event (0 skips);
#  (g) a first scan of BENCH_BIGDIR_SCAN (10,000,000) objects over the
#      in-memory store with a LIST generator (bench-scan --generate), a
#      progress line each million: time, RSS and index per object (0 skips).
# Needs root (drop_caches). Targets: issue 31 (RSS after ls -l <= 150 MiB,
# back within 20 MiB of before after drop_caches, <= 200 MiB while 10M
# events are applied; first complete ls -l <= 1.5 x the raw LIST).
. "$(dirname "$0")/bench_lib.sh"
bench_require_bed

N=${BENCH_BIGDIR_N:-1000000}
DIRS=${BENCH_BIGDIR_DIRS:-10000}
EVENTS=${BENCH_BIGDIR_EVENTS:-10000000}
EVENTS_BASE=${BENCH_BIGDIR_EVENTS_BASE:-1000000}
SCAN=${BENCH_BIGDIR_SCAN:-10000000}
B=${BENCH_BIGDIR_BUCKET:-bigdir-$$}
T=$BENCH_TMP
M=$T/mnt
bench_say "bucket $B, $N objects over $DIRS directories (0: none); load average $(loadavg)"
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
rss_of() { awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$1/status"; }
la() { printf '(load %s)' "$(loadavg)"; }
drop() { sync; echo 2 >/proc/sys/vm/drop_caches; }
# ls_time DIR: LS_S, the seconds of `ls -l DIR`; LS_N, the entries it printed.
ls_time() {
	local t0 t1
	t0=$(now_ns)
	LS_N=$(ls -l "$1" | wc -l)
	t1=$(now_ns)
	LS_N=$((LS_N - 1))       # the "total" line
	LS_S=$(s_between "$t0" "$t1")
}

# BENCH_BIGDIR_N=0: only (f) and (g), which need no bucket.
if ((N > 0)); then
	# --- the bucket ---
	have=$("$S3TOOL" list -c "$B" 2>/dev/null | awk '/ keys,/ {print $1}')
	if [[ ${have:-0} != "$N" ]]; then
		[[ ${have:-0} == 0 ]] || bench_die "bucket $B holds $have objects, not $N: use another BENCH_BIGDIR_BUCKET"
		bench_bucket "$B"
		bench_say "filling $B with $N objects of 100 B over $DIRS directories (s3fill, 16 threads)..."
		"$FACETFS_BUILD/tests/bench/s3fill" "$B" data/ "$N" --size 100 --threads 16 --dirs "$DIRS" \
			>"$T/fill.log" 2>&1 || { tail -n 5 "$T/fill.log"; bench_die "s3fill failed"; }
		tail -n 1 "$T/fill.log" | sed 's/^/    /'
		bench_settle 300
	fi

	# --- (a) raw LIST ---
	out=$("$S3TOOL" list -c "$B" 2>&1 | tail -n 1)
	echo "    s3tool list -c: $out"
	raw=$(awk '/ keys,/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "s,") print $i }' <<<"$out")
	bench_figure "raw S3 LIST of $N keys (s3tool, 1 connection), s $(la)" "${raw:-?}" "(reference)"

	# --- (b) first complete ls -l of "flat" ---
	mkdir -p "$T/views"
	cat >"$T/views/flat.json" <<-JSON
	{ "name": "flat", "bucket": "$B", "match": { "prefix": "data/" },
	  "layout": { "strip_prefix": "data/", "flat": true } }
	JSON
	target=$(awk -v r="${raw:-0}" 'BEGIN { printf "<= %.1f s (1.5 x raw LIST)", 1.5 * r }')
	ratio() { awk -v a="$1" -v r="${raw:-0}" 'BEGIN { if (r > 0) printf "%.2f x", a / r; else print "?" }'; }
	first_listing() {
		local mode=$1 topic=bench-bigdir-$$-$1 t0 t_ls n=0 passes=0
		bench_topic "$topic"
		bench_config "$T/gw-$mode.json" "$T/state-$mode" "$T/views" "$topic" 10
		rm -f "$BENCH_TMP/gw-A.log"
		t0=$(now_ns)
		gw_start A "$T/gw-$mode.json" "$M" || bench_die "gateway did not mount"
		[[ $mode == wait ]] && wait_until 1200 views_ready "$M"
		RSS_BEFORE=$(rss_of "$(gw_pid A)")
		while :; do
			n=$(ls -l "$M/flat" 2>/dev/null | wc -l)
			t_ls=$(now_ns)
			passes=$((passes + 1))
			((n >= N + 1)) && break
			if ((t_ls - t0 > 1200 * 1000000000)); then
				bench_say "!!! the view shows $((n - 1)) of $N entries after 1200 s: giving up"
				break
			fi
		done
		local s
		s=$(s_between "$t0" "$t_ls")
		echo "    [$mode] $passes ls -l pass(es); $(grep -m1 'scan: bucket .*: complete' "$BENCH_TMP/gw-A.log" | sed 's/.*scan: //')"
		bench_figure "[$mode] mount start -> first complete ls -l ($((n - 1))), s $(la)" "$s ($(ratio "$s"))" "$target"
	}
	first_listing loop
	gw_stop A
	first_listing wait
	pid=$(gw_pid A)
	RSS_AFTER=$(rss_of "$pid")
	jq -c .memory "$M/.facetfs/stats" | sed 's/^/    memory after the listing: /'
	drop
	settled() { (($(jq .memory.inodes "$M/.facetfs/stats") < 1000)); }
	wait_until 60 settled || bench_say "warning: the gateway still holds $(jq .memory.inodes "$M/.facetfs/stats") inodes 60 s after drop_caches"
	RSS_DROP=$(rss_of "$pid")
	jq -c .memory "$M/.facetfs/stats" | sed 's/^/    memory after drop_caches: /'
	bench_figure "gateway RSS before the listing (scan done), MiB $(la)" "$(mib "$RSS_BEFORE")" "(reference)"
	bench_figure "gateway RSS after ls -l of $N entries, MiB" "$(mib "$RSS_AFTER")" "<= 150 MiB"
	bench_figure "gateway RSS after drop_caches, MiB" "$(mib "$RSS_DROP")" \
		"<= $(mib $((RSS_BEFORE + 20 * 1048576))) MiB (before + 20)"
	bench_figure "index on disk, MiB" "$(mib "$(du -sb "$T/state-wait/index" | cut -f1)")" "(47 MiB in issue 31)"

	# --- (d) warm, after a restart, local ---
	ls -l "$M/flat" >/dev/null
	for i in 1 2 3; do
		ls_time "$M/flat"
		bench_figure "warm ls -l of $LS_N entries, run $i, s $(la)" "$LS_S" "<= local ls -l"
	done
	gw_stop A
	gw_start A "$T/gw-wait.json" "$M" || bench_die "gateway did not remount"
	wait_until 120 views_ready "$M"
	drop
	ls_time "$M/flat"
	bench_figure "ls -l after a restart (index kept) of $LS_N entries, s $(la)" "$LS_S" "<= local ls -l"
	mkdir -p "$T/local"
	bench_say "making $N empty local files in $T/local ($(df -T "$T" | awk 'NR == 2 { print $2 }'))..."
	python3 - "$T/local" "$N" <<-'PY'
	import os, sys
	d, n = sys.argv[1], int(sys.argv[2])
	for i in range(n):
	    os.close(os.open(os.path.join(d, "d%05d%%2F%07d" % (i % 10000, i)), os.O_CREAT | os.O_WRONLY, 0o644))
	PY
	ls -l "$T/local" >/dev/null
	for i in 1 2 3; do
		ls_time "$T/local"
		bench_figure "reference: warm ls -l of $LS_N local empty files, run $i, s $(la)" "$LS_S" "(reference)"
	done
	rm -rf "$T/local"

	# --- (e) find over the tree view ---
	gw_stop A
	cat >"$T/views/tree.json" <<-JSON
	{ "name": "tree", "bucket": "$B", "match": { "prefix": "data/" },
	  "layout": { "strip_prefix": "data/" } }
	JSON
	gw_start A "$T/gw-wait.json" "$M" || bench_die "gateway did not mount with the tree view"
	wait_until 600 views_ready "$M"
	drop
	pid=$(gw_pid A)
	rss0=$(rss_of "$pid")
	t0=$(now_ns)
	n=$(find "$M/tree" -type f | wc -l)
	t1=$(now_ns)
	bench_figure "find over $DIRS directories, $n files, s $(la)" "$(s_between "$t0" "$t1")" "(issue 31)"
	bench_figure "gateway RSS after the find, MiB (before $(mib "$rss0"))" "$(mib "$(rss_of "$pid")")" "(issue 31)"
	gw_stop A
fi

# --- (f) events: 1M and EVENTS through the real pipeline ---
if ((EVENTS > 0)); then
	for ev in "$EVENTS_BASE" "$EVENTS"; do
		bench_say "bench_events.sh with $ev events (fetch.wait.max.ms 1); load average $(loadavg)"
		BENCH_EVENTS=$ev BENCH_FETCH_WAITS=1 "$(dirname "$0")/bench_events.sh" 2>&1 |
			grep -E 'events/s|peak RSS|bytes/event|memory|!!!' | sed "s/^/    [$ev] /"
	done
fi

# --- (g) a scan of SCAN objects over the in-memory store ---
if ((SCAN > 0)); then
	bench_say "first scan of $SCAN generated objects (in-memory store, 1 view); load average $(loadavg)"
	"$FACETFS_BUILD/tests/bench/bench-scan" --pipeline "${BENCH_BIGDIR_LIST_MS:-0}" --generate \
		--pages $((SCAN / 1000)) --views 1 --every $((SCAN >= 10000000 ? 1000000 : SCAN / 10)) \
		--dir "$T/scan" 2>&1 | grep -E '^(progress|figure|  objects)' | sed 's/^/    /'
fi
bench_say "load average at the end $(loadavg)"
