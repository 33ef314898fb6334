// SPDX-License-Identifier: Apache-2.0
// `tierflow bench pipes`: what a pipe costs against the same work done without one, measured
// in one run.
//   file -> DRAM: a file of --size read into DRAM through a pipe, and with the same reads
//                 (O_DIRECT, the same chunk size and queue depth) issued directly with liburing;
//                 alternated --reps times; GB/s medians and their ratio.
//   flavours:     --transfers small (64-byte) memory-to-memory transfers done one at a time as
//                 Submit + Wait (the future flavour) and as Post + epoll_wait + Reap (the
//                 pollable flavour); µs per transfer and the difference.
//   logging:      records of --record-bytes appended durably for --log-seconds per method:
//                 fdatasync per record, per batch, and pipe group commit (bench/log_bench.h);
//                 records/s, p50/p99 latency, and the targets (group commit >= 10x the
//                 per-record rate, its p99 <= 2x one batch's write + sync).
//   checkpoint:   --checkpoint-size of DRAM in --checkpoint-regions files, durable and complete
//                 or absent, through pipes, with pwrite from one and two threads, and the
//                 disk's O_DIRECT write floor (bench/checkpoint_bench.h), alternated --reps
//                 times; the target: pipes >= 0.95x the floor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

#include "tierflow/status.h"

namespace tierflow::bench {

struct PipesBenchConfig {
  std::uint64_t size = std::uint64_t{1} << 30;
  std::string dir;  // where the file is made; empty: TMPDIR or /tmp
  int reps = 5;
  int transfers = 20000;
  unsigned queue_depth = 16;
  std::uint64_t chunk = 2u << 20;
  double log_seconds = 1.0;  // per logging method; 0: no logging rows
  std::size_t record_bytes = 128;
  std::uint64_t checkpoint_bytes = std::uint64_t{1} << 30;  // 0: no checkpoint rows
  int checkpoint_regions = 4;
  bool json = false;
  bool progress = false;  // a status line on stderr when it is a terminal
};

Status RunPipesBench(const PipesBenchConfig& config, std::ostream& out);

}  // namespace tierflow::bench
