#!/bin/sh
# ucx_perftest over the src transport, server and client as two processes on loopback: UCT
# level (-x src -d lo: active messages short/short-iov/bcopy/zcopy, put, get) and UCP level
# (UCX_TLS=src,self: tag matching eager and rendezvous, sync, active messages, RMA, stream, the
# error-handling and wake-up modes). Each test must complete and print its final figures.
# Server and client find each other over a socket: a ucx_perftest built with MPI (Debian 13's)
# takes the MPI run-time whenever stdin is no terminal, and then wants to be one of exactly two
# ranks of an mpirun job, unless given -P 0, which one built without MPI (Debian 12's) refuses.
. "$top_srcdir/tests/common.sh"

command -v ucx_perftest >/dev/null || { echo "SKIP: ucx_perftest not installed"; exit 77; }
command -v ss >/dev/null || { echo "SKIP: ss not installed"; exit 77; }
export UCX_NET_DEVICES=lo
preload=$(module_preload)
nompi=
if ucx_perftest -h </dev/null 2>&1 | grep -q 'disable/enable MPI mode'; then
    nompi="-P 0"
fi
# Below the kernel's ephemeral range (32768 and up by default), where no outgoing connection of
# another test takes the port; a server that still finds it taken moves to the next.
port=$((20000 + $$ % 10000))
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# run NAME ARGS...: one server/client pair; fails with both logs when either side fails.
run() {
    name=$1; shift
    binds=0
    while :; do
        port=$((port + 1))
        LD_PRELOAD=$preload timeout --kill-after=5 120 ucx_perftest $nompi -p $port "$@" >"$log.srv" 2>&1 &
        srv=$!
        tries=0
        until ss -ltn "sport = :$port" | grep -q LISTEN; do
            tries=$((tries + 1))
            [ $tries -lt 200 ] || { kill $srv 2>/dev/null; cat "$log.srv"; fail "$name: server did not listen"; }
            kill -0 $srv 2>/dev/null || break
            sleep 0.05
        done
        kill -0 $srv 2>/dev/null && break
        binds=$((binds + 1))
        if ! grep -q "Address already in use" "$log.srv" || [ $binds -ge 5 ]; then
            cat "$log.srv"; fail "$name: server exited"
        fi
    done
    if ! LD_PRELOAD=$preload timeout --kill-after=5 120 ucx_perftest $nompi 127.0.0.1 -p $port "$@" \
            >"$log" 2>&1; then
        kill $srv 2>/dev/null; wait $srv 2>/dev/null || true
        cat "$log" "$log.srv"; rm -f "$log.srv"
        fail "$name failed: ucx_perftest $nompi $*"
    fi
    wait $srv || { cat "$log.srv"; rm -f "$log.srv"; fail "$name: server failed"; }
    rm -f "$log.srv"
    final=$(grep '^Final:' "$log") || { cat "$log"; fail "$name: no final line"; }
    echo "$name: $final"
    if grep -q 'UCX  ERROR\|UCX  WARN' "$log"; then
        cat "$log"; fail "$name printed UCX errors"
    fi
}

uct="-x src -d lo -n 2000 -w 100"
run am_lat_short     -t am_lat $uct -D short -s 8
run am_lat_bcopy     -t am_lat $uct -D bcopy -s 1024
run am_lat_zcopy     -t am_lat $uct -D zcopy -s 4096
run am_bw_short      -t am_bw  $uct -D short -s 64
run am_bw_shortiov   -t am_bw  $uct -D shortiov -s 64
run am_bw_bcopy      -t am_bw  $uct -D bcopy -s 8192
run am_bw_zcopy      -t am_bw  $uct -D zcopy -s 8192
run put_lat_short    -t put_lat $uct -D short -s 8
run put_bw_bcopy     -t put_bw $uct -D bcopy -s 8192
run put_bw_zcopy     -t put_bw $uct -D zcopy -s 1048576 -n 200
run get_bcopy        -t get    $uct -D bcopy -s 4096
run get_zcopy        -t get    $uct -D zcopy -s 1048576 -n 200

export UCX_TLS=src,self
ucp="-n 1000 -w 50"
run tag_lat_8        -t tag_lat $ucp -s 8
run tag_lat_64k      -t tag_lat $ucp -s 65536
run tag_bw_1m        -t tag_bw  $ucp -s 1048576 -n 200
run tag_sync_lat     -t tag_sync_lat $ucp -s 1024
run ucp_am_lat       -t ucp_am_lat $ucp -s 1024
run ucp_am_bw_64k    -t ucp_am_bw $ucp -s 65536
run ucp_put_bw       -t ucp_put_bw $ucp -s 65536
run ucp_get          -t ucp_get $ucp -s 65536
run stream_bw        -t stream_bw $ucp -s 65536
run tag_bw_errmode   -t tag_bw $ucp -s 1048576 -n 200 -e
run tag_lat_wakeup   -t tag_lat $ucp -s 1024 -E sleep
echo "PASS: ucx_perftest over src"
