#!/bin/sh
# The runs of this directory: perf/scale_sim, one process per (mode, N), P = 20 (the paper's),
# then the 4,096-engine x 64-QP bed and 1 % loss at N = 128. Each run's stdout is NAME.txt, its
# JSON NAME.json, and /usr/bin/time -v's wall time and peak RSS NAME.time.
# usage: run.sh BUILDDIR OUTDIR
set -eu
build=$1
out=$2
sim="$build/perf/scale_sim"
seed=20261127
mkdir -p "$out"
run() {
    name=$1; shift
    echo "== $name: scale_sim $*" >&2
    /usr/bin/time -v -o "$out/$name.time" "$sim" "$@" --seed $seed --json "$out/$name.json" \
        >"$out/$name.txt" 2>"$out/$name.err" || echo "$name failed (rc $?)" >&2
}
for n in 32 128 512; do
    for mode in agent agent-dc embedded; do
        run "$mode-n$n-p20" --mode $mode --nodes $n --procs 20 --rounds 2 --budget 64 --watchdog 120
    done
done
# 4,096 nodes: every node pair would be 16.8 M connections in agent mode (about 18 GB here):
# each process sends to 4 other nodes (80 per node); embedded would be 81,920 engines, more than
# the in-memory fabric's 65,535 ports.
for mode in agent agent-dc; do
    run "$mode-n4096-p20" --mode $mode --nodes 4096 --procs 20 --rounds 2 --budget 64 \
        --dests-per-proc 4 --watchdog 120
done
# The largest bed: 4,096 engines x 64 QPs, each process to one process of another node.
for mode in agent agent-dc; do
    run "$mode-n4096-p64" --mode $mode --nodes 4096 --procs 64 --rounds 2 --budget 64 \
        --dests-per-proc 1 --watchdog 120
done
# Loss: 1 % of every engine's datagrams, N = 128.
for mode in agent agent-dc embedded; do
    run "$mode-n128-p20-loss1" --mode $mode --nodes 128 --procs 20 --rounds 2 --budget 64 \
        --loss 1 --watchdog 120
done
