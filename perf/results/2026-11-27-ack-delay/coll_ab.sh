#!/bin/bash
# Alternating rounds of one OSU program on loopback: src embedded with the base module, with the
# new one, and UCX tcp (the order reversed every other round).
# usage: coll_ab.sh PROG SIZE    env: NP (4), ROUNDS (3), SUB (collective | pt2pt),
#        ITERS (2000) WARM (200), YIELD=1 (--mca mpi_yield_when_idle 1), BASE (build dir)
PROG=${1:-osu_alltoall}; SIZE=${2:-8}; NP=${NP:-4}; ROUNDS=${ROUNDS:-3}
B=/work/main/_build/release
BASE=${BASE:-/tmp/wt-base/_b}
OSU=/root/.cache/osu-7.4/libexec/osu-micro-benchmarks/mpi/${SUB:-collective}
OPTS="--oversubscribe --bind-to none${YIELD:+ --mca mpi_yield_when_idle 1}"
ARGS="-m $SIZE:$SIZE -i ${ITERS:-2000} -x ${WARM:-200}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run_src() {
  UCX_TLS=src,self UCX_SRC_MODE=${MODE:-embedded} UCX_NET_DEVICES=lo timeout 120 $B/contrib/srcrun --module $1 mpirun -np $NP $OPTS $OSU/$PROG $ARGS 2>&1 | awk '/^[0-9]/ {print $2}'
}
run_tcp() {
  OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any UCX_TLS=tcp,self UCX_NET_DEVICES=lo timeout 120 mpirun -np $NP $OPTS -x UCX_TLS -x UCX_NET_DEVICES $OSU/$PROG $ARGS 2>&1 | awk '/^[0-9]/ {print $2}'
}
for r in $(seq 1 $ROUNDS); do
  if [ $((r % 2)) = 1 ]; then a=$(run_src $BASE/uct_src/.libs/libuct_src.so); b=$(run_src $B/uct_src/.libs/libuct_src.so); t=$(run_tcp)
  else t=$(run_tcp); b=$(run_src $B/uct_src/.libs/libuct_src.so); a=$(run_src $BASE/uct_src/.libs/libuct_src.so); fi
  echo "$PROG $SIZE np$NP round $r: base $a new $b tcp $t"
done
