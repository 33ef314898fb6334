// SPDX-License-Identifier: Apache-2.0
#include "bench/handoff_floor.h"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include "bench/bench_util.h"

namespace tierflow::bench {
namespace {

// The spin-wait hint (the library's own is private to it).
inline void Pause() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Spins until done(); after about a hundred microseconds it also yields now and then, so that
// threads that the system put on one CPU (a cpuset narrower than the node) still take turns.
template <typename Done>
void SpinUntil(Done&& done) {
  for (unsigned i = 1; !done(); ++i) {
    if (i >= 4096 && i % 64 == 0) {
      sched_yield();
    } else {
      Pause();
    }
  }
}

}  // namespace

HandOffFloor::HandOffFloor(char* dst, const char* src, std::size_t bytes, int parts,
                           const std::vector<int>& cpus)
    : dst_(dst),
      src_(src),
      part_bytes_(bytes / static_cast<std::size_t>(std::max(parts, 1))),
      bytes_(bytes),
      parts_(std::max(parts, 1)),
      slots_(new Slot[static_cast<std::size_t>(parts_)]) {
  for (int part = 0; part + 1 < parts_; ++part) {
    const int cpu = cpus.empty() ? -1 : cpus[static_cast<std::size_t>(part + 1) % cpus.size()];
    helpers_.emplace_back([this, part, cpu] {
      if (cpu >= 0) PinThisThreadTo(cpu);
      Help(part);
    });
  }
}

HandOffFloor::~HandOffFloor() {
  quit_.store(true, std::memory_order_relaxed);
  for (std::thread& t : helpers_) t.join();
}

void HandOffFloor::Help(int part) {
  const std::size_t offset = static_cast<std::size_t>(part) * part_bytes_;
  std::uint64_t seen = 0;
  for (;;) {
    std::uint64_t round = seen;
    SpinUntil([&] {
      round = round_.load(std::memory_order_acquire);
      return round != seen || quit_.load(std::memory_order_relaxed);
    });
    if (round == seen) return;  // quit
    seen = round;
    std::memcpy(dst_ + offset, src_ + offset, part_bytes_);
    slots_[static_cast<std::size_t>(part)].done.store(round, std::memory_order_release);
  }
}

void HandOffFloor::Copy() {
  const std::uint64_t round = round_.load(std::memory_order_relaxed) + 1;
  round_.store(round, std::memory_order_release);
  const std::size_t mine = static_cast<std::size_t>(parts_ - 1) * part_bytes_;
  std::memcpy(dst_ + mine, src_ + mine, bytes_ - mine);
  for (int part = 0; part + 1 < parts_; ++part) {
    const Slot& slot = slots_[static_cast<std::size_t>(part)];
    SpinUntil([&] { return slot.done.load(std::memory_order_acquire) == round; });
  }
}

}  // namespace tierflow::bench
