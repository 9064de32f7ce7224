#!/usr/bin/env bash
# bench_events.sh — events applied per second through the real pipeline
# (Kafka -> one gateway -> LevelDB index), and produce -> visible latency.
# BENCH_VIEWS (default 100, up to 1,000) prefix views over one bucket.
#
#   BED_DIR=DIR tests/bench/bench_events.sh      (or with the bed's env sourced)
#
# Load: BENCH_EVENTS (default 1,000,000) RGW-shaped ObjectCreated:Put records
# with distinct keys spread over 100 prefixes (evgen), produced with kcat
# (lz4) while ONE gateway with 100 prefix views consumes; the producer stays
# at most BENCH_AHEAD (2) chunks of BENCH_CHUNK (10,000) records ahead of the
# gateway's .events.consumed, because the mock Kafka keeps only ~5 MB a
# partition. Prints events/s (total: first produce -> last applied; steady:
# 10 % -> 90 % of the total), the gateway's visible_latency_ms under load,
# and the gateway threads' CPU time (the machine is shared: the busiest
# thread's run-queue wait says how much CPU it did not get).
# Idle: a fresh gateway, 200 records one every 20 ms (kline: one line, one
# produce, linger.ms=0 — kcat -P holds piped lines until its input ends);
# produce -> stat() sees the file, from the outside, and the gateway's
# histogram. Both for fetch.wait.max.ms = 10 and 1 (BENCH_FETCH_WAITS).
# BENCH_WARM_VIEW=1 adds one more view, "warm" (every key of the bucket,
# "visibility": "eventual", "warm": true), so that every event also queues
# a warm-on-arrival fetch (the records are synthetic: the objects do not
# exist in S3, each fetch ends in a 404); BENCH_WARM_VIEW=cold adds the
# same view without "warm" (the cost of one more matching view alone).
# bench_cache.sh compares the three. BENCH_KAFKA_OPTIONS (a JSON object
# of librdkafka settings) is added to the loaded gateway's kafka.options.
# Exits 1 if applied != produced or an idle record never became visible.
. "$(dirname "$0")/bench_lib.sh"
bench_require_bed

N=${BENCH_EVENTS:-1000000}
CHUNK=${BENCH_CHUNK:-10000}
AHEAD=${BENCH_AHEAD:-2}
IDLE_N=${BENCH_IDLE_EVENTS:-200}
P=${BENCH_VIEWS:-100}    # prefix views (1..1000), one prefix each
W=$((P > 100 ? 3 : 2))   # evgen's prefix width: p00.. or p000..
PY=$(dirname "$0")/bench_events.py
EVGEN=$FACETFS_BUILD/tests/bench/evgen
[[ -x $EVGEN ]] || bench_die "no $EVGEN (ninja -C $FACETFS_BUILD)"
B=evbench-$$
bench_bucket "$B"
T=$BENCH_TMP
mkdir -p "$T/views"
for ((i = 0; i < P; i++)); do
	n=$(printf "%0${W}d" "$i")
	printf '{ "name": "v%s", "bucket": "%s", "match": { "prefix": "p%s/" }, "layout": { "strip_prefix": "p%s/" } }\n' \
		"$n" "$B" "$n" "$n" >"$T/views/v$n.json"
done
case ${BENCH_WARM_VIEW:-0} in
1) printf '{ "name": "warm", "bucket": "%s", "match": { "prefix": "" }, "visibility": "eventual", "warm": true }\n' \
	"$B" >"$T/views/warm.json" ;;
cold) printf '{ "name": "warm", "bucket": "%s", "match": { "prefix": "" }, "visibility": "eventual" }\n' \
	"$B" >"$T/views/warm.json" ;;
esac
warm_say() {
	[[ ${BENCH_WARM_VIEW:-0} == 0 ]] ||
		bench_say "after $1: $(jq -c '{warm: .cache.warm, s3_get: .s3.get, s3_head: .s3.head}' "$M/.facetfs/stats")"
}

bench_say "bucket $B, $P prefix views${BENCH_WARM_VIEW:+ (BENCH_WARM_VIEW=$BENCH_WARM_VIEW)}, $N events, chunks of $CHUNK, at most $AHEAD chunk(s) ahead; load average $(loadavg)"
# rss_peaks PID FILE: until PID ends (or this is killed), FILE holds the
# highest RssAnon and RssFile of PID seen, in MiB, sampled every 0.5 s.
rss_peaks() {
	local a f ma=0 mf=0
	while [[ -r /proc/$1/status ]]; do
		read -r a f < <(awk '/^RssAnon:/ { a = $2 } /^RssFile:/ { f = $2 } END { print a + 0, f + 0 }' "/proc/$1/status")
		((a > ma)) && ma=$a
		((f > mf)) && mf=$f
		awk -v a="$ma" -v f="$mf" 'BEGIN { printf "%.1f %.1f\n", a / 1024, f / 1024 }' >"$2"
		sleep 0.5
	done
}
FAILED=0
start=0
for fw in ${BENCH_FETCH_WAITS:-10 1}; do
	# --- load ---
	topic=bench-ev-$$-load-fw$fw
	bench_topic "$topic"
	bench_config "$T/load-$fw.json" "$T/state-load-$fw" "$T/views" "$topic" "$fw"
	if [[ -n ${BENCH_KAFKA_OPTIONS:-} ]]; then   # e.g. '{"queued.max.messages.kbytes": "16384"}'
		jq --argjson o "$BENCH_KAFKA_OPTIONS" '.kafka.options = ((.kafka.options // {}) + $o)' \
			"$T/load-$fw.json" >"$T/load-$fw.tmp" && mv "$T/load-$fw.tmp" "$T/load-$fw.json"
	fi
	gw_start "load$fw" "$T/load-$fw.json" "$T/mnt-load-$fw" || { FAILED=1; continue; }
	M=$T/mnt-load-$fw
	wait_until 60 views_ready "$M" || bench_say "warning: views not ready after 60 s"
	bench_say "fetch.wait.max.ms=$fw: gateway pid $(gw_pid "load$fw") mounted in $(s_between "$GW_T0" "$GW_T1") s; producing..."
	rss_peaks "$(gw_pid "load$fw")" "$T/peaks-$fw" &
	sampler=$!
	python3 "$PY" load "$KAFKA_BROKERS" "$topic" "$B" "$M" --count "$N" --prefixes "$P" \
		--chunk "$CHUNK" --ahead "$AHEAD" --start "$start" --evgen "$EVGEN" \
		--pid "$(gw_pid "load$fw")" >"$T/load-$fw.out"
	rc=$?
	kill "$sampler" 2>/dev/null
	wait "$sampler" 2>/dev/null
	sed 's/^/    /' "$T/load-$fw.out"
	declare -A R=()
	while IFS='=' read -r k v; do R[$k]=$v; done <"$T/load-$fw.out"
	if [[ $rc != 0 || ${R[applied]:-x} != "${R[produced]:-y}" ]]; then
		FAILED=1
		echo "!!!!!! $BENCH_NAME: fetch.wait.max.ms=$fw: applied ${R[applied]:-?} != produced ${R[produced]:-?}" \
			"(malformed ${R[malformed]:-?}, kcat rc ${R[kcat_rc]:-?}): EVENTS WERE LOST OR NOT APPLIED !!!!!!"
	fi
	bench_figure "events/s, $P views, fw=$fw: total" "${R[rate_total]:-?}" ">= 200K/s"
	bench_figure "events/s, $P views, fw=$fw: steady state (10-90 %)" "${R[rate_steady]:-?}" ">= 200K/s"
	bench_figure "events per CPU-s of the busiest gateway thread, fw=$fw" "${R[rate_per_busiest_cpu_s]:-?}" "(diagnostic)"
	bench_figure "gateway busiest thread: CPU s / run-queue wait s, fw=$fw" "${R[gw_busiest_cpu_s]:-?}/${R[gw_busiest_runqueue_wait_s]:-?}" "(diagnostic)"
	bench_figure "visible_latency_ms under load p50/p99, fw=$fw" "${R[lat_p50_ms]:-?}/${R[lat_p99_ms]:-?}" "(queue <= $AHEAD chunks)"
	warm_say "the load"
	# What the gateway held: its peak RSS over the whole load (VmHWM), the
	# memory section now, and the index's bytes per event.
	gpid=$(gw_pid "load$fw")
	hwm=$(awk '/^VmHWM:/ { printf "%.1f", $2 / 1024 }' "/proc/$gpid/status")
	bench_figure "gateway peak RSS during the load (VmHWM), MiB, fw=$fw (load $(loadavg))" "${hwm:-?}" "<= 200 MiB at 10M events"
	read -r pa pf <"$T/peaks-$fw" 2>/dev/null || pa='?' pf='?'
	bench_figure "  of it: peak anonymous / peak file-backed (code, libraries), MiB, fw=$fw" "$pa / $pf" "(sampled every 0.5 s)"
	bench_say "memory now: $(jq -c .memory "$M/.facetfs/stats")"
	ixb=$(du -sb "$T/state-load-$fw/index" | cut -f1)
	bench_figure "index on disk after $N events, bytes/event, fw=$fw" "$(awk -v b="$ixb" -v n="$N" 'BEGIN { printf "%.1f", b / n }')" "(flat from 1M to 10M)"
	gw_stop "load$fw"
	start=$((start + N))

	# --- idle ---
	topic=bench-ev-$$-idle-fw$fw
	bench_topic "$topic"
	bench_config "$T/idle-$fw.json" "$T/state-idle-$fw" "$T/views" "$topic" "$fw"
	gw_start "idle$fw" "$T/idle-$fw.json" "$T/mnt-idle-$fw" || { FAILED=1; continue; }
	M=$T/mnt-idle-$fw
	wait_until 60 views_ready "$M" || bench_say "warning: views not ready after 60 s"
	python3 "$PY" idle "$KAFKA_BROKERS" "$topic" "$B" "$M" --count "$IDLE_N" --prefixes "$P" \
		--interval 0.02 --start "$start" --pid "$(gw_pid "idle$fw")" >"$T/idle-$fw.out"
	rc=$?
	((rc == 0)) || FAILED=1
	sed 's/^/    /' "$T/idle-$fw.out"
	R=()
	while IFS='=' read -r k v; do R[$k]=$v; done <"$T/idle-$fw.out"
	hp50=$(stat_field "$M" .visible_latency_ms.p50)
	hp99=$(stat_field "$M" .visible_latency_ms.p99)
	hmax=$(stat_field "$M" .visible_latency_ms.max)
	hcount=$(stat_field "$M" .visible_latency_ms.count)
	printf '    gateway histogram: count=%s p50=%s p99=%s max=%s ms\n' "$hcount" "$hp50" "$hp99" "$hmax"
	bench_figure "idle produce->stat sees it p50/p99 ms, fw=$fw" "${R[idle_p50_ms]:-?}/${R[idle_p99_ms]:-?}" "p99 < 5 ms"
	bench_figure "idle gateway histogram p50/p99 ms, fw=$fw" "$hp50/$hp99" "p99 < 5 ms"
	warm_say "the idle run"
	gw_stop "idle$fw"
	start=$((start + IDLE_N + 10))
done
bench_say "load average at the end $(loadavg)"
exit $FAILED
