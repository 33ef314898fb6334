// SPDX-License-Identifier: Apache-2.0
// One run of the qdp query, SELECT SUM(b) FROM t WHERE a < x, as three pipelines per thread
// group over chunks of the columns, b read through the offloading cache when prefetching.
#pragma once

#include <cstdint>
#include <vector>

#include "qdp/qdp.h"
#include "tierflow/cache.h"

namespace tierflow::qdp {

// Where one configuration's columns are, and how it reads them.
struct Layout {
  const std::uint64_t* a = nullptr;
  const std::uint64_t* b = nullptr;
  bool prefetch = false;
  bool a_slow = false, b_slow = false;  // on a slow memory tier: count the bytes read there
};

struct IterationResult {
  double ms = 0;
  PipelineTimes pipelines;
  std::uint64_t sum = 0, hits = 0, late_hits = 0, misses = 0, failed = 0;
  std::uint64_t slow_bytes = 0;  // read by the query itself from a slow memory tier
};

// Runs the query once: cfg.groups groups, each with its SCAN_a, SCAN_b (when prefetching) and
// AGGREGATE threads; group g handles chunks g, g+G, ...; within a group each pipeline's
// threads take chunks from a shared counter. `mask` has a byte per row; SCAN_a writes a
// chunk's bytes before AGGREGATE reads them. SCAN_a and AGGREGATE threads are pinned to
// `cpus` round robin when cfg.pin. `cache` may be null when the layout does not prefetch.
IterationResult RunQuery(const Config& cfg, const Layout& layout, std::uint64_t x,
                         OffloadCache* cache, const std::vector<int>& cpus, std::uint8_t* mask);

}  // namespace tierflow::qdp
