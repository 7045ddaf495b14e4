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
