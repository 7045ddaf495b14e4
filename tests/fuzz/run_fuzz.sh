#!/usr/bin/env bash
# Builds the receive-path fuzzer (rx_fuzz.cc and the engine sources, clang libFuzzer with ASan
# and UBSan) and runs it for a bounded time from the committed seed corpus.
#
# Usage: run_fuzz.sh [SECONDS]      SECONDS defaults to $SRCNIC_FUZZ_SECONDS, else 60.
# Environment: top_srcdir (default: two levels above this script), top_builddir (the configured
#   build tree, for config.h; make check sets both), CLANGXX (default clang++), SRCNIC_FUZZ_JOBS
#   (parallel compiles, default nproc).
# Work directory: $top_builddir/tests/fuzz/work (objects, binary, growing corpus, crash inputs,
#   fuzz.log). The binary is rebuilt only when a source is newer than it.
# Exit status: 0 no finding; 1 a crash, leak, timeout or build failure (the reproducer is
#   work/crash-* etc.; replay: work/rx_fuzz FILE); 77 clang++ cannot build libFuzzer targets.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$(cd "$here/../.." && pwd)}
seconds=${1:-${SRCNIC_FUZZ_SECONDS:-60}}
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
mkdir -p "$work/obj" "$work/corpus"

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
bin=$work/rx_fuzz
if [ ! -x "$bin" ] || [ -n "$(find "$top_srcdir/src" "$top_srcdir/include" "$here/rx_fuzz.cc" \
                              "$top_builddir/config.h" -newer "$bin" -print -quit)" ]; then
    echo "run_fuzz: building $bin (${#sources[@]} engine sources, $clangxx)"
    rm -f "$bin" "$work"/obj/*.o
    printf '"%s"\n' "${cxxflags[@]}" -fsanitize=fuzzer-no-link,address,undefined >"$work/cxxflags.rsp"
    export clangxx top_srcdir work
    if ! printf '%s\n' "${sources[@]}" | xargs -P "$jobs" -I{} sh -c '
            exec "$clangxx" @"$work/cxxflags.rsp" -c "$top_srcdir/src/$1" \
                -o "$work/obj/$(echo "$1" | tr / _).o"' sh {}; then
        echo "run_fuzz: FAIL: compiling the engine with $clangxx failed" >&2
        exit 1
    fi
    if ! "$clangxx" "${cxxflags[@]}" -fsanitize=fuzzer,address,undefined "$here/rx_fuzz.cc" \
            "$work"/obj/*.o -lpthread -o "$bin"; then
        echo "run_fuzz: FAIL: building the fuzzer failed" >&2
        exit 1
    fi
fi

echo "run_fuzz: fuzzing the receive path for ${seconds} s (corpus $work/corpus," \
     "seeds $here/corpus)"
status=0
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:quarantine_size_mb=64} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
"$bin" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 -artifact_prefix="$work/" \
    "$work/corpus" "$here/corpus" >"$work/fuzz.log" 2>&1 || status=$?

# The start, the last coverage line and the final statistics; everything on failure.
if [ "$status" -ne 0 ]; then
    cat "$work/fuzz.log"
    echo "run_fuzz: FAIL: the fuzzer found a problem (exit $status); reproducer in $work/" >&2
    exit 1
fi
grep -E '^INFO: Seed|INITED' "$work/fuzz.log" || true
grep -E '^#[0-9]+' "$work/fuzz.log" | tail -n 1 || true
grep -E '^(Done|stat::)' "$work/fuzz.log" || true
echo "run_fuzz: PASS"
