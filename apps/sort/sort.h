// SPDX-License-Identifier: Apache-2.0
// `tierflow sort`: an external merge sort built on data pipes (the worked example of Vogel et
// al.). Runs are read through a pipe, radix-sorted in memory, written through a pipe; then
// merged with read-ahead and write-behind through pipes. Everything it holds stays within
// Config::memory_bytes (O_DIRECT keeps the page cache out); temporary space is one file of the
// input's size. An application of the library: public API only.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sort/format.h"
#include "tierflow/blueprint.h"
#include "tierflow/status.h"

namespace tierflow::extsort {

struct Config {
  Format format = Format::kU64;
  std::string input;  // the file to sort; generated there first when generate_bytes > 0
  std::uint64_t generate_bytes = 0;
  std::uint64_t seed = 42;
  Keys keys = Keys::kUniform;      // how generated keys are distributed
  std::uint64_t first_record = 0;  // the generated input's records are [first, first + count)
                                   // of the seed's sequence (a rank's share of a larger input)
  std::string output;  // written as output + ".tierflow-partial-<pid>", renamed when verified
  std::string runs;    // the runs file (removed on every exit path)
  std::uint64_t memory_bytes = 256u << 20;
  int threads = 2;
  bool verify = false;  // checksum input and output (sum of per-record CRC-32)
  bool measure_floor = true;
  bool overwrite = false;  // replace an existing output
  // Declare the files and pipes phase by phase, as the distributed sort does, instead of
  // instantiating the sort's blueprint (tierflow sort --compare-declared times both).
  bool declare_each = false;
  // Called with (phase, done, total) when a phase starts (on the sorting thread) and then about
  // ten times a second (from a helper thread).
  std::function<void(const std::string&, std::uint64_t, std::uint64_t)> progress;
};

struct PhaseTime {
  std::string name;
  double ms = 0;
};

struct Report {
  std::uint64_t records = 0, bytes = 0;
  double generate_ms = 0;
  double sort_ms = 0;   // runs + merge, output durable
  double floor_ms = 0;  // the two-pass I/O floor measured before the sort
  std::vector<PhaseTime> floor_phases, sort_phases;
  double verify_ms = 0;
  bool verified = false;  // the checksums ran and agreed (order and count are always checked)
  std::uint64_t input_checksum = 0, output_checksum = 0;
  std::uint64_t runs = 0;
  std::uint64_t run_bytes = 0;
  std::uint64_t temp_peak_bytes = 0;  // bytes of temporary files at their largest (the runs)
  std::uint64_t rss_peak_bytes = 0;   // the process's peak resident memory
  std::uint64_t memory_bytes = 0;
  // Leftovers of killed runs that were removed (their own markers proved them theirs).
  std::vector<std::string> stale_removed;
  std::vector<std::string> warnings;  // what the user should know (a calibration cache ignored)
  BlueprintPlan plan;  // the sort's blueprint as instantiated (empty with declare_each)
};

// Errors: bad configuration (memory too small for the threads and format, an input that is not
// a whole number of records), an output that exists (without overwrite), I/O errors naming the
// file. On any error the runs and the partial output are removed and the input is untouched.
Result<Report> Run(const Config& config);

}  // namespace tierflow::extsort
