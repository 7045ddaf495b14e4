#!/bin/sh
# The module loads into the stock UCX (no unresolved symbols), registers the "src" component
# and transport with one device per interface (lo at least), and documents every knob in
# ucx_info -c -f.
. "$top_srcdir/tests/common.sh"

[ -r "$module" ] || fail "module not built: $module"
out=$(LD_PRELOAD=$(module_preload) run_bounded 60 ucx_info -d 2>&1) ||
    { echo "$out"; fail "ucx_info -d failed with the module preloaded"; }
echo "$out" | grep -q "Memory domain: src$" || { echo "$out"; fail "no src memory domain"; }
echo "$out" | grep -q "Transport: src$" || { echo "$out"; fail "no src transport"; }
# The device line right after "Transport: src" (tcp has a lo device too).
echo "$out" | grep -A1 "Transport: src$" | grep -q "Device: lo$" ||
    { echo "$out"; fail "no src device named lo"; }
# Without the module, stock UCX has no src transport (the module is what adds it).
if ucx_info -d 2>/dev/null | grep -q "Transport: src$"; then
    fail "a src transport exists without the module"
fi

cfg=$(LD_PRELOAD=$(module_preload) run_bounded 60 ucx_info -c -f 2>&1) ||
    { echo "$cfg"; fail "ucx_info -c -f failed"; }
for v in SEG_SIZE TX_QUEUE_LEN RX_QUEUE_LEN RX_MAX_BUFS MTU WINDOW RTO RTO_MAX RETRY_COUNT \
         PEER_TIMEOUT RNR_DELAY MAX_CONNECTIONS NUM_DCI DC_TARGETS DC_POLICY DC_QUOTA DC_PROMOTE MAX_INFLIGHT RX_BUFFERS SOCK_BUF PEER_SOCKETS JOB_KEY \
         TX_COALESCE ASYNC_INTERVAL FAULT_DROP FAULT_CORRUPT FAULT_SEED; do
    echo "$cfg" | grep -q "^UCX_SRC_$v=" || fail "UCX_SRC_$v is not documented in ucx_info -c -f"
done

# A bad value stops with a message naming it.
err=$(LD_PRELOAD=$(module_preload) UCX_SRC_TX_QUEUE_LEN=100 run_bounded 60 ucx_info -d 2>&1 || true)
echo "$err" | grep -q "UCX_SRC_TX_QUEUE_LEN=100" || { echo "$err"; fail "bad TX_QUEUE_LEN not reported"; }
err=$(LD_PRELOAD=$(module_preload) UCX_SRC_RX_MAX_BUFS=100 run_bounded 60 ucx_info -d 2>&1 || true)
echo "$err" | grep -q "UCX_SRC_RX_MAX_BUFS=100 is less than UCX_SRC_RX_QUEUE_LEN=256" ||
    { echo "$err"; fail "RX_MAX_BUFS below RX_QUEUE_LEN not reported"; }
err=$(LD_PRELOAD=$(module_preload) UCX_SRC_PEER_SOCKETS=65 run_bounded 60 ucx_info -d 2>&1 || true)
echo "$err" | grep -q "peer_sockets=65" ||
    { echo "$err"; fail "PEER_SOCKETS above 64 not reported"; }
err=$(LD_PRELOAD=$(module_preload) UCX_SRC_NUM_DCI=5000 run_bounded 60 ucx_info -d 2>&1 || true)
echo "$err" | grep -q "num_dci=5000" || { echo "$err"; fail "NUM_DCI above 4096 not reported"; }
echo "PASS: module registers src on every interface and documents its configuration"
