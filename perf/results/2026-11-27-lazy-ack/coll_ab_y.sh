#!/bin/bash
# alternating rounds: OSU collective (prog $1, size $2), 4 ranks loopback: src base module, src new module, UCX tcp
PROG=${1:-osu_alltoall}; SIZE=${2:-8}; NP=${NP:-4}; ROUNDS=${ROUNDS:-3}
B=/work/main/_build/release
OSU=/root/.cache/osu-7.4/libexec/osu-micro-benchmarks/mpi/collective
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run_src() {
  UCX_TLS=src,self UCX_SRC_MODE=${MODE:-embedded} UCX_NET_DEVICES=lo timeout 120 $B/contrib/srcrun --module $1 mpirun -np $NP --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 $OSU/$PROG -m $SIZE:$SIZE -i 2000 -x 200 2>&1 | awk '/^[0-9]/ {print $2}'
}
run_tcp() {
  OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any UCX_TLS=tcp,self UCX_NET_DEVICES=lo timeout 120 mpirun -np $NP --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 -x UCX_TLS -x UCX_NET_DEVICES $OSU/$PROG -m $SIZE:$SIZE -i 2000 -x 200 2>&1 | awk '/^[0-9]/ {print $2}'
}
for r in $(seq 1 $ROUNDS); do
  if [ $((r % 2)) = 1 ]; then a=$(run_src /tmp/wt-base/_b/uct_src/.libs/libuct_src.so); b=$(run_src $B/uct_src/.libs/libuct_src.so); t=$(run_tcp)
  else t=$(run_tcp); b=$(run_src $B/uct_src/.libs/libuct_src.so); a=$(run_src /tmp/wt-base/_b/uct_src/.libs/libuct_src.so); fi
  echo "$PROG $SIZE np$NP round $r: base $a new $b tcp $t"
done
