#!/bin/bash
# Alternating rounds of MPI_Init with NP ranks on loopback, every rank on a node agent that
# srcrun --agent starts: base build, new build, and UCX tcp; idle ranks yield. Prints, per job,
# the slowest rank's MPI_Init, the time from the last rank entering it to the last leaving it,
# and the agent's destination requests (srcd's status, new build only) -- µs.
# usage: init_ab.sh   env: NP (64), ROUNDS (3), BASE (build dir), MPI_BENCH (mpi_bench binary)
NP=${NP:-64}; ROUNDS=${ROUNDS:-3}
BASE=${BASE:-/tmp/wt-base/_b}; NEW=/work/main/_build/release
BENCH=${MPI_BENCH:-/tmp/mpi_bench}
OPTS="--oversubscribe --bind-to none --mca mpi_yield_when_idle 1"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fig() { # the JSON figures of mpi_bench --json
  python3 -c '
import json,sys
t=sys.stdin.read(); i=t.find("[")
rows=json.loads(t[i:t.rindex("]")+1]) if i>=0 else []
v={r["test"]: r["value"] for r in rows}
print("init %.0f after_last_start %.0f spread %.0f first_a2a %.0f" % tuple(v.get(k,-1) for k in
      ("init_us","init_after_last_start_us","init_launch_spread_us","first_alltoall_us")))'
}
run_src() { # $1: build dir
  UCX_TLS=src,self UCX_NET_DEVICES=lo UCX_SRC_AGENT_SOCKET=@srcinit$$ timeout 300 \
    $1/contrib/srcrun --agent --srcd $1/src/srcd --module $1/uct_src/.libs/libuct_src.so \
    mpirun -np $NP $OPTS $BENCH --json --tests init --sizes 8 2>&1 | fig
}
run_tcp() {
  OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any UCX_TLS=tcp,self \
    UCX_NET_DEVICES=lo timeout 300 mpirun -np $NP $OPTS -x UCX_TLS -x UCX_NET_DEVICES \
    $BENCH --json --tests init --sizes 8 2>&1 | fig
}
for r in $(seq 1 $ROUNDS); do
  if [ $((r % 2)) = 1 ]; then a=$(run_src $BASE); b=$(run_src $NEW); t=$(run_tcp)
  else t=$(run_tcp); b=$(run_src $NEW); a=$(run_src $BASE); fi
  echo "np$NP round $r: base [$a] new [$b] tcp [$t]"
done
