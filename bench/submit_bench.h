// SPDX-License-Identifier: Apache-2.0
// `tierflow bench submit`: the library's own cost per operation, in the same process:
//   single_4k   submit + wait of one 4 KiB copy from one thread (runs inline)
//   batch64_4k  one batch of 64 x 4 KiB copies, submit + wait, as GB/s
//   handoff     a 4 KiB copy forced onto a worker thread: submit until the handle is done
//   split       a 256 KiB copy split over the workers and the waiting thread, against the
//               same split done by bare pinned threads (bench/handoff_floor.h)
// and the heap allocations made on those paths once warm (must be 0).
#pragma once

#include <ostream>
#include <string>

#include "tierflow/status.h"

namespace tierflow::bench {

struct SubmitBenchConfig {
  std::string engine = "cpu";
  int samples = 21;
  bool json = false;
};

// `allocations` reads the process's allocation counter (0 if not available).
Status RunSubmitBench(const SubmitBenchConfig& config, std::uint64_t (*allocations)(),
                      std::ostream& out);

}  // namespace tierflow::bench
