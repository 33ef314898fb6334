// SPDX-License-Identifier: Apache-2.0
// What the stages of a sort share. Private to the application.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sort/format.h"
#include "sort/sort.h"
#include "tierflow/blueprint.h"
#include "tierflow/pipe_runtime.h"

namespace tierflow::extsort {

struct Context {
  Config config;
  Report report;
  std::unique_ptr<PipeRuntime> rt;
  Locator arena;  // all the memory the sort uses (besides the program itself)
  std::size_t record = 16;
  std::uint64_t records = 0;
  std::string partial;  // the output while it is written
  Locator input;        // opened once, for reading only
  Locator runs_file;    // written by FormRuns, read by Merge
  std::uint64_t run_bytes = 0, runs = 0;
  // Where run s lies in the runs file: [run_at[s], run_at[s] + run_size[s]). Empty: runs of
  // run_bytes each, back to back (the last one shorter). Every run starts at a whole block.
  std::vector<std::uint64_t> run_at, run_size;
  std::uint64_t RunBegin(std::size_t s) const { return run_at.empty() ? s * run_bytes : run_at[s]; }
  std::uint64_t RunEnd(std::size_t s) const {
    return run_at.empty() ? std::min((s + 1) * run_bytes, records * record)
                          : run_at[s] + run_size[s];
  }
  // Every kSampleEvery-th key of each sorted run (FormRuns), to split the merge among threads.
  static constexpr std::uint64_t kSampleEvery = 1024;
  std::vector<std::vector<Key>> samples;
  // The sort's blueprint as instantiated (Run): roles arena, input, runs, output and the
  // stages between them. Not planned: each stage declares its files and pipes itself (the
  // distributed sort, Config::declare_each).
  PlanInstance plan;
  bool planned = false;
  // Progress: the phase and its bytes.
  std::atomic<const char*> phase{"starting"};
  std::atomic<std::uint64_t> done{0}, total{0};

  // Starts a phase; the progress callback hears of it at once (then from its thread).
  void Phase(const char* name, std::uint64_t bytes) {
    done.store(0);
    total.store(bytes);
    phase.store(name);
    if (config.progress) config.progress(name, 0, bytes);
  }
};

// Options of the pipes between files and the arena: large chunks, a deep queue.
PipeOptions FilePipeOptions();

// The file of `role` when the sort is planned, else the file at `path` declared now.
Result<Locator> FileFor(Context& c, const char* role, const std::string& path, std::uint64_t length,
                        FileMode mode);
// The pipe of `stage` when the sort is planned, else a pipe connected now.
Result<Pipe> PipeFor(Context& c, const char* stage, const Locator& from, const Locator& to);
// The runtime and the sort's blueprint instantiated on it (the arena among its roles).
Status PlanSort(Context& c);

double MsSince(std::chrono::steady_clock::time_point t0);

// The length of the file at `path`, 0 when it cannot be read. Of a runs file: the temporary
// space the sort asked for (the file system adds its own metadata, an extent block or so).
std::uint64_t FileBytes(const std::string& path);

// The pipe runtime and the arena of config.memory_bytes (less the program's reserve); a
// calibration warning goes to the report.
Status MakeRuntime(Context& c);
// The pipe runtime alone (MakeRuntime's first half).
Status CreateRuntime(Context& c);

// What a scan of a file of records found (verify.cc).
struct Scan {
  std::uint64_t checksum = 0;  // the sum of per-record CRC-32
  std::uint64_t disorder = 0;  // records with a smaller key than the one before (if checked)
  bool any = false;            // first and last hold keys (order checked, a record seen)
  Key first, last;
};
// Reads the file at `path` through the arena; with `order`, also checks the keys' order.
Result<Scan> ScanFile(Context& c, const std::string& path, bool order);

// The stages (each says what it does in its file).
Status Generate(Context& c);
Status MeasureFloor(Context& c);
Status FormRuns(Context& c);
Status Merge(Context& c);
Status Verify(Context& c);

}  // namespace tierflow::extsort

namespace tierflow::extsort {
// Runs fn(begin, end) over [0, n) split among `threads` threads (the caller is one of them).
void ParallelFor(int threads, std::uint64_t n,
                 const std::function<void(std::uint64_t, std::uint64_t)>& fn);
}  // namespace tierflow::extsort
