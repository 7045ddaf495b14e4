#!/bin/sh
# srcd under socket activation, as contrib/systemd/srcd.socket starts it: the manager listens
# (here systemd-socket-activate, which speaks the same protocol), starts srcd on the first
# connection and hands it the listening socket; srcd serves it and a process attaches through
# it. A stream socket handed over instead is refused with a message naming the unit's option.
. "$top_srcdir/tests/common.sh"

command -v systemd-socket-activate >/dev/null || { echo "SKIP: systemd-socket-activate not installed"; exit 77; }
srcd="$top_builddir/src/srcd"
srcctl="$top_builddir/src/srcctl"
sock="@srcd-activated-$$"
scratch=$(mktemp -d)
trap 'kill $mgr 2>/dev/null || true; if [ -s "$scratch/pid" ]; then kill "$(cat "$scratch/pid")" 2>/dev/null || true; fi; rm -rf "$scratch"' EXIT

systemd-socket-activate --seqpacket -l "$sock" "$srcd" -s "$sock" -a 127.0.0.1 \
    --pid-file "$scratch/pid" >"$scratch/out.txt" 2>&1 &
mgr=$!
run_bounded 30 "$srcctl" -s "$sock" --wait 20 --json >"$scratch/status.json" ||
    { cat "$scratch/out.txt"; fail "the activated srcd did not answer"; }
grep -q "\"socket\":\"$sock\"" "$scratch/status.json" || { cat "$scratch/status.json"; fail "unexpected status"; }
[ -s "$scratch/pid" ] || fail "srcd wrote no pid file"
kill "$(cat "$scratch/pid")"
wait $mgr 2>/dev/null || true

# A stream socket is not what srcd serves: it says which option to use, and exits.
systemd-socket-activate -l "@srcd-stream-$$" "$srcd" -a 127.0.0.1 >"$scratch/stream.txt" 2>&1 &
mgr=$!
python3 - "srcd-stream-$$" <<'PY' || fail "could not connect to the stream socket"
import socket, sys, time
for _ in range(400):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect("\0" + sys.argv[1])
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)
PY
run_bounded 20 sh -c "while kill -0 $mgr 2>/dev/null; do sleep 0.05; done" || fail "srcd kept running on a stream socket"
grep -q "ListenSequentialPacket" "$scratch/stream.txt" || { cat "$scratch/stream.txt"; fail "no clear refusal of a stream socket"; }
echo "PASS: srcd serves the socket a service manager hands it"
exit 0
