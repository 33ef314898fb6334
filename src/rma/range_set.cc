// SPDX-License-Identifier: Apache-2.0
#include "rma/range_set.h"

#include <algorithm>

namespace tierflow::rma {

void RangeSet::Add(std::uint64_t begin, std::uint64_t end) {
  if (begin >= end) return;
  // Most additions extend the last range or follow it (consecutive puts): no search.
  if (!ranges_.empty() && begin >= ranges_.back().first) {
    auto& last = ranges_.back();
    if (begin <= last.second) {
      last.second = std::max(last.second, end);
      return;
    }
    if (ranges_.size() < kMaxRanges) {
      ranges_.emplace_back(begin, end);
      return;
    }
  }
  // The first range that ends at or after `begin` and every one it overlaps or touches merge.
  auto first = std::lower_bound(ranges_.begin(), ranges_.end(), begin,
                                [](const auto& r, std::uint64_t b) { return r.second < b; });
  auto last = first;
  while (last != ranges_.end() && last->first <= end) {
    begin = std::min(begin, last->first);
    end = std::max(end, last->second);
    ++last;
  }
  first = ranges_.erase(first, last);
  ranges_.insert(first, {begin, end});
  if (ranges_.size() > kMaxRanges) {
    const std::pair<std::uint64_t, std::uint64_t> hull{ranges_.front().first,
                                                       ranges_.back().second};
    ranges_.assign(1, hull);
  }
}

std::uint64_t RangeSet::bytes() const {
  std::uint64_t n = 0;
  for (const auto& [b, e] : ranges_) n += e - b;
  return n;
}

}  // namespace tierflow::rma
