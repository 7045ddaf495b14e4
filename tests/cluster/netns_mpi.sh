#!/bin/sh
# Two namespace "nodes" (contrib/netns-testbed.sh): an Open MPI job of 4 ranks, 2 per node, over
# UCX_TLS=src,self through srcrun, on the nodes' veth devices (198.51.100.0/24, inside the
# namespaces only). Checks the job passes, that its ranks ran on both nodes, and that each
# engine holds one connection per remote process and none more. Skips (77) without root or
# 'ip netns'.
. "$top_srcdir/tests/common.sh"

need_netns
own_testbed srcchk

srcrun="$top_builddir/contrib/srcrun"
prog="$top_builddir/tests/mpi/mpi_check"

run_bounded 60 "$testbed" up 2 >"$scratch/up.txt" 2>&1 || { cat "$scratch/up.txt"; fail "test bed did not come up"; }

# The probe records the engines the module creates and prints their state when they go.
cc_probe() {
    $CC -shared -fPIC -I"$top_srcdir/include" -o "$scratch/libsrc_probe.so" \
        "$top_srcdir/perf/src_probe.c" -ldl
}
cc_probe || fail "cannot build perf/src_probe.c"

# The probe goes right before the module (after the sanitizer runtimes, which must come first).
preload=$(module_preload)
preload="${preload%"$module"}$scratch/libsrc_probe.so:$module"
LD_PRELOAD="$preload" SRC_PROBE_REPORT=1 \
    UCX_TLS=src,self UCX_NET_DEVICES=veth0 \
    run_bounded 300 "$testbed" mpi "$srcrun" --module "$module" mpirun --host n1:2,n2:2 \
    --bind-to none -x SRC_PROBE_REPORT --mca pml_base_verbose 10 \
    sh -c 'echo "rank-host $(hostname)"; exec "$0"' "$prog" >"$scratch/out.txt" 2>&1 ||
    { cat "$scratch/out.txt"; fail "MPI job across two namespace nodes failed"; }
out="$scratch/out.txt"
grep -q "mpi_check: 4 ranks passed" "$out" || { cat "$out"; fail "mpi_check did not pass"; }
grep -q "selected ucx" "$out" || { cat "$out"; fail "pml/ucx was not selected"; }
[ "$(grep -c '^rank-host n1$' "$out")" -eq 2 ] && [ "$(grep -c '^rank-host n2$' "$out")" -eq 2 ] ||
    { cat "$out"; fail "ranks did not run 2 per node on n1 and n2"; }

# Connections are shared: an engine holds at most one connection per engine it talks to (the
# 3 other ranks' and its own, which UCP reaches through src for its loopback lanes), however
# many endpoints and lanes use them. In embedded mode each process has its own engine, so a
# node pair carries one connection per pair of processes; one per node pair needs the agent.
# Each report is one write, but the launcher may still glue two ranks' output together: take
# the records wherever they stand.
grep -o "src_probe: pid [0-9]* engine connections [0-9]*" "$out" >"$scratch/probe.txt" || true
engines=$(awk '$6 > 0' "$scratch/probe.txt" | wc -l)
[ "$engines" -ge 4 ] || { cat "$out"; fail "expected the state of 4 engines, got $engines"; }
worst=$(awk '{ if ($6 > m) m = $6 } END { print m + 0 }' "$scratch/probe.txt")
[ "$worst" -le 4 ] || { cat "$scratch/probe.txt"; fail "an engine holds $worst connections to 4 engines"; }
echo "PASS: 4 ranks on two namespace nodes over src; at most $worst connections per engine"
