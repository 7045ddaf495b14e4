#!/bin/bash
# usage: ab3.sh PROG SIZE NP ROUNDS label=builddir[:ENV=VAL] ...   (env: SUB=pt2pt|collective, ITERS, WARM, BIND=none|core)
PROG=$1; SIZE=$2; NP=$3; ROUNDS=$4; shift 4
OSU=/root/.cache/osu-7.4/libexec/osu-micro-benchmarks/mpi/${SUB:-collective}
OPTS="--oversubscribe --bind-to ${BIND:-none}"
ARGS="-m $SIZE:$SIZE -i ${ITERS:-2000} -x ${WARM:-200}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {
  local spec=$1 b=${1#*=}; local env=""
  case $b in *:*) env=${b#*:}; b=${b%%:*};; esac
  if [ "$b" = tcp ]; then
    OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any UCX_TLS=tcp,self UCX_NET_DEVICES=lo timeout 120 mpirun -np $NP $OPTS -x UCX_TLS -x UCX_NET_DEVICES $OSU/$PROG $ARGS 2>&1 | awk '/^[0-9]/ {print $2}'
  else
    env $env UCX_TLS=src,self UCX_SRC_MODE=embedded UCX_NET_DEVICES=lo timeout 120 $b/contrib/srcrun --module $b/uct_src/.libs/libuct_src.so mpirun -np $NP $OPTS $OSU/$PROG $ARGS 2>&1 | awk '/^[0-9]/ {print $2}'
  fi
}
for r in $(seq 1 $ROUNDS); do
  line="$PROG $SIZE np$NP round $r:"
  specs=("$@"); if [ $((r % 2)) = 0 ]; then specs=($(printf '%s\n' "$@" | tac)); fi
  declare -A res
  for s in "${specs[@]}"; do res[${s%%=*}]=$(run "$s"); done
  for s in "$@"; do line="$line ${s%%=*} ${res[${s%%=*}]}"; done
  echo "$line"
done
