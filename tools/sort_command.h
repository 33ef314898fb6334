// SPDX-License-Identifier: Apache-2.0
// `tierflow sort`: the external merge sort on pipes (apps/sort), with the I/O floor measured in
// the same run, DuckDB as referee, a progress bar, a table, JSON and a plot.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "tierflow/status.h"

namespace tierflow::tools {

struct SortCommandOptions {
  std::uint64_t generate = 0;  // bytes; 0: sort --input
  std::string input, output, dir;
  std::string format = "u64";
  std::uint64_t memory = 256u << 20;
  int threads = 0;  // 0: the CPUs of this machine
  std::uint64_t seed = 42;
  bool keep = false, verify = false, no_floor = false, overwrite = false;
  bool compare_duckdb = false, json = false, progress = true, explain = false;
  int compare_declared = 0;  // pairs of sorts: the blueprint's against pipes declared one by one
  std::string plot;
};

Status RunSortCommand(const SortCommandOptions& o, std::ostream& out);

}  // namespace tierflow::tools
