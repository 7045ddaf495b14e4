// The UDP backend's NIC: opens the UDP link (wrapped in the faulty link when fault injection is
// configured) and creates the Nic with its data path compiled for UdpLink (nic_over.h). A later
// backend adds a file like this one; protocol code does not change.
#include "nic/nic_over.h"

#include "core/log.h"
#include "core/nic_config.h"
#include "link/faulty_link.h"
#include "link/udp_link.h"

#include <cstring>

namespace srcnic {

srcnic_status_t Nic::create_udp(const srcnic_config_t &config, std::unique_ptr<Nic> *nic_p)
{
    // Checked before the link opens, so a bad value is reported as the config's.
    srcnic_status_t status = validate_config(config);
    if (status != SRCNIC_OK) {
        return status;
    }
    UdpLinkConfig udp;
    status = LinkAddr::from_ip(config.bind_addr, config.port, &udp.bind_addr);
    if (status != SRCNIC_OK) {
        SRCNIC_LOG_ERROR("bind address '%s' is not a numeric IPv4 or IPv6 address",
                         config.bind_addr);
        return status;
    }
    // A connection's first packets prove the address they come from (PROTOCOL.md §7), which a
    // NIC on the wildcard address does not know: the kernel picks it per route.
    static const uint8_t kZeroIp[sizeof(udp.bind_addr.ip)] = {};
    if (std::memcmp(udp.bind_addr.ip, kZeroIp, sizeof(kZeroIp)) == 0) {
        SRCNIC_LOG_ERROR("bind address '%s' is the wildcard: a NIC must be bound to the address "
                         "its peers see it at", config.bind_addr);
        return SRCNIC_ERR_INVALID_PARAM;
    }
    udp.mtu = config.mtu;
    udp.sock_buf_size = config.sock_buf;
    udp.peer_sockets = config.peer_sockets;
    std::unique_ptr<Link> link;
    status = UdpLink::open(udp, &link);
    if (status != SRCNIC_OK) {
        return status;
    }
    if (config.fault_drop > 0 || config.fault_duplicate > 0 || config.fault_reorder > 0 ||
        config.fault_corrupt > 0) {
        // Test-only fault injection, applied to received datagrams.
        FaultyLinkConfig fc;
        fc.rx.drop = config.fault_drop;
        fc.rx.duplicate = config.fault_duplicate;
        fc.rx.reorder = config.fault_reorder;
        fc.rx.corrupt = config.fault_corrupt;
        fc.seed = config.fault_seed;
        std::unique_ptr<FaultyLink> faulty;
        status = FaultyLink::open(std::move(link), fc, &faulty);
        if (status != SRCNIC_OK) {
            return status;
        }
        return create(config, std::move(faulty), nic_p);   // generic: a test setting
    }
    return create_over<UdpLink>(config, std::move(link), nic_p);
}

} // namespace srcnic
