#!/usr/bin/env bash
# A Debian 13 (trixie: UCX 1.18, Open MPI 5) root for building and testing srcucx against the
# newer UCX on a Debian 12 machine, made once with debootstrap and reused.
#
# usage: contrib/debian13-root.sh                make the root (if not made yet) and print its path
#        contrib/debian13-root.sh run CMD...     run CMD inside it (as root, cwd /), with /proc,
#                                               /sys, /dev, /dev/pts and a private /dev/shm mounted
#        contrib/debian13-root.sh run-in DIR CMD...
#                                               the same, with the host directory DIR (e.g. this
#                                               repository) bound read-write at /srcucx and CMD
#                                               run there
#
# The root lives in $SRC_DEBIAN13_ROOT (default ~/.cache/srcucx/debian13), outside the repository.
# It is complete once the stamp file .srcucx-complete exists in it; a run interrupted before then
# is redone from scratch. Inside, /root/.cache/srcucx/ucx-VERSION is UCX's source tree (the value
# for configure's --with-ucx-src), fetched by contrib/get-ucx-src.sh run inside the root, or
# taken from a git repository of UCX ($SRC_UCX_GIT) where the archive lacks the source package.
#
# debootstrap uses the Debian archive that apt on this machine already uses (/etc/apt/sources.list*),
# or $SRC_DEBIAN_MIRROR. Needs root, debootstrap and the trixie archive key (debian-archive-keyring).
# Every mount is undone on exit, whatever the exit, and no process is left running in the root.
set -euo pipefail

die() { echo "debian13-root: $*" >&2; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
root=${SRC_DEBIAN13_ROOT:-$HOME/.cache/srcucx/debian13}
suite=trixie
stamp="$root/.srcucx-complete"

packages=(
    build-essential autoconf automake libtool pkg-config    # build
    libucx-dev ucx-utils                                     # UCX 1.18, ucx_info, ucx_perftest
    openmpi-bin libopenmpi-dev                               # Open MPI 5
    libgtest-dev libhwloc-dev                                # make check
    valgrind                                                 # valgrind/memcheck.h, which UCX's headers include
    dpkg-dev                                                 # apt-get source (UCX headers)
    iproute2 procps python3 git ca-certificates              # test scripts
)

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mounts)"

# The mirror apt here uses for Debian itself (not the security archive): deb822 .sources
# stanzas first, then one-line .list entries. Files apt ignores (other suffixes) are skipped.
find_mirror() {
    local f uri
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        uri=$(awk 'BEGIN { RS=""; FS="\n" }
                   /(^|\n)Types:[^\n]*deb([ \t]|\n|$)/ && !/(^|\n)Enabled: *no/ {
                       u = ""; s = ""
                       for (i = 1; i <= NF; i++) {
                           if ($i ~ /^URIs:/)   { u = $i; sub(/^URIs:[ \t]*/, "", u); sub(/[ \t].*/, "", u) }
                           if ($i ~ /^Suites:/) { s = $i }
                       }
                       if (u != "" && s !~ /-security/ && u !~ /security/) { print u; exit }
                   }' "$f")
        [ -n "$uri" ] && { echo "$uri"; return 0; }
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        uri=$(sed -n 's/^[[:space:]]*deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]\+\)[[:space:]]\+[^[:space:]-]\+[[:space:]].*/\2/p' "$f" |
              grep -v security | head -n 1)
        [ -n "$uri" ] && { echo "$uri"; return 0; }
    done
    return 1
}

# --- mounts, undone by the trap ----------------------------------------------------------------
mounted=()
cleanup() {
    local rc=$? pid i
    # Processes still running in the root (a daemon a test left behind): they were started here.
    for pid in $(ls /proc | grep -E '^[0-9]+$'); do
        [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$root" ] || continue
        kill -TERM "$pid" 2>/dev/null || true
    done
    sleep 0.2
    for pid in $(ls /proc | grep -E '^[0-9]+$'); do
        [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$root" ] || continue
        echo "debian13-root: killing process $pid left in the root" >&2
        kill -KILL "$pid" 2>/dev/null || true
    done
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount "${mounted[$i]}" 2>/dev/null || umount -l "${mounted[$i]}" ||
            echo "debian13-root: could not unmount ${mounted[$i]}" >&2
    done
    mounted=()
    # What commands in the root mounted there themselves (ip netns binds /run/netns and the
    # namespaces in it), deepest first.
    local m
    for m in $(awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r); do
        umount "$m" 2>/dev/null || umount -l "$m" || true
    done
    if grep -q " $root/" /proc/mounts; then
        echo "debian13-root: still mounted under $root:" >&2
        grep " $root/" /proc/mounts >&2
        [ $rc -ne 0 ] || rc=1
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

do_mount() {   # do_mount TARGET MOUNT-ARGS...
    local target=$1; shift
    mkdir -p "$target"
    mount "$@" "$target"
    mounted+=("$target")
}

mount_all() {
    do_mount "$root/proc" -t proc proc
    do_mount "$root/sys" --bind /sys
    do_mount "$root/dev" --bind /dev
    do_mount "$root/dev/pts" --bind /dev/pts
    do_mount "$root/dev/shm" -t tmpfs -o mode=1777,nosuid,nodev tmpfs
}

in_root() {
    chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        DEBIAN_FRONTEND=noninteractive "$@" </dev/null
}

# --- UCX's source tree -------------------------------------------------------------------------
# UCX's source tree of exactly the installed version, the way the host gets 1.13's
# (contrib/get-ucx-src.sh: Debian's source package). Where the archive does not serve that source
# package, $SRC_UCX_GIT, a git repository of UCX (a clone of github.com/openucx/ucx), gives the
# upstream release tag vVERSION instead: Debian's patches to UCX change its build and .c files,
# not the headers the transport uses.
get_ucx_src() {
    local version tree
    install -m 0755 "$here/get-ucx-src.sh" "$root/usr/local/bin/get-ucx-src.sh"
    if tree=$(in_root /usr/local/bin/get-ucx-src.sh); then
        echo "debian13-root: UCX source in the root: $tree (Debian's source package)" >&2
        return 0
    fi
    version=$(in_root pkg-config --modversion ucx) || die "no UCX in the root"
    [ -n "${SRC_UCX_GIT:-}" ] ||
        die "Debian's source of UCX $version is not available; set SRC_UCX_GIT to a git repository of UCX (with tag v$version) to use the upstream release"
    git -C "$SRC_UCX_GIT" rev-parse -q --verify "refs/tags/v$version^{commit}" >/dev/null ||
        die "$SRC_UCX_GIT has no tag v$version"
    tree=/root/.cache/srcucx/ucx-$version
    rm -rf "$root$tree"
    mkdir -p "$root$tree"
    git -C "$SRC_UCX_GIT" archive --format=tar "v$version" | tar -x -C "$root$tree" ||
        die "unpacking v$version from $SRC_UCX_GIT failed"
    [ -f "$root$tree/src/uct/base/uct_iface.h" ] || die "v$version from $SRC_UCX_GIT lacks src/uct/base/uct_iface.h"
    echo "upstream tag v$version of $SRC_UCX_GIT ($(git -C "$SRC_UCX_GIT" rev-parse "v$version^{commit}"))" \
        >"$root$tree/.srcucx-origin"
    echo "debian13-root: UCX source in the root: $tree (upstream tag v$version)" >&2
}

# --- making the root ---------------------------------------------------------------------------
make_root() {
    command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install debootstrap"
    [ -e "/usr/share/debootstrap/scripts/$suite" ] ||
        die "this debootstrap does not know $suite: install a newer debootstrap"
    local mirror=${SRC_DEBIAN_MIRROR:-}
    [ -n "$mirror" ] || mirror=$(find_mirror) ||
        die "no Debian mirror found in /etc/apt/sources.list*; set SRC_DEBIAN_MIRROR=URL"
    echo "debian13-root: making a $suite root in $root from $mirror" >&2

    # An incomplete root (no stamp) is not trusted: start again. Nothing may be mounted in it.
    if [ -e "$root" ]; then
        grep -q " $root/" /proc/mounts && die "something is mounted under $root; unmount it first"
        rm -rf --one-file-system "$root"
    fi
    mkdir -p "$(dirname "$root")"
    local start=$SECONDS
    debootstrap --variant=minbase --components=main \
        --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
        "$suite" "$root" "$mirror" >&2 </dev/null || die "debootstrap failed"

    # No daemon may start in the root when a package is installed.
    printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
    chmod 0755 "$root/usr/sbin/policy-rc.d"
    cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
EOF
    cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
    echo "srcucx-debian13" >"$root/etc/debian_chroot"

    mount_all
    in_root apt-get update -q >&2 || die "apt-get update in the root failed"
    in_root apt-get install -y -q --no-install-recommends "${packages[@]}" >&2 ||
        die "installing the build dependencies in the root failed"
    get_ucx_src
    in_root apt-get clean
    echo "debian13-root: made in $((SECONDS - start)) s" >&2
    date -u +%FT%TZ >"$stamp"
}

[ -f "$stamp" ] || make_root

case "${1:-}" in
    "")
        echo "$root" ;;
    run)
        shift
        [ $# -gt 0 ] || die "run: no command"
        [ ${#mounted[@]} -gt 0 ] || mount_all
        in_root "$@" ;;
    run-in)
        shift
        [ $# -gt 1 ] || die "run-in: usage: run-in DIR CMD..."
        dir=$(cd "$1" && pwd); shift
        [ ${#mounted[@]} -gt 0 ] || mount_all
        do_mount "$root/srcucx" --bind "$dir"
        in_root /bin/sh -c 'cd /srcucx && exec "$@"' sh "$@" ;;
    *)
        die "unknown command '$1' (run, run-in, or nothing)" ;;
esac
