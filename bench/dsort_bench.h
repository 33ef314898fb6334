// SPDX-License-Identifier: Apache-2.0
// `tierflow bench dsort`: the distributed sort (tierflow-dsort-MPI, docs/dsort.md) as one job
// across the hosts of a test bed of namespaces on this machine (scripts/hosts.sh; root), or on
// this machine alone (hosts = 1), for each key distribution, alternated `reps` times. Every run
// generates its input, verifies its output (--verify) and measures its own floors. Per
// distribution: medians of the sort's time, its floor and their ratio, the time against the
// uniform keys' median, and the most any run's rank held (partition, temporary space,
// resident memory); then the targets, each with its ratio and whether it was met.
// A run whose output did not verify fails the command; a target not met is reported, not an
// error.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "tierflow/status.h"

namespace tierflow::bench {

struct DsortBenchConfig {
  int hosts = 2;                  // 1: every rank on this machine, no test bed
  int ranks_per_host = 2;         // the job has hosts x ranks_per_host ranks
  std::vector<std::string> mpis;  // empty: every MPI the distributed sort was built for
  std::uint64_t total_bytes = std::uint64_t{4} << 30;  // over all ranks
  std::uint64_t memory_bytes = 256u << 20;             // per rank
  std::vector<std::string> keys{"uniform", "equal", "zipf", "sorted"};
  std::string format = "u64";  // or "gensort"
  std::string exchange = "alltoallv";
  int threads = 1;  // per rank
  int reps = 1;
  std::string dir;  // where a directory of this run's files is made; empty: $TMPDIR or /tmp
  bool json = false;
  bool progress = false;  // a status line on stderr when it is a terminal
  std::string plot;       // PNG path, or empty
};

// Errors: no MPI with the distributed sort built, the test bed did not start, a job failed
// (its output), a run's output did not verify, the plot could not be written.
Status RunDsortBench(const DsortBenchConfig& config, std::ostream& out);

}  // namespace tierflow::bench
