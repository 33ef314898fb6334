// SPDX-License-Identifier: Apache-2.0
// `tierflow pipes explain|calibrate|copy`: the planner's choice for two locators, the
// calibration it chooses by, and a transfer through a pipe with its state.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "tierflow/pipe_runtime.h"
#include "tierflow/status.h"

namespace tierflow::tools {

struct PipesCommandOptions {
  std::string from, to;  // locators, command-line spelling
  std::string topology_xml;
  std::string calibration;  // file; empty: the default path
  bool any_machine = false;
  bool dsa_model = false;
  bool json = false;
  bool progress = false;  // copy, calibrate: a status line on stderr when it is a terminal
  // Knobs (0 / empty: the planner's).
  unsigned queue_depth = 0;
  std::uint64_t chunk_bytes = 0;
  std::string mechanism;
  std::uint64_t bandwidth_cap = 0;
  bool force_staging = false;
  // copy
  std::uint64_t length = 0;  // 0: the smaller capacity
  bool overwrite = false;    // replace (truncate) a destination file that exists
  bool modify = false;       // write only the destination's range of an existing file
  bool sync = false;
  // calibrate
  std::string dir;  // where file figures are measured
  std::uint64_t bytes = 64u << 20;
  std::string output;  // empty: the calibration path
};

Status RunPipesExplain(const PipesCommandOptions& o, std::ostream& out);
Status RunPipesCopy(const PipesCommandOptions& o, std::ostream& out);
Status RunPipesCalibrate(const PipesCommandOptions& o, std::ostream& out);

}  // namespace tierflow::tools
