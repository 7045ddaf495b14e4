#!/bin/bash
# Four alternating rounds of dc_bench, base against new, with and without --settle, into the
# current directory: ab.sh BASE_DC_BENCH NEW_DC_BENCH (medians: perf/dc_medians.py over each
# set's four files renamed run1..4.txt).
base=$1 new=$2
for i in 1 2 3 4; do
  for b in base new; do
    bin=$base; [ $b = new ] && bin=$new
    timeout 900 $bin --peers 16,64,256,1024 --rounds 20000 --modes conn,dc,budget64 --settle > $b-settle-$i.txt
    timeout 900 $bin --peers 16,64,256,1024 --rounds 20000 --modes conn,dc,budget64 > $b-plain-$i.txt
  done
done
