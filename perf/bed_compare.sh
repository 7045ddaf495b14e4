#!/usr/bin/env bash
# bed_compare.sh: MPI runs on the namespace test bed with several builds or settings of the src
# transport (and UCX tcp), taking turns round by round, with the median of each figure.
#
# usage: perf/bed_compare.sh [--rounds N] [--hosts LIST] [--np N] [--tests LIST]
#                            [--sizes LIST] COLUMN...
#   COLUMN       NAME=MODULE[:VAR=VALUE...]  the src module at MODULE (a libuct_src.so), with
#                                            UCX variables set for that column, or
#                NAME=tcp[:VAR=VALUE...]      UCX tcp on the nodes' veth0
#   --rounds N   rounds (default 3); the columns' order is reversed every other round
#   --hosts LIST mpirun's --host (default n1:2,n2:2: two nodes of two ranks)
#   --np N       ranks (default 4)
#   --tests LIST mpi_bench tests (default allreduce,alltoall)
#   --sizes LIST message sizes, bytes (default 65536,1048576)
# Example: perf/bed_compare.sh old=/tmp/old/uct_src/.libs/libuct_src.so \
#              new=_build/uct_src/.libs/libuct_src.so w128=_build/uct_src/.libs/libuct_src.so:UCX_SRC_WINDOW=128 tcp=tcp
# Needs root (network namespaces). Creates the nodes it needs (contrib/netns-testbed.sh) and
# removes them at the end if it created them; traffic stays inside them. Every run is bounded
# by a timeout. Ranks are oversubscribed on a small machine (--oversubscribe, yield when idle).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
testbed=$top/contrib/netns-testbed.sh
rounds=3 hosts=n1:2,n2:2 np=4 tests=allreduce,alltoall sizes=65536,1048576
columns=()
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    -h|--help) sed -n '2,20s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "bed_compare.sh: unknown option '$1' (--help)" >&2; exit 2 ;;
    *=*) columns+=("$1"); shift ;;
    *) echo "bed_compare.sh: a column is NAME=MODULE or NAME=tcp, not '$1'" >&2; exit 2 ;;
    esac
done
[ ${#columns[@]} -gt 0 ] || { echo "bed_compare.sh: no column given (--help)" >&2; exit 2; }
for col in "${columns[@]}"; do
    spec=${col#*=}; module=${spec%%:*}
    if [ "$module" != tcp ] && [ ! -f "$module" ]; then
        echo "bed_compare.sh: column '$col': no module at $module" >&2; exit 2
    fi
done
nodes=$(echo "$hosts" | tr ',' '\n' | sed 's/^n\([0-9]*\).*/\1/' | sort -n | tail -n 1)

work=$(mktemp -d)
bed=0
cleanup() {
    [ $bed -eq 0 ] || "$testbed" down >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if ! ip netns list 2>/dev/null | grep -q "srcbed-n$nodes\b"; then
    "$testbed" up "$nodes" >/dev/null
    bed=1
fi
mpicc -O2 -o "$work/mpi_bench" "$top/perf/mpi_bench.c" -ldl
# srcrun from any build tree's contrib/, or a copy made here from the source.
sed "s|@ucxmoduledir@|/nonexistent|" "$top/contrib/srcrun.in" >"$work/srcrun"
chmod +x "$work/srcrun"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run_column() {   # $1 = column spec; prints "test/size=value ..."
    local name=${1%%=*} spec=${1#*=}
    local module=${spec%%:*} vars=() launcher=()
    if [ "$spec" != "$module" ]; then
        IFS=':' read -r -a vars <<<"${spec#*:}"
    fi
    if [ "$module" = tcp ]; then
        vars=(UCX_TLS=tcp,self UCX_NET_DEVICES=veth0 OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any
              OMPI_MCA_pml_ucx_devices=any "${vars[@]}")
        launcher=(mpirun -x UCX_TLS -x UCX_NET_DEVICES)
    else
        vars=(UCX_TLS=src,self UCX_NET_DEVICES=veth0 "${vars[@]}")
        launcher=("$work/srcrun" --module "$module" mpirun)
    fi
    env "${vars[@]}" timeout 300 "$testbed" mpi "${launcher[@]}" -np "$np" --host "$hosts" \
        --bind-to none --oversubscribe --mca mpi_yield_when_idle 1 "$work/mpi_bench" \
        --tests "$tests" --sizes "$sizes" --scale 4 2>&1 |
        awk '$1 ~ /^[a-z_]+$/ && $2 ~ /^[0-9]+$/ { printf "%s/%s=%s ", $1, $2, $3 }'
}

results=$work/results.txt
echo "bed_compare: $np ranks on $hosts, tests $tests, sizes $sizes, $rounds rounds"
for r in $(seq 1 "$rounds"); do
    order=("${columns[@]}")
    if [ $((r % 2)) -eq 0 ]; then
        order=()
        for ((i = ${#columns[@]} - 1; i >= 0; --i)); do order+=("${columns[$i]}"); done
    fi
    for col in "${order[@]}"; do
        line=$(run_column "$col")
        echo "round $r ${col%%=*}: ${line:-(no result: see the run with the same command)}"
        for kv in $line; do echo "${col%%=*} $kv" >>"$results"; done
    done
done
echo "medians (unit: us for lat, alltoall, allreduce; MB/s for bw, bibw; msg/s for msgrate):"
python3 - "$results" "${columns[@]}" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, kv = line.split()
    key, value = kv.split("=")
    rows.setdefault(key, {}).setdefault(name, []).append(float(value))
names = [c.split("=", 1)[0] for c in sys.argv[2:]]
print("%-22s" % "test/size" + "".join("%14s" % n for n in names))
for key in sorted(rows, key=lambda k: (k.split("/")[0], int(k.split("/")[1]))):
    cells = []
    for n in names:
        v = rows[key].get(n)
        cells.append("%14.4g" % statistics.median(v) if v else "%14s" % "-")
    print("%-22s" % key + "".join(cells))
EOF
