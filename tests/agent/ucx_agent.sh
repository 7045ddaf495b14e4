#!/bin/sh
# UCX and Open MPI on the node agent: the UCT suite (tests/uct), ucx_perftest at the UCT and UCP
# levels (tests/uct/perftest.sh), UCP's client/server flow (tests/ucp/client_server.sh) and
# mpi_check with 2, 4 and 8 ranks, every process attached
# to one srcd (UCX_SRC_MODE=agent) on a socket of this test's own. Checks that the processes
# really attached (the agent counts them) and that the agent held one connection to itself and
# its mirror, however many processes talked.
. "$top_srcdir/tests/common.sh"

srcd="$top_builddir/src/srcd"
srcctl="$top_builddir/src/srcctl"
srcrun="$top_builddir/contrib/srcrun"
scratch=$(mktemp -d)
sock="@srcd-check-$$"
stop_agent() {
    if [ -s "$scratch/pid" ]; then kill "$(cat "$scratch/pid")" 2>/dev/null || true; fi
}
trap 'stop_agent; rm -rf "$scratch"' EXIT

"$srcd" -a 127.0.0.1 -s "$sock" --pid-file "$scratch/pid" -l info --log-file "$scratch/srcd.log" ||
    { cat "$scratch/srcd.log"; fail "srcd did not start"; }
export UCX_SRC_MODE=agent UCX_SRC_AGENT_SOCKET="$sock"

attaches() { "$srcctl" -s "$sock" --json | sed -n 's/.*"attaches":\([0-9]*\).*/\1/p'; }

# A bad engine setting is reported on the agent too, though only an embedded engine uses it.
err=$(LD_PRELOAD=$(module_preload) UCX_SRC_PEER_SOCKETS=65 run_bounded 60 ucx_info -d 2>&1 || true)
echo "$err" | grep -q "peer_sockets=65" || { echo "$err"; fail "PEER_SOCKETS above 64 not reported on the agent"; }

# The UCT suite, every iface on the agent (tests whose premise is a quiet, embedded engine skip
# themselves and say why).
before=$(attaches)
run_bounded 900 "$top_builddir/tests/uct/uct_tests" >"$scratch/uct.txt" 2>&1 ||
    { grep -E 'Failure|FAILED' -A5 "$scratch/uct.txt" | head -n 80; fail "UCT suite on the agent failed"; }
grep -E '^\[  (PASSED|SKIPPED) ' "$scratch/uct.txt"
[ "$(attaches)" -gt "$before" ] || fail "the UCT suite did not attach to the agent"

# ucx_perftest, every run on the agent.
before=$(attaches)
run_bounded 900 sh "$top_srcdir/tests/uct/perftest.sh" || fail "ucx_perftest on the agent failed"
[ "$(attaches)" -gt "$before" ] || fail "ucx_perftest did not attach to the agent"

# UCP's client/server flow (by socket address), every process on the agent.
before=$(attaches)
SRC_CS_LOOPBACK_ONLY=1 run_bounded 300 sh "$top_srcdir/tests/ucp/client_server.sh" ||
    fail "UCP client/server on the agent failed"
[ "$(attaches)" -gt "$before" ] || fail "the UCP client/server programs did not attach to the agent"

# MPI jobs through srcrun --agent (which finds this agent answering and leaves it running).
if [ -n "${MPIRUN:-}" ] && [ -x "$top_builddir/tests/mpi/mpi_check" ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    mpi_oversubscribe
    for np in 2 4 8; do
        before=$(attaches)
        LD_PRELOAD=$(module_preload) UCX_TLS=src,self UCX_NET_DEVICES=lo \
            run_bounded 300 "$srcrun" --agent --srcd "$srcd" --module "$module" "$MPIRUN" -np $np \
            "$top_builddir/tests/mpi/mpi_check" >"$scratch/mpi.txt" 2>&1 ||
            { cat "$scratch/mpi.txt"; fail "MPI job of $np ranks on the agent failed"; }
        grep -q "mpi_check: $np ranks passed" "$scratch/mpi.txt" || { cat "$scratch/mpi.txt"; fail "mpi_check ($np ranks)"; }
        [ "$(($(attaches) - before))" -ge $np ] || fail "not all $np ranks attached to the agent"
        echo "mpi_check: $np ranks passed on the agent"
    done
fi

# One connection to itself and its mirror, shared by every process that talked.
"$srcctl" -s "$sock"
conns=$("$srcctl" -s "$sock" --json | sed -n 's/.*"connections":\([0-9]*\).*/\1/p')
[ "$conns" -le 2 ] || fail "the agent holds $conns connections for traffic among its own processes"
# The gets between processes of the agent (rendezvous, get_zcopy) were copied by the processes
# themselves, the agent checking each (UCX_SRC_AGENT_DIRECT_READ, on by default).
direct=$("$srcctl" -s "$sock" --json | sed -n 's/.*"DIRECT_READS":\([0-9]*\).*/\1/p')
[ "${direct:-0}" -gt 0 ] || fail "no READ between the agent's processes was copied by its requester"
echo "READs copied by their requesters: $direct"
echo "PASS: UCT suite, ucx_perftest, UCP client/server and MPI jobs on the node agent"
exit 0
