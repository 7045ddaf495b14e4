#!/usr/bin/env bash
# The main job: install what is needed, build and install srcucx, then run an Open MPI job
# over UCX_TLS=src,self through srcrun (tests/mpi/mpi_check: verified ping-pong from 0 B to
# 1 MiB, allreduce, alltoall).
#
# Environment: SRC_MAIN_NP (ranks, default 4), SRC_MAIN_TLS (UCX_TLS for the ranks),
# SRC_BUILD_DIR (build trees, default _build/).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
dir=${SRC_BUILD_DIR:-$top/_build}/main
np=${SRC_MAIN_NP:-4}
tls=${SRC_MAIN_TLS:-src,self}
# The loopback device: this job sends to no other address.
devices=${SRC_MAIN_DEVICES:-lo}

ucx_src=$("$top/contrib/install-deps.sh" | tail -n 1)
(cd "$top" && ./autogen.sh)
mkdir -p "$dir"
(cd "$dir" && "$top/configure" --with-ucx-src="$ucx_src" --prefix="$dir/install" >configure.log) ||
    { tail -n 30 "$dir/configure.log"; exit 1; }
make -C "$dir" -j"$(nproc)" install >"$dir/make.log" 2>&1 || { tail -n 60 "$dir/make.log"; exit 1; }
make -C "$dir/tests" mpi/mpi_check >>"$dir/make.log" 2>&1 || { tail -n 30 "$dir/make.log"; exit 1; }

if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_rmaps_base_oversubscribe=1
echo "+ UCX_TLS=$tls UCX_NET_DEVICES=$devices srcrun mpirun -np $np mpi_check"
UCX_TLS=$tls UCX_NET_DEVICES=$devices timeout 300 "$dir/install/bin/srcrun" mpirun -np "$np" \
    "$dir/tests/mpi/mpi_check"
