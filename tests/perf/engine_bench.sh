#!/bin/sh
# The engine micro-benchmark (perf/srcnic_bench) runs briefly and every test completes on both
# sides: the engine and the plain UDP floor it is compared with. Checks that the benchmark still
# works, not how fast anything is (speed belongs to perf/run-engine-bench.sh).
. "$top_srcdir/tests/common.sh"

bench="$top_builddir/perf/srcnic_bench"
[ -x "$bench" ] || fail "not built: $bench"
out=$(mktemp)
trap 'rm -f "$out" "$out.json"' EXIT

# Short blocks; both bandwidth sizes whose floor streams take the engine's window as credit.
if ! run_bounded 300 "$bench" --iters 400 --blocks 2 --warmup 100 --seconds 0.4 \
        --stream-blocks 2 --bw-sizes 64K,1M --json "$out.json" >"$out" 2>&1; then
    cat "$out"
    fail "srcnic_bench failed"
fi
# Every row of the summary has a figure on both sides: no test reported an error (a test that
# timed out reports "ERROR: timeout: ..."; counters such as timeouts=2 are not errors).
if grep -q 'ERROR: ' "$out"; then
    cat "$out"
    fail "a benchmark test did not complete"
fi
rows=$(grep -Ec '^(latency|msg rate|bandwidth) .* (met|missed)$' "$out" || true)
[ "$rows" -eq 7 ] || { cat "$out"; fail "expected 7 compared rows, got $rows"; }
grep -q '"window": [1-9]' "$out.json" || { cat "$out.json"; fail "the JSON gives no window of packets"; }
echo "PASS: srcnic_bench ran every test on both sides ($rows rows compared)"
