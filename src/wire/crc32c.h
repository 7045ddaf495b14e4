// CRC-32C (Castagnoli) over buffers and scatter lists: the checksum every srcnic packet carries.
#ifndef SRCNIC_WIRE_CRC32C_H
#define SRCNIC_WIRE_CRC32C_H

#include <cstddef>
#include <cstdint>
#include <vector>

struct iovec;

namespace srcnic {

// CRC-32C with the Castagnoli polynomial 0x1EDC6F41 (bit-reflected 0x82F63B78), initial value
// and final xor 0xFFFFFFFF, as in iSCSI (RFC 3720 B.4), SCTP and ext4:
// crc32c(0, "123456789", 9) == 0xE3069283.
//
// The inversions happen inside each call, so a CRC is extended piece by piece:
// crc32c(crc32c(0, a, la), b, lb) == crc32c(0, a||b, la + lb). Start a new CRC from 0.
//
// crc32c() picks, once, on the first call, the fastest path the CPU runs (crc32c_paths()):
// folding with VPCLMULQDQ for buffers of 256 bytes and more, in 512-bit registers where the CPU
// has AVX-512 (about 51 GB/s on AMD Zen 5) or 256-bit ones where it has AVX2 (AMD Zen 3: 25 GB/s
// at 64 KB in cache, 16 from memory; 1128 bytes in 47-57 ns against 80-90 in the chains);
// else three interleaved chains of the SSE4.2 crc32 instruction; else the table-driven
// software path. All give the same result. perf/crc32c_bench times each path.
uint32_t crc32c(uint32_t crc, const void *data, size_t len);

// crc32c(crc, src, len) while copying the len bytes at src to dst (the two must not overlap):
// one pass over the bytes where the path folds (the stores go beside the multiplications),
// the CRC and then memcpy elsewhere. The receive path uses it to check a segment's payload as
// it places it (nic/rx_demux.cc).
uint32_t crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len);

// The CRC-32C of the concatenation of iovcnt pieces, starting from 0. Pieces may be empty.
uint32_t crc32c_iov(const struct iovec *iov, size_t iovcnt);

// True when crc32c() uses the SSE4.2 instruction.
bool crc32c_hw_available();

// The portable path (slice-by-8 tables), same contract as crc32c(); exposed for tests.
uint32_t crc32c_sw(uint32_t crc, const void *data, size_t len);

// One of crc32c()'s paths: fn has the same contract as crc32c(), copy as crc32c_copy().
using Crc32cFn = uint32_t (*)(uint32_t crc, const void *data, size_t len);
using Crc32cCopyFn = uint32_t (*)(uint32_t crc, void *dst, const void *src, size_t len);
struct Crc32cPath {
    const char *name;
    Crc32cFn fn;
    Crc32cCopyFn copy;
};

// The paths this CPU runs, slowest (the software one) first; crc32c() uses the last. For tests
// (every path checked on the machine that runs them) and benchmarks.
std::vector<Crc32cPath> crc32c_paths();

// The name of the path crc32c() uses.
const char *crc32c_path_name();

} // namespace srcnic

#endif
