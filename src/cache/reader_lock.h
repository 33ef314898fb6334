// SPDX-License-Identifier: Apache-2.0
// A reader-writer lock whose readers do not share a cache line: each reader announces itself in
// one of kSlots padded counters (chosen by thread), so that cache hits on two cores do not
// bounce one lock word between them, as std::shared_mutex's reader count does. Writers (cache
// misses that insert, invalidation, eviction) are rarer: a writer takes the writer word (a
// futex mutex, which also tells readers to keep out) and waits until the slots readers have
// used are empty. Readers that see the word taken step back and wait for the writer; a writer
// cannot starve readers for long, since each writer section is short. Not recursive.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <thread>

#include "common/cpu_relax.h"
#include "common/futex.h"

namespace tierflow::cache {

// A small number per thread, handed out in order of first use: threads spread over per-thread
// slots without colliding until there are more threads than slots. (Hashing thread ids does
// not spread: they are addresses of equally aligned thread descriptors.)
// Plain constinit thread-local data: a thread_local with a dynamic initializer is read through
// a guard of first use, and a hit asks for its slot three times.
struct ThreadSlots {
  static inline std::atomic<std::size_t> next{0};
  static inline constinit thread_local std::size_t mine = SIZE_MAX;
};

inline std::size_t ThreadSlot() {
  std::size_t slot = ThreadSlots::mine;
  if (slot == SIZE_MAX) [[unlikely]] {
    slot = ThreadSlots::next.fetch_add(1, std::memory_order_relaxed) % (SIZE_MAX / 2);
    ThreadSlots::mine = slot;
  }
  return slot;
}

class ReaderLock {
 public:
  static constexpr std::size_t kSlots = 16;

  void lock_shared() {
    const std::size_t slot = Slot();
    const std::uint32_t bit = std::uint32_t{1} << slot;
    // Acquire: a bit set by another thread of this slot is then ordered before this reader's
    // count, so the writer that misses the count cannot miss the bit.
    if ((used_.load(std::memory_order_acquire) & bit) == 0) {
      used_.fetch_or(bit, std::memory_order_seq_cst);
    }
    std::atomic<std::uint32_t>& count = slots_[slot].readers;
    for (;;) {
      count.fetch_add(1, std::memory_order_seq_cst);
      if (writer_.load(std::memory_order_seq_cst) == kFree) return;
      count.fetch_sub(1, std::memory_order_release);
      while (writer_.load(std::memory_order_acquire) != kFree) std::this_thread::yield();
    }
  }
  void unlock_shared() { slots_[Slot()].readers.fetch_sub(1, std::memory_order_release); }

  // Writers queue on the writer word itself (a futex mutex: one compare-and-swap when free),
  // then wait for the readers of the slots ever used: a cache used by one thread reads one
  // slot line, not kSlots.
  void lock() {
    std::uint32_t free = kFree;
    if (!writer_.compare_exchange_strong(free, kHeld, std::memory_order_seq_cst)) LockSlow();
    std::uint32_t used = used_.load(std::memory_order_seq_cst);
    for (; used != 0; used &= used - 1) {
      const std::atomic<std::uint32_t>& count = slots_[std::countr_zero(used)].readers;
      for (unsigned spins = 0; count.load(std::memory_order_seq_cst) != 0; ++spins) {
        if (spins < 64) {
          CpuRelax();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  void unlock() {
    if (writer_.exchange(kFree, std::memory_order_release) == kHeldWaiters) {
      FutexWake(&writer_, 1);
    }
  }

 private:
  // The writer word: readers step back while it is not kFree.
  static constexpr std::uint32_t kFree = 0, kHeld = 1, kHeldWaiters = 2;

  static std::size_t Slot() { return ThreadSlot() % kSlots; }
  // Another writer holds the lock: sleep until it is free, then hold it marked as contended
  // (there may be more sleepers; the unlock wakes one).
  void LockSlow() {
    while (writer_.exchange(kHeldWaiters, std::memory_order_seq_cst) != kFree) {
      FutexWait(&writer_, kHeldWaiters);
    }
  }
  struct alignas(64) PaddedCount {
    std::atomic<std::uint32_t> readers{0};
  };
  PaddedCount slots_[kSlots];
  // Written by writers only; the slots readers have used (a bit each, never cleared) beside it:
  // both read by every reader and changed rarely.
  alignas(64) std::atomic<std::uint32_t> writer_{kFree};
  std::atomic<std::uint32_t> used_{0};
};

}  // namespace tierflow::cache
