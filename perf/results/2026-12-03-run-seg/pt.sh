#!/bin/bash
# pt.sh ROUNDS "ucx_perftest args" label=BUILD[:VAR=VAL+VAR=VAL]|tcp ...: ucx_perftest across the
# test bed's two nodes (server on n2, client on n1), one run per label per round, the order
# reversed every other round. Prints the client's 50th-percentile latency, bandwidth, rate.
ROUNDS=$1; ARGS=$2; shift 2
export SRCBED_PREFIX=srcpt
TB=$(cd "$(dirname "$0")/../../.." && pwd)/contrib/netns-testbed.sh
$TB up 2 >/dev/null; trap '$TB down >/dev/null 2>&1' EXIT
port=23000
run() {
  local b=${1%%:*} e=; [ "$b" = "$1" ] || e=${1#*:}
  port=$((port+1))
  if [ "$b" = tcp ]; then E="UCX_TLS=tcp,self UCX_NET_DEVICES=veth0"
  else E="${e//+/ } LD_PRELOAD=$b/uct_src/.libs/libuct_src.so UCX_TLS=src,self UCX_SRC_MODE=embedded UCX_NET_DEVICES=veth0"; fi
  $TB exec n2 env $E timeout 120 ucx_perftest -p $port -c 0 $ARGS >/dev/null 2>&1 &
  sleep 0.5
  $TB exec n1 env $E timeout 120 ucx_perftest 198.51.100.2 -p $port -c 1 -v $ARGS 2>&1 | awk -F, '/^ *[0-9]+,/ {l=$0} END {split(l,c,","); printf "lat50=%s bw=%s rate=%s\n", c[2], c[6], c[8]}'
  wait
}
for r in $(seq 1 $ROUNDS); do
  specs=("$@"); if [ $((r % 2)) = 0 ]; then specs=($(printf '%s\n' "$@" | tac)); fi
  for s in "${specs[@]}"; do echo "round $r ${s%%=*}: $(run "${s#*=}")"; done
done
