#!/bin/sh
# Nobody outside the job gets in (PROTOCOL.md §7). Three namespace "nodes"
# (contrib/netns-testbed.sh): a 2-rank Open MPI job over UCX_TLS=src,self runs on n1 and n2 while
# srcnic_forge, on n3, knowing only the ranks' engine IPs and ports and what an observer of n1's
# link captured (the job key among it: it is plain text in every header), sends packets under a
# wrong job key, forged first packets, SENDs to every QPN 0..4096, WRITEs and READs with
# guessed rkeys, the captured packets again and a SYN flood (tests/cluster/srcnic_forge.cc).
# Checks: the job passes; nothing came back to the attacker; each victim's counters account for
# the forged packets by the reason they were dropped; none reached a QP or a memory region or
# opened a connection. Skips (77) without root or 'ip netns'. Every step is bounded; the bed (its
# addresses in 198.51.100.0/24 exist only inside its namespaces) is removed on exit, whatever
# happened. SRC_ATTACK_SEED (default 1) seeds the attacker.
. "$top_srcdir/tests/common.sh"

[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for network namespaces"; exit 77; }
command -v ip >/dev/null 2>&1 && ip netns list >/dev/null 2>&1 ||
    { echo "SKIP: 'ip netns' is unavailable"; exit 77; }
command -v unshare >/dev/null 2>&1 || { echo "SKIP: unshare is unavailable"; exit 77; }

testbed="$top_srcdir/contrib/netns-testbed.sh"
srcrun="$top_builddir/contrib/srcrun"
prog="$top_builddir/tests/mpi/mpi_check"
forge="$top_builddir/tests/cluster/srcnic_forge"
seed=${SRC_ATTACK_SEED:-1}
# A bed of our own, so that a developer's bed (default prefix) is left alone.
SRCBED_PREFIX=srcatk$$
export SRCBED_PREFIX OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

scratch=$(mktemp -d)
job=
cleanup() {
    [ -n "$job" ] && kill "$job" 2>/dev/null
    "$testbed" down >/dev/null 2>&1
    rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

run_bounded 60 "$testbed" up 3 >"$scratch/up.txt" 2>&1 || { cat "$scratch/up.txt"; fail "test bed did not come up"; }

$CC -shared -fPIC -I"$top_srcdir/include" -o "$scratch/libsrc_probe.so" \
    "$top_srcdir/perf/src_probe.c" -ldl || fail "cannot build perf/src_probe.c"
preload=$(module_preload)
preload="${preload%"$module"}$scratch/libsrc_probe.so:$module"

# The victims: rounds of mpi_check until the attack is over (at most 240 s). The probe prints
# each engine's address when it starts and its counters when it goes.
LD_PRELOAD="$preload" SRC_PROBE_REPORT=1 UCX_TLS=src,self UCX_NET_DEVICES=veth0 \
    run_bounded 300 "$testbed" mpi "$srcrun" --module "$module" mpirun --host n1:1,n2:1 \
    --bind-to none -x SRC_PROBE_REPORT "$prog" --until "$scratch/stop" 240 \
    >"$scratch/job.txt" 2>&1 &
job=$!

# The attacker knows the victims' IPs and ports: those the engines report (bounded wait).
found=0
for _ in $(seq 1 600); do
    found=$(grep -c 'src_probe: pid [0-9]* engine at 198\.51\.100\.[12]:' "$scratch/job.txt" || true)
    [ "$found" -ge 2 ] && break
    kill -0 "$job" 2>/dev/null || break
    sleep 0.1
done
[ "$found" -ge 2 ] || { cat "$scratch/job.txt"; fail "the job's engines did not start"; }
targets=$(grep -o 'engine at 198\.51\.100\.[12]:[0-9]*' "$scratch/job.txt" | awk '{ print $3 }' | sort -u)
echo "victims: $(echo $targets)"

# What an observer of n1's link sees of the job for 3 s: replays, and the identifiers they show.
run_bounded 30 "$testbed" exec hub "$forge" capture n1 3 20000 "$scratch/capture.bin" \
    >"$scratch/capture.txt" 2>&1 || { cat "$scratch/capture.txt"; fail "capture failed"; }
cat "$scratch/capture.txt"

# The attack, from n3 (its own address, 198.51.100.3), at most 90 s.
echo "attacker seed: $seed (SRC_ATTACK_SEED)"
forge_rc=0
# shellcheck disable=SC2086
run_bounded 120 "$testbed" exec n3 "$forge" attack "$seed" 90 "$scratch/capture.bin" $targets \
    >"$scratch/forge.txt" 2>&1 || forge_rc=$?
cat "$scratch/forge.txt"
# Datagrams the kernel dropped from each victim's sockets (full while its rank was off the CPU;
# /proc/net/udp's last column), before the job ends and its sockets go.
for t in $targets; do
    node=n${t#198.51.100.}
    node=${node%%:*}
    port=$(printf '%04X' "${t##*:}")
    drops=$("$testbed" exec "$node" cat /proc/net/udp |
            awk -v p=":$port" '$2 ~ p"$" { d += $NF } END { print d + 0 }')
    echo "$t $drops" >>"$scratch/kernel_drops.txt"
done
touch "$scratch/stop"
job_rc=0
wait "$job" || job_rc=$?
job=
[ "$job_rc" -eq 0 ] || { cat "$scratch/job.txt"; fail "the MPI job failed beside the attack (exit $job_rc)"; }
grep -q "mpi_check: 2 ranks passed" "$scratch/job.txt" || { cat "$scratch/job.txt"; fail "mpi_check did not pass"; }
grep "mpi_check: 2 ranks passed" "$scratch/job.txt"
[ "$forge_rc" -eq 0 ] || fail "the attacker got answers from the victims (srcnic_forge exit $forge_rc)"
grep -q "forge: answers=0 " "$scratch/forge.txt" || fail "srcnic_forge did not report"
grep -q "time bound reached" "$scratch/forge.txt" && fail "the attack did not finish in its time bound"

# Each victim's counters against what was sent to it.
counter() { # LINE NAME
    echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1 | grep . || echo 0
}
for t in $targets; do
    # A rank has two engines (MPI's two-sided and one-sided UCP workers): each report ends in
    # its address.
    line=$(grep -o "src_probe: pid [0-9]* engine connections .* addr=$t" "$scratch/job.txt" | head -n 1)
    [ -n "$line" ] || { cat "$scratch/job.txt"; fail "no counters from the engine at $t"; }
    sent=$(grep "forge: sent $t " "$scratch/forge.txt")
    echo "victim $t: $line"
    kinds="wrong_job:DROP_WRONG_JOB_KEY wrong_nic:DROP_WRONG_NIC"
    # An engine the capture saw traffic to gets the whole attack; one it did not (an engine of
    # a UCP worker idle during the capture) only the guesses, which need no incarnation.
    if grep -q "forge: $t: .*incarnation seen" "$scratch/forge.txt"; then
        # A guessed id (wrong_gen) that happens to name a live connection the capture did
        # not see (1 in 65,536 per guess and connection) counts as DROP_WRONG_PEER: the two
        # are checked together.
        kinds="$kinds bad_proof:DROP_BAD_PROOF no_conn:DROP_NO_CONN wrong_id:DROP_WRONG_ID"
        echo "${t%:*}" >>"$scratch/fully_attacked.txt"
    fi
    kernel=$(awk -v t="$t" '$1 == t { print $2 }' "$scratch/kernel_drops.txt")
    echo "  the kernel dropped ${kernel:-0} datagrams to it (socket full)"
    total_sent=0
    total_got=0
    for pair in $kinds; do
        kind=${pair%%:*}
        name=${pair#*:}
        if [ "$kind" = wrong_id ]; then
            [ "$(counter "$sent" wrong_gen)" -gt 0 ] && [ "$(counter "$line" DROP_WRONG_GEN)" -gt 0 ] ||
                fail "$t: no wrong_gen packets sent or none counted"
            n=$(($(counter "$sent" wrong_gen) + $(counter "$sent" wrong_peer)))
            got=$(($(counter "$line" DROP_WRONG_GEN) + $(counter "$line" DROP_WRONG_PEER)))
            name="DROP_WRONG_GEN+DROP_WRONG_PEER"
            kind="wrong_gen+wrong_peer"
        else
            n=$(counter "$sent" "$kind")
            got=$(counter "$line" "$name")
        fi
        # Counted under its reason, each forged packet the engine read: never more than were
        # sent (the job's own traffic drops nothing), at least all but what the kernel dropped.
        [ "$n" -gt 0 ] || fail "$t: no $kind packets were sent"
        [ "$got" -gt 0 ] && [ "$got" -le "$n" ] && [ "$got" -ge $((n - ${kernel:-0})) ] ||
            fail "$t: $name=$got for $n $kind packets sent (the kernel dropped ${kernel:-0})"
        echo "  $name=$got of $n $kind packets sent"
        total_sent=$((total_sent + n))
        total_got=$((total_got + got))
    done
    [ "$total_got" -ge $((total_sent - ${kernel:-0})) ] ||
        fail "$t: $total_got forged packets counted of $total_sent sent, ${kernel:-0} dropped by the kernel"
    for name in NO_SUCH_QP ACCESS_ERRORS RECV_TRUNCATED CONN_REFUSED DROP_BAD_LENGTH DROP_BAD_FLAGS; do
        [ "$(counter "$line" "$name")" -eq 0 ] || fail "$t: $name moved: a forged packet got in"
    done
    opened=$(counter "$line" CONN_OPENED)
    [ "$opened" -le 2 ] || fail "$t: $opened connections opened (the job needs at most 2)"
done
# Both ranks' main engines got everything.
[ "$(sort -u "$scratch/fully_attacked.txt" 2>/dev/null | wc -l)" -eq 2 ] ||
    fail "the capture showed the incarnation of no engine on one of the nodes"
echo "PASS: a 2-rank job passed beside the attack; no answer, every forged packet dropped and counted"
