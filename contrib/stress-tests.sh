#!/usr/bin/env bash
# Hunts timing-dependent test failures before CI does: runs the gtest programs of a build tree
# over and over, two at a time (as 'make -j2 check' does) beside CPU hogs, and reports every
# case that failed and how often. Bounded: each program stops after its repeat count or its
# share of the time limit, whichever comes first, and the hogs stop with it.
#
#   contrib/stress-tests.sh BUILDDIR [--minutes M] [--hogs N] [--seed S]
#
# BUILDDIR is a configured and built tree (e.g. _build/sanitize after contrib/build-and-test.sh;
# its test programs are built here if missing). --minutes bounds the whole run (default 20),
# --hogs sets the busy loops beside the tests (default 1), --seed the order in which gtest
# shuffles the cases (default: from the clock; printed, so that a run can be repeated).
# Exits 1 if any case failed; the logs stay in BUILDDIR/stress/.
set -euo pipefail

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] || usage
build=$(cd "$1" && pwd) || usage
shift
minutes=20
hogs=1
seed=$(( $(date +%s) % 99999 + 1 ))
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) minutes=$2; shift 2 ;;
        --hogs) hogs=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        *) usage ;;
    esac
done
case "$minutes$hogs$seed" in *[!0-9]*) echo "stress-tests: --minutes, --hogs and --seed take whole numbers" >&2; exit 2 ;; esac
[ "$minutes" -ge 1 ] || { echo "stress-tests: --minutes must be at least 1" >&2; exit 2; }

# Two streams of PROGRAM:REPEATS:WEIGHT. A program gets the weight's share of its stream's
# time, by how long one run takes (link_tests is the longest: its peer-failure cases wait for
# real timeouts; uct_tests next). Repeat counts are upper bounds; the time usually ends a
# program first.
stream_a=(uct/uct_tests:40:3 protocol/protocol_tests:200:1)
stream_b=(link/link_tests:12:3 unit/unit_tests:200:1)

programs=()
for entry in "${stream_a[@]}" "${stream_b[@]}"; do
    programs+=("${entry%%:*}")
done
make -C "$build/tests" "${programs[@]}" >/dev/null

out=$build/stress
rm -rf "$out" && mkdir -p "$out"
limit=$((minutes * 60))
echo "stress-tests: $build, $minutes min, $hogs hog(s), gtest shuffle seed $seed; logs in $out"

hog_pids=()
cleanup() {
    for pid in "${hog_pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT INT TERM
for ((i = 0; i < hogs; i++)); do
    timeout "$limit" sh -c 'while :; do :; done' &
    hog_pids+=($!)
done

# run_stream ENTRY...: each program in turn, each given its weight's share of the time limit.
run_stream() {
    local total=0 entry prog reps share log rc
    for entry in "$@"; do
        total=$((total + ${entry##*:}))
    done
    for entry in "$@"; do
        prog=${entry%%:*}
        reps=${entry#*:}
        reps=${reps%%:*}
        share=$((limit * ${entry##*:} / total))
        log=$out/$(basename "$prog").log
        rc=0
        (cd "$build/tests" && timeout -s INT "$share" "./$prog" --gtest_repeat="$reps" \
            --gtest_shuffle --gtest_random_seed="$seed" >"$log" 2>&1) || rc=$?
        echo "$rc" >"$log.rc"   # 0, 1 (cases failed), 124 (time share used up), or a crash
    done
}
run_stream "${stream_a[@]}" &
pid_a=$!
run_stream "${stream_b[@]}" &
pid_b=$!
wait "$pid_a" "$pid_b"

status=0
for prog in "${programs[@]}"; do
    log=$out/$(basename "$prog").log
    runs=$(grep -c '^\[==========\] .* ran\.' "$log" || true)
    failed=$(grep -c '^\[  FAILED  \] [0-9]* tests\{0,1\}, listed below' "$log" || true)
    echo "$prog: $runs complete runs, $failed with failures"
    [ "$runs" -ne 0 ] || echo "  no complete run: give it more --minutes"
    if [ "$failed" -ne 0 ]; then
        status=1
        grep '^\[  FAILED  \] [A-Za-z].*(' "$log" | sed 's/ (.*//' | sort | uniq -c
    fi
    rc=$(cat "$log.rc")
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ] && [ "$rc" -ne 124 ]; then
        status=1
        echo "  stopped with exit status $rc (a crash or an abort): see the end of $log"
    fi
    if grep -q 'ERROR: \(Address\|Undefined\|Leak\)Sanitizer\|runtime error:' "$log"; then
        status=1
        echo "  sanitizer report in $log"
    fi
done
exit $status
