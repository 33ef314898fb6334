// SPDX-License-Identifier: Apache-2.0
// The floor of a qdp run: the time to move b from the slow tier into the cache's memory by
// what a fill would use, measured in the same run as the query.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "qdp/columns.h"
#include "tierflow/engine.h"
#include "tierflow/node_arena.h"
#include "tierflow/topology.h"

namespace tierflow::qdp {

struct FloorSetup {
  const Topology* topology = nullptr;
  std::vector<Engine*> engines;  // the fill engines, unwrapped (the storage itself is measured)
  const std::byte* b = nullptr;  // b on the slow tier (the file's mapping on storage)
  std::size_t bytes = 0;
  std::uint64_t b_fingerprint = 0;       // Fingerprint(b): what the moved bytes must give
  const StoredColumn* b_file = nullptr;  // storage: made cold before every round; else null
  int source_node = -1;                  // PlanFill's source node (the CPUs' node on storage)
  int fast_node = -1;
  NodeArena* arena = nullptr;        // the cache's memory, where b is moved to
  std::size_t piece = 0;             // bytes per copy: whole chunks of b, at most an arena chunk
  std::size_t pieces_in_flight = 1;  // as many as the cache's capacity holds
};

// Moves all of b as PlanFill plans a fill (large direct reads of the cold file on storage,
// the fill engine on memory), `pieces_in_flight` at a time in blocks taken from the arena and
// given back, and returns the milliseconds spent moving (the check between rounds is not
// counted). The moved bytes are checked against b's fingerprint, not against the file (which
// would fault b into the page cache). Errors: no memory in the arena, a failed copy or read,
// a column that does not go cold, wrong data.
Result<double> MeasureFloor(const FloorSetup& floor);

}  // namespace tierflow::qdp
