// SPDX-License-Identifier: Apache-2.0
// Shared pieces of the benchmarks: size parsing, statistics, the synchronised
// multi-thread timing harness of thesis §3.1, and a terminal progress bar.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tierflow/status.h"

namespace tierflow::bench {

// "4096", "4KiB", "1MiB", "1GiB", "500MB": tierflow::ParseSize's units (KiB = 1024, kB = 1000).
Result<std::size_t> ParseSize(std::string_view text);
Result<std::vector<std::size_t>> ParseSizeList(std::string_view text);
std::string FormatSize(std::size_t bytes);  // "4KiB", "1MiB", "1536B"

// The directory of the running executable (/proc/self/exe), or "." if it cannot be read:
// where the CLI finds what it ships beside it (helper scripts, MPI programs).
std::string ExecutableDirectory();

struct Summary {
  double min = 0, median = 0, max = 0;
};
Summary Summarize(std::vector<double> values);
// The q-quantile (0..1) of `sorted` (ascending, not empty), interpolated between neighbours.
double Percentile(const std::vector<double>& sorted, double q);

// Runs `body(thread_index)` on `threads` threads released together by a barrier, `reps` times
// after `warmup` untimed rounds. Returns the seconds of each timed round: from the earliest
// start to the latest end (the slowest participant decides). `before_round` runs on the
// calling thread before each round (cache flushing).
std::vector<double> TimeRounds(int threads, int warmup, int reps,
                               const std::function<void(int)>& body,
                               const std::function<void()>& before_round);

class Progress {
 public:
  Progress(std::size_t total, bool enabled);
  void Step(std::string_view label);
  void Finish();

 private:
  std::size_t total_, done_ = 0;
  bool enabled_;
};

bool StderrIsTerminal();

// A status line on stderr for a command that runs longer than a few seconds: redrawn every
// 200 ms while the Ticker lives, "tierflow qdp: prefetch, iteration 3 of 6 (41 s)", and erased
// when it goes. Silent unless `enabled` (callers pass: asked for, and stderr is a terminal).
// Set and the poll run from any thread.
class Ticker {
 public:
  Ticker(std::string command, bool enabled);
  ~Ticker();
  Ticker(const Ticker&) = delete;
  Ticker& operator=(const Ticker&) = delete;
  // What runs now.
  void Set(std::string what);
  // Called at each redraw for text to append (e.g. bytes moved so far); empty: none.
  void Poll(std::function<std::string()> poll);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The CPUs the calling thread may run on (its affinity mask).
std::vector<int> AllowedCpus();
// Pins the calling thread to one CPU; best effort (a cgroup may refuse, and then the thread
// stays where it may run).
void PinThisThreadTo(int cpu);

}  // namespace tierflow::bench
