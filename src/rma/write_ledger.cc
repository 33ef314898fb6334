// SPDX-License-Identifier: Apache-2.0
#include "rma/write_ledger.h"

#include <algorithm>
#include <new>

namespace tierflow::rma {

static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

std::size_t WriteLedger::Bytes(int ranks) {
  return sizeof(Slot) * static_cast<std::size_t>(kSlots) * static_cast<std::size_t>(ranks);
}

WriteLedger::Slot& WriteLedger::slot(int owner, int s) const {
  auto* slots = std::launder(reinterpret_cast<Slot*>(area_));
  return slots[static_cast<std::size_t>(owner) * kSlots + s];
}

void WriteLedger::Record(int target, int s, const RangeSet& ranges) {
  if (ranges.empty()) return;
  Slot& slot_ = slot(target, s);
  const auto n =
      static_cast<std::uint32_t>(std::min<std::size_t>(ranges.size(), kRangesPerSlot + 1));
  // Reserve, then fill: the entries are read only after the epoch's release (the decrement of
  // the target's counter, a barrier), which orders these plain stores before the reads.
  const std::uint32_t first = slot_.used.fetch_add(n, std::memory_order_relaxed);
  for (std::uint32_t i = 0; i < n && first + i < kRangesPerSlot; ++i) {
    const auto& [b, e] = ranges.ranges()[i];
    slot_.ranges[first + i] = {b, e};
  }
}

bool WriteLedger::Collect(int owner, int s, RangeSet& out) const {
  const Slot& slot_ = slot(owner, s);
  const std::uint32_t used = slot_.used.load(std::memory_order_acquire);
  if (used > kRangesPerSlot) return false;
  for (std::uint32_t i = 0; i < used; ++i) out.Add(slot_.ranges[i].begin, slot_.ranges[i].end);
  return true;
}

void WriteLedger::Reset(int owner, int s) {
  slot(owner, s).used.store(0, std::memory_order_release);
}

}  // namespace tierflow::rma
