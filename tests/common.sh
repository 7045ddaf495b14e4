# Helpers for the shell tests: sourced, not run. Every test is bounded by a watchdog.
set -eu

fail() { echo "FAIL: $*" >&2; exit 1; }

# run_bounded SECONDS CMD...: run CMD, killing it (and failing) if it outlives SECONDS.
run_bounded() {
    limit=$1; shift
    timeout --kill-after=5 "$limit" "$@" || {
        rc=$?
        [ $rc -eq 124 ] && fail "timed out after ${limit}s: $*"
        return $rc
    }
}

# need_netns: skip (77) unless network namespaces can be made here (root, ip netns, unshare).
need_netns() {
    [ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for network namespaces"; exit 77; }
    command -v ip >/dev/null 2>&1 && ip netns list >/dev/null 2>&1 ||
        { echo "SKIP: 'ip netns' is unavailable"; exit 77; }
    command -v unshare >/dev/null 2>&1 || { echo "SKIP: unshare is unavailable"; exit 77; }
}

module="$top_builddir/uct_src/.libs/libuct_src.so"

# linked_source_tree DIR: makes DIR a source tree of links to ours and prints its configure. A
# tree configured in place (the README's "./configure && make && make check") refuses a second
# configure elsewhere; the links leave out what that configure made.
linked_source_tree() {
    mkdir "$1"
    for f in "$top_srcdir"/* "$top_srcdir"/.[!.]*; do
        case "${f##*/}" in
            config.status|config.log|config.h|Makefile|libtool|stamp-h1|_build|.git) ;;
            *) [ -e "$f" ] && ln -s "$(cd "$(dirname "$f")" && pwd)/${f##*/}" "$1/" ;;
        esac
    done
    echo "$1/configure"
}

# ompi_major: the major version of the Open MPI behind $MPIRUN (4, 5, ...; empty without one).
ompi_major() {
    "${MPIRUN:-mpirun}" --version 2>/dev/null |
        sed -n 's/.*(Open MPI) \([0-9][0-9]*\)\..*/\1/p' | head -n 1
}

# mpi_oversubscribe: let mpirun start more ranks than the machine has cores. Open MPI 4 reads
# it as the rmaps parameter; Open MPI 5's launcher (PRRTE) as a modifier of its mapping policy
# (mpirun --map-by :OVERSUBSCRIBE), and ignores the former.
mpi_oversubscribe() {
    case "$(ompi_major)" in
    ''|[0-4]) export OMPI_MCA_rmaps_base_oversubscribe=1 ;;
    *) export PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe ;;
    esac
}

# The preload list for the module: a sanitizer build needs its runtimes first.
module_preload() {
    if [ -n "${SANITIZERS:-}" ]; then
        printf '%s:%s:%s' "$($CC -print-file-name=libasan.so)" \
            "$($CC -print-file-name=libubsan.so)" "$module"
    else
        printf '%s' "$module"
    fi
}
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"

# own_testbed NAME: the test's own namespace test bed (prefix NAME and the test's pid, so that a
# developer's bed, on the default prefix, is left alone) and a scratch directory, both removed
# when the test exits. Sets testbed (the bed's script), scratch and SRCBED_PREFIX; lets Open MPI
# run as root. The caller brings the bed up with as many nodes as it needs.
own_testbed() {
    testbed="$top_srcdir/contrib/netns-testbed.sh"
    SRCBED_PREFIX=$1$$
    export SRCBED_PREFIX OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    scratch=$(mktemp -d)
    trap '"$testbed" down >/dev/null 2>&1; rm -rf "$scratch"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}
