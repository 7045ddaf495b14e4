// Memory the NIC cannot touch directly: an attached process's outside the arena it shares with
// the agent, reached by cross-memory attach. Transmitted bytes are read a block at a time into
// a staging cache, so that one system call feeds every packet of a block (47 packets of a
// 1500-byte path per 64 KiB); received bytes that continue the same range are written back
// with one call (write-behind), at the latest when the receive burst ends or before a
// completion is written, so that nothing that depends on them is seen first.
#include "nic/nic.h"

#include "core/log.h"

#include <algorithm>
#include <cstring>

namespace srcnic {

bool read_request(const srcnic_wqe_t &wqe, AddrSpace &space, uint64_t off, uint32_t len, uint8_t *dst)
{
    for (unsigned i = 0; i < wqe.num_sge && len > 0; ++i) {
        const srcnic_sge_t &sge = wqe.u.sge[i];
        if (off >= sge.length) {
            off -= sge.length;
            continue;
        }
        const uint32_t take = std::min<uint64_t>(len, sge.length - off);
        if (!space.read(dst, sge.addr + off, take)) {
            return false;
        }
        dst += take;
        len -= take;
        off = 0;
    }
    return len == 0;
}

const uint8_t *Nic::stage(const TxMsg &m, AddrSpace &space, uint64_t off, uint32_t len, uint64_t total)
{
    if (!stage_) {
        stage_.reset(new StageBlock[kStageBlocks]);
    }
    StageBlock *victim = nullptr;
    for (unsigned i = 0; i < kStageBlocks; ++i) {
        StageBlock &b = stage_[i];
        if (b.serial == m.serial && off >= b.off && off + len <= b.off + b.len) {
            b.batch = tx_batch_id_;
            b.used = ++stage_clock_;
            stage_last_ = i;
            return b.data.get() + (off - b.off);
        }
        if (b.batch != tx_batch_id_ && (victim == nullptr || b.used < victim->used)) {
            victim = &b;   // not pointed into by the batch being built: free to reuse
        }
    }
    if (victim == nullptr) {
        // (Cannot happen: a batch points into at most kTxBatch blocks, and there is one more.)
        SRCNIC_LOG_RATELIMITED(LogLevel::kError, "no staging block free");
        return nullptr;
    }
    if (!victim->data) {
        victim->data.reset(new uint8_t[kStageBlockBytes]);
    }
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(std::max(len, kStageBlockBytes), total - off));
    const bool ok = m.kind == TxMsg::Kind::kReadResponse
                        ? space.read(victim->data.get(), m.src_addr + off, n)
                        : read_request(m.wqe, space, off, n, victim->data.get());
    if (!ok || n < len) {
        victim->serial = 0;
        return nullptr;
    }
    victim->serial = m.serial;
    victim->off = off;
    victim->len = n;
    victim->batch = tx_batch_id_;
    victim->used = ++stage_clock_;
    stage_last_ = static_cast<unsigned>(victim - stage_.get());
    return victim->data.get();
}

bool Nic::gather_from(const TxMsg &m, AddrSpace &space, uint64_t off, uint32_t len, struct iovec *iov,
                      uint32_t *n)
{
    bool direct = true;
    for (uint32_t i = 0; i < *n && direct; ++i) {
        direct = space.direct(reinterpret_cast<uint64_t>(iov[i].iov_base), iov[i].iov_len) != nullptr;
    }
    if (direct) {
        for (uint32_t i = 0; i < *n; ++i) {
            iov[i].iov_base = space.direct(reinterpret_cast<uint64_t>(iov[i].iov_base), iov[i].iov_len);
        }
        return true;
    }
    const uint8_t *p = stage(m, space, off, len, m.offset + m.length);
    if (p == nullptr) {
        return false;
    }
    iov[0].iov_base = const_cast<uint8_t *>(p);
    iov[0].iov_len = len;
    *n = 1;
    return true;
}

void Nic::write_behind(AddrSpace &space, uint64_t addr, const uint8_t *src, uint32_t len, TxMsg *read)
{
    if (len == 0) {
        return;
    }
    if (uint8_t *to = space.direct(addr, len)) {
        std::memcpy(to, src, len);
        return;
    }
    if (wb_.len != 0 && (wb_.space != &space || wb_.addr + wb_.len != addr || wb_.read != read ||
                         wb_.len + len > kStageBlockBytes)) {
        flush_writes();
    }
    if (len > kStageBlockBytes) {
        wb_ = WriteBehind{&space, addr, 0, read, read != nullptr ? read->serial : 0, std::move(wb_.buf)};
        if (!space.write(addr, src, len)) {
            count(SRCNIC_CNT_ACCESS_ERRORS);
            if (read != nullptr) {
                read->status = SRCNIC_ERR_INVALID_ADDR;
            }
        }
        return;
    }
    if (!wb_.buf) {
        wb_.buf.reset(new uint8_t[kStageBlockBytes]);
    }
    if (wb_.len == 0) {
        wb_.space = &space;
        wb_.addr = addr;
        wb_.read = read;
        wb_.serial = read != nullptr ? read->serial : 0;
    }
    std::memcpy(wb_.buf.get() + wb_.len, src, len);
    wb_.len += len;
}

void Nic::write_behind_flush()
{
    const uint32_t len = wb_.len;
    wb_.len = 0;
    if (!wb_.space->write(wb_.addr, wb_.buf.get(), len)) {
        // Bytes a peer's request had placed, or an answer to a READ of this NIC, did not land:
        // the owner's memory is gone (or the address never was its). A READ fails with it.
        count(SRCNIC_CNT_ACCESS_ERRORS);
        SRCNIC_LOG_RATELIMITED(LogLevel::kDebug, "%u bytes for process %d not written",
                               len, static_cast<int>(wb_.space->pid()));
        if (wb_.read != nullptr && wb_.read->serial == wb_.serial) {
            wb_.read->status = SRCNIC_ERR_INVALID_ADDR;
        }
    }
}

} // namespace srcnic
