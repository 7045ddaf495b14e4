#!/bin/bash
# usage: [MODE=agent|embedded] mode_run.sh BUILD TAG   (default agent: a srcd of BUILD on its own socket)
b=$1; tag=$2; sock=@abx-$tag-$$
$b/src/srcd -s $sock --pid-file /tmp/abx/$tag.pid --log-file /tmp/abx/$tag.srcd.log || exit 1
port=$((30000 + RANDOM % 2000))
export LD_PRELOAD=$b/uct_src/.libs/libuct_src.so UCX_SRC_MODE=${MODE:-agent} UCX_SRC_AGENT_SOCKET=$sock UCX_TLS=src,self UCX_NET_DEVICES=lo
one() { # test size iters
  port=$((port+1))
  timeout 120 ucx_perftest -p $port -c 0 >/dev/null 2>&1 &
  sleep 0.5
  out=$(timeout 120 ucx_perftest 127.0.0.1 -p $port -c 1 -s $2 -n $3 -w 200 -t $1 $4 -x src -d lo 2>&1 | grep -E "^Final:|^ +[0-9]+ " | tail -1)
  wait
  echo "$tag $1 $2 $out"
}
one am_lat 8 20000 "-D short"
one put_bw 65536 4000 "-D zcopy"
one put_bw 1048576 400 "-D zcopy"
one am_bw 8 100000 "-D short"
kill $(cat /tmp/abx/$tag.pid)
