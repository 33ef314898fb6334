// SPDX-License-Identifier: Apache-2.0
// CRC-32C (Castagnoli polynomial 0x1EDC6F41, reflected 0x82F63B78): the CRC that Intel DSA's
// CRC generation computes by default, and iSCSI, ext4 and SSE4.2's CRC32 instruction use.
//
// Crc32c(seed, p, n) continues a CRC: Crc32c(Crc32c(0, a), b) == Crc32c(0, a || b). Debian
// bookworm packages no CRC-32C library, and none that combines CRCs of pieces computed apart.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tierflow/export.h"

namespace tierflow {

std::uint32_t Crc32c(std::uint32_t seed, const void* data, std::size_t n);

// Pieces of a range can be checksummed apart, in any order, and combined by XOR:
//   Crc32c(s, whole) == Crc32cShift(s, n) ^ XOR over pieces of
//                       Crc32cShift(Crc32c(0, piece), bytes of the range after the piece)
// where n is the whole length. Crc32cShift(c, k) multiplies c by x^(8k) modulo the polynomial
// (zlib's crc32_combine method): O(log k) carry-less products, no pass over the data.
// Exported: engine authors combine CRC parts with it (engine_module.h).
TIERFLOW_EXPORT std::uint32_t Crc32cShift(std::uint32_t crc, std::uint64_t bytes);

}  // namespace tierflow
