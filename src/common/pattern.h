// SPDX-License-Identifier: Apache-2.0
// Fill patterns: an 8-byte pattern repeated from the start of the operation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tierflow {

// The pattern as seen from byte offset `phase` of the fill (little-endian byte order).
inline std::uint64_t RotatePattern(std::uint64_t pattern, std::size_t phase) {
  unsigned r = static_cast<unsigned>(phase % 8) * 8;
  return r == 0 ? pattern : (pattern >> r) | (pattern << (64 - r));
}

}  // namespace tierflow
