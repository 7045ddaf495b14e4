#!/bin/bash
# Two alternating rounds of dc_udp_bench, base against new, into the current directory:
# udp-ab.sh BASE_DC_UDP_BENCH NEW_DC_UDP_BENCH
base=$1 new=$2
for i in 1 2; do
  for b in base new; do
    bin=$base; [ $b = new ] && bin=$new
    timeout 1200 $bin --peers 16,64,128,256 --rounds 2000 --modes conn,dc > udp-$b-$i.txt 2>&1
  done
done
