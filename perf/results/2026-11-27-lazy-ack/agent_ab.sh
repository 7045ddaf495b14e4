#!/bin/bash
# Alternating rounds of one OSU collective on loopback with every rank on a node agent that
# srcrun --agent starts (base build, new build), and UCX tcp; idle ranks yield for all three.
# usage: agent_ab.sh PROG SIZE    env: NP (8), ROUNDS (3), ITERS (1000), WARM (100),
#        NOBASE=1 (new build and tcp only), BASE (build dir)
PROG=${1:-osu_allreduce}; SIZE=${2:-65536}; NP=${NP:-8}; ROUNDS=${ROUNDS:-3}
BASE=${BASE:-/tmp/wt-base/_b}; NEW=/work/main/_build/release
OSU=/root/.cache/osu-7.4/libexec/osu-micro-benchmarks/mpi/collective
OPTS="--oversubscribe --bind-to none --mca mpi_yield_when_idle 1"
ARGS="-m $SIZE:$SIZE -i ${ITERS:-1000} -x ${WARM:-100}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run_src() { # $1: build dir
  [ -n "${NOBASE:-}" ] && [ "$1" = "$BASE" ] && { echo -; return; }
  UCX_TLS=src,self UCX_NET_DEVICES=lo UCX_SRC_AGENT_SOCKET=@srcab$$ timeout 180 $1/contrib/srcrun --agent --srcd $1/src/srcd --module $1/uct_src/.libs/libuct_src.so mpirun -np $NP $OPTS $OSU/$PROG $ARGS 2>&1 | awk '/^[0-9]/ {print $2}'
}
run_tcp() {
  OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any UCX_TLS=tcp,self UCX_NET_DEVICES=lo timeout 180 mpirun -np $NP $OPTS -x UCX_TLS -x UCX_NET_DEVICES $OSU/$PROG $ARGS 2>&1 | awk '/^[0-9]/ {print $2}'
}
for r in $(seq 1 $ROUNDS); do
  if [ $((r % 2)) = 1 ]; then a=$(run_src $BASE); b=$(run_src $NEW); t=$(run_tcp)
  else t=$(run_tcp); b=$(run_src $NEW); a=$(run_src $BASE); fi
  echo "agent $PROG $SIZE np$NP round $r: base $a new $b tcp $t"
done
