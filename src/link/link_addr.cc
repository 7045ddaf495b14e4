// LinkAddr: comparison, hashing, printing and parsing of link-level (IP, UDP port) addresses.
#include "link/link.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstring>

namespace srcnic {

namespace {

// Bytes of ip[] that carry the address for a family (0 for an unset or unknown family).
size_t ip_len(uint8_t family)
{
    switch (family) {
    case AF_INET:
        return 4;
    case AF_INET6:
        return 16;
    default:
        return 0;
    }
}

// Parses a decimal port "0".."65535" that spans all of [begin, end).
bool parse_port(const char *begin, const char *end, uint16_t *port_p)
{
    if (begin == end || end - begin > 5) {
        return false;
    }
    uint32_t value = 0;
    for (const char *c = begin; c != end; ++c) {
        if (*c < '0' || *c > '9') {
            return false;
        }
        value = value * 10 + static_cast<uint32_t>(*c - '0');
    }
    if (value > 0xffff) {
        return false;
    }
    *port_p = static_cast<uint16_t>(value);
    return true;
}

// Parses an IPv6 scope: an interface index or an interface name.
bool parse_scope(const char *text, uint32_t *scope_p)
{
    if (*text == '\0') {
        return false;
    }
    uint64_t value = 0;
    const char *c = text;
    for (; *c >= '0' && *c <= '9' && value <= 0xffffffffULL; ++c) {
        value = value * 10 + static_cast<uint64_t>(*c - '0');
    }
    if (*c == '\0' && value <= 0xffffffffULL) {
        *scope_p = static_cast<uint32_t>(value);
        return true;
    }
    const unsigned index = if_nametoindex(text);
    if (index == 0) {
        return false;
    }
    *scope_p = index;
    return true;
}

// Parses numeric host text of [begin, end): IPv4 dotted quad, or IPv6 with an optional
// "%scope". Fills family, ip and scope_id of *addr_p only on success.
bool parse_host(const char *begin, const char *end, LinkAddr *addr_p)
{
    char text[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
    const size_t len = static_cast<size_t>(end - begin);
    if (len == 0 || len >= sizeof(text)) {
        return false;
    }
    std::memcpy(text, begin, len);
    text[len] = '\0';

    uint8_t ip[16] = {};
    if (inet_pton(AF_INET, text, ip) == 1) {
        addr_p->family = AF_INET;
        std::memcpy(addr_p->ip, ip, sizeof(ip));
        addr_p->scope_id = 0;
        return true;
    }

    uint32_t scope_id = 0;
    char *percent = std::strchr(text, '%');
    if (percent != nullptr) {
        *percent = '\0';
        if (!parse_scope(percent + 1, &scope_id)) {
            return false;
        }
    }
    if (inet_pton(AF_INET6, text, ip) != 1) {
        return false;
    }
    addr_p->family = AF_INET6;
    std::memcpy(addr_p->ip, ip, sizeof(ip));
    addr_p->scope_id = scope_id;
    return true;
}

} // namespace

static_assert(LinkAddr::kFamilyInet == AF_INET && LinkAddr::kFamilyInet6 == AF_INET6,
              "LinkAddr's family constants are the socket API's");

size_t LinkAddr::hash() const
{
    // FNV-1a over the fields that operator== compares, then a final avalanche step.
    uint64_t h = 0xcbf29ce484222325ULL;
    auto mix = [&h](uint8_t byte) {
        h ^= byte;
        h *= 0x100000001b3ULL;
    };
    mix(family);
    mix(static_cast<uint8_t>(port));
    mix(static_cast<uint8_t>(port >> 8));
    for (int shift = 0; shift < 32; shift += 8) {
        mix(static_cast<uint8_t>(scope_id >> shift));
    }
    const size_t len = ip_len(family);
    for (size_t i = 0; i < len; ++i) {
        mix(ip[i]);
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return static_cast<size_t>(h);
}

std::string LinkAddr::to_string() const
{
    char host[INET6_ADDRSTRLEN];
    char text[INET6_ADDRSTRLEN + 32];
    switch (family) {
    case 0:
        return "unset";
    case AF_INET:
        if (inet_ntop(AF_INET, ip, host, sizeof(host)) == nullptr) {
            return "invalid";
        }
        std::snprintf(text, sizeof(text), "%s:%u", host, static_cast<unsigned>(port));
        return text;
    case AF_INET6:
        if (inet_ntop(AF_INET6, ip, host, sizeof(host)) == nullptr) {
            return "invalid";
        }
        if (scope_id != 0) {
            std::snprintf(text, sizeof(text), "[%s%%%u]:%u", host, static_cast<unsigned>(scope_id),
                          static_cast<unsigned>(port));
        } else {
            std::snprintf(text, sizeof(text), "[%s]:%u", host, static_cast<unsigned>(port));
        }
        return text;
    default:
        std::snprintf(text, sizeof(text), "family%u", static_cast<unsigned>(family));
        return text;
    }
}

srcnic_status_t LinkAddr::parse(const char *text, LinkAddr *addr_p)
{
    if (text == nullptr || addr_p == nullptr) {
        return SRCNIC_ERR_INVALID_PARAM;
    }
    const char *end = text + std::strlen(text);
    LinkAddr addr;
    const char *port_begin;
    if (*text == '[') {
        const char *close = std::strchr(text, ']');
        if (close == nullptr || close[1] != ':' ||
            !parse_host(text + 1, close, &addr) || addr.family != AF_INET6) {
            return SRCNIC_ERR_INVALID_PARAM;
        }
        port_begin = close + 2;
    } else {
        const char *colon = std::strrchr(text, ':');
        if (colon == nullptr || !parse_host(text, colon, &addr) || addr.family != AF_INET) {
            return SRCNIC_ERR_INVALID_PARAM;
        }
        port_begin = colon + 1;
    }
    if (!parse_port(port_begin, end, &addr.port)) {
        return SRCNIC_ERR_INVALID_PARAM;
    }
    *addr_p = addr;
    return SRCNIC_OK;
}

srcnic_status_t LinkAddr::from_ip(const char *ip_text, uint16_t port, LinkAddr *addr_p)
{
    if (ip_text == nullptr || addr_p == nullptr) {
        return SRCNIC_ERR_INVALID_PARAM;
    }
    LinkAddr addr;
    if (!parse_host(ip_text, ip_text + std::strlen(ip_text), &addr)) {
        return SRCNIC_ERR_INVALID_PARAM;
    }
    addr.port = port;
    *addr_p = addr;
    return SRCNIC_OK;
}

} // namespace srcnic
