// SPDX-License-Identifier: Apache-2.0
// In-memory sorts of a run: radix sorts on the integer keys (MSD passes on the highest bits
// that vary until the buckets fit in a core's cache, then LSD passes in each bucket).
#pragma once

#include <cstddef>
#include <cstdint>

#include "sort/format.h"

namespace tierflow::extsort {

// Bytes of scratch memory SortRun needs for `count` records.
std::size_t SortScratchBytes(Format f, std::uint64_t count);

// Sorts `count` records at `data` by key (records with equal keys in no particular order);
// `scratch` holds SortScratchBytes. Returns where the sorted records are: `data` or `scratch`.
std::byte* SortRun(Format f, std::byte* data, std::byte* scratch, std::uint64_t count);

}  // namespace tierflow::extsort
