#!/bin/sh
# What UCP makes of the transport's figures (protocols v1, the default of UCX 1.13), from
# `ucx_info -e` over src on loopback, at the default fragment size and others: the automatic
# rendezvous threshold lies between 16 and 128 KiB. Eager fragments are copied twice more than
# rendezvous data, which the iface's estimate_perf tells UCP; without that, the threshold was
# 377 KB at 16 KiB fragments, where eager messages ran at half of rendezvous' speed.
. "$top_srcdir/tests/common.sh"

[ -r "$module" ] || fail "module not built: $module"

# The tag_send line: "tag_send: 0..<egr/short>..A..<egr/bcopy>..B..<rndv>..(inf)"; prints B,
# the first size sent by rendezvous.
rndv_thresh() {
    out=$(for kv in "$@"; do export "$kv"; done
          UCX_TLS=src UCX_NET_DEVICES=lo LD_PRELOAD="$(module_preload)" \
              run_bounded 60 ucx_info -e -u t 2>&1) ||
        { echo "$out" >&2; fail "ucx_info -e over src failed ($*)"; }
    line=$(echo "$out" | grep " tag_send: ") || { echo "$out" >&2; fail "no tag_send line ($*)"; }
    echo "$line" | sed -n 's/.*\.\.\([0-9][0-9]*\)\.\.<rndv>.*/\1/p'
}

for seg in default 8k 16k 64k; do
    if [ "$seg" = default ]; then
        t=$(rndv_thresh)
    else
        t=$(rndv_thresh UCX_SRC_SEG_SIZE=$seg)
    fi
    [ -n "$t" ] || fail "no rendezvous threshold in ucx_info's tag_send line (seg $seg)"
    echo "seg_size $seg: rendezvous from $t bytes"
    [ "$t" -ge 16384 ] && [ "$t" -le 131072 ] ||
        fail "rendezvous threshold $t with seg_size $seg: expected 16 KiB .. 128 KiB"
done

echo "PASS: UCP switches to rendezvous between 16 and 128 KiB at every fragment size tried"
