#!/bin/bash
# ab.sh PROG ROUNDS NP label=BUILD|tcp ...: whole-curve OSU launches (-c) across two namespace
# nodes, one launch per label per round, the order reversed every other round. NP 2 puts one
# rank on each node, NP 4 two; OSUARGS (e.g. "-m 4096:262144") go to the program.
# Prints "round R label: size=value ...".
PROG=$1; ROUNDS=$2; NP=$3; shift 3
export SRCBED_PREFIX=srcab OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
top=$(cd "$(dirname "$0")/../../.." && pwd)
TB=$top/contrib/netns-testbed.sh
OSU=${OSU:-/root/.cache/osu-7.4/libexec/osu-micro-benchmarks/mpi/pt2pt}
HOSTS=n1:$((NP / 2)),n2:$((NP / 2))
$TB up 2 >/dev/null; trap '$TB down >/dev/null 2>&1' EXIT
run() {
  local b=$1
  if [ "$b" = tcp ]; then
    OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any UCX_TLS=tcp,self UCX_NET_DEVICES=veth0 timeout 600 $TB mpi mpirun -np $NP --host $HOSTS --oversubscribe --bind-to none -x UCX_TLS -x UCX_NET_DEVICES $OSU/$PROG -c ${OSUARGS:-}
  else
    UCX_TLS=src,self UCX_SRC_MODE=embedded UCX_NET_DEVICES=veth0 timeout 600 $TB mpi $b/contrib/srcrun --module $b/uct_src/.libs/libuct_src.so mpirun -np $NP --host $HOSTS --oversubscribe --bind-to none $OSU/$PROG -c ${OSUARGS:-}
  fi 2>&1 | awk '/^[0-9]/ {printf "%s=%s ", $1, $2} /[Ff]ail/ {printf "VALIDATION:%s ", $0}'
}
for r in $(seq 1 $ROUNDS); do
  specs=("$@"); if [ $((r % 2)) = 0 ]; then specs=($(printf '%s\n' "$@" | tac)); fi
  for s in "${specs[@]}"; do echo "round $r ${s%%=*}: $(run "${s#*=}")"; done
done
