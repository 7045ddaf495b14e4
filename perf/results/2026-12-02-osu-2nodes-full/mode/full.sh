#!/bin/bash
# full.sh PROG ROUNDS label[:VAR=VAL] ... : whole-curve OSU launches on the 2-node bed, src builds only
# (WRAP=/tmp/mode/pin.sh: each rank under taskset, pin.sh)
PROG=$1; ROUNDS=$2; shift 2
export SRCBED_PREFIX=srcmd OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TB=/work/main/contrib/netns-testbed.sh; B=/work/main/_build/release
OSU=/root/.cache/osu-7.4/libexec/osu-micro-benchmarks/mpi/pt2pt
$TB up 2 >/dev/null; trap '$TB down >/dev/null 2>&1' EXIT
for r in $(seq 1 $ROUNDS); do for s in "$@"; do
  env=""; case $s in *:*) env=${s#*:};; esac
  out=$(env $env UCX_TLS=src,self UCX_SRC_MODE=embedded UCX_NET_DEVICES=veth0 timeout 300 $TB mpi $B/contrib/srcrun --module $B/uct_src/.libs/libuct_src.so mpirun -np 2 --host n1:1,n2:1 --oversubscribe --bind-to none ${WRAP:-} $OSU/$PROG -c 2>&1 | awk '/^[0-9]/ {printf "%s=%s ", $1, $2}')
  echo "round $r $s: $out"
done; done
