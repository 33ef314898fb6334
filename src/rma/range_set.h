// SPDX-License-Identifier: Apache-2.0
// A set of byte ranges [begin, end) of one window, kept sorted and merged: what a rank's
// transfers touched since the last write-back or invalidation of that window, so that the
// coherence hooks maintain those lines only (Christgau's selective write-back and invalidation,
// seed 002 §4.6.2-4.6.3). Past `kMaxRanges` separate ranges it keeps their hull instead: a
// superset, which is always safe to maintain. No MPI here.
//
// Thread-safety: none; one per window and rank, used by the thread that uses the window.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace tierflow::rma {

class RangeSet {
 public:
  static constexpr std::size_t kMaxRanges = 1024;

  // Adds [begin, end); an empty range adds nothing.
  void Add(std::uint64_t begin, std::uint64_t end);
  void Clear() { ranges_.clear(); }
  bool empty() const { return ranges_.empty(); }
  std::size_t size() const { return ranges_.size(); }
  std::uint64_t bytes() const;  // the bytes covered
  // The ranges in ascending order, none overlapping or adjacent to another.
  const std::vector<std::pair<std::uint64_t, std::uint64_t>>& ranges() const { return ranges_; }

 private:
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges_;
};

}  // namespace tierflow::rma
