// SPDX-License-Identifier: Apache-2.0
#include <atomic>
#include <bit>
#include <cstdint>
#include <utility>

#include "tierflow/engine_module.h"

namespace tierflow {
namespace {

// Shares [0, kOwnable) are owned by one thread at a time; the rest only ever shared (with
// locked instructions), by threads beyond kOwnable at a time and by threads that are ending.
constexpr unsigned kOwnable = EngineCounters::kShares - EngineCounters::kSharedShares;
static_assert(kOwnable <= 32, "one bit per ownable share in a 32-bit word");

// Bit i is set while share i belongs to a live thread (of any engine: the same index in
// every engine's counters).
std::atomic<std::uint32_t> g_taken{0};
// Threads that own no share take the shared ones in turn.
std::atomic<unsigned> g_next_shared{0};

unsigned SharedShare() {
  return kOwnable +
         g_next_shared.fetch_add(1, std::memory_order_relaxed) % EngineCounters::kSharedShares;
}

// A free share for the thread to own, or (all taken) one to share; {index, owned}.
std::pair<unsigned, bool> FreeShare() {
  constexpr std::uint32_t kAll =
      kOwnable == 32 ? ~std::uint32_t{0} : (std::uint32_t{1} << kOwnable) - 1;
  std::uint32_t cur = g_taken.load(std::memory_order_relaxed);
  while ((cur & kAll) != kAll) {
    const auto i = static_cast<unsigned>(std::countr_one(cur));
    // Acquire: the last owner's updates (released with its bit) come before ours.
    if (g_taken.compare_exchange_weak(cur, cur | std::uint32_t{1} << i, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
      return {i, true};
    }
  }
  return {SharedShare(), false};
}

}  // namespace

// Gives the thread's share back when the thread ends; a counter the thread updates after
// that (in its exit) lands in a shared share.
struct EngineCounters::Owner {
  unsigned index = kNoShare;
  ~Owner() {
    if (index == kNoShare) return;
    t_share_ = SharedShare();
    g_taken.fetch_and(~(std::uint32_t{1} << index), std::memory_order_release);
  }
};
thread_local EngineCounters::Owner EngineCounters::t_owner_;

unsigned EngineCounters::TakeShare() {
  const auto [index, owned] = FreeShare();
  if (owned) t_owner_.index = index;
  t_share_ = index | (owned ? kShareOwned : 0);
  return t_share_;
}

std::uint64_t EngineCounters::Total(Counter c) const {
  std::uint64_t sum = 0;
  for (const Share& s : shares_) sum += s.v[c].load(std::memory_order_acquire);
  // A count raised on one thread and lowered on another (kInFlight) sums below zero when this
  // read missed the raise but saw the lowering: it reads 0 then, not 2^64 - 1.
  return static_cast<std::int64_t>(sum) < 0 ? 0 : sum;
}

void EngineCounters::Clear(Counter c) {
  for (Share& s : shares_) s.v[c].store(0, std::memory_order_relaxed);
}

}  // namespace tierflow
