#!/usr/bin/env bash
# hol_bench.sh: does one process's bulk transfer hold up another's small messages between the
# same two nodes? (head-of-line blocking; with the node agent both share one connection)
#
# usage: perf/hol_bench.sh [--build DIR] [--rounds N] [--bulk-size BYTES] [--modes LIST]
#
# On nodes n1 and n2 of a namespace test bed of its own (contrib/netns-testbed.sh, root): UCT
# am_lat of 8 bytes (ucx_perftest, 20000 iterations; the 50th and the 99th percentile, two runs)
# between one pair of processes, alone and while a second pair streams put_zcopy of
# --bulk-size bytes (default 1 GiB) from n1 to n2. Modes (default agent,embedded,tcp):
#   agent     UCX_SRC_MODE=agent, every process on its node's srcd: both pairs share the one
#             connection between the two agents;
#   embedded  UCX_SRC_MODE=embedded: each pair has its own connection;
#   tcp       UCX tcp, for reference.
# Each round runs every mode in turn (the order reversed every other round). Prints every
# round, then per mode the medians over rounds: latency alone, loaded, and loaded / alone.
# Bounded: every process runs under a timeout; the bed is removed at the end.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${SRC_BUILD_DIR:-$here/../_build/release}
rounds=3
bulk=$((1 << 30))
modes=agent,embedded,tcp
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --bulk-size) bulk=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    -h|--help) sed -n '2,17s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "hol_bench: unknown option '$1' (--help)" >&2; exit 2 ;;
    esac
done
build=$(cd "$build" && pwd)
module=$build/uct_src/.libs/libuct_src.so
srcd=$build/src/srcd
[ -r "$module" ] && [ -x "$srcd" ] || { echo "hol_bench: no built module and srcd in $build (--build DIR)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "hol_bench: needs root (network namespaces)" >&2; exit 2; }

bed=$here/../contrib/netns-testbed.sh
export SRCBED_PREFIX=srchol$$
trap '"$bed" down >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
"$bed" up 2 >/dev/null
"$bed" agents "$srcd" >/dev/null
port=14000   # each measurement's own ports: measure() runs in a subshell, from a base per call

# One latency figure: the PCT-th percentile of 8-byte am_lat from n1 to n2, in µs ("n/a" if it
# failed). Environment: the mode's.
lat() {
    local pct=$1 dev=$2 tl=$3 out
    port=$((port + 1))
    "$bed" exec n2 timeout 60 ucx_perftest -p $port -c 0 >/dev/null 2>&1 &
    local server=$!
    sleep 0.5
    out=$("$bed" exec n1 timeout 60 ucx_perftest 198.51.100.2 -p $port -c 1 -v -x "$tl" -d "$dev" \
        -t am_lat -D short -s 8 -n 20000 -w 2000 -R "$pct" 2>/dev/null | grep -E '^ *[0-9]+,' | tail -n 1) || true
    wait $server 2>/dev/null || true
    [ -n "$out" ] && echo "$out" | cut -d, -f2 || echo n/a
}

# Runs mode $1 on ports from $2 up: prints "alone50 alone99 loaded50 loaded99".
measure() {
    local mode=$1 dev tl env
    port=$2
    case "$mode" in
    agent) env="LD_PRELOAD=$module UCX_SRC_MODE=agent"; dev=veth0; tl=src ;;
    embedded) env="LD_PRELOAD=$module UCX_SRC_MODE=embedded"; dev=veth0; tl=src ;;
    tcp) env=""; dev=veth0; tl=tcp ;;
    *) echo "hol_bench: unknown mode '$mode'" >&2; exit 2 ;;
    esac
    # shellcheck disable=SC2086
    export $env UCX_NET_DEVICES=$dev
    local a50 a99 l50 l99 bport bserver bclient
    a50=$(lat 50 "$dev" "$tl"); a99=$(lat 99 "$dev" "$tl")
    port=$((port + 1)); bport=$port
    "$bed" exec n2 timeout 120 ucx_perftest -p $bport -c 0 >/dev/null 2>&1 &
    bserver=$!
    sleep 0.5
    "$bed" exec n1 timeout 120 ucx_perftest 198.51.100.2 -p $bport -c 1 -x "$tl" -d "$dev" \
        -t put_bw -D zcopy -s "$bulk" -n 100000 >/dev/null 2>&1 &
    bclient=$!
    sleep 2   # the stream under way
    l50=$(lat 50 "$dev" "$tl"); l99=$(lat 99 "$dev" "$tl")
    "$bed" exec n1 pkill -f "ucx_perftest 198.51.100.2 -p $bport" 2>/dev/null || true
    "$bed" exec n2 pkill -f "ucx_perftest -p $bport" 2>/dev/null || true
    wait $bclient $bserver 2>/dev/null || true
    echo "$a50 $a99 $l50 $l99"
}

IFS=, read -r -a mode_list <<<"$modes"
results=$(mktemp)
printf '%-6s %-9s %9s %9s %9s %9s\n' round mode alone50 alone99 loaded50 loaded99
for r in $(seq 1 "$rounds"); do
    order=("${mode_list[@]}")
    if [ $((r % 2)) -eq 0 ]; then
        order=(); for ((i = ${#mode_list[@]} - 1; i >= 0; i--)); do order+=("${mode_list[i]}"); done
    fi
    for m in "${order[@]}"; do
        res=$(measure "$m" $((port + r * 100 + ${#m} * 10)))
        echo "$m $res" >>"$results"
        # shellcheck disable=SC2086
        printf '%-6s %-9s %9s %9s %9s %9s\n' "$r" "$m" $res
    done
done

echo
echo "medians over $rounds rounds, us (bulk: put_zcopy of $bulk bytes n1 -> n2)"
python3 - "$results" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m, *v = line.split()
    rows.setdefault(m, []).append([None if x == "n/a" else float(x) for x in v])
print("%-9s %9s %9s %9s %9s %13s %13s" % ("mode", "alone50", "alone99", "loaded50", "loaded99",
                                          "loaded/alone", "p99 ld/alone"))
for m, rs in rows.items():
    med = []
    for i in range(4):
        xs = [r[i] for r in rs if r[i] is not None]
        med.append(statistics.median(xs) if xs else None)
    f = lambda x: "n/a" if x is None else "%.2f" % x
    q = lambda a, b: "n/a" if a is None or b is None else "%.2f" % (a / b)
    print("%-9s %9s %9s %9s %9s %13s %13s" % (m, f(med[0]), f(med[1]), f(med[2]), f(med[3]),
                                              q(med[2], med[0]), q(med[3], med[1])))
EOF
rm -f "$results"
