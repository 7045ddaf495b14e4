#!/bin/sh
# perf/scale_sim at a small size, with 1 % loss: embedded (64 engines x 1 QP), agent (64 engines
# x 8 QPs) and agent-dc (the same with a budget of 16 connections, the rest over DC), and agent
# again with another seed. Every message must arrive exactly once (the tool checks each pair's
# sequence and bytes and exits 1 otherwise), the loss must have been real, and the state the tool
# reports must be the engines' own accounting: bytes per connection = the engines' connection
# bytes / their connections (Nic::state_bytes, num_connections), non-zero and the same in every
# run; QP context bytes the same per QP in every run.
. "$top_srcdir/tests/common.sh"

sim="$top_builddir/perf/scale_sim"
[ -x "$sim" ] || fail "not built: $sim"
out=$(mktemp)
trap 'rm -f "$out" "$out".*.json' EXIT

# run SEED ARGS...: one scale_sim run, JSON in $out.N.json. A short initial timeout: DC streams
# wait on it in this harness (perf/README.md, "Scale").
n=0
run() {
    seed=$1; shift
    n=$((n + 1))
    if ! run_bounded 120 "$sim" "$@" --procs 8 --rounds 3 --loss 1 --seed "$seed" --rto-us 2000 \
            --watchdog 30 --json "$out.$n.json" >"$out" 2>&1; then
        cat "$out"
        fail "scale_sim $* (seed $seed) failed"
    fi
    grep -q 'every message exactly once' "$out" || { cat "$out"; fail "no delivery verdict"; }
}
run 1 --mode embedded --nodes 8
run 1 --mode agent,agent-dc --nodes 64 --dests nodes --budget 16
run 2 --mode agent --nodes 64 --dests nodes

python3 - "$out" <<'PY' || fail "the reported state is not the engines' accounting (see above)"
import glob, json, sys
runs = []
for path in sorted(glob.glob(sys.argv[1] + ".*.json")):
    runs += json.load(open(path))["runs"]
assert len(runs) == 4, "expected 4 runs, got %d" % len(runs)
per_conn, per_qp = set(), set()
for r in runs:
    e, n = r["errors"], r["per_node"]
    name = "%s N=%d" % (r["mode"], r["nodes"])
    assert sum(e.values()) == 0, (name, e)
    assert r["loss_drops"] > 0, (name, "the loss dropped nothing")
    assert n["conns"] > 0 and n["bytes_per_conn"] > 0, (name, n)
    assert r["num_connections"] > 0 and r["connection_bytes"] % r["num_connections"] == 0, (name, r)
    assert n["bytes_per_conn"] == r["connection_bytes"] / r["num_connections"], (name, r)
    assert abs(n["connections"] * r["nodes"] - r["connection_bytes"]) < 1.0, (name, r)
    assert n["qps"] > 0, (name, n)
    # Every connection names a remote NIC, and no more are kept than slots name.
    assert n["peer_nics"] > 0, (name, n)
    per_conn.add(n["bytes_per_conn"])
    per_qp.add(n["qps"] * r["nodes"] / r["qps"])
    if r["mode"] == "agent-dc":
        assert r["dc_fallbacks"] > 0 and n["conns"] <= 16 + 2, (name, "DC not used or budget exceeded", n)
    print("%-9s N=%-3d engines %-3d conns/node %6.1f  B/conn %6.0f  B/QP %4.0f  nic B/node %8.0f  loss drops %d"
          % (r["mode"], r["nodes"], r["engines"], n["conns"], n["bytes_per_conn"],
             n["qps"] * r["nodes"] / r["qps"], n["nic"], r["loss_drops"]))
assert len(per_conn) == 1, ("bytes per connection differ between runs", per_conn)
# A connection's context is what tests/link/nic_active_test.cc guards (one cache line); the
# in-flight state of busy ones is counted in "active", the remote NIC it names in "peer_nics"
# (one entry per remote NIC, shared with the DC contexts to it), not per connection.
assert max(per_conn) <= 64, ("a connection costs more than its guarded context", per_conn)
assert len(per_qp) == 1, ("bytes per QP context differ between runs", per_qp)
PY
echo "PASS: scale_sim delivered every message exactly once under 1 % loss (3 modes, 2 seeds); state per connection consistent"
