// SPDX-License-Identifier: Apache-2.0
// The paper's checkpointing workload (Vogel et al., §2) for `tierflow bench pipes`: DRAM regions
// written to files, durable and complete or absent — each region's file synced, the directory
// holding them renamed into place only then — four ways in one run, alternated:
//   O_DIRECT floor   the same bytes as one file, written with liburing directly (O_DIRECT) and
//                    fdatasync'd, the better of two request shapes (the pipes' chunk and
//                    queue depth, 1 MiB x 8): what the disk does;
//   pipes            one DRAM -> file pipe per region, all transferring at once, sync_writes;
//   pwrite x1, x2    pwrite + fdatasync of each region's file from one thread, from two.
// Each method's checkpoint is read back once and compared with the regions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tierflow/pipe_runtime.h"
#include "tierflow/status.h"

namespace tierflow::bench {

struct CheckpointBenchConfig {
  std::string dir;  // where checkpoints are made (a private directory inside it)
  std::uint64_t bytes = std::uint64_t{1} << 30;  // all regions together
  int regions = 4;
  int reps = 3;
  unsigned queue_depth = 16;
  std::uint64_t chunk = 2u << 20;
};

struct CheckpointMethod {
  std::string method;
  std::vector<double> gbps;  // one per repetition
  double median_gbps = 0;
  bool verified = false;  // read back once: the files hold the regions
};

Result<std::vector<CheckpointMethod>> RunCheckpointBench(PipeRuntime& rt,
                                                         const CheckpointBenchConfig& c);

}  // namespace tierflow::bench
