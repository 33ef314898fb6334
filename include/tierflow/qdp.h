// Query-driven prefetching (Fürst thesis ch. 6): SELECT SUM(b) FROM t WHERE a < x over two
// generated uint64 columns, as three pipelines per thread group:
//   SCAN_a     filters a chunk of a into a bit mask,
//   SCAN_b     prefetches b's chunks into the fast tier through the offloading cache (running
//              ahead freely; the storage engine reads them from the column file),
//   AGGREGATE  sums b under the mask, reading each chunk from the cache when its fill is done
//              (waiting for a fill in progress), and filling it itself when it is not there.
// Configurations (Table 6.2): baseline (a, b on storage, no prefetching), upper_limit (b put in
// DRAM before the query), prefetch (a, b on storage), prefetch_distributed (a in DRAM, b on
// storage), all_dram (a, b in DRAM, no prefetching). Every iteration starts with the column
// files out of the page cache (checked with mincore) and an empty cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tierflow/status.h"

namespace tierflow {

struct QdpConfig {
  std::uint64_t rows = std::uint64_t{1} << 24;
  std::uint64_t chunk_rows = std::uint64_t{1} << 16;  // a multiple of 512 (direct I/O of b)
  double selectivity = 0.5;                            // fraction of rows with a < x
  std::uint64_t seed = 1;
  int groups = 1;                  // thread groups, each running every pipeline
  int threads_scan_a = 1;          // per group
  int threads_scan_b = 1;          // per group (prefetching configurations)
  int threads_aggregate = 1;       // per group
  bool pin = true;                 // pin threads to the CPUs of the node, round robin
  static constexpr std::uint64_t kCapacityOfB = ~std::uint64_t{0};
  std::uint64_t cache_capacity = kCapacityOfB;  // bytes of the fast tier for the cache
  int iterations = 5;              // timed, after `warmup`
  int warmup = 1;
  std::string data_dir;            // where the column files go; empty: a new directory in /tmp
  std::vector<std::string> configs = {"baseline", "upper_limit", "prefetch",
                                       "prefetch_distributed", "all_dram"};
  int inject_storage_errors = 0;   // fail this many storage reads per iteration (tests)
};

struct QdpPipelineTimes {
  double scan_a_ms = 0, scan_b_ms = 0, aggregate_ms = 0;  // busy time of each pipeline
};

struct QdpConfigResult {
  std::string name;
  double time_ms_median = 0;
  double speedup = 0;  // baseline's median / this one's
  std::uint64_t sum = 0;
  std::uint64_t hits = 0, late_hits = 0, misses = 0, failed_fills = 0;  // chunks, last iteration
  double hit_rate = 0;                    // (hits + late hits) / chunks read through the cache
  QdpPipelineTimes pipelines;             // medians
  std::uint64_t bytes_from_storage = 0;   // last iteration: file reads and page faults
  std::uint64_t bytes_to_fast_tier = 0;   // last iteration: cache fills
  std::uint64_t cache_peak_bytes = 0;
  std::uint64_t resident_pages_at_start = 0;  // column pages in the page cache before (must be 0)
  std::vector<double> times_ms;
};

struct QdpReport {
  std::vector<QdpConfigResult> configs;
  std::uint64_t expected_sum = 0;
  std::uint64_t rows = 0, chunk_rows = 0;
  double storage_gbps = 0;       // large direct reads of b's file, measured in the same run
  double storage_floor_ms = 0;   // b's bytes / storage_gbps: prefetch_distributed's floor
  std::uint64_t fast_tier_peak_bytes = 0;
  std::uint64_t cache_capacity_bytes = 0;
  int threads = 0;
  std::string data_dir;
};

// Errors: bad parameters (named), files that cannot be written, a page cache that cannot be
// emptied, a wrong sum in any configuration (never reported as a result).
Result<QdpReport> RunQdp(const QdpConfig& config);

}  // namespace tierflow
