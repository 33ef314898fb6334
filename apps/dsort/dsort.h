// SPDX-License-Identifier: Apache-2.0
// The distributed sort: every rank of a communicator holds a partition of the input on its own
// storage and ends with one partition of the output, together globally sorted (every key of
// rank i's output is at most every key of rank i+1's). A sample sort in two passes over
// storage: splitters from a sample of every rank's keys; runs read through pipes, sorted,
// cut by the splitters and exchanged over MPI while the next run is read; what a rank
// receives is sorted and written as runs, which it then merges as `tierflow sort` does
// (apps/sort). An application of the library: public API and the sort's stages.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sort/format.h"
#include "tierflow/status.h"

namespace tierflow::dsort {

// How runs travel between ranks: MPI_Ialltoallv, or MPI_Put into a window over every
// receiver's buffer between two fences (one-sided; libtierflow_rma takes these over when
// preloaded).
enum class Exchange { kAlltoallv, kPut };

struct Config {
  extsort::Format format = extsort::Format::kU64;
  // This rank's input; generated there first when generate_bytes > 0 (records
  // [rank x n, (rank + 1) x n) of the seed's sequence, n = generate_bytes / record).
  std::string input;
  std::uint64_t generate_bytes = 0;
  std::uint64_t seed = 42;
  extsort::Keys keys = extsort::Keys::kUniform;
  // This rank's temporary files (its runs; the generated input when `input` is empty). Ranks
  // on one host may share it: every name carries the rank and the process.
  std::string dir;
  // Where this rank's partition is kept as part-RANK; empty: it is written into `dir` and
  // removed once verified (a measurement).
  std::string output_dir;
  std::uint64_t memory_bytes = 256u << 20;  // per rank, everything it holds
  int threads = 2;
  bool verify = false;        // checksums across ranks, as valsort does
  bool measure_floor = true;  // the I/O floor and the exchange floor, before the sort
  bool overwrite = false;     // replace existing part-RANK files
  Exchange exchange = Exchange::kAlltoallv;
  // Afterwards, rank 0 sorts the same records (all ranks' generated input) alone with
  // `tierflow sort`'s stages in `dir`, for comparison (generated input only).
  bool compare_single = false;
  // Called on rank 0 with one line per stage and, while runs are exchanged, per round.
  std::function<void(const std::string&)> progress;
};

struct Report {
  int ranks = 0;
  std::uint64_t records = 0, bytes = 0;  // in total
  double sort_ms = 0;                    // sampling, exchange and merge, outputs durable
  double exchange_ms = 0;                // of sort_ms, the pass that reads, cuts and exchanges
  double merge_ms = 0;
  double io_floor_ms = 0;        // the slowest rank's two-pass I/O floor
  double exchange_floor_ms = 0;  // the same bytes through MPI_Alltoallv alone (slowest rank)
  double floor_ms = 0;           // the largest per-rank sum of the two
  bool verified = false;
  std::uint64_t input_checksum = 0, output_checksum = 0;  // over all ranks
  double max_partition_vs_mean = 0;
  std::vector<std::uint64_t> partition_records;  // per rank
  std::uint64_t temp_peak_bytes = 0;             // the most any rank held in temporary files
  std::uint64_t rss_peak_bytes = 0;              // the most any rank held resident
  std::uint64_t memory_bytes = 0;
  std::uint64_t rounds = 0, runs = 0;  // exchange rounds; runs (most of any rank)
  std::uint64_t run_bytes = 0;         // what one rank reads for a round (one run of input)
  double single_ms = 0;                // compare_single: rank 0 alone, the same records and memory
};

// Collective over `comm`. The report is complete on rank 0 (the others hold their own part).
// Errors (on every rank alike, naming the rank where it arose): bad configuration, memory too
// small (the least that works is named), an output that exists (without overwrite), I/O errors
// naming the file, a verification that fails. On any error every rank removes its temporary
// files and partial output; inputs are never modified; no part-RANK appears unless all are
// complete and (with verify) verified.
Result<Report> Run(const Config& config, MPI_Comm comm);

}  // namespace tierflow::dsort
