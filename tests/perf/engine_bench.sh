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
# The informative rows against the floor that also computes and checks a CRC-32C per datagram
# (a datagram whose CRC did not match would have stopped its stream with an ERROR): a figure
# on both sides and a ratio for SEND and WRITE at both sizes.
crc_rows=$(grep -Ec '^bandwidth (SEND|WRITE) [0-9]+ [KM]iB /crc +GB/s +[0-9.]+ +[0-9.]+ +[0-9.]+ ' "$out" || true)
[ "$crc_rows" -eq 4 ] || { cat "$out"; fail "expected 4 rows against the CRC floor, got $crc_rows"; }
grep -q '"window": [1-9]' "$out.json" || { cat "$out.json"; fail "the JSON gives no window of packets"; }

# The floor under loss: a window of 128 datagrams of 65000 bytes overruns receive buffers of
# 256 KiB (at most 512 KiB granted), so datagrams are dropped and the next ones land in slots
# meant for others, some shorter (a 1 MiB message's last datagram): the stream still completes
# and counts what it lost. It once failed here, under load, with "datagram N arrived wrong".
if ! run_bounded 120 "$bench" --tests bw --bw-sizes 1M --side udp --sock-buf 262144 \
        --window 128 --seconds 0.4 --stream-blocks 1 >"$out" 2>&1; then
    cat "$out"
    fail "the floor's stream failed under loss"
fi
grep -q 'ERROR: ' "$out" && { cat "$out"; fail "the floor's stream did not complete under loss"; }
grep -Eq 'udp +bandwidth SEND 1 MiB .* lost=[1-9]' "$out" ||
    { cat "$out"; fail "the floor lost nothing: this check did not test what it is for"; }
echo "PASS: srcnic_bench ran every test on both sides ($rows rows compared, $crc_rows against the CRC floor); the floor completes under loss"
