#!/bin/bash
# Alternating rounds of one OSU collective on loopback, every rank on a node agent that srcrun
# --agent starts: the agent copying gets between its processes (UCX_SRC_AGENT_DIRECT_READ=n),
# the processes copying them themselves (y, the default), and UCX tcp; idle ranks yield for all.
# With EMBEDDED=1 a fourth column: every process with its own engine (UCX_SRC_MODE=embedded).
# usage: agent_ab.sh PROG SIZE    env: NP (8), ROUNDS (3), ITERS (200), WARM (20), BUILD
PROG=${1:-osu_alltoall}; SIZE=${2:-1048576}; NP=${NP:-8}; ROUNDS=${ROUNDS:-3}
B=${BUILD:-/work/main/_build/release}
case $PROG in osu_latency|osu_bw|osu_bibw) DIR=pt2pt ;; *) DIR=collective ;; esac
OSU=/root/.cache/osu-7.4/libexec/osu-micro-benchmarks/mpi/$DIR
OPTS="--oversubscribe --bind-to none --mca mpi_yield_when_idle 1"
ARGS="-m $SIZE:$SIZE -i ${ITERS:-200} -x ${WARM:-20}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run_src() { # $1: y or n
  UCX_SRC_AGENT_DIRECT_READ=$1 UCX_TLS=src,self UCX_NET_DEVICES=lo UCX_SRC_AGENT_SOCKET=@srcab$$ \
    timeout 300 $B/contrib/srcrun --agent --srcd $B/src/srcd --module $B/uct_src/.libs/libuct_src.so \
    mpirun -np $NP $OPTS $OSU/$PROG $ARGS 2>&1 | awk '/^[0-9]/ {print $2}'
}
run_emb() {
  [ -n "${EMBEDDED:-}" ] || { echo -; return; }
  UCX_SRC_MODE=embedded UCX_TLS=src,self UCX_NET_DEVICES=lo \
    timeout 300 $B/contrib/srcrun --module $B/uct_src/.libs/libuct_src.so \
    mpirun -np $NP $OPTS $OSU/$PROG $ARGS 2>&1 | awk '/^[0-9]/ {print $2}'
}
run_tcp() {
  OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any UCX_TLS=tcp,self UCX_NET_DEVICES=lo \
    timeout 300 mpirun -np $NP $OPTS -x UCX_TLS -x UCX_NET_DEVICES $OSU/$PROG $ARGS 2>&1 | awk '/^[0-9]/ {print $2}'
}
for r in $(seq 1 $ROUNDS); do
  if [ $((r % 2)) = 1 ]; then a=$(run_src n); b=$(run_src y); e=$(run_emb); t=$(run_tcp)
  else t=$(run_tcp); e=$(run_emb); b=$(run_src y); a=$(run_src n); fi
  echo "agent $PROG $SIZE np$NP round $r: agent-copies $a direct $b tcp $t embedded $e"
done
