#!/usr/bin/env bash
# Install what building, testing and running srcucx needs on Debian/Ubuntu (Debian 12: UCX
# 1.13.1, Open MPI 4.1.4, GoogleTest), then fetch the matching UCX source tree
# (contrib/get-ucx-src.sh). Safe to run again; prints the UCX source directory last.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: run as root or install sudo" >&2; exit 1; }
    sudo="sudo"
fi
command -v apt-get >/dev/null ||
    { echo "install-deps: needs apt-get (Debian/Ubuntu); elsewhere install the packages listed in README.md" >&2; exit 1; }

packages=(
    build-essential autoconf automake libtool pkg-config   # build
    libucx-dev ucx-utils                                    # UCX and ucx_info/ucx_perftest
    openmpi-bin libopenmpi-dev                              # MPI tests and the main job
    libgtest-dev                                            # make check
    valgrind                                                # valgrind/memcheck.h, which UCX's internal headers include
    clang libclang-rt-14-dev                                # make check: libFuzzer (fuzz/rx_fuzz.sh)
    dpkg-dev                                                # apt-get source (UCX headers)
    iproute2 procps                                         # namespace tests, process checks
    libfabric-bin python3-matplotlib                        # perf/compare.sh: fi_info, the plot
)
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q >&2
$sudo apt-get install -y -q --no-install-recommends "${packages[@]}" >&2
"$here/get-ucx-src.sh"
