// SPDX-License-Identifier: Apache-2.0
// The paper's logging workload (Vogel et al., §2) for `tierflow bench pipes`: small records
// appended to a file and acknowledged only once durable, three ways in one run:
//   fdatasync per record   pwrite + fdatasync of each record;
//   fdatasync per batch    pwrite + fdatasync of every record waiting (group commit by hand);
//   pipe group commit      every record waiting as one transfer of a DRAM -> file pipe with
//                          PipeOptions::sync_writes, two transfers in flight, acknowledged in
//                          order (a transfer's fdatasync covers every write completed before).
// A record waits at most for the batch being written when it is made and then its own: two
// batches' write + sync at the same percentile, which is how the target reads "p99 <= 2x one
// batch's sync" (the p99 of records against the p99 of batches; medians are reported too).
// A producer thread appends records as fast as it may, with at most `window` records not yet
// acknowledged; a record's latency runs from its creation to its acknowledgement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tierflow/pipe_runtime.h"
#include "tierflow/status.h"

namespace tierflow::bench {

struct LogBenchConfig {
  std::string dir;  // where the log files are made (a private directory inside it)
  std::size_t record_bytes = 128;
  double seconds = 1.0;       // per method
  std::size_t window = 4096;  // records produced but not yet acknowledged, at most
};

struct LogMethod {
  std::string method;
  std::uint64_t records = 0;
  double records_per_s = 0;
  double p50_us = 0, p99_us = 0;
  double batch_records = 0;  // mean records per write + sync
  double sync_ms = 0;        // median time of one batch's write + fdatasync
  double sync_p99_ms = 0;    // and its 99th percentile
  bool verified = false;     // the file holds exactly the records acknowledged
};

Result<std::vector<LogMethod>> RunLogBench(PipeRuntime& rt, const LogBenchConfig& c);

}  // namespace tierflow::bench
