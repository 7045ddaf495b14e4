// Engine configuration defaults (srcnic_config_init) and validation.
#include "core/nic_config.h"

#include "core/log.h"

#include <algorithm>
#include <cstring>

extern "C" void srcnic_config_init(srcnic_config_t *config)
{
    std::memset(config, 0, sizeof(*config));
    std::strcpy(config->bind_addr, "127.0.0.1");
    config->port = 0;
    config->mtu = 0;
    config->window = 0;
    config->rto_us = 5000;
    config->rto_max_us = 200000;
    config->retry_count = 16;
    config->peer_timeout_ms = 10000;
    config->rnr_delay_us = 100;
    config->max_connections = 4096;
    config->max_inflight = 4096;
    config->rx_buffers = 0;
    config->sock_buf = 8u << 20;
    config->peer_sockets = 4;
    config->job_key = 0;
    config->fault_seed = 1;
    config->num_dci = 32;
    config->dc_targets = 64;
    config->dc_quota = 32;
    config->dc_promote = 256;
    config->dc_evict_us = 1000;
}

extern "C" void srcnic_qp_config_init(srcnic_qp_config_t *config)
{
    config->sq_size = 256;
    config->rq_size = 256;
}

namespace srcnic {

namespace {

bool in_range(const char *name, uint64_t value, uint64_t min, uint64_t max)
{
    if (value < min || value > max) {
        SRCNIC_LOG_ERROR("invalid %s=%llu: must be between %llu and %llu", name,
                         static_cast<unsigned long long>(value),
                         static_cast<unsigned long long>(min),
                         static_cast<unsigned long long>(max));
        return false;
    }
    return true;
}

bool probability(const char *name, double p)
{
    if (!(p >= 0.0 && p <= 1.0)) {
        SRCNIC_LOG_ERROR("invalid %s=%g: must be a probability between 0 and 1", name, p);
        return false;
    }
    return true;
}

} // namespace

uint32_t window_for(const srcnic_config_t &config, uint32_t seg_payload)
{
    // Automatic: enough packets for kAutoWindowBytes in flight where packets are small. The
    // peer computes the same for us (the path is local for both ends or for neither), so the
    // receiver's reorder slots match what the sender keeps in flight.
    if (config.window != 0) {
        return config.window;
    }
    const uint32_t payload = std::max<uint32_t>(1, seg_payload);
    const uint32_t packets = (kAutoWindowBytes + payload - 1) / payload;
    return std::min(kMaxWindow, std::max(kAutoWindowMin, packets));
}

srcnic_status_t validate_config(const srcnic_config_t &c)
{
    bool ok = (c.window == 0 || in_range("window", c.window, 2, kMaxWindow)) &&
              in_range("rto_us", c.rto_us, 10, 10000000) &&
              in_range("rto_max_us", c.rto_max_us, c.rto_us, 60000000) &&
              in_range("retry_count", c.retry_count, 1, 1000) &&
              in_range("peer_timeout_ms", c.peer_timeout_ms, 1, 3600000) &&
              in_range("rnr_delay_us", c.rnr_delay_us, 1, 1000000) &&
              in_range("max_connections", c.max_connections, 1, kMaxConnections) &&
              in_range("num_dci", c.num_dci, 0, kMaxDci) &&
              in_range("dc_targets", c.dc_targets, 0, kMaxDcTargets) &&
              in_range("dc_quota", c.dc_quota, 0, 1u << 20) &&
              in_range("dc_promote", c.dc_promote, 0, 1u << 20) &&
              in_range("max_active", c.max_active, 0, kMaxConnections) &&
              in_range("dc_evict_us", c.dc_evict_us, 1, 10000000) &&
              in_range("max_inflight", c.max_inflight, 16, 1u << 20) &&
              (c.rx_buffers == 0 || in_range("rx_buffers", c.rx_buffers, 64, 1u << 20)) &&
              in_range("sock_buf", c.sock_buf, 4096, 1u << 30) &&
              in_range("peer_sockets", c.peer_sockets, 0, 64) &&
              probability("fault_drop", c.fault_drop) &&
              probability("fault_duplicate", c.fault_duplicate) &&
              probability("fault_reorder", c.fault_reorder) &&
              probability("fault_corrupt", c.fault_corrupt);
    if (ok && (c.mtu != 0 && c.mtu < kMinMtu)) {
        SRCNIC_LOG_ERROR("invalid mtu=%u: must be 0 (automatic) or at least %u", c.mtu, kMinMtu);
        ok = false;
    }
    if (ok && c.max_connections + c.num_dci + c.dc_targets > kMaxConnections) {
        SRCNIC_LOG_ERROR("invalid max_connections=%u + num_dci=%u + dc_targets=%u: they share "
                         "%u slots", c.max_connections, c.num_dci, c.dc_targets, kMaxConnections);
        ok = false;
    }
    if (ok && memchr(c.bind_addr, '\0', sizeof(c.bind_addr)) == nullptr) {
        SRCNIC_LOG_ERROR("invalid bind_addr: not terminated");
        ok = false;
    }
    return ok ? SRCNIC_OK : SRCNIC_ERR_INVALID_PARAM;
}

} // namespace srcnic
