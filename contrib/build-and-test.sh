#!/usr/bin/env bash
# Install what is needed, build srcucx in its release and sanitizer (ASan+UBSan)
# configurations, run 'make check' in both and 'make distcheck' once, and print one summary
# line "tests: N passed, N failed". Build trees go to $SRC_BUILD_DIR (default: _build/).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build_root=${SRC_BUILD_DIR:-$top/_build}
jobs=$(nproc 2>/dev/null || echo 2)

ucx_src=$("$top/contrib/install-deps.sh" | tail -n 1)
echo "UCX source tree: $ucx_src"
(cd "$top" && ./autogen.sh)

passed=0
failed=0
# tally BUILD_DIR: add the results of one make check, counting each gtest case.
tally() {
    local trs log n f
    for trs in $(find "$1/tests" -name '*.trs'); do
        log=${trs%.trs}.log
        n=$(sed -n 's/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran.*/\1/p' "$log" | tail -n 1)
        if [ -n "$n" ]; then
            f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$log" | tail -n 1)
            f=${f:-0}
            if grep -q '^:test-result: FAIL' "$trs" && [ "$f" -eq 0 ]; then f=1; fi
            passed=$((passed + n - f)); failed=$((failed + f))
        elif grep -q '^:test-result: \(PASS\|SKIP\|XFAIL\)' "$trs"; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1))
        fi
    done
}

# note_failures DIR: what failed in the test logs under DIR, briefly (gtest's failure messages and
# the names of the failed cases, or the end of a failed script's log). CI shows the end of the
# output; this goes last so that the cause is in it.
failures=""
note_failures() {
    local trs log
    for trs in $(find "$1" -name '*.trs' 2>/dev/null); do
        grep -q '^:test-result: \(FAIL\|ERROR\|XPASS\)' "$trs" || continue
        log=${trs%.trs}.log
        failures+="--- $log"$'\n'
        if grep -q '^\[==========\]' "$log"; then
            # (no match, as when a case crashed, or head closing the pipe is no error here)
            failures+=$(grep -A6 -E ': Failure$|^\[  FAILED  \] [^0-9]' "$log" | head -n 60 || true)$'\n'
        else
            failures+=$(tail -n 20 "$log" || true)$'\n'
        fi
    done
}

status=0
for flavour in release sanitize; do
    dir="$build_root/$flavour"
    opts=(--with-ucx-src="$ucx_src" --prefix="$dir/install")
    [ "$flavour" = sanitize ] && opts+=(--enable-sanitizers)
    echo "=== $flavour: configure ${opts[*]}"
    rm -rf "$dir" && mkdir -p "$dir"
    (cd "$dir" && "$top/configure" "${opts[@]}" >configure.log) || { tail -n 30 "$dir/configure.log"; exit 1; }
    echo "=== $flavour: make"
    make -C "$dir" -j"$jobs" >"$dir/make.log" 2>&1 || { tail -n 60 "$dir/make.log"; exit 1; }
    echo "=== $flavour: make check"
    if ! make -C "$dir" -j"$jobs" check 2>&1 | tee "$dir/check.log" | grep -E '^(PASS|FAIL|XPASS|ERROR|SKIP):|: (PASSED|FAILED) '; then
        :
    fi
    if grep -q '^# \(FAIL\|ERROR\|XPASS\): *[1-9]' "$dir/check.log" || ! grep -q '^# PASS:' "$dir/check.log"; then
        status=1
        [ -f "$dir/tests/test-suite.log" ] && cat "$dir/tests/test-suite.log"
        tail -n 30 "$dir/check.log"
        note_failures "$dir/tests"
    fi
    tally "$dir"
done

echo "=== release: make distcheck"
if make -C "$build_root/release" -j"$jobs" distcheck >"$build_root/release/distcheck.log" 2>&1; then
    passed=$((passed + 1))
    grep -A3 'archives ready for distribution' "$build_root/release/distcheck.log" || true
else
    failed=$((failed + 1)); status=1
    tail -n 60 "$build_root/release/distcheck.log"
    note_failures "$(echo "$build_root"/release/srcucx-*/)"
fi

if [ -n "$failures" ]; then
    echo "=== what failed"
    printf '%s' "$failures"
fi

echo "tests: $passed passed, $failed failed"
exit $status
