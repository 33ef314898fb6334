// SPDX-License-Identifier: Apache-2.0
// How `tierflow bench rma` runs MPI programs: the MPIs this build has libtierflow_rma for,
// where each program and library is (beside the executable in the build tree, under bin/,
// libexec/tierflow and lib/ once installed), the launcher's command line with or without the
// library preloaded, and the JSON lines rank 0 prints.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tierflow/status.h"

namespace tierflow::bench {

struct Mpi {
  std::string name, launcher;
};

// Every MPI the build made a library for, with its launcher.
std::vector<Mpi> BuiltMpis();

// The program `program` and libtierflow_rma_<mpi>.so: {program path, library path}.
Result<std::pair<std::string, std::string>> RmaFiles(const std::string& program,
                                                     const std::string& mpi);

struct LaunchSpec {
  int ranks = 2;
  bool with_library = false;
  std::vector<std::pair<std::string, std::string>> env;  // given to every rank
  std::string args;                                      // already quoted where needed
};

// The shell command that runs `program` under `m`'s launcher (stderr into stdout).
std::string LaunchCommand(const Mpi& m, const std::string& program, const std::string& library,
                          const LaunchSpec& spec);

// Runs `command`; the JSON objects it printed, one per line starting with '{'. A failed exit
// (or no JSON at all) is an error carrying the output, except exit status `tolerated` (> 0)
// with JSON printed: the program's own word that a check failed, reported in the objects.
Result<std::vector<nlohmann::json>> LaunchJson(const std::string& command, int tolerated = -1);

}  // namespace tierflow::bench
