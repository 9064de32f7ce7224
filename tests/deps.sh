#!/usr/bin/env bash
# tests/deps.sh — install every Debian 12 package facetfs needs to build and
# test (build tools, -dev libraries, the test bed's Ceph, Kafka and S3
# clients). Does nothing (no apt-get update) when all are installed already,
# so it is fast on a dev machine and complete on a brand-new one (CI).
# Needs root, or sudo, only when something is missing.
set -euo pipefail

PKGS=(
	# build
	gcc g++ libc6-dev pkg-config meson ninja-build
	# fuzz targets (tests/fuzz): clang, its sanitizer and libFuzzer
	# runtimes (libclang_rt.fuzzer is in libclang-rt-14-dev, only a
	# Recommends of clang-14) and llvm-symbolizer for readable stacks
	clang-14 libclang-rt-14-dev llvm-14
	# libraries (meson.build says what each is for)
	libfuse3-dev librdkafka-dev libleveldb-dev libcjson-dev libcurl4-gnutls-dev
	libmicrohttpd-dev libssl-dev libpcre2-dev
	# the mount at run time
	fuse3
	# test bed: Ceph mon + OSD + radosgw (ceph-common: the ceph CLI)
	ceph-mon ceph-osd ceph-common radosgw
	# test tools
	awscli s3cmd kcat jq curl python3 util-linux procps coreutils rsync
	# t_posix: rsync over objects s3fs wrote (s3fs-fuse, a peer)
	s3fs
	# manual pages rendered by t_docs, example units checked by t_fstab
	man-db groff-base systemd
	# the bed's TLS certificate
	openssl
	# the Debian package (debian/) and t_package: dpkg-buildpackage,
	# debhelper's meson build, lintian
	dpkg-dev debhelper lintian
)

# promtool (checks the gateway's /metrics text in t_metrics): taken out of
# Debian's prometheus package without installing it (installing would start
# a Prometheus server as a service).
PROMTOOL_DIR=/var/cache/facetfs-tests/prometheus
fetch_promtool() {
	[[ -x $PROMTOOL_DIR/usr/bin/promtool ]] && return 0
	((EUID == 0)) || return 0
	echo "deps: fetching promtool (Debian package prometheus, unpacked in $PROMTOOL_DIR)"
	mkdir -p "$PROMTOOL_DIR.dl"
	if ! (cd "$PROMTOOL_DIR.dl" && apt-get download -q prometheus >/dev/null 2>&1); then
		apt-get update -q >/dev/null 2>&1 || true
		(cd "$PROMTOOL_DIR.dl" && apt-get download -q prometheus >/dev/null 2>&1) ||
			echo "deps: could not download the prometheus package (t_metrics will say so)"
	fi
	local deb
	for deb in "$PROMTOOL_DIR.dl"/prometheus_*.deb; do
		[[ -f $deb ]] && dpkg-deb -x "$deb" "$PROMTOOL_DIR" && break
	done
	rm -rf "$PROMTOOL_DIR.dl"
}

missing=()
for p in "${PKGS[@]}"; do
	if [[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null) != installed ]]; then
		missing+=("$p")
	fi
done
if ((${#missing[@]} == 0)); then
	echo "deps: all ${#PKGS[@]} packages installed"
	fetch_promtool
	exit 0
fi

echo "deps: installing ${missing[*]}"
SUDO=()
if ((EUID != 0)); then
	command -v sudo >/dev/null || { echo "deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
	SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fetch_promtool
