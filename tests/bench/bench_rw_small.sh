# shellcheck shell=bash
# bench_rw_small.sh — section "small" of bench_rw.sh (sourced by it, after
# its gateway is up): 1,000 files of 64 KiB written by one plain `cp -r`
# into the mount under each cache.durability setting ("power": the main
# gateway; "process": a second gateway started here on the same bucket),
# next to `aws s3 cp --recursive` (10 threads), s3fs and rclone
# (`--vfs-cache-mode writes`) on the same bucket, in the same run, in an
# order rotated per pass. The clock starts before the copy and stops when
# a LIST shows all 1,000 objects (rclone uploads after close). Prints
# files/s per tool (median (min-max) over REPEAT passes), the load average
# of each pass, and per facetfs file: fsync/fdatasync calls
# (staging.syncs), FUSE lookups+getattrs, gateway CPU ms, and the ms from
# the copy's start to its return against the ms the gateway spent in S3
# requests (s3_latency_ms.total): the difference is what a file costs
# beside its PUT (FUSE requests, cp's own reads, the gateway). The floor:
# the same cp -r into fuse-sink, a FUSE server that keeps nothing, and
# that floor plus the PUT, the bound of one copy stream through any FUSE
# file system that publishes at close. One object of
# each copy is compared with its source. Then the bound of one stream: 64
# KiB PUTs one at a time through our S3 client alone, and on 10 threads.
# Uses from bench_rw.sh: B, T, M, S3TOOL, AWS, REPEAT, rec/fig/summary/rate/
# stats, gw_config, gw_start, views_ready, bench_*.

# Objects of prefix P that S3 lists (directory markers left out).
small_listed() { "$S3TOOL" list "$B" "$1" | grep -c '/f[0-9][0-9][0-9][0-9]$'; }
small_all_listed() { [[ $(small_listed "$1") == 1000 ]]; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# ms per file of the 1,000 between two now_ns readings.
ms_per_file() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b - a) / 1e6 / 1000 }'; }

echo
bench_say "4. many small files: 1,000 x 64 KiB, one cp -r, each durability setting, aws, s3fs, rclone"
if [[ ! -d $T/src1k ]]; then
	mkdir -p "$T/src1k"
	python3 -c '
import os, sys
for i in range(1000):
    with open(os.path.join(sys.argv[1], "f%04d" % i), "wb") as f:
        f.write(os.urandom(65536))' "$T/src1k" || bench_die "src1k"
fi

# The second gateway: cache.durability "process", same views, own state.
gw_config "$T/gwp.json" "$T/state-proc" "$T/views" "bench-rw-p-$$-$RANDOM" "bench-rw-$$" 100 1GiB
jq '.cache.durability = "process"' "$T/gwp.json" >"$T/gwp.tmp" && mv "$T/gwp.tmp" "$T/gwp.json"
MP=$T/mnt-proc
gw_start rwproc "$T/gwp.json" "$MP" || bench_die "the process-durability gateway"
wait_until 60 views_ready "$MP" || bench_die "views of the second gateway not ready"
[[ $(jq -r .staging.durability "$M/.facetfs/stats") == power &&
   $(jq -r .staging.durability "$MP/.facetfs/stats") == process ]] ||
	bench_die "the gateways do not report power / process durability"

bench_peer_creds
TOOLS="power process aws"
if command -v s3fs >/dev/null; then
	bench_peer_start s3fs "$T/s3fs" s3fs "$B:/s" "$T/s3fs" -f \
		-o "url=$S3_URL,use_path_request_style,passwd_file=$T/s3fs.passwd" &&
		TOOLS="$TOOLS s3fs"
else
	bench_say "no s3fs: its figures are n/a"
fi
if command -v rclone >/dev/null; then
	bench_peer_start rclone "$T/rclone" env -u AWS_CA_BUNDLE rclone --config "$T/rclone.conf" \
		mount "bed:$B/s" "$T/rclone" --vfs-cache-mode writes \
		--cache-dir "$T/rclone-cache" --use-server-modtime && TOOLS="$TOOLS rclone"
else
	bench_say "no rclone: its figures are n/a"
fi

# small_copy WHO PREFIX: the copy itself (returns when the tool returns).
small_copy() {
	case $1 in
	power) cp -r "$T/src1k" "$M/sess/${2#s/}" ;;
	process) cp -r "$T/src1k" "$MP/sess/${2#s/}" ;;
	aws) "$AWS" --endpoint-url "$S3_URL" s3 cp --recursive --quiet "$T/src1k" "s3://$B/$2/" ;;
	s3fs) cp -r "$T/src1k" "$T/s3fs/${2#s/}" ;;
	rclone) cp -r "$T/src1k" "$T/rclone/${2#s/}" ;;
	esac
}

# The floor of any FUSE file system here: fuse-sink keeps nothing, and the
# kernel sends it the requests it sends the gateway per file.
SINK=$FACETFS_BUILD/tests/bench/fuse-sink
HAVE_SINK=
if [[ -x $SINK ]] && bench_peer_start sink "$T/sink" "$SINK" "$T/sink"; then
	HAVE_SINK=1
else
	bench_say "no fuse-sink ($SINK): the floor is n/a"
fi

read -ra tools <<<"$TOOLS"
for r in $(seq 1 "$REPEAT"); do
	if [[ -n $HAVE_SINK ]]; then
		t0=$(now_ns)
		if cp -r "$T/src1k" "$T/sink/p$r"; then
			t1=$(now_ns)
			rec small.sink.ms "$(ms_per_file "$t0" "$t1")"
		else
			bench_say "pass $r: cp -r into fuse-sink failed: no floor this pass"
		fi
	fi
	loads=()
	for i in "${!tools[@]}"; do
		who=${tools[$(( (i + r - 1) % ${#tools[@]} ))]}
		p=s/small-$who-$r
		mnt=$M gpid=$(gw_pid rw)
		[[ $who == process ]] && mnt=$MP gpid=$(gw_pid rwproc)
		if [[ $who == power || $who == process ]]; then
			a=($(jq -r '[.staging.syncs, .fuse.lookup + .fuse.getattr, .s3_latency_ms.total] | map(tostring) | join(" ")' \
				"$mnt/.facetfs/stats"))
			c0=$(cpu_ticks "$gpid")
		fi
		t0=$(now_ns)
		small_copy "$who" "$p" || bench_die "$who: the copy failed"
		t1=$(now_ns)
		# (the time in S3 requests until cp returned, not the LISTs below)
		[[ $who == power || $who == process ]] &&
			s3t=$(jq -r .s3_latency_ms.total "$mnt/.facetfs/stats")
		wait_until 300 small_all_listed "$p/" || bench_die "$who: S3 lists $(small_listed "$p/") of 1,000 after 300 s"
		t2=$(now_ns)
		rec "small.$who" "$(rate 1000 "$t0" "$t2")"
		rec "small.$who.return" "$(rate 1000 "$t0" "$t1")"
		if [[ $who == power || $who == process ]]; then
			b=($(jq -r '[.staging.syncs, .fuse.lookup + .fuse.getattr] | map(tostring) | join(" ")' \
				"$mnt/.facetfs/stats"))
			c1=$(cpu_ticks "$gpid")
			rec "small.$who.syncs" "$(div $((b[0] - a[0])) 1000)"
			rec "small.$who.fuse" "$(div $((b[1] - a[1])) 1000)"
			# Where a file's time goes: in S3 requests (the PUT), and
			# the rest (FUSE requests, cp's own I/O, the gateway's work).
			rec "small.$who.ms" "$(ms_per_file "$t0" "$t1")"
			rec "small.$who.s3ms" "$(awk -v a="${a[2]}" -v b="$s3t" 'BEGIN { printf "%.2f", (b - a) / 1000 }')"
			rec "small.$who.cpu" "$(awk -v t=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t * 1000 / hz / 1000 }')"
		fi
		"$S3TOOL" get "$B" "$p/f0500" >"$T/check" 2>/dev/null && cmp -s "$T/check" "$T/src1k/f0500" ||
			bench_die "$who: $p/f0500 in S3 differs from its source"
		loads+=("$who $(cut -d' ' -f1 /proc/loadavg)")
		# Keep the RAM-backed store small (no bucket notification here, so
		# aws' multi-object delete is safe).
		"$AWS" --endpoint-url "$S3_URL" s3 rm --recursive --quiet "s3://$B/$p/" ||
			bench_die "$who: cannot delete $p/"

	done
	bench_say "pass $r: load average after each: ${loads[*]}"
done
bench_peer_stop s3fs
bench_peer_stop rclone
bench_peer_stop sink

# The bound of one stream: 200 PUTs of 64 KiB one after another through our
# own S3 client (s3tool batch: one connection, no mount), next to the same
# on 10 threads; files/s of `cp -r` cannot pass the first (close returns
# once S3 has the object), aws' 10 streams meet the second.
for r in $(seq 1 "$REPEAT"); do
	for n in 1 10; do
		t0=$(now_ns)
		for i in $(seq 1 200); do printf 'put\tbound/%s-%s\t65536\t-\t-\n' "$n" "$i"; done |
			"$S3TOOL" batch -n "$n" "$B" >/dev/null || bench_die "s3tool batch -n $n"
		t1=$(now_ns)
		rec "small.put$n" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", 200 / ((b - a) / 1e9) }')"
		"$AWS" --endpoint-url "$S3_URL" s3 rm --recursive --quiet "s3://$B/bound/" ||
			bench_die "cannot delete bound/"
	done
done

for who in "${tools[@]}"; do
	case $who in
	power) what="facetfs cp -r, cache.durability power" ;;
	process) what="facetfs cp -r, cache.durability process" ;;
	aws) what="aws s3 cp --recursive (10 threads)" ;;
	s3fs) what="s3fs cp -r" ;;
	rclone) what="rclone (vfs-cache-mode writes) cp -r" ;;
	esac
	fig "1,000 x 64 KiB, $what: files/s in S3" "small.$who" \
		"$([[ $who == power || $who == process ]] && echo '>= 1x aws')"
	[[ $who == power || $who == process || $who == aws ]] ||
		fig "  files/s when cp returned" "small.$who.return" ""
	if [[ $who == power || $who == process ]]; then
		bench_figure "  per file: fsyncs / FUSE lookup+getattr / gateway CPU ms" \
			"$(summary "small.$who.syncs" | cut -d' ' -f1) / $(summary "small.$who.fuse" | cut -d' ' -f1) / $(summary "small.$who.cpu" | cut -d' ' -f1)" ""
		bench_figure "  per file until cp returned, ms: all / in S3 requests" \
			"$(summary "small.$who.ms" | cut -d' ' -f1) / $(summary "small.$who.s3ms" | cut -d' ' -f1)" ""
	fi
done
for who in power process; do
	awk -v k="small.$who" -v a=small.aws '$1 == k { x[n++] = $2 } $1 == a { y[m++] = $2 }
		END { if (n && m) for (i = 0; i < n && i < m; i++) printf "small.%s.vs_aws %.3f\n", substr(k, 7), x[i] / y[i] }' \
		"$T/figs" >>"$T/figs.small"
done
cat "$T/figs.small" >>"$T/figs"
fig "facetfs power / aws (same pass)" small.power.vs_aws ">= 1x"
fig "facetfs process / aws (same pass)" small.process.vs_aws ">= 1x"
fig "  floor: cp -r into fuse-sink (FUSE only, nothing kept), ms per file" small.sink.ms ""
# A gateway that publishes at close and costs nothing else: the floor plus
# its time in S3 requests per file as the process-durability copy measured
# (its PUTs; nothing else asks S3 during the copy).
fl=$(summary small.sink.ms | cut -d' ' -f1) put=$(summary small.process.s3ms | cut -d' ' -f1)
bench_figure "  bound of one cp -r through FUSE with a PUT at each close: floor + ms in S3, files/s" \
	"$(awk -v f="$fl" -v p="$put" 'BEGIN { if (f == "n/a" || p == "n/a" || f + p <= 0) print "n/a"; else printf "%.2f + %.2f ms: %.0f", f, p, 1000 / (f + p) }')" ""
fig "  bound: 64 KiB PUTs one at a time, our client alone, PUTs/s" small.put1 ""
fig "  the same on 10 threads, PUTs/s" small.put10 ""
gw_stop rwproc
