// SPDX-License-Identifier: Apache-2.0
// Whether an operation's destination and source ranges share bytes.
#pragma once

#include <cstdint>

#include "tierflow/operation.h"

namespace tierflow::detail {

inline bool DstSrcOverlap(const Operation& op) {
  const auto d = reinterpret_cast<std::uintptr_t>(op.dst);
  const auto s = reinterpret_cast<std::uintptr_t>(op.src);
  return d < s + op.size && s < d + op.size;
}

// A move whose ranges overlap: it needs memmove semantics (direction matters).
inline bool IsOverlappingMove(const Operation& op) {
  return op.kind == OpKind::kMove && DstSrcOverlap(op);
}

}  // namespace tierflow::detail
