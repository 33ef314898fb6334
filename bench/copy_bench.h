// SPDX-License-Identifier: Apache-2.0
// `tierflow bench copy`: copy throughput of an engine against glibc memcpy, measured the way
// the Fürst thesis §3.1 does (prefaulted buffers on chosen nodes, caches flushed, one
// submitting thread per participating engine started by a barrier, slowest participant times
// the round, N repetitions after a warm-up, inner loop repeated for small sizes).
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "tierflow/copy_policy.h"
#include "tierflow/status.h"

namespace tierflow::bench {

struct CopyBenchConfig {
  std::string engine = "cpu";
  std::vector<std::size_t> sizes;
  std::vector<std::string> modes = {"single"};  // single | batch
  std::vector<int> batch_sizes = {16};          // members of a batch in batch mode
  std::vector<int> threads = {0};               // engine worker threads; 0 = all CPUs of the node
  std::vector<int> submitters = {1};            // submitting threads per participating engine
  std::vector<PolicyKind> policies = {PolicyKind::kSingle};
  std::vector<int> src_nodes = {0};
  std::vector<int> dst_nodes = {0};
  int reps = 10;
  int warmup = 1;
  double min_round_ms = 20;  // small sizes repeat the inner loop to last at least this long
  bool flush = true;
  bool progress = true;
  std::string format = "table";  // table | json | csv
  std::string plot_path;
};

Status RunCopyBench(const CopyBenchConfig& config, std::ostream& out);

}  // namespace tierflow::bench
