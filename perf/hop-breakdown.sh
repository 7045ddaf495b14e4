#!/bin/bash
# Where the engine's ping-pong latency goes, beside the UDP floor's (perf/README.md, "Where the
# engine's time goes"). Runs BUILDDIR/perf/srcnic_bench's ping-pong (8 bytes, or SIZE), engine
# and floor alternating, under hop_timing.c (an LD_PRELOAD library built here with cc), and prints the
# median of the runs' medians of each part of a hop, both sides and their difference.
#
#   [SIZE=BYTES] perf/hop-breakdown.sh BUILDDIR [RUNS]
#       RUNS: per side, default 5, about 2 s each; SIZE: the message size, default 8
#
# transit:   send entered -> the other end's receive returned the datagram (the kernel's send,
#            which on loopback delivers, plus how long the receiver took to notice)
# responder: its receive returned -> its reply's send entered (all user-space work)
# initiator: its receive returned -> its next send entered (user-space work and the
#            benchmark's own timing)
# send/recv: the system calls alone
set -euo pipefail

usage() { echo "usage: $0 BUILDDIR [RUNS]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
build=$1
runs=${2:-5}
size=${SIZE:-8}
case $size in ''|*[!0-9]*) echo "$0: SIZE must be a number of bytes" >&2; exit 2 ;; esac
bench=$build/perf/srcnic_bench
[ -x "$bench" ] || { echo "$0: $bench not found: build it first (make in $build)" >&2; exit 1; }
case $runs in ''|*[!0-9]*) usage ;; esac
[ "$runs" -ge 1 ] && [ "$runs" -le 50 ] || { echo "$0: RUNS must be 1..50" >&2; exit 2; }
[ "$(uname -m)" = x86_64 ] || { echo "$0: hop_timing needs x86-64 (rdtsc)" >&2; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
${CC:-cc} -O2 -shared -fPIC -o "$work/hop_timing.so" "$here/hop_timing.c" -ldl -lpthread

for ((i = 0; i < runs; i++)); do
    for side in engine udp; do
        # A run whose walk found no round trips prints "no ping-pong seen": it is skipped.
        LD_PRELOAD=$work/hop_timing.so "$bench" --tests lat --sizes "$size" --side "$side" \
            --iters 40000 --blocks 1 --warmup 1000 --timeout 60 2>&1 >/dev/null |
            sed -n "s/^hop_timing: \([0-9]*\) round trips, medians in ns: /$side /p"
    done
done > "$work/runs"

python3 - "$work/runs" "$runs" "$size" <<'EOF'
import statistics, sys
parts = ["round_trip", "transit", "responder", "initiator", "send", "recv"]
rows = {"engine": [], "udp": []}
for line in open(sys.argv[1]):
    f = line.split()
    kv = dict(zip(f[1::2], f[2::2]))
    rows[f[0]].append({p: float(kv[p]) for p in parts})
if not rows["engine"] or not rows["udp"]:
    sys.exit("hop-breakdown: a side produced no measurement")
med = {s: {p: statistics.median(r[p] for r in rows[s]) for p in parts} for s in rows}
print(f"{sys.argv[3]}-byte ping-pong, median of {len(rows['engine'])}/{len(rows['udp'])} runs' medians, ns")
print(f"{'part':12s}{'srcnic':>10s}{'udp floor':>11s}{'difference':>12s}")
for p in parts:
    e, u = med["engine"][p], med["udp"][p]
    print(f"{p:12s}{e:10.0f}{u:11.0f}{e - u:12.0f}")
EOF
