#!/bin/bash
# 2 namespace nodes, 4 ranks (2 per node): OSU collective, src base / new module embedded, UCX tcp
# env: ROUNDS (3), BASE (the base build dir), PS (UCX_SRC_PEER_SOCKETS, default 4)
PROG=${1:-osu_alltoall}; SIZE=${2:-8}; ROUNDS=${ROUNDS:-3}
export SRCBED_PREFIX=srclz
TB=/work/main/contrib/netns-testbed.sh
OSU=/root/.cache/osu-7.4/libexec/osu-micro-benchmarks/mpi/collective
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
$TB up 2 >/dev/null
trap '$TB down >/dev/null 2>&1' EXIT
run_src() { # $1 build dir
  UCX_TLS=src,self UCX_SRC_MODE=embedded UCX_SRC_PEER_SOCKETS=${PS:-4} UCX_NET_DEVICES=veth0 timeout 180 $TB mpi $1/contrib/srcrun --module $1/uct_src/.libs/libuct_src.so mpirun -np 4 --host n1:2,n2:2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 $OSU/$PROG -m $SIZE:$SIZE -i 2000 -x 200 2>&1 | awk '/^[0-9]/ {print $2}'
}
run_tcp() {
  OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any UCX_TLS=tcp,self UCX_NET_DEVICES=veth0 timeout 180 $TB mpi mpirun -np 4 --host n1:2,n2:2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 -x UCX_TLS -x UCX_NET_DEVICES $OSU/$PROG -m $SIZE:$SIZE -i 2000 -x 200 2>&1 | awk '/^[0-9]/ {print $2}'
}
for r in $(seq 1 $ROUNDS); do
  if [ $((r % 2)) = 1 ]; then a=$(run_src ${BASE:-/tmp/wt-base/_b}); b=$(run_src /work/main/_build/release); t=$(run_tcp)
  else t=$(run_tcp); b=$(run_src /work/main/_build/release); a=$(run_src ${BASE:-/tmp/wt-base/_b}); fi
  echo "2nodes $PROG $SIZE np4 round $r: base $a new $b tcp $t"
done
