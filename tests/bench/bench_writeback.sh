#!/usr/bin/env bash
# tests/bench/bench_writeback.sh — write-back ("write_back": true) against
# the peers and the bounds, side by side in one run. Two clocks for every
# writer: when the copying program returned, and when S3 lists everything
# (a LIST every 50 ms). Writers: facetfs with write-back under
# cache.durability power ("wb-power") and process ("wb-process"), facetfs
# publishing at close ("close", power), aws s3 cp (10 threads), rclone
# mount --vfs-cache-mode writes (its default 5 s write-back) and s3fs, each
# present; the order rotates per pass. Sections (ONLY, default all):
#   small  1,000 x 64 KiB by one cp -r; the bound of a copy that keeps its
#          promise at close: cp -r into fuse-sink (FUSE only) plus, under
#          power, a local 64 KiB file written with fsync of it and its
#          directory (what power needs per file), measured in the same run
#   big    one BIG_MIB (1024) file by cp; the bounds: dd conv=fsync onto the
#          disk that holds cache.dir, and cp into fuse-sink (FUSE only)
#   fio    fio --rw=write --bs=1m --numjobs=4 --size=256m into the view,
#          onto the cache.dir disk (its page cache: no fsync) and into
#          fuse-sink, the FUSE floor (needs fio)
#   tar    tar x of TAR_DIR (default /usr/include/linux: 763 files, 6.5 MiB
#          here, a stand-in for a source tarball) into the view, onto the
#          local disk, rclone, s3fs
# Prints medians (min-max) over REPEAT passes (default 3) and the load
# average of each pass. DRAIN_DELAY=S gives the write-back gateways
# cache.drain_delay S (default 0): with rclone's 5 s, neither starts an
# upload while cp runs. Run on a quiet machine: nothing else running.
#
#   BED_DIR=... tests/bench/bench_writeback.sh   (or no bed: one is started)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/bench_lib.sh"
REPEAT=${REPEAT:-3}
BIG_MIB=${BIG_MIB:-1024}
SMALL_N=${SMALL_N:-1000}      # files of the small section (1000 for the figures)
TAR_DIR=${TAR_DIR:-/usr/include/linux}
DRAIN_DELAY=${DRAIN_DELAY:-0}   # cache.drain_delay of the write-back gateways (rclone's own: 5 s)
want() { [[ " ${ONLY:-small big fio tar} " == *" $1 "* ]]; }
bench_own_bed 8589934592
bench_require_bed
T=$BENCH_TMP
B=bench-wb-$$
bench_bucket "$B"
med() { summary "$1" | cut -d' ' -f1; }
rate() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%.2f", n / ((b - a) / 1e9) }'; }
ratio() { awk -v a="$(med "$1")" -v b="$(med "$2")" 'BEGIN { if (a == "n/a" || b == "n/a" || b <= 0) print "n/a"; else printf "%.2fx", a / b }'; }
listed() { "$S3TOOL" list "$B" "$1" | wc -l; }

# ---- the gateways: write-back under power and process, close under power ----
mkdir -p "$T/views-wb" "$T/views-close"
printf '{ "name": "wb", "bucket": "%s", "match": { "prefix": "w/" }, "layout": { "strip_prefix": "w/" }, "writable": true, "visibility": "eventual", "write_back": true }\n' \
	"$B" >"$T/views-wb/wb.json"
printf '{ "name": "cl", "bucket": "%s", "match": { "prefix": "w/" }, "layout": { "strip_prefix": "w/" }, "writable": true, "visibility": "session" }\n' \
	"$B" >"$T/views-close/cl.json"
declare -A MNT=()
for who in wb-power wb-process close; do
	views=$T/views-wb
	[[ $who == close ]] && views=$T/views-close
	gw_config "$T/$who.json" "$T/state-$who" "$views" "bench-wb-$$-$RANDOM" "bench-wb-$$" 100 4GiB
	dur=power
	[[ $who == wb-process ]] && dur=process
	jq --arg d "$dur" --argjson w "$DRAIN_DELAY" '.cache.durability = $d | .cache.drain_delay = $w' \
		"$T/$who.json" >"$T/$who.tmp" && mv "$T/$who.tmp" "$T/$who.json"
	gw_start "$who" "$T/$who.json" "$T/mnt-$who" || bench_die "gateway $who"
	wait_until 60 views_ready "$T/mnt-$who" || bench_die "views of $who not ready"
	MNT[$who]=$T/mnt-$who/$([[ $who == close ]] && echo cl || echo wb)
done
TOOLS="wb-power wb-process close aws"
bench_peer_creds
if command -v rclone >/dev/null; then
	bench_peer_start rclone "$T/rclone" env -u AWS_CA_BUNDLE rclone --config "$T/rclone.conf" \
		mount "bed:$B/w" "$T/rclone" --vfs-cache-mode writes \
		--cache-dir "$T/rclone-cache" --use-server-modtime && TOOLS="$TOOLS rclone"
else
	bench_say "no rclone: its figures are n/a"
fi
if command -v s3fs >/dev/null; then
	bench_peer_start s3fs "$T/s3fs" s3fs "$B:/w" "$T/s3fs" -f \
		-o "url=$S3_URL,use_path_request_style,passwd_file=$T/s3fs.passwd" && TOOLS="$TOOLS s3fs"
else
	bench_say "no s3fs: its figures are n/a"
fi
read -ra tools <<<"$TOOLS"
# dest WHO: the directory a tool writes w/... into.
dest() {
	case $1 in
	wb-power | wb-process | close) echo "${MNT[$1]}" ;;
	rclone) echo "$T/rclone" ;;
	s3fs) echo "$T/s3fs" ;;
	esac
}
# copy WHO SRC NAME: cp -r (a directory) or cp (a file) to w/NAME.
copy() {
	if [[ $1 == aws ]]; then
		if [[ -d $2 ]]; then
			"$AWS" --endpoint-url "$S3_URL" s3 cp --recursive --quiet "$2" "s3://$B/w/$3/"
		else
			"$AWS" --endpoint-url "$S3_URL" s3 cp --quiet "$2" "s3://$B/w/$3"
		fi
	else
		cp -r "$2" "$(dest "$1")/$3"
	fi
}
# Delete w/NAME... and free its space in the RAM store at once.
clean() {
	"$AWS" --endpoint-url "$S3_URL" s3 rm --recursive --quiet "s3://$B/w/$1" >/dev/null 2>&1
	rgw_gc
}

# run_pass SECTION SRC COUNT UNIT: every tool copies SRC once (rotated);
# records SECTION.WHO.return and SECTION.WHO.listed (COUNT units per s).
run_pass() {
	local sec=$1 src=$2 n=$3 r=$4 i who name t0 t1 t2 loads=()
	for i in "${!tools[@]}"; do
		who=${tools[$(( (i + r - 1) % ${#tools[@]} ))]}
		name=$sec-$who-$r
		t0=$(now_ns)
		copy "$who" "$src" "$name" || bench_die "$who: the copy failed"
		t1=$(now_ns)
		local want=1
		[[ -d $src ]] && want=$(find "$src" -type f | wc -l)
		all_listed() { [[ $(listed "w/$name") -ge $want ]]; }
		wait_until 600 all_listed || bench_die "$who: S3 lists $(listed "w/$name") of $want after 600 s"
		t2=$(now_ns)
		rec "$sec.$who.return" "$(rate "$n" "$t0" "$t1")"
		rec "$sec.$who.listed" "$(rate "$n" "$t0" "$t2")"
		loads+=("$who $(cut -d' ' -f1 /proc/loadavg)")
		clean "$name"
	done
	bench_say "$sec pass $r: load average after each: ${loads[*]}"
}

report() {
	local sec=$1 unit=$2 who
	for who in "${tools[@]}"; do
		fig "$sec: $who, $unit when it returned" "$sec.$who.return" ""
		fig "$sec: $who, $unit when S3 listed it all" "$sec.$who.listed" ""
	done
}

CACHE_DISK=$T/state-wb-power/cache
# fuse-sink: the floor of any FUSE file system here (small, big, fio).
SINK=$FACETFS_BUILD/tests/bench/fuse-sink
HAVE_SINK=
if want small || want big || want fio; then
	[[ -x $SINK ]] && bench_peer_start sink "$T/sink" "$SINK" "$T/sink" && HAVE_SINK=1
	[[ -n $HAVE_SINK ]] || bench_say "no fuse-sink: the FUSE floor is n/a"
fi
if want small; then
	echo
	bench_say "small: $SMALL_N x 64 KiB by one cp -r (write-back gateways: cache.drain_delay $DRAIN_DELAY s)"
	mkdir -p "$T/src1k"
	for i in $(seq -w 1 "$SMALL_N"); do head -c 65536 /dev/urandom >"$T/src1k/f$i"; done
	for r in $(seq 1 "$REPEAT"); do
		if [[ -n $HAVE_SINK ]]; then
			t0=$(now_ns)
			cp -r "$T/src1k" "$T/sink/p$r" && rec small.sink.ms "$(awk -v a="$t0" -v b="$(now_ns)" -v n="$SMALL_N" 'BEGIN { printf "%.3f", (b - a) / 1e6 / n }')"
		fi
		# What power needs per file on the disk of cache.dir: the data
		# and the directory made durable (the journal's syncs aside).
		rm -rf "$CACHE_DISK/fsync-probe"
		mkdir -p "$CACHE_DISK/fsync-probe"
		rec small.fsync.ms "$(python3 - "$CACHE_DISK/fsync-probe" "$T/src1k" <<'PY'
import os, sys, time
d, src = sys.argv[1], sys.argv[2]
names = sorted(os.listdir(src))
dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
t0 = time.perf_counter()
for n in names:
    with open(os.path.join(src, n), "rb") as f:
        data = f.read()
    fd = os.open(os.path.join(d, n), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    os.close(fd)
    os.fsync(dfd)
print("%.3f" % ((time.perf_counter() - t0) * 1000 / len(names)))
PY
)"
		rm -rf "$CACHE_DISK/fsync-probe"
		run_pass small "$T/src1k" "$SMALL_N" "$r"
	done
	report small files/s
	fig "small: floor, cp -r into fuse-sink, ms per file" small.sink.ms ""
	fig "small: a local 64 KiB file with fsync of it and its directory, ms" small.fsync.ms ""
	sink=$(med small.sink.ms) fs=$(med small.fsync.ms)
	bench_figure "small: bound under power (floor + local fsyncs), files/s" \
		"$(awk -v a="$sink" -v b="$fs" 'BEGIN { if (a == "n/a" || b == "n/a") print "n/a"; else printf "%.0f", 1000 / (a + b) }')" ""
	bench_figure "small: bound under process (floor), files/s" \
		"$(awk -v a="$sink" 'BEGIN { if (a == "n/a" || a <= 0) print "n/a"; else printf "%.0f", 1000 / a }')" ""
	bench_figure "small: wb-process / aws, when cp returned" "$(ratio small.wb-process.return small.aws.return)" ">= 3x"
	bench_figure "small: wb-process / rclone, when cp returned" "$(ratio small.wb-process.return small.rclone.return)" ">= 1x"
	bench_figure "small: wb-power / aws, when cp returned" "$(ratio small.wb-power.return small.aws.return)" ">= 1.5x"
	bench_figure "small: wb-power / aws, listed in S3" "$(ratio small.wb-power.listed small.aws.listed)" ">= 1x"
fi

if want big; then
	echo
	bench_say "big: one $BIG_MIB MiB file by cp"
	head -c $((BIG_MIB << 20)) /dev/urandom >"$T/big" || bench_die "no room for $T/big"
	for r in $(seq 1 "$REPEAT"); do
		t0=$(now_ns)
		dd if="$T/big" of="$CACHE_DISK/dd-probe" bs=1M conv=fsync status=none
		rec big.dd "$(rate "$BIG_MIB" "$t0" "$(now_ns)")"
		rm -f "$CACHE_DISK/dd-probe"
		if [[ -n $HAVE_SINK ]]; then
			t0=$(now_ns)
			cp "$T/big" "$T/sink/big$r" && rec big.sink "$(rate "$BIG_MIB" "$t0" "$(now_ns)")"
		fi
		run_pass big "$T/big" "$BIG_MIB" "$r"
	done
	report big MiB/s
	fig "big: the bound, dd conv=fsync onto the cache.dir disk, MiB/s" big.dd ""
	fig "big: the FUSE floor, cp into fuse-sink (nothing kept), MiB/s" big.sink ""
	bench_figure "big: wb-power / the FUSE floor, when cp returned" "$(ratio big.wb-power.return big.sink)" ""
	bench_figure "big: wb-power / the bound, when cp returned" "$(ratio big.wb-power.return big.dd)" ">= 0.7x"
	bench_figure "big: wb-power / aws, when cp returned" "$(ratio big.wb-power.return big.aws.return)" ">= 2x"
	bench_figure "big: wb-power / aws, listed in S3" "$(ratio big.wb-power.listed big.aws.listed)" ">= 1x"
	rm -f "$T/big"
fi

if want fio; then
	echo
	if ! command -v fio >/dev/null; then
		bench_say "fio: not installed; n/a"
	else
		bench_say "fio: --rw=write --bs=1m --numjobs=4 --size=256m"
		fio_mibs() {   # fio_mibs DIR: the aggregate write MiB/s fio reports
			fio --name=ckpt --directory="$1" --rw=write --bs=1m --numjobs=4 --size=256m \
				--group_reporting --output-format=json 2>/dev/null |
				jq '.jobs[0].write.bw / 1024'
		}
		for r in $(seq 1 "$REPEAT"); do
			# (the floor first: the view's drain would run beside it)
			if [[ -n $HAVE_SINK ]]; then
				mkdir -p "$T/sink/fio$r"
				rec fio.sink "$(fio_mibs "$T/sink/fio$r")"
			fi
			mkdir -p "$CACHE_DISK/fio-probe" "${MNT[wb-power]}/fio$r"
			rec fio.disk "$(fio_mibs "$CACHE_DISK/fio-probe")"
			rm -rf "$CACHE_DISK/fio-probe"
			rec fio.wb-power "$(fio_mibs "${MNT[wb-power]}/fio$r")"
			"$FACETFS" sync "$T/mnt-wb-power" >/dev/null || bench_die "facetfs sync after fio"
			clean "fio$r"
			bench_say "fio pass $r: load average $(loadavg)"
		done
		fig "fio: on the cache.dir disk, MiB/s" fio.disk ""
		fig "fio: into the wb-power view, MiB/s when fio returned" fio.wb-power ""
		bench_figure "fio: view / disk" "$(ratio fio.wb-power fio.disk)" ">= 0.5x"
		fig "fio: into fuse-sink (the FUSE floor: nothing kept), MiB/s" fio.sink ""
		bench_figure "fio: view / the FUSE floor" "$(ratio fio.wb-power fio.sink)" ""
	fi
fi
[[ -z $HAVE_SINK ]] || bench_peer_stop sink

if want tar; then
	echo
	tar -C "$(dirname "$TAR_DIR")" -cf "$T/src.tar" "$(basename "$TAR_DIR")" ||
		bench_die "tar of $TAR_DIR"
	nfiles=$(tar -tf "$T/src.tar" | grep -vc '/$')
	bench_say "tar: tar x of $TAR_DIR ($nfiles files)"
	for r in $(seq 1 "$REPEAT"); do
		mkdir -p "$CACHE_DISK/tar-probe"
		t0=$(now_ns)
		tar -C "$CACHE_DISK/tar-probe" -xf "$T/src.tar" && sync
		rec tar.local "$(awk -v a="$t0" -v b="$(now_ns)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')"
		rm -rf "$CACHE_DISK/tar-probe"
		for who in wb-power wb-process close rclone s3fs; do
			[[ " $TOOLS " == *" $who "* ]] || continue
			d=$(dest "$who")/tar-$who-$r
			mkdir -p "$d"
			t0=$(now_ns)
			tar -C "$d" -xf "$T/src.tar" 2>>"$T/tar.err" || bench_say "$who: tar x reported errors (see $T/tar.err)"
			rec "tar.$who" "$(awk -v a="$t0" -v b="$(now_ns)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')"
		done
		for who in wb-power wb-process; do
			"$FACETFS" sync "$T/mnt-$who" >/dev/null || bench_die "facetfs sync after tar"
		done
		bench_say "tar pass $r: load average $(loadavg)"
		clean ""
	done
	fig "tar: local disk (with sync), s" tar.local ""
	for who in wb-power wb-process close rclone s3fs; do
		fig "tar: $who, s until tar returned" "tar.$who" ""
	done
fi
bench_peer_stop rclone
bench_peer_stop s3fs
