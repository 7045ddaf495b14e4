// The SYN proof: the MAC input laid out as PROTOCOL.md §7 describes, hashed in one call.
#include "wire/auth.h"

#include <cstring>

namespace srcnic {

uint64_t syn_proof(const SipKey &key, const PacketHeader &h, const LinkAddr &src)
{
    constexpr size_t kAddrBytes = 20;   // family, zero, port, 16 bytes of IP
    uint8_t in[sizeof(PacketHeader) + kAddrBytes];
    PacketHeader copy = h;
    copy.auth = 0;
    copy.crc = 0;
    std::memcpy(in, &copy, sizeof(copy));
    uint8_t *a = in + sizeof(copy);
    std::memset(a, 0, kAddrBytes);
    a[0] = src.family;
    a[2] = static_cast<uint8_t>(src.port & 0xff);
    a[3] = static_cast<uint8_t>(src.port >> 8);
    std::memcpy(a + 4, src.ip, src.family == LinkAddr::kFamilyInet ? 4 : sizeof(src.ip));
    const uint64_t mac = siphash24(key, in, sizeof(in));
    return mac != 0 ? mac : 1;
}

} // namespace srcnic
