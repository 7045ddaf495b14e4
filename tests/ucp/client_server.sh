#!/bin/sh
# UCP applications that connect by socket address (a listener and ucp_ep_create() with a socket
# address: UCX's client/server flow) run over src (tests/ucp/client_server.c). A server serves
# four clients: two at once, one that leaves after its first round without a goodbye, and one
# more; then it closes its listener, and a late client must fail to connect, not hang. Every
# round's tag, stream and active messages (8 B to 300 KB) are echoed and checked.
#   1. loopback, UCX_TLS=src alone, embedded engines;
#   2. loopback, UCX_TLS=src,tcp: src must carry every data lane (UCP keeps both on `lo`);
#   3. two namespace nodes (contrib/netns-testbed.sh), server on n2, clients on n1, UCX_TLS=src
#      (root and 'ip netns' only; otherwise, or with SRC_CS_LOOPBACK_ONLY=1, the loopback cases
#      alone run).
# The engines are embedded, or on a node agent where UCX_SRC_MODE says so (tests/agent).
# Every step is bounded in time.
. "$top_srcdir/tests/common.sh"

prog="$top_builddir/tests/ucp/client_server"
[ -x "$prog" ] || fail "not built: $prog"
own_testbed srccs   # brought up only for case 3
export SRC_CS_TIMEOUT=60

# run_case LABEL IP SERVER_PREFIX CLIENT_PREFIX: SERVER_PREFIX and CLIENT_PREFIX run a command
# where the server and the clients live (empty: here). The environment selects the transport.
run_case() {
    label=$1 ip=$2 on_server=$3 on_client=$4
    out="$scratch/$label"
    mkdir -p "$out"
    : >"$out/server.txt"   # there before the server writes it: read from the first poll on
    # shellcheck disable=SC2086
    timeout --kill-after=5 120 $on_server "$prog" server "$ip" 4 >>"$out/server.txt" 2>&1 &
    server=$!
    port=
    tries=0
    while [ -z "$port" ]; do
        port=$(sed -n 's/^port //p' "$out/server.txt")
        kill -0 "$server" 2>/dev/null || { cat "$out/server.txt"; fail "$label: the server exited"; }
        tries=$((tries + 1))
        [ $tries -le 300 ] || { cat "$out/server.txt"; fail "$label: no port from the server"; }
        [ -n "$port" ] || sleep 0.1
    done
    client() { # ID ROUNDS [FLAGS]
        # shellcheck disable=SC2086
        timeout --kill-after=5 90 $on_client "$prog" client "$ip" "$port" "$@" \
            >"$out/client$1.txt" 2>&1
    }
    client 1 5 --lanes & c1=$!
    client 2 5 & c2=$!
    client 3 1 --leave || { cat "$out/client3.txt"; fail "$label: the leaving client failed"; }
    client 4 5 || { cat "$out/client4.txt"; fail "$label: client 4 failed"; }
    wait $c1 || { cat "$out/client1.txt"; fail "$label: client 1 failed"; }
    wait $c2 || { cat "$out/client2.txt"; fail "$label: client 2 failed"; }
    # The listener closes once four clients came; a fifth must fail, with status 2.
    tries=0
    until grep -q "^listener closed" "$out/server.txt"; do
        tries=$((tries + 1))
        [ $tries -le 300 ] || { cat "$out/server.txt"; fail "$label: the listener did not close"; }
        sleep 0.1
    done
    rc=0
    client 5 1 || rc=$?
    [ $rc -eq 2 ] || { cat "$out/client5.txt"; fail "$label: a client of a closed listener got status $rc, not 2"; }
    rc=0
    wait $server || rc=$?
    [ $rc -eq 0 ] || { cat "$out/server.txt"; fail "$label: the server failed ($rc)"; }
    grep -q "^server: 4 clients, 3 said goodbye" "$out/server.txt" &&
        grep -q "^server: client 3 went away" "$out/server.txt" ||
        { cat "$out/server.txt"; fail "$label: the server did not see 3 goodbyes and client 3 leave"; }
    for i in 1 2 4; do
        grep -q "^client $i: 5 rounds passed" "$out/client$i.txt" ||
            { cat "$out/client$i.txt"; fail "$label: client $i did not pass"; }
    done
    # The lanes client 1 printed: every one but the connection manager's is src's.
    grep "lane\[" "$out/client1.txt" >"$out/lanes.txt" ||
        { cat "$out/client1.txt"; fail "$label: client 1 printed no lanes"; }
    if grep -v ": cm " "$out/lanes.txt" | grep -qv " [0-9]*:src/"; then
        cat "$out/lanes.txt"
        fail "$label: a data lane is not on src"
    fi
    grep -q " [0-9]*:src/.* am " "$out/lanes.txt" ||
        { cat "$out/lanes.txt"; fail "$label: the active-message lane is not on src"; }
    echo "PASS: $label: 4 clients served, one left, a late one refused; lanes:"
    sed 's/^/  /' "$out/lanes.txt"
}

preload=$(module_preload)
LD_PRELOAD=$preload UCX_TLS=src UCX_NET_DEVICES=lo run_case loopback-src 127.0.0.1 "" ""
LD_PRELOAD=$preload UCX_TLS=src,tcp UCX_NET_DEVICES=lo run_case loopback-src-tcp 127.0.0.1 "" ""

if [ -z "${SRC_CS_LOOPBACK_ONLY:-}" ] && [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null 2>&1 && ip netns list >/dev/null 2>&1 &&
   command -v unshare >/dev/null 2>&1; then
    run_bounded 60 "$testbed" up 2 >"$scratch/up.txt" 2>&1 ||
        { cat "$scratch/up.txt"; fail "test bed did not come up"; }
    LD_PRELOAD=$preload UCX_TLS=src UCX_NET_DEVICES=veth0 \
        run_case two-nodes-src 198.51.100.2 "$testbed exec n2" "$testbed exec n1"
else
    echo "two namespace nodes: skipped (SRC_CS_LOOPBACK_ONLY, or no root, 'ip netns' or unshare)"
fi
