#!/bin/bash
# osu_bw, loopback, MTU 1500, embedded, 2 ranks: module A vs module B vs tcp, alternating rounds
A=${A:-/tmp/ab/base.so}; B=${B:-/work/main/_build/release/uct_src/.libs/libuct_src.so}
R=${ROUNDS:-3}; M=${SIZES:-1024:16384}
BLD=/work/main/_build/release
OSU=/root/.cache/osu-7.4/libexec/osu-micro-benchmarks/mpi/pt2pt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
src() { UCX_SRC_MTU=${MTU:-1500} UCX_SRC_MODE=embedded UCX_TLS=src,self UCX_NET_DEVICES=lo timeout 120 $BLD/contrib/srcrun --module $1 \
  mpirun -np 2 --mca oob_tcp_if_include lo --bind-to core $OSU/${PROG:-osu_bw} -m $M 2>&1 | awk '/^[0-9]/ {printf "%s ", $2} END {print ""}'; }
tcp() { OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any UCX_TLS=tcp,self UCX_NET_DEVICES=lo timeout 120 mpirun -np 2 --mca oob_tcp_if_include lo --bind-to core -x UCX_TLS -x UCX_NET_DEVICES -x OMPI_MCA_pml -x OMPI_MCA_pml_ucx_tls -x OMPI_MCA_pml_ucx_devices $OSU/${PROG:-osu_bw} -m $M 2>&1 | awk '/^[0-9]/ {printf "%s ", $2} END {print ""}'; }
for r in $(seq 1 $R); do
  if [ $((r%2)) = 1 ]; then echo "A $(src $A)"; echo "B $(src $B)"; [ -n "$TCP" ] && echo "T $(tcp)";
  else [ -n "$TCP" ] && echo "T $(tcp)"; echo "B $(src $B)"; echo "A $(src $A)"; fi
done
