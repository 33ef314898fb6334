// SPDX-License-Identifier: Apache-2.0
// Where the origins of an epoch note which bytes of a target's window they stored into, in
// memory the ranks share, so that the target invalidates those lines of its own window at the
// end of the epoch (MPI_Win_wait, a fence) rather than the whole window: the target cannot know
// them otherwise, and they are exactly the lines its cache may hold stale (seed 002 §4.6.3,
// "selective remote invalidation", done by the target on the origins' word).
//
// Per rank, a few slots (one per kind of epoch, see the users in rma/mpi), each a bounded list
// of byte ranges: origins append (Record) before the synchronisation that releases the target
// (the completion counter's decrement, a barrier); the target reads them after it (Collect) and
// clears its slot before the origins of the next epoch of that kind may append (Reset). A slot
// that overflows says so, and the target then maintains its whole window. No MPI here.
//
// Thread-safety: Record may run in several processes at once on one slot; Collect and Reset
// only in the slot's owner, ordered with the Records by the epoch's synchronisation.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "rma/range_set.h"

namespace tierflow::rma {

class WriteLedger {
 public:
  static constexpr int kSlots = 3;
  static constexpr std::uint32_t kRangesPerSlot = 255;

  // Bytes of shared, zero-filled memory for a window of `ranks` ranks.
  static std::size_t Bytes(int ranks);
  WriteLedger() = default;
  // `area` holds Bytes(ranks) bytes that every rank maps.
  explicit WriteLedger(std::byte* area) : area_(area) {}
  bool attached() const { return area_ != nullptr; }

  // Appends `ranges` (of `target`'s window) to its slot.
  void Record(int target, int slot, const RangeSet& ranges);
  // Adds what was recorded in `owner`'s slot to `out`; false when the slot overflowed (the
  // ranges are then incomplete: maintain the whole window).
  bool Collect(int owner, int slot, RangeSet& out) const;
  void Reset(int owner, int slot);

 private:
  struct Range {
    std::uint64_t begin, end;
  };
  struct alignas(64) Slot {
    std::atomic<std::uint32_t> used;  // entries reserved; beyond kRangesPerSlot: overflowed
    Range ranges[kRangesPerSlot];
  };
  Slot& slot(int owner, int slot) const;

  std::byte* area_ = nullptr;
};

}  // namespace tierflow::rma
