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
#        contrib/debian13-root.sh ucx-src       print the path (inside the root) of UCX's source
#                                               tree, fetching Debian's source package if needed
#        contrib/debian13-root.sh test [--full] build this repository's tracked files (as they
#                                               are in the working tree) inside the root and run
#                                               the Debian 13 tests: UCT, UCP, ucx_perftest, MPI,
#                                               namespace tests; --full: the whole make check
#
# The root lives in $SRC_DEBIAN13_ROOT (default ~/.cache/srcucx/debian13), outside the repository.
# It is complete once the stamp file .srcucx-complete exists in it; a run interrupted before then
# is redone from scratch. Inside, /root/.cache/srcucx/ucx-VERSION is UCX's source tree (the value
# for configure's --with-ucx-src), made by contrib/get-ucx-src.sh from Debian's source package
# of the installed UCX, fetched with apt-get source, or read from $SRC_UCX_DEBSRC: a host
# directory with that source package's files (ucx_VERSION.dsc and what it names), for an archive
# mirror that lacks them; they are checked against the root's signed Sources index.
# `test` uses $SRC_UCX_SRC instead when set: a tree inside the root that the caller vouches is
# the source the installed UCX was built from (like configure's --with-ucx-src); it says so.
#
# debootstrap uses the Debian archive that apt on this machine already uses (/etc/apt/sources.list*),
# or $SRC_DEBIAN_MIRROR. Needs root, debootstrap and the trixie archive key (debian-archive-keyring).
# The root itself is bound onto itself while in use, so that it is a mount point for `ip netns
# exec` (which makes / a slave mount). Every mount is undone on exit, whatever the exit, and no
# process is left running in the root.
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

# One user of the root at a time: a second would mount over the first's mounts, and its exit
# would unmount them and stop the first's processes.
mkdir -p "$(dirname "$root")"
exec 9>"$root.lock"
flock -n 9 || die "$root is in use by another debian13-root.sh (lock $root.lock)"

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
    # Everything mounted under the root, ours and what commands in it mounted themselves (ip
    # netns binds /run/netns and the namespaces in it), deepest first; then the root's own bind.
    local m
    for m in $(awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r); do
        umount "$m" 2>/dev/null || umount -l "$m" ||
            echo "debian13-root: could not unmount $m" >&2
    done
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        grep -q " ${mounted[$i]} " /proc/mounts || continue
        umount "${mounted[$i]}" 2>/dev/null || umount -l "${mounted[$i]}" ||
            echo "debian13-root: could not unmount ${mounted[$i]}" >&2
    done
    mounted=()
    if grep -q " $root[/ ]" /proc/mounts; then
        echo "debian13-root: still mounted under $root:" >&2
        grep " $root[/ ]" /proc/mounts >&2
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
    # ip netns exec makes / a slave mount, which fails where / is no mount point (a plain chroot
    # directory): the root bound onto itself is one. The mounts below go onto this bind.
    do_mount "$root" --bind "$root"
    mount --make-private "$root"   # what is mounted on it stays off the host's mount tree
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
# UCX's source tree of exactly the installed version, the way the host gets 1.13's:
# contrib/get-ucx-src.sh run inside the root fetches Debian's source package (apt-get source),
# or takes its files from $SRC_UCX_DEBSRC (a host directory holding the .dsc and the files it
# names, e.g. downloaded from another Debian mirror or snapshot.debian.org), checked against the
# checksums of the root's signed Sources index. Nothing else: another tree of the "same"
# version is not what Debian built (Debian's 1.18.1+ds-2 headers differ from upstream's v1.18.1
# tag), and the module reads UCX's internal structures.
get_ucx_src() {
    local tree
    install -m 0755 "$here/get-ucx-src.sh" "$root/usr/local/bin/get-ucx-src.sh"
    if [ -n "${SRC_UCX_DEBSRC:-}" ]; then
        [ -d "$SRC_UCX_DEBSRC" ] || die "SRC_UCX_DEBSRC=$SRC_UCX_DEBSRC is not a directory"
        rm -rf "$root/root/.cache/srcucx/debsrc"
        mkdir -p "$root/root/.cache/srcucx/debsrc"
        cp -p "$SRC_UCX_DEBSRC"/ucx_* "$root/root/.cache/srcucx/debsrc/" ||
            die "no ucx_* files in SRC_UCX_DEBSRC=$SRC_UCX_DEBSRC"
    fi
    tree=$(in_root /usr/bin/env ${SRC_UCX_DEBSRC:+SRC_UCX_DEBSRC=/root/.cache/srcucx/debsrc} \
               /usr/local/bin/get-ucx-src.sh) || return 1
    echo "debian13-root: UCX source in the root: $tree" >&2
    echo "$tree"
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
    in_root apt-get clean
    echo "debian13-root: made in $((SECONDS - start)) s" >&2
    date -u +%FT%TZ >"$stamp"
}

[ -f "$stamp" ] || make_root

# --- test: build and run the Debian 13 tests ----------------------------------------------------
# The tests that differ between UCX 1.13 / Open MPI 4.1 and UCX 1.18 / Open MPI 5, or that touch
# UCX's internals: the module's own suites, UCP, ucx_perftest, MPI and the namespace test beds.
d13_tests=(
    uct/uct_tests uct/module_load.sh uct/version_refusal.sh uct/ucp_thresholds.sh uct/perftest.sh
    build/ucx_src_mismatch.sh ucp/client_server.sh mpi/srcrun_mpi.sh
    cluster/netns_mpi.sh cluster/netns_agent.sh agent/ucx_agent.sh
)

run_tests() {
    local full=0 top tree t0 rc=0 work=/root/srcucx-test
    [ "${1:-}" = --full ] && { full=1; shift; }
    [ $# -eq 0 ] || die "test: unknown argument '$1' (test [--full])"
    top=$(cd "$here/.." && pwd)
    git -C "$top" rev-parse --git-dir >/dev/null 2>&1 || die "test: $top is not a git work tree"
    [ ${#mounted[@]} -gt 0 ] || mount_all
    if [ -n "${SRC_UCX_SRC:-}" ]; then
        tree=$SRC_UCX_SRC
        [ -f "$root$tree/src/uct/base/uct_iface.h" ] ||
            die "SRC_UCX_SRC=$tree: no UCX source tree there (inside the root)"
        echo "debian13-root: UCX source: $tree, given by SRC_UCX_SRC (origin: $(cat "$root$tree/.srcucx-origin" 2>/dev/null || echo unrecorded)), not Debian's source package" >&2
    else
        tree=$(get_ucx_src) || die "test: no UCX source tree (see above)"
    fi
    # A fresh copy of the tracked files as they are now (committed or not), built out of tree.
    rm -rf "$root$work"
    mkdir -p "$root$work/src" "$root$work/build"
    git -C "$top" ls-files -z | (cd "$top" && tar --null -T - -cf -) | tar -xf - -C "$root$work/src"
    t0=$SECONDS
    in_root /bin/sh -c "cd $work/src && ./autogen.sh >$work/autogen.log 2>&1 &&
        cd $work/build && ../src/configure --with-ucx-src=$tree >$work/configure.log 2>&1" ||
        { tail -n 30 "$root$work/autogen.log" "$root$work/configure.log" >&2 2>/dev/null; die "test: configure failed"; }
    in_root /bin/sh -c "cd $work/build && nice make -j$(nproc) >$work/make.log 2>&1" ||
        { grep -m 20 -B2 -A6 'error' "$root$work/make.log" >&2 || tail -n 40 "$root$work/make.log" >&2; die "test: build failed"; }
    echo "debian13-root: built in $((SECONDS - t0)) s" >&2
    t0=$SECONDS
    if [ $full -eq 1 ]; then
        in_root /bin/sh -c "cd $work/build && nice make check" >"$root$work/check.log" 2>&1 || rc=$?
    else
        in_root /bin/sh -c "cd $work/build && nice make check TESTS='${d13_tests[*]}'" \
            >"$root$work/check.log" 2>&1 || rc=$?
    fi
    grep -E '^(PASS|FAIL|SKIP|XFAIL|XPASS|ERROR): |^# (TOTAL|PASS|SKIP|XFAIL|FAIL|XPASS|ERROR):' \
        "$root$work/check.log" >&2 || tail -n 40 "$root$work/check.log" >&2
    echo "debian13-root: tests ran in $((SECONDS - t0)) s; logs in $root$work/build/tests" >&2
    return $rc
}

case "${1:-}" in
    "")
        echo "$root" ;;
    ucx-src)
        [ ${#mounted[@]} -gt 0 ] || mount_all
        get_ucx_src ;;
    test)
        shift
        run_tests "$@" ;;
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
        die "unknown command '$1' (run, run-in, ucx-src, test, or nothing)" ;;
esac
