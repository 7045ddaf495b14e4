#!/usr/bin/env bash
# compare.sh: one command for the side-by-side comparison of the src transport with the
# transports users pick today (UCX tcp, Open MPI ob1/tcp, libfabric udp;ofi_rxd and
# tcp;ofi_rxm through Open MPI's ofi MTL), on loopback and across namespace nodes.
#
# usage: perf/compare.sh [--quick] [--build DIR] [--out DIR] [--only SUITES]
#                        [--placements loopback,2nodes] [--osu-dir DIR] [--sizes LIST]
#                        [--scale-ranks N] [--scale-runs R] [--osu-runs R] [--peers LIST]
#                        [--no-agent]
#   --quick       fewer tests, sizes and ranks, shorter runs (about 3 minutes; full: about 20,
#                 and about 25 more for the scale suite; osu adds its own, see perf/README.md)
#   --build DIR   a configured and built srcucx tree (default: $SRC_BUILD_DIR/perf, else
#                 _build/perf, built here with contrib/install-deps.sh if missing)
#   --out DIR     where results go (default perf/results/<date-time>[-quick])
#   --only LIST   suites among uct,ucp,wireup,mpi,osu,state,scale (default: all; scale runs
#                 in full mode only, on the 2nodes placement's bed brought up with 8 nodes)
#   --scale-ranks N  ranks of the scale suite, spread over 8 nodes (default 256)
#   --scale-runs R   its rounds, each peer once a round; medians are reported (default 3)
#   --osu-dir DIR an installed osu-micro-benchmarks (also OSU_DIR); the osu suite needs it:
#                 osu_latency, osu_bw, osu_mbw_mr (4 ranks), osu_put_latency and osu_get_bw
#                 (one-sided, osc/ucx) at every size OSU runs (1 B..4 MiB; only --sizes when
#                 given), osu_bibw and osu_alltoall, osu_allreduce (4 ranks) at --sizes,
#                 osu_init; OSU's -c validation wherever it has one
#   --osu-runs R  launches of each OSU program per peer, peers in turn (the order reversed every
#                 other round); the table gives medians, each round's figure in its note (default 1)
#   --peers LIST  measure only these (e.g. src,tcp,ucx-tcp: src beside UCX tcp in every suite;
#                 default: src, src-agent, tcp, ucx-tcp, ob1-tcp, ofi-rxd, ofi-tcp)
#   --no-agent    leave out src-agent (every process on its node's srcd; by default measured
#                 beside src's embedded engines: compare.sh starts an agent on loopback and
#                 one on every node of the bed)
# Writes table.txt, results.csv, results.json, plot.png and run.log (every command and its
# output) to the results directory and prints the table. Needs root for the namespaces; without
# them (or with --placements loopback) it measures loopback only.
#
# Traffic goes only to loopback and to the test bed's addresses (198.51.100.0/24, inside the
# namespaces it creates); every process is bounded by a timeout and the bed is torn down on exit,
# also when interrupted.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
quick=0 build="" out="" only="uct,ucp,wireup,mpi,osu,state,scale" placements="loopback,2nodes"
scale_ranks=256 scale_runs=3 osu_runs=1
agent=1
osu=${OSU_DIR:-} sizes="" peers=""
command_line="perf/compare.sh $*"
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) quick=1; shift ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --placements) placements=$2; shift 2 ;;
    --osu-dir) osu=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --no-agent) agent=0; shift ;;
    --peers) peers=$2; shift 2 ;;
    --osu-runs) osu_runs=$2; shift 2 ;;
    --scale-ranks) scale_ranks=$2; shift 2 ;;
    --scale-runs) scale_runs=$2; shift 2 ;;
    -h|--help) sed -n '2,37s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown option '$1' (--help)" >&2; exit 2 ;;
    esac
done

# The arguments compare.py takes, checked before anything is built or set up.
py=python3
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null && py=/usr/bin/python3
"$py" "$top/perf/compare.py" --check --only "$only" --placements "$placements" \
    ${peers:+--peers "$peers"} || exit 2

# The build: an existing tree, else one made here.
if [ -z "$build" ]; then
    build=${SRC_BUILD_DIR:-$top/_build}/perf
    if [ ! -f "$build/uct_src/.libs/libuct_src.so" ]; then
        echo "== building srcucx in $build"
        ucx_src=$("$top/contrib/install-deps.sh" | tail -n 1)
        (cd "$top" && ./autogen.sh >/dev/null)
        mkdir -p "$build"
        (cd "$build" && "$top/configure" --with-ucx-src="$ucx_src" >configure.log) ||
            { tail -n 30 "$build/configure.log"; exit 1; }
        make -C "$build" -j"$(nproc)" >"$build/make.log" 2>&1 || { tail -n 40 "$build/make.log"; exit 1; }
    fi
fi
build=$(cd "$build" && pwd)
module=$build/uct_src/.libs/libuct_src.so
srcrun=$build/contrib/srcrun
[ -f "$module" ] || { echo "compare.sh: no module at $module: build the tree first" >&2; exit 1; }
[ -x "$srcrun" ] || make -C "$build/contrib" srcrun >/dev/null

stamp=$(date +%Y-%m-%d-%H%M)
[ $quick -eq 1 ] && stamp="$stamp-quick"
out=${out:-$top/perf/results/$stamp}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The benchmark programs, built for this run into a scratch directory removed on exit; the
# test bed, when up, is torn down on exit too, also when interrupted.
testbed=$top/contrib/netns-testbed.sh
bin=$(mktemp -d)
bed=0
agent_pid=""
cleanup() {
    [ -z "$agent_pid" ] || kill "$agent_pid" 2>/dev/null || true
    [ $bed -eq 0 ] || "$testbed" down
    rm -rf "$bin"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
echo "== building the benchmark programs"
mpicc -O2 -o "$bin/mpi_bench" "$top/perf/mpi_bench.c" -ldl
# shellcheck disable=SC2046
cc -O2 -o "$bin/ucp_wireup" "$top/perf/ucp_wireup.c" $(pkg-config --cflags --libs ucx 2>/dev/null || echo -lucp -lucs)
cc -O2 -shared -fPIC -I"$top/include" -o "$bin/libsrc_probe.so" "$top/perf/src_probe.c" -ldl

# The test bed: two nodes, eight for the full state sweep and the scale suite.
nodes=0
case ",$placements," in
*,2nodes,*)
    if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
        echo "compare.sh: not root or no 'ip netns': measuring loopback only" >&2
        placements=loopback
    else
        nodes=2
        [ $quick -eq 0 ] && case ",$only," in *,state,*|*,scale,*) nodes=8 ;; esac
        bed=1
        "$testbed" up $nodes
    fi
    ;;
esac

case ",${peers:-src-agent}," in *,src-agent,*) ;; *) agent=0 ;; esac
# The node agents of src-agent: one on loopback (a socket of this run's own), one per node.
agent_socket=""
if [ $agent -eq 1 ]; then
    agent_socket="@srcd-compare-$$"
    "$build/src/srcd" -s "$agent_socket" --pid-file "$bin/srcd.pid" --log-file "$out/srcd.log"
    agent_pid=$(cat "$bin/srcd.pid")
    [ $bed -eq 0 ] || "$testbed" agents "$build/src/srcd" --log-file "$out/srcd-bed.log"
fi

args=(--out "$out" --bin "$bin" --module "$module" --srcrun "$srcrun" --testbed "$testbed"
      --nodes "$nodes" --only "$only" --placements "$placements" --command "$command_line")
[ $quick -eq 1 ] && args+=(--quick)
[ -n "$osu" ] && args+=(--osu-dir "$osu")
[ -n "$sizes" ] && args+=(--sizes "$sizes")
[ -n "$peers" ] && args+=(--peers "$peers")
[ -n "$agent_socket" ] && args+=(--agent-socket "$agent_socket" --srcctl "$build/src/srcctl"
                                 --srcd "$build/src/srcd")
args+=(--scale-ranks "$scale_ranks" --scale-runs "$scale_runs" --osu-runs "$osu_runs")
# The whole run is bounded too: 15 min quick, 45 min full, and for the scale suite up to
# 3 jobs of 15 min (4 with ob1-tcp) and the agents' restarts and readings (about 3 min) a round.
limit=$([ $quick -eq 1 ] && echo 900 || echo 2700)
scale_jobs=3
case ",$peers," in *,ob1-tcp,*) scale_jobs=4 ;; esac
case ",$only," in *,scale,*) [ $quick -eq 1 ] || limit=$((limit + scale_runs * (scale_jobs * 900 + 200))) ;; esac
# The osu suite (every size of osu_latency, osu_bw, osu_mbw_mr, the one-sided programs and
# osu_init, each peer; OSU's own iteration counts in full mode): 10 more minutes a placement
# quick, 120 full, for each of --osu-runs.
if [ -n "$osu" ]; then
    case ",$only," in
    *,osu,*) limit=$((limit + $(echo "$placements" | tr ',' '\n' | grep -c .) *
                     osu_runs * $([ $quick -eq 1 ] && echo 600 || echo 7200))) ;;
    esac
fi
timeout --kill-after=10 $limit "$py" "$top/perf/compare.py" "${args[@]}"
