#!/bin/bash
# One OSU point-to-point test on loopback, every rank on a node agent that srcrun --agent
# starts (of build A, then of build B), beside build B embedded and UCX tcp, alternating rounds.
# Prints one line per run: the column of the test's figure at each size.
# usage: osu_ab.sh PROG SIZES     env: A B (build trees), NP (2), ROUNDS (5), DIR (pt2pt;
#        collective for osu_allreduce and the like)
PROG=${1:-osu_bw}; SIZES=${2:-8:65536}; NP=${NP:-2}; R=${ROUNDS:-5}
A=${A:-/tmp/base/_b}; B=${B:-/work/main/_build/release}
OSU=/root/.cache/osu-7.4/libexec/osu-micro-benchmarks/mpi/${DIR:-pt2pt}
OPTS="--oversubscribe --bind-to none --mca mpi_yield_when_idle 1"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
col() { awk '/^[0-9]/ {printf "%s ", $2} END {print ""}'; }
run_agent() { # build
  UCX_TLS=src,self UCX_NET_DEVICES=lo UCX_SRC_AGENT_SOCKET=@srcosu$$ timeout 300 \
    "$1/contrib/srcrun" --agent --srcd "$1/src/srcd" --module "$1/uct_src/.libs/libuct_src.so" \
    mpirun -np "$NP" $OPTS "$OSU/$PROG" -m "$SIZES" 2>&1 | col
}
run_emb() {
  UCX_SRC_MODE=embedded UCX_TLS=src,self UCX_NET_DEVICES=lo timeout 300 \
    "$B/contrib/srcrun" --module "$B/uct_src/.libs/libuct_src.so" \
    mpirun -np "$NP" $OPTS "$OSU/$PROG" -m "$SIZES" 2>&1 | col
}
run_tcp() {
  OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any UCX_TLS=tcp,self \
    UCX_NET_DEVICES=lo timeout 300 mpirun -np "$NP" $OPTS -x UCX_TLS -x UCX_NET_DEVICES \
    -x OMPI_MCA_pml -x OMPI_MCA_pml_ucx_tls -x OMPI_MCA_pml_ucx_devices "$OSU/$PROG" -m "$SIZES" 2>&1 | col
}
for r in $(seq 1 "$R"); do
  if [ $((r % 2)) = 1 ]; then a=$(run_agent "$A"); b=$(run_agent "$B"); e=$(run_emb); t=$(run_tcp)
  else t=$(run_tcp); e=$(run_emb); b=$(run_agent "$B"); a=$(run_agent "$A"); fi
  echo "$PROG np$NP round $r"; echo "  A-agent    $a"; echo "  B-agent    $b"
  echo "  B-embedded $e"; echo "  tcp        $t"
done
