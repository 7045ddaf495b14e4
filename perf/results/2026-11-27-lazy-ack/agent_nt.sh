#!/bin/bash
PROG=${1:-osu_allreduce}; SIZE=${2:-65536}; NP=${NP:-8}; ROUNDS=${ROUNDS:-3}
OSU=/root/.cache/osu-7.4/libexec/osu-micro-benchmarks/mpi/collective
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run_src() { # $1 tree build dir
  UCX_TLS=src,self UCX_NET_DEVICES=lo UCX_SRC_AGENT_SOCKET=@srcab$$ timeout 180 $1/contrib/srcrun --agent --srcd $1/src/srcd --module $1/uct_src/.libs/libuct_src.so mpirun -np $NP --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 $OSU/$PROG -m $SIZE:$SIZE -i ${ITERS:-1000} -x ${WARM:-100} 2>&1 | awk '/^[0-9]/ {print $2}'
}
run_tcp() {
  OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any UCX_TLS=tcp,self UCX_NET_DEVICES=lo timeout 180 mpirun -np $NP --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 -x UCX_TLS -x UCX_NET_DEVICES $OSU/$PROG -m $SIZE:$SIZE -i ${ITERS:-1000} -x ${WARM:-100} 2>&1 | awk '/^[0-9]/ {print $2}'
}
for r in $(seq 1 $ROUNDS); do
  if [ $((r % 2)) = 1 ]; then b=$(run_src /work/main/_build/release); t=$(run_tcp)
  else t=$(run_tcp); b=$(run_src /work/main/_build/release); fi
  echo "agent $PROG $SIZE np$NP round $r: new $b tcp $t"
done
