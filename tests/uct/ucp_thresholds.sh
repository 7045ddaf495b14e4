#!/bin/sh
# What UCP makes of the transport's figures, from `ucx_info -e` over src on loopback, at the
# default fragment size and others: the automatic rendezvous threshold of ucp_tag_send lies
# between 16 and 128 KiB. Eager fragments are copied twice more than rendezvous data, which the
# iface's estimate_perf tells UCP; without that, the threshold was 377 KB at 16 KiB fragments,
# where eager messages ran at half of rendezvous' speed. UCX 1.13 selects with protocols v1 and
# prints a tag_send line; UCX 1.18 selects with protocols v2 (its default) and prints a table
# per operation: both are read, whichever ucx_info prints.
. "$top_srcdir/tests/common.sh"

[ -r "$module" ] || fail "module not built: $module"

# Prints the first size ucp_tag_send sends by rendezvous, from either form:
#  v1: "tag_send: 0..<egr/short>..A..<egr/bcopy>..B..<rndv>..(inf)"  -> B
#  v2: the table "tagged message by ucp_tag_send* from host memory" (not the fast-completion or
#      multi variants): its first row whose protocol is a rendezvous, "|  A..B | (?) rendezvous
#      ..." -> A (sizes may carry a K, M or G suffix).
rndv_thresh() {
    out=$(for kv in "$@"; do export "$kv"; done
          UCX_TLS=src UCX_NET_DEVICES=lo LD_PRELOAD="$(module_preload)" \
              run_bounded 60 ucx_info -e -u t 2>&1) ||
        { echo "$out" >&2; fail "ucx_info -e over src failed ($*)"; }
    if line=$(echo "$out" | grep " tag_send: "); then
        echo "$line" | sed -n 's/.*\.\.\([0-9][0-9]*\)\.\.<rndv>.*/\1/p'
        return 0
    fi
    echo "$out" | grep -q "tagged message by ucp_tag_send\* from host memory" ||
        { echo "$out" >&2; fail "neither a tag_send line (protocols v1) nor a ucp_tag_send table (v2) ($*)"; }
    echo "$out" | awk '
        / tagged message by ucp_tag_send\* from host memory / { table = 1; next }
        table && /^# *$/ { exit }
        table && /\| *[0-9][0-9KMG]*\.\.[0-9KMGinf]* *\|.*rendezvous/ {
            r = $0; sub(/^# *\| */, "", r); sub(/\.\..*/, "", r)
            n = r + 0
            if (r ~ /K$/) n *= 1024; else if (r ~ /M$/) n *= 1048576; else if (r ~ /G$/) n *= 1073741824
            print n; exit
        }'
}

for seg in default 8k 16k 64k; do
    if [ "$seg" = default ]; then
        t=$(rndv_thresh)
    else
        t=$(rndv_thresh UCX_SRC_SEG_SIZE=$seg)
    fi
    [ -n "$t" ] || fail "no rendezvous threshold in ucx_info's ucp_tag_send selection (seg $seg)"
    echo "seg_size $seg: rendezvous from $t bytes"
    [ "$t" -ge 16384 ] && [ "$t" -le 131072 ] ||
        fail "rendezvous threshold $t with seg_size $seg: expected 16 KiB .. 128 KiB"
done

echo "PASS: UCP switches to rendezvous between 16 and 128 KiB at every fragment size tried"
