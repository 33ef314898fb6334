// SPDX-License-Identifier: Apache-2.0
// How a sort divides its memory: the arena, the run size of the first pass, the read-ahead and
// write-behind buffers of the merge. Private to the application.
#pragma once

#include <cstdint>
#include <functional>

#include "sort/sort.h"

namespace tierflow::extsort {

// The arena: --memory less what the program itself holds (code, stacks, the pipes' queues).
std::uint64_t ArenaBytes(std::uint64_t memory);

// Every buffer is a whole number of blocks: a block is a whole number of records and of 4 KiB
// (O_DIRECT), so runs start at aligned file offsets.
std::uint64_t BlockBytes(Format f);

struct RunPlan {
  std::uint64_t run_bytes = 0;     // records per run x record size
  std::uint64_t buffer_bytes = 0;  // each of the 4 buffers per thread (data, scratch, read-ahead,
                                   // write-behind)
  std::uint64_t runs = 0;
};
RunPlan PlanRuns(Format f, std::uint64_t arena, int threads, std::uint64_t input);

struct MergePlan {
  std::uint64_t read_bytes = 0;   // each of a run's two read-ahead buffers
  std::uint64_t write_bytes = 0;  // each of the two write-behind buffers
};
MergePlan PlanMerge(Format f, std::uint64_t arena, std::uint64_t runs);
// The arena of each of the merge's `threads` parts (each merges one key range of every run).
std::uint64_t MergePartBytes(std::uint64_t arena, int threads);

// The least whole MiB of memory (from 16 MiB) for which `fits` holds, assuming it holds for
// all larger amounts.
std::uint64_t LeastMemory(const std::function<bool(std::uint64_t)>& fits);

// Errors: memory too small for this input in two passes (the message gives the least that
// works), or for the threads at all.
Status CheckMemory(const Config& c, std::uint64_t input);

}  // namespace tierflow::extsort
