#!/usr/bin/env bash
# t_package.sh — the Debian package (debian/), built the way an
# administrator would: `dpkg-buildpackage -us -uc -b` in a copy of the
# source tree without .git (the tracked and new files as they are now,
# nothing ignored: no build dirs), niced, DEB_BUILD_OPTIONS=nocheck (the
# unit tests run in tests/run already). Then:
#   - the .deb is facetfs_VERSION_ARCH.deb, VERSION the changelog's, whose
#     upstream part is meson's project version;
#   - its file list holds the three programs (mount.facetfs in /sbin), the
#     manual pages, the systemd units (the examples, byte for byte), the
#     examples and /etc/facetfs/ with the sample config as a conffile, and
#     nothing outside those places;
#   - Depends names runtime libraries (from ${shlibs:Depends}) and fuse3
#     only: no -dev package, nothing else;
#   - lintian prints no E: line (its other lines are shown as comments);
#   - unpacked into a scratch root (dpkg -x): each program's --version is
#     "NAME VERSION" (no commit: the copy has no .git), facetfs check passes
#     the shipped example filters, the manual pages carry the version, the
#     units' ExecStart programs are in the package;
#   - installed into and purged from an empty scratch dpkg database (dpkg
#     --root, maintainer scripts run outside a chroot, systemctl and
#     deb-systemd-invoke replaced by stubs that only log): no unit enabled
#     or started, and after the purge only what the "administrator" added
#     is left.
# Needs no bed. Its temp dirs are removed unless something failed.
. "$(dirname "$0")/../lib/common.sh"

T=$(test_tmp)
SRC=$FACETFS_SRC

for tool in dpkg-buildpackage dh lintian dpkg-parsechangelog; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		not_ok "$tool installed (tests/deps.sh installs it)"
		exit 1
	fi
done

# --- the copy and the build --------------------------------------------------
mkdir -p "$T/b/src"
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
	# Tracked and new files as they are in the work tree (deleted ones left
	# out), none that .gitignore names.
	(cd "$SRC" && git ls-files -z -c -o --exclude-standard |
		while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
		tar --null -T - -cf -) | tar -xf - -C "$T/b/src"
else
	(cd "$SRC" && tar --exclude='./build*' --exclude='./obj-*' -cf - .) | tar -xf - -C "$T/b/src"
fi
check "the copy has debian/ and no .git" test -f "$T/b/src/debian/control" -a ! -e "$T/b/src/.git"

t0=$(date +%s)
(cd "$T/b/src" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" \
	nice dpkg-buildpackage -us -uc -b) >"$T/build.log" 2>&1
rc=$?
if ((rc == 0)); then
	ok "dpkg-buildpackage -us -uc -b ($(($(date +%s) - t0)) s)"
else
	not_ok "dpkg-buildpackage -us -uc -b" "exit $rc"
	tail -n 30 "$T/build.log" | diag
	exit 1
fi

meson_version=$(meson introspect "$SRC/meson.build" --projectinfo | jq -r .version)
deb_version=$(dpkg-parsechangelog -l "$SRC/debian/changelog" -S Version)
arch=$(dpkg --print-architecture)
check_eq "debian/changelog's upstream version is meson's project version" \
	"$meson_version" "${deb_version%-*}"
DEB=$T/b/facetfs_${deb_version}_$arch.deb
check "built $(basename "$DEB")" test -f "$DEB"
[[ -f $DEB ]] || exit 1
check_eq "the package's Version field" "$deb_version" "$(dpkg-deb -f "$DEB" Version)"

# --- its contents ---------------------------------------------------------------
dpkg -c "$DEB" | awk '{ print $6 }' | sed 's|^\./|/|; s|/$||' | sort >"$T/files"
missing=
for f in /usr/bin/facetfs /usr/bin/facetfs-bridge /sbin/mount.facetfs \
	/usr/share/man/man1/facetfs.1.gz /usr/share/man/man1/facetfs-bridge.1.gz \
	/usr/share/man/man5/facetfs-views.5.gz /usr/share/man/man8/mount.facetfs.8.gz \
	/lib/systemd/system/facetfs@.service /lib/systemd/system/facetfs-bridge.service \
	/usr/share/doc/facetfs/copyright /usr/share/doc/facetfs/README.Debian \
	/usr/share/doc/facetfs/examples/gateway.json \
	/usr/share/doc/facetfs/examples/systemd/facetfs@.service \
	/usr/share/doc/facetfs/examples/systemd/facetfs-bridge.service \
	/etc/facetfs/gateway.json /etc/facetfs/views.d; do
	grep -qxF "$f" "$T/files" || missing+=" $f"
done
for f in "$SRC"/examples/views.d/*.json; do
	grep -qxF "/usr/share/doc/facetfs/examples/views.d/${f##*/}" "$T/files" || missing+=" views.d/${f##*/}"
done
check_eq "dpkg -c: programs, manual pages, units, examples, /etc/facetfs ($(wc -l <"$T/files") entries)" "" "$missing"
stray=$(grep -vE '^/$|^/(etc|etc/facetfs(/.*)?|lib|lib/systemd|lib/systemd/system(/.*)?|sbin|sbin/mount\.facetfs|usr|usr/bin(/.*)?|usr/share|usr/share/doc|usr/share/doc/facetfs(/.*)?|usr/share/man(/.*)?)$' "$T/files")
check_eq "nothing outside those places" "" "$stray"
mkdir -p "$T/ctl"
dpkg-deb -e "$DEB" "$T/ctl"
check_eq "the sample config is the one conffile" "/etc/facetfs/gateway.json" "$(cat "$T/ctl/conffiles" 2>/dev/null)"

depends=$(dpkg-deb -f "$DEB" Depends)
diag <<<"Depends: $depends"
bad_deps=$(tr ',' '\n' <<<"$depends" | sed 's/^ *//; s/ .*//' |
	grep -vE '^(lib[a-z0-9.+-]+|fuse3)$' | grep -v -- '-dev$' | tr '\n' ' ')
dev_deps=$(tr ',' '\n' <<<"$depends" | grep -- '-dev' | tr '\n' ' ')
check_eq "Depends: runtime libraries and fuse3 only" "" "$bad_deps$dev_deps"
check "Depends names fuse3" grep -qw fuse3 <<<"$depends"

# --- lintian --------------------------------------------------------------------
lintian --tag-display-limit 0 "$T/b/facetfs_${deb_version}_$arch.changes" >"$T/lintian.out" 2>&1
grep -v 'root privileges' "$T/lintian.out" | diag
errors=$(grep -c '^E:' "$T/lintian.out")
check_eq "lintian: no error (E:) lines" 0 "$errors"

# --- unpacked into a scratch root -------------------------------------------------
X=$T/x
dpkg -x "$DEB" "$X"
for prog in "$X/usr/bin/facetfs" "$X/usr/bin/facetfs-bridge" "$X/sbin/mount.facetfs"; do
	name=${prog##*/}
	check_eq "$name --version from the package" "$name $meson_version" "$("$prog" --version 2>&1)"
done
if "$X/usr/bin/facetfs" check "$X"/usr/share/doc/facetfs/examples/views.d/*.json >"$T/filters.out" 2>&1; then
	ok "the package's facetfs check passes its $(ls "$X"/usr/share/doc/facetfs/examples/views.d/*.json | wc -l) example filters"
else
	not_ok "the package's facetfs check passes its example filters" "$(head -n 3 "$T/filters.out" | tr '\n' ' ')"
fi
bad_th=
for m in "$X"/usr/share/man/man*/*.gz; do
	zcat "$m" | head -n 1 | grep -qF "\"facetfs $meson_version\"" || bad_th+=" ${m##*/}"
done
check_eq "every manual page's .TH names facetfs $meson_version" "" "$bad_th"
for u in facetfs@.service facetfs-bridge.service; do
	check "$u is the example unit" cmp "$X/lib/systemd/system/$u" "$SRC/examples/systemd/$u"
	exe=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$X/lib/systemd/system/$u")
	check "$u: ExecStart's $exe is in the package's /usr/bin" test -x "$X/usr/bin/$exe"
done

# --- install and purge with dpkg --root -------------------------------------------
R=$T/root
mkdir -p "$R/var/lib/dpkg/info" "$R/var/lib/dpkg/updates" "$R/var/lib/dpkg/triggers" \
	"$R/var/lib/systemd" "$R/etc/systemd/system" "$T/stubs"
touch "$R/var/lib/dpkg/status" "$R/var/lib/dpkg/available"
# What the maintainer scripts would ask of the running system, logged
# instead of done.
for s in systemctl deb-systemd-invoke; do
	printf '#!/bin/sh\necho "%s $*" >>"%s"\n' "$s" "$T/stubs.log" >"$T/stubs/$s"
	chmod +x "$T/stubs/$s"
done
: >"$T/stubs.log"
find "$R" -mindepth 1 ! -path "$R/var/lib/dpkg*" | sort >"$T/before"
dpkg_root() {
	PATH=$T/stubs:$PATH dpkg --root="$R" --force-script-chrootless --force-depends \
		--force-not-root --log=/dev/null "$@"
}
if dpkg_root -i "$DEB" >"$T/install.out" 2>&1; then
	ok "dpkg --root -i"
else
	not_ok "dpkg --root -i" "$(grep -v 'depends on\|not installed\|dependency problems' "$T/install.out" | tail -n 3 | tr '\n' ' ')"
fi
check_eq "installed: no unit enabled" "" "$(find "$R/etc/systemd/system" -mindepth 1 | head -3)"
check_eq "installed: nothing started or enabled" "" "$(grep -E 'start|enable' "$T/stubs.log" | head -3)"
# What an administrator adds: a filter file, an edit of the sample config.
printf '{ "name": "mine", "bucket": "b", "match": {} }\n' >"$R/etc/facetfs/views.d/mine.json"
echo '// edited' >>"$R/etc/facetfs/gateway.json"
if dpkg_root --purge facetfs >"$T/purge.out" 2>&1; then
	ok "dpkg --root --purge"
else
	not_ok "dpkg --root --purge" "$(tail -n 3 "$T/purge.out" | tr '\n' ' ')"
fi
find "$R" -mindepth 1 ! -path "$R/var/lib/dpkg*" | sort >"$T/after"
left=$(comm -13 "$T/before" "$T/after" | sed "s|^$R||" | tr '\n' ' ')
check_eq "after the purge only the administrator's filter file is left" \
	"/etc/facetfs /etc/facetfs/views.d /etc/facetfs/views.d/mine.json " "$left"
diag <"$T/stubs.log"
