#!/usr/bin/env bash
# Obtain the UCX source tree that matches the installed UCX libraries, from the distribution's
# own source archive, and print its path (the value for ./configure --with-ucx-src=DIR).
#
# usage: contrib/get-ucx-src.sh [DEST]     (default DEST: $SRC_UCX_SRC_CACHE or ~/.cache/srcucx)
#
# On Debian/Ubuntu it enables source lists derived from the machine's existing apt
# configuration (the same archives, "deb-src" instead of "deb"), then runs `apt-get source`
# for the exact installed version. An unpacked tree already in DEST is reused.
set -euo pipefail

die() { echo "get-ucx-src: $*" >&2; exit 1; }

dest=${1:-${SRC_UCX_SRC_CACHE:-$HOME/.cache/srcucx}}

command -v pkg-config >/dev/null || die "pkg-config is missing: apt-get install pkg-config"
version=$(pkg-config --modversion ucx 2>/dev/null) ||
    die "installed UCX not found by pkg-config: apt-get install libucx-dev"
command -v dpkg-query >/dev/null ||
    die "not a Debian-based system: unpack the UCX $version source yourself and pass --with-ucx-src=DIR"
# The source package's version: a binary-only rebuild (Debian 13's 1.18.1+ds-2+b1) has none of
# its own.
debver=$(dpkg-query -W -f='${source:Version}' libucx0 2>/dev/null || true)
[ -n "$debver" ] || die "package libucx0 is not installed: apt-get install libucx-dev"

tree="$dest/ucx-$version"
if [ -f "$tree/src/uct/base/uct_iface.h" ]; then
    echo "$tree"
    exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

# Enable deb-src for each archive apt already uses, unless some source list already has it.
if ! apt-cache showsrc ucx 2>/dev/null | grep -q "^Version: $debver\$"; then
    srcfile=/etc/apt/sources.list.d/srcucx-deb-src.sources
    listfile=/etc/apt/sources.list.d/srcucx-deb-src.list
    tmp=$(mktemp)
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        [ "$f" = "$srcfile" ] && continue
        # deb822 stanzas: keep those whose Types include deb, switch them to deb-src.
        awk 'BEGIN { RS=""; ORS="\n\n" }
             /(^|\n)Types:[^\n]*(^|[ \t])deb([ \t]|\n|$)/ && !/(^|\n)Enabled: *no/ {
                 sub(/(^|\n)Types:[^\n]*/, "\nTypes: deb-src"); sub(/^\n/, ""); print }' "$f" >>"$tmp"
    done
    if [ -s "$tmp" ]; then
        $sudo install -m 0644 "$tmp" "$srcfile"
    fi
    : >"$tmp"
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        [ "$f" = "$listfile" ] && continue
        sed -n 's/^[[:space:]]*deb[[:space:]]\+/deb-src /p' "$f" >>"$tmp"
    done
    if [ -s "$tmp" ]; then
        $sudo install -m 0644 "$tmp" "$listfile"
    fi
    rm -f "$tmp"
    $sudo apt-get update -q >&2 || die "apt-get update failed"
fi

apt-cache showsrc ucx 2>/dev/null | grep -q "^Version: $debver\$" ||
    die "the source archive does not offer ucx $debver; unpack UCX $version yourself and pass --with-ucx-src=DIR"

mkdir -p "$dest"
work=$(mktemp -d "$dest/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
command -v dpkg-source >/dev/null || $sudo apt-get install -y -q dpkg-dev >&2
(cd "$work" && apt-get source -q --download-only "ucx=$debver" >&2 &&
     dpkg-source -x --skip-patches ./*.dsc "ucx-$version" >&2) ||
    die "apt-get source ucx=$debver failed"
# Debian's patches adjust the packaging build; the headers are upstream's. Apply them anyway so
# the tree is exactly what the installed libraries were built from.
if [ -f "$work/ucx-$version/debian/patches/series" ]; then
    (cd "$work/ucx-$version" &&
        while read -r p; do
            case "$p" in ''|'#'*) continue ;; esac
            patch -p1 -s <"debian/patches/$p" >&2
        done <debian/patches/series) || die "applying Debian's patches failed"
fi
[ -f "$work/ucx-$version/src/uct/base/uct_iface.h" ] || die "unpacked tree lacks src/uct/base/uct_iface.h"
rm -rf "$tree"
mv "$work/ucx-$version" "$tree"
echo "$tree"
