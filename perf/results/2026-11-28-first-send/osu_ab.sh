#!/bin/bash
# Alternating rounds of one OSU program on loopback: base build, new build and UCX tcp, order
# reversed every other round; prints each run's rows prefixed by its variant and round.
# usage: osu_ab.sh PROG NP [OSU args...]   env: ROUNDS (3), BASE (build dir), OSU (libexec dir)
PROG=$1; NP=$2; shift 2
ROUNDS=${ROUNDS:-3}
BASE=${BASE:-/tmp/wt-base/_b}; NEW=/work/main/_build/release
OSU=${OSU:-/root/.cache/osu-7.4/libexec/osu-micro-benchmarks/mpi}
BIN=$(find "$OSU" -name "$PROG" -type f | head -1)
OPTS="--oversubscribe --bind-to none --mca oob_tcp_if_include lo"
[ "$NP" -gt "$(nproc)" ] && OPTS="$OPTS --mca mpi_yield_when_idle 1"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rows() { grep -E '^[0-9]+ ' | sed "s/^/$1 r$2 /"; }
run_src() { # build dir, name, round, OSU args
  local b=$1 n=$2 r=$3; shift 3
  UCX_TLS=src,self UCX_NET_DEVICES=lo timeout 600 \
    $b/contrib/srcrun --module $b/uct_src/.libs/libuct_src.so \
    mpirun -np $NP $OPTS $BIN "$@" 2>&1 | rows $n $r
}
run_tcp() { # round, OSU args
  local r=$1; shift
  OMPI_MCA_pml=ucx OMPI_MCA_osc=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any \
    UCX_TLS=tcp,self UCX_NET_DEVICES=lo timeout 600 \
    mpirun -np $NP $OPTS -x UCX_TLS -x UCX_NET_DEVICES $BIN "$@" 2>&1 | rows tcp $r
}
for r in $(seq 1 $ROUNDS); do
  if [ $((r % 2)) = 1 ]; then
    run_src $BASE base $r "$@"; run_src $NEW new $r "$@"; run_tcp $r "$@"
  else
    run_tcp $r "$@"; run_src $NEW new $r "$@"; run_src $BASE base $r "$@"
  fi
done
