// SPDX-License-Identifier: Apache-2.0
// `tierflow bench pipes`: what a pipe costs against the same work done without one, measured
// in one run.
//   file -> DRAM: a file of --size read into DRAM through a pipe, and with the same reads
//                 (O_DIRECT, the same chunk size and queue depth) issued directly with liburing;
//                 alternated --reps times; GB/s medians and their ratio.
//   flavours:     --transfers small (64-byte) memory-to-memory transfers done one at a time as
//                 Submit + Wait (the future flavour) and as Post + epoll_wait + Reap (the
//                 pollable flavour); µs per transfer and the difference.
#pragma once

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
  bool json = false;
  bool progress = false;  // a status line on stderr when it is a terminal
};

Status RunPipesBench(const PipesBenchConfig& config, std::ostream& out);

}  // namespace tierflow::bench
