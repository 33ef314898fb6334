// SPDX-License-Identifier: Apache-2.0
// `tierflow bench coherence`: what coherence maintenance costs on this machine, measured with
// the instructions themselves and refereed by PMDK's pmem_persist in the same run.
//
// Rows: each cache-line instruction this CPU has (through tierflow's WriteBack /
// WriteBackInvalidate), and pmem_persist (libpmem) as the referee, interleaved sample by
// sample × the lines' state before (dirty, clean = cached unmodified, uncached) × layout (one
// contiguous range; the same number of 4 KiB pages scattered over a 256 MiB buffer, one call
// with one fence for the list, or one call and fence per page) × size 4 KiB·2^order. Per row:
// p25/p50/p75/p99/max of "completed" (a full fence before the clock stops), p50 of "issued"
// (the instructions and SFENCE/DMB only), ns per line, and the time to read the range again
// afterwards (CLWB may keep the lines; CLFLUSHOPT does not). A row whose p99 exceeds 5× its
// p50 while the kernel counted interrupts or steal time on the benchmark's CPU is flagged:
// its tail is the machine's, not the instruction's. Chen's published medians (QEMU TCG, where
// the instructions are no-ops) are printed beside the contiguous rows for comparison.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "tierflow/status.h"

namespace tierflow::bench {

struct CoherenceBenchConfig {
  std::vector<int> orders = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // 4 KiB · 2^order, 0..10
  int samples = 1000;                                            // per row and method
  int runs = 1;  // repeat the whole study; slopes compared across runs
  bool json = false;
  bool progress = true;   // a progress bar on stderr when it is a terminal
  std::string plot_path;  // non-empty: write a PNG there (matplotlib)
};

Status RunCoherenceBench(const CoherenceBenchConfig& config, std::ostream& out);

}  // namespace tierflow::bench
