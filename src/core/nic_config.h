// Limits of the engine configuration and its validation.
#ifndef SRCNIC_CORE_NIC_CONFIG_H
#define SRCNIC_CORE_NIC_CONFIG_H

#include <srcnic/srcnic.h>

#include <cstdint>

namespace srcnic {

constexpr uint32_t kMaxWindow = 1024;          // packets in flight per connection
// The automatic window (srcnic_config_t.window = 0): kAutoWindowMin packets, or as many as hold
// kAutoWindowBytes of payload where packets are small (a 1500-byte interface: 575),
// at most kMaxWindow.
constexpr uint32_t kAutoWindowMin = 128;
constexpr uint32_t kAutoWindowBytes = 768 * 1024;
// The automatic window keeps no more full packets in flight than the link's receive queue holds
// (a small socket buffer), but at least this many.
constexpr uint32_t kMinFullWindow = 4;
// Packet buffers of the automatic rx_buffers (0): twice the widest window, at least this many.
constexpr uint32_t kAutoRxBuffersMin = 256;
constexpr uint32_t kMaxConnections = 65534;    // peer-table slots (16-bit slot in the id):
                                               // connections, DCIs and DC target contexts
constexpr uint32_t kMaxDci = 4096;
constexpr uint32_t kMaxDcTargets = 4096;
constexpr uint32_t kMaxRemotes = 65535;        // destinations' remote NICs (16-bit index)
// Closed DC streams remembered per DC target context (PROTOCOL.md §8.4).
constexpr uint32_t kDcClosedPerTarget = 64;
// A DCI goes back to the pool (its stream closed) after this long quiet (PROTOCOL.md §8.5).
constexpr uint64_t kDcMinQuietNs = 1000 * 1000;
// After a DC target refuses a stream for want of a context (DC_BUSY), its contexts ask their
// DCIs to close their streams once quiet (kFlagDcRelease) for this long (PROTOCOL.md §8.3).
constexpr uint64_t kDcCrowdNs = 10 * 1000 * 1000;
// DCIs that ran requests sent back along their stream wait for their DC_CLOSE's confirmation
// beside the attached ones: at most this many per DCI of the pool; from half of that on, the
// DCIs no longer offer to run such requests (kFlagDcReverse, PROTOCOL.md §8.8).
constexpr uint32_t kDcClosingPerDci = 4;
// A DC peer is promoted to a connection after dc_promote requests within this window
// (PROTOCOL.md §8.6), and an idle connection must have carried nothing for this long to be
// closed for it.
constexpr uint64_t kPromoteWindowNs = 10 * 1000 * 1000;
constexpr uint64_t kDemoteIdleNs = 10 * 1000 * 1000;
// After a refused promotion (no idle connection, or USE_DC from the peer), none before this.
constexpr uint64_t kPromoteBackoffNs = 100 * 1000 * 1000;
constexpr uint32_t kMinMtu = 512;              // smallest usable datagram, bytes

// Packets in flight for a connection whose packets carry seg_payload bytes: the configured
// window, or the automatic one.
uint32_t window_for(const srcnic_config_t &config, uint32_t seg_payload);

// OK, or INVALID_PARAM after logging which value is wrong and what range it must be in.
srcnic_status_t validate_config(const srcnic_config_t &config);

} // namespace srcnic

#endif
