#!/bin/bash
# One src-agent job of N ranks (mpi_bench --tests init) on 8 nodes of a namespace test bed, then
# each node agent's CPU time (clock ticks, /proc/PID/stat) and voluntary context switches.
# usage (root, from the top of the tree, release build in _build/release): agent-cpu.sh [N]
set -u
N=${1:-128}; per=$((N / 8))
export SRCBED_PREFIX=srcscale
top=$(pwd)
TB=$top/contrib/netns-testbed.sh
B=$top/_build/release
tmp=$(mktemp -d)
trap '"$TB" agents-stop; "$TB" down >/dev/null 2>&1; rm -rf "$tmp"' EXIT
mpicc -O2 -o "$tmp/mpi_bench" "$top/perf/mpi_bench.c" -ldl || exit 1
"$TB" up 8 >/dev/null
"$TB" agents-stop
"$TB" agents "$B/src/srcd" || exit 1
hosts=$(for i in 1 2 3 4 5 6 7 8; do printf "n%d:%d," "$i" "$per"; done); hosts=${hosts%,}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LD_PRELOAD=$B/uct_src/.libs/libuct_src.so
export UCX_TLS=src,self UCX_NET_DEVICES=veth0 UCX_SRC_MODE=agent UCX_SRC_AGENT_SOCKET=@srcd
t0=$(date +%s.%N)
timeout 900 "$TB" mpi "$B/contrib/srcrun" --module "$B/uct_src/.libs/libuct_src.so" mpirun -np "$N" \
    --host "$hosts" --bind-to none --oversubscribe --mca mpi_yield_when_idle 1 \
    "$tmp/mpi_bench" --json --tests init --sizes 8 > "$tmp/job.txt" 2>&1
echo "rc=$? wall=$(echo "$(date +%s.%N) - $t0" | bc)"
grep -o '"test": *"init_us"[^}]*' "$tmp/job.txt" | head -2
for f in /run/srcscale-n*.srcd; do
    pid=$(cat "$f"); read -r -a s < "/proc/$pid/stat"
    echo "$f utime=${s[13]} stime=${s[14]} vcsw=$(awk '/^voluntary_ctxt/ {print $2}' "/proc/$pid/status")"
done
