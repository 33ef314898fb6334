// SPDX-License-Identifier: Apache-2.0
// `tierflow bench rma`: libtierflow_rma against the MPI underneath, in the same run. For each
// MPI it was built for, the MPI program rma_latency runs through that MPI's launcher
// alternately without and with the library preloaded (--reps times each): 2 ranks for put and
// get latency per window kind (create, allocate) x synchronisation (pscw, fence, lock, flush) x
// size and put bandwidth under lock and GATS epochs, each kind and operation in a launch of its
// own; 2 ranks for the two-sided baselines (ping-pong latency, a window of sends); --gats-ranks
// ranks (more than the CPUs: oversubscribed) for the thesis' GATS benchmark per call, k = 1 ..
// gats_ranks-1 targets.
// Medians per row; ratio = with / without (below 1: the library is faster). Every row's
// received data are checked by the MPI program; a row whose data were wrong fails the command.
//
// With `apps` it runs the thesis' applications instead (rma_apps.cc): NAS FT (tierflow-ft-MPI)
// and the cellular automaton (tierflow-ca-MPI), every variant, on each rank count, without the
// library and with it in each coherence mode, alternated --reps times; medians of the time
// split per run, the targets of the comparison, and the verification of every run (FT: NPB's
// checksums; the automaton: the hash of a one-rank run). A run that computed a wrong result
// fails the command.
//
// `hosts` runs the microbenchmarks as one job across the hosts of a test bed (the window's
// other ranks take part in its collectives only); the two-sided baselines only with 2 ranks.
//
// `offload` adds runs with the library whose large puts and gets go to an engine: for the
// microbenchmarks more launches of the put rows (per row "offload": {mode: {us, gbps}}), for the
// applications runs of their own (offload: the mode; "off" in the others).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "tierflow/status.h"

namespace tierflow::bench {

struct RmaBenchConfig {
  int reps = 3;
  int iters = 1000;  // timed iterations per row, at every size
  std::string sizes = "1,8,64,512,4096,32768,262144,1048576,4194304";
  int gats_ranks = 4;             // 1 origin and gats_ranks - 1 targets
  std::vector<std::string> mpis;  // empty: every MPI the library was built for
  bool json = false;
  bool progress = false;  // a status line on stderr when it is a terminal
  std::string plot;       // PNG path, or empty

  std::vector<std::string> apps;  // "ft", "ca"; empty: the microbenchmarks
  std::string ft_class = "A";
  std::vector<int> ft_ranks{1, 2, 4};
  std::vector<int> ca_ranks{1, 2, 3, 4};
  int ca_rows = 2400, ca_cells = 8190, ca_iterations = 100;
  std::vector<std::string> coherence{"coherent"};  // modes of the runs with the library
  // TIERFLOW_RMA_OFFLOAD modes (src/rma/mpi/offload.h) of extra runs with the library
  // (coherent): empty, none. Every other run with the library has offload off.
  std::vector<std::string> offload;

  // Across this many hosts of a test bed on this machine (scripts/hosts.sh; root), with
  // ranks_per_host ranks on each; 0: one machine. Rows then say `hosts`, `ranks_per_host`,
  // `target` and `path`: "local" where origin and target share a host (ranks_per_host >= 2:
  // ranks 0 and 1 are on host0), "mpi" where they do not. With ranks_per_host >= 2 the rows are
  // measured to both: rank 1 and rank ranks_per_host (host1).
  int hosts = 0;
  int ranks_per_host = 1;
  // With hosts: the runs with the library keep their windows in a pool every host maps
  // (TIERFLOW_RMA_POOL, src/rma/mpi/pooled.h): a file in a new directory of this machine's
  // /dev/shm, removed afterwards. Rows whose target is on another host then say path "pool".
  bool pool = false;
};

Status RunRmaApps(const RmaBenchConfig& config, std::ostream& out);

// The MPIs this build has a library for ("openmpi", "mpich").
std::vector<std::string> RmaBenchMpis();

Status RunRmaBench(const RmaBenchConfig& config, std::ostream& out);

}  // namespace tierflow::bench
