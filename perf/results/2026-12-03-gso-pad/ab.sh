#!/bin/bash
# ab.sh PROG ROUNDS NP label=BUILD[:VAR=VAL,...]|tcp ...: whole-curve OSU launches (-c), one
# launch per label per round, the order reversed every other round. Across two namespace nodes
# (NP 2 puts one rank on each node, NP 4 two), or with PLACE=loopback all NP ranks on this host
# over lo. OSUARGS (e.g. "-m 4096:262144") go to the program; a build's VAR=VAL settings (e.g.
# UCX_SRC_SEG_SIZE=32832) go to every rank. Prints "round R label: size=value ...".
PROG=$1; ROUNDS=$2; NP=$3; shift 3
export SRCBED_PREFIX=srcab OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
top=$(cd "$(dirname "$0")/../../.." && pwd)
TB=$top/contrib/netns-testbed.sh
OSU=${OSU:-/root/.cache/osu-7.4/libexec/osu-micro-benchmarks/mpi/pt2pt}
if [ "${PLACE:-2nodes}" = loopback ]; then
  HOSTS=localhost:$NP DEV=lo IN=
else
  HOSTS=n1:$((NP / 2)),n2:$((NP / 2)) DEV=veth0 IN="$TB mpi"
  $TB up 2 >/dev/null; trap '$TB down >/dev/null 2>&1' EXIT
fi
run() {
  local b=${1%%:*} e=
  [ "$b" = "$1" ] || e=${1#*:}
  if [ "$b" = tcp ]; then
    OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any UCX_TLS=tcp,self UCX_NET_DEVICES=$DEV timeout 600 $IN mpirun -np $NP --host $HOSTS --oversubscribe --bind-to none -x UCX_TLS -x UCX_NET_DEVICES $OSU/$PROG -c ${OSUARGS:-}
  else
    env ${e//,/ } UCX_TLS=src,self UCX_SRC_MODE=embedded UCX_NET_DEVICES=$DEV timeout 600 $IN $b/contrib/srcrun --module $b/uct_src/.libs/libuct_src.so mpirun -np $NP --host $HOSTS --oversubscribe --bind-to none $OSU/$PROG -c ${OSUARGS:-}
  fi 2>&1 | awk '/^[0-9]/ {printf "%s=%s ", $1, $2} /[Ff]ail/ {printf "VALIDATION:%s ", $0}'
}
for r in $(seq 1 $ROUNDS); do
  specs=("$@"); if [ $((r % 2)) = 0 ]; then specs=($(printf '%s\n' "$@" | tac)); fi
  for s in "${specs[@]}"; do echo "round $r ${s%%=*}: $(run "${s#*=}")"; done
done
