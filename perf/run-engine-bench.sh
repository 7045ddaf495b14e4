#!/bin/sh
# Runs the engine micro-benchmark (srcnic_bench) and keeps its table, CSV and JSON in
# perf/results/ next to this script.
#
#   perf/run-engine-bench.sh [BUILDDIR] [srcnic_bench options...]
#
# BUILDDIR is the configured build tree holding perf/srcnic_bench (default: the current
# directory); any further arguments go to srcnic_bench after the script's own --repeat 2 (see
# srcnic_bench --help; a later option wins). About 70 s on an idle 2-CPU machine. Exits with
# srcnic_bench's status: 0 when every test ran and verified its data, whether or not the
# aims were met.
set -eu

builddir=.
if [ $# -gt 0 ] && [ -d "$1" ]; then
    builddir=$1
    shift
fi
bench="$builddir/perf/srcnic_bench"
if [ ! -x "$bench" ]; then
    echo "run-engine-bench.sh: $bench not found: build it first (make in the build tree)" >&2
    exit 2
fi

results="$(cd "$(dirname "$0")" && pwd)/results"
mkdir -p "$results"
name=engine-bench

status=0
"$bench" --repeat 2 --csv "$results/$name.csv" --json "$results/$name.json" "$@" \
    >"$results/$name.txt" 2>&1 || status=$?
cat "$results/$name.txt"
echo "results: $results/$name.txt, $name.csv, $name.json"
exit $status
