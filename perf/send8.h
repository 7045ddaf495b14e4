// An 8-byte SEND carried inline in its WQE: the message the DC benchmarks (dc_bench,
// dc_udp_bench) exchange.
#ifndef SRCNIC_PERF_SEND8_H
#define SRCNIC_PERF_SEND8_H

#include <srcnic/srcnic.h>

#include <cstdint>
#include <cstring>

inline srcnic_wqe_t send8(srcnic_dest_t dest, uint64_t wr_id, uint64_t value)
{
    srcnic_wqe_t w = {};
    w.wr_id = wr_id;
    w.opcode = SRCNIC_OP_SEND;
    w.dest = dest;
    w.flags = SRCNIC_WQE_FLAG_INLINE;
    w.inline_len = 8;
    std::memcpy(w.u.inline_data, &value, 8);
    return w;
}

#endif
