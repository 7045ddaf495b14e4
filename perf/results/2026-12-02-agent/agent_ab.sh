#!/bin/bash
# One OSU test with every rank on a node agent that srcrun --agent starts, of build A and of
# build B (build trees) in alternating rounds; one line per run: the figure at each size.
# usage: agent_ab.sh PROG SIZES     env: A B, NP (8), ROUNDS (5), DIR (collective)
PROG=$1; SIZES=$2; NP=${NP:-8}; R=${ROUNDS:-5}
OSU=/root/.cache/osu-7.4/libexec/osu-micro-benchmarks/mpi/${DIR:-collective}
OPTS="--oversubscribe --bind-to none --mca mpi_yield_when_idle 1"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
col() { awk '/^[0-9]/ {printf "%s ", $2} END {print ""}'; }
run_agent() {
  UCX_TLS=src,self UCX_NET_DEVICES=lo UCX_SRC_AGENT_SOCKET=@srcosu$$ timeout 300 \
    "$1/contrib/srcrun" --agent --srcd "$1/src/srcd" --module "$1/uct_src/.libs/libuct_src.so" \
    mpirun -np "$NP" $OPTS "$OSU/$PROG" -m "$SIZES" 2>&1 | col
}
for r in $(seq 1 "$R"); do
  if [ $((r % 2)) = 1 ]; then a=$(run_agent "$A"); b=$(run_agent "$B"); else b=$(run_agent "$B"); a=$(run_agent "$A"); fi
  echo "round $r A $a"; echo "round $r B $b"
done
