#!/usr/bin/env bash
# Builds a fuzzer (TARGET.cc and the engine sources, clang libFuzzer with ASan and UBSan) and runs
# it for a bounded time from its committed seed corpus: rx_fuzz (the receive path; seeds in
# corpus/) or ring_fuzz (what an attached process writes into memory it shares with the agent;
# seeds in ring_corpus/).
#
# Usage: run_fuzz.sh [SECONDS [TARGET]]  SECONDS defaults to $SRCNIC_FUZZ_SECONDS, else 60;
#                                        TARGET to rx_fuzz.
# Environment: top_srcdir (default: two levels above this script), top_builddir (the configured
#   build tree, for config.h; make check sets both), CLANGXX (default clang++), SRCNIC_FUZZ_JOBS
#   (parallel compiles, default nproc).
# Work directory: $top_builddir/tests/fuzz/work (objects, binary, growing corpus, crash inputs,
#   fuzz-TARGET.log). The binary is rebuilt only when a source is newer than it.
# Exit status: 0 no finding; 1 a crash, leak, timeout or build failure (the reproducer is
#   work/crash-* etc.; replay: work/TARGET FILE); 77 clang++ cannot build libFuzzer targets.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$(cd "$here/../.." && pwd)}
seconds=${1:-${SRCNIC_FUZZ_SECONDS:-60}}
target=${2:-rx_fuzz}
case $target in
    rx_fuzz) seeds=$here/corpus ;;
    ring_fuzz) seeds=$here/ring_corpus ;;
    *) echo "run_fuzz: unknown target '$target' (rx_fuzz, ring_fuzz)" >&2; exit 1 ;;
esac
clangxx=${CLANGXX:-clang++}
jobs=${SRCNIC_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}

if [ -z "${top_builddir:-}" ] || [ ! -f "$top_builddir/config.h" ]; then
    echo "run_fuzz: set top_builddir to a configured build tree (it provides config.h)," \
         "or run 'make check TESTS=fuzz/rx_fuzz.sh' in its tests directory" >&2
    exit 1
fi
case $seconds in
    '' | *[!0-9]*) echo "run_fuzz: SECONDS must be a whole number, not '$seconds'" >&2; exit 1 ;;
esac

work=$top_builddir/tests/fuzz/work
mkdir -p "$work/obj" "$work/corpus-$target"

# Skip (77) where clang++ cannot link a libFuzzer binary with the sanitizers.
probe=$work/probe
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char *, unsigned long) { return 0; }\n' \
    >"$probe.cc"
if ! command -v "$clangxx" >/dev/null ||
   ! "$clangxx" -fsanitize=fuzzer,address,undefined "$probe.cc" -o "$probe" >"$probe.log" 2>&1; then
    echo "run_fuzz: SKIP: $clangxx cannot build with -fsanitize=fuzzer,address,undefined" \
         "(Debian: apt-get install clang)" >&2
    sed 's/^/  /' "$probe.log" >&2 2>/dev/null || true
    exit 77
fi

# The engine's sources: every *_sources list of src/Makefile.am.
mapfile -t sources < <(awk '
    /^[a-z_]+_sources[ \t]*=/ { in_list = 1 }
    in_list { for (i = 1; i <= NF; ++i) if ($i ~ /\.cc$/) print $i; if ($NF != "\\") in_list = 0 }
' "$top_srcdir/src/Makefile.am")
if [ "${#sources[@]}" -eq 0 ]; then
    echo "run_fuzz: found no engine sources in $top_srcdir/src/Makefile.am" >&2
    exit 1
fi

cxxflags=(-std=gnu++17 -O1 -g -fno-omit-frame-pointer -fno-sanitize-recover=undefined
          -Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers
          -I"$top_srcdir/include" -I"$top_srcdir/src" -I"$top_builddir")
bin=$work/$target
objs=$work/obj
# One build at a time: both targets run at once under make -j check and share the objects.
exec 9>"$work/build.lock"
flock 9
# The engine's objects are shared by the targets: rebuilt when a source is newer than them.
stamp=$objs/.built
if [ ! -f "$stamp" ] || [ -n "$(find "$top_srcdir/src" "$top_srcdir/include" "$top_builddir/config.h" \
                                -newer "$stamp" -print -quit)" ]; then
    rm -f "$stamp" "$work"/rx_fuzz "$work"/ring_fuzz
fi
if [ ! -x "$bin" ] || [ -n "$(find "$top_srcdir/src" "$top_srcdir/include" "$here/$target.cc" \
                              "$top_builddir/config.h" -newer "$bin" -print -quit)" ]; then
    echo "run_fuzz: building $bin (${#sources[@]} engine sources, $clangxx)"
    rm -f "$bin"
    if [ ! -f "$stamp" ]; then
        rm -f "$objs"/*.o
        printf '"%s"\n' "${cxxflags[@]}" -fsanitize=fuzzer-no-link,address,undefined >"$work/cxxflags.rsp"
        export clangxx top_srcdir work
        if ! printf '%s\n' "${sources[@]}" | xargs -P "$jobs" -I{} sh -c '
                exec "$clangxx" @"$work/cxxflags.rsp" -c "$top_srcdir/src/$1" \
                    -o "$work/obj/$(echo "$1" | tr / _).o"' sh {}; then
            echo "run_fuzz: FAIL: compiling the engine with $clangxx failed" >&2
            exit 1
        fi
        touch "$stamp"
    fi
    if ! "$clangxx" "${cxxflags[@]}" -fsanitize=fuzzer,address,undefined "$here/$target.cc" \
            "$work"/obj/*.o -lpthread -o "$bin"; then
        echo "run_fuzz: FAIL: building the fuzzer failed" >&2
        exit 1
    fi
fi

flock -u 9
echo "run_fuzz: running $target for ${seconds} s (corpus $work/corpus-$target, seeds $seeds)"
status=0
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:quarantine_size_mb=64} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
"$bin" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 -artifact_prefix="$work/" \
    "$work/corpus-$target" "$seeds" >"$work/fuzz-$target.log" 2>&1 || status=$?

# The start, the last coverage line and the final statistics; everything on failure.
if [ "$status" -ne 0 ]; then
    cat "$work/fuzz-$target.log"
    echo "run_fuzz: FAIL: the fuzzer found a problem (exit $status); reproducer in $work/" >&2
    exit 1
fi
grep -E '^INFO: Seed|INITED' "$work/fuzz-$target.log" || true
grep -E '^#[0-9]+' "$work/fuzz-$target.log" | tail -n 1 || true
grep -E '^(Done|stat::)' "$work/fuzz-$target.log" || true
echo "run_fuzz: PASS"
