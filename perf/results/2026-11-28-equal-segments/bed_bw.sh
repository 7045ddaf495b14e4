#!/bin/bash
# 2 namespace nodes, 1 rank each: osu_bw (or PROG), module A vs B embedded, UCX tcp; alternating rounds
A=${A:-/tmp/ab/base.so}; B=${B:-/work/main/_build/release/uct_src/.libs/libuct_src.so}
R=${ROUNDS:-3}; M=${SIZES:-1:1048576}; PROG=${PROG:-osu_bw}
export SRCBED_PREFIX=srcab
TB=/work/main/contrib/netns-testbed.sh; BLD=/work/main/_build/release
OSU=/root/.cache/osu-7.4/libexec/osu-micro-benchmarks/mpi/pt2pt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
$TB up 2 >/dev/null
trap '$TB down >/dev/null 2>&1' EXIT
src() { UCX_TLS=src,self UCX_SRC_MODE=embedded UCX_NET_DEVICES=veth0 timeout 180 $TB mpi $BLD/contrib/srcrun --module $1 mpirun -np 2 --host n1:1,n2:1 --bind-to none $OSU/$PROG -m $M 2>&1 | awk '/^[0-9]/ {printf "%s ", $2} END {print ""}'; }
tcp() { OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any UCX_TLS=tcp,self UCX_NET_DEVICES=veth0 timeout 180 $TB mpi mpirun -np 2 --host n1:1,n2:1 --bind-to none -x UCX_TLS -x UCX_NET_DEVICES $OSU/$PROG -m $M 2>&1 | awk '/^[0-9]/ {printf "%s ", $2} END {print ""}'; }
for r in $(seq 1 $R); do
  if [ $((r%2)) = 1 ]; then echo "A $(src $A)"; echo "B $(src $B)"; echo "T $(tcp)";
  else echo "T $(tcp)"; echo "B $(src $B)"; echo "A $(src $A)"; fi
done
