#!/bin/sh
# The module loads into the stock UCX (no unresolved symbols, constructor runs) and, until the
# transport is implemented, registers nothing that UCP could select.
. "$top_srcdir/tests/common.sh"

[ -r "$module" ] || fail "module not built: $module"
out=$(LD_PRELOAD=$(module_preload) UCX_LOG_LEVEL=debug run_bounded 60 ucx_info -d 2>&1) ||
    { echo "$out"; fail "ucx_info failed with the module preloaded"; }
echo "$out" | grep -q "src module loaded" || { echo "$out"; fail "module constructor did not run"; }
if echo "$out" | grep -q "Transport: src\$"; then
    fail "a 'src' transport is advertised before it is implemented"
fi
echo "PASS: module loads and advertises nothing"
