// CRC-32C (Castagnoli) over buffers and scatter lists: the checksum every srcnic packet carries.
#ifndef SRCNIC_WIRE_CRC32C_H
#define SRCNIC_WIRE_CRC32C_H

#include <cstddef>
#include <cstdint>

struct iovec;

namespace srcnic {

// CRC-32C with the Castagnoli polynomial 0x1EDC6F41 (bit-reflected 0x82F63B78), initial value
// and final xor 0xFFFFFFFF, as in iSCSI (RFC 3720 B.4), SCTP and ext4:
// crc32c(0, "123456789", 9) == 0xE3069283.
//
// The inversions happen inside each call, so a CRC is extended piece by piece:
// crc32c(crc32c(0, a, la), b, lb) == crc32c(0, a||b, la + lb). Start a new CRC from 0.
//
// crc32c() picks, once, on the first call: folding with VPCLMULQDQ for buffers of 256 bytes
// and more when the CPU has AVX-512 and VPCLMULQDQ (about 51 GB/s here), else three interleaved
// chains of the SSE4.2 crc32 instruction (about 29 GB/s), else the table-driven software
// path; all give the same result.
uint32_t crc32c(uint32_t crc, const void *data, size_t len);

// The CRC-32C of the concatenation of iovcnt pieces, starting from 0. Pieces may be empty.
uint32_t crc32c_iov(const struct iovec *iov, size_t iovcnt);

// True when crc32c() uses the SSE4.2 instruction.
bool crc32c_hw_available();

// The portable path (slice-by-8 tables), same contract as crc32c(); exposed for tests.
uint32_t crc32c_sw(uint32_t crc, const void *data, size_t len);

// The crc32-instruction path alone (the portable one where the CPU lacks SSE4.2), same
// contract; exposed for tests, since crc32c() may pick the folding path instead.
uint32_t crc32c_hw(uint32_t crc, const void *data, size_t len);

} // namespace srcnic

#endif
