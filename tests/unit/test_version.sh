#!/bin/sh
# tests/unit/test_version.sh SRC VERSION FACETFS BRIDGE MOUNT_HELPER — every
# program prints "NAME V" for --version, V the same for all three: the
# project's VERSION, followed by " (git COMMIT)" (COMMIT the checkout's
# HEAD, "-dirty" after it when tracked files differ) when SRC is a git
# checkout of its own, by nothing otherwise (common/version.sh).
src=$1 version=$2
shift 2
fail=0
ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; fail=$((fail + 1)); }

want=$version
if top=$(git -C "$src" rev-parse --show-toplevel 2>/dev/null) &&
	[ "$(cd "$top" && pwd -P)" = "$(cd "$src" && pwd -P)" ]; then
	want="$version (git $(git -C "$src" rev-parse --short=7 HEAD)"
	[ -z "$(git -C "$src" status --porcelain --untracked-files=no)" ] || want="$want-dirty"
	want="$want)"
fi
for prog in "$@"; do
	name=$(basename "$prog")
	got=$("$prog" --version 2>&1)
	rc=$?
	if [ $rc -eq 0 ] && [ "$got" = "$name $want" ]; then
		ok "$name --version: $got"
	else
		not_ok "$name --version: '$got' (exit $rc), expected '$name $want'"
	fi
done
[ $fail -eq 0 ] && echo "# all passed" || echo "# FAILED: $fail failure(s)"
[ $fail -eq 0 ]
