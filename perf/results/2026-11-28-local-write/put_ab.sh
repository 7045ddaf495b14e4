#!/bin/bash
# UCT put (zcopy) between two processes of one node agent: build A's agent and module against
# build B's, and B embedded, in alternating rounds. Each run: ucx_perftest server and client
# under srcrun (--agent starts a srcd of that build on its own socket for the run).
# usage: put_ab.sh     env: A B (build trees), ROUNDS (5), SIZES, TEST (put_bw | put_lat | am_lat
# ...), DATA (zcopy | bcopy | short)
A=${A:-/tmp/base/_b}; B=${B:-/work/main/_build/release}; R=${ROUNDS:-5}
SIZES=${SIZES:-8 4096 65536 1048576}; TEST=${TEST:-put_bw}; DATA=${DATA:-zcopy}
one() { # build mode size -> bandwidth (MB/s, column 6) or typical latency (us, column 2)
  local b=$1 mode=$2 size=$3 port=$((20000 + RANDOM % 20000)) iters col agentopt=""
  if [ "${TEST%_lat}" != "$TEST" ]; then iters=20000; col=2; else iters=$([ "$size" -le 65536 ] && echo 10000 || echo 1000); col=6; fi
  [ "$mode" = agent ] && agentopt="--agent --srcd $b/src/srcd"
  UCX_SRC_AGENT_SOCKET=@srcpw$$ UCX_SRC_MODE=$mode timeout 120 "$b/contrib/srcrun" $agentopt \
    --module "$b/uct_src/.libs/libuct_src.so" bash -c "
    args='-s $size -n $iters -w $((iters / 10)) -t $TEST -D $DATA -x src -d lo'
    ucx_perftest -p $port \$args >/dev/null 2>&1 &
    for i in \$(seq 100); do ss -ltn | grep -q ':$port ' && break; sleep 0.1; done
    ucx_perftest 127.0.0.1 -p $port \$args -v 2>&1 | grep -E '^ *[0-9]+,' | tail -1 | cut -d, -f$col
    wait"
}
for r in $(seq 1 "$R"); do
  for s in $SIZES; do
    if [ $((r % 2)) = 1 ]; then a=$(one "$A" agent "$s"); b=$(one "$B" agent "$s"); e=$(one "$B" embedded "$s")
    else e=$(one "$B" embedded "$s"); b=$(one "$B" agent "$s"); a=$(one "$A" agent "$s"); fi
    echo "$TEST $s round $r: A-agent $a B-agent $b B-embedded $e"
  done
done
