// SPDX-License-Identifier: Apache-2.0
// Runs a protocol's agents as coroutines over a NoncoherentMemory, interleaved by a seeded
// scheduler: every memory access, write-back, invalidate and fence is a point where another
// agent may run, so one seed is one reproducible schedule. Each maintenance step names its
// hook ("producer writes back head"); a mutant run skips one hook everywhere it is reached,
// which is how the protocol tests show that every hook is needed.
#pragma once

#include <coroutine>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tierflow/noncoherent_memory.h"

namespace tierflow::sim {

class Task {
 public:
  struct promise_type {
    Task get_return_object() { return Task(Handle::from_promise(*this)); }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { std::terminate(); }
  };
  using Handle = std::coroutine_handle<promise_type>;
  explicit Task(Handle h) : h_(h) {}
  Task(Task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  Task& operator=(Task&&) = delete;
  ~Task() {
    if (h_) h_.destroy();
  }
  bool done() const { return h_.done(); }
  void resume() { h_.resume(); }

 private:
  Handle h_;
};

// One schedule: the memory, the agents' coroutines, the first failure.
class Run {
 public:
  Run(NoncoherentMemory& memory, std::uint64_t seed, std::string mutant)
      : memory_(memory), rng_(seed * 0x9e3779b97f4a7c15ull + 1), mutant_(std::move(mutant)) {}

  NoncoherentMemory& memory() { return memory_; }
  void Spawn(Task t) { tasks_.push_back(std::move(t)); }
  void Fail(std::string why) {
    if (failure_.empty()) failure_ = std::move(why);
  }
  const std::string& failure() const { return failure_; }
  // Records the hook and says whether this run leaves it out.
  bool Skip(const std::string& hook) {
    hooks_.insert(hook);
    return hook == mutant_;
  }
  const std::set<std::string>& hooks() const { return hooks_; }
  std::uint64_t steps() const { return steps_; }

  // Resumes a random unfinished agent until all finish, one fails, or max_steps pass.
  void Execute(std::uint64_t max_steps) {
    std::vector<std::size_t> live;
    while (failure_.empty()) {
      live.clear();
      for (std::size_t i = 0; i < tasks_.size(); ++i) {
        if (!tasks_[i].done()) live.push_back(i);
      }
      if (live.empty()) return;
      if (++steps_ > max_steps) {
        Fail("no progress in " + std::to_string(max_steps) +
             " steps: an agent waits for a value that never reaches it");
        return;
      }
      tasks_[live[std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(rng_)]].resume();
    }
  }

 private:
  NoncoherentMemory& memory_;
  std::mt19937_64 rng_;
  std::string mutant_;
  std::vector<Task> tasks_;
  std::set<std::string> hooks_;
  std::string failure_;
  std::uint64_t steps_ = 0;
};

// An awaitable that yields to the scheduler and does its work when resumed.
template <typename F>
struct Step {
  F work;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<>) const noexcept {}
  auto await_resume() { return work(); }
};
template <typename F>
Step<F> MakeStep(F f) {
  return Step<F>{std::move(f)};
}

// A protocol's view of one agent: CPU `cpu`, or a device (DMA) when cpu < 0.
class Agent {
 public:
  Agent(Run& run, int cpu) : run_(&run), cpu_(cpu) {}

  auto Load(std::size_t offset) {
    return MakeStep([this, offset] {
      auto r = cpu_ < 0 ? run_->memory().DeviceLoad(offset) : run_->memory().Load(cpu_, offset);
      if (!r.ok()) run_->Fail(r.status().message());
      return r.ok() ? r.value() : 0;
    });
  }
  auto Store(std::size_t offset, std::uint64_t v) {
    return MakeStep([this, offset, v] {
      Check(cpu_ < 0 ? run_->memory().DeviceStore(offset, v)
                     : run_->memory().Store(cpu_, offset, v));
    });
  }
  auto Read(std::size_t offset, std::span<std::byte> out) {
    return MakeStep([this, offset, out] {
      Check(cpu_ < 0 ? run_->memory().DeviceRead(offset, out)
                     : run_->memory().Read(cpu_, offset, out));
    });
  }
  auto Write(std::size_t offset, std::span<const std::byte> in) {
    return MakeStep([this, offset, in] {
      Check(cpu_ < 0 ? run_->memory().DeviceWrite(offset, in)
                     : run_->memory().Write(cpu_, offset, in));
    });
  }
  auto WriteBack(std::size_t offset, std::size_t size, std::string hook) {
    return MakeStep([this, offset, size, hook] {
      if (!run_->Skip(hook)) Check(run_->memory().WriteBack(cpu_, offset, size));
    });
  }
  auto Invalidate(std::size_t offset, std::size_t size, std::string hook) {
    return MakeStep([this, offset, size, hook] {
      if (!run_->Skip(hook)) Check(run_->memory().Invalidate(cpu_, offset, size));
    });
  }
  auto Fence(std::string hook) {
    return MakeStep([this, hook] {
      if (!run_->Skip(hook)) Check(run_->memory().Fence(cpu_));
    });
  }
  // Ends the schedule with `what` (an expectation failed).
  void Fail(const std::string& what) { run_->Fail(what); }

 private:
  void Check(const Status& s) {
    if (!s.ok()) run_->Fail(s.message());
  }
  Run* run_;
  int cpu_;
};

}  // namespace tierflow::sim
