#!/bin/bash
# Where the CPU of a 256-rank MPI_Init goes: the scale suite's jobs (perf/compare.sh --only
# scale, one round) under a host-wide profile, cut to each job's MPI_Init (the window mpi_bench
# prints: first rank entering it to the last leaving it), and reported by process and by shared
# object.
#
# usage: perf/init_profile.sh [--build DIR] [--peers LIST] [--scale-ranks N] [--out DIR]
#        perf/init_profile.sh --report DIR      (the report again, from DIR's perf.data)
#   --build DIR    the build tree (default: compare.sh's)
#   --peers LIST   default src,src-agent,ucx-tcp,ob1-tcp (ob1-tcp: Open MPI without UCX)
#   --out DIR      default perf/results/<date-time>-init-profile
#
# Needs root (the test bed, a host-wide perf record) and perf (Debian: linux-perf). Writes
# DIR/perf.data, compare.sh's files, and DIR/profile.txt: per job, the CPU seconds in its window
# by process (mpi_bench = the ranks' threads but UCX's async thread; orted; srcd), the ranks' CPU
# by what ran (kernel, libc, Open MPI, UCX, the transport), and their top symbols. The profile
# samples at 499 Hz per CPU and is host-wide: nothing else may run meanwhile.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build="" peers="src,src-agent,ucx-tcp,ob1-tcp" ranks=256 out="" report=""
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=$2; shift 2 ;;
    --peers) peers=$2; shift 2 ;;
    --scale-ranks) ranks=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --report) report=$2; shift 2 ;;
    -h|--help) sed -n '2,16s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "init_profile.sh: unknown option '$1' (--help)" >&2; exit 2 ;;
    esac
done
command -v perf >/dev/null || { echo "init_profile.sh: no perf (apt-get install linux-perf)" >&2; exit 1; }

# Per job: CPU seconds by process and the ranks' CPU by what ran (init_profile.py), then the
# ranks' top symbols.
report() {  # DIR
    local dir=$1 peer first last
    python3 "$top/perf/init_profile.py" "$dir"
    grep -E '^# (scale job|init window)' "$dir/run.log" |
        awk '/^# scale job/ { peer = $NF; next } { print peer, $(NF-1), $NF }' |
        while read -r peer first last; do
            echo
            echo "== $peer: the ranks' top symbols in MPI_Init ($first .. $last s)"
            perf report -i "$dir/perf.data" --time "$first,$last" --comms mpi_bench \
                --sort dso,sym --percentage relative --stdio 2>/dev/null |
                grep -v '^#' | grep -v '^$' | head -n 20
        done
}

if [ -n "$report" ]; then
    report "$report"
    exit 0
fi
[ "$(id -u)" -eq 0 ] || { echo "init_profile.sh: needs root (test bed, host-wide profile)" >&2; exit 1; }
out=${out:-$top/perf/results/$(date +%Y-%m-%d-%H%M)-init-profile}
mkdir -p "$out"
out=$(cd "$out" && pwd)
perf record -e cpu-clock -F 499 -a -k CLOCK_MONOTONIC -o "$out/perf.data" -- \
    env SRCBED_PREFIX="${SRCBED_PREFIX:-srcscale}" "$top/perf/compare.sh" \
    ${build:+--build "$build"} --only scale --placements 2nodes --scale-runs 1 \
    --scale-ranks "$ranks" --peers "$peers" --out "$out"
report "$out" | tee "$out/profile.txt"
