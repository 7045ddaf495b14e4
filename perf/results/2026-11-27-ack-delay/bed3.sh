#!/bin/bash
# bed3.sh PROG SIZE ROUNDS label=builddir[:VAR=VALUE] ... (tcp=tcp); env: SUB, HOSTS, NP, ITERS, WARM, BIND, YIELD=0, OSUFLAGS (e.g. -c)
PROG=$1; SIZE=$2; ROUNDS=$3; shift 3
export SRCBED_PREFIX=srclz OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TB=/work/main/contrib/netns-testbed.sh
OSU=/root/.cache/osu-7.4/libexec/osu-micro-benchmarks/mpi/${SUB:-collective}
$TB up 2 >/dev/null
trap '$TB down >/dev/null 2>&1' EXIT
HOSTS=${HOSTS:-n1:2,n2:2}; NP=${NP:-4}
YIELDOPT=" --mca mpi_yield_when_idle 1"; [ "${YIELD:-1}" = 0 ] && YIELDOPT=""
run() {
  local b=${1#*=}; local env=""; case $b in *:*) env=${b#*:}; b=${b%%:*};; esac
  if [ "$b" = tcp ]; then
    OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any UCX_TLS=tcp,self UCX_NET_DEVICES=veth0 timeout 180 $TB mpi mpirun -np $NP --host $HOSTS --oversubscribe ${BIND:---bind-to none}${YIELDOPT} -x UCX_TLS -x UCX_NET_DEVICES $OSU/$PROG ${OSUFLAGS:-} -m $SIZE:$SIZE -i ${ITERS:-2000} -x ${WARM:-200} 2>&1 | awk '/^[0-9]/ {print $2}'
  else
    env $env UCX_TLS=src,self UCX_SRC_MODE=embedded UCX_NET_DEVICES=veth0 timeout 180 $TB mpi $b/contrib/srcrun --module $b/uct_src/.libs/libuct_src.so mpirun -np $NP --host $HOSTS --oversubscribe ${BIND:---bind-to none}${YIELDOPT} $OSU/$PROG ${OSUFLAGS:-} -m $SIZE:$SIZE -i ${ITERS:-2000} -x ${WARM:-200} 2>&1 | awk '/^[0-9]/ {print $2}'
  fi
}
for r in $(seq 1 $ROUNDS); do
  specs=("$@"); if [ $((r % 2)) = 0 ]; then specs=($(printf '%s\n' "$@" | tac)); fi
  declare -A res
  for s in "${specs[@]}"; do res[${s%%=*}]=$(run "$s"); done
  line="2nodes $PROG $SIZE np$NP round $r:"
  for s in "$@"; do line="$line ${s%%=*} ${res[${s%%=*}]}"; done
  echo "$line"
done
