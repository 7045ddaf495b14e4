#!/usr/bin/env bash
# netns-testbed.sh: K "nodes" on one machine, each a network namespace joined to a bridge by a
# veth link, for multi-node runs of UCX and Open MPI jobs.
#
# usage: netns-testbed.sh up K          create (or complete) nodes n1..nK; idempotent
#        netns-testbed.sh down          remove every node, the hub and their files
#        netns-testbed.sh status        list nodes, addresses and processes
#        netns-testbed.sh exec NODE CMD...   run CMD on NODE (n1..nK or hub)
#        netns-testbed.sh mpi CMD...    run CMD (mpirun, srcrun mpirun, ...) on the hub, set
#                                       up to launch ranks on nodes by name:
#                                       netns-testbed.sh mpi mpirun --host n1:4,n2:4 ./app
#        netns-testbed.sh agents SRCD [ARGS...]  start a node agent (SRCD, e.g. srcd) on every
#                                       node, on each node's own @srcd socket
#        netns-testbed.sh agents-stop   stop them (down stops them too)
#
# Layout (SRCBED_PREFIX, default "srcbed"):
#   srcbed-hub   holds the bridge br0 (198.51.100.254/24) and one port per node (n1..nK);
#                mpirun runs here, its daemons reach it over the bridge.
#   srcbed-nI    node nI: interface veth0 (198.51.100.I/24) and lo; hostname nI.
# Addresses come from TEST-NET-2 (RFC 5737) and exist only inside these namespaces: the host's
# own network namespace gets no address, no route and no link, so nothing leaves the test bed.
# /etc/netns/<ns>/hosts maps n1..nK and hub to their addresses inside the namespaces.
#
# In a node, the src transport's and UCX tcp's device is veth0: pass UCX_NET_DEVICES=veth0
# explicitly.
set -euo pipefail

prefix=${SRCBED_PREFIX:-srcbed}
net=198.51.100          # TEST-NET-2; the host's eth0 lives in TEST-NET-1
hub_ip=$net.254
max_nodes=64
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { echo "netns-testbed: $*" >&2; exit 1; }
need_root() {
    [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces)"
    ip netns list >/dev/null 2>&1 || die "'ip netns' is unavailable"
}
ns_of() {
    case "$1" in
    hub) echo "$prefix-hub" ;;
    n[0-9]*) echo "$prefix-$1" ;;
    [0-9]*) echo "$prefix-n$1" ;;
    *) die "unknown node '$1' (n1..nK or hub)" ;;
    esac
}
ns_exists() { ip netns list | awk '{print $1}' | grep -qx "$1"; }
nodes_up() {
    ip netns list | awk '{print $1}' | sed -n "s/^$prefix-n\([0-9][0-9]*\)$/\1/p" | sort -n
}

# The hosts file every namespace of the bed sees as /etc/hosts.
write_hosts() {
    local k=$1 ns i f
    for ns in "$prefix-hub" $(for i in $(seq 1 "$k"); do echo "$prefix-n$i"; done); do
        mkdir -p "/etc/netns/$ns"
        f="/etc/netns/$ns/hosts"
        {
            echo "127.0.0.1 localhost"
            echo "$hub_ip hub"
            for i in $(seq 1 "$k"); do echo "$net.$i n$i"; done
        } >"$f.tmp"
        mv "$f.tmp" "$f"
    done
}

remove_node() {
    local i=$1 ns="$prefix-n$1"
    kill_ns_procs "$ns"
    ip netns del "$ns" 2>/dev/null || true
    ip -n "$prefix-hub" link del "n$i" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
}

# Processes still running inside a namespace of the bed were started by us: stop them.
kill_ns_procs() {
    local ns=$1 pids
    ns_exists "$ns" || return 0
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -n "$pids" ] || return 0
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        [ -n "$pids" ] || return 0
        sleep 0.2
    done
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
}

cmd_down() {
    local i
    cmd_agents_stop
    for i in $(nodes_up); do remove_node "$i"; done
    kill_ns_procs "$prefix-hub"
    ip netns del "$prefix-hub" 2>/dev/null || true
    rm -rf "/etc/netns/$prefix-hub"
}

cmd_up() {
    local k=${1:-} i ns
    [[ "$k" =~ ^[0-9]+$ ]] && [ "$k" -ge 1 ] && [ "$k" -le $max_nodes ] ||
        die "up needs a node count 1..$max_nodes"
    # An interrupted or failed 'up' leaves nothing behind.
    trap 'echo "netns-testbed: up interrupted, tearing down" >&2; cmd_down; exit 1' INT TERM
    trap 'rc=$?; if [ $rc -ne 0 ]; then cmd_down; fi' EXIT

    ns="$prefix-hub"
    ns_exists "$ns" || ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$ns" link show br0 >/dev/null 2>&1 || ip -n "$ns" link add br0 type bridge
    ip -n "$ns" addr replace "$hub_ip/24" dev br0
    ip -n "$ns" link set br0 up
    for i in $(seq 1 "$k"); do
        ns="$prefix-n$i"
        ns_exists "$ns" || ip netns add "$ns"
        if ! ip -n "$prefix-hub" link show "n$i" >/dev/null 2>&1 ||
           ! ip -n "$ns" link show veth0 >/dev/null 2>&1; then
            ip -n "$prefix-hub" link del "n$i" 2>/dev/null || true
            ip -n "$ns" link del veth0 2>/dev/null || true
            ip link add "n$i" netns "$prefix-hub" type veth peer name veth0 netns "$ns"
        fi
        ip -n "$prefix-hub" link set "n$i" master br0
        ip -n "$prefix-hub" link set "n$i" up
        ip -n "$ns" link set lo up
        ip -n "$ns" addr replace "$net.$i/24" dev veth0
        ip -n "$ns" link set veth0 up
    done
    # Nodes beyond K from an earlier, larger bed go.
    for i in $(nodes_up); do
        [ "$i" -le "$k" ] || remove_node "$i"
    done
    write_hosts "$k"
    # Ready once both ends of every link are up and the bridge forwards on its port (bounded).
    for i in $(seq 1 "$k"); do
        timeout 10 sh -c "until ip -n '$prefix-n$i' -br link show veth0 | grep -qw UP &&
                                ip -n '$prefix-hub' -br link show n$i | grep -qw UP &&
                                bridge -n '$prefix-hub' link show dev n$i | grep -q 'state forwarding'
                          do sleep 0.1; done" ||
            die "the link of node n$i does not come up"
    done
    trap - INT TERM EXIT
    echo "netns-testbed: $k node(s) up: n1..n$k on $net.0/24 (hub $hub_ip)"
}

cmd_status() {
    local i ns
    if ! ns_exists "$prefix-hub"; then echo "netns-testbed: down"; return 0; fi
    echo "hub  $prefix-hub  $hub_ip  processes: $(ip netns pids "$prefix-hub" | wc -l)"
    for i in $(nodes_up); do
        ns="$prefix-n$i"
        printf 'n%-3s %s  %s  processes: %s\n' "$i" "$ns" \
            "$(ip -n "$ns" -br -4 addr show dev veth0 | awk '{print $3, $2}')" \
            "$(ip netns pids "$ns" | wc -l)"
    done
}

# Runs CMD in NODE's namespace with NODE's hostname (a UTS namespace of its own, so that Open MPI
# session directories and UCX host names differ between nodes as on real machines).
cmd_exec() {
    [ $# -ge 2 ] || die "exec needs NODE and a command"
    local node=$1 ns
    shift
    ns=$(ns_of "$node")
    ns_exists "$ns" || die "node '$node' is not up"
    case "$node" in [0-9]*) node="n$node" ;; esac
    exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$node" "$@"
}

# The major version of the Open MPI whose mpirun is on PATH (4, 5, ...; empty without one).
ompi_major() {
    mpirun --version 2>/dev/null | sed -n 's/.*(Open MPI) \([0-9][0-9]*\)\..*/\1/p' | head -n 1
}

# Runs CMD on the hub with Open MPI told to start its daemons through netns-rsh and to keep
# its out-of-band and TCP traffic on the bed's subnet. Open MPI 4 (ORTE) reads the launcher's
# parameters as OMPI_MCA_plm_rsh_*; Open MPI 5's launcher (PRRTE) as PRTE_MCA_plm_ssh_* and
# PRTE_MCA_oob_*, and ignores the former.
cmd_mpi() {
    [ $# -ge 1 ] || die "mpi needs a command"
    ns_exists "$prefix-hub" || die "the test bed is not up"
    case "$(ompi_major)" in
    ''|[0-4])
        export OMPI_MCA_plm_rsh_agent="$here/netns-rsh"
        export OMPI_MCA_oob_tcp_if_include="$net.0/24"
        export OMPI_MCA_plm_rsh_no_tree_spawn=1 ;;
    *)
        export PRTE_MCA_plm_ssh_agent="$here/netns-rsh"
        export PRTE_MCA_oob_tcp_if_include="$net.0/24"
        export PRTE_MCA_plm_ssh_no_tree_spawn=1 ;;
    esac
    : "${OMPI_MCA_btl_tcp_if_include:=$net.0/24}"
    export OMPI_MCA_btl_tcp_if_include
    export SRCBED_PREFIX="$prefix"
    cmd_exec hub "$@"
}

# Starts SRCD ARGS on every node (its socket, @srcd by default, is the node's: abstract sockets
# belong to a network namespace); each returns once it serves. Pid files: /run/$prefix-nI.srcd.
cmd_agents() {
    [ $# -ge 1 ] || die "agents needs the srcd to run"
    local srcd=$1 i
    shift
    for i in $(nodes_up); do
        ip netns exec "$prefix-n$i" "$srcd" --pid-file "/run/$prefix-n$i.srcd" "$@" ||
            die "srcd did not start on n$i"
    done
}

cmd_agents_stop() {
    local f pid n
    for f in /run/"$prefix"-n*.srcd; do
        [ -f "$f" ] || continue
        pid=$(cat "$f")
        kill "$pid" 2>/dev/null || true
        rm -f "$f"
        # Gone before this returns (up to 5 s): a new agent on the node takes its socket.
        n=0
        while kill -0 "$pid" 2>/dev/null && [ $n -lt 100 ]; do
            sleep 0.05
            n=$((n + 1))
        done
    done
}

[ $# -ge 1 ] || { sed -n '2,14s/^# \{0,1\}//p' "$0"; exit 2; }
sub=$1
shift
case "$sub" in
-h|--help|help) sed -n '2,26s/^# \{0,1\}//p' "$0" ;;
up) need_root; cmd_up "$@" ;;
down) need_root; cmd_down ;;
status) need_root; cmd_status ;;
exec) need_root; cmd_exec "$@" ;;
mpi) need_root; cmd_mpi "$@" ;;
agents) need_root; cmd_agents "$@" ;;
agents-stop) need_root; cmd_agents_stop ;;
*) die "unknown command '$sub' (up K | down | status | exec NODE CMD | mpi CMD | agents SRCD | agents-stop)" ;;
esac
