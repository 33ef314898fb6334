// SPDX-License-Identifier: Apache-2.0
#include "bench/bench_util.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "tierflow/size.h"

namespace tierflow::bench {

Result<std::size_t> ParseSize(std::string_view text) {
  Result<std::uint64_t> v = tierflow::ParseSize(text);
  if (!v.ok()) return v.status();
  return static_cast<std::size_t>(*v);
}

Result<std::vector<std::size_t>> ParseSizeList(std::string_view text) {
  std::vector<std::size_t> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    Result<std::size_t> s = ParseSize(text.substr(start, end - start));
    if (!s.ok()) return s.status();
    out.push_back(*s);
    start = end + 1;
  }
  return out;
}

std::string FormatSize(std::size_t b) { return tierflow::FormatSize(b); }

Summary Summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  std::size_t n = v.size();
  s.median = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return s;
}

double Percentile(const std::vector<double>& v, double q) {
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto i = static_cast<std::size_t>(pos);
  const double frac = pos - static_cast<double>(i);
  // std::lerp, unlike a*(1-t)+b*t, is exact where neighbours are equal and monotone in t, so
  // a lower quantile never exceeds a higher one by a rounding step.
  return i + 1 < v.size() ? std::lerp(v[i], v[i + 1], frac) : v[i];
}

std::vector<double> TimeRounds(int threads, int warmup, int reps,
                               const std::function<void(int)>& body,
                               const std::function<void()>& before_round) {
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> starts(threads), ends(threads);
  std::barrier start_line(threads + 1), finish_line(threads + 1);
  std::atomic<bool> quit{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (;;) {
        start_line.arrive_and_wait();
        if (quit.load()) return;
        starts[t] = Clock::now();
        body(t);
        ends[t] = Clock::now();
        finish_line.arrive_and_wait();
      }
    });
  }
  std::vector<double> seconds;
  for (int r = 0; r < warmup + reps; ++r) {
    if (before_round) before_round();
    start_line.arrive_and_wait();
    finish_line.arrive_and_wait();
    if (r < warmup) continue;
    auto first = *std::min_element(starts.begin(), starts.end());
    auto last = *std::max_element(ends.begin(), ends.end());
    seconds.push_back(std::chrono::duration<double>(last - first).count());
  }
  quit.store(true);
  start_line.arrive_and_wait();
  for (std::thread& t : pool) t.join();
  return seconds;
}

bool StderrIsTerminal() { return isatty(STDERR_FILENO) == 1; }

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

void PinThisThreadTo(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  pthread_setaffinity_np(pthread_self(), sizeof one, &one);
}

Progress::Progress(std::size_t total, bool enabled) : total_(total), enabled_(enabled) {}

void Progress::Step(std::string_view label) {
  ++done_;
  if (!enabled_) return;
  constexpr int kWidth = 30;
  int filled = total_ == 0 ? kWidth : static_cast<int>(kWidth * done_ / total_);
  std::fprintf(stderr, "\r[%-*s] %zu/%zu %-40.40s", kWidth, std::string(filled, '#').c_str(), done_,
               total_, std::string(label).c_str());
  std::fflush(stderr);
}

struct Ticker::State {
  std::string command;
  std::mutex mu;
  std::condition_variable cv;
  std::string what;
  std::function<std::string()> poll;
  bool stop = false;
  std::thread thread;

  void Draw(std::chrono::steady_clock::time_point start) {
    const auto secs =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start);
    std::string line = command + ": " + what;
    if (poll) {
      const std::string more = poll();
      if (!more.empty()) line += ", " + more;
    }
    line += fmt::format(" ({} s)", secs.count());
    std::fprintf(stderr, "\r%-79.79s", line.c_str());
    std::fflush(stderr);
  }
  void Loop() {
    const auto start = std::chrono::steady_clock::now();
    std::unique_lock lock(mu);
    while (!stop) {
      Draw(start);
      cv.wait_for(lock, std::chrono::milliseconds(200));
    }
    std::fprintf(stderr, "\r%79s\r", "");
    std::fflush(stderr);
  }
};

Ticker::Ticker(std::string command, bool enabled) {
  if (!enabled) return;
  state_ = std::make_unique<State>();
  state_->command = std::move(command);
  state_->what = "starting";
  state_->thread = std::thread([s = state_.get()] { s->Loop(); });
}

Ticker::~Ticker() {
  if (!state_) return;
  {
    std::lock_guard lock(state_->mu);
    state_->stop = true;
  }
  state_->cv.notify_all();
  state_->thread.join();
}

void Ticker::Set(std::string what) {
  if (!state_) return;
  std::lock_guard lock(state_->mu);
  state_->what = std::move(what);
}

void Ticker::Poll(std::function<std::string()> poll) {
  if (!state_) return;
  std::lock_guard lock(state_->mu);
  state_->poll = std::move(poll);
}

void Progress::Finish() {
  if (enabled_) std::fprintf(stderr, "\r%*s\r", 80, "");
}

std::string ExecutableDirectory() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return ".";
  std::string p(path, static_cast<std::size_t>(n));
  const std::size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

}  // namespace tierflow::bench
