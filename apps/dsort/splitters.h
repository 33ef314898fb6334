// SPDX-License-Identifier: Apache-2.0
// Where a distributed sort cuts the key space between ranks: splitters chosen from a sample of
// every rank's keys, and the cut of a sorted run by them. Keys equal to a splitter are shared
// out between the ranks whose ranges meet at that key, in the proportion the sample shows, so
// that even input whose keys are all equal is divided evenly. No MPI here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sort/format.h"

namespace tierflow::dsort {

using extsort::Format;
using extsort::Key;

// Splitter i (0-based, ranks - 1 of them) ends rank i's range: records with keys below `key`
// go to ranks <= i, keys above to ranks > i, and of the records whose key equals `key` in a
// sorted run, the first `below` fraction (rounded down) go to ranks <= i.
struct Splitter {
  Key key;
  double below = 0;
};

// `ranks` - 1 splitters at the quantiles of `sample` (sorted in place). An empty sample gives
// splitters that send everything to rank 0.
std::vector<Splitter> ChooseSplitters(std::vector<Key>& sample, int ranks);

// Copies `count` records from `in` to `out` grouped by the rank each goes to (in input order
// within a group; of the records whose key equals a splitter's, the first `below` fraction in
// input order go to the ranks below). Returns cut: rank d's records are [cut[d], cut[d + 1])
// of `out` (cut[0] = 0, cut[ranks] = count).
// `route` is scratch of `count` entries. At most kMaxRanks ranks.
constexpr int kMaxRanks = 0x7fff;
constexpr std::uint16_t kEqualKey = 0x8000;  // in `route`: equal to a splitter's key
std::vector<std::uint64_t> Partition(Format f, const std::byte* in, std::uint64_t count,
                                     const std::vector<Splitter>& splitters, std::byte* out,
                                     std::uint16_t* route);

}  // namespace tierflow::dsort
