// SPDX-License-Identifier: Apache-2.0
// What the stages of a distributed sort share on one rank. Private to the application.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dsort/dsort.h"
#include "dsort/splitters.h"
#include "sort/context.h"

namespace tierflow::dsort {

struct Job {
  Config config;
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, ranks = 1;
  extsort::Context c;  // this rank's sort: arena, pipes, input, runs file, runs, samples
  std::uint64_t input_records = 0;  // this rank's input
  std::uint64_t total_bytes = 0;    // every rank's input
  std::vector<Splitter> splitters;
  std::string final_output;  // part-RANK
  double io_floor_ms = 0, exchange_floor_ms = 0, exchange_ms = 0, merge_ms = 0;
  std::uint64_t rounds = 0;
  Report report;

  // Says `line` through the progress callback (rank 0 only).
  void Say(const std::string& line) const;
};

// Every rank's `local` status agreed on: OK when all are; otherwise the first failing rank's
// error on every rank (the others' naming that rank). Collective.
Status Agree(const Job& j, const Status& local);

// The stages (each says what it does in its file).
Status SampleSplitters(Job& j);
Status MeasureExchangeFloor(Job& j);
Status ExchangeRuns(Job& j);

// Bytes of each of the exchange's six buffers (two runs read, a run grouped by rank, two for
// what steps receive, the sort's scratch), of a run, and the records a step sends one rank,
// for an arena of `arena` bytes; all 0 when too small.
struct ExchangePlan {
  std::uint64_t buffer_bytes = 0, run_bytes = 0, step_records = 0;
};
ExchangePlan PlanExchange(extsort::Format f, std::uint64_t arena, int ranks);

}  // namespace tierflow::dsort
