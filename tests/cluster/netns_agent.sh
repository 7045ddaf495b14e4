#!/bin/sh
# Four namespace "nodes" (contrib/netns-testbed.sh), each with its own node agent: an Open MPI
# job of 16 ranks, 4 per node, over UCX_TLS=src,self with every rank attached to its node's
# agent. Checks the job passes, that every rank attached, and, from srcctl --json on every node,
# that each node holds exactly one connection to each other node however many ranks talked
# (SRC's connection sharing: 3 per node, where embedded engines hold one per pair of ranks).
# Then the same job with agents whose budget is one connection: the rest goes over DC.
# Skips (77) without root or 'ip netns'.
. "$top_srcdir/tests/common.sh"

need_netns
own_testbed srcagt

srcrun="$top_builddir/contrib/srcrun"
srcd="$top_builddir/src/srcd"
srcctl="$top_builddir/src/srcctl"
prog="$top_builddir/tests/mpi/mpi_check"
nodes=4
per_node=4

run_bounded 60 "$testbed" up $nodes >"$scratch/up.txt" 2>&1 || { cat "$scratch/up.txt"; fail "test bed did not come up"; }
run_bounded 60 "$testbed" agents "$srcd" -l info --log-file "$scratch/srcd.log" ||
    { cat "$scratch/srcd.log"; fail "the node agents did not start"; }

hosts=$(seq 1 $nodes | sed "s/.*/n&:$per_node/" | paste -sd, -)
np=$((nodes * per_node))
# job OUT LOG WHAT: the MPI job on the nodes' agents, which must pass.
job() {
    LD_PRELOAD=$(module_preload) UCX_TLS=src,self UCX_NET_DEVICES=veth0 UCX_SRC_MODE=agent \
        run_bounded 600 "$testbed" mpi "$srcrun" --module "$module" mpirun --host "$hosts" \
        --bind-to none "$prog" >"$1" 2>&1 ||
        { cat "$1"; tail -n 40 "$2"; fail "MPI job of $np ranks on $nodes nodes' agents failed ($3)"; }
    grep -q "mpi_check: $np ranks passed" "$1" || { cat "$1"; fail "mpi_check did not pass ($3)"; }
}
job "$scratch/out.txt" "$scratch/srcd.log" "a connection per node pair"

# Per node: the agent's connections on veth0 to other nodes (its connection to itself and its
# mirror carry the ranks of the node among themselves).
total=0
for i in $(seq 1 $nodes); do
    "$testbed" exec n$i "$srcctl" --json >"$scratch/n$i.json" || fail "srcctl on n$i"
    "$testbed" exec n$i "$srcctl" | sed "s/^/n$i: /"
    attaches=$(sed -n 's/.*"attaches":\([0-9]*\).*/\1/p' "$scratch/n$i.json")
    [ "$attaches" -ge $per_node ] || fail "n$i: $attaches processes attached to its agent, expected $per_node or more"
    grep -o '"peer":"198\.51\.100\.[0-9]*:[0-9]*"' "$scratch/n$i.json" | sort >"$scratch/n$i.peers"
    remote=$(grep -vc "\"198\.51\.100\.$i:" "$scratch/n$i.peers" || true)
    distinct=$(grep -v "\"198\.51\.100\.$i:" "$scratch/n$i.peers" | sort -u | wc -l)
    [ "$remote" -eq $((nodes - 1)) ] && [ "$distinct" -eq $((nodes - 1)) ] ||
        { cat "$scratch/n$i.json"; fail "n$i holds $remote connections to other nodes ($distinct distinct), expected $((nodes - 1))"; }
    total=$((total + remote))
done
echo "PASS: $np ranks on $nodes nodes' agents; $((nodes - 1)) connections per node to the other nodes ($total in all, one per node pair and direction)"

# The same job with a budget of one connection per node agent: the other nodes are served over
# DC streams (PROTOCOL.md §8), the per-node budget of agent mode.
"$testbed" agents-stop >/dev/null 2>&1 || true
run_bounded 60 "$testbed" agents "$srcd" -l info --log-file "$scratch/srcd-dc.log" --max-connections 1 ||
    { cat "$scratch/srcd-dc.log"; fail "the node agents did not start with --max-connections 1"; }
job "$scratch/out-dc.txt" "$scratch/srcd-dc.log" "over DC beyond a budget of 1"
streams=0
for i in $(seq 1 $nodes); do
    "$testbed" exec n$i "$srcctl" --json >"$scratch/n$i-dc.json" || fail "srcctl on n$i"
    conns=$(grep -o '"kind":"connection","stream":0,"peer":"198\.51\.100\.[0-9]*:' "$scratch/n$i-dc.json" |
            grep -vc "198\.51\.100\.$i:" || true)
    [ "$conns" -le 1 ] || { cat "$scratch/n$i-dc.json"; fail "n$i holds $conns connections to other nodes, budget 1"; }
    s=$(sed -n 's/.*"DC_STREAMS":\([0-9]*\).*/\1/p' "$scratch/n$i-dc.json")
    streams=$((streams + ${s:-0}))
done
[ "$streams" -gt 0 ] || fail "no DC stream was started beyond a budget of 1"
echo "PASS: $np ranks on $nodes nodes' agents with one connection each; $streams DC streams"
exit 0
