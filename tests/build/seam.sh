#!/bin/sh
# The backend seam (doc/ARCHITECTURE.md, "Backends"): protocol code names no backend, and the
# NIC over UDP still calls the link without a virtual call. Protocol code is src/nic (less
# nic_udp.cc, the UDP backend's NIC), src/conn, src/qp, src/mr and src/wire: none of it may
# include a concrete link's header or cast to one. In libsrcnic.so, NicOver<UdpLink>::progress
# must exist and reach the kernel's receive itself (UdpLink's inline common case, no call to an
# out-of-line rx_burst), and the UDP NIC's batch flush must be its own instantiation.
. "$top_srcdir/tests/common.sh"

src="$top_srcdir/src"
bad=$(grep -lE '#include "link/(udp|loopback|faulty)_link\.h"|dynamic_cast<[^>]*Link' \
        "$src"/nic/*.cc "$src"/nic/*.h "$src"/conn/* "$src"/qp/* "$src"/mr/* "$src"/wire/*.h \
        "$src"/wire/*.cc 2>/dev/null | grep -v '/nic/nic_udp\.cc$' || true)
[ -z "$bad" ] || fail "protocol code names a backend: $bad"

command -v objdump >/dev/null && command -v nm >/dev/null ||
    { echo "SKIP: objdump or nm not found (the seam's source check passed)"; exit 77; }
lib="$top_builddir/src/.libs/libsrcnic.so"
[ -e "$lib" ] || fail "not built: $lib"
syms=$(nm -C "$lib")
for s in 'srcnic::NicOver<srcnic::UdpLink>::progress()' \
         'void srcnic::Nic::tx_flush_over<srcnic::UdpLink>()' \
         'srcnic::NicOver<srcnic::Link>::progress()'; do
    echo "$syms" | grep -qF "$s" || fail "libsrcnic.so has no $s"
done
body=$(objdump -d -C --no-show-raw-insn "$lib" |
       awk '/<srcnic::NicOver<srcnic::UdpLink>::progress\(\)>:$/ { on = 1; next } on && /^$/ { exit } on')
[ -n "$body" ] || fail "no disassembly of NicOver<UdpLink>::progress"
echo "$body" | grep -qE 'call.*<(recv|recvmmsg|recvfrom)@plt>' ||
    fail "NicOver<UdpLink>::progress does not call the kernel's receive itself"
echo "$body" | grep -qE 'call.*UdpLink::rx_burst\(' &&
    fail "NicOver<UdpLink>::progress calls an out-of-line UdpLink::rx_burst"
echo "PASS: protocol code names no backend; the UDP NIC's data path is compiled for UdpLink"
