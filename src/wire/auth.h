// The proof a connection's first packets carry (PROTOCOL.md §7): a SipHash-2-4 MAC, keyed by the
// receiving NIC's secret, over the header and the address the packet comes from. Only a sender
// given the receiver's address (secret included) can make one; a proof seen on the wire is
// good for that header from that address only.
#ifndef SRCNIC_WIRE_AUTH_H
#define SRCNIC_WIRE_AUTH_H

#include "core/siphash.h"
#include "link/link.h"
#include "wire/header.h"

#include <cstdint>

namespace srcnic {

// The SipHash key of a NIC's proofs: k0 its secret, k1 its incarnation (both from its address;
// the secret is published nowhere else).
inline SipKey nic_key(uint64_t secret, uint64_t incarnation)
{
    return SipKey{secret, incarnation};
}

// The proof for header h sent from src (the sender's address as the receiver sees it: its bound
// IP and port) to the NIC whose key is key: SipHash-2-4 over the header with auth and crc zero,
// then family (1 byte), a zero byte, port (2 bytes, little-endian) and the IP (16 bytes, an
// IPv4 address in the first 4, the rest zero). The scope id is left out: it names an interface
// of the host that reads it, not the sender. Never 0 (0 means "no proof"): a MAC of 0 is
// sent as 1.
uint64_t syn_proof(const SipKey &key, const PacketHeader &h, const LinkAddr &src);

} // namespace srcnic

#endif
