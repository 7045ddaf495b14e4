#!/bin/bash
# usage: overlap_ab.sh ROUNDS NEW_BUILD BASE_BUILD: mpi_bench --tests overlap,lat, 2 ranks on
# loopback bound to cores, src (two builds) and UCX tcp taking turns; prints one line per round.
set -u
R=$1 N=$2 B=$3
bin=$(mktemp -d); mpicc -O2 -o "$bin/mpi_bench" "$(dirname "$0")/../../mpi_bench.c" -ldl
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T="--tests overlap,lat --sizes 8,1K,16K"
src() { UCX_TLS=src,self UCX_SRC_MODE=embedded UCX_NET_DEVICES=lo timeout 120 "$1/contrib/srcrun" \
        --module "$1/uct_src/.libs/libuct_src.so" mpirun -np 2 --bind-to core "$bin/mpi_bench" $T; }
tcp() { OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any UCX_TLS=tcp,self \
        UCX_NET_DEVICES=lo timeout 120 mpirun -np 2 --bind-to core -x UCX_TLS -x UCX_NET_DEVICES \
        "$bin/mpi_bench" $T; }
fmt() { awk '/^(lat|overlap) / {printf " %s/%s %s", $1, $2, $3}'; }
for r in $(seq 1 "$R"); do
  echo "round $r new:$(src "$N" 2>&1 | fmt)"
  echo "round $r base:$(src "$B" 2>&1 | fmt)"
  echo "round $r tcp:$(tcp 2>&1 | fmt)"
done
rm -rf "$bin"
