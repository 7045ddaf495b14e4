#!/bin/bash
# run.sh ROUNDS SIZE...: the kernel's ping-pong floors across two namespace nodes (node n1 the
# client, n2 the server), udp, udp-gso and tcp in turn for each size, ROUNDS times. Prints
# pingpong_floor's lines: "PROTO SIZE median_us p99_us".
ROUNDS=${1:-5}; shift; SIZES=${*:-8}
top=$(cd "$(dirname "$0")/../../.." && pwd)
export SRCBED_PREFIX=srcfl
TB=$top/contrib/netns-testbed.sh
F=$(mktemp -d)/pingpong_floor
cc -O2 -o "$F" "$top/perf/pingpong_floor.c" || exit 1
$TB up 2 >/dev/null; trap '$TB down >/dev/null 2>&1; rm -rf "$(dirname "$F")"' EXIT
port=21000
for r in $(seq 1 "$ROUNDS"); do
  for size in $SIZES; do
    for proto in udp udp-gso tcp; do
      port=$((port + 1))
      timeout 60 $TB exec n2 "$F" server $proto $port "$size" &
      timeout 60 $TB exec n1 "$F" client $proto 198.51.100.2 $port "$size" 10000 1000
      wait
    done
  done
done
