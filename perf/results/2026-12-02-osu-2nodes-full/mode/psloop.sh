#!/bin/bash
# psloop.sh OUT N: samples the osu_bw processes' CPUs every 0.5 s, N times
for i in $(seq 1 $2); do ps -eo pid,psr,pcpu,comm | awk '$4=="osu_bw"{printf "%s:%s:%s ", $1,$2,$3}'; echo; sleep 0.5; done > $1
