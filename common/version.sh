#!/bin/sh
# common/version.sh SRC VERSION — the command of meson's vcs_tag
# (common/meson.build). In a git checkout of facetfs at SRC it prints
# "VERSION (git COMMIT)", with "-dirty" after the commit when tracked files
# differ from it; anywhere else (an unpacked tarball, a Debian source
# package, a copy inside some other repository) it fails, and meson writes
# VERSION alone.
src=$1 version=$2
top=$(git -C "$src" rev-parse --show-toplevel 2>/dev/null) || exit 1
[ "$(cd "$top" && pwd -P)" = "$(cd "$src" && pwd -P)" ] || exit 1
commit=$(git -C "$src" rev-parse --short=7 HEAD 2>/dev/null) || exit 1
dirty=
[ -z "$(git -C "$src" status --porcelain --untracked-files=no 2>/dev/null)" ] || dirty=-dirty
printf '%s (git %s%s)\n' "$version" "$commit" "$dirty"
