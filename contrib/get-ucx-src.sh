#!/usr/bin/env bash
# Obtain the UCX source tree that matches the installed UCX libraries, from the distribution's
# own source archive, and print its path (the value for ./configure --with-ucx-src=DIR).
#
# usage: contrib/get-ucx-src.sh [DEST]     (default DEST: $SRC_UCX_SRC_CACHE or ~/.cache/srcucx)
#
# On Debian/Ubuntu it enables source lists derived from the machine's existing apt
# configuration (the same archives, "deb-src" instead of "deb"), then runs `apt-get source`
# for the exact source version of the installed libucx0. Where the archive mirror lists that
# source package but does not serve its files, $SRC_UCX_DEBSRC may name a directory holding them
# (ucx_VERSION.dsc and the tarballs it names, from any Debian mirror or snapshot.debian.org):
# each is checked against the SHA-256 sums of apt's signed Sources index before use.
# An unpacked tree already in DEST is reused if it was made from that source package (its
# .srcucx-origin says so; trees of earlier versions of this script have no such file).
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
origin="Debian source package ucx $debver"
if [ -f "$tree/src/uct/base/uct_iface.h" ]; then
    if [ ! -f "$tree/.srcucx-origin" ] || [ "$(cat "$tree/.srcucx-origin")" = "$origin" ]; then
        echo "$tree"
        exit 0
    fi
    die "$tree is not made from Debian's source package ucx $debver (it says: $(cat "$tree/.srcucx-origin")); remove it"
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
    die "the source archive does not list ucx $debver; unpack UCX $version yourself and pass --with-ucx-src=DIR"

mkdir -p "$dest"
work=$(mktemp -d "$dest/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
command -v dpkg-source >/dev/null || $sudo apt-get install -y -q dpkg-dev >&2

# The files of source package ucx $debver and their SHA-256 sums, from the signed index.
sums=$(apt-cache showsrc ucx 2>/dev/null | awk -v v="$debver" '
    /^Version:/ { ours = ($2 == v) }
    ours && /^Checksums-Sha256:/ { s = 1; next }
    ours && s && /^ / { print $1, $3; next }
    { s = 0 }' | sort -u)
[ -n "$sums" ] || die "no checksums for ucx $debver in the Sources index"

if ! (cd "$work" && apt-get source -q --download-only "ucx=$debver" >"$work/apt.log" 2>&1); then
    if [ -z "${SRC_UCX_DEBSRC:-}" ]; then
        grep -E '^(E|Err):' "$work/apt.log" >&2 || cat "$work/apt.log" >&2
        die "apt-get source ucx=$debver failed: the archive lists the source package but does not serve it.
Fetch its files (from another Debian mirror or https://snapshot.debian.org/package/ucx/) into a
directory and run again with SRC_UCX_DEBSRC=DIR; they are checked against these SHA-256 sums:
$sums"
    fi
    echo "get-ucx-src: apt-get source ucx=$debver failed; taking its files from $SRC_UCX_DEBSRC" >&2
    while read -r sum file; do
        [ -f "$SRC_UCX_DEBSRC/$file" ] || die "$SRC_UCX_DEBSRC lacks $file"
        cp "$SRC_UCX_DEBSRC/$file" "$work/"
    done <<<"$sums"
fi
# Whichever way they came, the files are the ones the signed index names (apt checks its own
# downloads too; this covers SRC_UCX_DEBSRC).
(cd "$work" && while read -r sum file; do
     echo "$sum  $file"
 done <<<"$sums" | sha256sum --quiet -c - >&2) ||
    die "the files of ucx $debver do not match the Sources index"
(cd "$work" && dpkg-source -x --skip-patches "ucx_${debver#*:}.dsc" "ucx-$version" >&2) ||
    die "unpacking ucx $debver failed"
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
echo "$origin" >"$work/ucx-$version/.srcucx-origin"
rm -rf "$tree"
mv "$work/ucx-$version" "$tree"
echo "$tree"
