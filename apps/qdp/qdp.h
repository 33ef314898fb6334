// SPDX-License-Identifier: Apache-2.0
// tierflow qdp, an application of the library (it uses the public API only and is not part
// of the installed library): query-driven prefetching (Fürst thesis ch. 6): SELECT SUM(b) FROM t
// WHERE a < x over two generated uint64 columns, as three pipelines per thread group:
//   SCAN_a     filters a chunk of a into a bit mask,
//   SCAN_b     prefetches b's chunks into the fast tier through the offloading cache (running
//              ahead freely; the storage engine reads them from the column file),
//   AGGREGATE  sums b under the mask, reading each chunk from the cache when its fill is done
//              (waiting for a fill in progress), and filling it itself when it is not there.
// Configurations (Table 6.2), with the slow tier where b lives (`b_tier`: storage, or a memory
// node) and the fast tier the cache fills (`cache_tier`): baseline (a, b on the slow tier, no
// prefetching), upper_limit (b put in the fast tier before the query), prefetch (a, b on the
// slow tier), prefetch_distributed (a on `a_tier`, DRAM by default; b on the slow tier),
// all_dram (a, b in DRAM, no prefetching). Every iteration starts with an empty cache and,
// on storage, with the column files out of the page cache (checked with mincore).
//
// Tiers are named "storage", "node:N", or a kind ("dram", "hbm", "cxl", "nvm": the node of
// that kind nearest to the CPUs). Fills from storage go to the io_uring engine, fills from
// memory to `engine` (cpu, dsa, or dsa-model: Intel DSA's device model, software copies);
// the cache plans this (PlanFill), not the query.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tierflow/engine.h"
#include "tierflow/status.h"

namespace tierflow::qdp {

struct Config {
  std::uint64_t rows = std::uint64_t{1} << 27;        // 2 x 1 GiB: `make demo` runs this
  std::uint64_t chunk_rows = std::uint64_t{1} << 16;  // a multiple of 512 (direct I/O of b)
  double selectivity = 0.5;                           // fraction of rows with a < x
  std::uint64_t seed = 1;
  int groups = 1;             // thread groups, each running every pipeline
  int threads_scan_a = 1;     // per group
  int threads_scan_b = 1;     // per group (prefetching configurations)
  int threads_aggregate = 1;  // per group
  bool pin = true;            // pin threads to the CPUs of the node, round robin
  // Allow more computing threads than CPUs (refused otherwise): the sums stay exact, the
  // times mean little. For checking many groups on a small machine.
  bool oversubscribe = false;
  static constexpr std::uint64_t kCapacityOfB = ~std::uint64_t{0};
  std::uint64_t cache_capacity = kCapacityOfB;  // bytes of the fast tier for the cache
  int iterations = 5;                           // timed, after `warmup`
  int warmup = 1;
  std::string data_dir;  // where the column files go; empty: a new directory in /tmp
  // Read the columns from data_dir/a.u64 and data_dir/b.u64 (uint64, native byte order, at
  // least `rows` values each) instead of generating them. Values of a must be below 2^63 and
  // the sum must fit 64 bits (checked).
  bool reuse_data = false;
  std::string b_tier =
      "storage";               // the slow tier: where b (and a, but for prefetch_distributed) live
  std::string cache_tier;      // the fast tier; empty: the DRAM node of the CPUs
  std::string a_tier;          // a's tier in prefetch_distributed; empty: that DRAM node
  std::string engine = "cpu";  // fills from memory tiers: cpu | dsa | dsa-model
  unsigned storage_queue_depth = 64;                      // io_uring reads in flight
  std::size_t storage_read_bytes = std::size_t{1} << 20;  // largest single read
  std::vector<std::string> configs = {"baseline", "upper_limit", "prefetch", "prefetch_distributed",
                                      "all_dram"};
  bool huge_pages = true;  // transparent huge pages for columns, mask and cache memory
  // Told what runs now ("generating the columns", "prefetch, iteration 3 of 6"), from the
  // running thread, for a progress line. Default: none.
  std::function<void(const std::string& what)> progress;
  // Wraps the storage engine before the cache sees it (tests: a FaultInjectingEngine around
  // it); the wrapper must forward to the engine it is given. Default: none.
  std::function<Result<std::unique_ptr<Engine>>(Engine& storage)> wrap_storage_engine;
};

struct PipelineTimes {
  double scan_a_ms = 0, scan_b_ms = 0, aggregate_ms = 0;  // busy time of each pipeline
};

struct ConfigResult {
  std::string name;
  double time_ms_median = 0;
  double speedup = 0;  // baseline's median / this one's; 0 when baseline did not run
  std::uint64_t sum = 0;
  std::uint64_t hits = 0, late_hits = 0, misses = 0, failed_fills = 0;  // chunks, last iteration
  double hit_rate = 0;      // (hits + late hits) / chunks read through the cache
  PipelineTimes pipelines;  // medians
  // Last iteration. Storage: bytes read from the column files (io_uring reads plus pages
  // faulted in, from mincore). Memory: bytes the query and the fills read from the slow tier.
  std::uint64_t bytes_from_slow_tier = 0;
  std::uint64_t bytes_to_fast_tier = 0;  // last iteration: cache fills
  std::uint64_t cache_peak_bytes = 0;
  std::uint64_t resident_pages_at_start = 0;  // column pages in the page cache before (must be 0)
  std::vector<double> times_ms;
  // The floor (b moved from the slow tier, see Report) measured right before each timed
  // iteration, and time_ms_median / the median of those: the time against the floor the slow
  // tier offered while this configuration ran.
  std::vector<double> floor_ms;
  double vs_floor = 0;
};

struct Report {
  std::vector<ConfigResult> configs;
  std::uint64_t expected_sum = 0;
  std::uint64_t x = 0;  // the filter: a < x
  std::uint64_t rows = 0, chunk_rows = 0;
  std::string slow_tier, fast_tier, distributed_a_tier;  // as resolved ("storage", "node 0 (dram)")
  std::string fill_engine;      // what filled from memory ("cpu", "dsa", "dsa-model")
  bool fills_on_model = false;  // memory fills ran on the DSA device model
  // The slow tier's bandwidth for b, measured in the same run into the cache's memory right
  // before every timed iteration of every configuration (the best counts): storage: large
  // direct reads of b's file, cold; memory: the fill engine copying b to the fast tier.
  double storage_gbps = 0;
  double storage_floor_ms = 0;           // b's bytes / storage_gbps: prefetch_distributed's floor
  std::vector<double> floor_samples_ms;  // every sample, in the order taken
  std::uint64_t fast_tier_peak_bytes = 0;
  std::uint64_t cache_capacity_bytes = 0;
  int threads = 0;          // every pipeline's threads
  int compute_threads = 0;  // SCAN_a + AGGREGATE threads (all that all_dram runs)
  std::string data_dir;     // where a.u64 and b.u64 are (removed after the run unless given)
};

// Errors: bad parameters (named), tiers this machine lacks, missing or short column files,
// files that cannot be written, a page cache that cannot be emptied, a DSA that is not there,
// a wrong sum in any configuration (never reported as a result).
Result<Report> Run(const Config& config);

}  // namespace tierflow::qdp
