// SPDX-License-Identifier: Apache-2.0
// `tierflow bench cache`: the offloading cache's own costs, against a baseline cache built the
// obvious way (std::shared_mutex + std::unordered_map of std::shared_ptr entries) measured in
// the same run on the same work:
//   hit     Access of a cached, complete entry + data(), one thread (median ns; Mops)
//   hit 2t  two threads hitting a shared set of entries (aggregate Mops)
//   miss    Access of a range not cached: placement, allocation, insertion and submission of
//           the fill, excluding the copy (a CPU engine worker copies; median ns)
#pragma once

#include <cstddef>
#include <ostream>

#include "tierflow/status.h"

namespace tierflow::bench {

struct CacheBenchConfig {
  std::size_t entries = 1024;  // the shared set hits draw from
  std::size_t entry_bytes = 4096;
  int samples = 21;
  bool json = false;
};

Status RunCacheBench(const CacheBenchConfig& config, std::ostream& out);

}  // namespace tierflow::bench
