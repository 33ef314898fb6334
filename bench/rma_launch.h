// SPDX-License-Identifier: Apache-2.0
// How `tierflow bench rma` runs MPI programs: the MPIs this build has libtierflow_rma for,
// where each program and library is (beside the executable in the build tree, under bin/,
// libexec/tierflow and lib/ once installed), the launcher's command line with or without the
// library preloaded, and the JSON lines rank 0 prints.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tierflow/status.h"

namespace tierflow::bench {

struct Mpi {
  std::string name, launcher;
};

// `s` quoted for /bin/sh, whatever it holds.
std::string Quote(const std::string& s);

// The directories a job's ranks need (the executable's; the installed libraries' and
// programs'): what a test bed of hosts must show them.
std::vector<std::string> ProgramDirectories();

// Every MPI the build made a library for, with its launcher.
std::vector<Mpi> BuiltMpis();

// The program `program` and libtierflow_rma_<mpi>.so: {program path, library path}.
Result<std::pair<std::string, std::string>> RmaFiles(const std::string& program,
                                                     const std::string& mpi);

// A test bed of hosts on this machine (scripts/hosts.sh, docs/hosts.md), up while the object
// lives: root only. The executable's directory and the programs' are shown on every host.
class Hosts {
 public:
  // Errors: the script is missing, or the test bed did not start (its reason: not root, ...).
  static Result<std::unique_ptr<Hosts>> Up(int count, const std::vector<std::string>& shares);
  ~Hosts();
  Hosts(const Hosts&) = delete;
  Hosts& operator=(const Hosts&) = delete;
  int count() const { return count_; }
  // The command prefix that runs what follows on host0, as on a cluster's first node.
  std::string Prefix() const;
  // The launcher's arguments that place `per_host` ranks on each host.
  Result<std::string> MpirunArgs(const std::string& mpi, int per_host) const;

 private:
  Hosts(std::string script, std::string state, int count)
      : script_(std::move(script)), state_(std::move(state)), count_(count) {}
  std::string script_, state_;
  int count_;
};

struct LaunchSpec {
  int ranks = 2;
  bool with_library = false;
  std::vector<std::pair<std::string, std::string>> env;  // given to every rank
  std::string args;                                      // already quoted where needed
  const Hosts* hosts = nullptr;  // across these hosts, `ranks` divided evenly among them
};

// The shell command that runs `program` under `m`'s launcher (stderr into stdout); across
// hosts, the launcher runs on host0 with the test bed's arguments (Open MPI: osc/ucx, which
// Debian turns off and no other component of it reaches another node with).
std::string LaunchCommand(const Mpi& m, const std::string& program, const std::string& library,
                          const LaunchSpec& spec);

// Runs `command`; the JSON objects it printed, one per line starting with '{' (but the
// marker {"complete":true}, below). A failed exit
// (or no JSON at all) is an error carrying the output, except exit status `tolerated` (> 0)
// with JSON printed: the program's own word that a check failed, reported in the objects.
Result<std::vector<nlohmann::json>> LaunchJson(const std::string& command, int tolerated = -1);

// LaunchJson for a job across hosts: once the program printed {"complete":true} (after its last
// row, before MPI_Finalize), or its `complete_after`-th object when that is not 0 (a program
// whose one object is its last word), a job still running `grace_s` seconds later is ended
// and its rows kept, with a line on stderr: Debian's MPICH over TCP may hang in MPI_Finalize
// (docs/hosts.md). The marker is not among the objects returned.
Result<std::vector<nlohmann::json>> LaunchJsonGrace(const std::string& command, int grace_s,
                                                    std::size_t complete_after = 0);

}  // namespace tierflow::bench
